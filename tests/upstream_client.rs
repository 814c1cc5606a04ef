//! Prism's upstream HTTP/1.1 client through a running Prism: framing, keep-alive reuse, stale pooled
//! connections, `Connection: close`, every upstream fault mapped to a JSON-RPC error within the deadline,
//! and round robin over providers.

use crate::support::{
    call, expect_http_error, expect_http_result, json, raw_field, FakeProvider, Garbage, Mode, Prism,
};
use std::thread;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(3);
/// request_deadline_ms used by the fault tests.
const DEADLINE_MS: u64 = 1000;

/// A read the fault tests send (not a method Prism sends on its own, never cached).
const BALANCE: &str = r#"["0x0000000000000000000000000000000000000001","latest"]"#;

/// Prism with a short deadline; breakers kept out of the way, since these tests are about how one
/// failed exchange is reported, and each must be able to recover at once afterwards.
fn fast_deadline(fakes: &[&FakeProvider]) -> Prism {
    Prism::builder()
        .providers(fakes)
        .limit("request_deadline_ms", DEADLINE_MS)
        .extra_toml("[policy.breaker]\nfailure_threshold = 1000000")
        .start()
}

#[test]
fn chunked_upstream_response() {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    fake.set_mode(Mode::Chunked);
    let params = format!("[\"{}\", {{\"k\" : 1e400}}]", "z".repeat(5000));
    for i in 0..3 {
        let r = prism.rpc(call(&i.to_string(), "echo", &params).as_bytes());
        let result = expect_http_result(&r, &i.to_string());
        assert_eq!(json::text(raw_field(&result, "params")), params);
    }
}

#[test]
fn upstream_connections_are_kept_alive_and_reused() {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    let mut c = prism.conn();
    for i in 0..20 {
        let r = c.request(&crate::support::http::post(
            "/",
            call(&i.to_string(), "echo", &format!("[{i}]")).as_bytes(),
        ));
        expect_http_result(&r, &i.to_string());
    }
    // also through new client connections
    for i in 20..30 {
        expect_http_result(
            &prism.rpc(call(&i.to_string(), "echo", "[]").as_bytes()),
            &i.to_string(),
        );
    }
    let n = fake.connections_accepted();
    assert!(
        n <= 5,
        "30 sequential requests opened {n} upstream connections; keep-alive is not reused"
    );
}

#[test]
fn upstream_closing_idle_connections_does_not_fail_reads() {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    for round in 0..4 {
        let r = prism.rpc(call(&round.to_string(), "eth_getBalance", BALANCE).as_bytes());
        expect_http_result(&r, &round.to_string());
        // The provider drops every idle pooled connection (FIN), as servers do after their keep-alive timeout.
        assert!(
            crate::support::wait_until(WAIT, || fake.close_idle_connections() >= 1),
            "round {round}: Prism kept no idle upstream connection to drop"
        );
        assert!(
            fake.wait_until(WAIT, |v| v.open == 0),
            "round {round}: connections did not close"
        );
        let id = format!("{}", 100 + round);
        let r = prism.rpc(call(&id, "eth_getBalance", BALANCE).as_bytes());
        expect_http_result(&r, &id);
    }
}

#[test]
fn upstream_idle_timeout_does_not_fail_reads() {
    let fake = FakeProvider::start();
    fake.set_idle_timeout(Some(Duration::from_millis(100)));
    let prism = Prism::start(&[&fake]);
    for i in 0..4 {
        let r = prism.rpc(call(&i.to_string(), "eth_getBalance", BALANCE).as_bytes());
        expect_http_result(&r, &i.to_string());
        assert!(
            fake.wait_until(WAIT, |v| v.open == 0),
            "the fake's idle timeout did not close the connection"
        );
    }
}

#[test]
fn upstream_response_members_in_any_order() {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    fake.set_mode(Mode::Raw(
        "\n{ \"result\" : {\"b\":[1, 2]} ,\"extra\":{\"id\":999}, \"id\" : {id},\"jsonrpc\":\"2.0\" }\n".into(),
    ));
    let r = prism.rpc(call("\"c\"", "eth_getTransactionByHash", "[\"0x00\"]").as_bytes());
    assert_eq!(expect_http_result(&r, "\"c\""), b"{\"b\":[1, 2]}");
}

#[test]
fn upstream_connection_close_is_handled() {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    fake.set_mode(Mode::CloseAfterResponse);
    for i in 0..5 {
        let r = prism.rpc(call(&i.to_string(), "echo", &format!("[{i}]")).as_bytes());
        expect_http_result(&r, &i.to_string());
    }
    assert_eq!(fake.count("echo"), 5, "each call exactly once");
    assert!(
        fake.connections_accepted() >= 5,
        "a connection the upstream closed was reused"
    );
}

#[test]
fn upstream_request_uses_the_provider_url_path_and_headers() {
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider_url(&format!("{}/v2/secret-key", fake.url()))
        .start();
    let body = call("1", "echo", "[1]");
    expect_http_result(&prism.rpc(body.as_bytes()), "1");
    let reqs = fake.http_requests();
    let req = &reqs
        .iter()
        .find(|r| r.request.body.windows(4).any(|w| w == b"echo"))
        .expect("echo request")
        .request;
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v2/secret-key");
    assert_eq!(req.version, 1, "HTTP/1.1 upstream");
    let host = req.header("host").expect("Host header");
    assert_eq!(host, format!("127.0.0.1:{}", fake.port()));
    assert!(
        req.header("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "{:?}",
        req.headers
    );
    assert!(
        req.header("content-length")
            .map(|v| v.trim().parse::<usize>().ok() == Some(req.body.len()))
            .unwrap_or(false)
            || req.has_token("transfer-encoding", "chunked"),
        "{:?}",
        req.headers
    );
}

#[test]
fn slow_upstream_within_the_deadline_succeeds() {
    let fake = FakeProvider::start();
    let prism = fast_deadline(&[&fake]);
    fake.set_mode(Mode::Slow(Duration::from_millis(300)));
    let r = prism.rpc(call("1", "eth_getBalance", BALANCE).as_bytes());
    expect_http_result(&r, "1");
}

#[test]
fn concurrent_requests_are_not_serialised() {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    fake.set_mode(Mode::Slow(Duration::from_millis(300)));
    let t = Instant::now();
    let addr = prism.addr();
    let handles: Vec<_> = (0..16)
        .map(|i| {
            thread::spawn(move || {
                let mut c = crate::support::Conn::connect(addr);
                let r = c.request(&crate::support::http::post(
                    "/",
                    call(&i.to_string(), "echo", &format!("[{i}]")).as_bytes(),
                ));
                expect_http_result(&r, &i.to_string());
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(2000),
        "16 concurrent 300 ms calls took {took:?}: serialised upstream calls?"
    );
}

/// The provider misbehaves in `mode`; the client must get -32603 "Upstream..." with its own id, in time.
fn assert_upstream_failure(mode: Mode) {
    let fake = FakeProvider::start();
    let prism = fast_deadline(&[&fake]);
    // Only the client's method misbehaves: a health probe meeting a 429 first would park the provider, and
    // the call would then never reach it (seen once in CI).
    fake.set_method_mode("eth_getBalance", mode.clone());
    let t = Instant::now();
    let mut c = prism.conn();
    c.send(&crate::support::http::post(
        "/",
        call("\"mine\"", "eth_getBalance", BALANCE).as_bytes(),
    ))
    .unwrap();
    let r = c
        .read_response_within(Duration::from_millis(DEADLINE_MS + 3000))
        .unwrap_or_else(|e| panic!("{mode:?}: no answer within deadline + 3 s: {e}"));
    let took = t.elapsed();
    let (err, id) = expect_http_error(&r, -32603);
    assert_eq!(id, "\"mine\"", "{mode:?}: the client's id");
    let msg = err["message"].as_str().unwrap();
    assert!(
        upstream_failure_message(msg),
        "{mode:?}: message {msg:?} should start with \"Upstream\""
    );
    assert!(
        took < Duration::from_millis(DEADLINE_MS + 1500),
        "{mode:?}: answered after {took:?}"
    );
    assert!(
        fake.count("eth_getBalance") >= 1,
        "{mode:?}: the upstream was never asked"
    );
    // Prism serves again soon once the provider behaves (a 429 may park it for a moment).
    fake.clear_method_mode("eth_getBalance");
    let mut last = None;
    let recovered = crate::support::wait_until(Duration::from_secs(5), || {
        let r = prism.rpc(call("2", "eth_getBalance", BALANCE).as_bytes());
        let ok = r.status == 200 && json::field(&r.body, "result").is_some();
        last = Some(r);
        ok
    });
    assert!(
        recovered,
        "{mode:?}: not serving 5 s after the provider recovered: {}",
        last.map(|r| r.describe()).unwrap_or_default()
    );
}

/// An upstream failure's message: "Upstream ..." for a failed exchange, or the all-down answer when the
/// provider is already known to be down.
fn upstream_failure_message(msg: &str) -> bool {
    msg.starts_with("Upstream") || msg.starts_with("No healthy upstream")
}

#[test]
fn upstream_500_is_an_upstream_error() {
    assert_upstream_failure(Mode::Status(500));
}

#[test]
fn upstream_503_with_json_body_is_an_upstream_error() {
    assert_upstream_failure(Mode::StatusBody(503, "{\"error\":\"service unavailable\"}".into()));
}

#[test]
fn upstream_429_is_an_upstream_error() {
    assert_upstream_failure(Mode::Status(429));
}

#[test]
fn upstream_reset_is_an_upstream_error() {
    assert_upstream_failure(Mode::Reset);
}

#[test]
fn upstream_close_without_answer_is_an_upstream_error() {
    assert_upstream_failure(Mode::CloseWithoutAnswer);
}

#[test]
fn upstream_hang_is_an_upstream_error_at_the_deadline() {
    assert_upstream_failure(Mode::Hang);
}

#[test]
fn upstream_slower_than_the_deadline_is_an_upstream_error() {
    assert_upstream_failure(Mode::Slow(Duration::from_millis(DEADLINE_MS + 2000)));
}

#[test]
fn upstream_html_is_an_upstream_error() {
    assert_upstream_failure(Mode::Garbage(Garbage::Html));
}

#[test]
fn upstream_non_json_is_an_upstream_error() {
    assert_upstream_failure(Mode::Garbage(Garbage::NotJson));
}

#[test]
fn upstream_truncated_json_is_an_upstream_error() {
    assert_upstream_failure(Mode::Garbage(Garbage::TruncatedJson));
}

#[test]
fn upstream_short_body_is_an_upstream_error() {
    assert_upstream_failure(Mode::Garbage(Garbage::ShortBody));
}

#[test]
fn upstream_non_json_rpc_body_is_an_upstream_error() {
    assert_upstream_failure(Mode::Garbage(Garbage::NotJsonRpc));
}

#[test]
fn upstream_wrong_id_is_an_upstream_error() {
    assert_upstream_failure(Mode::WrongId);
}

#[test]
fn upstream_connection_refused_is_an_upstream_error() {
    // A port nobody listens on.
    let port = crate::support::prism::free_port();
    let prism = Prism::builder()
        .provider_url(&format!("http://127.0.0.1:{port}"))
        .limit("request_deadline_ms", DEADLINE_MS)
        .start();
    let t = Instant::now();
    let r = prism.rpc(call("1", "eth_getBalance", BALANCE).as_bytes());
    let (err, id) = expect_http_error(&r, -32603);
    assert_eq!(id, "1");
    assert!(upstream_failure_message(err["message"].as_str().unwrap()), "{err}");
    assert!(
        t.elapsed() < Duration::from_millis(DEADLINE_MS + 1500),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn upstream_failure_in_a_batch_yields_one_error_per_call() {
    let fake = FakeProvider::start();
    let prism = fast_deadline(&[&fake]);
    let body = crate::support::batch(&[call("1", "echo", "[1]"), call("2", "echo", "[2]")]);
    let items = crate::support::batch_items(&prism.rpc(body.as_bytes()));
    assert_eq!(items.len(), 2);
    crate::support::expect_result(&items[0], "1");
    crate::support::expect_result(&items[1], "2");
    fake.set_mode(Mode::Status(500));
    let items = crate::support::batch_items(&prism.rpc(body.as_bytes()));
    assert_eq!(items.len(), 2, "a failing upstream still yields one answer per call");
    crate::support::expect_error(&items[0], -32603);
    crate::support::expect_error(&items[1], -32603);
    assert_eq!(raw_field(&items[0], "id"), b"1");
    assert_eq!(raw_field(&items[1], "id"), b"2");
}

#[test]
fn round_robin_spreads_calls_over_providers() {
    let fakes: Vec<FakeProvider> = (0..3).map(|_| FakeProvider::start()).collect();
    let refs: Vec<&FakeProvider> = fakes.iter().collect();
    // The default strategy scores providers; a key asks for plain round robin.
    let prism = Prism::builder()
        .providers(&refs)
        .extra_toml("[[keys]]\nname = \"rr\"\nkey = \"rr-test-key\"\nstrategy = \"round_robin\"")
        .start();
    for i in 0..30 {
        let body = call(&i.to_string(), "echo", &format!("[{i}]"));
        let r = prism.rpc_at("/testnet/rr-test-key", body.as_bytes());
        expect_http_result(&r, &i.to_string());
    }
    let counts: Vec<usize> = fakes.iter().map(|f| f.count("echo")).collect();
    assert_eq!(counts.iter().sum::<usize>(), 30, "each call once: {counts:?}");
    assert!(
        counts.iter().all(|&n| n >= 8),
        "round robin did not spread 30 calls evenly over 3 providers: {counts:?}"
    );
}

#[test]
fn write_is_sent_once_even_when_the_upstream_fails() {
    let fake = FakeProvider::start();
    let prism = fast_deadline(&[&fake]);
    fake.set_mode(Mode::Status(500));
    let r = prism.rpc(call("1", "eth_sendRawTransaction", "[\"0x02f8\"]").as_bytes());
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(json::field(&r.body, "error").is_some(), "{}", r.describe());
    assert_eq!(
        fake.count("eth_sendRawTransaction"),
        1,
        "a write must reach the upstream exactly once"
    );
}
