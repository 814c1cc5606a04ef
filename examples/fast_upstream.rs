//! A fast loopback JSON-RPC upstream for `perf/`: std only, one thread per connection, HTTP/1.1 keep-alive.
//!
//! Every call is answered with `{"jsonrpc":"2.0","id":<the request's id bytes, echoed exactly>,"result":"0x1"}`
//! (`eth_chainId` answers the configured chain id so a start-up check passes). A batch gets an array with one
//! answer per element that carries an id. Request bodies must use Content-Length or chunked encoding.
//!
//! Usage: `fast_upstream [ADDR] [CHAIN_ID]` (defaults `127.0.0.1:0`, 4663). Prints `listening ADDR` once bound.
//!
//! Built by `perf/compare.sh` straight with rustc (std only), so it works whatever state the library is in;
//! `cargo run --release --example fast_upstream` works too.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".to_string());
    let chain_id: u64 = args.next().map(|s| s.parse().expect("CHAIN_ID")).unwrap_or(4663);
    let listener = TcpListener::bind(&addr).expect("bind");
    println!("listening {}", listener.local_addr().expect("local_addr"));
    io::stdout().flush().ok();
    let chain_hex: &'static str = Box::leak(format!("\"0x{chain_id:x}\"").into_boxed_str());
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = serve(stream, chain_hex);
            })
            .ok();
    }
}

#[expect(clippy::too_many_lines, reason = "listed in scripts/targets.allow until it is split")]
fn serve(mut s: TcpStream, chain_hex: &str) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(4 * 1024);
    let mut body: Vec<u8> = Vec::new();
    let mut start = 0usize; // start of the unconsumed bytes in buf
    loop {
        // Read until a full header block is buffered.
        let head_end = loop {
            if let Some(p) = find(&buf[start..], b"\r\n\r\n") {
                break start + p + 4;
            }
            if start > 0 {
                buf.drain(..start);
                start = 0;
            }
            if !fill(&mut s, &mut buf)? {
                return Ok(());
            }
        };
        let head = &buf[start..head_end];
        let mut content_length: Option<usize> = None;
        let mut chunked = false;
        let mut close = false;
        let is_http10 = find(head, b"HTTP/1.0\r\n").is_some();
        for line in head.split(|&b| b == b'\n').skip(1) {
            let line = trim(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
            if name.eq_ignore_ascii_case(b"content-length") {
                content_length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                chunked = contains_ci(value, b"chunked");
            } else if name.eq_ignore_ascii_case(b"connection") {
                close = contains_ci(value, b"close");
            }
        }
        if is_http10 {
            close = true;
        }
        start = head_end;
        body.clear();
        if chunked {
            loop {
                let line_end = loop {
                    if let Some(p) = find(&buf[start..], b"\r\n") {
                        break start + p;
                    }
                    if !fill(&mut s, &mut buf)? {
                        return Ok(());
                    }
                };
                let size_txt = &buf[start..line_end];
                let size_txt = size_txt.split(|&b| b == b';').next().unwrap_or(b"");
                let size = usize::from_str_radix(std::str::from_utf8(trim(size_txt)).unwrap_or("0"), 16)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "chunk size"))?;
                start = line_end + 2;
                if size == 0 {
                    // Trailers (none expected) end with an empty line.
                    loop {
                        if let Some(p) = find(&buf[start..], b"\r\n") {
                            let empty = p == 0;
                            start += p + 2;
                            if empty {
                                break;
                            }
                        } else if !fill(&mut s, &mut buf)? {
                            return Ok(());
                        }
                    }
                    break;
                }
                while buf.len() < start + size + 2 {
                    if !fill(&mut s, &mut buf)? {
                        return Ok(());
                    }
                }
                body.extend_from_slice(&buf[start..start + size]);
                start += size + 2;
            }
        } else {
            let n = content_length.unwrap_or(0);
            while buf.len() < start + n {
                if !fill(&mut s, &mut buf)? {
                    return Ok(());
                }
            }
            body.extend_from_slice(&buf[start..start + n]);
            start += n;
        }

        out.clear();
        let mut payload: Vec<u8> = Vec::with_capacity(128);
        answer(&body, chain_hex, &mut payload);
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ");
        out.extend_from_slice(payload.len().to_string().as_bytes());
        if close {
            out.extend_from_slice(b"\r\nConnection: close");
        }
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(&payload);
        s.write_all(&out)?;
        if close {
            return Ok(());
        }
        if start == buf.len() {
            buf.clear();
            start = 0;
        }
    }
}

/// Reads more bytes into `buf`; false at end of stream.
fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    let len = buf.len();
    if buf.capacity() - len < 4096 {
        buf.reserve(16 * 1024);
    }
    buf.resize(buf.capacity(), 0);
    let n = match s.read(&mut buf[len..]) {
        Ok(n) => n,
        Err(e) => {
            buf.truncate(len);
            return Err(e);
        }
    };
    buf.truncate(len + n);
    Ok(n > 0)
}

/// Writes the answer for a single call or a batch into `out`.
fn answer(body: &[u8], chain_hex: &str, out: &mut Vec<u8>) {
    let calls = scan(body);
    let batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if batch {
        out.push(b'[');
    }
    let mut first = true;
    for c in &calls {
        let Some((a, b)) = c.id else {
            if batch {
                continue;
            }
            // Single notification: still answer something small and valid.
            out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":\"0x1\"}");
            continue;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.extend_from_slice(&body[a..b]);
        out.extend_from_slice(b",\"result\":");
        if c.chain_id {
            out.extend_from_slice(chain_hex.as_bytes());
        } else {
            out.extend_from_slice(b"\"0x1\"");
        }
        out.push(b'}');
    }
    if calls.is_empty() && !batch {
        out.extend_from_slice(
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse error\"}}",
        );
    }
    if batch {
        out.push(b']');
    }
}

struct Call {
    /// Byte span of the id value.
    id: Option<(usize, usize)>,
    chain_id: bool,
}

/// A small byte scan: for each call object (the root object, or each object directly inside the root array),
/// finds the span of its top-level `"id"` value and whether its method is `eth_chainId`.
fn scan(b: &[u8]) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut depth = 0usize;
    let mut root_is_array = false;
    let mut i = 0usize;
    let mut seen_root = false;
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => {
                if !seen_root {
                    seen_root = true;
                    root_is_array = b[i] == b'[';
                }
                depth += 1;
                let call_depth = if root_is_array { 2 } else { 1 };
                if b[i] == b'{' && depth == call_depth {
                    calls.push(Call {
                        id: None,
                        chain_id: false,
                    });
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                let end = string_end(b, i);
                let call_depth = if root_is_array { 2 } else { 1 };
                if depth == call_depth {
                    // Is it a key? The next non-space byte is ':'.
                    let mut j = end;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if j < b.len() && b[j] == b':' {
                        let key = &b[i + 1..end - 1];
                        j += 1;
                        while j < b.len() && b[j].is_ascii_whitespace() {
                            j += 1;
                        }
                        if key == b"id" {
                            let vend = value_end(b, j);
                            if let Some(c) = calls.last_mut() {
                                c.id = Some((j, vend));
                            }
                            i = vend;
                            continue;
                        } else if key == b"method" && j < b.len() && b[j] == b'"' {
                            let vend = string_end(b, j);
                            if &b[j..vend] == b"\"eth_chainId\"" {
                                if let Some(c) = calls.last_mut() {
                                    c.chain_id = true;
                                }
                            }
                            i = vend;
                            continue;
                        }
                    }
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    calls
}

/// Index just past the closing quote of the string starting at `i`.
fn string_end(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// Index just past a scalar value (string, number, literal) starting at `i`.
fn value_end(b: &[u8], i: usize) -> usize {
    if i < b.len() && b[i] == b'"' {
        return string_end(b, i);
    }
    let mut j = i;
    while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
        j += 1;
    }
    j
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

fn contains_ci(h: &[u8], n: &[u8]) -> bool {
    h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}
