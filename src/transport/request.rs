//! Building the upstream HTTP request: one buffer, one write.

/// Appends a complete `POST` request for `body` to `out`.
pub fn write_post(out: &mut Vec<u8>, path: &str, host_header: &str, body: &[u8]) {
    const AFTER_HOST: &[u8] = concat!(
        "\r\nContent-Type: application/json\r\nAccept: application/json\r\nUser-Agent: prism/",
        env!("CARGO_PKG_VERSION"),
        "\r\nContent-Length: "
    )
    .as_bytes();
    let mut len = itoa::Buffer::new();
    let len = len.format(body.len()).as_bytes();
    // Sized exactly: one allocation per request, never a second one to grow it.
    out.reserve(5 + path.len() + 17 + host_header.len() + AFTER_HOST.len() + len.len() + 4 + body.len());
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host_header.as_bytes());
    out.extend_from_slice(AFTER_HOST);
    out.extend_from_slice(len);
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    #[test]
    fn post_is_well_formed() {
        let mut out = Vec::new();
        super::write_post(&mut out, "/v2/k", "h:8545", b"{}");
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
    }
}
