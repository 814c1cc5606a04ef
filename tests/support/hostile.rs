//! Hostile providers on loopback: real sockets that answer with malformed bytes.
//!
//! - [`HostileProvider`]: an HTTP/1.1 upstream (one thread per connection, keep-alive) that answers every
//!   call with one [`Answer`] (a body under a correct head, or raw bytes on the wire then close), except
//!   `eth_chainId` when asked to answer that honestly (so Prism verifies it and sends it client reads).
//! - [`cases`]: the malformed answers of issue 13, each named.
//! - [`HostileWs`]: a WebSocket upstream that confirms subscriptions amid malformed messages and frames,
//!   then breaks the protocol (a reserved opcode) so every connection ends the same way.
//!
//! `{id}` in an answer is replaced with the request's id bytes. Calls are counted per method.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What the hostile provider sends back for a call.
#[derive(Clone, Debug)]
pub enum Answer {
    /// `200 OK` with this body and a matching Content-Length; the connection stays open.
    Body(Vec<u8>),
    /// Exactly these bytes (head included), then the connection is closed.
    Wire(Vec<u8>),
}

/// A marker placed in hostile results: it must never show up in Prism's log (no results logged).
pub const SECRET: &str = "SECRET-7f3a-RESULT";

/// One named malformed answer.
pub struct Case {
    pub name: &'static str,
    pub answer: Answer,
}

fn body(b: impl Into<Vec<u8>>) -> Answer {
    Answer::Body(b.into())
}

fn wire(b: impl Into<Vec<u8>>) -> Answer {
    Answer::Wire(b.into())
}

/// Every malformed answer a provider may send that must make it a failed provider (not a reason to stop
/// serving, not a panic): Prism must exclude it and serve reads from an honest one.
/// (Kept under the tests' `max_response_bytes` of 65 536, so each is judged for what it is, not its size.)
pub fn cases() -> Vec<Case> {
    let deep = |open: &str, close: &str, n: usize| format!("{}{}", open.repeat(n), close.repeat(n));
    vec![
        Case {
            name: "truncated",
            answer: body(format!(r#"{{"jsonrpc":"2.0","id":{{id}},"result":"{SECRET}"#)),
        },
        Case {
            name: "trailing_backslash",
            answer: body(r#"{"\"#),
        },
        Case {
            name: "result_backslash",
            answer: body(r#"{"jsonrpc":"2.0","id":{id},"result":"\"#),
        },
        // Not here: `1e999999` or a 400-digit integer as a result. They are valid JSON (RFC 8259 sets no
        // range), a bare node may send them, and they reach the client byte for byte
        // (`jsonrpc_envelope::result_bytes_reach_the_client_unchanged`).
        Case {
            name: "deep_nesting",
            answer: body(format!(
                r#"{{"jsonrpc":"2.0","id":{{id}},"result":{}}}"#,
                deep("[", "]", 30_000)
            )),
        },
        Case {
            name: "unclosed_nesting",
            answer: body(format!(
                r#"{{"jsonrpc":"2.0","id":{{id}},"result":{}"#,
                "[".repeat(30_000)
            )),
        },
        Case {
            // Within the scanner's depth, past what goes to simd-json: classified from raw text.
            name: "deep_error",
            answer: body(format!(
                r#"{{"jsonrpc":"2.0","id":{{id}},"error":{{"code":-32603,"message":"internal error","data":{}}}}}"#,
                deep("[", "]", 4000)
            )),
        },
        Case {
            name: "mismatched_brackets",
            answer: body(format!(r#"{{"jsonrpc":"2.0","id":{{id}},"result":["{SECRET}"}}}}"#)),
        },
        Case {
            name: "invalid_utf8",
            answer: body(
                [
                    &br#"{"jsonrpc":"2.0","id":{id},"result":"0x"#[..],
                    b"\xff\xfe\xc3",
                    br#""}"#,
                ]
                .concat(),
            ),
        },
        Case {
            name: "lone_surrogate",
            answer: body(r#"{"jsonrpc":"2.0","id":{id},"result":"\ud800"}"#),
        },
        Case {
            name: "duplicate_result",
            answer: body(r#"{"jsonrpc":"2.0","id":{id},"result":"0x1","result":"0x2"}"#),
        },
        Case {
            name: "trailing_bytes",
            answer: body(r#"{"jsonrpc":"2.0","id":{id},"result":"0x1"}{"more":1}"#),
        },
        Case {
            name: "empty_body",
            answer: body(""),
        },
        Case {
            name: "nul_body",
            answer: body(vec![0u8; 64]),
        },
        Case {
            name: "wrong_id",
            answer: body(r#"{"jsonrpc":"2.0","id":"not-yours","result":"0x1"}"#),
        },
        Case {
            name: "head_of_ff",
            answer: wire(b"\xff\xff\xff\xff\xff\xff\r\n\r\n".to_vec()),
        },
        Case {
            name: "head_0xffffffffffff",
            answer: wire("0xffffffffffff\r\n\r\n"),
        },
        Case {
            name: "redirect_3xx",
            answer: wire("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n"),
        },
        Case {
            name: "informational_1xx_then_close",
            answer: wire("HTTP/1.1 100 Continue\r\n\r\n"),
        },
        Case {
            name: "short_body_then_close",
            answer: wire("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\""),
        },
        Case {
            name: "chunk_size_too_long",
            answer: wire(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
            ),
        },
        Case {
            name: "chunk_size_not_hex",
            answer: wire("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n{}\r\n0\r\n\r\n"),
        },
        Case {
            name: "conflicting_lengths",
            answer: wire("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"),
        },
    ]
}

/// Answers over `limits.max_response_bytes` (the tests set 65 536): refused without being buffered.
pub fn floods() -> Vec<Case> {
    let big = format!(r#"{{"jsonrpc":"2.0","id":{{id}},"result":"{}"}}"#, "a".repeat(1 << 20));
    vec![
        Case {
            name: "flood_content_length",
            answer: body(big.clone()),
        },
        Case {
            name: "flood_until_close",
            answer: wire(format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{big}")),
        },
        Case {
            name: "absurd_chunk_size",
            answer: wire("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\n{\"a\":"),
        },
    ]
}

struct Inner {
    answer: Mutex<Answer>,
    honest_chain_id: bool,
    calls: Mutex<HashMap<String, usize>>,
    shutdown: AtomicBool,
}

pub struct HostileProvider {
    addr: SocketAddr,
    inner: Arc<Inner>,
}

impl HostileProvider {
    /// Answers every call with `answer`; `eth_chainId` honestly (`"0x1237"`) when `honest_chain_id`.
    pub fn start(answer: Answer, honest_chain_id: bool) -> HostileProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind hostile provider");
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            answer: Mutex::new(answer),
            honest_chain_id,
            calls: Mutex::new(HashMap::new()),
            shutdown: AtomicBool::new(false),
        });
        let i = inner.clone();
        thread::Builder::new()
            .name(format!("hostile-{}", addr.port()))
            .spawn(move || {
                for stream in listener.incoming() {
                    if i.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let i = i.clone();
                    thread::spawn(move || serve(stream, &i));
                }
            })
            .unwrap();
        HostileProvider { addr, inner }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Calls received for `method` (probes included).
    pub fn count(&self, method: &str) -> usize {
        self.inner.calls.lock().unwrap().get(method).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.inner.calls.lock().unwrap().values().sum()
    }

    pub fn set_answer(&self, answer: Answer) {
        *self.inner.answer.lock().unwrap() = answer;
    }
}

impl Drop for HostileProvider {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wake the accept loop
    }
}

/// One request off `stream`: (method, raw id), or `None` when the peer closed.
fn read_request(stream: &mut TcpStream, pending: &mut Vec<u8>) -> Option<(String, String)> {
    let mut buf = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(p) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        pending.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while pending.len() < head_end + len {
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        pending.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&pending[head_end..head_end + len]).into_owned();
    pending.drain(..head_end + len);
    let after = |key: &str| body.find(key).map(|i| &body[i + key.len()..]);
    let method = after(r#""method":""#)
        .and_then(|r| r.split('"').next())
        .unwrap_or("")
        .to_string();
    let id = after(r#""id":"#)
        .map(|r| r.chars().take_while(|c| !matches!(c, ',' | '}')).collect::<String>())
        .unwrap_or_else(|| "null".into());
    Some((method, id))
}

fn serve(mut stream: TcpStream, inner: &Inner) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut pending = Vec::new();
    while let Some((method, id)) = read_request(&mut stream, &mut pending) {
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        *inner.calls.lock().unwrap().entry(method.clone()).or_default() += 1;
        let answer = if method == "eth_chainId" && inner.honest_chain_id {
            Answer::Body(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"0x1237"}}"#).into_bytes())
        } else {
            inner.answer.lock().unwrap().clone()
        };
        let fill = |b: &[u8]| -> Vec<u8> {
            // `{id}` → the request's id (byte-wise: the answer may not be UTF-8).
            let mut out = Vec::with_capacity(b.len());
            let mut i = 0;
            while i < b.len() {
                if b[i..].starts_with(b"{id}") {
                    out.extend_from_slice(id.as_bytes());
                    i += 4;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            out
        };
        match answer {
            Answer::Body(b) => {
                let b = fill(&b);
                let mut out = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    b.len()
                )
                .into_bytes();
                out.extend_from_slice(&b);
                if stream.write_all(&out).is_err() {
                    return;
                }
            }
            Answer::Wire(w) => {
                let _ = stream.write_all(&fill(&w));
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

// ---- WebSocket -----------------------------------------------------------------------------------

/// A server frame (FIN, unmasked) with this opcode and payload.
pub use super::solana_fake::frame as ws_frame;

/// The malformed messages a hostile subscription socket sends around its reply to `eth_subscribe` `id`.
pub fn ws_barrage(id: &str) -> Vec<Vec<u8>> {
    let text = |s: String| ws_frame(0x1, s.as_bytes());
    vec![
        text(r#"{"\"#.into()),
        text(r#"{"jsonrpc":"2.0","id":"\"#.into()),
        text(r#"{"jsonrpc":"2.0","id":1e999999,"result":"0x1"}"#.into()),
        text(r#"{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"\ud800","result":{}}}"#.into()),
        text(format!(
            r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"0xbad","result":{}"#,
            "[".repeat(100_000)
        )),
        ws_frame(0x2, b"\xff\xfe{\"jsonrpc\":\"2.0\",\"id\":"),
        // The real confirmation, then notifications whose results are broken.
        text(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"0xbad"}}"#)),
        text(r#"{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0xbad","result":{"number":"\"#.into()),
        text(format!(
            r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"0xbad","result":{{"number":"0x{SECRET}","x":[}}}}}}}}"#
        )),
        text(r#"{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0xbad","result":{"number":"\ud800"}}}"#.into()),
        // A reserved opcode: a protocol error that ends the connection.
        ws_frame(0x3, b"reserved"),
    ]
}

pub struct HostileWs {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    shutdown: Arc<AtomicBool>,
}

impl HostileWs {
    pub fn start() -> HostileWs {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind hostile ws");
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let shutdown = Arc::new(AtomicBool::new(false));
        let (a, s) = (accepted.clone(), shutdown.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                thread::spawn(move || serve_ws(stream));
            }
        });
        HostileWs {
            addr,
            accepted,
            shutdown,
        }
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// WebSocket connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for HostileWs {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve_ws(stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    while let Ok(msg) = ws.read() {
        let text = match msg {
            tungstenite::Message::Text(t) => t,
            tungstenite::Message::Close(_) => return,
            _ => continue,
        };
        if !text.contains("eth_subscribe") {
            continue;
        }
        let id: String = text
            .split(r#""id":"#)
            .nth(1)
            .map(|r| r.chars().take_while(char::is_ascii_digit).collect())
            .unwrap_or_else(|| "0".into());
        let raw = ws.get_mut();
        for frame in ws_barrage(&id) {
            if raw.write_all(&frame).is_err() {
                return;
            }
        }
        let _ = raw.flush();
        let _ = raw.shutdown(Shutdown::Write);
        return;
    }
}
