//! What the edge needs from an HTTP/1.1 request head, parsed with httparse.

use prism_wire::http1::{has_token, parse_content_length};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Options,
    Other,
}

/// The request head, reduced to what routing and framing need.
#[derive(Debug, Clone, Default)]
pub struct RequestHead {
    pub method: Option<Method>,
    /// Path without the query string.
    pub path: String,
    pub content_length: Option<usize>,
    pub chunked: bool,
    pub keep_alive: bool,
    pub expect_continue: bool,
    pub origin: Option<Vec<u8>>,
    /// From `x-api-key` or `Authorization: Bearer`.
    pub api_key: Option<Vec<u8>>,
    /// Hash of `x-prism-session`, for per-session high-water marks.
    pub session: Option<u64>,
    /// `Upgrade: websocket` was asked for.
    pub upgrade_websocket: bool,
    /// `Sec-WebSocket-Key`, for the upgrade's accept hash.
    pub ws_key: Option<Vec<u8>>,
    /// Length of the head in bytes (request line, headers, blank line).
    pub len: usize,
}

/// Why a head was refused; each maps to one status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// 431: the head exceeds `limits.max_header_bytes` or has too many headers.
    TooLarge,
    /// 400: not HTTP/1.x, or framing headers we must not guess about.
    Malformed(&'static str),
    /// 501: a transfer coding other than chunked.
    UnsupportedEncoding,
}

/// Most headers accepted in one request.
const MAX_HEADERS: usize = 64;

/// Parses a head from the start of `buf`. `Ok(None)` means more bytes are needed.
pub fn parse_head(buf: &[u8], max_header_bytes: usize) -> Result<Option<RequestHead>, HeadError> {
    // Left uninitialised: httparse writes the ones it fills (zeroing 64 headers cost more than parsing a few).
    let mut headers = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) if n > max_header_bytes => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > max_header_bytes => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(_) => return Err(HeadError::Malformed("malformed HTTP request")),
    };
    let method = match req.method.unwrap_or("") {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "OPTIONS" => Method::Options,
        _ => Method::Other,
    };
    let raw_path = req.path.unwrap_or("/");
    let path = raw_path.split(['?', '#']).next().unwrap_or("/").to_string();
    let http11 = req.version == Some(1);
    let mut head = RequestHead {
        method: Some(method),
        path,
        keep_alive: http11,
        len,
        ..Default::default()
    };
    let mut transfer_encoding = false;
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let v = parse_content_length(h.value).ok_or(HeadError::Malformed("invalid Content-Length"))?;
            if head.content_length.is_some_and(|l| l != v) {
                return Err(HeadError::Malformed("conflicting Content-Length headers"));
            }
            head.content_length = Some(v);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            // Only `chunked`, alone, is meaningful for a request we must frame exactly.
            if h.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                head.chunked = true;
            } else {
                return Err(HeadError::UnsupportedEncoding);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                head.keep_alive = false;
            } else if has_token(h.value, "keep-alive") {
                head.keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("expect") {
            if h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
                head.expect_continue = http11;
            } else {
                return Err(HeadError::Malformed("unsupported Expect header"));
            }
        } else if name.eq_ignore_ascii_case("origin") {
            head.origin = Some(h.value.to_vec());
        } else if name.eq_ignore_ascii_case("x-api-key") {
            head.api_key = Some(h.value.trim_ascii().to_vec());
        } else if name.eq_ignore_ascii_case("authorization") {
            let v = h.value.trim_ascii();
            if v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ") {
                head.api_key.get_or_insert_with(|| v[7..].trim_ascii().to_vec());
            }
        } else if name.eq_ignore_ascii_case("x-prism-session") {
            use std::hash::{Hash, Hasher};
            // A fixed-key hash: every shard must map a session to the same slot.
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            h.value.trim_ascii().hash(&mut hasher);
            head.session = Some(hasher.finish());
        } else if name.eq_ignore_ascii_case("sec-websocket-key") {
            head.ws_key = Some(h.value.trim_ascii().to_vec());
        } else if name.eq_ignore_ascii_case("upgrade") {
            head.upgrade_websocket = has_token(h.value, "websocket");
        }
    }
    // Both framings at once is how requests get smuggled past proxies: refuse.
    if transfer_encoding && head.content_length.is_some() {
        return Err(HeadError::Malformed("both Transfer-Encoding and Content-Length"));
    }
    Ok(Some(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_framing_and_connection() {
        let h = parse_head(
            b"POST /net/key?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nOrigin: https://o\r\n\r\nhello",
            1024,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (h.method, h.path.as_str(), h.content_length, h.keep_alive),
            (Some(Method::Post), "/net/key", Some(5), true)
        );
        assert_eq!(h.origin.as_deref(), Some(&b"https://o"[..]));
        let h = parse_head(
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
            1024,
        )
        .unwrap()
        .unwrap();
        assert!(h.chunked && !h.keep_alive && !h.expect_continue);
    }

    #[test]
    fn every_header_it_reads_is_read_among_many_it_does_not() {
        let h = parse_head(
            b"GET /n HTTP/1.1\r\nHost: a\r\nUser-Agent: u\r\nACCEPT: */*\r\nConnection: Upgrade, keep-alive\r\n\
              UPGRADE: websocket\r\nSec-WebSocket-Key: k==\r\nX-Api-Key: key1\r\nX-Prism-Session: s\r\n\
              Origin: https://o\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n\
              Content-Length: 3\r\nAccept-Encoding: gzip\r\n\r\n",
            4096,
        )
        .unwrap()
        .unwrap();
        assert!(h.upgrade_websocket && h.keep_alive && h.expect_continue);
        assert_eq!(h.ws_key.as_deref(), Some(&b"k=="[..]));
        assert_eq!(h.api_key.as_deref(), Some(&b"key1"[..]));
        assert_eq!(h.origin.as_deref(), Some(&b"https://o"[..]));
        assert!(h.session.is_some());
        assert_eq!(h.content_length, Some(3));
        let h = parse_head(
            b"POST / HTTP/1.1\r\nauthorization: Bearer tok\r\nconnection: close\r\n\r\n",
            4096,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.api_key.as_deref(), Some(&b"tok"[..]));
        assert!(!h.keep_alive);
        assert_eq!(
            parse_head(b"POST / HTTP/1.1\r\nTRANSFER-ENCODING: gzip\r\n\r\n", 4096).unwrap_err(),
            HeadError::UnsupportedEncoding
        );
    }

    #[test]
    fn refuses_what_it_must() {
        assert_eq!(
            parse_head(b"POST / HTTP/1.1\r\nX: y", 1024).unwrap().map(|h| h.len),
            None
        );
        assert_eq!(parse_head(&[b'a'; 2000], 1024).unwrap_err(), HeadError::TooLarge);
        assert!(matches!(
            parse_head(b"\x00\x01 nope\r\n\r\n", 1024),
            Err(HeadError::Malformed(_))
        ));
        let both = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(parse_head(both, 1024), Err(HeadError::Malformed(_))));
        let gzip = b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert_eq!(parse_head(gzip, 1024).unwrap_err(), HeadError::UnsupportedEncoding);
        let two = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert!(matches!(parse_head(two, 1024), Err(HeadError::Malformed(_))));
    }
}
