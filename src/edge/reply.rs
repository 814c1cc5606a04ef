//! Writing what the client receives: JSON-RPC reply objects with the client's own id bytes, and the
//! HTTP/1.1 response around them.

use prism_wire::rpc::wire::write_json_str;

/// `{"jsonrpc":"2.0","id":<id>,"result"|"error":<value>}`: `value` is the upstream's bytes, untouched.
pub fn write_answer(out: &mut Vec<u8>, id: &[u8], is_error: bool, value: &[u8]) {
    out.reserve(48 + id.len() + value.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    out.extend_from_slice(if is_error { br#","error":"# } else { br#","result":"# });
    out.extend_from_slice(value);
    out.push(b'}');
}

/// An error Prism produced itself. `id` is `None` when the request's id could not be read (→ `null`).
pub fn write_error(out: &mut Vec<u8>, id: Option<&[u8]>, code: i32, message: &str, data: Option<&[u8]>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.unwrap_or(b"null"));
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(itoa::Buffer::new().format(code).as_bytes());
    out.extend_from_slice(br#","message":"#);
    write_json_str(out, message);
    if let Some(d) = data {
        out.extend_from_slice(br#","data":"#);
        out.extend_from_slice(d);
    }
    out.extend_from_slice(b"}}");
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// Headers that vary per response besides framing.
#[derive(Default)]
pub struct ResponseMeta<'a> {
    pub keep_alive: bool,
    /// Echoed as `Access-Control-Allow-Origin` when the request carried an Origin.
    pub cors_origin: Option<&'a [u8]>,
    /// Extra `Name: value` header lines, without CRLF.
    pub extra: &'a [&'a str],
    /// For HEAD: send the headers of `body` but not the body.
    pub omit_body: bool,
    /// Defaults to `application/json`.
    pub content_type: Option<&'a str>,
    /// Header lines already rendered, each ending in CRLF (the diagnostic headers).
    pub raw: &'a [u8],
}

/// Appends a full HTTP/1.1 response with a JSON (or empty) body.
pub fn write_http(out: &mut Vec<u8>, status: u16, body: &[u8], meta: &ResponseMeta<'_>) {
    out.reserve(192 + body.len());
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    if status != 204 {
        out.extend_from_slice(b"Content-Type: ");
        out.extend_from_slice(meta.content_type.unwrap_or("application/json").as_bytes());
        out.extend_from_slice(b"\r\nContent-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(origin) = meta.cors_origin {
        out.extend_from_slice(b"Access-Control-Allow-Origin: ");
        out.extend_from_slice(origin);
        out.extend_from_slice(b"\r\nVary: Origin\r\n");
    }
    for line in meta.extra {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(meta.raw);
    if !meta.keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if status != 204 && !meta.omit_body {
        out.extend_from_slice(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_splices_id_and_value() {
        let mut out = Vec::new();
        write_answer(&mut out, br#""a\u00e9""#, false, br#"{"x" : 1}"#);
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":"a\u00e9","result":{"x" : 1}}"#);
        out.clear();
        write_error(&mut out, None, -32700, "Parse error: \"x\"", None);
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: \"x\""}}"#
        );
    }
}
