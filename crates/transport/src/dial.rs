//! Opening a connection to an upstream: TCP to one of its resolved addresses, then TLS when the endpoint
//! asks for it, all before a deadline. Shared by the HTTP pools and the WebSocket links.

use std::net::SocketAddr;
use std::time::Instant;

use futures_rustls::TlsConnector;
use rustls::pki_types::ServerName;

use super::conn::Stream;
use super::TransportError;
use prism_runtime::net::TcpStream;
use prism_runtime::timeout_at;

/// Connects to the first address (starting at `start`, rotating) that accepts, then does TLS if `tls` is set.
pub async fn dial(
    addrs: &[SocketAddr],
    start: usize,
    tls: Option<&(TlsConnector, ServerName<'static>)>,
    deadline: Instant,
) -> Result<Stream, TransportError> {
    if addrs.is_empty() {
        return Err(TransportError::Unresolved);
    }
    let mut last = TransportError::Connect("no address".into());
    for i in 0..addrs.len() {
        let addr = addrs[(start + i) % addrs.len()];
        let tcp = match timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => {
                let e = std::io::Error::from(e);
                last = if e.kind() == std::io::ErrorKind::ConnectionRefused {
                    TransportError::Refused
                } else {
                    TransportError::Connect(e.to_string())
                };
                continue;
            }
            Err(_) => return Err(TransportError::Timeout { sent: false }),
        };
        let _ = tcp.set_nodelay(true);
        return match tls {
            None => Ok(Stream::Plain(tcp)),
            Some((connector, name)) => match timeout_at(deadline, connector.connect(name.clone(), tcp)).await {
                Ok(Ok(stream)) => Ok(Stream::Tls(Box::new(stream))),
                Ok(Err(e)) => Err(TransportError::Tls(e.to_string())),
                Err(_) => Err(TransportError::Timeout { sent: false }),
            },
        };
    }
    Err(last)
}

/// The TLS connector and server name for an endpoint, when it uses TLS.
pub fn tls_for(
    endpoint: &prism_config::Endpoint,
    config: Option<std::sync::Arc<rustls::ClientConfig>>,
) -> Result<Option<(TlsConnector, ServerName<'static>)>, TransportError> {
    if !endpoint.scheme.is_tls() {
        return Ok(None);
    }
    let config = config.ok_or_else(|| TransportError::Tls("no TLS configuration".into()))?;
    let name = ServerName::try_from(endpoint.host.clone()).map_err(|e| TransportError::Tls(e.to_string()))?;
    Ok(Some((TlsConnector::from(config), name)))
}
