//! Client WebSockets on the RPC path: the same keys, allowlists and limits as HTTP, any JSON-RPC call,
//! plus `eth_subscribe` / `eth_unsubscribe` served by the shard's subscription hub. Prism frames the
//! session itself (`http1::ws_frame`): a notification laid out once goes to each subscriber with only its
//! subscription id written apart, and an idle session holds no read or write buffer (both are lent by the
//! shard while bytes move). Each client has a bounded send queue: one that cannot keep up (its queue full,
//! or one write waiting `limits.client_timeout_ms`) is closed with 1008 "client too slow" instead of
//! growing memory. Idle clients are pinged, and dropped when they do not answer. A client that breaks the
//! protocol is closed with 1002, 1007 or 1009 and the rule it broke. The close frame follows what was
//! already sent, if the socket takes it within `limits.close_timeout_ms`; a client that stopped reading
//! altogether is reset instead, so its socket does not wait for it.

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::envelope::Envelope;
use super::keys::KeyEntry;
use super::network::Network;
use super::reply::{write_answer, write_error};
use super::rpc::{handle_body, write_proxy_error, write_throttled, BodyReply, RATE_LIMITED, UNAUTHORIZED};
use super::shard::Shard;
use prism_core::subs::{Outbox, Outgoing, SubHub, SubscribeError};
use prism_core::Caller;
use prism_runtime::queue::LocalQueue;
use prism_runtime::timeout_at;
use prism_wire::http1::ws_frame::{self, Progress, WsMessage, WsReader};
use prism_wire::http1::ReadBuf;
use prism_wire::jsonscan::{nth_element, plain_str};

/// The `Sec-WebSocket-Accept` value for a client's key.
pub fn accept_key(key: &[u8]) -> String {
    async_tungstenite::tungstenite::handshake::derive_accept_key(key)
}

/// Bytes an idle session's read asks for (the buffer is the shard's while the read waits).
const IDLE_READ: usize = 1024;
/// Queued messages are written together up to this many bytes per socket write.
const WRITE_BATCH: usize = 64 * 1024;
/// A buffer grown past this by one large message is not kept.
const KEEP_BUFFER: usize = 64 * 1024;

/// Serves one upgraded connection until either side closes.
pub async fn serve_client<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    fd: RawFd,
    shard: &Shard,
    network: &Network,
    caller: Caller,
    key: Option<&KeyEntry>,
) {
    let gen = shard.gen();
    let limits = &gen.limits;
    let metrics = network.route.shard.recorder.metrics();
    metrics.ws_clients(1);
    if limits.ws_send_buffer_bytes > 0 {
        prism_runtime::net::cap_send_buffer(fd, limits.ws_send_buffer_bytes);
    }
    let out: Outbox = LocalQueue::new(limits.ws_max_queue);
    let session = Session {
        stream: RefCell::new(stream),
        solana: network
            .magic()
            .map(|sol| prism_solana::ws::Session::new(sol.clone(), out.clone(), caller)),
        out,
        shard,
        network,
        caller,
        key,
        subs: RefCell::new(Vec::new()),
        counted: Cell::new(0),
        ended: Cell::new(None),
    };
    // The reader also stops when the queue closes (overflow), so a client that stopped reading is released
    // as soon as the writer gives up on it.
    let ((), (end, unsent)) = prism_runtime::zip_apart(session.read(), session.write()).await;
    session.release();
    metrics.ws_clients(-1);
    session.close(fd, end, unsent).await;
}

/// One client session: what its reader and its writer share.
struct Session<'a, S> {
    /// The reader and the writer take turns with the socket (each borrows it only inside a poll).
    stream: RefCell<S>,
    out: Outbox,
    shard: &'a Shard,
    network: &'a Network,
    caller: Caller,
    key: Option<&'a KeyEntry>,
    /// The client's EVM subscription ids.
    subs: RefCell<Vec<String>>,
    /// This connection's subscriptions as last counted into the shard's total.
    counted: Cell<usize>,
    /// How the reader ended the session, when it did: the close code and reason to send.
    ended: Cell<Option<(u16, &'static str)>>,
    solana: Option<Rc<prism_solana::ws::Session>>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Session<'_, S> {
    /// Writes what is queued until the queue closes and drains, the socket fails, or the client is too slow.
    /// Returns how it ended and what the socket has not taken of the last write (the rest of a frame, to
    /// finish before a close frame).
    async fn write(&self) -> (End, Vec<u8>) {
        let (out, shard) = (&self.out, self.shard);
        // A write that cannot finish within the slow-client timeout means the client stopped reading.
        let write_timeout = Duration::from_millis(shard.gen().limits.client_timeout_ms);
        let mut socket = Half(&self.stream);
        let mut buf: Vec<u8> = Vec::new();
        let end = loop {
            let Some(first) = out.pop().await else { break End::Done };
            if out.overflowed() {
                break End::QueueFull; // what is still queued will not be read in time either
            }
            if buf.capacity() == 0 {
                buf = shard.spare.out.take_empty();
            }
            encode(&mut buf, first);
            while buf.len() < WRITE_BATCH {
                let Some(next) = out.try_pop() else { break };
                encode(&mut buf, next);
            }
            // A write waiting for the client ends early when the queue overflows meanwhile; what the socket
            // took is counted, so a frame cut short is finished before the close frame.
            let mut written = 0;
            let sent = futures_lite::future::or(
                async {
                    let write = write_counted(&mut socket, &buf, &mut written);
                    Some(timeout_at(Instant::now() + write_timeout, write).await)
                },
                async {
                    overflow(out).await;
                    None
                },
            )
            .await;
            let end = match sent {
                Some(Ok(Ok(()))) => None,
                Some(Ok(Err(_))) => Some(End::Broken),
                Some(Err(_)) => Some(End::Stalled),
                None => Some(End::QueueFull),
            };
            buf.drain(..written);
            if let Some(end) = end {
                break end;
            }
            buf.clear();
            if out.is_empty() || buf.capacity() > KEEP_BUFFER {
                shard.spare.out.give(std::mem::take(&mut buf));
            }
        };
        // The reader stops too (it may be waiting for a frame from a client that went quiet).
        out.close();
        (end, buf)
    }

    /// Reads the client's messages and answers them until the client closes, breaks the protocol or goes
    /// quiet, the queue closes, or the shard shuts down.
    async fn read(&self) {
        let (out, shard) = (&self.out, self.shard);
        let mut socket = Half(&self.stream);
        let mut buf = ReadBuf::idle(IDLE_READ);
        let mut frames = WsReader::new(shard.gen().limits.max_body_bytes);
        let mut pinged = false;
        loop {
            let message = match frames.next(buf.filled()) {
                Err(violation) => {
                    tracing::debug!(%violation, "WebSocket client broke the protocol");
                    self.ended.set(Some((violation.close_code(), violation.reason())));
                    break;
                }
                Ok(Progress::Fragment(used)) => {
                    buf.consume(used);
                    continue;
                }
                Ok(Progress::Message(used, message)) => {
                    buf.consume(used);
                    message
                }
                Ok(Progress::Need(need)) => match self.read_more(&mut socket, &mut buf, need).await {
                    Some(Ok(Ok(0)) | Ok(Err(_))) | None => break,
                    Some(Ok(Ok(_))) => {
                        pinged = false;
                        continue;
                    }
                    Some(Err(_)) if !pinged => {
                        // Idle: ask for a sign of life once.
                        pinged = true;
                        if out.push(Outgoing::Ping).is_err() {
                            break;
                        }
                        continue;
                    }
                    Some(Err(_)) => {
                        self.ended.set(Some((ws_frame::CLOSE_AWAY, "idle: no answer to ping")));
                        break;
                    }
                },
            };
            // Nothing is buffered between messages: the read buffer goes back to the shard.
            if buf.is_empty() {
                buf.shrink_to(KEEP_BUFFER);
                buf.give_to(&shard.spare.reads);
            }
            // One busy client cannot keep the shard from its other connections.
            prism_runtime::yield_if_needed().await;
            if !self.take(message).await || out.is_closed() {
                break;
            }
        }
        buf.give_to(&shard.spare.reads);
        out.close();
    }

    /// Reads more of the next frame (`need` bytes of it in all) within the idle timeout. None when the
    /// queue closed or the shard shuts down meanwhile.
    async fn read_more(
        &self,
        socket: &mut Half<'_, S>,
        buf: &mut ReadBuf,
        need: usize,
    ) -> Option<Result<std::io::Result<usize>, prism_runtime::Elapsed>> {
        let shard = self.shard;
        let idle = Duration::from_millis(shard.gen().limits.idle_timeout_ms);
        let more = need.saturating_sub(buf.len()).max(IDLE_READ);
        futures_lite::future::or(
            async {
                let read = async {
                    if buf.is_empty() {
                        buf.read_idle_from(socket, IDLE_READ, &shard.spare.reads).await
                    } else {
                        buf.read_from(socket, more).await
                    }
                };
                Some(timeout_at(Instant::now() + idle, read).await)
            },
            async {
                futures_lite::future::or(shard.local_shutdown.triggered(), self.out.closed()).await;
                None
            },
        )
        .await
    }

    /// Acts on one message from the client; false when the session is over.
    async fn take(&self, message: WsMessage) -> bool {
        let (out, shard) = (&self.out, self.shard);
        let text = match message {
            WsMessage::Text(t) | WsMessage::Binary(t) => t,
            // A full queue closes itself; the reader sees it.
            WsMessage::Ping(p) => return out.push(Outgoing::Pong(p)).is_ok(),
            WsMessage::Pong => return true,
            WsMessage::Close(code) => {
                self.ended.set(Some((echo_close(code), "")));
                return false;
            }
        };
        // A reload that removed or rotated the session's key ends the session at its next request.
        if self.key.is_some_and(|k| !shard.gen().keys.still_holds(k)) {
            let mut reply = Vec::new();
            write_error(
                &mut reply,
                None,
                UNAUTHORIZED,
                "Unauthorized: this API key was removed or rotated; reconnect with a current key",
                None,
            );
            let _ = out.push(Outgoing::Text(reply));
            return false;
        }
        // In a home the shard lends: answering is a large future, needed only while a message is answered.
        let reply = shard.homes.message.pin_with(|| self.answer(&text)).await;
        self.recount();
        if let Some(reply) = reply {
            if out.push(Outgoing::Text(reply)).is_err() {
                return false;
            }
        }
        // Solana notifications that came before their subscription's answer follow it now.
        if let Some(session) = &self.solana {
            session.answered();
        }
        true
    }

    /// One text frame: subscription calls are served here, everything else takes the HTTP path's route.
    async fn answer(&self, text: &[u8]) -> Option<Vec<u8>> {
        let (shard, caller, out, subs, solana) =
            (self.shard, &self.caller, &self.out, &self.subs, self.solana.as_ref());
        // Each frame takes the shard's current generation: a reload since the session opened may have changed
        // the network's providers or the key's limits (a key it removed already ended the session).
        let gen = shard.gen();
        let network = gen.networks.get(self.network.route.index).unwrap_or(self.network);
        let key = self.key.map(|k| gen.keys.by_index(k.index).unwrap_or(k));
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
                    Some(b)
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
            return Some(reply);
        }
        let opening = network.opens_subscription(&method);
        if opening {
            // Opening a subscription is billed like any call (releasing one never is), and capped.
            if let Some(Err(wait_ns)) = key.map(|k| k.admit(prism_telemetry::clock::now_ns(), 1)) {
                write_throttled(&mut reply, Some(&id), wait_ns);
                return Some(reply);
            }
            if let Some(why) = over_subscription_cap(shard, subs, solana) {
                write_error(&mut reply, Some(&id), RATE_LIMITED, &why, None);
                return Some(reply);
            }
        }
        if let Some(session) = solana {
            match session.handle(&method, params.as_deref()).await {
                Ok(result) => write_answer(&mut reply, &id, false, &result),
                Err(e) => write_proxy_error(&mut reply, Some(&id), &e, &*network.route),
            }
            return Some(reply);
        }
        let params = params.unwrap_or_else(|| b"[]".to_vec());
        if method == "eth_subscribe" {
            match SubHub::subscribe(route, &params, out, caller.mark) {
                Ok(sub_id) => {
                    let mut v = Vec::new();
                    prism_wire::rpc::wire::write_json_str(&mut v, &sub_id);
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
        Some(reply)
    }

    /// Brings the shard's subscription total up to date with this connection's.
    fn recount(&self) {
        let now = held(&self.subs, self.solana.as_ref());
        let total = self.shard.subscriptions.get() + now;
        self.shard
            .subscriptions
            .set(total.saturating_sub(self.counted.replace(now)));
    }

    /// The session is over: its subscriptions go (an upstream one with its last client).
    fn release(&self) {
        if let Some(session) = &self.solana {
            session.close();
        }
        for id in self.subs.borrow().iter() {
            SubHub::unsubscribe(&self.network.route, id);
        }
        let shard = self.shard;
        shard
            .subscriptions
            .set(shard.subscriptions.get().saturating_sub(self.counted.get()));
    }

    /// Tells the client why the session ended, when its socket can take it: the rest of a frame cut short,
    /// the close frame, then FIN; a client that does not take them within `limits.close_timeout_ms` is reset.
    async fn close(&self, fd: RawFd, end: End, mut unsent: Vec<u8>) {
        let (code, reason) = match (end, self.ended.get()) {
            (End::Broken, _) => return,
            (End::QueueFull, _) => (ws_frame::CLOSE_POLICY, "client too slow: send queue full"),
            (End::Stalled, _) => (ws_frame::CLOSE_POLICY, "client too slow: not reading"),
            (End::Done, Some(ended)) => ended,
            (End::Done, None) => (ws_frame::CLOSE_AWAY, "closing"),
        };
        if matches!(end, End::QueueFull | End::Stalled) {
            tracing::debug!(reason, "WebSocket client dropped");
        }
        ws_frame::write_close(&mut unsent, code, reason);
        let within = Duration::from_millis(self.shard.gen().limits.close_timeout_ms);
        let mut socket = Half(&self.stream);
        let closed = timeout_at(Instant::now() + within, async {
            let _ = write_counted(&mut socket, &unsent, &mut 0).await;
            let _ = socket.close().await;
        })
        .await;
        self.shard.spare.out.give(unsent);
        if closed.is_err() {
            // The client does not read: nothing more can reach it. Reset, so the socket and the bytes it
            // holds are freed now rather than when (if ever) the client reads.
            prism_runtime::net::reset(fd);
        }
    }
}

/// Frames one queued message onto the end of `buf`.
fn encode(buf: &mut Vec<u8>, message: Outgoing) {
    match message {
        Outgoing::Text(text) => ws_frame::write_frame(buf, ws_frame::TEXT, &text),
        Outgoing::Note(note, id) => {
            ws_frame::write_head(buf, ws_frame::TEXT, note.len_with(&id));
            buf.extend_from_slice(&note.head);
            buf.extend_from_slice(&id);
            buf.extend_from_slice(&note.tail);
        }
        Outgoing::Ping => ws_frame::write_frame(buf, ws_frame::PING, b""),
        Outgoing::Pong(payload) => ws_frame::write_frame(buf, ws_frame::PONG, &payload),
    }
}

/// Writes `bytes` and flushes, counting in `written` what the socket took, so that a caller that stops
/// waiting knows where the bytes it still owes begin (a write the socket accepted is never half-taken).
async fn write_counted<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8], written: &mut usize) -> std::io::Result<()> {
    while *written < bytes.len() {
        match w.write(&bytes[*written..]).await? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => *written += n,
        }
    }
    w.flush().await
}

/// The close code Prism answers a client's close with: its own, when it is one an endpoint may send.
fn echo_close(code: Option<u16>) -> u16 {
    match code {
        Some(c @ (1000..=1003 | 1007..=1011 | 3000..=4999)) => c,
        _ => ws_frame::CLOSE_NORMAL,
    }
}

/// The reader's or the writer's use of the session's socket: it is borrowed only inside each poll, so the
/// two can wait on it at once (a read pending while a notification is written).
struct Half<'a, S>(&'a RefCell<S>);

impl<S: AsyncRead + Unpin> AsyncRead for Half<'_, S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Half<'_, S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_flush(cx)
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_close(cx)
    }
}

/// How a client's writer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The queue was closed (the client left or broke the protocol, went idle, or the shard shuts down)
    /// and drained.
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
fn held(subs: &RefCell<Vec<String>>, solana: Option<&Rc<prism_solana::ws::Session>>) -> usize {
    subs.borrow().len() + solana.map_or(0, |s| s.subscriptions())
}

/// Why a new subscription is refused: over the connection's or the shard's cap.
fn over_subscription_cap(
    shard: &Shard,
    subs: &RefCell<Vec<String>>,
    solana: Option<&Rc<prism_solana::ws::Session>>,
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
