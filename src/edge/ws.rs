//! Client WebSockets on the RPC path: the same keys, allowlists and limits as HTTP, any JSON-RPC call,
//! plus `eth_subscribe` / `eth_unsubscribe` served by the shard's subscription hub. Each client has a bounded
//! send queue: one that cannot keep up (its queue full, or one write waiting `limits.client_timeout_ms`) is
//! closed with 1008 "client too slow" instead of growing memory. Idle clients are pinged, and dropped when
//! they do not answer. The close frame follows what was already sent, if the socket takes it within
//! `limits.close_timeout_ms`; a client that stopped reading altogether is reset instead, so its socket does
//! not wait for it.

use std::cell::RefCell;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use async_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use async_tungstenite::tungstenite::Message;
use async_tungstenite::WebSocketStream;
use futures_lite::{AsyncRead, AsyncWrite};
use futures_util::{SinkExt, StreamExt};

use super::envelope::Envelope;
use super::keys::KeyEntry;
use super::network::Network;
use super::reply::{write_answer, write_error};
use super::rpc::{handle_body, write_throttled, BodyReply, RATE_LIMITED, UNAUTHORIZED};
use super::shard::Shard;
use crate::core::subs::{Outbox, SubHub, SubscribeError};
use crate::core::Caller;
use crate::jsonscan::{nth_element, plain_str};
use crate::runtime::queue::LocalQueue;
use crate::runtime::timeout_at;

/// The `Sec-WebSocket-Accept` value for a client's key.
pub fn accept_key(key: &[u8]) -> String {
    async_tungstenite::tungstenite::handshake::derive_accept_key(key)
}

/// Serves one upgraded connection until either side closes.
pub async fn serve_client<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    fd: RawFd,
    shard: &Shard,
    network: &Network,
    caller: Caller,
    key: Option<&KeyEntry>,
) {
    let route = network.route.clone();
    let gen = shard.gen();
    let limits = &gen.limits;
    let config = WebSocketConfig {
        max_message_size: Some(limits.max_body_bytes),
        max_frame_size: Some(limits.max_body_bytes),
        ..Default::default()
    };
    let socket = WebSocketStream::from_raw_socket(stream, Role::Server, Some(config)).await;
    let metrics = route.recorder.metrics();
    metrics.ws_clients(1);
    let (mut sink, mut frames) = socket.split();
    let out: Outbox = LocalQueue::new(limits.ws_max_queue);
    let subs: RefCell<Vec<String>> = RefCell::new(Vec::new());
    // This connection's subscriptions as last counted into the shard's total.
    let counted = std::cell::Cell::new(0usize);
    let solana = network
        .magic()
        .map(|sol| crate::solana::ws::Session::new(sol.clone(), out.clone(), caller));

    // A write that cannot finish within the slow-client timeout means the client stopped reading.
    let write_timeout = Duration::from_millis(limits.client_timeout_ms);
    let writer = async {
        let end = loop {
            let Some(msg) = out.pop().await else { break End::Done };
            if out.overflowed() {
                break End::QueueFull; // what is still queued will not be read in time either
            }
            // A write waiting for the client ends early when the queue overflows meanwhile.
            let sent = futures_lite::future::or(
                async { Some(timeout_at(Instant::now() + write_timeout, sink.send(msg)).await) },
                async {
                    overflow(&out).await;
                    None
                },
            )
            .await;
            match sent {
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(_))) => break End::Broken,
                Some(Err(_)) => break End::Stalled,
                None => break End::QueueFull,
            }
        };
        // The reader stops too (it may be waiting for a frame from a client that went quiet).
        out.close();
        end
    };
    let reader = async {
        let idle = Duration::from_millis(limits.idle_timeout_ms);
        let mut pinged = false;
        loop {
            let next = futures_lite::future::or(
                async { Some(timeout_at(Instant::now() + idle, frames.next()).await) },
                async {
                    futures_lite::future::or(shard.local_shutdown.triggered(), out.closed()).await;
                    None
                },
            )
            .await;
            let frame = match next {
                None => break,
                Some(Err(_)) if !pinged => {
                    // Idle: ask for a sign of life once.
                    pinged = true;
                    if out.push(Message::Ping(Vec::new())).is_err() {
                        break;
                    }
                    continue;
                }
                Some(Err(_)) => break,
                Some(Ok(None)) | Some(Ok(Some(Err(_)))) => break,
                Some(Ok(Some(Ok(f)))) => f,
            };
            pinged = false;
            // One busy client cannot keep the shard from its other connections.
            crate::runtime::yield_if_needed().await;
            // A reload that removed or rotated the session's key ends the session at its next request.
            if matches!(frame, Message::Text(_) | Message::Binary(_))
                && key.is_some_and(|k| !shard.gen().keys.still_holds(k))
            {
                let mut reply = Vec::new();
                write_error(
                    &mut reply,
                    None,
                    UNAUTHORIZED,
                    "Unauthorized: this API key was removed or rotated; reconnect with a current key",
                    None,
                );
                let _ = out.push(Message::Text(String::from_utf8_lossy(&reply).into_owned()));
                break;
            }
            match frame {
                Message::Text(text) => {
                    let text = text.as_bytes();
                    let reply = handle_text(shard, network, &caller, key, text, &out, &subs, solana.as_ref()).await;
                    recount(shard, &counted, &subs, solana.as_ref());
                    if let Some(reply) = reply {
                        if out.push(Message::Text(reply)).is_err() {
                            break;
                        }
                    }
                    // Solana notifications that came before their subscription's answer follow it now.
                    if let Some(session) = &solana {
                        session.answered();
                    }
                }
                Message::Binary(bytes) => {
                    let reply = handle_text(shard, network, &caller, key, &bytes, &out, &subs, solana.as_ref()).await;
                    recount(shard, &counted, &subs, solana.as_ref());
                    if let Some(reply) = reply {
                        if out.push(Message::Text(reply)).is_err() {
                            break;
                        }
                    }
                    if let Some(session) = &solana {
                        session.answered();
                    }
                }
                Message::Ping(p) => {
                    // A full queue closes itself; the loop ends below.
                    let _ = out.push(Message::Pong(p));
                }
                Message::Close(_) => break,
                _ => {}
            }
            if out.is_closed() {
                break;
            }
        }
        out.close();
    };
    // The reader also stops when the queue closes (overflow), so a client that stopped reading is released
    // as soon as the writer gives up on it.
    let ((), end) = futures_lite::future::zip(reader, writer).await;
    if let Some(session) = &solana {
        session.close();
    }
    for id in subs.borrow().iter() {
        SubHub::unsubscribe(&route, id);
    }
    shard
        .subscriptions
        .set(shard.subscriptions.get().saturating_sub(counted.get()));
    metrics.ws_clients(-1);
    // The session is over; what is left is telling the client, when its socket can take it.
    let (code, reason) = match end {
        End::Broken => return,
        End::QueueFull => (CloseCode::Policy, "client too slow: send queue full"),
        End::Stalled => (CloseCode::Policy, "client too slow: not reading"),
        End::Done => (CloseCode::Away, "closing"),
    };
    if matches!(end, End::QueueFull | End::Stalled) {
        tracing::debug!(reason, "WebSocket client dropped");
    }
    let close = Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }));
    // The frame goes after whatever part of a message is still on its way; FIN after the frame.
    let within = Duration::from_millis(shard.gen().limits.close_timeout_ms);
    let closed = timeout_at(Instant::now() + within, async {
        let _ = sink.send(close).await;
        let _ = sink.close().await;
    })
    .await;
    if closed.is_err() {
        // The client does not read: nothing more can reach it. Reset, so the socket and the bytes it
        // holds are freed now rather than when (if ever) the client reads.
        crate::runtime::net::reset(fd);
    }
}

/// How a client's writer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The queue was closed (the client left, went idle, or the shard shuts down) and drained.
    Done,
    /// More messages waited than `limits.ws_max_queue`.
    QueueFull,
    /// One write waited `limits.client_timeout_ms`: the client stopped reading.
    Stalled,
    /// The socket failed: nothing more can be sent.
    Broken,
}

/// Resolves when `out` overflows (never when it is closed any other way).
async fn overflow(out: &Outbox) {
    out.closed().await;
    if !out.overflowed() {
        std::future::pending::<()>().await;
    }
}

/// Subscriptions this connection holds now (EVM and Solana).
fn held(subs: &RefCell<Vec<String>>, solana: Option<&Rc<crate::solana::ws::Session>>) -> usize {
    subs.borrow().len() + solana.map_or(0, |s| s.subscriptions())
}

/// Brings the shard's subscription total up to date with this connection's.
fn recount(
    shard: &Shard,
    counted: &std::cell::Cell<usize>,
    subs: &RefCell<Vec<String>>,
    solana: Option<&Rc<crate::solana::ws::Session>>,
) {
    let now = held(subs, solana);
    let total = shard.subscriptions.get() + now;
    shard.subscriptions.set(total.saturating_sub(counted.replace(now)));
}

/// Why a new subscription is refused: over the connection's or the shard's cap.
fn over_subscription_cap(
    shard: &Shard,
    subs: &RefCell<Vec<String>>,
    solana: Option<&Rc<crate::solana::ws::Session>>,
) -> Option<String> {
    let gen = shard.gen();
    let limits = &gen.limits;
    let mine = held(subs, solana);
    if mine >= limits.max_subscriptions_per_connection {
        return Some(format!(
            "Subscription limit: this connection already holds {mine} subscriptions (limits.max_subscriptions_per_connection = {}); unsubscribe first",
            limits.max_subscriptions_per_connection
        ));
    }
    if shard.subscriptions.get() >= limits.max_subscriptions_per_shard {
        return Some(format!(
            "Subscription limit: this server holds its maximum of subscriptions (limits.max_subscriptions_per_shard = {}); try again later",
            limits.max_subscriptions_per_shard
        ));
    }
    None
}

/// One text frame: subscription calls are served here, everything else takes the HTTP path's route.
#[allow(clippy::too_many_arguments)]
async fn handle_text(
    shard: &Shard,
    network: &Network,
    caller: &Caller,
    key: Option<&KeyEntry>,
    text: &[u8],
    out: &Outbox,
    subs: &RefCell<Vec<String>>,
    solana: Option<&Rc<crate::solana::ws::Session>>,
) -> Option<String> {
    // Each frame takes the shard's current generation: a reload since the session opened may have changed
    // the network's providers or the key's limits (a key it removed already ended the session).
    let gen = shard.gen();
    let network = gen.networks.get(network.route.index).unwrap_or(network);
    let key = key.map(|k| gen.keys.by_index(k.index).unwrap_or(k));
    let route = &network.route;
    let is_sub = |m: &str| network.is_subscription_method(m);
    // Only a frame that can be a subscription call is parsed here (the name, or escapes that may spell
    // it); everything else is parsed once, below.
    let maybe_sub = memchr::memmem::find(text, b"ubscribe").is_some() || memchr::memchr(b'\\', text).is_some();
    let single = if !maybe_sub {
        None
    } else {
        let mut parser = shard.rpc.parser.borrow_mut();
        match parser.parse(text) {
            Ok(Envelope::Single(Ok(call))) if is_sub(&call.method) => Some((
                call.id.map(<[u8]>::to_vec),
                call.method.to_string(),
                call.params.map(<[u8]>::to_vec),
            )),
            _ => None,
        }
    };
    let Some((id, method, params)) = single else {
        let deadline = Instant::now() + Duration::from_millis(shard.gen().limits.request_deadline_ms);
        return match handle_body(&shard.rpc, network, caller, key, text, deadline, &Default::default()).await {
            // Answers are UTF-8 (provider bytes are checked, Prism's own are written from strs): no copy.
            BodyReply::Body(b) | BodyReply::Throttled { body: b, .. } | BodyReply::OverShare { body: b, .. } => {
                Some(String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
            }
            BodyReply::Empty => None,
        };
    };
    let id = id?; // a subscription notification (no id) gets nothing back
    let mut reply = Vec::new();
    if key.is_some_and(|k| !k.allows(&method)) {
        write_error(
            &mut reply,
            Some(&id),
            UNAUTHORIZED,
            &format!("Method {method} is not allowed for this API key"),
            None,
        );
        return Some(String::from_utf8_lossy(&reply).into_owned());
    }
    let opening = network.opens_subscription(&method);
    if opening {
        // Opening a subscription is billed like any call (releasing one never is), and capped.
        if let Some(Err(wait_ns)) = key.map(|k| k.admit(crate::telemetry::clock::now_ns(), 1)) {
            write_throttled(&mut reply, Some(&id), wait_ns);
            return Some(String::from_utf8_lossy(&reply).into_owned());
        }
        if let Some(why) = over_subscription_cap(shard, subs, solana) {
            write_error(&mut reply, Some(&id), RATE_LIMITED, &why, None);
            return Some(String::from_utf8_lossy(&reply).into_owned());
        }
    }
    if let Some(session) = solana {
        match session.handle(&method, params.as_deref()).await {
            Ok(result) => write_answer(&mut reply, &id, false, &result),
            Err(e) => write_error(&mut reply, Some(&id), e.code(), &e.to_string(), None),
        }
        return Some(String::from_utf8_lossy(&reply).into_owned());
    }
    let params = params.unwrap_or_else(|| b"[]".to_vec());
    if method == "eth_subscribe" {
        match SubHub::subscribe(route, &params, out, caller.mark) {
            Ok(sub_id) => {
                let mut v = Vec::new();
                crate::rpc::wire::write_json_str(&mut v, &sub_id);
                write_answer(&mut reply, &id, false, &v);
                subs.borrow_mut().push(sub_id);
            }
            Err(SubscribeError::Unsupported(why)) => write_error(&mut reply, Some(&id), -32602, &why, None),
            Err(SubscribeError::NoProvider) => write_error(
                &mut reply,
                Some(&id),
                -32603,
                "No provider with a WebSocket endpoint is available",
                None,
            ),
        }
    } else {
        let target = nth_element(&params, 0).and_then(plain_str).unwrap_or("").to_string();
        let mine = subs.borrow().contains(&target);
        let removed = mine && SubHub::unsubscribe(route, &target);
        if removed {
            subs.borrow_mut().retain(|s| *s != target);
        }
        write_answer(&mut reply, &id, false, if removed { b"true" } else { b"false" });
    }
    Some(String::from_utf8_lossy(&reply).into_owned())
}
