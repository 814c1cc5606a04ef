//! `FakeProvider`: a real HTTP/1.1 JSON-RPC server on loopback that plays an upstream node and misbehaves
//! on request.
//!
//! One thread accepts; one thread serves each connection (keep-alive, pipelining, Content-Length or chunked
//! request bodies). Everything is recorded for assertions: every HTTP request, every JSON-RPC call (batch
//! items one by one), calls per method, TCP connections accepted and currently open.
//!
//! Default answers (see [`FakeProvider::set_reply`] to override any method):
//! - `eth_chainId` → the chain id hex (default `"0x1237"` = 4663, [`FakeProvider::set_chain_id`]);
//! - `eth_blockNumber` → the head as hex ([`FakeProvider::set_head`], default 0x100);
//! - `echo` → `{"method":<method bytes>,"params":<params bytes exactly as received, or null>}`: spliced
//!   from the raw request bytes, never re-serialised, so tests can assert byte transparency;
//! - anything else → `"0x0"`.
//!
//! Every answer carries the request's `id` bytes exactly as received (except in [`Mode::WrongId`]).
//! A single notification (no `id`) or a batch of only notifications is answered `200` with an empty body,
//! as geth does. `[]` gets one -32600 object; a body that is not JSON gets -32700.
//!
//! Misbehaviour is a [`Mode`], set for every following request with [`FakeProvider::set_mode`] or for the
//! next N HTTP requests only with [`FakeProvider::set_mode_for_next`]. Idle keep-alive connections can be
//! dropped on demand ([`FakeProvider::close_idle_connections`]) or after a timeout
//! ([`FakeProvider::set_idle_timeout`]).

use super::http::{self, Request, Wire};
use super::json;
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Methods Prism may send on its own (chain id check at start-up, head and health probes). Their counts
/// are not a measure of client traffic: see [`FakeProvider::client_calls`].
pub const BACKGROUND_METHODS: &[&str] = &[
    "eth_chainId",
    "eth_blockNumber",
    "eth_getBlockByNumber",
    "eth_syncing",
    "net_version",
    "web3_clientVersion",
    "getSlot",
    "getHealth",
    "getVersion",
];

/// How the fake answers an HTTP request. Modes apply per HTTP request (a batch is one request).
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Answer correctly.
    Normal,
    /// Wait this long before answering (correctly).
    Slow(Duration),
    /// Answer this HTTP status with a short `text/plain` body (429, 500, 503 ...); the connection stays open.
    Status(u16),
    /// Answer this HTTP status with this body (`application/json` when it starts with `{`).
    StatusBody(u16, String),
    /// Read the request, then close the socket abruptly without answering (SO_LINGER 0 → RST).
    Reset,
    /// Read the request, then close the socket with an orderly FIN without answering.
    CloseWithoutAnswer,
    /// Read the request and never answer; the socket stays open until the client closes it or the fake
    /// is dropped.
    Hang,
    /// Report `head - n` for `eth_blockNumber`; otherwise answer correctly.
    LagHead(u64),
    /// Report `head - k` for `eth_blockNumber`, `k` drawn afresh in `0..=n` for every call, as a provider
    /// whose load balancer spreads calls over nodes at slightly different heights does (its reported
    /// height can go down from one call to the next); otherwise answer correctly.
    JitterHead(u64),
    /// Answer with an id different from the request's (numeric ids + 1, others `"wrong-id"`).
    WrongId,
    /// Answer 200 with a broken body.
    Garbage(Garbage),
    /// Answer correctly with `Transfer-Encoding: chunked`, the body split in several chunks, each its own
    /// write.
    Chunked,
    /// Answer correctly with `Connection: close`, then close the socket.
    CloseAfterResponse,
    /// Answer every call with this JSON-RPC error (`{"code":code,"message":message}`), HTTP 200.
    RpcError { code: i64, message: String },
    /// Answer 200 with exactly this body, after replacing `{id}` with the request's raw id bytes (the first
    /// call's, for a batch; `null` when there is none). For odd-but-valid upstream responses.
    Raw(String),
    /// Every other HTTP request answers this status (as [`Mode::Status`]), the others correctly: a provider
    /// failing half its calls, exactly, whatever the mix of probes and client calls.
    FailHalf(u16),
}

/// Kinds of broken 200 bodies for [`Mode::Garbage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Garbage {
    /// An HTML error page (`text/html`), as load balancers send.
    Html,
    /// Plain text that is not JSON, labelled `application/json`.
    NotJson,
    /// JSON cut in the middle; Content-Length matches what is sent.
    TruncatedJson,
    /// Content-Length promises more bytes than are sent, then the socket is closed.
    ShortBody,
    /// Valid JSON that is not a JSON-RPC response (`{"hello":"world"}`).
    NotJsonRpc,
}

/// An override for a method's answer: raw JSON bytes placed as `result` or as `error`.
#[derive(Clone, Debug)]
pub enum Reply {
    Result(String),
    Error(String),
}

/// One JSON-RPC call as the fake received it (batch items are recorded one by one).
#[derive(Clone, Debug)]
pub struct Call {
    /// Index of the TCP connection (0-based, in accept order).
    pub conn: usize,
    /// Decoded method name ("" when absent or not a string).
    pub method: String,
    /// Raw id bytes; `None` for a notification.
    pub id: Option<Vec<u8>>,
    /// Raw params bytes, exactly as received.
    pub params: Option<Vec<u8>>,
    /// The raw bytes of the whole call object.
    pub raw: Vec<u8>,
    /// Whether it arrived inside a batch.
    pub in_batch: bool,
    /// When the fake received it (before any delay or hang).
    pub at: Instant,
}

/// One HTTP request as the fake received it.
#[derive(Clone, Debug)]
pub struct HttpRecord {
    pub conn: usize,
    pub request: Request,
}

#[derive(Default)]
struct ConnSlot {
    stream: Option<TcpStream>,
    idle: bool,
}

struct State {
    mode: Mode,
    next: VecDeque<Mode>,
    chain_id: String,
    head: u64,
    replies: HashMap<String, Reply>,
    delays: HashMap<String, Duration>,
    method_modes: HashMap<String, Mode>,
    idle_timeout: Option<Duration>,
    calls: Vec<Call>,
    http: Vec<HttpRecord>,
    per_method: HashMap<String, usize>,
    accepted: usize,
    conns: HashMap<usize, ConnSlot>,
    /// xorshift state for `Mode::JitterHead`.
    rng: u64,
    /// Flips on every request in `Mode::FailHalf`.
    fail_next: bool,
    /// History this node keeps ([`FakeProvider::set_floor`]), tags ([`FakeProvider::set_tag`]) and whether
    /// `eth_getBlockByNumber` at a number answers a block ([`FakeProvider::serve_blocks`]).
    floor: u64,
    tags: HashMap<String, u64>,
    blocks: bool,
    /// [`FakeProvider::require_header`]: the header and the values it accepts; requests without one of
    /// them are answered 401 and counted in `rejected`.
    required: Option<(String, Vec<String>)>,
    rejected: usize,
}

struct Inner {
    state: Mutex<State>,
    changed: Condvar,
    shutdown: AtomicBool,
    /// Set by `stop_listening`: the accept loop ends and drops the listener.
    stop_accepting: AtomicBool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps `d`, returning early (false) when the fake is being dropped.
    fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = self.lock();
        loop {
            if self.shutdown.load(Ordering::SeqCst) {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            g = self.changed.wait_timeout(g, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

pub struct FakeProvider {
    addr: SocketAddr,
    inner: Arc<Inner>,
    accept: Option<JoinHandle<()>>,
}

impl FakeProvider {
    /// Starts a provider on 127.0.0.1:0 with default behaviour (chain id 0x1237, head 0x100).
    pub fn start() -> FakeProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake provider");
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                mode: Mode::Normal,
                next: VecDeque::new(),
                chain_id: "0x1237".into(),
                head: 0x100,
                replies: HashMap::new(),
                delays: HashMap::new(),
                method_modes: HashMap::new(),
                idle_timeout: None,
                calls: Vec::new(),
                http: Vec::new(),
                per_method: HashMap::new(),
                accepted: 0,
                conns: HashMap::new(),
                rng: 0x9E37_79B9_7F4A_7C15 ^ u64::from(addr.port()),
                fail_next: false,
                floor: 0,
                tags: HashMap::new(),
                blocks: false,
                required: None,
                rejected: 0,
            }),
            changed: Condvar::new(),
            shutdown: AtomicBool::new(false),
            stop_accepting: AtomicBool::new(false),
        });
        let inner2 = inner.clone();
        let accept = thread::Builder::new()
            .name(format!("fake-{}", addr.port()))
            .spawn(move || accept_loop(listener, inner2))
            .unwrap();
        FakeProvider {
            addr,
            inner,
            accept: Some(accept),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    // ---- behaviour -------------------------------------------------------------------------------

    /// Sets the mode for every following HTTP request (and clears any `set_mode_for_next` queue).
    pub fn set_mode(&self, mode: Mode) {
        let mut g = self.inner.lock();
        g.mode = mode;
        g.next.clear();
        self.inner.changed.notify_all();
    }
    /// Uses `mode` for the next `n` HTTP requests, then falls back to the mode set by `set_mode`.
    pub fn set_mode_for_next(&self, n: usize, mode: Mode) {
        let mut g = self.inner.lock();
        g.next.extend(std::iter::repeat_n(mode, n));
    }
    pub fn mode(&self) -> Mode {
        self.inner.lock().mode.clone()
    }
    /// Uses `mode` for every HTTP request that contains a call to `method` (the first such method of a
    /// batch wins), ahead of `set_mode_for_next` and `set_mode`: e.g. fail client reads with
    /// `Mode::Status(500)` while Prism's `eth_blockNumber` probes keep succeeding.
    pub fn set_method_mode(&self, method: &str, mode: Mode) {
        let mut g = self.inner.lock();
        g.method_modes.insert(method.to_string(), mode);
        self.inner.changed.notify_all();
    }
    /// Removes the per-method mode of `method` (see [`FakeProvider::set_method_mode`]).
    pub fn clear_method_mode(&self, method: &str) {
        self.inner.lock().method_modes.remove(method);
    }
    /// Chain id as a hex string, e.g. "0x1237".
    /// Answers 401 to every request that does not carry `name` with one of `accepted` as its value (an
    /// API key header, `Authorization: Basic ...`); `accepted` empty lifts the requirement.
    pub fn require_header(&self, name: &str, accepted: &[&str]) {
        let mut g = self.inner.lock();
        g.required =
            (!accepted.is_empty()).then(|| (name.to_string(), accepted.iter().map(|a| a.to_string()).collect()));
    }

    /// Requests answered 401 by [`FakeProvider::require_header`].
    pub fn rejected(&self) -> usize {
        self.inner.lock().rejected
    }

    pub fn set_chain_id(&self, hex: &str) {
        self.inner.lock().chain_id = hex.to_string();
    }
    pub fn set_head(&self, head: u64) {
        self.inner.lock().head = head;
    }
    pub fn head(&self) -> u64 {
        self.inner.lock().head
    }
    /// A pruned node: state reads (`eth_getBalance`, `eth_call`, `eth_getCode`, `eth_getStorageAt`,
    /// `eth_getTransactionCount`, `eth_getProof`) at a block number below `floor` answer geth's
    /// "missing trie node" error; 0 = an archive node (the default).
    pub fn set_floor(&self, floor: u64) {
        self.inner.lock().floor = floor;
    }
    /// `eth_getBlockByNumber(tag, _)` answers a block whose `number` is `n` (`"safe"`, `"finalized"`). Once
    /// a tag is set (or blocks are served), a tag never set answers Erigon's "finalized block not found", as
    /// a node that does not serve it does. [`FakeProvider::set_reply`] on the method overrides both.
    pub fn set_tag(&self, tag: &str, n: u64) {
        self.inner.lock().tags.insert(tag.to_string(), n);
    }
    /// `eth_getBlockByNumber(number, _)` answers a block `{"number","hash"}` (the hash a function of the
    /// number, the same on every fake) up to the head, `null` above it; `"latest"` the head's block.
    pub fn serve_blocks(&self) {
        self.inner.lock().blocks = true;
    }
    /// Answers `method` with this raw `result` / `error` JSON, byte for byte.
    pub fn set_reply(&self, method: &str, reply: Reply) {
        self.inner.lock().replies.insert(method.to_string(), reply);
    }
    /// Delays every answer to a request that contains a call to `method` (on top of the mode).
    pub fn set_delay(&self, method: &str, d: Duration) {
        self.inner.lock().delays.insert(method.to_string(), d);
    }
    /// Closes keep-alive connections that stay idle (between requests) longer than `d`; `None` = never.
    pub fn set_idle_timeout(&self, d: Option<Duration>) {
        self.inner.lock().idle_timeout = d;
    }
    /// Closes (FIN) every connection that is idle between requests right now; returns how many.
    pub fn close_idle_connections(&self) -> usize {
        let g = self.inner.lock();
        let mut n = 0;
        for slot in g.conns.values() {
            if slot.idle {
                if let Some(s) = &slot.stream {
                    let _ = s.shutdown(Shutdown::Both);
                    n += 1;
                }
            }
        }
        n
    }

    /// Closes the listening socket and every open connection, so that new connections are refused
    /// (`ECONNREFUSED`), while the records stay readable. Waits until a connect is refused.
    pub fn stop_listening(&self) {
        self.inner.stop_accepting.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)); // wake accept()
        {
            let g = self.inner.lock();
            for slot in g.conns.values() {
                if let Some(s) = &slot.stream {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
            assert!(Instant::now() < deadline, "the fake still accepts connections");
            thread::sleep(Duration::from_millis(5));
        }
    }

    // ---- observations ----------------------------------------------------------------------------

    /// Every JSON-RPC call received, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.lock().calls.clone()
    }
    /// Calls to `method` received so far.
    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        self.inner
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }
    /// How many calls to `method` were received.
    pub fn count(&self, method: &str) -> usize {
        self.inner.lock().per_method.get(method).copied().unwrap_or(0)
    }
    /// Calls other than the [`BACKGROUND_METHODS`] Prism sends on its own (start-up checks, health
    /// probes): what clients caused. Tests that count upstream traffic use methods outside that list.
    pub fn client_calls(&self) -> Vec<Call> {
        self.inner
            .lock()
            .calls
            .iter()
            .filter(|c| !BACKGROUND_METHODS.contains(&c.method.as_str()))
            .cloned()
            .collect()
    }
    /// Total calls received (batch items counted one by one), Prism's own probes included.
    pub fn total_calls(&self) -> usize {
        self.inner.lock().calls.len()
    }
    /// Every HTTP request received.
    pub fn http_requests(&self) -> Vec<HttpRecord> {
        self.inner.lock().http.clone()
    }
    /// TCP connections accepted so far.
    pub fn connections_accepted(&self) -> usize {
        self.inner.lock().accepted
    }
    /// TCP connections currently open (served by a connection thread).
    pub fn open_connections(&self) -> usize {
        self.inner.lock().conns.len()
    }
    /// Forgets recorded calls, requests and counters (the accepted-connection count included).
    pub fn reset_stats(&self) {
        let mut g = self.inner.lock();
        g.calls.clear();
        g.http.clear();
        g.per_method.clear();
        g.accepted = 0;
    }

    /// Waits until `pred` holds over the recorded state, or `timeout` passes; returns whether it held.
    pub fn wait_until(&self, timeout: Duration, mut pred: impl FnMut(&FakeView) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.inner.lock();
        loop {
            let view = FakeView {
                calls: &g.calls,
                per_method: &g.per_method,
                accepted: g.accepted,
                open: g.conns.len(),
            };
            if pred(&view) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self
                .inner
                .changed
                .wait_timeout(g, left.min(Duration::from_millis(50)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
    /// Waits until at least `n` calls to `method` were received.
    pub fn wait_for_calls(&self, method: &str, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |v| v.count(method) >= n)
    }
}

/// A read-only view of the fake's records, for [`FakeProvider::wait_until`].
pub struct FakeView<'a> {
    pub calls: &'a [Call],
    per_method: &'a HashMap<String, usize>,
    pub accepted: usize,
    pub open: usize,
}

impl FakeView<'_> {
    pub fn count(&self, method: &str) -> usize {
        self.per_method.get(method).copied().unwrap_or(0)
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        {
            let g = self.inner.lock();
            for slot in g.conns.values() {
                if let Some(s) = &slot.stream {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
            self.inner.changed.notify_all();
        }
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)); // wake accept()
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    for stream in listener.incoming() {
        if inner.shutdown.load(Ordering::SeqCst) || inner.stop_accepting.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        let id = {
            let mut g = inner.lock();
            let id = g.accepted;
            g.accepted += 1;
            g.conns.insert(
                id,
                ConnSlot {
                    stream: stream.try_clone().ok(),
                    idle: true,
                },
            );
            inner.changed.notify_all();
            id
        };
        let inner = inner.clone();
        let _ = thread::Builder::new().name(format!("fake-conn-{id}")).spawn(move || {
            serve_conn(&inner, id, stream);
            // The registry holds a dup of the socket: drop it so closing really closes.
            inner.lock().conns.remove(&id);
            inner.changed.notify_all();
        });
    }
}

const GENERIC_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one connection until it ends. The socket really closes once both this handle and the registry's
/// dup are gone: the caller removes the dup after return; paths that must close *now* call `unregister`.
fn serve_conn(inner: &Arc<Inner>, id: usize, stream: TcpStream) {
    let mut wire = Wire::new(stream);
    loop {
        // Idle between requests: honour the idle timeout while no byte of the next request is here.
        if wire.buffered() == 0 {
            let idle = inner.lock().idle_timeout;
            let _ = wire.stream.set_read_timeout(idle.or(Some(GENERIC_READ_TIMEOUT)));
            set_idle(inner, id, true);
            match wire.fill() {
                Ok(0) | Err(_) => return, // EOF, idle timeout, shutdown(): close
                Ok(_) => {}
            }
        }
        set_idle(inner, id, false);
        let _ = wire.stream.set_read_timeout(Some(GENERIC_READ_TIMEOUT));
        let req = match http::read_request(&mut wire) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) if e.kind() == ErrorKind::InvalidData => {
                let _ = write_response(&mut wire.stream, 400, "text/plain", b"bad request", true, false);
                return;
            }
            Err(_) => return,
        };
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let (mode, delay, plan) = {
            let mut g = inner.lock();
            let by_method = if g.method_modes.is_empty() {
                None
            } else {
                request_methods(&req.body)
                    .iter()
                    .find_map(|m| g.method_modes.get(m))
                    .cloned()
            };
            let mode = match by_method {
                Some(m) => m,
                None => g.next.pop_front().unwrap_or_else(|| g.mode.clone()),
            };
            let authorized = g
                .required
                .as_ref()
                .is_none_or(|(name, ok)| req.header(name).is_some_and(|v| ok.iter().any(|o| o == v)));
            let mode = if authorized {
                mode
            } else {
                g.rejected += 1;
                Mode::StatusBody(401, r#"{"error":"invalid API key"}"#.to_string())
            };
            let mode = match mode {
                Mode::FailHalf(code) => {
                    g.fail_next = !g.fail_next;
                    if g.fail_next {
                        Mode::Status(code)
                    } else {
                        Mode::Normal
                    }
                }
                m => m,
            };
            let plan = answer(&mut g, id, &req, &mode);
            let delay = plan.methods.iter().filter_map(|m| g.delays.get(m)).max().copied();
            g.http.push(HttpRecord {
                conn: id,
                request: req.clone(),
            });
            inner.changed.notify_all();
            (mode, delay, plan)
        };
        if let Some(d) = delay {
            if !inner.sleep(d) {
                return;
            }
        }
        let close = req.wants_close();
        let s = &mut wire.stream;
        let keep = match mode {
            Mode::Slow(d) => inner.sleep(d) && send_plan(s, &plan, close, false),
            Mode::Status(code) => {
                let body = format!("fake provider: HTTP {code}");
                write_response(s, code, "text/plain", body.as_bytes(), close, false)
            }
            Mode::StatusBody(code, body) => {
                let ct = if body.trim_start().starts_with(['{', '[']) {
                    "application/json"
                } else {
                    "text/plain"
                };
                write_response(s, code, ct, body.as_bytes(), close, false)
            }
            Mode::Reset => {
                unregister(inner, id);
                let _ = socket2::SockRef::from(&wire.stream).set_linger(Some(Duration::ZERO));
                return; // drop → RST
            }
            Mode::CloseWithoutAnswer => {
                unregister(inner, id);
                let _ = wire.stream.shutdown(Shutdown::Both);
                return;
            }
            Mode::Hang => {
                hang(inner, &mut wire);
                return;
            }
            Mode::Garbage(kind) => {
                let ok = match kind {
                    Garbage::Html => write_response(
                        s,
                        200,
                        "text/html",
                        b"<html><head><title>502 Bad Gateway</title></head><body>bad gateway</body></html>",
                        close,
                        false,
                    ),
                    Garbage::NotJson => write_response(s, 200, "application/json", b"this is not json", close, false),
                    Garbage::TruncatedJson => {
                        let full = plan
                            .body
                            .clone()
                            .unwrap_or_else(|| b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x0\"}".to_vec());
                        let cut = &full[..full.len() / 2];
                        write_response(s, 200, "application/json", cut, close, false)
                    }
                    Garbage::ShortBody => {
                        let full = plan
                            .body
                            .clone()
                            .unwrap_or_else(|| b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x0\"}".to_vec());
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                            full.len() + 100
                        );
                        let _ = s.write_all(head.as_bytes());
                        let _ = s.write_all(&full);
                        unregister(inner, id);
                        let _ = wire.stream.shutdown(Shutdown::Both);
                        return;
                    }
                    Garbage::NotJsonRpc => {
                        write_response(s, 200, "application/json", b"{\"hello\":\"world\"}", close, false)
                    }
                };
                ok
            }
            Mode::Chunked => send_plan(s, &plan, close, true),
            Mode::Raw(template) => {
                let id = plan.first_id.as_deref().unwrap_or(b"null");
                let body = template.replace("{id}", &String::from_utf8_lossy(id));
                write_response(s, 200, "application/json", body.as_bytes(), close, false)
            }
            Mode::CloseAfterResponse => {
                let _ = send_plan(s, &plan, true, false);
                false
            }
            Mode::Normal
            | Mode::LagHead(_)
            | Mode::JitterHead(_)
            | Mode::WrongId
            | Mode::RpcError { .. }
            | Mode::FailHalf(_) => send_plan(s, &plan, close, false),
        };
        if !keep || close {
            unregister(inner, id);
            let _ = wire.stream.shutdown(Shutdown::Write);
            return;
        }
    }
}

fn set_idle(inner: &Inner, id: usize, idle: bool) {
    if let Some(slot) = inner.lock().conns.get_mut(&id) {
        slot.idle = idle;
    }
}

/// Drops the registry's dup of the socket, so that dropping the connection's own handle closes it at once.
fn unregister(inner: &Inner, id: usize) {
    if let Some(slot) = inner.lock().conns.get_mut(&id) {
        slot.stream = None;
        slot.idle = false;
    }
}

/// Holds the connection without answering until the client closes it or the fake is dropped.
fn hang(inner: &Inner, wire: &mut Wire) {
    let _ = wire.stream.set_read_timeout(Some(Duration::from_millis(50)));
    loop {
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        match wire.fill() {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// The method names of a request body (a single call or each item of a batch), without recording them.
fn request_methods(body: &[u8]) -> Vec<String> {
    let Ok(top) = json::whole(body) else {
        return Vec::new();
    };
    let items = if top.first() == Some(&b'[') {
        json::array(top).unwrap_or_default()
    } else {
        vec![top]
    };
    items
        .into_iter()
        .filter_map(|item| json::field(item, "method"))
        .filter_map(|m| serde_json::from_slice::<String>(m).ok())
        .collect()
}

/// What to send for one request in the non-broken modes.
struct Plan {
    status: u16,
    /// `None`: empty 200 (only notifications).
    body: Option<Vec<u8>>,
    methods: Vec<String>,
    /// Raw id of the request's first call that has one.
    first_id: Option<Vec<u8>>,
}

fn send_plan(s: &mut TcpStream, plan: &Plan, close: bool, chunked: bool) -> bool {
    let body = plan.body.as_deref().unwrap_or(b"");
    write_response(s, plan.status, "application/json", body, close, chunked)
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Writes one response; returns false when the write failed.
fn write_response(s: &mut TcpStream, status: u16, ctype: &str, body: &[u8], close: bool, chunked: bool) -> bool {
    let mut head = format!("HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\n", reason(status));
    if close {
        head.push_str("Connection: close\r\n");
    }
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        if s.write_all(head.as_bytes()).is_err() {
            return false;
        }
        // Several chunks, each its own write (TCP_NODELAY is set), so the client sees them apart.
        let n = body.len();
        let cuts = [0, n / 3, 2 * n / 3, n];
        for w in cuts.windows(2) {
            let part = &body[w[0]..w[1]];
            if part.is_empty() {
                continue;
            }
            let mut c = format!("{:x}\r\n", part.len()).into_bytes();
            c.extend_from_slice(part);
            c.extend_from_slice(b"\r\n");
            if s.write_all(&c).and_then(|_| s.flush()).is_err() {
                return false;
            }
        }
        return s.write_all(b"0\r\n\r\n").and_then(|_| s.flush()).is_ok();
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut all = head.into_bytes();
    all.extend_from_slice(body);
    s.write_all(&all).and_then(|_| s.flush()).is_ok()
}

/// Records the request's calls and computes the correct answer (with Mode tweaks that keep it well formed).
fn answer(g: &mut State, conn: usize, req: &Request, mode: &Mode) -> Plan {
    let body = &req.body;
    let Ok(top) = json::whole(body) else {
        return Plan {
            status: 200,
            body: Some(
                b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}".to_vec(),
            ),
            methods: vec![],
            first_id: None,
        };
    };
    let mut methods = Vec::new();
    let start = g.calls.len();
    if top.first() == Some(&b'[') {
        let items = json::array(top).unwrap_or_default();
        if items.is_empty() {
            return Plan {
                status: 200,
                body: Some(
                    b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"empty batch\"}}"
                        .to_vec(),
                ),
                methods,
                first_id: None,
            };
        }
        let mut out = Vec::new();
        for item in items {
            if let Some(a) = answer_call(g, conn, item, true, mode, &mut methods) {
                out.push(a);
            }
        }
        let body = if out.is_empty() { None } else { Some(join_array(&out)) };
        Plan {
            status: 200,
            body,
            methods,
            first_id: first_id(g, start),
        }
    } else {
        let a = answer_call(g, conn, top, false, mode, &mut methods);
        Plan {
            status: 200,
            body: a,
            methods,
            first_id: first_id(g, start),
        }
    }
}

/// The raw id of the first call recorded since index `start` that has one.
fn first_id(g: &State, start: usize) -> Option<Vec<u8>> {
    g.calls[start..].iter().find_map(|c| c.id.clone())
}

fn join_array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![b'['];
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            v.push(b',');
        }
        v.extend_from_slice(it);
    }
    v.push(b']');
    v
}

/// The block a state read or `eth_getBlockByNumber` names (a hex number or a tag), by its position.
fn block_param(method: &str, params: Option<&[u8]>) -> Option<serde_json::Value> {
    let index = match method {
        "eth_getBlockByNumber" => 0,
        "eth_getBalance" | "eth_call" | "eth_getCode" | "eth_getTransactionCount" => 1,
        "eth_getStorageAt" | "eth_getProof" => 2,
        _ => return None,
    };
    let params: serde_json::Value = serde_json::from_slice(params?).ok()?;
    params.get(index).cloned()
}

/// Answers of a node with a history floor, finality tags and blocks (see `set_floor`, `set_tag`,
/// `serve_blocks`); `None` when none of that applies.
fn chain_answer(g: &State, method: &str, params: Option<&[u8]>) -> Option<(&'static str, Vec<u8>)> {
    let block = block_param(method, params)?;
    let name = block.as_str()?;
    let number = name.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok());
    let block_json = |n: u64| format!(r#"{{"number":"0x{n:x}","hash":"0x{n:064x}"}}"#).into_bytes();
    match (method, number) {
        ("eth_getBlockByNumber", None) if name == "safe" || name == "finalized" => {
            if g.replies.contains_key(method) {
                return None;
            }
            Some(match g.tags.get(name) {
                Some(&n) => ("result", block_json(n)),
                None if g.tags.is_empty() && !g.blocks => return None,
                None => ("error", br#"{"code":-32000,"message":"finalized block not found"}"#.to_vec()),
            })
        }
        ("eth_getBlockByNumber", None) if g.blocks && name == "latest" => Some(("result", block_json(g.head))),
        ("eth_getBlockByNumber", Some(n)) if g.blocks => Some(if n <= g.head {
            ("result", block_json(n))
        } else {
            ("result", b"null".to_vec())
        }),
        ("eth_getBlockByNumber", _) => None,
        (_, Some(n)) if n < g.floor => Some((
            "error",
            format!(
                r#"{{"code":-32000,"message":"missing trie node {n:064x} (path ) state 0x{n:064x} is not available, not found"}}"#
            )
            .into_bytes(),
        )),
        _ => None,
    }
}

/// Records one call and returns its answer (None for a notification).
fn answer_call(
    g: &mut State,
    conn: usize,
    raw: &[u8],
    in_batch: bool,
    mode: &Mode,
    methods: &mut Vec<String>,
) -> Option<Vec<u8>> {
    let Ok(fields) = json::object(raw) else {
        return Some(
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"}}".to_vec(),
        );
    };
    let get = |k: &str| fields.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.to_vec());
    let id = get("id");
    let params = get("params");
    let method_raw = get("method");
    let method: String = method_raw
        .as_deref()
        .and_then(|m| serde_json::from_slice(m).ok())
        .unwrap_or_default();
    g.calls.push(Call {
        conn,
        method: method.clone(),
        id: id.clone(),
        params: params.clone(),
        raw: raw.to_vec(),
        in_batch,
        at: Instant::now(),
    });
    *g.per_method.entry(method.clone()).or_insert(0) += 1;
    methods.push(method.clone());
    let id = id?; // notification: nothing to answer

    let out_id = if *mode == Mode::WrongId {
        match std::str::from_utf8(&id).ok().and_then(|s| s.parse::<u64>().ok()) {
            Some(n) => (n + 1).to_string().into_bytes(),
            None => b"\"wrong-id\"".to_vec(),
        }
    } else {
        id
    };
    let (key, value): (&str, Vec<u8>) = if let Mode::RpcError { code, message } = mode {
        (
            "error",
            format!(
                "{{\"code\":{code},\"message\":{}}}",
                serde_json::to_string(message).unwrap()
            )
            .into_bytes(),
        )
    } else if let Some(answer) = chain_answer(g, &method, params.as_deref()) {
        answer
    } else if let Some(r) = g.replies.get(&method) {
        match r {
            Reply::Result(s) => ("result", s.clone().into_bytes()),
            Reply::Error(s) => ("error", s.clone().into_bytes()),
        }
    } else {
        let v = match method.as_str() {
            "eth_chainId" => format!("\"{}\"", g.chain_id).into_bytes(),
            "eth_blockNumber" => {
                let lag = match mode {
                    Mode::LagHead(n) => *n,
                    Mode::JitterHead(n) => {
                        g.rng ^= g.rng << 13;
                        g.rng ^= g.rng >> 7;
                        g.rng ^= g.rng << 17;
                        g.rng % (n + 1)
                    }
                    _ => 0,
                };
                format!("\"0x{:x}\"", g.head.saturating_sub(lag)).into_bytes()
            }
            "echo" => {
                let mut v = b"{\"method\":".to_vec();
                v.extend_from_slice(method_raw.as_deref().unwrap_or(b"null"));
                v.extend_from_slice(b",\"params\":");
                v.extend_from_slice(params.as_deref().unwrap_or(b"null"));
                v.push(b'}');
                v
            }
            _ => b"\"0x0\"".to_vec(),
        };
        ("result", v)
    };
    let mut v = b"{\"jsonrpc\":\"2.0\",\"id\":".to_vec();
    v.extend_from_slice(&out_id);
    v.extend_from_slice(format!(",\"{key}\":").as_bytes());
    v.extend_from_slice(&value);
    v.push(b'}');
    Some(v)
}
