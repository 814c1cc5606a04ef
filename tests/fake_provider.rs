//! Self-tests of the test support (fake provider, raw HTTP client, JSON span scanner). They do not run
//! Prism: they prove the tools the other tests lean on.

use crate::support::http::{self, Closed, Conn};
use crate::support::{call, expect_result, json, raw_field, FakeProvider, Garbage, Mode, Reply};
use std::time::{Duration, Instant};

fn ask(fake: &FakeProvider, body: &str) -> crate::support::Response {
    Conn::connect(fake.addr()).request(&http::post("/", body.as_bytes()))
}

#[test]
fn json_scanner_spans() {
    let b = br#" {"id": 1e400, "m\u0065thod" :"x", "params":[ 1 , {"a":"\"}"} ] } "#;
    let f = json::object(b).unwrap();
    assert_eq!(f[0], ("id".to_string(), &b"1e400"[..]));
    assert_eq!(f[1].0, "method");
    assert_eq!(f[2].1, &br#"[ 1 , {"a":"\"}"} ]"#[..]);
    assert_eq!(
        json::array(b"[1,[2],\"3\"]").unwrap(),
        vec![&b"1"[..], b"[2]", b"\"3\""]
    );
    assert!(json::whole(b"{\"a\":1} x").is_err());
    assert!(json::whole(b"{\"a\":").is_err());
    assert!(json::whole(b"not json").is_err());
}

#[test]
fn default_answers_and_exact_ids() {
    let fake = FakeProvider::start();
    assert_eq!(
        expect_result(&ask(&fake, &call("1", "eth_chainId", "[]")).body, "1"),
        b"\"0x1237\""
    );
    fake.set_head(0x1234);
    assert_eq!(
        expect_result(&ask(&fake, &call("\"a\"", "eth_blockNumber", "[]")).body, "\"a\""),
        b"\"0x1234\""
    );
    assert_eq!(
        expect_result(&ask(&fake, &call("1e400", "eth_other", "[]")).body, "1e400"),
        b"\"0x0\""
    );
    let params = "[ \"0xAB\" ,\n {\"x\" : 1.50e+3, \"y\":\"\\u00e9\"} , 123456789012345678901234567890 ]";
    let r = ask(&fake, &call("\"\\u00e9\"", "echo", params));
    let result = expect_result(&r.body, "\"\\u00e9\"");
    assert_eq!(json::text(raw_field(result, "params")), params);
    assert_eq!(raw_field(result, "method"), b"\"echo\"");
    assert_eq!(fake.calls_to("echo")[0].params.as_deref(), Some(params.as_bytes()));
    fake.set_reply("eth_getX", Reply::Result("{ \"odd\" : [1 , 2] }".into()));
    assert_eq!(
        expect_result(&ask(&fake, &call("2", "eth_getX", "[]")).body, "2"),
        b"{ \"odd\" : [1 , 2] }"
    );
    fake.set_reply(
        "eth_err",
        Reply::Error("{\"code\":3,\"message\":\"execution reverted\"}".into()),
    );
    let r = ask(&fake, &call("3", "eth_err", "[]"));
    assert_eq!(
        raw_field(&r.body, "error"),
        b"{\"code\":3,\"message\":\"execution reverted\"}"
    );
    assert_eq!(fake.count("eth_chainId"), 1);
    assert_eq!(fake.total_calls(), 6);
}

#[test]
fn keep_alive_pipelining_and_chunked_request() {
    let fake = FakeProvider::start();
    let mut c = Conn::connect(fake.addr());
    for i in 0..3 {
        let r = c.request(&http::post("/", call(&i.to_string(), "eth_chainId", "[]").as_bytes()));
        expect_result(&r.body, &i.to_string());
    }
    // two requests in one write
    let mut two = http::post("/", call("10", "eth_chainId", "[]").as_bytes());
    two.extend(http::post("/", call("11", "eth_chainId", "[]").as_bytes()));
    c.send(&two).unwrap();
    expect_result(&c.read_response().unwrap().body, "10");
    expect_result(&c.read_response().unwrap().body, "11");
    let body = call("12", "echo", "[1,2,3]");
    let (a, b) = body.as_bytes().split_at(10);
    let r = c.request(&http::chunked_post("/", &[a, b]));
    expect_result(&r.body, "12");
    assert_eq!(fake.connections_accepted(), 1);
    assert_eq!(fake.http_requests().len(), 6);
}

#[test]
fn batches_and_notifications() {
    let fake = FakeProvider::start();
    let body = format!(
        "[{},{},{}]",
        call("1", "eth_chainId", "[]"),
        crate::support::notification("echo", "[]"),
        call("2", "echo", "[7]")
    );
    let r = ask(&fake, &body);
    let items = crate::support::batch_items(&r);
    assert_eq!(items.len(), 2);
    expect_result(&items[0], "1");
    expect_result(&items[1], "2");
    assert!(fake.calls().iter().any(|c| c.id.is_none() && c.in_batch));
    let r = ask(&fake, &crate::support::notification("echo", "[]"));
    assert_eq!((r.status, r.body.len()), (200, 0));
    let r = ask(&fake, "[]");
    crate::support::expect_error(&r.body, -32600);
}

#[test]
fn modes() {
    let fake = FakeProvider::start();
    let body = call("5", "eth_blockNumber", "[]");

    fake.set_mode(Mode::Status(429));
    assert_eq!(ask(&fake, &body).status, 429);
    fake.set_mode(Mode::StatusBody(503, "{\"error\":\"down\"}".into()));
    let r = ask(&fake, &body);
    assert_eq!((r.status, r.header("content-type")), (503, Some("application/json")));

    fake.set_mode(Mode::LagHead(0x10));
    assert_eq!(expect_result(&ask(&fake, &body).body, "5"), b"\"0xf0\"");
    fake.set_mode(Mode::WrongId);
    assert_eq!(raw_field(&ask(&fake, &body).body, "id"), b"6");
    fake.set_mode(Mode::RpcError {
        code: -32000,
        message: "boom".into(),
    });
    assert_eq!(
        raw_field(&ask(&fake, &body).body, "error"),
        br#"{"code":-32000,"message":"boom"}"#
    );

    fake.set_mode(Mode::Chunked);
    let r = ask(&fake, &call("5", "echo", "[\"0123456789abcdef\"]"));
    assert!(r.chunked, "{}", r.describe());
    expect_result(&r.body, "5");

    fake.set_mode(Mode::Slow(Duration::from_millis(200)));
    let t = Instant::now();
    expect_result(&ask(&fake, &body).body, "5");
    assert!(t.elapsed() >= Duration::from_millis(200));

    fake.set_mode(Mode::CloseAfterResponse);
    let mut c = Conn::connect(fake.addr());
    let r = c.request(&http::post("/", body.as_bytes()));
    assert!(r.closes());
    assert!(c.wait_closed(Duration::from_secs(2)).is_ok());

    fake.set_mode(Mode::Reset);
    let mut c = Conn::connect(fake.addr());
    c.send(&http::post("/", body.as_bytes())).unwrap();
    assert_eq!(c.wait_closed(Duration::from_secs(2)), Ok(Closed::Reset));

    fake.set_mode(Mode::Hang);
    let mut c = Conn::connect(fake.addr());
    c.send(&http::post("/", body.as_bytes())).unwrap();
    let e = c.read_response_within(Duration::from_millis(300)).unwrap_err();
    assert!(
        matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        "{e}"
    );
    drop(c);

    for g in [
        Garbage::Html,
        Garbage::NotJson,
        Garbage::TruncatedJson,
        Garbage::NotJsonRpc,
    ] {
        fake.set_mode(Mode::Garbage(g));
        let r = ask(&fake, &body);
        assert_eq!(r.status, 200);
        assert!(serde_json::from_slice::<serde_json::Value>(&r.body)
            .map(|v| v.get("result").is_none())
            .unwrap_or(true));
    }
    fake.set_mode(Mode::Garbage(Garbage::ShortBody));
    let mut c = Conn::connect(fake.addr());
    c.send(&http::post("/", body.as_bytes())).unwrap();
    assert!(c.read_response().is_err());

    fake.set_mode(Mode::Raw("{\"result\":[1],\"id\":{id},\"jsonrpc\":\"2.0\"}".into()));
    let r = ask(&fake, &call("\"raw\"", "x", "[]"));
    assert_eq!(r.text(), "{\"result\":[1],\"id\":\"raw\",\"jsonrpc\":\"2.0\"}");

    fake.set_mode(Mode::Normal);
    fake.set_mode_for_next(2, Mode::Status(500));
    assert_eq!(ask(&fake, &body).status, 500);
    assert_eq!(ask(&fake, &body).status, 500);
    assert_eq!(ask(&fake, &body).status, 200);
}

#[test]
fn dropping_idle_connections() {
    let fake = FakeProvider::start();
    let mut c = Conn::connect(fake.addr());
    expect_result(
        &c.request(&http::post("/", call("1", "eth_chainId", "[]").as_bytes()))
            .body,
        "1",
    );
    assert!(fake.wait_until(Duration::from_secs(2), |_| true));
    assert!(crate::support::wait_until(Duration::from_secs(2), || fake
        .close_idle_connections()
        == 1));
    assert_eq!(c.wait_closed(Duration::from_secs(2)), Ok(Closed::Eof));
    assert!(fake.wait_until(Duration::from_secs(2), |v| v.open == 0));

    fake.set_idle_timeout(Some(Duration::from_millis(100)));
    let mut c = Conn::connect(fake.addr());
    expect_result(
        &c.request(&http::post("/", call("1", "eth_chainId", "[]").as_bytes()))
            .body,
        "1",
    );
    assert_eq!(c.wait_closed(Duration::from_secs(2)), Ok(Closed::Eof));
}
