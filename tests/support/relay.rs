//! A real EVM development node (ganache, from `tests/evm/node_modules`) and fault-injecting relays in
//! front of it, so several "providers" serve one real chain.
//!
//! - [`node`]: one ganache per test binary (chain id 4663, deterministic accounts, a block every second),
//!   started on first use. It is spawned by a keeper thread that lives as long as the process, with
//!   `PR_SET_PDEATHSIG = SIGKILL`, so it dies with the test binary even though a static is never dropped.
//! - [`Relay`]: a real HTTP/1.1 + WebSocket server on loopback (same port for both, like the node) that
//!   forwards to the node and misbehaves on request ([`Fault`]): added latency, HTTP 5xx, HTTP 429 with a
//!   JSON-RPC -32005 body, connection resets (before or after forwarding), hanging after forwarding, a
//!   lagging head ([`Relay::set_lag`]: `eth_blockNumber`, `"latest"` params and `newHeads` served `k` blocks
//!   behind, a sudden drop; [`Relay::set_stalled`]: the head frozen where it is, so the lag grows a block at a
//!   time), being killed and restarted on the same port ([`Relay::kill`], [`Relay::restart`]), and a one-shot
//!   trap for one method ([`Relay::reset_after_next`]: only the next request carrying that call loses its answer),
//!   and `newHeads` as geth announces a reorg, only its new head ([`Relay::set_only_new_heads`]).
//! - [`Ledger`]: shared by a set of relays; records every write each relay forwarded to the node
//!   (`eth_sendRawTransaction` and `eth_sendRawTransactionSync` by its keccak256 hash, `eth_sendTransaction`
//!   by its params), so a test can
//!   prove no submission reached the chain twice.
#![allow(dead_code)]

use super::http::{self, Conn, Wire};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};
use tungstenite::protocol::Role;
use tungstenite::{Message, WebSocket};

/// ganache's deterministic accounts (mnemonic "myth like bonus scare over problem client lizard pioneer
/// submit female collect"), unlocked on the node, 1000 ETH each. The suite's files share one node, so each
/// account that sends has one user: 0 and 3 lost_answer.mjs, 1 and 2 flow.mjs / flow.py, 4, 5, 6, 8 and 9
/// sync_submit.rs's presigned nonce-0 transfers (tests/evm/presigned.json), 7 logs.mjs (real_clients.rs).
/// chaos.rs (5, 6) is a binary of its own, with its own node.
pub const DEV_ACCOUNTS: &[&str] = &[
    "0x90f8bf6a479f320ead074411a4b0e7944ea8c9c1",
    "0xffcf8fdee72ac11b5c542428b35eef5769c409f0",
    "0x22d491bde2303f2f43325b2108d26f1eaba1e32b",
    "0xe11ba2b4d45eaed5996cd0823791e0c93114882d",
    "0xd03ea8624c8c5987235048901fb614fdca89b117",
    "0x95ced938f7991cd0dfcb48f0a06a40fa1af46ebc",
    "0x3e5e9111ae8eb78fe1cc3bb8915d5d461f3ef9a9",
    "0x28a8746e75304c0780e011bed21c72cd78cd535e",
    "0xaca94ef8bd5ffee41947b4585a84bda5a3d3da6e",
    "0x1df62f291b2e969fb0849d99d9ce41e2f137006e",
];

/// `tests/evm` in the source tree.
pub fn evm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("evm")
}

/// The running dev node.
pub struct EvmNode {
    pub addr: SocketAddr,
    pub pid: u32,
    pub log: PathBuf,
}

impl EvmNode {
    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.addr)
    }
    /// One JSON-RPC call straight to the node (never through a relay); returns the whole response object.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}).to_string();
        let r = Conn::connect(self.addr).request(&http::post("/", body.as_bytes()));
        assert_eq!(r.status, 200, "node {method}: {}", r.describe());
        r.json()
    }
    /// The node's own head.
    pub fn head(&self) -> u64 {
        hex_u64(&self.rpc("eth_blockNumber", json!([]))["result"]).expect("node eth_blockNumber")
    }
}

/// `"0x1a"` → 26.
pub fn hex_u64(v: &Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// The dev node of this test binary, started on first use (panics with a hint when it is not installed).
pub fn node() -> &'static EvmNode {
    static NODE: OnceLock<EvmNode> = OnceLock::new();
    NODE.get_or_init(start_node)
}

fn start_node() -> EvmNode {
    let cli = evm_dir().join("node_modules/ganache/dist/node/cli.js");
    assert!(
        cli.exists(),
        "{} is missing: run scripts/deps/evm.sh (npm ci in tests/evm)",
        cli.display()
    );
    let port = super::prism::free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ganache-{}-{port}.log", std::process::id()));
    let (tx, rx) = std::sync::mpsc::channel();
    let log2 = log.clone();
    // The keeper thread spawns the node and then waits on it forever: PR_SET_PDEATHSIG fires when the
    // spawning *thread* ends, which here is when the test process ends (even on panic or abort).
    thread::Builder::new()
        .name("evm-node-keeper".into())
        .spawn(move || {
            let out = std::fs::File::create(&log2).unwrap();
            let mut cmd = Command::new("node");
            cmd.arg(&cli)
                .args(["--chain.chainId", "4663", "--wallet.deterministic", "--logging.quiet"])
                .args(["--miner.blockTime", "1", "--server.host", "127.0.0.1"])
                .args(["--server.port", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out);
            // SAFETY: the hook runs in the forked child before exec and only calls prctl, which is
            // async-signal-safe; it touches no memory of the parent.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = cmd.spawn().expect("spawn node (ganache)");
            tx.send(child.id()).unwrap();
            let st = child.wait();
            eprintln!("evm node exited: {st:?}");
        })
        .unwrap();
    let pid = rx.recv().expect("node keeper thread");
    let node = EvmNode { addr, pid, log };
    let ok = super::wait_until(Duration::from_secs(60), || {
        let Ok(mut c) = Conn::try_connect(addr) else {
            return false;
        };
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;
        c.send(&http::post("/", body)).is_ok() && c.read_response().map(|r| r.status == 200).unwrap_or(false)
    });
    assert!(
        ok,
        "ganache did not answer on {addr} within 60 s; log:\n{}",
        std::fs::read_to_string(&node.log).unwrap_or_default()
    );
    node
}

/// Every write forwarded to the node by the relays that share this ledger.
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<LedgerInner>>);

#[derive(Default)]
struct LedgerInner {
    /// key (tx hash for raw transactions, `send:<params>` for eth_sendTransaction) → relays that forwarded it
    writes: HashMap<String, Vec<String>>,
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }
    fn record(&self, key: String, relay: &str) {
        self.0
            .lock()
            .unwrap()
            .writes
            .entry(key)
            .or_default()
            .push(relay.to_string());
    }
    /// How many times this key (a `0x` tx hash, lower-case) was forwarded, over all relays.
    pub fn count(&self, key: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .writes
            .get(&key.to_lowercase())
            .map_or(0, Vec::len)
    }
    /// Writes forwarded in total.
    pub fn total(&self) -> usize {
        self.0.lock().unwrap().writes.values().map(Vec::len).sum()
    }
    /// Distinct writes forwarded.
    pub fn distinct(&self) -> usize {
        self.0.lock().unwrap().writes.len()
    }
    /// Keys forwarded more than once, with the relays that forwarded them.
    pub fn duplicates(&self) -> Vec<(String, Vec<String>)> {
        let g = self.0.lock().unwrap();
        let mut d: Vec<_> = g
            .writes
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        d.sort();
        d
    }
}

/// keccak256 of the bytes of a `0x` hex string, as `0x` + 64 lower-case hex digits.
pub fn keccak_hex(raw: &str) -> Option<String> {
    use tiny_keccak::{Hasher, Keccak};
    let hex = raw.strip_prefix("0x").unwrap_or(raw);
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    let mut k = Keccak::v256();
    k.update(&bytes?);
    let mut out = [0u8; 32];
    k.finalize(&mut out);
    Some(format!(
        "0x{}",
        out.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// How a relay treats each HTTP request (WebSocket traffic is only affected by lag and kill).
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Forward and answer.
    None,
    /// Wait this long, then forward and answer.
    Latency(Duration),
    /// Answer this HTTP status (500, 502, 503 ...) without forwarding.
    Status(u16),
    /// Answer HTTP 429 with a JSON-RPC -32005 "rate limit exceeded" body, without forwarding.
    Throttle,
    /// Read the request, then reset the connection (RST) without forwarding.
    Reset,
    /// Forward, then reset the connection instead of answering (the node did the work).
    ResetAfterForward,
    /// Forward, then never answer (until the fault changes or the relay is killed).
    HangAfterForward,
}

struct Inner {
    name: String,
    port: u16,
    node: SocketAddr,
    ledger: Ledger,
    fault: Mutex<Fault>,
    lag: AtomicU64,
    /// A frozen head (0 = following the node).
    frozen: AtomicU64,
    /// Bumped by `kill`: connection threads of an older generation end.
    generation: AtomicU64,
    alive: AtomicBool,
    /// Open client sockets (for `kill`).
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
    /// method → calls forwarded to the node.
    forwarded: Mutex<HashMap<String, usize>>,
    /// method → calls received (forwarded or not).
    received: Mutex<HashMap<String, usize>>,
    ws_accepted: AtomicU64,
    heads_sent: AtomicU64,
    /// Set by [`Relay::set_only_new_heads`]: `newHeads` frames below the highest one sent are dropped.
    only_new_heads: AtomicBool,
    /// The largest numeric JSON-RPC id received over HTTP.
    max_id: AtomicU64,
    /// Armed by [`Relay::reset_after_next`]: the method whose next forwarded request loses its answer.
    trap: Mutex<Option<String>>,
    /// Set by [`Relay::reset_after_every`]: every forwarded request carrying this method loses its answer.
    every: Mutex<Option<String>>,
    /// Set by [`Relay::set_logs_range_limit`]: the widest `eth_getLogs` range forwarded (0 = no limit), and
    /// how many were refused.
    logs_range: AtomicU64,
    logs_refused: AtomicU64,
}

/// A fault-injecting relay in front of the dev node. Stopped (listener and every connection) on drop.
pub struct Relay {
    inner: Arc<Inner>,
    flap: Mutex<Option<(Arc<AtomicBool>, thread::JoinHandle<()>)>>,
}

impl Relay {
    /// A relay named `name` in front of `node`, recording writes in `ledger`.
    pub fn start(name: &str, node: &EvmNode, ledger: &Ledger) -> Relay {
        let port = super::prism::free_port();
        let inner = Arc::new(Inner {
            name: name.to_string(),
            port,
            node: node.addr,
            ledger: ledger.clone(),
            fault: Mutex::new(Fault::None),
            lag: AtomicU64::new(0),
            frozen: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            alive: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(0),
            forwarded: Mutex::new(HashMap::new()),
            received: Mutex::new(HashMap::new()),
            ws_accepted: AtomicU64::new(0),
            heads_sent: AtomicU64::new(0),
            only_new_heads: AtomicBool::new(false),
            max_id: AtomicU64::new(0),
            trap: Mutex::new(None),
            every: Mutex::new(None),
            logs_range: AtomicU64::new(0),
            logs_refused: AtomicU64::new(0),
        });
        let r = Relay {
            inner,
            flap: Mutex::new(None),
        };
        r.restart();
        r
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }
    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.inner.port).into()
    }
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.addr())
    }
    /// `ws_url = "..."` for a Prism provider table.
    pub fn ws_option(&self) -> String {
        format!("ws_url = \"{}\"", self.ws_url())
    }

    pub fn set_fault(&self, f: Fault) {
        *self.inner.fault.lock().unwrap() = f;
    }
    pub fn fault(&self) -> Fault {
        self.inner.fault.lock().unwrap().clone()
    }
    /// One shot, for one method: the next HTTP request that carries a call of `method` (alone or in a batch)
    /// is forwarded to the node and then its connection is reset unanswered, as [`Fault::ResetAfterForward`]
    /// for that request only. Every other request (probes, reads, a later lookup of the same transaction) is
    /// served as the current [`Fault`] says; a request the fault answers without forwarding (429, 5xx, reset)
    /// leaves the trap armed. Disarmed once it fired ([`Relay::trap_armed`]).
    pub fn reset_after_next(&self, method: &str) {
        *self.inner.trap.lock().unwrap() = Some(method.to_string());
    }
    /// Like [`Relay::reset_after_next`] for every request carrying `method` until cleared with `None`: the
    /// writes lose their answers while reads, probes and lookups are served.
    pub fn reset_after_every(&self, method: Option<&str>) {
        *self.inner.every.lock().unwrap() = method.map(str::to_string);
    }
    /// Whether a [`Relay::reset_after_next`] trap is still waiting for its request.
    pub fn trap_armed(&self) -> bool {
        self.inner.trap.lock().unwrap().is_some()
    }
    /// Serve the head `k` blocks behind the node (0 = in step).
    pub fn set_lag(&self, k: u64) {
        self.inner.lag.store(k, Ordering::SeqCst);
    }
    /// `true`: serve the node's current head from now on, as a provider whose node stopped following the
    /// chain; `false`: follow the node again.
    pub fn set_stalled(&self, stalled: bool) {
        let h = if stalled { self.inner_head().max(1) } else { 0 };
        self.inner.frozen.store(h, Ordering::SeqCst);
    }
    fn inner_head(&self) -> u64 {
        node_head(self.inner.node, &mut None).unwrap_or(1)
    }

    /// Stops listening and cuts every open connection (HTTP and WebSocket), as a crashed provider.
    pub fn kill(&self) {
        kill(&self.inner);
    }

    /// Listens again on the same port (after [`Relay::kill`]; also how `start` begins).
    pub fn restart(&self) {
        restart(&self.inner);
    }

    /// `Some(period)`: killed and restarted every `period` from a background thread, until `None` (which
    /// leaves the relay up).
    pub fn set_flapping(&self, period: Option<Duration>) {
        if let Some((stop, t)) = self.flap.lock().unwrap().take() {
            stop.store(true, Ordering::SeqCst);
            let _ = t.join();
        }
        match period {
            Some(p) => {
                let stop = Arc::new(AtomicBool::new(false));
                let (inner, s2) = (self.inner.clone(), stop.clone());
                let t = thread::spawn(move || {
                    while !s2.load(Ordering::SeqCst) {
                        kill(&inner);
                        thread::sleep(p);
                        restart(&inner);
                        thread::sleep(p);
                    }
                });
                *self.flap.lock().unwrap() = Some((stop, t));
            }
            None => self.restart(),
        }
    }

    pub fn alive(&self) -> bool {
        self.inner.alive.load(Ordering::SeqCst)
    }
    /// Calls of `method` forwarded to the node.
    pub fn forwarded(&self, method: &str) -> usize {
        self.inner.forwarded.lock().unwrap().get(method).copied().unwrap_or(0)
    }
    /// Calls of `method` received (forwarded or refused by a fault).
    pub fn received(&self, method: &str) -> usize {
        self.inner.received.lock().unwrap().get(method).copied().unwrap_or(0)
    }
    /// The largest numeric JSON-RPC id received over HTTP (0 when none).
    pub fn max_id(&self) -> u64 {
        self.inner.max_id.load(Ordering::SeqCst)
    }
    /// `Some(n)`: an `eth_getLogs` over more than `n` blocks is refused as QuickNode does (HTTP 413, -32614
    /// "eth_getLogs is limited to a N range") without forwarding; `None`: every range is forwarded.
    pub fn set_logs_range_limit(&self, n: Option<u64>) {
        self.inner.logs_range.store(n.unwrap_or(0), Ordering::SeqCst);
    }
    /// `eth_getLogs` calls refused by [`Relay::set_logs_range_limit`].
    pub fn logs_refused(&self) -> u64 {
        self.inner.logs_refused.load(Ordering::SeqCst)
    }
    /// `true`: `newHeads` as geth sends a reorg, only the new head: a frame below the highest head sent on
    /// that socket (a height the node announces again with its new block) is dropped.
    pub fn set_only_new_heads(&self, on: bool) {
        self.inner.only_new_heads.store(on, Ordering::SeqCst);
    }
    /// WebSocket connections accepted so far.
    pub fn ws_accepted(&self) -> u64 {
        self.inner.ws_accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some((stop, t)) = self.flap.lock().unwrap().take() {
            stop.store(true, Ordering::SeqCst);
            let _ = t.join();
        }
        self.kill();
    }
}

fn kill(inner: &Inner) {
    inner.alive.store(false, Ordering::SeqCst);
    inner.generation.fetch_add(1, Ordering::SeqCst);
    for (_, s) in inner.conns.lock().unwrap().drain() {
        reset(&s);
    }
    // The accept loop polls `alive` and drops the listener; wait until the port refuses.
    let addr: SocketAddr = ([127, 0, 0, 1], inner.port).into();
    super::wait_until(Duration::from_secs(5), || {
        TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err()
    });
}

fn restart(inner: &Arc<Inner>) {
    if inner.alive.swap(true, Ordering::SeqCst) {
        return;
    }
    let addr: SocketAddr = ([127, 0, 0, 1], inner.port).into();
    let deadline = Instant::now() + Duration::from_secs(5);
    let listener = loop {
        match TcpListener::bind(addr) {
            Ok(l) => break l,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("relay {}: rebind {addr}: {e}", inner.name),
        }
    };
    listener.set_nonblocking(true).unwrap();
    let inner = inner.clone();
    let gen = inner.generation.load(Ordering::SeqCst);
    thread::spawn(move || accept_loop(inner, listener, gen));
}

/// A socket `kill` can cut, forgotten when its thread ends (so a long run does not pile up descriptors).
struct Tracked<'a> {
    inner: &'a Inner,
    id: u64,
}

impl<'a> Tracked<'a> {
    fn new(inner: &'a Inner, s: &TcpStream) -> Tracked<'a> {
        let id = inner.next_conn.fetch_add(1, Ordering::SeqCst);
        if let Ok(c) = s.try_clone() {
            inner.conns.lock().unwrap().insert(id, c);
        }
        Tracked { inner, id }
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.inner.conns.lock().unwrap().remove(&self.id);
    }
}

fn accept_loop(inner: Arc<Inner>, listener: TcpListener, gen: u64) {
    while inner.alive.load(Ordering::SeqCst) && inner.generation.load(Ordering::SeqCst) == gen {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_nodelay(true);
                let inner = inner.clone();
                thread::spawn(move || {
                    let _tracked = Tracked::new(&inner, &s);
                    serve(inner.clone(), s, gen)
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(2)),
            Err(_) => thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn current(inner: &Inner, gen: u64) -> bool {
    inner.generation.load(Ordering::SeqCst) == gen
}

fn reset(stream: &TcpStream) {
    let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
    let _ = stream.shutdown(Shutdown::Both);
}

fn reply(stream: &mut TcpStream, status: u16, ctype: &str, body: &[u8]) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let mut v = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    stream.write_all(&v)?;
    stream.flush()
}

/// QuickNode's answer to a single `eth_getLogs` wider than the relay's limit; `None` to forward it.
fn logs_refusal(inner: &Inner, body: &Value) -> Option<Value> {
    let limit = inner.logs_range.load(Ordering::SeqCst);
    if limit == 0 || body["method"] != "eth_getLogs" {
        return None;
    }
    let filter = &body["params"][0];
    if filter.get("blockHash").is_some() {
        return None;
    }
    let bound = |v: &Value| match v.as_str() {
        None | Some("latest" | "safe" | "finalized" | "pending") => node_head(inner.node, &mut None),
        Some("earliest") => Some(0),
        Some(_) => hex_u64(v),
    };
    let (from, to) = (bound(&filter["fromBlock"])?, bound(&filter["toBlock"])?);
    (to >= from && to - from + 1 > limit).then(|| {
        json!({"jsonrpc":"2.0","id":body["id"],"error":{"code":-32614,"message":format!("eth_getLogs is limited to a {limit} range")}})
    })
}

/// The calls of a JSON-RPC body (one for a single call, each item of a batch).
fn calls_of(body: &Value) -> Vec<&Value> {
    match body {
        Value::Array(items) => items.iter().collect(),
        v => vec![v],
    }
}

fn serve(inner: Arc<Inner>, stream: TcpStream, gen: u64) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut wire = Wire::new(stream);
    let mut upstream: Option<Conn> = None;
    loop {
        if !current(&inner, gen) {
            return;
        }
        let req = match http::read_request(&mut wire) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) && wire.buffered() == 0 => {
                continue
            }
            Err(_) => return,
        };
        if req.method == "GET" && req.has_token("upgrade", "websocket") {
            let stream = wire.stream.try_clone().unwrap();
            websocket(inner, stream, &req, gen);
            return;
        }
        let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
            let _ = reply(&mut wire.stream, 400, "text/plain", b"relay: body is not JSON");
            return;
        };
        let methods: Vec<String> = calls_of(&body)
            .iter()
            .map(|c| c["method"].as_str().unwrap_or("").to_string())
            .collect();
        {
            let mut rec = inner.received.lock().unwrap();
            for m in &methods {
                *rec.entry(m.clone()).or_default() += 1;
            }
        }
        for c in calls_of(&body) {
            if let Some(id) = c["id"].as_u64() {
                inner.max_id.fetch_max(id, Ordering::SeqCst);
            }
        }
        let fault = inner.fault.lock().unwrap().clone();
        match &fault {
            Fault::Status(code) => {
                if reply(&mut wire.stream, *code, "text/plain", b"relay: injected failure").is_err() {
                    return;
                }
                continue;
            }
            Fault::Throttle => {
                let id = match &body {
                    Value::Object(o) => o.get("id").cloned().unwrap_or(Value::Null),
                    _ => Value::Null,
                };
                let b = json!({"jsonrpc":"2.0","id":id,"error":{"code":-32005,"message":"rate limit exceeded"}});
                if reply(&mut wire.stream, 429, "application/json", b.to_string().as_bytes()).is_err() {
                    return;
                }
                continue;
            }
            Fault::Reset => {
                reset(&wire.stream);
                return;
            }
            Fault::Latency(d) => thread::sleep(*d),
            _ => {}
        }
        if let Some(error) = logs_refusal(&inner, &body) {
            inner.logs_refused.fetch_add(1, Ordering::SeqCst);
            if reply(&mut wire.stream, 413, "application/json", error.to_string().as_bytes()).is_err() {
                return;
            }
            continue;
        }
        let trapped = {
            let mut trap = inner.trap.lock().unwrap();
            let hit = trap.as_ref().is_some_and(|m| methods.contains(m));
            if hit {
                *trap = None;
            }
            hit || inner
                .every
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|m| methods.contains(m))
        };
        let lag = inner.lag.load(Ordering::SeqCst);
        let Some(answer) = forward(&inner, &mut upstream, body, lag) else {
            let _ = reply(&mut wire.stream, 502, "text/plain", b"relay: node unreachable");
            return;
        };
        if trapped {
            reset(&wire.stream);
            return;
        }
        match fault {
            Fault::ResetAfterForward => {
                reset(&wire.stream);
                return;
            }
            Fault::HangAfterForward => {
                while current(&inner, gen) && *inner.fault.lock().unwrap() == Fault::HangAfterForward {
                    thread::sleep(Duration::from_millis(10));
                }
                reset(&wire.stream);
                return;
            }
            _ => {}
        }
        if reply(&mut wire.stream, 200, "application/json", answer.as_bytes()).is_err() {
            return;
        }
        if req.wants_close() {
            return;
        }
    }
}

/// One call to the node on the relay's upstream connection (reconnecting once); the response body.
fn node_call(node: SocketAddr, upstream: &mut Option<Conn>, body: &[u8]) -> Option<Vec<u8>> {
    for _ in 0..2 {
        if upstream.is_none() {
            *upstream = Conn::try_connect(node).ok();
        }
        let c = upstream.as_mut()?;
        if c.send(&http::post("/", body)).is_ok() {
            if let Ok(r) = c.read_response() {
                if r.closes() {
                    *upstream = None;
                }
                return Some(r.body);
            }
        }
        *upstream = None;
    }
    None
}

fn node_head(node: SocketAddr, upstream: &mut Option<Conn>) -> Option<u64> {
    let b = node_call(
        node,
        upstream,
        br#"{"jsonrpc":"2.0","id":0,"method":"eth_blockNumber","params":[]}"#,
    )?;
    hex_u64(&serde_json::from_slice::<Value>(&b).ok()?["result"])
}

/// Methods whose `"latest"` parameter a lagging relay pins to its lagged height.
const LATEST_METHODS: &[&str] = &[
    "eth_getBlockByNumber",
    "eth_getBalance",
    "eth_getTransactionCount",
    "eth_getCode",
    "eth_getStorageAt",
    "eth_call",
    "eth_estimateGas",
];

/// Forwards one request body to the node: records writes in the ledger, applies lag; the answer text.
fn forward(inner: &Inner, upstream: &mut Option<Conn>, mut body: Value, lag: u64) -> Option<String> {
    let frozen = inner.frozen.load(Ordering::SeqCst);
    let lagged = if frozen > 0 {
        Some(frozen)
    } else if lag > 0 {
        node_head(inner.node, upstream).map(|h| h.saturating_sub(lag))
    } else {
        None
    };
    let mut methods_by_id: HashMap<String, String> = HashMap::new();
    {
        let mut calls: Vec<&mut Value> = match &mut body {
            Value::Array(items) => items.iter_mut().collect(),
            v => vec![v],
        };
        let mut fwd = inner.forwarded.lock().unwrap();
        for call in calls.iter_mut() {
            let method = call["method"].as_str().unwrap_or("").to_string();
            *fwd.entry(method.clone()).or_default() += 1;
            match method.as_str() {
                "eth_sendRawTransaction" | "eth_sendRawTransactionSync" => {
                    if let Some(h) = call["params"][0].as_str().and_then(keccak_hex) {
                        inner.ledger.record(h, &inner.name);
                    }
                }
                "eth_sendTransaction" => inner.ledger.record(format!("send:{}", call["params"]), &inner.name),
                _ => {}
            }
            if let (Some(h), true) = (lagged, LATEST_METHODS.contains(&method.as_str())) {
                if let Some(ps) = call.get_mut("params").and_then(Value::as_array_mut) {
                    for p in ps.iter_mut() {
                        if p == "latest" {
                            *p = Value::String(format!("0x{h:x}"));
                        }
                    }
                }
            }
            methods_by_id.insert(call["id"].to_string(), method);
        }
    }
    let answer = node_call(inner.node, upstream, body.to_string().as_bytes())?;
    let Some(h) = lagged else {
        return Some(String::from_utf8_lossy(&answer).into_owned());
    };
    // eth_blockNumber answers come back `lag` blocks lower.
    let mut v: Value = serde_json::from_slice(&answer).ok()?;
    {
        let items: Vec<&mut Value> = match &mut v {
            Value::Array(items) => items.iter_mut().collect(),
            v => vec![v],
        };
        for item in items {
            let m = methods_by_id.get(&item["id"].to_string()).map(String::as_str);
            if m == Some("eth_blockNumber") && item.get("result").is_some() {
                item["result"] = Value::String(format!("0x{h:x}"));
            }
        }
    }
    Some(v.to_string())
}

/// Serves a WebSocket client: a socket to the node per client, frames pumped both ways; with lag, `newHeads`
/// notifications are held back until the node is `lag` blocks further.
fn websocket(inner: Arc<Inner>, stream: TcpStream, req: &http::Request, gen: u64) {
    let Some(key) = req.header("sec-websocket-key") else {
        return;
    };
    let accept = tungstenite::handshake::derive_accept_key(key.trim().as_bytes());
    let mut s = stream;
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    if s.write_all(head.as_bytes()).is_err() {
        return;
    }
    let Ok(up_tcp) = TcpStream::connect(inner.node) else {
        reset(&s);
        return;
    };
    let Ok((mut up, _)) = tungstenite::client(format!("ws://{}/", inner.node), up_tcp) else {
        reset(&s);
        return;
    };
    inner.ws_accepted.fetch_add(1, Ordering::SeqCst);
    let _ = s.set_read_timeout(Some(Duration::from_millis(5)));
    let _ = up.get_ref().set_read_timeout(Some(Duration::from_millis(5)));
    let _tracked = Tracked::new(&inner, up.get_ref());
    let mut client = WebSocket::from_raw_socket(s, Role::Server, None);
    let mut held: VecDeque<(u64, String)> = VecDeque::new();
    let mut top_sent = 0u64;
    let would_block = |e: &tungstenite::Error| matches!(e, tungstenite::Error::Io(io) if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut));
    loop {
        if !current(&inner, gen) {
            reset(client.get_ref());
            reset(up.get_ref());
            return;
        }
        let mut idle = true;
        match client.read() {
            Ok(Message::Text(t)) => {
                idle = false;
                if let Ok(v) = serde_json::from_str::<Value>(&t) {
                    let mut rec = inner.received.lock().unwrap();
                    for c in calls_of(&v) {
                        *rec.entry(c["method"].as_str().unwrap_or("").to_string()).or_default() += 1;
                    }
                }
                if up.send(Message::Text(t)).is_err() {
                    break;
                }
            }
            Ok(Message::Close(_)) => break,
            Ok(_) => idle = false,
            Err(e) if would_block(&e) => {}
            Err(_) => break,
        }
        match up.read() {
            Ok(Message::Text(t)) => {
                idle = false;
                let lag = inner.lag.load(Ordering::SeqCst);
                let head = serde_json::from_str::<Value>(&t).ok().and_then(|v| {
                    if v["method"] == "eth_subscription" && v["params"]["result"].get("parentHash").is_some() {
                        hex_u64(&v["params"]["result"]["number"])
                    } else {
                        None
                    }
                });
                match head {
                    Some(n) if n < top_sent && inner.only_new_heads.load(Ordering::SeqCst) => {}
                    Some(n) => {
                        top_sent = top_sent.max(n);
                        held.push_back((n, t.to_string()));
                        while let Some((m, _)) = held.front() {
                            let frozen = inner.frozen.load(Ordering::SeqCst);
                            if *m + lag > n || (frozen > 0 && *m > frozen) {
                                break;
                            }
                            let (_, msg) = held.pop_front().unwrap();
                            inner.heads_sent.fetch_add(1, Ordering::SeqCst);
                            if client.send(Message::text(msg)).is_err() {
                                return;
                            }
                        }
                    }
                    None => {
                        if client.send(Message::Text(t)).is_err() {
                            break;
                        }
                    }
                }
            }
            Ok(Message::Close(_)) => break,
            Ok(_) => idle = false,
            Err(e) if would_block(&e) => {}
            Err(_) => break,
        }
        if idle {
            let _ = client.flush();
        }
    }
    reset(client.get_ref());
    reset(up.get_ref());
}
