//! No byte sequence from a provider takes Prism down (issue 13), through the real binary and real sockets:
//!
//! - every malformed HTTP answer of `crate::support::hostile::cases()` (truncated JSON, `{"\`, huge numbers, deep
//!   nesting, invalid UTF-8, lone surrogates, duplicate members, trailing bytes, empty and NUL bodies,
//!   garbage heads, wrong ids, 3xx and 1xx, short bodies, broken chunked framing), one network per case:
//!   the process stays up, `/healthz` answers, an honest second provider serves every read, the hostile one
//!   ends up with its breaker open in `/status`, the reason is logged and the result bytes are not;
//! - a provider answering even `eth_chainId` with `{"\` (the original crash: exit 70);
//! - answers over `limits.max_response_bytes` are refused without buffering them;
//! - a subscription socket that sends malformed messages and frames: the process stays up, no malformed
//!   byte reaches the client, and the subscription moves to an honest provider once the hostile one's
//!   breaker opens.
//!
//! Every wait polls observable state against a deadline.

use crate::support::ws_fake;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::hostile::{self, Answer, HostileProvider, HostileWs, SECRET};
use crate::support::{call, expect_http_result, wait_until, FakeProvider, Mode, Prism, PrismBuilder};
use ws_fake::WsFake;

const WAIT: Duration = Duration::from_secs(15);
const KEY: &str = "rr-key-hostile";

/// Round robin (so the hostile provider keeps getting its turn until excluded), quick retries, a breaker
/// that opens after two failures and stays open for the test, probes every 50 ms.
fn base() -> PrismBuilder {
    Prism::builder()
        .limit("max_response_bytes", 65536)
        .limit("request_deadline_ms", 3000)
        .extra_toml(&format!(
            "[policy.retry]\nmax_attempts = 3\nbase_delay_ms = 1\nmax_delay_ms = 5\n\n\
             [policy.breaker]\nfailure_threshold = 2\nwindow_ms = 60000\ncooldown_ms = 60000\n\n\
             [[keys]]\nname = \"rr\"\nkey = \"{KEY}\"\nstrategy = \"round_robin\"\n"
        ))
}

fn read(prism: &Prism, network: &str, id: u64) -> crate::support::Response {
    prism.rpc_with(
        &format!("/{network}"),
        call(&id.to_string(), "eth_getBalance", crate::support::BALANCE_PARAMS).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    )
}

/// `state` of provider `index` in network `network` in `/status`.
fn state(prism: &Prism, network: &str, index: usize) -> String {
    let s = prism.status();
    s["networks"]
        .as_array()
        .and_then(|nets| nets.iter().find(|n| n["name"] == network))
        .and_then(|n| n["providers"][index]["state"].as_str())
        .unwrap_or("")
        .to_string()
}

fn assert_alive(prism: &mut Prism) {
    assert!(prism.running(), "prism exited; log:\n{}", prism.log());
    let h = prism.admin_get("/healthz");
    assert_eq!(h.status, 200, "/healthz: {}", h.describe());
}

fn assert_no_secret_logged(prism: &Prism) {
    let log = prism.log();
    assert!(
        !log.contains(SECRET),
        "a provider's result bytes reached the log:\n{log}"
    );
}

/// Every case on its own network (hostile p1, honest p2), in one Prism.
#[test]
fn malformed_answers_exclude_the_provider_and_never_stop_prism() {
    let honest = FakeProvider::start();
    let cases = hostile::cases();
    let hostiles: Vec<HostileProvider> = cases
        .iter()
        .map(|c| HostileProvider::start(c.answer.clone(), true))
        .collect();
    let mut b = base();
    for (k, h) in hostiles.iter().enumerate() {
        b = b
            .network(&format!("n{k}"), 4663)
            // Slow probes: client reads meet the hostile provider before probes alone open its breaker.
            .network_option("probe_interval_ms", 1000)
            .provider_url(&h.url())
            .provider(&honest);
    }
    let mut prism = b.start();

    // Both providers take part: the hostile one is verified (honest chain id), then fails everything.
    for (k, c) in cases.iter().enumerate() {
        let net = format!("n{k}");
        for i in 0..6 {
            let r = read(&prism, &net, i);
            let result = expect_http_result(&r, &i.to_string());
            assert_eq!(
                result, b"\"0x0\"",
                "{}: read {i} not served by the honest provider",
                c.name
            );
        }
    }
    for (k, c) in cases.iter().enumerate() {
        let net = format!("n{k}");
        let open = wait_until(WAIT, || state(&prism, &net, 0) == "open");
        assert!(
            open,
            "{}: the hostile provider is not excluded: state {:?}, calls {}",
            c.name,
            state(&prism, &net, 0),
            hostiles[k].total()
        );
        assert!(
            hostiles[k].count("eth_blockNumber") + hostiles[k].count("eth_getBalance") > 0,
            "{}: never asked",
            c.name
        );
        assert_eq!(state(&prism, &net, 1), "closed", "{}: the honest provider", c.name);
        // Excluded: reads keep being served, by the honest provider alone.
        for i in 100..103 {
            let r = read(&prism, &net, i);
            assert_eq!(expect_http_result(&r, &i.to_string()), b"\"0x0\"", "{}", c.name);
        }
    }
    assert_alive(&mut prism);
    let log = prism.log();
    assert!(
        log.contains("malformed upstream answer") && log.contains("malformed upstream response"),
        "the reasons are not in the log:\n{log}"
    );
    assert_no_secret_logged(&prism);
    // The failures are counted where operators look: the hostile provider may meet client
    // reads first or be excluded by its health probes alone (counted apart), so both count.
    let attempts =
        prism.metric(r#"prism_upstream_attempts_total{network="n0",provider="p1",region="",result="failed"}"#);
    let probes = prism.metric(r#"prism_upstream_probes_total{network="n0",provider="p1",region="",result="failed"}"#);
    assert!(
        attempts + probes >= 1.0,
        "failed attempts of the hostile provider: {attempts} by client calls, {probes} by probes"
    );
}

/// The original crash: `{"\` as the answer to every call, the chain id check and the probes included.
#[test]
fn a_trailing_backslash_even_for_the_chain_id_is_a_failure_not_an_exit() {
    let honest = FakeProvider::start();
    let evil = HostileProvider::start(Answer::Body(br#"{"\"#.to_vec()), false);
    let mut prism = base()
        .network("testnet", 4663)
        .network_option("probe_interval_ms", 50)
        .provider_url(&evil.url())
        .provider(&honest)
        .start();
    assert!(
        wait_until(WAIT, || evil.count("eth_chainId") > 0
            && evil.count("eth_blockNumber") > 1),
        "the hostile provider was not probed"
    );
    assert!(
        wait_until(WAIT, || state(&prism, "testnet", 0) == "open"),
        "state {:?}",
        state(&prism, "testnet", 0)
    );
    for i in 0..10 {
        let r = read(&prism, "testnet", i);
        assert_eq!(expect_http_result(&r, &i.to_string()), b"\"0x0\"");
    }
    assert_alive(&mut prism);
}

/// A body past `max_response_bytes`, announced or streamed, and an absurd chunk size: refused as too large
/// without buffering; the process stays up and small.
#[test]
fn floods_are_refused_unbuffered() {
    let honest = FakeProvider::start();
    let floods = hostile::floods();
    let hostiles: Vec<HostileProvider> = floods
        .iter()
        .map(|c| HostileProvider::start(c.answer.clone(), true))
        .collect();
    let mut b = base();
    for (k, h) in hostiles.iter().enumerate() {
        b = b.network(&format!("f{k}"), 4663).provider_url(&h.url());
    }
    let mut prism = b.network("ok", 4663).provider(&honest).start();
    for (k, c) in floods.iter().enumerate() {
        let net = format!("f{k}");
        assert!(
            wait_until(WAIT, || state(&prism, &net, 0) != "unverified"),
            "{}: chain id never verified",
            c.name
        );
        for i in 0..5 {
            let started = Instant::now();
            let r = read(&prism, &net, i);
            assert_eq!(r.status, 200, "{}: {}", c.name, r.describe());
            let v = r.json();
            assert!(
                v["error"]["code"].is_i64(),
                "{}: a JSON-RPC error expected: {v}",
                c.name
            );
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{}: took {:?}",
                c.name,
                started.elapsed()
            );
        }
    }
    let r = read(&prism, "ok", 1);
    assert_eq!(expect_http_result(&r, "1"), b"\"0x0\"");
    assert_alive(&mut prism);
    let rss_kb = std::fs::read_to_string(format!("/proc/{}/status", prism.pid()))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")
                .map(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap())
        })
        .unwrap();
    assert!(rss_kb < 256 * 1024, "prism holds {rss_kb} kB after the floods");
}

/// Known gap, not fixed here (classification belongs to core/classify + forward): an answer over
/// `max_response_bytes` is `TooLarge` ("the request asked for too much", never counted), so a provider that
/// floods every answer, even `eth_blockNumber`, is never excluded and the honest provider never gets the
/// reads it would have served.
#[test]
fn a_provider_flooding_every_answer_is_excluded() {
    let honest = FakeProvider::start();
    let flood = hostile::floods().remove(0);
    let evil = HostileProvider::start(flood.answer, true);
    let prism = base()
        .network("testnet", 4663)
        .network_option("probe_interval_ms", 50)
        .provider_url(&evil.url())
        .provider(&honest)
        .start();
    assert!(wait_until(WAIT, || state(&prism, "testnet", 0) == "open"));
    for i in 0..10 {
        let r = read(&prism, "testnet", i);
        assert_eq!(expect_http_result(&r, &i.to_string()), b"\"0x0\"");
    }
}

// ---- WebSocket ------------------------------------------------------------------------------------

/// The hostile provider's HTTP side is honest and ahead (so it carries the subscription); its socket sends
/// malformed messages and frames and breaks the protocol on every connection. Prism stays up, the client
/// only ever gets well-formed JSON, and once the hostile one's breaker opens the subscription moves to the
/// honest provider and heads flow.
#[test]
fn a_hostile_subscription_socket_never_reaches_the_client() {
    let evil_http = FakeProvider::start();
    evil_http.set_head(0x102);
    let evil_ws = HostileWs::start();
    let good = WsFake::start(0x100);
    let mut prism = Prism::builder()
        .network("testnet", 4663)
        .network_option("probe_interval_ms", 50)
        .provider_url_with(&evil_http.url(), &format!("ws_url = \"{}\"", evil_ws.ws_url()))
        .provider_url_with(&good.http_url(), &good.ws_option())
        .extra_toml("[policy.breaker]\nfailure_threshold = 2\nwindow_ms = 60000\ncooldown_ms = 60000\n")
        .start();
    assert!(wait_until(WAIT, || state(&prism, "testnet", 0) == "closed"
        && state(&prism, "testnet", 1) == "closed"));

    let stream = TcpStream::connect(prism.addr()).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let (mut ws, _) = tungstenite::client(format!("ws://{}/", prism.addr()), stream).expect("upgrade");
    ws.send(tungstenite::Message::Text(
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}"#.into(),
    ))
    .unwrap();
    let mut received: Vec<serde_json::Value> = Vec::new();
    let read_some = |ws: &mut tungstenite::WebSocket<TcpStream>, received: &mut Vec<serde_json::Value>| match ws.read()
    {
        Ok(tungstenite::Message::Text(t)) => {
            let v: serde_json::Value =
                serde_json::from_str(&t).unwrap_or_else(|e| panic!("the client got malformed JSON ({e}): {t:?}"));
            assert!(!t.contains(SECRET), "a hostile result reached the client: {t}");
            received.push(v);
        }
        Ok(_) => {}
        Err(tungstenite::Error::Io(e))
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
        Err(e) => panic!("the client socket failed: {e}"),
    };
    // The barrage, several connections over.
    let deadline = Instant::now() + WAIT;
    while evil_ws.accepted() < 3 {
        assert!(
            Instant::now() < deadline,
            "the hostile socket was dialled {} times",
            evil_ws.accepted()
        );
        read_some(&mut ws, &mut received);
    }
    assert_alive(&mut prism);
    assert!(
        received.iter().any(|v| v["id"] == 1 && v["result"].is_string()),
        "no subscription id: {received:?}"
    );
    // The hostile provider's breaker opens: the subscription moves, heads come from the honest one.
    evil_http.set_mode(Mode::Status(500));
    assert!(
        wait_until(WAIT, || good.active_subscriptions() == 1),
        "the subscription did not move"
    );
    let deadline = Instant::now() + WAIT;
    loop {
        good.advance_head(1);
        read_some(&mut ws, &mut received);
        if received
            .iter()
            .any(|v| v["method"] == "eth_subscription" && v["params"]["result"]["number"].is_string())
        {
            break;
        }
        assert!(Instant::now() < deadline, "no head reached the client: {received:?}");
    }
    assert_alive(&mut prism);
    assert_no_secret_logged(&prism);
}
