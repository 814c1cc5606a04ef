//! `LogsFake`: a JSON-RPC node on loopback over a deterministic synthetic chain, for `eth_getLogs` through
//! Prism. Blocks `0..=head` (default 20 000) hold a few logs each (20 per block in the dense stretch
//! 5000..5100, else 2 on every 4th block and 1 on every 7th), with every field a node gives (address,
//! topics, data, blockNumber, transactionHash, transactionIndex, blockHash, logIndex, removed), compact JSON
//! in geth's field order. Two fakes over the same chain answer the same filter with the same bytes.
//!
//! Limits, as real providers state them: `max_range` (blocks per call) answered QuickNode's way (-32614
//! "eth_getLogs is limited to a 10,000 range") or Ankr's (-32600 "block range is too wide", no number);
//! `max_results` Infura's way (-32005 "query returned more than 10000 results"). `max_range = Some(0)`
//! refuses every range; [`LogsFake::set_broken_block`] makes ranges holding one block fail as a broken node
//! does. Every `eth_getLogs` is recorded with its params and whether it was refused.
//!
//! Also answers `eth_chainId` (0x1237 = 4663, the harness's chain), `eth_blockNumber` (the head) and
//! anything else with `"0x0"`.

use super::http::{read_request, Wire};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// How a range limit is worded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeStyle {
    /// -32614 "eth_getLogs is limited to a 10,000 range": states the number.
    QuickNode,
    /// -32600 "block range is too wide": learn by halving.
    Ankr,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_range: Option<u64>,
    pub max_results: Option<u64>,
    pub style: RangeStyle,
}

impl Limits {
    pub const NONE: Limits = Limits {
        max_range: None,
        max_results: None,
        style: RangeStyle::QuickNode,
    };
}

/// One `eth_getLogs` as the fake saw it.
#[derive(Debug, Clone)]
pub struct LogsCall {
    pub params: String,
    pub refused: bool,
}

struct Inner {
    limits: Mutex<Limits>,
    head: u64,
    calls: Mutex<Vec<LogsCall>>,
    stop: AtomicBool,
    /// A range holding this block is answered with a node failure (-32603) instead of logs.
    broken: Mutex<Option<u64>>,
}

pub struct LogsFake {
    addr: SocketAddr,
    inner: Arc<Inner>,
}

impl LogsFake {
    pub fn start(limits: Limits) -> LogsFake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            limits: Mutex::new(limits),
            head: 20_000,
            calls: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            broken: Mutex::new(None),
        });
        let i = inner.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if i.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let i = i.clone();
                thread::spawn(move || serve(&i, stream));
            }
        });
        LogsFake { addr, inner }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn set_limits(&self, limits: Limits) {
        *self.inner.limits.lock().unwrap() = limits;
    }

    /// `Some(b)`: any `eth_getLogs` whose range holds block `b` fails (-32603 "internal error").
    pub fn set_broken_block(&self, b: Option<u64>) {
        *self.inner.broken.lock().unwrap() = b;
    }

    /// Every `eth_getLogs` so far.
    pub fn logs_calls(&self) -> Vec<LogsCall> {
        self.inner.calls.lock().unwrap().clone()
    }

    pub fn refused(&self) -> usize {
        self.logs_calls().iter().filter(|c| c.refused).count()
    }

    pub fn reset(&self) {
        self.inner.calls.lock().unwrap().clear();
    }

    /// The `result` bytes this node answers `eth_getLogs` with for `filter` (a JSON object's text), or its
    /// error text; not recorded.
    pub fn answer(&self, filter: &str) -> Result<String, String> {
        let params = format!("[{filter}]");
        logs_answer(&self.inner, &params, false)
    }
}

impl Drop for LogsFake {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(inner: &Inner, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut out = stream.try_clone().unwrap();
    let mut wire = Wire::new(stream);
    while let Ok(Some(req)) = read_request(&mut wire) {
        if inner.stop.load(Ordering::Relaxed) {
            return;
        }
        let call: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = call.get("id").cloned().unwrap_or(serde_json::Value::Null);
        let method = call.get("method").and_then(|m| m.as_str()).unwrap_or("");
        let params = call.get("params").map(|p| p.to_string()).unwrap_or_else(|| "[]".into());
        let member = match method {
            "eth_chainId" => r#""result":"0x1237""#.to_string(),
            "eth_blockNumber" => format!(r#""result":"0x{:x}""#, inner.head),
            "eth_getLogs" => match logs_answer(inner, &params, true) {
                Ok(result) => format!(r#""result":{result}"#),
                Err(error) => format!(r#""error":{error}"#),
            },
            _ => r#""result":"0x0""#.to_string(),
        };
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},{member}}}"#);
        // One write: a head and a body written apart meet Nagle and delayed ACKs (40 ms a call).
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// Logs in block `b`.
fn logs_in(b: u64) -> u64 {
    if (5000..5100).contains(&b) {
        20
    } else if b.is_multiple_of(4) {
        2
    } else if b.is_multiple_of(7) {
        1
    } else {
        0
    }
}

fn hash(tag: u64, a: u64, b: u64) -> String {
    let mix = |x: u64| x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ tag;
    format!(
        "0x{:016x}{:016x}{:016x}{:016x}",
        mix(a),
        mix(b),
        mix(a ^ b),
        mix(a.wrapping_add(b))
    )
}

fn block_hash(b: u64) -> String {
    hash(0xb10c, b, 0)
}

fn address(b: u64) -> String {
    format!("0x{:040x}", 0xc0de_0000 + b % 3)
}

fn quantity(v: Option<&serde_json::Value>, head: u64) -> Option<u64> {
    match v.and_then(|v| v.as_str()) {
        None | Some("latest" | "safe" | "finalized" | "pending") => Some(head),
        Some("earliest") => Some(0),
        Some(s) => u64::from_str_radix(s.strip_prefix("0x")?, 16).ok(),
    }
}

/// The `result` (Ok) or `error` (Err) JSON text of `eth_getLogs` with `params`.
fn logs_answer(inner: &Inner, params: &str, record: bool) -> Result<String, String> {
    let limits = *inner.limits.lock().unwrap();
    let params: serde_json::Value = serde_json::from_str(params).unwrap_or_default();
    let filter = params.get(0).cloned().unwrap_or_default();
    let (from, to) = match filter.get("blockHash").and_then(|h| h.as_str()) {
        Some(h) => match (0..=inner.head).find(|&b| block_hash(b) == h) {
            Some(b) => (b, b),
            None => return Err(r#"{"code":-32000,"message":"unknown block"}"#.into()),
        },
        None => {
            let from = quantity(filter.get("fromBlock"), inner.head);
            let to = quantity(filter.get("toBlock"), inner.head);
            match (from, to) {
                (Some(f), Some(t)) if f <= t => (f, t.min(inner.head)),
                _ => return Err(r#"{"code":-32602,"message":"invalid block range params"}"#.into()),
            }
        }
    };
    let addresses: Option<Vec<String>> = match filter.get("address") {
        Some(serde_json::Value::String(a)) => Some(vec![a.to_lowercase()]),
        Some(serde_json::Value::Array(a)) => Some(a.iter().filter_map(|x| x.as_str()).map(str::to_lowercase).collect()),
        _ => None,
    };
    let refuse = |error: String| {
        if record {
            inner.calls.lock().unwrap().push(LogsCall {
                params: params.to_string(),
                refused: true,
            });
        }
        Err(error)
    };
    if let Some(b) = *inner.broken.lock().unwrap() {
        if (from..=to).contains(&b) {
            return Err(r#"{"code":-32603,"message":"internal error"}"#.into());
        }
    }
    let width = to.saturating_sub(from) + 1;
    if filter.get("blockHash").is_none() {
        if let Some(max) = limits.max_range.filter(|&m| width > m) {
            return refuse(match limits.style {
                RangeStyle::QuickNode => format!(
                    r#"{{"code":-32614,"message":"eth_getLogs is limited to a {} range"}}"#,
                    thousands(max)
                ),
                RangeStyle::Ankr => r#"{"code":-32600,"message":"block range is too wide"}"#.into(),
            });
        }
    }
    let mut logs = Vec::new();
    for b in from..=to {
        for i in 0..logs_in(b) {
            let addr = address(b + i);
            if addresses.as_ref().is_some_and(|a| !a.contains(&addr)) {
                continue;
            }
            logs.push(format!(
                r#"{{"address":"{addr}","topics":["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef","{}"],"data":"{}","blockNumber":"0x{b:x}","transactionHash":"{}","transactionIndex":"0x{i:x}","blockHash":"{}","logIndex":"0x{i:x}","removed":false}}"#,
                hash(0x7091c, b, i),
                hash(0xda7a, i, b),
                hash(0x7a, b, i),
                block_hash(b),
            ));
        }
        if let Some(max) = limits.max_results.filter(|&m| logs.len() as u64 > m) {
            return refuse(format!(
                r#"{{"code":-32005,"message":"query returned more than {max} results"}}"#
            ));
        }
    }
    if record {
        inner.calls.lock().unwrap().push(LogsCall {
            params: params.to_string(),
            refused: false,
        });
    }
    Ok(format!("[{}]", logs.join(",")))
}

/// `10000` → `10,000`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The hash of block `b` on the fake chain (for `blockHash` filters).
pub fn hash_of_block(b: u64) -> String {
    block_hash(b)
}
