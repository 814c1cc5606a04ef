//! Exactly-once transaction submission through a running Prism, counted at the fake providers: in every
//! fault case (reset after the request was read, HTTP 500, a hang past the deadline, a close without an
//! answer, a garbage body, a node error) `eth_sendRawTransaction` reaches exactly one upstream exactly once;
//! a timeout after sending answers -32098 with the transaction hash Prism computed (keccak256 of the raw
//! bytes); only a connection refused before one byte was sent moves the write to the next provider, once.

mod support;

use std::time::{Duration, Instant};
use support::{call, expect_http_result, http, Conn, FakeProvider, Garbage, Mode, Prism, PrismBuilder, Reply};
use tiny_keccak::{Hasher, Keccak};

const KEY: &str = "rr-writes-key";
/// A signed EIP-1559 transaction as wallets send it (the bytes only matter for their hash).
const RAW_TX: &str = "0x02f8b1821237808459682f0085174876e80083030d4094a0b86991c6218b36c1d19d4a2e9eb0ce3606eb4880b844a9059cbb000000000000000000000000deadbeefdeadbeefdeadbeefdeadbeefdeadbeef00000000000000000000000000000000000000000000000000000000000f4240c080a0c4a5b8e5f3d8a1b0e2f7c6d5e4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5a04f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e";
const SEND: &str = "eth_sendRawTransaction";

fn keccak_hex(hex: &str) -> String {
    let digits = hex.trim_start_matches("0x");
    let bytes: Vec<u8> = (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect();
    let mut k = Keccak::v256();
    k.update(&bytes);
    let mut out = [0u8; 32];
    k.finalize(&mut out);
    let mut s = String::from("0x");
    for b in out {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[test]
fn keccak_helper_matches_the_known_vector() {
    // keccak256(0x00), so the hash assertions below rest on a checked helper.
    assert_eq!(
        keccak_hex("0x00"),
        "0xbc36789e7a1e281436464229828f817d6612f7b477d66591ff96a9e064bcc98a"
    );
}

/// Two providers behind a round-robin key: with one shard the writes alternate p1, p2, p1 ...
fn builder(p1: &FakeProvider, p2: &FakeProvider, deadline_ms: u64) -> PrismBuilder {
    Prism::builder()
        .providers(&[p1, p2])
        .limit("request_deadline_ms", deadline_ms)
        .network_option("probe_interval_ms", 200)
        .extra_toml(&format!(
            "[policy.retry]\nbase_delay_ms = 1\nmax_delay_ms = 5\n\n[policy.breaker]\nfailure_threshold = 1000\n\n\
             [[keys]]\nname = \"w\"\nkey = \"{KEY}\"\nstrategy = \"round_robin\"\n"
        ))
}

fn send_tx(prism: &Prism, id: u64) -> (support::Response, Duration) {
    let t = Instant::now();
    let r = Conn::connect(prism.addr()).request(&http::post_with(
        "/",
        call(&id.to_string(), SEND, &format!("[\"{RAW_TX}\"]")).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    ));
    (r, t.elapsed())
}

const OK_HASH: &str = "\"0x1111111111111111111111111111111111111111111111111111111111111111\"";

/// p1 has `fault` for writes; p2 accepts them. Sends `n` writes one by one and checks that the upstreams
/// together received exactly `n` submissions, each once (also a moment later: no late duplicate), that p1
/// met some of them, and hands each answer p1 caused to `check`.
fn exactly_once(fault: Mode, deadline_ms: u64, n: u64, check: impl Fn(&support::Response, Duration)) {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode(SEND, fault.clone());
    p2.set_reply(SEND, Reply::Result(OK_HASH.into()));
    let prism = builder(&p1, &p2, deadline_ms).start();
    support::wait_serving(&prism, &["p1", "p2"]);
    let mut faulty = 0;
    for i in 0..n {
        let before = p1.count(SEND);
        let (r, took) = send_tx(&prism, i);
        if p1.count(SEND) > before {
            faulty += 1;
            check(&r, took);
        } else {
            assert_eq!(expect_http_result(&r, &i.to_string()), OK_HASH.as_bytes());
        }
        assert_eq!(
            p1.count(SEND) + p2.count(SEND),
            (i + 1) as usize,
            "write {i} ({fault:?} at p1): upstream submissions so far"
        );
    }
    assert!(
        faulty >= 1,
        "no write met p1's fault ({fault:?}): the fault path was not exercised"
    );
    // No late duplicate: nothing more arrives after the answers.
    let late = support::wait_until(Duration::from_millis(300), || {
        p1.count(SEND) + p2.count(SEND) > n as usize
    });
    assert!(!late, "a write was submitted again after its answer ({fault:?})");
    // Every submission carried the raw transaction unmodified.
    for c in p1.calls_to(SEND).iter().chain(p2.calls_to(SEND).iter()) {
        assert_eq!(
            c.params.as_deref(),
            Some(format!("[\"{RAW_TX}\"]").as_bytes()),
            "params were modified"
        );
    }
}

fn expect_failure(r: &support::Response) -> serde_json::Value {
    assert_eq!(r.status, 200, "{}", r.describe());
    let err = support::error_of(r);
    assert!(err["code"].is_i64(), "{}", r.describe());
    err
}

#[test]
fn write_reset_after_the_request_was_read_is_never_resent_and_answers_32098() {
    // The node may have taken it: the client learns "outcome unknown" with the hash to poll, not a plain
    // upstream error it might answer by resending.
    let expected_hash = keccak_hex(RAW_TX);
    exactly_once(Mode::Reset, 3000, 6, |r, _| {
        let err = expect_failure(r);
        assert_eq!(err["code"], -32098, "{}", r.describe());
        assert_eq!(err["data"]["txHash"], expected_hash.as_str(), "{}", r.describe());
    });
}

#[test]
fn write_refused_with_429_goes_to_the_next_provider_once() {
    // A 429 means the provider did not take the transaction: another provider may, still exactly once.
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode(SEND, Mode::Status(429));
    p2.set_reply(SEND, Reply::Result(OK_HASH.into()));
    let prism = builder(&p1, &p2, 3000).start();
    support::wait_serving(&prism, &["p1", "p2"]);
    for i in 0..4 {
        let (r, _) = send_tx(&prism, i);
        assert_eq!(expect_http_result(&r, &i.to_string()), OK_HASH.as_bytes(), "write {i}");
        assert_eq!(p2.count(SEND), (i + 1) as usize, "write {i} reached p2 exactly once");
    }
    assert!(p1.count(SEND) >= 1, "no write met p1's 429: the path was not exercised");
    let late = support::wait_until(Duration::from_millis(300), || p2.count(SEND) > 4);
    assert!(!late, "a write was submitted again");
}

#[test]
fn write_answered_500_is_never_resent() {
    exactly_once(Mode::Status(500), 3000, 6, |r, _| {
        let err = expect_failure(r);
        assert_eq!(err["code"], -32603, "{}", r.describe());
    });
}

#[test]
fn write_closed_without_answer_is_never_resent() {
    exactly_once(Mode::CloseWithoutAnswer, 3000, 6, |r, _| {
        expect_failure(r);
    });
}

#[test]
fn write_with_a_garbage_answer_is_never_resent() {
    exactly_once(Mode::Garbage(Garbage::Html), 3000, 6, |r, _| {
        expect_failure(r);
    });
}

#[test]
fn write_rejected_by_the_node_is_returned_as_is_and_never_resent() {
    exactly_once(
        Mode::RpcError {
            code: -32000,
            message: "nonce too low: next nonce 8, tx nonce 7".into(),
        },
        3000,
        6,
        |r, _| {
            let err = expect_failure(r);
            assert_eq!(err["code"], -32000, "{}", r.describe());
            assert_eq!(err["message"], "nonce too low: next nonce 8, tx nonce 7");
        },
    );
}

#[test]
fn write_timeout_after_sending_answers_32098_with_the_tx_hash() {
    const DEADLINE_MS: u64 = 800;
    let expected_hash = keccak_hex(RAW_TX);
    exactly_once(Mode::Hang, DEADLINE_MS, 4, |r, took| {
        let err = expect_failure(r);
        assert_eq!(err["code"], -32098, "{}", r.describe());
        assert_eq!(err["data"]["txHash"], expected_hash.as_str(), "{}", r.describe());
        assert_eq!(err["data"]["sent"], true, "{}", r.describe());
        assert_eq!(err["data"]["provider"], "p1", "{}", r.describe());
        assert!(
            took < Duration::from_millis(DEADLINE_MS + 500),
            "the write answered after {took:?}; deadline {DEADLINE_MS} ms"
        );
    });
}

#[test]
fn write_to_a_refused_connection_goes_to_the_next_provider_once() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p2.set_reply(SEND, Reply::Result(OK_HASH.into()));
    // Probes rarely: p1's refusals should come from the writes, not from probes.
    let prism = builder(&p1, &p2, 3000)
        .network_option("probe_interval_ms", 60_000)
        .start();
    support::wait_serving(&prism, &["p1", "p2"]);
    p1.stop_listening();
    for i in 0..4 {
        let (r, _) = send_tx(&prism, i);
        assert_eq!(
            expect_http_result(&r, &i.to_string()),
            OK_HASH.as_bytes(),
            "write {i}: refused at p1 (nothing sent), so p2 takes it"
        );
        assert_eq!(p2.count(SEND), (i + 1) as usize, "write {i} reached p2 exactly once");
    }
    assert_eq!(p1.count(SEND), 0);
    // p1 was tried first (round robin) and refused: Prism recorded the failed attempts.
    let row = prism.wait_provider("p1", Duration::from_secs(5), "refusals reported", |r| {
        r["failures"].as_u64() >= Some(1)
    });
    assert!(row["failures"].as_u64() <= Some(4), "{row}");
    let late = support::wait_until(Duration::from_millis(300), || p2.count(SEND) > 4);
    assert!(!late, "a write was submitted again");
}

#[test]
fn write_is_never_retried_even_when_every_provider_fails() {
    // Both providers fail writes: whatever happens, one submission per client call.
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode(SEND, Mode::Status(502));
    p2.set_method_mode(SEND, Mode::Reset);
    let prism = builder(&p1, &p2, 3000).start();
    support::wait_serving(&prism, &["p1", "p2"]);
    for i in 0..8 {
        let (r, _) = send_tx(&prism, i);
        expect_failure(&r);
        assert_eq!(p1.count(SEND) + p2.count(SEND), (i + 1) as usize, "after write {i}");
    }
    // A batch of two writes: two submissions, one each.
    let body = support::batch(&[
        call("\"a\"", SEND, &format!("[\"{RAW_TX}\"]")),
        call("\"b\"", SEND, &format!("[\"{RAW_TX}\"]")),
    ]);
    let r = prism.rpc_with("/", body.as_bytes(), &[&format!("x-api-key: {KEY}")]);
    assert_eq!(support::batch_items(&r).len(), 2);
    assert_eq!(p1.count(SEND) + p2.count(SEND), 10);
}
