//! Building the upstream HTTP request: one buffer, one write.

/// Appends a complete `POST` request for `body` to `out`; `extra` is the provider's own header lines
/// (`ExtraHeaders::wire`, written once per provider), copied as they are.
pub fn write_post(out: &mut Vec<u8>, path: &str, host_header: &str, extra: &[u8], body: &[u8]) {
    const START: &[u8] = b"POST ";
    const BEFORE_HOST: &[u8] = b" HTTP/1.1\r\nHost: ";
    const AFTER_HOST: &[u8] = concat!(
        "\r\nContent-Type: application/json\r\nAccept: application/json\r\nUser-Agent: prism/",
        env!("CARGO_PKG_VERSION"),
        "\r\n"
    )
    .as_bytes();
    const LENGTH: &[u8] = b"Content-Length: ";
    const END: &[u8] = b"\r\n\r\n";
    let mut len = itoa::Buffer::new();
    let len = len.format(body.len()).as_bytes();
    let parts = [
        START,
        path.as_bytes(),
        BEFORE_HOST,
        host_header.as_bytes(),
        AFTER_HOST,
        extra,
        LENGTH,
        len,
        END,
        body,
    ];
    // Sized exactly: one allocation per request, never a second one to grow it.
    out.reserve(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn post_is_well_formed() {
        let mut out = Vec::new();
        super::write_post(&mut out, "/v2/k", "h:8545", b"x-api-key: s\r\n", b"{}");
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(&out).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial"),
        };
        assert_eq!((req.method, req.path), (Some("POST"), Some("/v2/k")));
        assert_eq!(&out[n..], b"{}");
        assert!(req
            .headers
            .iter()
            .any(|h| h.name == "Content-Length" && h.value == b"2"));
        assert!(req.headers.iter().any(|h| h.name == "x-api-key" && h.value == b"s"));
    }
}
