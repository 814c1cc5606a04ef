//! Reading upstream responses: what a head means (`parse_head`, pure) and how a whole response comes off
//! a real loopback socket (`read_response`), including when the connection may carry another request.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use super::super::conn::Stream;
use super::*;

fn head(raw: &str) -> ResponseHead {
    match parse_head(raw.as_bytes()) {
        Ok(Some(h)) => h,
        other => panic!("{raw:?} gave {other:?}"),
    }
}

fn malformed(raw: &[u8]) -> &'static str {
    match parse_head(raw) {
        Err(TransportError::Malformed(why)) => why,
        other => panic!("{:?} gave {other:?}", String::from_utf8_lossy(raw)),
    }
}

#[test]
fn content_length_head_is_length_framed_keep_alive() {
    let raw = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"result\":\"0x1\"}";
    let h = head(raw);
    assert_eq!(h.status, 200);
    assert_eq!(h.framing, Framing::Length(17));
    assert!(h.keep_alive, "HTTP/1.1 keeps the connection unless told otherwise");
    assert_eq!(
        &raw[h.len..],
        "{\"result\":\"0x1\"}",
        "len covers the head and its blank line, no more"
    );
}

#[test]
fn header_names_are_case_insensitive() {
    let h = head("HTTP/1.1 200 OK\r\ncontent-LENGTH: 3\r\nCONNECTION: Close\r\n\r\n");
    assert_eq!(h.framing, Framing::Length(3));
    assert!(!h.keep_alive);
}

#[test]
fn status_code_is_kept() {
    assert_eq!(
        head("HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n").status,
        429
    );
    assert_eq!(head("HTTP/1.1 503 \r\nContent-Length: 0\r\n\r\n").status, 503);
}

#[test]
fn chunked_wins_over_content_length() {
    // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length.
    let h = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(h.framing, Framing::Chunked);
    let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n");
    assert_eq!(h.framing, Framing::Chunked);
}

#[test]
fn transfer_encoding_other_than_chunked_is_refused() {
    assert_eq!(
        malformed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
        "unsupported transfer-encoding"
    );
}

#[test]
fn no_length_and_no_chunking_reads_until_close() {
    assert_eq!(
        head("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n").framing,
        Framing::UntilClose
    );
}

#[test]
fn bodiless_statuses_have_no_body_whatever_the_headers_say() {
    for status in [100, 101, 204, 304] {
        let raw = format!("HTTP/1.1 {status} X\r\nContent-Length: 10\r\n\r\n");
        assert_eq!(head(&raw).framing, Framing::Length(0), "status {status}");
    }
    // A 204 without any length must not wait for a close either.
    assert_eq!(head("HTTP/1.1 204 No Content\r\n\r\n").framing, Framing::Length(0));
}

#[test]
fn bad_content_length_is_refused() {
    for v in ["abc", "-1", "+5", "1 2", "0x10", "", "99999999999999999999"] {
        let raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {v}\r\n\r\n");
        assert_eq!(malformed(raw.as_bytes()), "bad content-length", "value {v:?}");
    }
}

#[test]
fn repeated_content_length_must_agree() {
    let h = head("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n");
    assert_eq!(h.framing, Framing::Length(4));
    assert_eq!(
        malformed(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n"),
        "conflicting content-length"
    );
}

#[test]
fn connection_tokens_decide_keep_alive() {
    assert!(!head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keep_alive);
    assert!(!head("HTTP/1.1 200 OK\r\nConnection: upgrade, close\r\nContent-Length: 0\r\n\r\n").keep_alive);
    assert!(
        !head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive,
        "HTTP/1.0 closes by default"
    );
    assert!(head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n").keep_alive);
    assert!(head("HTTP/1.1 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").keep_alive);
}

#[test]
fn incomplete_head_asks_for_more() {
    let full = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
    for cut in 0..full.len() {
        assert_eq!(parse_head(&full[..cut]), Ok(None), "cut at {cut}");
    }
}

#[test]
fn head_larger_than_max_head_is_refused_not_waited_for() {
    let mut raw = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
    raw.resize(MAX_HEAD, b'a');
    assert_eq!(parse_head(&raw), Ok(None), "at the limit it may still complete");
    raw.push(b'a');
    assert_eq!(malformed(&raw), "response head too large");
}

#[test]
fn not_http_is_refused() {
    assert_eq!(malformed(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), "not an HTTP/1.1 response");
    assert_eq!(malformed(b"HTTP/1.1 abc OK\r\n\r\n"), "not an HTTP/1.1 response");
    assert_eq!(malformed(b"{\"jsonrpc\":\"2.0\"}\r\n\r\n"), "not an HTTP/1.1 response");
}

#[test]
fn more_than_64_headers_is_malformed() {
    // The parser's fixed header array: a head with more lines is refused, never read past.
    let mut raw = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..65 {
        raw.push_str(&format!("X-{i}: v\r\n"));
    }
    raw.push_str("Content-Length: 0\r\n\r\n");
    assert_eq!(malformed(raw.as_bytes()), "not an HTTP/1.1 response");
    let mut ok = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..63 {
        ok.push_str(&format!("X-{i}: v\r\n"));
    }
    ok.push_str("Content-Length: 0\r\n\r\n");
    assert_eq!(head(&ok).framing, Framing::Length(0));
}

// read_response over a real socket.

/// A one-connection server that writes `pieces` one write at a time (no Nagle), then closes if `close`,
/// else keeps the connection open until the client closes it.
fn serve(pieces: Vec<Vec<u8>>, close: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        for p in pieces {
            if s.write_all(&p).is_err() {
                return;
            }
        }
        if !close {
            let mut sink = [0u8; 64];
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        }
    });
    addr
}

/// Reads one response from a server that sends `pieces`: the result and how many bytes were left unread.
fn read(pieces: Vec<Vec<u8>>, close: bool, max: usize) -> (Result<UpstreamResponse, TransportError>, usize) {
    let addr = serve(pieces, close);
    prism_runtime::test_shard(async move {
        let tcp = prism_runtime::net::TcpStream::connect(addr).await.unwrap();
        let mut conn = Conn::new(Stream::Plain(tcp));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let out = prism_runtime::timeout_at(deadline, read_response(&mut conn, max))
            .await
            .expect("read_response hung");
        (out, conn.buf.len())
    })
}

/// `raw` in pieces of `n` bytes.
fn bytes_of(raw: &[u8], n: usize) -> Vec<Vec<u8>> {
    raw.chunks(n).map(<[u8]>::to_vec).collect()
}

const MAX: usize = 1 << 20;

#[test]
fn length_framed_answer_split_into_many_writes_is_read_whole() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\nabcdefghijklmnopqrstuvwxyz";
    let (out, left) = read(bytes_of(raw, 3), false, MAX);
    let resp = out.unwrap();
    assert_eq!((resp.status, &resp.body[..]), (200, &b"abcdefghijklmnopqrstuvwxyz"[..]));
    assert!(resp.reusable);
    assert_eq!(left, 0);
}

#[test]
fn chunked_answer_with_extensions_and_trailers_is_decoded() {
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n";
    let (out, left) = read(bytes_of(raw, 4), false, MAX);
    let resp = out.unwrap();
    assert_eq!(resp.body, b"hello, world");
    assert!(
        resp.reusable,
        "a chunked answer read to its last chunk leaves the connection usable"
    );
    assert_eq!(left, 0);
}

#[test]
fn interim_100_continue_is_skipped() {
    let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let resp = read(vec![raw.to_vec()], false, MAX).0.unwrap();
    assert_eq!((resp.status, &resp.body[..]), (200, &b"ok"[..]));
}

#[test]
fn no_content_answer_needs_no_body() {
    let resp = read(vec![b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()], false, MAX)
        .0
        .unwrap();
    assert_eq!((resp.status, resp.body.len(), resp.reusable), (204, 0, true));
}

#[test]
fn connection_close_answer_is_not_reusable() {
    let raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok".to_vec();
    let resp = read(vec![raw], false, MAX).0.unwrap();
    assert_eq!(resp.body, b"ok");
    assert!(!resp.reusable);
}

#[test]
fn until_close_answer_is_read_to_eof_and_not_reusable() {
    let raw = b"HTTP/1.1 200 OK\r\n\r\n{\"result\":1}".to_vec();
    let resp = read(bytes_of(&raw, 5), true, MAX).0.unwrap();
    assert_eq!(resp.body, b"{\"result\":1}");
    assert!(!resp.reusable);
}

#[test]
fn bytes_after_the_answer_make_it_not_reusable() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n".to_vec();
    let (out, left) = read(vec![raw], false, MAX);
    let resp = out.unwrap();
    assert_eq!(resp.body, b"ok", "the answer is what Content-Length says, no more");
    assert!(!resp.reusable);
    assert!(left > 0);
}

#[test]
fn close_before_the_body_is_complete_is_a_reset_after_sending() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf".to_vec();
    assert_eq!(
        read(vec![raw], true, MAX).0.unwrap_err(),
        TransportError::Reset { sent: true }
    );
}

#[test]
fn close_mid_head_or_before_any_byte_is_a_reset() {
    assert_eq!(
        read(vec![b"HTTP/1.1 200 OK\r\nContent-Le".to_vec()], true, MAX)
            .0
            .unwrap_err(),
        TransportError::Reset { sent: true }
    );
    assert_eq!(
        read(vec![], true, MAX).0.unwrap_err(),
        TransportError::Reset { sent: true }
    );
}

#[test]
fn close_mid_chunked_body_is_a_reset() {
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel".to_vec();
    assert_eq!(
        read(vec![raw], true, MAX).0.unwrap_err(),
        TransportError::Reset { sent: true }
    );
}

#[test]
fn content_length_over_the_limit_is_refused_before_reading_the_body() {
    // The body never comes: the promise alone is enough to refuse.
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n".to_vec();
    assert_eq!(
        read(vec![raw], false, 1000).0.unwrap_err(),
        TransportError::TooLarge { max: 1000 }
    );
}

#[test]
fn body_exactly_at_the_limit_is_accepted() {
    let mut raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_vec();
    raw.extend(std::iter::repeat_n(b'x', 1000));
    assert_eq!(read(vec![raw], false, 1000).0.unwrap().body.len(), 1000);
}

#[test]
fn chunked_body_over_the_limit_is_too_large() {
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n".to_vec(); // one 1000-byte chunk
    assert_eq!(
        read(vec![raw], false, 999).0.unwrap_err(),
        TransportError::TooLarge { max: 999 }
    );
}

#[test]
fn until_close_body_over_the_limit_is_too_large() {
    let mut raw = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
    raw.extend(std::iter::repeat_n(b'x', 2000));
    assert_eq!(
        read(bytes_of(&raw, 500), true, 1000).0.unwrap_err(),
        TransportError::TooLarge { max: 1000 }
    );
}

#[test]
fn malformed_chunked_encoding_is_malformed() {
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec();
    assert_eq!(
        read(vec![raw], false, MAX).0.unwrap_err(),
        TransportError::Malformed("bad chunked encoding")
    );
}

#[test]
fn body_larger_than_the_first_reservation_is_read_whole() {
    // Above the 1 MiB up-front reservation: the rest must still be read, byte for byte.
    let len = 3 << 20;
    let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n").into_bytes();
    raw.extend_from_slice(&body);
    let resp = read(bytes_of(&raw, 64 << 10), false, 4 << 20).0.unwrap();
    assert!(resp.body == body, "body differs (len {} vs {len})", resp.body.len());
    assert!(resp.reusable);
}
