//! TLS for tests: a private test CA that issues server certificates ([`TestCa`], with rcgen), a TLS client
//! request helper ([`tls_request`], with rustls), and [`TlsFront`], a TLS-terminating forwarder that puts
//! HTTPS in front of any plain server (a `FakeProvider`), so an upstream can be reached over HTTPS while
//! the fake keeps counting every call.

use super::http::Response;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A private certificate authority for one test.
pub struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate issued by a [`TestCa`], with its key, as PEM text.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    /// DER of the leaf certificate, to recognise it on the wire.
    pub cert_der: Vec<u8>,
}

impl Issued {
    /// Writes `NAME.crt` and `NAME.key` in `dir`; returns their paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }
}

impl TestCa {
    pub fn new(common_name: &str) -> TestCa {
        let key = KeyPair::generate().expect("generate CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("self-sign CA");
        TestCa { cert, key }
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes the CA certificate as `NAME` in `dir` (for `SSL_CERT_FILE`); returns the path.
    pub fn write_cert(&self, dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, self.cert_pem()).unwrap();
        p
    }

    /// A server certificate for these names (DNS names or IP literals).
    pub fn issue(&self, names: &[&str]) -> Issued {
        let key = KeyPair::generate().expect("generate server key");
        let mut params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("issue server cert");
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
        }
    }

    /// A client certificate (mTLS) for `name`.
    pub fn issue_client(&self, name: &str) -> Issued {
        let key = KeyPair::generate().expect("generate client key");
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("issue client cert");
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
        }
    }

    /// A rustls client config that trusts exactly this CA.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        client_config_trusting(&self.cert_pem())
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client config trusting the CA certificates in `ca_pem`.
pub fn client_config_trusting(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("CA PEM")).expect("add CA");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A rustls server config for a certificate and key in PEM.
pub fn server_config(issued: &Issued) -> Arc<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(issued.cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    Arc::new(config)
}

/// What a TLS exchange brought back: the HTTP response, and the server's leaf certificate (DER).
pub struct TlsExchange {
    pub response: Response,
    pub peer_cert: Vec<u8>,
    pub alpn: Option<Vec<u8>>,
}

/// Connects to `addr` over TLS (SNI `server_name`), sends `request` (its own bytes: add
/// `Connection: close` or not, one response is read either way) and reads one response.
pub fn tls_request(
    addr: SocketAddr,
    server_name: &str,
    config: Arc<rustls::ClientConfig>,
    request: &[u8],
) -> Result<TlsExchange, String> {
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| format!("connect: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from(server_name.to_string()).map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(request)
        .map_err(|e| format!("TLS write (handshake): {e}"))?;
    tls.flush().map_err(|e| format!("TLS flush: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let response = loop {
        if let Some(r) = parse_response(&buf)? {
            break r;
        }
        match tls.read(&mut chunk) {
            Ok(0) => {
                return Err(format!(
                    "EOF before a full response: {:?}",
                    String::from_utf8_lossy(&buf)
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("TLS read: {e} (got {:?})", String::from_utf8_lossy(&buf))),
        }
    };
    let peer_cert = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default();
    let alpn = tls.conn.alpn_protocol().map(|p| p.to_vec());
    Ok(TlsExchange {
        response,
        peer_cert,
        alpn,
    })
}

/// A complete `Content-Length` (or bodiless) response at the start of `buf`, if one is there yet.
fn parse_response(buf: &[u8]) -> Result<Option<Response>, String> {
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut hs);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("bad response head: {e}: {:?}", String::from_utf8_lossy(buf))),
    };
    let headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
        .collect();
    let status = resp.code.unwrap_or(0);
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.trim().parse::<usize>().unwrap_or(0))
        .unwrap_or(0);
    if buf.len() < head_len + len {
        return Ok(None);
    }
    Ok(Some(Response {
        version: resp.version.unwrap_or(1),
        status,
        reason: resp.reason.unwrap_or("").to_string(),
        headers,
        body: buf[head_len..head_len + len].to_vec(),
        chunked: false,
    }))
}

/// HTTPS in front of a plain server: accepts TLS connections and pumps the decrypted bytes to `backend`
/// over a fresh plain connection per client connection, and the answers back.
pub struct TlsFront {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<thread::JoinHandle<()>>,
}

impl TlsFront {
    pub fn start(backend: SocketAddr, issued: &Issued) -> TlsFront {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let config = server_config(issued);
        let stop2 = stop.clone();
        let accept = thread::Builder::new()
            .name(format!("tls-front-{}", addr.port()))
            .spawn(move || {
                for s in listener.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(s) = s else { continue };
                    let (config, stop) = (config.clone(), stop2.clone());
                    let _ = thread::Builder::new()
                        .name("tls-front-conn".into())
                        .spawn(move || pump(s, backend, config, &stop));
                }
            })
            .unwrap();
        TlsFront {
            addr,
            stop,
            accept: Some(accept),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Moves bytes both ways between one TLS client and a plain backend connection until either side closes.
fn pump(client: TcpStream, backend: SocketAddr, config: Arc<rustls::ServerConfig>, stop: &AtomicBool) {
    let _ = client.set_nodelay(true);
    let _ = client.set_read_timeout(Some(Duration::from_millis(2)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, client);
    let Ok(mut up) = TcpStream::connect_timeout(&backend, Duration::from_secs(2)) else {
        return;
    };
    let _ = up.set_nodelay(true);
    let _ = up.set_read_timeout(Some(Duration::from_millis(2)));
    let mut buf = vec![0u8; 32 * 1024];
    let started = Instant::now();
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match tls.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if up.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if would_block(&e) => {}
            Err(_) => return,
        }
        match up.read(&mut buf) {
            Ok(0) => {
                tls.conn.send_close_notify();
                let _ = tls.flush();
                return;
            }
            Ok(n) => {
                if tls.write_all(&buf[..n]).and_then(|_| tls.flush()).is_err() {
                    return;
                }
            }
            Err(e) if would_block(&e) => {}
            Err(_) => return,
        }
        // A handshake that never completes is not worth a thread forever.
        if tls.conn.is_handshaking() && started.elapsed() > Duration::from_secs(10) {
            return;
        }
    }
}
