//! A fake EVM node on one loopback port: HTTP JSON-RPC and WebSocket (`eth_subscribe` to `newHeads` and
//! `logs`). It mines a block every `interval`: a consistent chain (each block's `parentHash` is the block
//! before it, so Prism links every head and never sees a reorg), a geth-shaped `newHeads` payload to every
//! heads subscription and one log per block to every logs subscription, and it records the instant it
//! wrote each block's frames. Reads (`eth_getBlockByNumber`, `eth_getBlockByHash`, `eth_getLogs`, ...) answer
//! from the same chain; a method it does not know is counted and answered -32601, so a reader sees what
//! Prism asked for.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::json;
use crate::now_ns;
use crate::ws;

/// The contract address the logs come from (and the filter clients subscribe with).
pub const LOG_ADDRESS: &str = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48";
const TRANSFER: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
pub const CHAIN_ID: u64 = 4663;
/// The height the chain starts at (a mainnet-like number, so quantities have their usual width).
pub const FIRST_BLOCK: u64 = 21_000_000;

/// When the node wrote one block's frames (ns on the tool's clock; 0 = not written to anyone).
#[derive(Debug, Clone, Copy)]
pub struct Emitted {
    pub block: u64,
    pub heads_ns: u64,
    pub logs_ns: u64,
}

struct Sub {
    id: String,
    logs: bool,
    out: Arc<Mutex<TcpStream>>,
}

pub struct Node {
    pub port: u16,
    interval: Duration,
    head: AtomicU64,
    genesis_ts: u64,
    subs: Mutex<Vec<Sub>>,
    next_sub: AtomicU64,
    pub emitted: Mutex<Vec<Emitted>>,
    /// Mining paused (the idle memory reading is taken with no notification in flight).
    pub paused: AtomicBool,
    pub stop: AtomicBool,
    /// Calls received, by method; `unknown` those answered -32601.
    pub calls: Mutex<BTreeMap<String, u64>>,
    pub unknown: Mutex<BTreeMap<String, u64>>,
    pub ws_connections: AtomicU64,
    /// Bytes of the last newHeads payload (the `result`), for the report.
    pub head_bytes: AtomicU64,
}

impl Node {
    /// Binds a free loopback port and starts serving and mining.
    pub fn start(interval: Duration) -> std::io::Result<Arc<Node>> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let genesis_ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let node = Arc::new(Node {
            port: listener.local_addr()?.port(),
            interval,
            head: AtomicU64::new(FIRST_BLOCK),
            genesis_ts,
            subs: Mutex::new(Vec::new()),
            next_sub: AtomicU64::new(1),
            emitted: Mutex::new(Vec::new()),
            paused: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            calls: Mutex::new(BTreeMap::new()),
            unknown: Mutex::new(BTreeMap::new()),
            ws_connections: AtomicU64::new(0),
            head_bytes: AtomicU64::new(0),
        });
        let n = node.clone();
        std::thread::Builder::new().name("node-accept".into()).spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let n = n.clone();
                let _ = std::thread::Builder::new()
                    .name("node-conn".into())
                    .spawn(move || n.serve(stream));
            }
        })?;
        let n = node.clone();
        std::thread::Builder::new()
            .name("node-miner".into())
            .spawn(move || n.mine())?;
        Ok(node)
    }

    pub fn head(&self) -> u64 {
        self.head.load(Ordering::SeqCst)
    }

    /// Subscriptions Prism holds here: (newHeads, logs).
    pub fn subscriptions(&self) -> (usize, usize) {
        let subs = self.subs.lock().unwrap();
        let logs = subs.iter().filter(|s| s.logs).count();
        (subs.len() - logs, logs)
    }

    fn mine(&self) {
        let mut next = std::time::Instant::now() + self.interval;
        while !self.stop.load(Ordering::SeqCst) {
            let now = std::time::Instant::now();
            if now < next {
                std::thread::sleep(next - now);
            }
            next += self.interval;
            if self.paused.load(Ordering::SeqCst) {
                continue;
            }
            // The block is readable before anyone hears of it, as on a real node.
            let n = self.head.fetch_add(1, Ordering::SeqCst) + 1;
            let header = self.header(n);
            self.head_bytes.store(header.len() as u64, Ordering::Relaxed);
            let log = log_json(n);
            let subs = self.subs.lock().unwrap();
            let mut rec = Emitted {
                block: n,
                heads_ns: 0,
                logs_ns: 0,
            };
            let mut frame = Vec::with_capacity(header.len() + 128);
            for s in subs.iter().filter(|s| !s.logs) {
                notification(&mut frame, &s.id, &header);
                if rec.heads_ns == 0 {
                    rec.heads_ns = now_ns();
                }
                let _ = s.out.lock().unwrap().write_all(&frame);
            }
            for s in subs.iter().filter(|s| s.logs) {
                notification(&mut frame, &s.id, &log);
                if rec.logs_ns == 0 {
                    rec.logs_ns = now_ns();
                }
                let _ = s.out.lock().unwrap().write_all(&frame);
            }
            drop(subs);
            self.emitted.lock().unwrap().push(rec);
        }
    }

    fn serve(&self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let Ok(read) = stream.try_clone() else { return };
        let mut reader = BufReader::new(read);
        let mut out = stream;
        loop {
            let mut head = Vec::new();
            let mut length = 0usize;
            let mut ws_key = None;
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if line == "\r\n" || line == "\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("sec-websocket-key:") {
                    ws_key = Some(line["sec-websocket-key:".len()..].trim().to_string());
                }
                head.push(line);
            }
            if let Some(key) = ws_key {
                let answer = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                     Sec-WebSocket-Accept: {}\r\n\r\n",
                    ws::accept_key(&key)
                );
                if out.write_all(answer.as_bytes()).is_err() {
                    return;
                }
                self.ws_connections.fetch_add(1, Ordering::SeqCst);
                let carried = reader.buffer().to_vec();
                self.serve_ws(reader.into_inner(), out, carried);
                self.ws_connections.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            let answer = self.answer_body(&body);
            let mut msg = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                answer.len()
            )
            .into_bytes();
            msg.extend_from_slice(&answer);
            if out.write_all(&msg).is_err() {
                return;
            }
        }
    }

    fn serve_ws(&self, mut read: TcpStream, out: TcpStream, mut buf: Vec<u8>) {
        let out = Arc::new(Mutex::new(out));
        let mut chunk = vec![0u8; 65536];
        let mut mine: Vec<String> = Vec::new();
        'conn: loop {
            while let Some(f) = ws::parse(&buf) {
                let mut payload = buf[f.start..f.end].to_vec();
                if let Some(m) = f.mask {
                    ws::unmask(&mut payload, m);
                }
                buf.drain(..f.end);
                match f.opcode {
                    ws::TEXT => self.ws_call(&payload, &out, &mut mine),
                    ws::PING => {
                        let mut pong = Vec::new();
                        ws::server_frame(&mut pong, ws::PONG, &payload);
                        let _ = out.lock().unwrap().write_all(&pong);
                    }
                    ws::CLOSE => {
                        let mut close = Vec::new();
                        ws::server_frame(&mut close, ws::CLOSE, &payload);
                        let _ = out.lock().unwrap().write_all(&close);
                        break 'conn;
                    }
                    _ => {}
                }
            }
            match read.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        self.subs.lock().unwrap().retain(|s| !mine.contains(&s.id));
        let _ = read.shutdown(Shutdown::Both);
    }

    fn ws_call(&self, text: &[u8], out: &Arc<Mutex<TcpStream>>, mine: &mut Vec<String>) {
        let method = json::field(text, "method").and_then(json::string).unwrap_or("");
        let id = json::field(text, "id").unwrap_or(b"null");
        let params = json::field(text, "params").unwrap_or(b"[]");
        self.count(method, true);
        let mut reply = Vec::new();
        let mut subs = self.subs.lock().unwrap();
        let mut new_sub = None;
        let result = match method {
            "eth_subscribe" => {
                let p = json::elements(params);
                match p.first().and_then(|v| json::string(v)) {
                    Some(kind @ ("newHeads" | "logs")) => {
                        let sid = format!("0x{:032x}", self.next_sub.fetch_add(1, Ordering::SeqCst) * 0x9e37_79b9);
                        new_sub = Some(Sub {
                            id: sid.clone(),
                            logs: kind == "logs",
                            out: out.clone(),
                        });
                        Ok(format!("\"{sid}\""))
                    }
                    _ => Err("unsupported subscription".to_string()),
                }
            }
            "eth_unsubscribe" => {
                let target = json::elements(params)
                    .first()
                    .and_then(|v| json::string(v))
                    .unwrap_or("")
                    .to_string();
                let before = subs.len();
                subs.retain(|s| s.id != target);
                mine.retain(|s| *s != target);
                Ok((subs.len() != before).to_string())
            }
            _ => self.answer(method, params),
        };
        write_reply(&mut reply, id, result);
        let mut frame = Vec::new();
        ws::server_frame(&mut frame, ws::TEXT, &reply);
        // The answer goes before the subscription's first notification.
        let _ = out.lock().unwrap().write_all(&frame);
        if let Some(s) = new_sub {
            mine.push(s.id.clone());
            subs.push(s);
        }
    }

    fn count(&self, method: &str, known: bool) {
        let map = if known { &self.calls } else { &self.unknown };
        *map.lock().unwrap().entry(method.to_string()).or_default() += 1;
    }

    fn answer_body(&self, body: &[u8]) -> Vec<u8> {
        let one = |call: &[u8], out: &mut Vec<u8>| {
            let method = json::field(call, "method").and_then(json::string).unwrap_or("");
            let id = json::field(call, "id").unwrap_or(b"null");
            let params = json::field(call, "params").unwrap_or(b"[]");
            self.count(method, true);
            write_reply(out, id, self.answer(method, params));
        };
        let mut out = Vec::new();
        if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            out.push(b'[');
            for (i, call) in json::elements(body).into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                one(call, &mut out);
            }
            out.push(b']');
        } else {
            one(body, &mut out);
        }
        out
    }

    /// A read's result (raw JSON), or an error message for -32601 / -32602.
    fn answer(&self, method: &str, params: &[u8]) -> Result<String, String> {
        let p = json::elements(params);
        let head = self.head();
        Ok(match method {
            "eth_chainId" => format!("\"0x{CHAIN_ID:x}\""),
            "net_version" => format!("\"{CHAIN_ID}\""),
            "web3_clientVersion" => "\"Geth/v1.14.12-stable/linux-amd64/go1.23.4 (fanout fake)\"".into(),
            "eth_syncing" => "false".into(),
            "eth_blockNumber" => format!("\"0x{head:x}\""),
            "eth_gasPrice" => "\"0x3b9aca00\"".into(),
            "eth_getBalance" | "eth_getTransactionCount" => "\"0x0\"".into(),
            "eth_getBlockByNumber" => {
                let n = match p.first().and_then(|v| json::string(v)) {
                    Some("latest" | "pending") => Some(head),
                    Some("safe") => Some(head.saturating_sub(32).max(FIRST_BLOCK)),
                    Some("finalized") => Some(head.saturating_sub(64).max(FIRST_BLOCK)),
                    Some("earliest") => Some(FIRST_BLOCK),
                    Some(_) => p.first().and_then(|v| json::quantity(v)),
                    None => None,
                };
                let Some(n) = n else {
                    return Err("invalid block parameter".into());
                };
                self.block_or_null(n, head)
            }
            "eth_getBlockByHash" => {
                let n = p.first().and_then(|v| json::string(v)).and_then(number_of_hash);
                n.map_or("null".into(), |n| self.block_or_null(n, head))
            }
            "eth_getLogs" => {
                let f = p.first().copied().unwrap_or(b"{}");
                let bound = |k: &str, dflt: u64| match json::field(f, k).and_then(json::string) {
                    Some("latest" | "pending" | "safe" | "finalized") | None => dflt,
                    Some("earliest") => FIRST_BLOCK,
                    Some(_) => json::field(f, k).and_then(json::quantity).unwrap_or(dflt),
                };
                let (from, to) = match json::field(f, "blockHash").and_then(json::string) {
                    Some(h) => match number_of_hash(h) {
                        Some(n) => (n, n),
                        None => (1, 0),
                    },
                    None => (bound("fromBlock", head), bound("toBlock", head)),
                };
                let logs: Vec<String> = (from.max(FIRST_BLOCK + 1)..=to.min(head)).map(log_json).collect();
                format!("[{}]", logs.join(","))
            }
            _ => {
                self.count(method, false);
                return Err(format!("the method {method} does not exist/is not available"));
            }
        })
    }

    fn block_or_null(&self, n: u64, head: u64) -> String {
        if n > head || n < FIRST_BLOCK {
            return "null".into();
        }
        let header = self.header(n);
        let txs = if n > FIRST_BLOCK {
            format!("[\"{}\"]", tx_hash(n))
        } else {
            "[]".into()
        };
        format!(
            "{},\"size\":\"0x{:x}\",\"transactions\":{txs},\"uncles\":[],\"withdrawals\":[]}}",
            &header[..header.len() - 1],
            header.len() + 64
        )
    }

    /// A geth-shaped header (the fields geth's `newHeads` sends).
    fn header(&self, n: u64) -> String {
        let ts = self.genesis_ts + (n - FIRST_BLOCK) * self.interval.as_millis() as u64 / 1000;
        let mut bloom = String::with_capacity(514);
        bloom.push_str("0x");
        for i in 0..32u64 {
            bloom.push_str(&format!("{:016x}", mix(n * 64 + i) & mix(n * 64 + 32 + i)));
        }
        format!(
            concat!(
                "{{\"parentHash\":\"{parent}\",\"sha3Uncles\":\"0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347\",",
                "\"miner\":\"0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5\",\"stateRoot\":\"{state}\",",
                "\"transactionsRoot\":\"{txroot}\",\"receiptsRoot\":\"{rcroot}\",\"logsBloom\":\"{bloom}\",",
                "\"difficulty\":\"0x0\",\"number\":\"0x{n:x}\",\"gasLimit\":\"0x1c9c380\",\"gasUsed\":\"0x{gas:x}\",",
                "\"timestamp\":\"0x{ts:x}\",\"extraData\":\"0x6265617665726275696c642e6f7267\",",
                "\"mixHash\":\"{mixh}\",\"nonce\":\"0x0000000000000000\",\"baseFeePerGas\":\"0x{fee:x}\",",
                "\"withdrawalsRoot\":\"{wroot}\",\"blobGasUsed\":\"0x20000\",\"excessBlobGas\":\"0x4b20000\",",
                "\"parentBeaconBlockRoot\":\"{beacon}\",\"requestsHash\":\"0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",",
                "\"hash\":\"{hash}\"}}"
            ),
            parent = block_hash(n - 1),
            state = h256(n, 1),
            txroot = h256(n, 2),
            rcroot = h256(n, 3),
            bloom = bloom,
            n = n,
            gas = 0x0d_0000 + mix(n) % 0x100_0000,
            ts = ts,
            mixh = h256(n, 4),
            fee = 0x1_0000_0000 + mix(n + 7) % 0x1_0000_0000,
            wroot = h256(n, 5),
            beacon = h256(n, 6),
            hash = block_hash(n),
        )
    }
}

fn notification(out: &mut Vec<u8>, sub: &str, result: &str) {
    out.clear();
    let text = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"eth_subscription\",\"params\":{{\"subscription\":\"{sub}\",\"result\":{result}}}}}"
    );
    ws::server_frame(out, ws::TEXT, text.as_bytes());
}

fn write_reply(out: &mut Vec<u8>, id: &[u8], result: Result<String, String>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id);
    match result {
        Ok(r) => {
            out.extend_from_slice(b",\"result\":");
            out.extend_from_slice(r.as_bytes());
        }
        Err(e) => out.extend_from_slice(format!(",\"error\":{{\"code\":-32601,\"message\":\"{e}\"}}").as_bytes()),
    }
    out.push(b'}');
}

fn mix(x: u64) -> u64 {
    // splitmix64: hashes that look like hashes, the same every time.
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn h256(n: u64, salt: u64) -> String {
    let s = n.wrapping_mul(8) + salt;
    format!(
        "0x{:016x}{:016x}{:016x}{:016x}",
        mix(s),
        mix(s ^ 1 << 60),
        mix(s ^ 2 << 60),
        mix(s ^ 3 << 60)
    )
}

/// Block `n`'s hash: 48 hex digits of noise, then `n` itself, so a hash maps back to its block.
fn block_hash(n: u64) -> String {
    format!(
        "0x{:016x}{:016x}{:016x}{:016x}",
        mix(n),
        mix(n ^ 1 << 61),
        mix(n ^ 1 << 62),
        n
    )
}

fn number_of_hash(h: &str) -> Option<u64> {
    let n = u64::from_str_radix(h.get(50..66)?, 16).ok()?;
    (block_hash(n) == h.to_ascii_lowercase()).then_some(n)
}

fn tx_hash(n: u64) -> String {
    h256(n, 7)
}

/// Block `n`'s one log: an ERC-20 Transfer.
fn log_json(n: u64) -> String {
    format!(
        concat!(
            "{{\"address\":\"{addr}\",\"topics\":[\"{t}\",\"0x000000000000000000000000{from:040x}\",",
            "\"0x000000000000000000000000{to:040x}\"],\"data\":\"0x{value:064x}\",\"blockNumber\":\"0x{n:x}\",",
            "\"transactionHash\":\"{tx}\",\"transactionIndex\":\"0x0\",\"blockHash\":\"{bh}\",\"logIndex\":\"0x0\",",
            "\"removed\":false}}"
        ),
        addr = LOG_ADDRESS,
        t = TRANSFER,
        from = mix(n) as u128,
        to = mix(n + 1) as u128,
        value = mix(n + 2) % 1_000_000_000_000,
        n = n,
        tx = tx_hash(n),
        bh = block_hash(n),
    )
}
