//! Upstream WebSocket connections: dial (TCP, TLS for wss), the HTTP upgrade, then JSON-RPC frames.
//! The subscription logic that drives them lives in `core::subs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_tungstenite::tungstenite::client::IntoClientRequest;
use async_tungstenite::tungstenite::Message;
use async_tungstenite::WebSocketStream;

use super::conn::Stream;
use super::dial::{dial, tls_for};
use super::TransportError;
use prism_config::Endpoint;
use prism_runtime::timeout_at;

pub type UpstreamSocket = WebSocketStream<Stream>;

/// How every upstream WebSocket link (EVM subscriptions, Solana's delegation feed and client sessions)
/// waits between reconnects: from 100 ms, doubling per failed attempt up to 5 s, back to 100 ms once a
/// connection is up.
#[derive(Debug, Clone, Copy)]
pub struct Reconnect {
    wait: Duration,
}

impl Reconnect {
    pub const MIN: Duration = Duration::from_millis(100);
    pub const MAX: Duration = Duration::from_secs(5);

    /// The wait after a failed attempt; the next one waits twice as long (up to [`Self::MAX`]).
    pub fn after_failure(&mut self) -> Duration {
        let wait = self.wait;
        self.wait = (self.wait * 2).min(Self::MAX);
        wait
    }

    /// A connection is up: the next loss waits [`Self::MIN`] again.
    pub fn connected(&mut self) {
        self.wait = Self::MIN;
    }

    /// The wait before reconnecting after a link that was up is lost.
    pub fn current(&self) -> Duration {
        self.wait
    }
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect { wait: Self::MIN }
    }
}

/// Largest frame accepted from an upstream (a block with full transactions can be large).
const MAX_MESSAGE: usize = 64 << 20;

/// Opens a WebSocket to `endpoint` before `deadline`.
/// `headers` are the provider's own (credentials), sent with the handshake.
pub async fn connect_ws(
    endpoint: &Endpoint,
    addrs: &[SocketAddr],
    tls: Option<Arc<rustls::ClientConfig>>,
    headers: &super::ExtraHeaders,
    deadline: Instant,
) -> Result<UpstreamSocket, TransportError> {
    let tls = tls_for(endpoint, tls)?;
    let stream = dial(addrs, 0, tls.as_ref(), deadline).await?;
    let scheme = if endpoint.scheme.is_tls() { "wss" } else { "ws" };
    let url = format!("{scheme}://{}{}", endpoint.host_header, endpoint.path);
    let mut request = url
        .into_client_request()
        .map_err(|e| TransportError::Connect(format!("bad WebSocket URL: {e}")))?;
    for (name, value) in headers.pairs() {
        // Checked when the config was read; a pair the HTTP types refuse would fail the handshake anyway.
        if let (Ok(n), Ok(v)) = (
            tungstenite::http::HeaderName::from_bytes(name.as_bytes()),
            tungstenite::http::HeaderValue::from_str(value),
        ) {
            request.headers_mut().insert(n, v);
        }
    }
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
        // The status only: a refusal's body or headers may echo what was sent.
        Ok(Err(tungstenite::Error::Http(resp))) => Err(TransportError::Connect(format!(
            "WebSocket handshake answered HTTP {}",
            resp.status().as_u16()
        ))),
        Ok(Err(e)) => Err(TransportError::Connect(format!("WebSocket handshake failed: {e}"))),
        Err(_) => Err(TransportError::Timeout { sent: false }),
    }
}

/// Runs an upstream socket until either side ends: frames pushed to `out` are sent, and every text or binary
/// frame received is handed to `on_text`, which returns false to stop reading. `out` is closed at the end,
/// so pushes after that fail instead of queueing for a dead socket.
///
/// Liveness: when nothing has arrived for `ping_every`, a ping is sent; when nothing (not even the pong)
/// arrives for another `ping_every`, the socket is taken for dead and the pump ends, exactly as if the peer
/// had closed it. A frozen peer or a half-open TCP connection looks idle, not closed, so without this a
/// subscription would stay registered and silent. `None` turns it off.
pub async fn pump(
    socket: UpstreamSocket,
    out: std::rc::Rc<prism_runtime::queue::LocalQueue<Message>>,
    ping_every: Option<Duration>,
    mut on_text: impl FnMut(&[u8]) -> bool,
) -> PumpEnd {
    use futures_util::{SinkExt, StreamExt};
    let (mut sink, mut stream) = socket.split();
    let writer_out = out.clone();
    let writer = async move {
        while let Some(msg) = writer_out.pop().await {
            if sink.send(msg).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
        PumpEnd::Closed
    };
    let reader = async {
        let mut ping_outstanding = false;
        loop {
            let frame = match ping_every {
                None => stream.next().await,
                Some(every) => match timeout_at(Instant::now() + every, stream.next()).await {
                    Ok(frame) => frame,
                    Err(_) if ping_outstanding => return PumpEnd::Unresponsive,
                    Err(_) => {
                        ping_outstanding = true;
                        if out.push(Message::Ping(Vec::new())).is_err() {
                            return PumpEnd::Closed;
                        }
                        continue;
                    }
                },
            };
            ping_outstanding = false;
            let keep_going = match frame {
                Some(Ok(Message::Text(t))) => on_text(t.as_bytes()),
                // What reaches clients is sent as text frames, which must be UTF-8: a binary frame that is
                // not is no JSON-RPC message.
                Some(Ok(Message::Binary(b))) if std::str::from_utf8(&b).is_ok() => on_text(&b),
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => false,
                Some(Ok(_)) => true,
            };
            if !keep_going {
                return PumpEnd::Closed;
            }
        }
    };
    let end = futures_lite::future::or(reader, writer).await;
    out.close();
    end
}

/// How a pumped socket ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PumpEnd {
    /// Either side closed it, it failed, or the reader asked to stop.
    Closed,
    /// Nothing arrived for two ping intervals (a ping went unanswered): frozen peer or half-open TCP.
    Unresponsive,
}
