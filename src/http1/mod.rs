//! HTTP/1.1 pieces both sides of the proxy share: the read buffer, the spare buffers idle connections hand
//! back, and the chunked-body decoder.
//! Head parsing is httparse; what a head *means* is decided by `edge` (requests) and `transport` (responses).

mod buf;
mod chunked;
mod spares;

pub use buf::ReadBuf;
pub use chunked::{ChunkError, ChunkedDecoder};
pub use spares::SpareBufs;

/// Case-insensitive check for one token in a comma-separated header value (`Connection: keep-alive, Upgrade`).
pub fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|part| part.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses a Content-Length value strictly: digits only, no sign, no overflow.
pub fn parse_content_length(value: &[u8]) -> Option<usize> {
    let v = value.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
