//! The edge HTTP/1.1 server through a running Prism: keep-alive, bodies, limits, timeouts, CORS, paths.

use crate::support::http::{self, Closed, Conn};
use crate::support::{call, expect_http_error, expect_http_result, json, FakeProvider, Prism};
use std::io::ErrorKind;
use std::thread;
use std::time::{Duration, Instant};

/// A plain read with id 1 (a method Prism never sends on its own, so upstream counts mean client traffic).
const READ: &str = r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}"#;

fn setup() -> (FakeProvider, Prism) {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    (fake, prism)
}

/// The connection must be closed by Prism (FIN or RST) soon.
fn assert_closed(c: &mut Conn, what: &str) {
    if let Err(e) = c.wait_closed(Duration::from_secs(3)) {
        panic!("{what}: Prism did not close the connection: {e}");
    }
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let (fake, prism) = setup();
    let mut c = prism.conn();
    for i in 0..5 {
        let r = c.request(&http::post(
            "/",
            call(&i.to_string(), "echo", &format!("[{i}]")).as_bytes(),
        ));
        let result = expect_http_result(&r, &i.to_string());
        assert_eq!(
            crate::support::raw_field(&result, "params"),
            format!("[{i}]").as_bytes()
        );
        assert!(
            !r.closes(),
            "request {i} answered with Connection: close: {}",
            r.describe()
        );
        assert!(
            r.header("content-type")
                .is_some_and(|v| v.starts_with("application/json")),
            "content-type: {}",
            r.describe()
        );
    }
    assert_eq!(fake.count("echo"), 5);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    let mut bytes = Vec::new();
    for i in 0..20 {
        bytes.extend(http::post(
            "/",
            call(&i.to_string(), "echo", &format!("[{i}]")).as_bytes(),
        ));
    }
    c.send(&bytes).unwrap();
    for i in 0..20 {
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("pipelined response {i}: {e}"));
        expect_http_result(&r, &i.to_string());
    }
}

#[test]
fn chunked_request_body() {
    let (_fake, prism) = setup();
    let body = call("7", "echo", r#"["chunked", 1, 2, 3]"#);
    let b = body.as_bytes();
    let (a, rest) = b.split_at(5);
    let (m, z) = rest.split_at(rest.len() / 2);
    let mut c = prism.conn();
    // one request, each chunk in its own write
    let wire = http::chunked_post("/", &[a, m, z]);
    let head_end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    c.send(&wire[..head_end]).unwrap();
    for piece in wire[head_end..].chunks(7) {
        c.send(piece).unwrap();
    }
    let r = c.read_response().unwrap();
    let result = expect_http_result(&r, "7");
    assert_eq!(crate::support::raw_field(&result, "params"), br#"["chunked", 1, 2, 3]"#);
    // the connection is still usable afterwards
    let r = c.request(&http::post("/", READ.as_bytes()));
    expect_http_result(&r, "1");
}

#[test]
fn expect_100_continue() {
    let (_fake, prism) = setup();
    let body = READ.as_bytes();
    let mut c = prism.conn();
    let wire = http::post_with("/", body, &["Expect: 100-continue"]);
    c.send(&wire[..wire.len() - body.len()]).unwrap();
    let interim = c
        .read_response_within(Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("no 100 Continue before the body was sent: {e}"));
    assert_eq!(interim.status, 100, "{}", interim.describe());
    c.send(body).unwrap();
    let r = c.read_response().unwrap();
    expect_http_result(&r, "1");
}

#[test]
fn expect_100_continue_with_oversize_body_is_refused_at_once() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    c.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    let r = c
        .read_response_within(Duration::from_secs(2))
        .expect("no answer to an oversize Expect request");
    assert_eq!(r.status, 413, "{}", r.describe());
}

#[test]
fn body_too_large_is_413_then_close() {
    let (fake, prism) = setup();
    let mut c = prism.conn();
    // Only the head and a few body bytes: Prism must decide from Content-Length.
    c.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 65537\r\n\r\n[")
        .unwrap();
    let r = c
        .read_response_within(Duration::from_secs(2))
        .expect("no answer to an oversize Content-Length");
    assert_eq!(r.status, 413, "{}", r.describe());
    assert_closed(&mut c, "after 413");
    crate::support::assert_no_client_calls(&fake, "a refused request");
}

#[test]
fn chunked_body_too_large_is_413_then_close() {
    let (fake, prism) = setup();
    let mut c = prism.conn();
    let big = vec![b' '; 40_000];
    let _ = c.send(&http::chunked_post("/", &[&big, &big])); // Prism may stop reading midway
    let r = match c.read_response_within(Duration::from_secs(3)) {
        Ok(r) => r,
        Err(e) => panic!(
            "no 413 for an 80000-byte chunked body (limit 65536): {e} \
             (a reset here means Prism closed without draining the unread request bytes)"
        ),
    };
    assert_eq!(r.status, 413, "{}", r.describe());
    assert_closed(&mut c, "after 413");
    crate::support::assert_no_client_calls(&fake, "a refused request");
}

#[test]
fn body_at_the_limit_is_accepted() {
    let (fake, prism) = setup();
    let prefix = r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[""#;
    let suffix = r#""]}"#;
    let pad = 65536 - prefix.len() - suffix.len();
    let body = format!("{prefix}{}{suffix}", "a".repeat(pad));
    assert_eq!(body.len(), 65536);
    let r = prism.rpc(body.as_bytes());
    let result = expect_http_result(&r, "1");
    assert_eq!(crate::support::raw_field(&result, "params").len(), pad + 4);
    assert_eq!(fake.count("echo"), 1);
}

#[test]
fn headers_too_large_is_431_then_close() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    // 10 KiB of headers (limit 8192) and the head never ends: Prism must not wait for the end.
    let mut head = b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    head.extend(vec![b'a'; 10 * 1024]);
    head.extend(b"\r\n");
    c.send(&head).unwrap();
    let r = c
        .read_response_within(Duration::from_secs(2))
        .expect("no answer to oversize headers");
    assert_eq!(r.status, 431, "{}", r.describe());
    assert_closed(&mut c, "after 431");
}

#[test]
fn many_small_headers_over_the_limit_is_431() {
    let (_fake, prism) = setup();
    let mut head = String::from("POST / HTTP/1.1\r\nHost: x\r\n");
    for i in 0..200 {
        head.push_str(&format!("X-H{i}: {}\r\n", "v".repeat(40)));
    }
    assert!(head.len() > 9000);
    let mut c = prism.conn();
    c.send(head.as_bytes()).unwrap(); // the head never ends
    let r = c
        .read_response_within(Duration::from_secs(2))
        .expect("no answer to oversize headers");
    assert_eq!(r.status, 431, "{}", r.describe());
}

#[test]
fn malformed_request_line_is_400_then_close() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    c.send(b"THIS IS NOT HTTP\r\n\r\n").unwrap();
    let r = c
        .read_response_within(Duration::from_secs(2))
        .expect("no answer to malformed HTTP");
    assert_eq!(r.status, 400, "{}", r.describe());
    assert_closed(&mut c, "after 400");
}

#[test]
fn content_length_with_transfer_encoding_is_rejected_or_closed() {
    // RFC 9112 6.3: reject, or read it as chunked and close the connection afterwards.
    let (_fake, prism) = setup();
    let body = READ.as_bytes();
    let mut wire = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        body.len()
    )
    .into_bytes();
    wire.extend_from_slice(body);
    wire.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut c = prism.conn();
    c.send(&wire).unwrap();
    let r = c.read_response_within(Duration::from_secs(2)).expect("no answer");
    match r.status {
        400 => {}
        200 => {
            expect_http_result(&r, "1");
        }
        s => panic!("status {s}: {}", r.describe()),
    }
    assert_closed(&mut c, "after a request with both Content-Length and Transfer-Encoding");
}

#[test]
fn conflicting_content_lengths_are_400_then_close() {
    let (fake, prism) = setup();
    let body = READ.as_bytes();
    let mut wire = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nContent-Length: {}\r\n\r\n",
        body.len(),
        body.len() - 5
    )
    .into_bytes();
    wire.extend_from_slice(body);
    let mut c = prism.conn();
    c.send(&wire).unwrap();
    let r = c.read_response_within(Duration::from_secs(2)).expect("no answer");
    assert_eq!(r.status, 400, "{}", r.describe());
    assert_closed(&mut c, "after 400");
    crate::support::assert_no_client_calls(&fake, "a refused request");
}

#[test]
fn bad_chunk_size_is_400_then_close() {
    let (fake, prism) = setup();
    let mut c = prism.conn();
    c.send(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
        .unwrap();
    let r = c.read_response_within(Duration::from_secs(2)).expect("no answer");
    assert_eq!(r.status, 400, "{}", r.describe());
    assert_closed(&mut c, "after 400");
    crate::support::assert_no_client_calls(&fake, "a refused request");
}

#[test]
fn max_connections_is_503_then_close() {
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .limit("max_connections", 3)
        .limit("idle_timeout_ms", 10_000)
        .start();
    // One at a time, each served before the next opens (so the harness's readiness probe, closed just
    // before, is surely no longer counted).
    let mut held: Vec<Conn> = Vec::new();
    for i in 0..3 {
        let mut c = prism.conn();
        let r = c.request(&http::post("/", READ.as_bytes()));
        assert_eq!(r.status, 200, "connection {i} of 3: {}", r.describe());
        held.push(c);
    }
    let mut extra = prism.conn();
    // Prism may answer 503 on accept, or after reading a request: listen first, then ask.
    let r = match extra.read_response_within(Duration::from_millis(300)) {
        Ok(r) => r,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            let _ = extra.send(&http::post("/", READ.as_bytes()));
            extra
                .read_response_within(Duration::from_secs(2))
                .expect("no answer on the connection over the limit")
        }
        Err(e) => panic!("connection over the limit closed without a 503: {e}"),
    };
    assert_eq!(r.status, 503, "{}", r.describe());
    assert_closed(&mut extra, "after 503");
    // A freed slot is usable again.
    drop(held.pop());
    let ok = crate::support::wait_until(Duration::from_secs(3), || {
        let Ok(mut c) = Conn::try_connect(prism.addr()) else {
            return false;
        };
        if c.send(&http::post("/", READ.as_bytes())).is_err() {
            return false;
        }
        matches!(c.read_response_within(Duration::from_secs(1)), Ok(r) if r.status == 200)
    });
    assert!(ok, "a connection slot freed by a client close was not reused");
}

#[test]
fn idle_keep_alive_connection_is_closed_after_idle_timeout() {
    let (_fake, prism) = setup(); // idle_timeout_ms = 500
    let mut c = prism.conn();
    expect_http_result(&c.request(&http::post("/", READ.as_bytes())), "1");
    let t = Instant::now();
    let how = c
        .wait_closed(Duration::from_secs(3))
        .unwrap_or_else(|e| panic!("idle connection: {e}"));
    let waited = t.elapsed();
    assert_eq!(how, Closed::Eof, "idle close should be an orderly FIN");
    assert!(
        waited >= Duration::from_millis(300),
        "closed too early ({waited:?}) for a 500 ms idle timeout"
    );
}

#[test]
fn silent_new_connection_is_closed() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    let t = Instant::now();
    // Either a plain close or a 408 then close is fine; it must not stay open.
    match c.read_response_within(Duration::from_secs(3)) {
        Ok(r) => {
            assert_eq!(r.status, 408, "{}", r.describe());
            assert_closed(&mut c, "after 408");
        }
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset),
            "silent connection not closed within 3 s ({e}, after {:?})",
            t.elapsed()
        ),
    }
}

/// A client that sends requests and never reads the answers: once a write has waited
/// `limits.client_timeout_ms` the connection is over, and as its socket takes nothing more within
/// `limits.close_timeout_ms` it is reset. Prism then holds no socket for it, though the client keeps the
/// connection open (before, a write queued on the shard's ring kept the socket for as long as that).
#[test]
fn a_client_that_never_reads_its_answers_is_reset_and_its_socket_freed() {
    use std::io::Write;
    let fake = FakeProvider::start();
    // 12 KiB answers: each is queued on the shard's ring whole.
    fake.set_reply(
        "eth_getBlockByHash",
        crate::support::Reply::Result(format!("\"0x{}\"", "ab".repeat(6000))),
    );
    let prism = Prism::builder()
        .provider(&fake)
        .limit("client_timeout_ms", 500)
        .limit("close_timeout_ms", 200)
        .limit("idle_timeout_ms", 60_000)
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&prism.addr().into()).unwrap();
    let mut s: std::net::TcpStream = s.into();
    let port = s.local_addr().unwrap().port();
    let one = http::post(
        "/",
        call(
            "1",
            "eth_getBlockByHash",
            r#"["0x00000000000000000000000000000000000000000000000000000000000000aa",false]"#,
        )
        .as_bytes(),
    );
    // 400 answers of 12 KiB: far more than both sockets' buffers hold.
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    for _ in 0..400 {
        if s.write_all(&one).is_err() {
            break;
        }
    }
    assert!(crate::support::tcp_socket_exists(prism.addr().port(), port));
    let freed = crate::support::wait_until(Duration::from_secs(10), || {
        !crate::support::tcp_socket_exists(prism.addr().port(), port)
    });
    assert!(freed, "Prism still holds the socket of a client that never reads");
    drop(s);
}

/// Writes `bytes` one byte every `gap` on a clone of the stream, in the background, ignoring errors.
fn trickle(c: &Conn, bytes: Vec<u8>, gap: Duration) -> thread::JoinHandle<()> {
    let mut s = c.stream().try_clone().unwrap();
    thread::spawn(move || {
        use std::io::Write;
        for b in bytes {
            if s.write_all(&[b]).is_err() {
                return;
            }
            thread::sleep(gap);
        }
    })
}

#[test]
fn slow_client_trickling_headers_gets_408_then_close() {
    let (fake, prism) = setup(); // client_timeout_ms = 500, idle 500
    let mut c = prism.conn();
    // 100 ms between bytes beats any idle timer; the whole head would take ~8 s.
    let wire = http::post("/", READ.as_bytes());
    let t = Instant::now();
    let h = trickle(&c, wire, Duration::from_millis(100));
    let r = c
        .read_response_within(Duration::from_secs(4))
        .expect("no 408 for a trickling client");
    let took = t.elapsed();
    assert_eq!(r.status, 408, "{}", r.describe());
    assert!(
        took < Duration::from_millis(2500),
        "408 came after {took:?} for a 500 ms client timeout"
    );
    assert_closed(&mut c, "after 408");
    drop(c);
    h.join().unwrap();
    crate::support::assert_no_client_calls(&fake, "a refused request");
}

#[test]
fn slow_client_trickling_body_gets_408() {
    let (fake, prism) = setup();
    let mut c = prism.conn();
    let body = call("1", "echo", &format!("[\"{}\"]", "x".repeat(200)));
    let wire = http::post("/", body.as_bytes());
    let head_end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    c.send(&wire[..head_end]).unwrap();
    let h = trickle(&c, wire[head_end..].to_vec(), Duration::from_millis(100));
    let r = c
        .read_response_within(Duration::from_secs(4))
        .expect("no 408 for a trickling body");
    assert_eq!(r.status, 408, "{}", r.describe());
    assert_closed(&mut c, "after 408");
    drop(c);
    h.join().unwrap();
    assert_eq!(fake.count("echo"), 0);
}

#[test]
fn cors_preflight() {
    let (fake, prism) = setup();
    let mut c = prism.conn();
    let r = c.request(&http::bodyless(
        "OPTIONS",
        "/",
        &[
            "Origin: https://app.example.com",
            "Access-Control-Request-Method: POST",
            "Access-Control-Request-Headers: content-type, x-api-key",
        ],
    ));
    assert_eq!(r.status, 204, "{}", r.describe());
    let origin = r
        .header("access-control-allow-origin")
        .unwrap_or_else(|| panic!("no ACAO: {}", r.describe()));
    assert!(origin == "*" || origin == "https://app.example.com", "ACAO {origin:?}");
    let methods = r
        .header("access-control-allow-methods")
        .unwrap_or_else(|| panic!("no ACAM: {}", r.describe()));
    assert!(methods.to_ascii_uppercase().contains("POST"), "ACAM {methods:?}");
    let headers = r
        .header("access-control-allow-headers")
        .unwrap_or_else(|| panic!("no ACAH: {}", r.describe()));
    let h = headers.to_ascii_lowercase();
    assert!(h == "*" || h.contains("content-type"), "ACAH {headers:?}");
    crate::support::assert_no_client_calls(&fake, "a preflight");
    // keep-alive survives a preflight
    let r = c.request(&http::post("/", READ.as_bytes()));
    expect_http_result(&r, "1");
}

#[test]
fn cors_allow_origin_on_the_actual_post() {
    let (_fake, prism) = setup();
    let r = prism.conn().request(&http::post_with(
        "/",
        READ.as_bytes(),
        &["Origin: https://app.example.com"],
    ));
    expect_http_result(&r, "1");
    let origin = r.header("access-control-allow-origin").unwrap_or_else(|| {
        panic!(
            "a browser needs Access-Control-Allow-Origin on the POST itself: {}",
            r.describe()
        )
    });
    assert!(origin == "*" || origin == "https://app.example.com", "ACAO {origin:?}");
}

#[test]
fn get_on_rpc_path_answers_json_at_once() {
    let (_fake, prism) = setup();
    for path in ["/", "/testnet"] {
        let mut c = prism.conn();
        let t = Instant::now();
        c.send(&http::bodyless("GET", path, &[])).unwrap();
        let r = c
            .read_response_within(Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(r.status, 200, "GET {path}: {}", r.describe());
        assert!(r.json().is_object(), "GET {path}: {}", r.describe());
    }
}

#[test]
fn network_paths_are_served() {
    let (_fake, prism) = setup();
    for path in ["/", "/testnet", "/testnet/some-key"] {
        let r = prism.rpc_at(path, READ.as_bytes());
        assert_eq!(expect_http_result(&r, "1"), b"\"0x0\"", "POST {path}");
    }
}

#[test]
fn unknown_path_is_404_with_json_rpc_error() {
    let (fake, prism) = setup();
    let r = prism.rpc_at("/no-such-network", READ.as_bytes());
    assert_eq!(r.status, 404, "{}", r.describe());
    let body = json::whole(&r.body).unwrap_or_else(|e| panic!("404 body is not JSON ({e}): {}", r.describe()));
    assert!(
        json::field(body, "error").is_some(),
        "404 body has no JSON-RPC error: {}",
        r.describe()
    );
    crate::support::assert_no_client_calls(&fake, "a refused request");
}

#[test]
fn other_http_methods_are_405() {
    let (_fake, prism) = setup();
    for m in ["PUT", "DELETE", "PATCH"] {
        let r = prism.conn().request(&http::bodyless(m, "/", &["Content-Length: 0"]));
        assert_eq!(r.status, 405, "{m}: {}", r.describe());
    }
}

#[test]
fn client_connection_close_is_honoured() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    let r = c.request(&http::post_with("/", READ.as_bytes(), &["Connection: close"]));
    expect_http_result(&r, "1");
    assert_closed(&mut c, "after a Connection: close request");
}

#[test]
fn http_1_0_closes_after_the_response() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    let body = READ.as_bytes();
    let mut wire = format!(
        "POST / HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    wire.extend_from_slice(body);
    let r = c.request(&wire);
    expect_http_result(&r, "1");
    assert_closed(&mut c, "after an HTTP/1.0 request");
}

#[test]
fn two_shards_serve_on_one_port() {
    let fake = FakeProvider::start();
    let prism = Prism::builder().provider(&fake).shards(2).start();
    for i in 0..20 {
        let r = prism.rpc(call(&i.to_string(), "eth_chainId", "[]").as_bytes());
        expect_http_result(&r, &i.to_string());
    }
}

#[test]
fn errors_on_one_connection_do_not_break_the_next_request() {
    let (_fake, prism) = setup();
    let mut c = prism.conn();
    let r = c.request(&http::post("/", b"{not json"));
    expect_http_error(&r, -32700);
    let r = c.request(&http::post("/", READ.as_bytes()));
    expect_http_result(&r, "1");
}
