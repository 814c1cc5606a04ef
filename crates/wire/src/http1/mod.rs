//! HTTP/1.1 pieces both sides of the proxy share: the read buffer, the spare buffers idle connections hand
//! back, the chunked-body decoder, and the server's side of WebSocket framing (`ws_frame`).
//! Head parsing is httparse; what a head *means* is decided by `edge` (requests) and `transport` (responses).

mod buf;
mod chunked;
mod spares;
pub mod ws_frame;

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
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    // Digits only, accumulated directly (19 digits cannot overflow a u64).
    let mut n = 0u64;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    usize::try_from(n).ok()
}

#[cfg(test)]
mod content_length_tests {
    use super::parse_content_length as cl;

    #[test]
    fn content_length_is_digits_only_and_never_overflows() {
        assert_eq!(cl(b"12"), Some(12));
        assert_eq!(cl(b" 7\t"), Some(7));
        assert_eq!(cl(b"0012"), Some(12));
        assert_eq!(cl(b"0"), Some(0));
        assert_eq!(cl(b"9999999999999999999"), Some(9_999_999_999_999_999_999));
        for bad in [
            &b""[..],
            b" ",
            b"+1",
            b"-1",
            b"1a",
            b"1 2",
            b"0x10",
            b"12345678901234567890",
            "١".as_bytes(),
        ] {
            assert_eq!(cl(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
