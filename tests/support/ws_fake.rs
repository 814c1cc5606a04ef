//! `WsFake`: a fake EVM provider that serves HTTP JSON-RPC on one loopback port and WebSocket JSON-RPC
//! (`eth_subscribe` / `eth_unsubscribe`) on another, with a chain the test drives by hand.
//!
//! The chain: block `n` is `{"number":"0xN","hash":H(n),"parentHash":H(n-1)}` with `H(n)` = `0x` + `n` as
//! 64 hex digits (see [`block_hash`]), optionally padded with an `extraData` field of a chosen size
//! ([`WsFake::set_head_padding`]). [`WsFake::advance_head`] mines blocks one by one: each new head goes to
//! every live `newHeads` subscription, and each log given to [`WsFake::advance_with_logs`] goes to every
//! live `logs` subscription whose address filter matches. Heads and logs keep being "mined" while the
//! sockets are down (nobody hears them), so a reconnect sees a gap that only HTTP can fill.
//!
//! HTTP (one thread per keep-alive connection, Content-Length bodies, single calls and batches):
//! - `eth_chainId` → `"0x1237"` (4663); `eth_blockNumber` → the head;
//! - `eth_getBlockByNumber [N|"latest", _]` → the block for any height ≤ head, `null` above;
//! - `eth_getLogs [{fromBlock,toBlock,address}]` → the logs mined in that range that match `address`;
//! - anything else → `"0x0"`.
//!
//! [`WsFake::set_http_status`] makes every HTTP request fail with that status (Prism's probes fail and its
//! breaker opens). WebSocket: [`WsFake::drop_sockets`] kills every open connection (their subscriptions go
//! with them), [`WsFake::drop_after_notifications`] does the same in the middle of a block,
//! [`WsFake::set_ws_refuse`] answers new upgrades `503` and closes.
//!
//! Server → client frames are written by hand (unmasked text frames) under one lock per connection, so a
//! notification is on the wire when `advance_head` returns; the per-connection thread only reads.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

/// `0x` + `n` as 64 hex digits: the hash of block `n` on every fake (so two fakes serve the same chain).
pub fn block_hash(n: u64) -> String {
    format!("0x{n:064x}")
}

/// The transaction hash of the `i`-th log ever mined (unique per fake).
fn tx_hash(i: u64) -> String {
    format!("0x{:064x}", 0xabc0_0000_0000u64 + i)
}

/// One log the fake mined.
#[derive(Clone, Debug)]
pub struct Log {
    pub block: u64,
    /// Index within its block.
    pub index: u64,
    /// Lower-case 0x address.
    pub address: String,
    /// A unique serial, written into `data` (so a test can tell logs apart).
    pub serial: u64,
}

impl Log {
    pub fn to_json(&self) -> Value {
        json!({
            "address": self.address,
            "topics": ["0x0000000000000000000000000000000000000000000000000000000000000001"],
            "data": format!("0x{:064x}", self.serial),
            "blockNumber": format!("0x{:x}", self.block),
            "blockHash": block_hash(self.block),
            "transactionHash": tx_hash(self.serial),
            "transactionIndex": "0x0",
            "logIndex": format!("0x{:x}", self.index),
            "removed": false,
        })
    }
}

#[derive(Clone, Debug)]
enum SubKind {
    NewHeads,
    /// Address filter (lower case); empty = any.
    Logs(Vec<String>),
    Pending,
}

struct Sub {
    conn: usize,
    kind: SubKind,
}

struct WsConn {
    /// Write half (a clone of the socket), used for every frame the fake sends.
    writer: Arc<Mutex<TcpStream>>,
}

#[derive(Default)]
struct State {
    head: u64,
    logs: Vec<Log>,
    next_serial: u64,
    padding: usize,
    http_status: Option<u16>,
    ws_refuse: bool,
    /// Upstream subscription id → subscription.
    subs: BTreeMap<String, Sub>,
    next_sub: u64,
    conns: HashMap<usize, WsConn>,
    next_conn: usize,
    subscribe_calls: usize,
    unsubscribe_calls: usize,
    ws_accepted: usize,
    ws_refused: usize,
    /// HTTP calls per method (batch items one by one).
    http_calls: HashMap<String, usize>,
    /// Raw params of every eth_getLogs call.
    get_logs: Vec<Value>,
    /// Every method received over WebSocket, in order.
    ws_methods: Vec<String>,
    /// Kill every socket after this many more notifications (see `WsFake::drop_after_notifications`).
    drop_after: Option<usize>,
    /// Subscription names answered with an error, as a provider that does not offer them.
    unsupported: Vec<String>,
    /// Connections frozen by `WsFake::freeze_sockets`: open, but nothing is read or written on them.
    frozen: std::collections::HashSet<usize>,
    /// The request headers of every WebSocket upgrade accepted, in order (name lowercased).
    handshakes: Vec<Vec<(String, String)>>,
}

impl State {
    /// Shuts down every WebSocket connection; their subscriptions go with them.
    fn kill_sockets(&mut self) -> usize {
        let conns: Vec<(usize, WsConn)> = self.conns.drain().collect();
        for (_, c) in &conns {
            let w = c.writer.lock().unwrap_or_else(|p| p.into_inner());
            let _ = w.shutdown(Shutdown::Both);
        }
        self.subs.clear();
        conns.len()
    }

    /// Sends one notification, then applies `drop_after`.
    fn notify(&mut self, conn: usize, sub: &str, result: &Value) {
        if !self.conns.contains_key(&conn) {
            return;
        }
        send_notification(self, conn, sub, result);
        if let Some(n) = self.drop_after {
            if n <= 1 {
                self.drop_after = None;
                self.kill_sockets();
            } else {
                self.drop_after = Some(n - 1);
            }
        }
    }
}

struct Inner {
    state: Mutex<State>,
    shutdown: AtomicBool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct WsFake {
    http: SocketAddr,
    ws: SocketAddr,
    inner: Arc<Inner>,
}

impl WsFake {
    /// Starts a fake whose head is `head` (no logs yet).
    pub fn start(head: u64) -> WsFake {
        let http_l = TcpListener::bind("127.0.0.1:0").expect("bind fake http");
        let ws_l = TcpListener::bind("127.0.0.1:0").expect("bind fake ws");
        let http = http_l.local_addr().unwrap();
        let ws = ws_l.local_addr().unwrap();
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                head,
                next_sub: 1,
                ..State::default()
            }),
            shutdown: AtomicBool::new(false),
        });
        let i = inner.clone();
        thread::Builder::new()
            .name(format!("wsfake-http-{}", http.port()))
            .spawn(move || http_accept(http_l, i))
            .unwrap();
        let i = inner.clone();
        thread::Builder::new()
            .name(format!("wsfake-ws-{}", ws.port()))
            .spawn(move || ws_accept(ws_l, i))
            .unwrap();
        WsFake { http, ws, inner }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.http)
    }
    /// `ws://127.0.0.1:PORT`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.ws)
    }
    /// The provider table lines for Prism's config: `ws_url = "ws://..."`.
    pub fn ws_option(&self) -> String {
        format!("ws_url = \"{}\"", self.ws_url())
    }

    // ---- the chain -------------------------------------------------------------------------------

    pub fn head(&self) -> u64 {
        self.inner.lock().head
    }

    /// Pads every block object with an `extraData` of about `bytes` bytes (0 = none).
    pub fn set_head_padding(&self, bytes: usize) {
        self.inner.lock().padding = bytes;
    }

    /// Mines `n` blocks without logs, announcing each head to live `newHeads` subscriptions.
    pub fn advance_head(&self, n: u64) {
        for _ in 0..n {
            self.mine(&[]);
        }
    }

    /// Mines `n` blocks, each with one log per address in `addresses`; returns the logs mined.
    pub fn advance_with_logs(&self, n: u64, addresses: &[&str]) -> Vec<Log> {
        let mut all = Vec::new();
        for _ in 0..n {
            all.extend(self.mine(addresses));
        }
        all
    }

    /// Announces a pending transaction hash to live `newPendingTransactions` subscriptions.
    pub fn emit_pending(&self, hash: &str) {
        let mut g = self.inner.lock();
        let targets: Vec<(String, usize)> = g
            .subs
            .iter()
            .filter(|(_, s)| matches!(s.kind, SubKind::Pending))
            .map(|(id, s)| (id.clone(), s.conn))
            .collect();
        for (id, conn) in targets {
            g.notify(conn, &id, &Value::String(hash.to_string()));
        }
    }

    fn mine(&self, addresses: &[&str]) -> Vec<Log> {
        let mut g = self.inner.lock();
        g.head += 1;
        let n = g.head;
        let mut logs = Vec::new();
        for (i, a) in addresses.iter().enumerate() {
            let serial = g.next_serial;
            g.next_serial += 1;
            logs.push(Log {
                block: n,
                index: i as u64,
                address: a.to_ascii_lowercase(),
                serial,
            });
        }
        g.logs.extend(logs.iter().cloned());
        let block = block_json(n, g.padding);
        let targets: Vec<(String, usize, SubKind)> = g
            .subs
            .iter()
            .map(|(id, s)| (id.clone(), s.conn, s.kind.clone()))
            .collect();
        for (id, conn, kind) in &targets {
            if matches!(kind, SubKind::NewHeads) {
                g.notify(*conn, id, &block);
            }
        }
        for log in &logs {
            for (id, conn, kind) in &targets {
                if let SubKind::Logs(filter) = kind {
                    if filter.is_empty() || filter.contains(&log.address) {
                        g.notify(*conn, id, &log.to_json());
                    }
                }
            }
        }
        logs
    }

    /// Every log mined so far.
    pub fn logs(&self) -> Vec<Log> {
        self.inner.lock().logs.clone()
    }

    // ---- misbehaviour ----------------------------------------------------------------------------

    /// Answers `eth_subscribe` for this subscription name (e.g. "newPendingTransactions") with a -32602
    /// error, as providers that do not offer it do.
    pub fn set_unsupported(&self, name: &str) {
        self.inner.lock().unsupported.push(name.to_string());
    }

    /// Every HTTP request is answered with this status (`None` = answer normally).
    pub fn set_http_status(&self, status: Option<u16>) {
        self.inner.lock().http_status = status;
    }

    /// While set, WebSocket upgrades are answered `503` and closed (existing sockets stay).
    pub fn set_ws_refuse(&self, refuse: bool) {
        self.inner.lock().ws_refuse = refuse;
    }

    /// Kills every open WebSocket connection (RST-free shutdown of both directions); their subscriptions
    /// are gone at once. Returns how many connections were dropped.
    pub fn drop_sockets(&self) -> usize {
        self.inner.lock().kill_sockets()
    }

    /// Freezes every open WebSocket connection, as a hung peer or a half-open TCP connection looks: the
    /// socket stays open but nothing more is read from it (pings go unanswered) or written to it (its
    /// subscriptions go silent). Connections made afterwards work normally. Returns how many were frozen.
    pub fn freeze_sockets(&self) -> usize {
        let mut g = self.inner.lock();
        let conns: Vec<usize> = g.conns.keys().copied().filter(|c| !g.frozen.contains(c)).collect();
        for c in &conns {
            g.frozen.insert(*c);
        }
        g.subs.retain(|_, s| !conns.contains(&s.conn));
        conns.len()
    }

    /// Kills every socket right after the next `n` notifications have been sent (mid-block, say): what
    /// was mined but not announced yet is only reachable over HTTP.
    pub fn drop_after_notifications(&self, n: usize) {
        self.inner.lock().drop_after = Some(n);
    }

    // ---- observations ----------------------------------------------------------------------------

    /// Live upstream subscriptions (subscribed, not unsubscribed, socket still open).
    pub fn active_subscriptions(&self) -> usize {
        self.inner.lock().subs.len()
    }
    /// Live subscriptions of one kind: "newHeads", "logs" or "newPendingTransactions".
    pub fn active_of(&self, kind: &str) -> usize {
        self.inner
            .lock()
            .subs
            .values()
            .filter(|s| {
                matches!(
                    (&s.kind, kind),
                    (SubKind::NewHeads, "newHeads")
                        | (SubKind::Logs(_), "logs")
                        | (SubKind::Pending, "newPendingTransactions")
                )
            })
            .count()
    }
    /// eth_subscribe calls received so far.
    pub fn subscribe_calls(&self) -> usize {
        self.inner.lock().subscribe_calls
    }
    /// eth_unsubscribe calls received so far.
    pub fn unsubscribe_calls(&self) -> usize {
        self.inner.lock().unsubscribe_calls
    }
    /// WebSocket connections accepted (upgraded) so far.
    pub fn ws_accepted(&self) -> usize {
        self.inner.lock().ws_accepted
    }
    /// The request headers of every accepted WebSocket upgrade, in order (names lowercased).
    pub fn handshake_headers(&self) -> Vec<Vec<(String, String)>> {
        self.inner.lock().handshakes.clone()
    }

    /// WebSocket upgrades refused so far.
    pub fn ws_refused(&self) -> usize {
        self.inner.lock().ws_refused
    }
    /// WebSocket connections open now.
    pub fn ws_open(&self) -> usize {
        self.inner.lock().conns.len()
    }
    /// HTTP calls of `method` so far.
    pub fn http_calls(&self, method: &str) -> usize {
        self.inner.lock().http_calls.get(method).copied().unwrap_or(0)
    }
    /// HTTP calls of methods other than Prism's own background ones (chain id, head probes).
    pub fn http_client_calls(&self) -> usize {
        self.inner
            .lock()
            .http_calls
            .iter()
            .filter(|(m, _)| {
                !matches!(
                    m.as_str(),
                    "eth_chainId" | "eth_blockNumber" | "probe:eth_getBlockByNumber"
                )
            })
            .map(|(_, n)| n)
            .sum()
    }
    /// The params of every eth_getLogs call so far.
    pub fn get_logs_calls(&self) -> Vec<Value> {
        self.inner.lock().get_logs.clone()
    }
    /// Every method received over WebSocket so far.
    pub fn ws_methods(&self) -> Vec<String> {
        self.inner.lock().ws_methods.clone()
    }
}

impl Drop for WsFake {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        self.drop_sockets();
        // Wake both accept loops so they see the flag.
        let _ = TcpStream::connect_timeout(&self.http, Duration::from_millis(100));
        let _ = TcpStream::connect_timeout(&self.ws, Duration::from_millis(100));
    }
}

fn block_json(n: u64, padding: usize) -> Value {
    let mut b = json!({
        "number": format!("0x{n:x}"),
        "hash": block_hash(n),
        "parentHash": block_hash(n.saturating_sub(1)),
    });
    if padding > 0 {
        b["extraData"] = Value::String(format!("0x{}", "ab".repeat(padding / 2)));
    }
    b
}

// ---- WebSocket side ------------------------------------------------------------------------------

/// A server frame (FIN, unmasked) with this opcode and payload.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(payload.len() + 10);
    f.push(0x80 | opcode);
    let len = payload.len();
    if len < 126 {
        f.push(len as u8);
    } else if len <= u16::MAX as usize {
        f.push(126);
        f.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        f.push(127);
        f.extend_from_slice(&(len as u64).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

fn write_text(writer: &Mutex<TcpStream>, text: &str) -> bool {
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    w.write_all(&frame(0x1, text.as_bytes()))
        .and_then(|_| w.flush())
        .is_ok()
}

fn send_notification(g: &State, conn: usize, sub: &str, result: &Value) {
    if let Some(c) = g.conns.get(&conn) {
        let msg = json!({
            "jsonrpc": "2.0",
            "method": "eth_subscription",
            "params": {"subscription": sub, "result": result},
        });
        let _ = write_text(&c.writer, &msg.to_string());
    }
}

fn ws_accept(listener: TcpListener, inner: Arc<Inner>) {
    for stream in listener.incoming() {
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let refuse = {
            let mut g = inner.lock();
            if g.ws_refuse {
                g.ws_refused += 1;
            }
            g.ws_refuse
        };
        let inner = inner.clone();
        thread::spawn(move || {
            if refuse {
                refuse_upgrade(stream);
            } else {
                serve_ws(stream, inner);
            }
        });
    }
}

fn refuse_upgrade(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 4096];
    let _ = stream.read(&mut buf);
    let _ = stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = stream.shutdown(Shutdown::Both);
}

/// Keeps the upgrade request's headers (the handshake callback tungstenite calls).
struct RecordHeaders(Arc<Inner>);

impl tungstenite::handshake::server::Callback for RecordHeaders {
    fn on_request(
        self,
        req: &tungstenite::handshake::server::Request,
        resp: tungstenite::handshake::server::Response,
    ) -> Result<tungstenite::handshake::server::Response, tungstenite::handshake::server::ErrorResponse> {
        let headers = req
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        self.0.lock().handshakes.push(headers);
        Ok(resp)
    }
}

fn serve_ws(stream: TcpStream, inner: Arc<Inner>) {
    let _ = stream.set_nodelay(true);
    let Ok(writer) = stream.try_clone() else { return };
    let record = RecordHeaders(inner.clone());
    let Ok(mut ws) = tungstenite::accept_hdr(stream, record) else {
        return;
    };
    let writer = Arc::new(Mutex::new(writer));
    let conn = {
        let mut g = inner.lock();
        let id = g.next_conn;
        g.next_conn += 1;
        g.ws_accepted += 1;
        g.conns.insert(id, WsConn { writer: writer.clone() });
        id
    };
    loop {
        while inner.lock().frozen.contains(&conn) && !inner.shutdown.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(20));
        }
        let msg = match ws.read() {
            Ok(m) => m,
            Err(_) => break,
        };
        let text = match msg {
            tungstenite::Message::Text(t) => t,
            tungstenite::Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            tungstenite::Message::Close(_) => break,
            _ => continue,
        };
        let Ok(req) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let mut g = inner.lock();
        if !g.conns.contains_key(&conn) {
            break; // dropped by the test
        }
        let method = req["method"].as_str().unwrap_or("").to_string();
        g.ws_methods.push(method.clone());
        let id = req["id"].clone();
        let params = req["params"].clone();
        let answer = match method.as_str() {
            "eth_subscribe" => {
                g.subscribe_calls += 1;
                let name = params[0].as_str().unwrap_or("");
                let kind = match params[0].as_str() {
                    _ if g.unsupported.iter().any(|u| u == name) => None,
                    Some("newHeads") => Some(SubKind::NewHeads),
                    Some("logs") => Some(SubKind::Logs(addresses(&params[1]["address"]))),
                    Some("newPendingTransactions") => Some(SubKind::Pending),
                    _ => None,
                };
                match kind {
                    Some(kind) => {
                        let sub = format!("0x{:x}", 0x5b0000u64 + g.next_sub);
                        g.next_sub += 1;
                        g.subs.insert(sub.clone(), Sub { conn, kind });
                        json!({"jsonrpc":"2.0","id":id,"result":sub})
                    }
                    None => json!({"jsonrpc":"2.0","id":id,"error":{"code":-32602,"message":"unknown subscription"}}),
                }
            }
            "eth_unsubscribe" => {
                g.unsubscribe_calls += 1;
                let target = params[0].as_str().unwrap_or("").to_string();
                let mine = g.subs.get(&target).is_some_and(|s| s.conn == conn);
                if mine {
                    g.subs.remove(&target);
                }
                json!({"jsonrpc":"2.0","id":id,"result":mine})
            }
            _ => match answer_call(&mut g, &method, &params) {
                Ok(r) => json!({"jsonrpc":"2.0","id":id,"result":r}),
                Err(e) => json!({"jsonrpc":"2.0","id":id,"error":e}),
            },
        };
        let _ = write_text(&writer, &answer.to_string());
    }
    let mut g = inner.lock();
    g.conns.remove(&conn);
    g.subs.retain(|_, s| s.conn != conn);
}

fn addresses(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.to_ascii_lowercase()],
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str())
            .map(|s| s.to_ascii_lowercase())
            .collect(),
        _ => Vec::new(),
    }
}

// ---- HTTP side -----------------------------------------------------------------------------------

fn http_accept(listener: TcpListener, inner: Arc<Inner>) {
    for stream in listener.incoming() {
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let inner = inner.clone();
        thread::spawn(move || serve_http(stream, inner));
    }
}

fn serve_http(stream: TcpStream, inner: Arc<Inner>) {
    let _ = stream.set_nodelay(true);
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        // Head.
        let mut content_length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                if first {
                    continue; // stray CRLF between requests
                }
                break;
            }
            first = false;
            if let Some((k, v)) = l.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-length") {
                    content_length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let (status, reply) = {
            let mut g = inner.lock();
            match g.http_status {
                Some(s) => (s, b"upstream failure".to_vec()),
                None => (200, answer_body(&mut g, &body)),
            }
        };
        let reason = if status == 200 { "OK" } else { "Error" };
        let ctype = if status == 200 {
            "application/json"
        } else {
            "text/plain"
        };
        let mut resp = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
            reply.len()
        )
        .into_bytes();
        resp.extend_from_slice(&reply);
        if out.write_all(&resp).and_then(|_| out.flush()).is_err() {
            return;
        }
    }
}

fn answer_body(g: &mut State, body: &[u8]) -> Vec<u8> {
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#.to_vec();
    };
    let one = |g: &mut State, call: &Value| -> Value {
        let method = call["method"].as_str().unwrap_or("").to_string();
        // Prism's own calls carry ids from 2^50 up (`rpc::ids::PROBES`): its finality-tag probes are counted
        // apart, so `eth_getBlockByNumber` counts what was forwarded.
        let own = call["id"].as_u64().is_some_and(|id| id >= 1 << 50);
        let counted = if own && method == "eth_getBlockByNumber" {
            "probe:eth_getBlockByNumber".to_string()
        } else {
            method.clone()
        };
        *g.http_calls.entry(counted).or_default() += 1;
        match answer_call(g, &method, &call["params"]) {
            Ok(r) => json!({"jsonrpc":"2.0","id":call["id"],"result":r}),
            Err(e) => json!({"jsonrpc":"2.0","id":call["id"],"error":e}),
        }
    };
    let v = match &req {
        Value::Array(items) => Value::Array(items.iter().map(|c| one(g, c)).collect()),
        call => one(g, call),
    };
    v.to_string().into_bytes()
}

fn quantity(v: &Value, head: u64) -> Option<u64> {
    match v.as_str()? {
        "latest" | "pending" | "safe" | "finalized" => Some(head),
        "earliest" => Some(0),
        s => u64::from_str_radix(s.strip_prefix("0x")?, 16).ok(),
    }
}

/// The answer to one call (HTTP or a non-subscription call over WebSocket).
fn answer_call(g: &mut State, method: &str, params: &Value) -> Result<Value, Value> {
    match method {
        "eth_chainId" => Ok(json!("0x1237")),
        "eth_blockNumber" => Ok(json!(format!("0x{:x}", g.head))),
        "eth_getBlockByNumber" => match quantity(&params[0], g.head) {
            Some(n) if n <= g.head => Ok(block_json(n, g.padding)),
            Some(_) => Ok(Value::Null),
            None => Err(json!({"code":-32602,"message":"invalid block number"})),
        },
        "eth_getLogs" => {
            g.get_logs.push(params.clone());
            let f = &params[0];
            let from = quantity(&f["fromBlock"], g.head).unwrap_or(g.head);
            let to = quantity(&f["toBlock"], g.head).unwrap_or(g.head);
            let filter = addresses(&f["address"]);
            Ok(Value::Array(
                g.logs
                    .iter()
                    .filter(|l| l.block >= from && l.block <= to)
                    .filter(|l| filter.is_empty() || filter.contains(&l.address))
                    .map(Log::to_json)
                    .collect(),
            ))
        }
        _ => Ok(json!("0x0")),
    }
}
