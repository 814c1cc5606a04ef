//! Raw HTTP/1.1 on std sockets, for tests that need exact control of the bytes on the wire.
//!
//! - [`Wire`]: a `TcpStream` plus a read buffer, so pipelined / keep-alive messages are never lost between
//!   reads. Used by both the client helper [`Conn`] and the fake provider.
//! - [`read_request`] / [`read_response`]: one message, body by `Content-Length`, `chunked` or (responses only)
//!   until EOF.
//! - [`post`], [`post_with`], [`chunked_post`]: request bytes builders.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Default read timeout of client connections: a test never blocks forever on a silent peer.
pub const CLIENT_READ_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Wire {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

fn eof(what: &str) -> io::Error {
    io::Error::new(ErrorKind::UnexpectedEof, what.to_string())
}

fn bad(what: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what)
}

impl Wire {
    pub fn new(stream: TcpStream) -> Wire {
        Wire {
            stream,
            buf: Vec::with_capacity(8192),
        }
    }

    /// Bytes read from the socket but not consumed yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Reads more bytes into the buffer; returns how many (0 = EOF).
    pub fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 16384];
        let n = self.stream.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let rest = self.buf.split_off(n);
        std::mem::replace(&mut self.buf, rest)
    }

    fn read_exact_buf(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill()? == 0 {
                return Err(eof("EOF inside body"));
            }
        }
        Ok(self.take(n))
    }

    fn read_line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let mut line = self.take(p + 2);
                line.truncate(p);
                return Ok(line);
            }
            if self.fill()? == 0 {
                return Err(eof("EOF inside chunked framing"));
            }
        }
    }

    fn read_to_eof(&mut self) -> io::Result<Vec<u8>> {
        while self.fill()? > 0 {}
        Ok(std::mem::take(&mut self.buf))
    }

    /// Decodes a chunked body (extensions ignored, trailers skipped).
    pub fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line()?;
            let size_txt = String::from_utf8_lossy(&line);
            let size_txt = size_txt.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_txt, 16)
                .map_err(|_| bad(format!("bad chunk size line {:?}", String::from_utf8_lossy(&line))))?;
            if size == 0 {
                while !self.read_line()?.is_empty() {}
                return Ok(body);
            }
            body.extend(self.read_exact_buf(size)?);
            if !self.read_line()?.is_empty() {
                return Err(bad("chunk data not followed by CRLF".into()));
            }
        }
    }

    /// Reads a message head; returns its parsed form via `parse`, which gets the head bytes and reports
    /// `Some(len)` when complete. `Ok(None)` means a clean EOF before the first byte.
    fn read_head<T>(
        &mut self,
        mut parse: impl FnMut(&[u8]) -> io::Result<Option<(usize, T)>>,
    ) -> io::Result<Option<T>> {
        loop {
            if !self.buf.is_empty() {
                if let Some((len, t)) = parse(&self.buf)? {
                    self.take(len);
                    return Ok(Some(t));
                }
            }
            if self.fill()? == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(eof("EOF inside message head"));
            }
        }
    }
}

pub type Headers = Vec<(String, String)>;

fn find<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn has_token(headers: &Headers, name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

fn collect(h: &[httparse::Header]) -> Headers {
    h.iter()
        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
        .collect()
}

/// One HTTP request as received by a server.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        has_token(&self.headers, name, token)
    }
    /// Whether the client asked for the connection to end after this exchange.
    pub fn wants_close(&self) -> bool {
        self.has_token("connection", "close") || (self.version == 0 && !self.has_token("connection", "keep-alive"))
    }
}

/// Reads one request (`Ok(None)` on a clean EOF between requests).
pub fn read_request(w: &mut Wire) -> io::Result<Option<Request>> {
    let head = w.read_head(|b| {
        let mut hs = [httparse::EMPTY_HEADER; 100];
        let mut req = httparse::Request::new(&mut hs);
        match req.parse(b) {
            Ok(httparse::Status::Complete(len)) => Ok(Some((
                len,
                Request {
                    method: req.method.unwrap_or("").to_string(),
                    path: req.path.unwrap_or("").to_string(),
                    version: req.version.unwrap_or(1),
                    headers: collect(req.headers),
                    body: Vec::new(),
                },
            ))),
            Ok(httparse::Status::Partial) => Ok(None),
            Err(e) => Err(bad(format!("bad request head: {e}"))),
        }
    })?;
    let Some(mut req) = head else { return Ok(None) };
    if req.has_token("transfer-encoding", "chunked") {
        req.body = w.read_chunked()?;
    } else if let Some(len) = req.header("content-length") {
        let len: usize = len
            .trim()
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        req.body = w.read_exact_buf(len)?;
    }
    Ok(Some(req))
}

/// One HTTP response as received by a client.
#[derive(Clone, Debug)]
pub struct Response {
    pub version: u8,
    pub status: u16,
    pub reason: String,
    pub headers: Headers,
    pub body: Vec<u8>,
    /// The body arrived with `Transfer-Encoding: chunked`.
    pub chunked: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        has_token(&self.headers, name, token)
    }
    /// The server announced it will close the connection.
    pub fn closes(&self) -> bool {
        self.has_token("connection", "close")
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// The body as a serde_json value (panics with the body text when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response body is not JSON ({e}): status {} body {:?}",
                self.status,
                self.text()
            )
        })
    }
    /// Short description for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "HTTP {} {} headers {:?} body {:?}",
            self.status,
            self.reason,
            self.headers,
            self.text()
        )
    }
}

/// Reads one response. A `HEAD` request's response must not be read with this (it would wait for a body).
pub fn read_response(w: &mut Wire) -> io::Result<Response> {
    let head = w.read_head(|b| {
        let mut hs = [httparse::EMPTY_HEADER; 100];
        let mut resp = httparse::Response::new(&mut hs);
        match resp.parse(b) {
            Ok(httparse::Status::Complete(len)) => Ok(Some((
                len,
                Response {
                    version: resp.version.unwrap_or(1),
                    status: resp.code.unwrap_or(0),
                    reason: resp.reason.unwrap_or("").to_string(),
                    headers: collect(resp.headers),
                    body: Vec::new(),
                    chunked: false,
                },
            ))),
            Ok(httparse::Status::Partial) => Ok(None),
            Err(e) => Err(bad(format!(
                "bad response head: {e} in {:?}",
                String::from_utf8_lossy(b)
            ))),
        }
    })?;
    let Some(mut resp) = head else {
        return Err(eof("connection closed before any response byte"));
    };
    if (100..200).contains(&resp.status) || resp.status == 204 || resp.status == 304 {
        return Ok(resp);
    }
    if resp.has_token("transfer-encoding", "chunked") {
        resp.chunked = true;
        resp.body = w.read_chunked()?;
    } else if let Some(len) = resp.header("content-length") {
        let len: usize = len
            .trim()
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        resp.body = w.read_exact_buf(len)?;
    } else {
        resp.body = w.read_to_eof()?;
    }
    Ok(resp)
}

/// How a connection ended, as seen by [`Conn::wait_closed`].
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    /// Orderly FIN (read returned 0).
    Eof,
    /// RST (connection reset / aborted).
    Reset,
}

/// A client connection to a server under test.
pub struct Conn {
    pub wire: Wire,
}

impl Conn {
    pub fn try_connect(addr: SocketAddr) -> io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(CLIENT_READ_TIMEOUT))?;
        s.set_write_timeout(Some(CLIENT_READ_TIMEOUT))?;
        Ok(Conn { wire: Wire::new(s) })
    }

    pub fn connect(addr: SocketAddr) -> Conn {
        Conn::try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    pub fn stream(&self) -> &TcpStream {
        &self.wire.stream
    }

    /// Writes all bytes (one `write_all`; use several calls to trickle).
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.wire.stream.write_all(bytes)?;
        self.wire.stream.flush()
    }

    pub fn read_response(&mut self) -> io::Result<Response> {
        read_response(&mut self.wire)
    }

    /// Reads one response, failing with `TimedOut`/`WouldBlock` if none arrives within `d`.
    pub fn read_response_within(&mut self, d: Duration) -> io::Result<Response> {
        self.wire.stream.set_read_timeout(Some(d))?;
        let r = read_response(&mut self.wire);
        self.wire.stream.set_read_timeout(Some(CLIENT_READ_TIMEOUT))?;
        r
    }

    /// Sends `bytes` and reads one response, skipping `100 Continue`; panics on I/O errors.
    pub fn request(&mut self, bytes: &[u8]) -> Response {
        self.send(bytes).unwrap_or_else(|e| panic!("sending request: {e}"));
        loop {
            let r = self.read_response().unwrap_or_else(|e| panic!("reading response: {e}"));
            if r.status != 100 {
                return r;
            }
        }
    }

    /// Waits until the peer closes the connection (FIN or RST) within `within`. Any data received in the
    /// meantime is returned as an error (a test expecting a close does not expect bytes).
    pub fn wait_closed(&mut self, within: Duration) -> Result<Closed, String> {
        let deadline = Instant::now() + within;
        if !self.wire.buf.is_empty() {
            return Err(format!(
                "unexpected bytes before close: {:?}",
                String::from_utf8_lossy(&self.wire.buf)
            ));
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("connection still open after {within:?}"));
            }
            self.wire
                .stream
                .set_read_timeout(Some(left))
                .map_err(|e| e.to_string())?;
            let mut b = [0u8; 4096];
            match self.wire.stream.read(&mut b) {
                Ok(0) => return Ok(Closed::Eof),
                Ok(n) => {
                    return Err(format!(
                        "unexpected bytes before close: {:?}",
                        String::from_utf8_lossy(&b[..n])
                    ))
                }
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => {
                    return Ok(Closed::Reset)
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
                Err(e) => return Err(format!("read error while waiting for close: {e}")),
            }
        }
    }
}

/// `POST path` with a JSON body and `Content-Length`.
pub fn post(path: &str, body: &[u8]) -> Vec<u8> {
    post_with(path, body, &[])
}

/// `POST path` with extra header lines (each `"Name: value"`).
pub fn post_with(path: &str, body: &[u8], extra: &[&str]) -> Vec<u8> {
    let mut r = format!("POST {path} HTTP/1.1\r\nHost: prism.test\r\nContent-Type: application/json\r\n");
    for h in extra {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut v = r.into_bytes();
    v.extend_from_slice(body);
    v
}

/// `POST path` whose body is sent with `Transfer-Encoding: chunked`, one chunk per item of `chunks`.
pub fn chunked_post(path: &str, chunks: &[&[u8]]) -> Vec<u8> {
    let mut v = format!(
        "POST {path} HTTP/1.1\r\nHost: prism.test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for c in chunks {
        v.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        v.extend_from_slice(c);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

/// A request with no body (`GET`, `OPTIONS`, `DELETE` ...), with extra header lines.
pub fn bodyless(method: &str, path: &str, extra: &[&str]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: prism.test\r\n");
    for h in extra {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    r.into_bytes()
}
