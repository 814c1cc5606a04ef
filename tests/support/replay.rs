//! `ReplayNode`: a real HTTP/1.1 JSON-RPC server on loopback that answers from a recorded corpus
//! (`tests/conformance/corpus.jsonl`, recorded from a real node by `tests/conformance/record.mjs`).
//!
//! Each call is looked up by (method, params): params compare as JSON values (object keys in any order,
//! absent params the same as `[]`). The answer is the recorded response body byte for byte, except that
//! its `id` value is replaced by the id bytes of the call that asked. A batch gets an array of such answers
//! (notifications get none). A call with no recording gets a `-32099` error naming it, and is counted as a
//! miss so tests can fail on it.

use super::http::{self, Wire};
use super::json;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// One recorded exchange.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// What the recording asked, in words.
    pub name: String,
    pub method: String,
    /// The params as recorded (a JSON value; `[]` when the request had none).
    pub params: Value,
    /// The node's HTTP body, byte for byte.
    pub response: Vec<u8>,
}

impl Exchange {
    /// The raw bytes of the recorded `result` value, if the node answered with one.
    pub fn result(&self) -> Option<&[u8]> {
        json::field(&self.response, "result")
    }
    /// The raw bytes of the recorded `error` value, if the node answered with one.
    pub fn error(&self) -> Option<&[u8]> {
        json::field(&self.response, "error")
    }
    /// The request's params as compact JSON text.
    pub fn params_text(&self) -> String {
        self.params.to_string()
    }
}

/// Reads a corpus file: one `{"name","request","response"}` object per line.
pub fn load_corpus(path: &Path) -> Vec<Exchange> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(n, line)| {
            let v: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{} line {}: {e}", path.display(), n + 1));
            let field = |k: &str| v.get(k).unwrap_or_else(|| panic!("line {}: no {k:?}", n + 1));
            Exchange {
                name: field("name").as_str().unwrap_or_default().to_string(),
                method: field("request")["method"].as_str().expect("request.method").to_string(),
                params: field("request").get("params").cloned().unwrap_or(Value::Array(vec![])),
                response: field("response")
                    .as_str()
                    .expect("response is a string")
                    .as_bytes()
                    .to_vec(),
            }
        })
        .collect()
}

/// JSON text with object keys sorted at every level: the lookup key of a params value.
fn canonical(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    write(v, &mut s);
    s
}

fn key(method: &str, params: &Value) -> (String, String) {
    (method.to_string(), canonical(params))
}

/// `recorded` with the bytes of its top-level `id` value replaced by `id`.
pub fn with_id(recorded: &[u8], id: &[u8]) -> Vec<u8> {
    let span = json::field(recorded, "id").unwrap_or_else(|| panic!("no id in {:?}", json::text(recorded)));
    let start = span.as_ptr() as usize - recorded.as_ptr() as usize;
    let end = start + span.len();
    let mut out = Vec::with_capacity(recorded.len() + id.len());
    out.extend_from_slice(&recorded[..start]);
    out.extend_from_slice(id);
    out.extend_from_slice(&recorded[end..]);
    out
}

/// A call the replay node received.
#[derive(Clone, Debug)]
pub struct Asked {
    pub method: String,
    /// Params as JSON text (canonical), `[]` when absent.
    pub params: String,
    /// Whether a recording answered it.
    pub hit: bool,
}

struct Inner {
    answers: HashMap<(String, String), Vec<u8>>,
    /// Set by [`ReplayNode::finalize_at_head`]: the recorded head's number, answered as the `finalized` block.
    finalized: Mutex<Option<String>>,
    asked: Mutex<Vec<Asked>>,
    conns: Mutex<Vec<TcpStream>>,
    shutdown: AtomicBool,
}

pub struct ReplayNode {
    addr: SocketAddr,
    inner: Arc<Inner>,
    accept: Option<JoinHandle<()>>,
}

impl ReplayNode {
    /// Serves `corpus` on a fresh loopback port. Panics when two exchanges share (method, params).
    pub fn start(corpus: &[Exchange]) -> ReplayNode {
        let mut answers = HashMap::new();
        for ex in corpus {
            let prev = answers.insert(key(&ex.method, &ex.params), ex.response.clone());
            assert!(prev.is_none(), "two recordings of {} {}", ex.method, ex.params);
        }
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind replay node");
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            answers,
            finalized: Mutex::new(None),
            asked: Mutex::new(Vec::new()),
            conns: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
        });
        let inner2 = inner.clone();
        let accept = thread::Builder::new()
            .name(format!("replay-{}", addr.port()))
            .spawn(move || {
                for stream in listener.incoming() {
                    if inner2.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let _ = stream.set_nodelay(true);
                    if let Ok(clone) = stream.try_clone() {
                        inner2.conns.lock().unwrap().push(clone);
                    }
                    let inner3 = inner2.clone();
                    thread::spawn(move || serve(stream, &inner3));
                }
            })
            .unwrap();
        ReplayNode {
            addr,
            inner,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers `eth_getBlockByNumber("finalized", false)` (when the corpus has no recording of it) with a
    /// block at the recorded head (`eth_blockNumber`), as a chain at rest whose every block is final: then
    /// every recorded answer about a block may be cached, and the cache's copies are compared too.
    pub fn finalize_at_head(&self) {
        let head = self
            .inner
            .answers
            .get(&key("eth_blockNumber", &Value::Array(vec![])))
            .and_then(|r| json::field(r, "result").map(json::text));
        *self.inner.finalized.lock().unwrap() = head;
    }

    /// Every call received so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.inner.asked.lock().unwrap().clone()
    }

    /// Calls of `method` received so far.
    pub fn count(&self, method: &str) -> usize {
        self.inner
            .asked
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.method == method)
            .count()
    }
}

impl Drop for ReplayNode {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        for s in self.inner.conns.lock().unwrap().iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)); // wake accept()
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn serve(stream: TcpStream, inner: &Inner) {
    let mut wire = Wire::new(stream);
    loop {
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let req = match http::read_request(&mut wire) {
            Ok(Some(r)) => r,
            _ => return,
        };
        let body = answer_body(&req.body, inner);
        let mut out = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
        .into_bytes();
        if req.wants_close() {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&body);
        if wire.stream.write_all(&out).is_err() || req.wants_close() {
            return;
        }
    }
}

fn answer_body(body: &[u8], inner: &Inner) -> Vec<u8> {
    let Ok(whole) = json::whole(body) else {
        inner.asked.lock().unwrap().push(Asked {
            method: String::new(),
            params: json::text(body),
            hit: false,
        });
        return br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"replay: not JSON"}}"#.to_vec();
    };
    if whole.first() == Some(&b'[') {
        let items = json::array(whole).unwrap_or_default();
        let answers: Vec<Vec<u8>> = items.iter().filter_map(|item| answer_one(item, inner)).collect();
        let mut out = b"[".to_vec();
        out.extend_from_slice(&answers.join(&b","[..]));
        out.push(b']');
        out
    } else {
        answer_one(whole, inner).unwrap_or_default()
    }
}

/// The answer to one call object; `None` for a notification. Every call is recorded in `asked`, even one
/// that is not JSON (method `""`).
fn answer_one(call: &[u8], inner: &Inner) -> Option<Vec<u8>> {
    let v: Value = serde_json::from_slice(call).unwrap_or(Value::Null);
    let method = v["method"].as_str().unwrap_or("").to_string();
    let params = v.get("params").cloned().unwrap_or(Value::Array(vec![]));
    let k = key(&method, &params);
    let recorded = inner.answers.get(&k);
    // Prism's prober asks the finality tags on its own: not a forwarded call, so no recording is missing.
    let own_probe = recorded.is_none()
        && method == "eth_getBlockByNumber"
        && (k.1 == r#"["safe",false]"# || k.1 == r#"["finalized",false]"#);
    inner.asked.lock().unwrap().push(Asked {
        method: method.clone(),
        params: k.1.clone(),
        hit: recorded.is_some() || own_probe,
    });
    let id = json::field(call, "id")?;
    let finalized = match (recorded, own_probe, k.1.contains("finalized")) {
        (None, true, true) => inner.finalized.lock().unwrap().clone(),
        _ => None,
    };
    if let Some(n) = finalized {
        let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        out.extend_from_slice(id);
        let hash = format!("0x{}", "0".repeat(64));
        out.extend_from_slice(format!(r#","result":{{"number":{n},"hash":"{hash}"}}}}"#).as_bytes());
        return Some(out);
    }
    Some(match recorded {
        Some(bytes) => with_id(bytes, id),
        None => {
            let msg = Value::String(format!("replay: no recording of {method} {}", k.1)).to_string();
            let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
            out.extend_from_slice(id);
            out.extend_from_slice(br#","error":{"code":-32099,"message":"#);
            out.extend_from_slice(msg.as_bytes());
            out.extend_from_slice(b"}}");
            out
        }
    })
}
