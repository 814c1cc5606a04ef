//! Reading one HTTP/1.1 response off an upstream connection.

use prism_wire::http1::{has_token, parse_content_length, ChunkedDecoder};

use super::conn::Conn;
use super::TransportError;

/// A complete upstream response. Only what the proxy needs survives parsing.
#[derive(Debug)]
pub struct UpstreamResponse {
    pub status: u16,
    pub body: Vec<u8>,
    /// The connection may carry another request.
    pub(crate) reusable: bool,
}

impl UpstreamResponse {
    /// A response as if read off a connection that may carry another request: what an `Exchange` that is
    /// not the network (the balancer's unit tests) hands back.
    pub fn answered(status: u16, body: Vec<u8>) -> Self {
        Self {
            status,
            body,
            reusable: true,
        }
    }
}

/// Largest response head we accept from an upstream.
pub const MAX_HEAD: usize = 64 * 1024;

/// How the body after a response head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// What a response head says, once complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// Bytes of the head, blank line included.
    pub len: usize,
    pub framing: Framing,
    pub keep_alive: bool,
}

/// Parses the response head at the start of `buf`: `Ok(None)` while incomplete (and under [`MAX_HEAD`]).
/// Pure, so fuzzing reaches it; never panics, whatever the bytes.
pub fn parse_head(buf: &[u8]) -> Result<Option<ResponseHead>, TransportError> {
    // Left uninitialised: httparse writes the ones it fills (zeroing 64 headers cost more than parsing a few).
    let mut headers = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; 64];
    let mut resp = httparse::Response::new(&mut []);
    match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) => {
            let status = resp.code.unwrap_or(0);
            let http10 = resp.version == Some(0);
            let mut length = None;
            let mut chunked = false;
            let mut keep_alive = !http10;
            for h in resp.headers.iter() {
                if h.name.eq_ignore_ascii_case("content-length") {
                    let v = parse_content_length(h.value).ok_or(TransportError::Malformed("bad content-length"))?;
                    if length.is_some_and(|l| l != v) {
                        return Err(TransportError::Malformed("conflicting content-length"));
                    }
                    length = Some(v);
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = has_token(h.value, "chunked");
                    if !chunked {
                        return Err(TransportError::Malformed("unsupported transfer-encoding"));
                    }
                } else if h.name.eq_ignore_ascii_case("connection") {
                    if has_token(h.value, "close") {
                        keep_alive = false;
                    } else if has_token(h.value, "keep-alive") {
                        keep_alive = true;
                    }
                }
            }
            let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
                Framing::Length(0)
            } else if chunked {
                Framing::Chunked
            } else if let Some(l) = length {
                Framing::Length(l)
            } else {
                Framing::UntilClose
            };
            Ok(Some(ResponseHead {
                status,
                len: n,
                framing,
                keep_alive,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            Err(TransportError::Malformed("response head too large"))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => Err(TransportError::Malformed("not an HTTP/1.1 response")),
    }
}

/// Reads one response. `Reset { sent: true }` if the peer closed before a complete response.
pub async fn read_response(conn: &mut Conn, max_body: usize) -> Result<UpstreamResponse, TransportError> {
    loop {
        let head = loop {
            if let Some(head) = parse_head(conn.buf.filled())? {
                break head;
            }
            fill(conn).await?;
        };
        let ResponseHead {
            status,
            len: head_len,
            framing,
            keep_alive,
        } = head;
        conn.buf.consume(head_len);
        if (100..200).contains(&status) {
            continue; // 100 Continue and friends precede the real response
        }
        let mut body = Vec::new();
        let mut reusable = keep_alive;
        match framing {
            Framing::Length(len) => {
                if len > max_body {
                    return Err(TransportError::TooLarge { max: max_body });
                }
                // Reserve what a few reads bring, not what the head promises: a hostile Content-Length of
                // max_body on every pooled request must not allocate that much up front.
                body.reserve_exact(len.min(1 << 20));
                while body.len() < len {
                    if conn.buf.is_empty() {
                        fill(conn).await?;
                    }
                    conn.buf.take_into(len - body.len(), &mut body);
                }
            }
            Framing::Chunked => {
                let mut decoder = ChunkedDecoder::new(max_body);
                loop {
                    let used = decoder.decode(conn.buf.filled(), &mut body).map_err(|e| match e {
                        prism_wire::http1::ChunkError::TooLarge => TransportError::TooLarge { max: max_body },
                        prism_wire::http1::ChunkError::Malformed => TransportError::Malformed("bad chunked encoding"),
                    })?;
                    conn.buf.consume(used);
                    if decoder.is_done() {
                        break;
                    }
                    fill(conn).await?;
                }
            }
            Framing::UntilClose => {
                reusable = false;
                loop {
                    let n = conn.buf.len();
                    if body.len() + n > max_body {
                        return Err(TransportError::TooLarge { max: max_body });
                    }
                    conn.buf.take_into(n, &mut body);
                    match conn.buf.read_from(&mut conn.stream, 16 * 1024).await {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(_) => return Err(TransportError::Reset { sent: true }),
                    }
                }
            }
        }
        // Unasked bytes after the response mean we and the server disagree on framing: never reuse.
        if !conn.buf.is_empty() {
            reusable = false;
        }
        conn.buf.shrink_to(64 * 1024);
        return Ok(UpstreamResponse { status, body, reusable });
    }
}

async fn fill(conn: &mut Conn) -> Result<(), TransportError> {
    match conn.buf.read_from(&mut conn.stream, 8 * 1024).await {
        Ok(0) | Err(_) => Err(TransportError::Reset { sent: true }),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
#[path = "response_tests.rs"]
mod tests;
