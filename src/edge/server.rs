//! The HTTP/1.1 server loop of one shard: accept, read requests with limits and timeouts, route by path,
//! answer, keep the connection alive when both sides want it, drain on shutdown.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::os::fd::{AsRawFd, RawFd};

use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::admission::{admit, caller, find_route, preflight_allowed};
use super::diagnosis::Diagnosis;
use super::http::{parse_head, HeadError, Method, RequestHead};
use super::keys::KeyEntry;
use super::reply::{write_error, write_http, ResponseMeta};
use super::rpc::{handle_body, BodyReply, INVALID_REQUEST, UNAUTHORIZED};
use super::shard::Gen;
use prism_core::Caller;
use prism_runtime::net::{TcpListener, TcpStream};
use prism_runtime::{spawn, timeout_at};
use prism_wire::http1::{ChunkError, ChunkedDecoder, ReadBuf};

pub use super::shard::Shard;

const READ_CHUNK: usize = 8 * 1024;
/// The first read of a request, and the buffer it lands in. Idle keep-alive connections wait in this read
/// holding no buffer (`ReadBuf::read_idle_from`, and the runtime's provided buffers: 10 000 of them must not
/// pin 10 000 buffers); a typical JSON-RPC request fits, larger ones continue in `READ_CHUNK`s.
const IDLE_READ: usize = 1024;
/// Buffer capacity a connection keeps between requests; anything larger is released after the request.
const KEEP_BUFFER: usize = 64 * 1024;

/// Accepts connections until shutdown, then waits (up to the drain deadline) for open ones to finish.
pub async fn serve(listener: TcpListener, shard: Rc<Shard>) {
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            shard.local_shutdown.triggered().await;
            None
        })
        .await;
        match accepted {
            None => break,
            Some(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                let open = shard.open.global.fetch_add(1, Ordering::AcqRel) + 1;
                let open_here = shard.open.local.get() + 1;
                shard.open.local.set(open_here);
                shard.open.peak.set(shard.open.peak.get().max(open_here));
                let guard = ConnGuard(shard.clone());
                if open > shard.gen().limits.max_connections {
                    let close_timeout = Duration::from_millis(shard.gen().limits.close_timeout_ms);
                    spawn(async move {
                        let _guard = guard;
                        refuse_overload(stream, close_timeout).await;
                    });
                } else if shard.tls.is_none() {
                    // Built here and moved into the task whole: a task keeps a place for each value it
                    // captures for its whole life, so building the connection inside it from a captured
                    // stream would keep the stream twice (perf/idle_clients.py; -Zprint-type-sizes).
                    let fd = stream.as_raw_fd();
                    let mut conn = Connection::new(stream, fd, shard.clone());
                    spawn(async move {
                        let _guard = guard;
                        conn.serve().await;
                    });
                } else {
                    let shard = shard.clone();
                    spawn(async move {
                        let _guard = guard;
                        // Boxed so a plain connection's task does not carry the TLS state's size.
                        Box::pin(serve_tls(stream, shard)).await;
                    });
                }
            }
            Some(Err(e)) => {
                // EMFILE and friends: back off a little instead of spinning on accept.
                tracing::warn!(error = %e, "accept failed");
                prism_runtime::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    drop(listener);
    let drain_until = Instant::now() + Duration::from_millis(shard.gen().limits.drain_timeout_ms);
    while shard.open.local.get() > 0 && Instant::now() < drain_until {
        prism_runtime::sleep(Duration::from_millis(5)).await;
    }
    if shard.open.local.get() > 0 {
        tracing::warn!(
            open = shard.open.local.get(),
            "drain deadline passed with connections still open"
        );
    }
}

/// A TLS connection: the handshake (its state boxed, and freed once it is over), then the requests.
async fn serve_tls(stream: TcpStream, shard: Rc<Shard>) {
    let Some(tls) = &shard.tls else { return };
    let fd = stream.as_raw_fd();
    let acceptor = futures_rustls::TlsAcceptor::from(tls.for_shard(shard.id));
    let until = Instant::now() + Duration::from_millis(shard.gen().limits.client_timeout_ms);
    match timeout_at(until, Box::pin(acceptor.accept(stream))).await {
        Ok(Ok(tls_stream)) => Connection::new(tls_stream, fd, shard.clone()).serve().await,
        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
        Err(_) => tracing::debug!("TLS handshake timed out"),
    }
}

struct ConnGuard(Rc<Shard>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.open.global.fetch_sub(1, Ordering::AcqRel);
        self.0.open.local.set(self.0.open.local.get() - 1);
    }
}

async fn refuse_overload(mut stream: TcpStream, close_timeout: Duration) {
    let mut body = Vec::new();
    write_error(&mut body, None, -32603, "Too many connections", None);
    let mut out = Vec::new();
    write_http(&mut out, 503, &body, &ResponseMeta::default());
    let fd = stream.as_raw_fd();
    let written = timeout_at(Instant::now() + close_timeout, async {
        let _ = stream.write_all(&out).await;
        let _ = stream.close().await;
    })
    .await;
    if written.is_err() {
        prism_runtime::net::reset(fd);
    }
}

/// Closes a connection: its last bytes and the FIN, if the socket takes them within `within`; otherwise
/// (a client that stopped reading) a reset, so the socket is freed now instead of when the client reads.
pub async fn close_or_reset<S: AsyncWrite + Unpin>(stream: &mut S, fd: RawFd, within: Duration) {
    if timeout_at(Instant::now() + within, stream.close()).await.is_err() {
        prism_runtime::net::reset(fd);
    }
}

/// How reading the next request ended when it did not produce one.
enum NoRequest {
    /// Peer closed, idle timeout, or shutdown while idle: close quietly.
    Quiet,
    /// Answer with this status (and a JSON-RPC error body), then close.
    Refuse(u16, &'static str),
}

/// A request asked to become a WebSocket; the connection loop hands the socket over.
struct Upgrade {
    /// The generation the upgrade was accepted under: the session serves that network and key.
    gen: Rc<Gen>,
    route: usize,
    caller: Caller,
    key: Option<usize>,
}

/// One client connection. What it holds while idle is what 10 000 idle clients cost (perf/idle_clients.py):
/// no buffers (they go back to the shard), the rare upgrade boxed, and a task whose future keeps only the
/// idle wait inline (reading the rest of a request and answering it run in homes the shard lends).
struct Connection<S> {
    upgrade: Option<Box<Upgrade>>,
    stream: S,
    /// The socket under `stream` (TLS or not), to reset it when it cannot be closed in time.
    fd: RawFd,
    buf: ReadBuf,
    out: Vec<u8>,
    shard: Rc<Shard>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    fn new(stream: S, fd: RawFd, shard: Rc<Shard>) -> Self {
        Connection {
            upgrade: None,
            stream,
            fd,
            buf: ReadBuf::idle(IDLE_READ),
            out: Vec::new(),
            shard,
        }
    }

    /// Serves requests until the connection is over (or has become a WebSocket session), then closes it.
    async fn serve(&mut self) {
        loop {
            if self.buf.is_empty() && !self.wait_for_request().await {
                return self.finish().await;
            }
            // In a home the shard lends: reading a request's rest is a large future (a body, chunks, a
            // `100 Continue`), needed only while a request arrives.
            let shard = self.shard.clone();
            let read = shard.homes.request.pin_with(|| self.read_request()).await;
            let (head, body) = match read {
                Ok(r) => r,
                Err(NoRequest::Quiet) => return self.finish().await,
                Err(NoRequest::Refuse(status, why)) => {
                    let mut body = Vec::new();
                    write_error(&mut body, None, INVALID_REQUEST, why, None);
                    self.out.clear();
                    write_http(&mut self.out, status, &body, &ResponseMeta::default());
                    let _ = self.write_out().await;
                    return self.finish().await;
                }
            };
            let keep_alive = head.keep_alive && !self.shard.shutdown.is_triggered();
            if self.out.capacity() == 0 {
                self.out = self.shard.spare.out.take_empty();
            }
            // On the heap: answering takes a 5 KB future, and inline it would be part of every connection's
            // task for the connection's whole life, idle or not (perf/idle_clients.py). Its home is taken
            // from the shard per request and given back after, as the buffers are (a fresh box each time
            // took malloc's slow path: it is too large for the thread cache); keep rare paths boxed below
            // it (dial, the hedge) so it stays small: -Zprint-type-sizes shows the sizes.
            let answering = shard.homes.answer.pin_with(|| self.respond(&head, &body, keep_alive));
            let keep_alive = answering.await && keep_alive;
            shard.spare.bodies.give(body);
            if let Some(up) = self.upgrade.take() {
                // The session reads and writes its own frames: the connection's buffers go back to the
                // shard now rather than sit beside every subscriber for the session's life.
                shard.spare.out.give(std::mem::take(&mut self.out));
                self.buf = ReadBuf::idle(IDLE_READ);
                let key = up.key.and_then(|i| up.gen.keys.by_index(i));
                // Boxed for the same reason: a WebSocket session's future is as large as the connection's.
                Box::pin(super::ws::serve_client(
                    &mut self.stream,
                    self.fd,
                    &shard,
                    &up.gen.networks[up.route],
                    up.caller,
                    key,
                ))
                .await;
                return;
            }
            // Give memory back after an unusually large request, so idle connections stay small; the answer
            // buffer goes back to the shard unless the next request is already here.
            self.buf.shrink_to(KEEP_BUFFER);
            if self.buf.is_empty() {
                self.shard.spare.out.give(std::mem::take(&mut self.out));
            } else if self.out.capacity() > KEEP_BUFFER {
                self.out = Vec::new();
            }
            if !keep_alive {
                return self.finish().await;
            }
        }
    }

    /// The connection is over: FIN after the last bytes, or a reset when the client does not take them
    /// within `limits.close_timeout_ms`.
    async fn finish(&mut self) {
        let within = Duration::from_millis(self.shard.gen().limits.close_timeout_ms);
        close_or_reset(&mut self.stream, self.fd, within).await;
    }

    async fn write_out(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_millis(self.shard.gen().limits.client_timeout_ms);
        let written = timeout_at(deadline, async {
            self.stream.write_all(&self.out).await?;
            self.stream.flush().await
        })
        .await;
        matches!(written, Ok(Ok(())))
    }

    /// Waits for the first bytes of the next request, within the idle timeout of the previous one, holding
    /// no buffer meanwhile. False when the client closed or stayed idle, or the shard shuts down.
    async fn wait_for_request(&mut self) -> bool {
        let idle_ms = self.shard.gen().limits.idle_timeout_ms;
        let idle_until = Instant::now() + Duration::from_millis(idle_ms);
        // Disjoint borrows: the read takes the buffer and the stream, both halves read the shard.
        let Connection { buf, stream, shard, .. } = self;
        let shard: &Shard = shard;
        let read = futures_lite::future::or(
            async {
                let read = buf.read_idle_from(stream, IDLE_READ, &shard.spare.reads);
                Some(timeout_at(idle_until, read).await)
            },
            async {
                shard.local_shutdown.triggered().await;
                None
            },
        )
        .await;
        matches!(read, Some(Ok(Ok(n))) if n > 0)
    }

    /// Reads the rest of a request whose first bytes are buffered: the rest of the head and the body within
    /// the slow-client timeout.
    async fn read_request(&mut self) -> Result<(RequestHead, Vec<u8>), NoRequest> {
        let gen = self.shard.gen();
        let limits = &gen.limits;
        let client_until = Instant::now() + Duration::from_millis(limits.client_timeout_ms);
        let head = loop {
            match parse_head(self.buf.filled(), limits.max_header_bytes) {
                Ok(Some(head)) => break head,
                Ok(None) => self.read_more(client_until).await?,
                Err(HeadError::TooLarge) => return Err(NoRequest::Refuse(431, "Request header fields too large")),
                Err(HeadError::Malformed(why)) => return Err(NoRequest::Refuse(400, why)),
                Err(HeadError::UnsupportedEncoding) => {
                    return Err(NoRequest::Refuse(501, "Unsupported transfer encoding"))
                }
            }
        };
        self.buf.consume(head.len);
        let max = limits.max_body_bytes;
        let mut body = self.shard.spare.bodies.take_empty();
        if head.chunked {
            if head.expect_continue && self.buf.is_empty() {
                self.send_continue().await?;
            }
            let mut decoder = ChunkedDecoder::new(max);
            loop {
                match decoder.decode(self.buf.filled(), &mut body) {
                    Ok(used) => self.buf.consume(used),
                    Err(ChunkError::TooLarge) => return Err(NoRequest::Refuse(413, "Request body too large")),
                    Err(ChunkError::Malformed) => return Err(NoRequest::Refuse(400, "Malformed chunked body")),
                }
                if decoder.is_done() {
                    break;
                }
                self.read_more(client_until).await?;
            }
        } else if let Some(len) = head.content_length {
            if len > max {
                return Err(NoRequest::Refuse(413, "Request body too large"));
            }
            if head.expect_continue && self.buf.len() < len {
                self.send_continue().await?;
            }
            body.reserve_exact(len);
            while body.len() < len {
                if self.buf.is_empty() {
                    self.read_more(client_until).await?;
                }
                self.buf.take_into(len - body.len(), &mut body);
            }
        } else if head.method == Some(Method::Post) {
            return Err(NoRequest::Refuse(411, "Content-Length or chunked body required"));
        }
        Ok((head, body))
    }

    async fn read_more(&mut self, until: Instant) -> Result<(), NoRequest> {
        match timeout_at(until, self.buf.read_from(&mut self.stream, READ_CHUNK)).await {
            Ok(Ok(n)) if n > 0 => Ok(()),
            Ok(_) => Err(NoRequest::Quiet),
            Err(_) => Err(NoRequest::Refuse(408, "Request timeout")),
        }
    }

    async fn send_continue(&mut self) -> Result<(), NoRequest> {
        self.out.clear();
        self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        if self.write_out().await {
            Ok(())
        } else {
            Err(NoRequest::Quiet)
        }
    }

    /// Answers one request. Returns false when the connection must close.
    async fn respond(&mut self, head: &RequestHead, body: &[u8], keep_alive: bool) -> bool {
        let origin = head.origin.as_deref();
        self.out.clear();
        let gen = self.shard.gen();
        let Some((route, path_key)) = find_route(&gen, &head.path) else {
            return self
                .refuse(404, -32600, "Unknown path: use /{network}", keep_alive, origin)
                .await;
        };
        // Who is asking. With keys configured, every request needs a known one; nothing reaches an upstream
        // otherwise.
        let keys = &*gen.keys;
        let key = match head.api_key.as_deref().or(path_key.map(str::as_bytes)) {
            Some(k) if !keys.is_open() => keys.find(k),
            _ => None,
        };
        if let Err(r) = admit(keys, key, route, head) {
            let origin = if r.echo_origin { origin } else { None };
            return self.refuse(r.status, UNAUTHORIZED, r.message, keep_alive, origin).await;
        }
        match head.method.unwrap_or(Method::Other) {
            Method::Options => {
                if !preflight_allowed(keys, key, origin) {
                    return self
                        .refuse(403, UNAUTHORIZED, "Forbidden: origin not allowed", keep_alive, None)
                        .await;
                }
                write_preflight(&mut self.out, head, keep_alive);
            }
            Method::Get if head.upgrade_websocket => {
                let Some(ws_key) = head.ws_key.as_deref() else {
                    return self
                        .refuse(
                            400,
                            INVALID_REQUEST,
                            "WebSocket upgrade without Sec-WebSocket-Key",
                            false,
                            origin,
                        )
                        .await;
                };
                self.accept_upgrade(ws_key, &gen, route, key, head);
            }
            Method::Get | Method::Head => {
                let mut b = Vec::new();
                b.extend_from_slice(br#"{"service":"prism","network":"#);
                prism_wire::rpc::wire::write_json_str(&mut b, gen.networks[route].name());
                b.extend_from_slice(br#","usage":"POST JSON-RPC 2.0 requests (single or batch) to this path"}"#);
                write_http(&mut self.out, 200, &b, &answer_meta(head, keep_alive, &[]));
            }
            Method::Post => self.answer_calls(&gen, route, key, head, body, keep_alive).await,
            Method::Other => {
                let mut b = Vec::new();
                write_error(&mut b, None, INVALID_REQUEST, "Method not allowed: use POST", None);
                let meta = answer_meta(head, keep_alive, &["Allow: POST, GET, OPTIONS"]);
                write_http(&mut self.out, 405, &b, &meta);
            }
        }
        self.write_out().await
    }

    /// Writes the `101 Switching Protocols` answer and notes the upgrade: once it is written, the connection
    /// loop hands the socket to a WebSocket session for this network and caller.
    fn accept_upgrade(
        &mut self,
        ws_key: &[u8],
        gen: &Rc<Gen>,
        route: usize,
        key: Option<&KeyEntry>,
        head: &RequestHead,
    ) {
        let accept = super::ws::accept_key(ws_key);
        self.out.extend_from_slice(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
        );
        self.out.extend_from_slice(accept.as_bytes());
        self.out.extend_from_slice(b"\r\n\r\n");
        self.upgrade = Some(Box::new(Upgrade {
            gen: gen.clone(),
            route,
            caller: caller(key, head),
            key: key.map(|k| k.index),
        }));
    }

    /// Answers a JSON-RPC body (one call or a batch) on network `route`: the reply (or the key's 429), the
    /// diagnostic header lines when configured, and the key's request counted.
    async fn answer_calls(
        &mut self,
        gen: &Gen,
        route: usize,
        key: Option<&KeyEntry>,
        head: &RequestHead,
        body: &[u8],
        keep_alive: bool,
    ) {
        let deadline = Instant::now() + Duration::from_millis(gen.limits.request_deadline_ms);
        let caller = caller(key, head);
        let diag = Diagnosis::default();
        let network = &gen.networks[route];
        let reply = handle_body(&self.shard.rpc, network, &caller, key, body, deadline, &diag).await;
        // The diagnostic header lines, in a buffer the shard lends (an idle connection keeps none).
        let mut headers = self.shard.spare.out.take_empty();
        if gen.diagnostic_headers {
            diag.write_headers(&mut headers, &network.route);
        }
        diag.write_verified(&mut headers);
        let meta = |extra| ResponseMeta {
            raw: &headers,
            ..answer_meta(head, keep_alive, extra)
        };
        let metrics = self.shard.recorder.metrics();
        metrics.key_request(key.map_or(0, |k| k.index), matches!(reply, BodyReply::Throttled { .. }));
        match reply {
            BodyReply::Body(b) => {
                write_http(&mut self.out, 200, &b, &meta(&[]));
                self.shard.rpc.answers.give(b);
            }
            BodyReply::Empty => write_http(&mut self.out, 204, b"", &meta(&[])),
            BodyReply::Throttled { retry_after_s, body } => {
                metrics.refusal(429);
                let retry = format!("Retry-After: {retry_after_s}");
                write_http(&mut self.out, 429, &body, &meta(&[retry.as_str()]));
            }
            BodyReply::OverShare { retry_after_s, body } => {
                metrics.refusal(429);
                let retry = format!("Retry-After: {retry_after_s}");
                write_http(&mut self.out, 429, &body, &meta(&[retry.as_str()]));
                self.shard.rpc.answers.give(body);
            }
        }
        self.shard.spare.out.give(headers);
    }

    /// Answers with an HTTP error status and a JSON-RPC error body.
    async fn refuse(&mut self, status: u16, code: i32, message: &str, keep_alive: bool, origin: Option<&[u8]>) -> bool {
        self.shard.recorder.metrics().refusal(status);
        let mut b = Vec::new();
        write_error(&mut b, None, code, message, None);
        self.out.clear();
        let meta = ResponseMeta {
            keep_alive,
            cors_origin: origin,
            ..Default::default()
        };
        write_http(&mut self.out, status, &b, &meta);
        self.write_out().await
    }
}

/// The answer's headers as the request asks: keep-alive or not, its Origin echoed, no body for `HEAD`.
#[inline]
fn answer_meta<'a>(head: &'a RequestHead, keep_alive: bool, extra: &'a [&'a str]) -> ResponseMeta<'a> {
    ResponseMeta {
        keep_alive,
        cors_origin: head.origin.as_deref(),
        extra,
        omit_body: head.method == Some(Method::Head),
        content_type: None,
        raw: &[],
    }
}

/// The `204` answer to an allowed preflight: the methods and headers a browser may send.
fn write_preflight(out: &mut Vec<u8>, head: &RequestHead, keep_alive: bool) {
    let extra = [
        "Access-Control-Allow-Methods: POST, GET, OPTIONS",
        "Access-Control-Allow-Headers: content-type, authorization, x-api-key, x-prism-session",
        "Access-Control-Max-Age: 86400",
    ];
    let origin = head.origin.as_deref();
    let meta = ResponseMeta {
        cors_origin: Some(origin.unwrap_or(b"*")),
        ..answer_meta(head, keep_alive, &extra)
    };
    write_http(out, 204, b"", &meta);
}
