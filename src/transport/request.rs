//! Building the upstream HTTP request: one buffer, one write.

/// Appends a complete `POST` request for `body` to `out`.
pub fn write_post(out: &mut Vec<u8>, path: &str, host_header: &str, body: &[u8]) {
    out.reserve(128 + path.len() + host_header.len() + body.len());
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host_header.as_bytes());
    out.extend_from_slice(b"\r\nContent-Type: application/json\r\nAccept: application/json\r\nUser-Agent: prism/");
    out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
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
