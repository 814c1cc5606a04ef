//! Upstream WebSocket connections: dial (TCP, TLS for wss), the HTTP upgrade, then JSON-RPC frames.
//! The subscription logic that drives them lives in `core::subs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use async_tungstenite::tungstenite::client::IntoClientRequest;
use async_tungstenite::WebSocketStream;

use super::conn::Stream;
use super::dial::{dial, tls_for};
use super::TransportError;
use crate::config::Endpoint;
use crate::runtime::timeout_at;

pub type UpstreamSocket = WebSocketStream<Stream>;

/// Largest frame accepted from an upstream (a block with full transactions can be large).
const MAX_MESSAGE: usize = 64 << 20;

/// Opens a WebSocket to `endpoint` before `deadline`.
pub async fn connect_ws(
    endpoint: &Endpoint,
    addrs: &[SocketAddr],
    tls: Option<Arc<rustls::ClientConfig>>,
    deadline: Instant,
) -> Result<UpstreamSocket, TransportError> {
    let tls = tls_for(endpoint, tls)?;
    let stream = dial(addrs, 0, tls.as_ref(), deadline).await?;
    let scheme = if endpoint.scheme.is_tls() { "wss" } else { "ws" };
    let url = format!("{scheme}://{}{}", endpoint.host_header, endpoint.path);
    let request = url
        .into_client_request()
        .map_err(|e| TransportError::Connect(format!("bad WebSocket URL: {e}")))?;
    let config = async_tungstenite::tungstenite::protocol::WebSocketConfig {
        max_message_size: Some(MAX_MESSAGE),
        max_frame_size: Some(MAX_MESSAGE),
        ..Default::default()
    };
    match timeout_at(
        deadline,
        async_tungstenite::client_async_with_config(request, stream, Some(config)),
    )
    .await
    {
        Ok(Ok((socket, _response))) => Ok(socket),
        Ok(Err(e)) => Err(TransportError::Connect(format!("WebSocket handshake failed: {e}"))),
        Err(_) => Err(TransportError::Timeout { sent: false }),
    }
}
