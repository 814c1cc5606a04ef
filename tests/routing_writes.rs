//! Exactly-once transaction submission through a running Prism, counted at the fake providers.
//!
//! - Every fault mode (HTTP 500, HTTP 429 with and without a JSON-RPC body, a JSON-RPC rate-limit error,
//!   reset after the request was read, a close without an answer, a hang past the deadline, a garbage body,
//!   a wrong id), with one provider faulty and with all faulty: each transaction reaches the providers
//!   exactly once and the client gets the failure of the one it went to. Only a connection refused (not
//!   one byte sent) moves a write to the next provider, once.
//! - Methods Prism does not know (`eth_sendUserOperation`-like vendor calls) are sent once, never joined;
//!   a read declared in `methods.read` is retried and joined.
//! - Lost answers are looked up: a provider that took the transaction and then reset makes the client get
//!   the hash as a success when any provider knows it, `-32098` with `data.txHash` when none does; "already
//!   known" is the hash; "nonce too low" is the node's error unless this very transaction is mined;
//!   `eth_sendRawTransactionSync` gets the receipt.

use crate::support::{call, expect_http_result, http, Conn, FakeProvider, Garbage, Mode, Prism, PrismBuilder, Reply};
use serde_json::Value;
use std::time::{Duration, Instant};
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

fn send_tx(prism: &Prism, id: u64) -> (crate::support::Response, Duration) {
    let t = Instant::now();
    let r = Conn::connect(prism.addr()).request(&http::post_with(
        "/",
        call(&id.to_string(), SEND, &format!("[\"{RAW_TX}\"]")).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    ));
    (r, t.elapsed())
}

const OK_HASH: &str = "\"0x1111111111111111111111111111111111111111111111111111111111111111\"";

fn expect_failure(r: &crate::support::Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.describe());
    let err = crate::support::error_of(r);
    assert!(err["code"].is_i64(), "{}", r.describe());
    err
}

/// Every provider-side fault a write can meet after its bytes left, and what the client must see.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Http500,
    Http429,
    Http429Json,
    RpcRateLimit,
    ResetAfterRead,
    CloseWithoutAnswer,
    Hang,
    Garbage,
    WrongId,
}

const ALL_FAULTS: [Fault; 9] = [
    Fault::Http500,
    Fault::Http429,
    Fault::Http429Json,
    Fault::RpcRateLimit,
    Fault::ResetAfterRead,
    Fault::CloseWithoutAnswer,
    Fault::Hang,
    Fault::Garbage,
    Fault::WrongId,
];

impl Fault {
    fn mode(self) -> Mode {
        match self {
            Fault::Http500 => Mode::Status(500),
            Fault::Http429 => Mode::Status(429),
            Fault::Http429Json => Mode::StatusBody(
                429,
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"rate limit exceeded"}}"#.into(),
            ),
            Fault::RpcRateLimit => Mode::RpcError {
                code: -32005,
                message: "Too many requests, rate limit exceeded".into(),
            },
            Fault::ResetAfterRead => Mode::Reset,
            Fault::CloseWithoutAnswer => Mode::CloseWithoutAnswer,
            Fault::Hang => Mode::Hang,
            Fault::Garbage => Mode::Garbage(Garbage::Html),
            Fault::WrongId => Mode::WrongId,
        }
    }

    /// A rate limit: the provider is parked.
    fn throttles(self) -> bool {
        matches!(self, Fault::Http429 | Fault::Http429Json | Fault::RpcRateLimit)
    }

    /// The answer was lost after the bytes left: the node may hold the transaction.
    fn lost(self) -> bool {
        matches!(
            self,
            Fault::ResetAfterRead | Fault::CloseWithoutAnswer | Fault::Hang | Fault::Garbage | Fault::WrongId
        )
    }

    /// What the client gets from the provider it went to.
    fn check(self, r: &crate::support::Response, provider: &str) {
        let err = expect_failure(r);
        match self {
            f if f.lost() => {
                // Nobody knows the transaction (the fakes' lookups answer "0x0"): outcome unknown, with
                // the hash to poll.
                assert_eq!(err["code"], -32098, "{f:?}: {}", r.describe());
                assert_eq!(
                    err["data"]["txHash"],
                    keccak_hex(RAW_TX).as_str(),
                    "{f:?}: {}",
                    r.describe()
                );
                assert_eq!(err["data"]["provider"], provider, "{f:?}: {}", r.describe());
            }
            // The node's own JSON-RPC error comes back as it was.
            Fault::RpcRateLimit => {
                assert_eq!(err["code"], -32005, "{self:?}: {}", r.describe());
            }
            // (The 429 body's id is null: not an answer to this call, so the status is what is known.)
            Fault::Http429 | Fault::Http429Json => {
                assert_eq!(err["code"], -32603, "{}", r.describe());
                assert!(err["message"].as_str().unwrap().contains("429"), "{}", r.describe());
                assert_eq!(err["data"]["provider"], provider, "{}", r.describe());
            }
            _ => {
                assert_eq!(err["code"], -32603, "{self:?}: {}", r.describe());
                assert_eq!(err["data"]["provider"], provider, "{self:?}: {}", r.describe());
            }
        }
    }
}

/// A deadline short enough for hangs, long enough for a loaded machine.
const DEADLINE_MS: u64 = 1500;

/// p1 has `fault` for writes; p2 accepts them (or, with `all`, has the same fault). Sends 4 writes one by
/// one (round robin: p1, p2, p1, p2) and checks after each that the upstreams together received exactly
/// one more submission, that the answer is the failure of the provider it went to, and that nothing
/// arrives late.
fn exactly_once(fault: Fault, all: bool) {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode(SEND, fault.mode());
    if all {
        p2.set_method_mode(SEND, fault.mode());
    } else {
        p2.set_reply(SEND, Reply::Result(OK_HASH.into()));
    }
    let prism = builder(&p1, &p2, DEADLINE_MS).start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let n = 4;
    let mut faulty = 0;
    for i in 0..n {
        let before = (p1.count(SEND), p2.count(SEND));
        let (r, took) = send_tx(&prism, i);
        let after = (p1.count(SEND), p2.count(SEND));
        let sent = after.0 + after.1 - (before.0 + before.1);
        if sent == 0 && all && fault.throttles() {
            // Every provider is parked after its 429: the write is routed nowhere, and the client is
            // told nothing was sent.
            let err = expect_failure(&r);
            assert_eq!(err["message"], "No healthy upstream available", "{}", r.describe());
            continue;
        }
        assert_eq!(
            sent, 1,
            "write {i} ({fault:?}, all faulty: {all}): one submission, got {before:?} -> {after:?}"
        );
        let went = if after.0 > before.0 { "p1" } else { "p2" };
        if went == "p1" || all {
            faulty += 1;
            fault.check(&r, went);
        } else {
            assert_eq!(expect_http_result(&r, &i.to_string()), OK_HASH.as_bytes(), "write {i}");
        }
        assert!(
            took < Duration::from_millis(DEADLINE_MS + 1000),
            "write {i} ({fault:?}) answered after {took:?}"
        );
    }
    assert!(
        faulty >= 1,
        "no write met the fault ({fault:?}): the path was not exercised"
    );
    let late = crate::support::wait_until(Duration::from_millis(300), || {
        p1.count(SEND) + p2.count(SEND) > n as usize
    });
    assert!(!late, "a write was submitted again after its answer ({fault:?})");
    for c in p1.calls_to(SEND).iter().chain(p2.calls_to(SEND).iter()) {
        assert_eq!(
            c.params.as_deref(),
            Some(format!("[\"{RAW_TX}\"]").as_bytes()),
            "params were modified"
        );
    }
}

#[test]
fn with_one_faulty_provider_every_fault_mode_keeps_each_write_to_one_submission() {
    for fault in ALL_FAULTS {
        exactly_once(fault, false);
    }
}

#[test]
fn with_every_provider_faulty_every_fault_mode_keeps_each_write_to_one_submission() {
    for fault in ALL_FAULTS {
        exactly_once(fault, true);
    }
}

#[test]
fn a_429_parks_the_provider_and_later_writes_are_routed_away_before_sending() {
    // The 429'd write ends there (the provider saw it); the next writes avoid the parked provider instead
    // of meeting its 429 again.
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode(SEND, Mode::Status(429));
    p2.set_reply(SEND, Reply::Result(OK_HASH.into()));
    let prism = builder(&p1, &p2, 3000).start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let (r, _) = send_tx(&prism, 0);
    assert_eq!(p1.count(SEND), 1, "round robin starts at p1");
    assert_eq!(p2.count(SEND), 0, "the 429'd write was not moved");
    Fault::Http429.check(&r, "p1");
    let parked_at = Instant::now();
    for i in 1..4 {
        let (r, _) = send_tx(&prism, i);
        assert_eq!(expect_http_result(&r, &i.to_string()), OK_HASH.as_bytes(), "write {i}");
    }
    // p1 is parked for a second after its 429: the writes in that second all went to p2.
    if parked_at.elapsed() < Duration::from_millis(900) {
        assert_eq!(p1.count(SEND), 1, "a write went to the parked provider");
        assert_eq!(p2.count(SEND), 3);
    }
}

#[test]
fn write_to_a_refused_connection_goes_to_the_next_provider_once() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p2.set_reply(SEND, Reply::Result(OK_HASH.into()));
    // Probes rarely: p1's refusals should come from the writes, not from probes.
    let prism = builder(&p1, &p2, 3000)
        .network_option("probe_interval_ms", 60_000)
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
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
    let late = crate::support::wait_until(Duration::from_millis(300), || p2.count(SEND) > 4);
    assert!(!late, "a write was submitted again");
}

#[test]
fn with_every_provider_refusing_connections_a_write_fails_without_a_submission() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let prism = builder(&p1, &p2, 3000)
        .network_option("probe_interval_ms", 60_000)
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    p1.stop_listening();
    p2.stop_listening();
    let (r, _) = send_tx(&prism, 0);
    let err = expect_failure(&r);
    assert_ne!(
        err["code"],
        -32098,
        "nothing was sent, so nothing is unsure: {}",
        r.describe()
    );
    assert_eq!(p1.count(SEND) + p2.count(SEND), 0);
}

#[test]
fn a_batch_of_writes_is_one_submission_each_even_when_every_provider_fails() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode(SEND, Mode::Status(502));
    p2.set_method_mode(SEND, Mode::Reset);
    let prism = builder(&p1, &p2, 3000).start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let body = crate::support::batch(&[
        call("\"a\"", SEND, &format!("[\"{RAW_TX}\"]")),
        call("\"b\"", SEND, &format!("[\"{RAW_TX}\"]")),
    ]);
    let r = prism.rpc_with("/", body.as_bytes(), &[&format!("x-api-key: {KEY}")]);
    assert_eq!(crate::support::batch_items(&r).len(), 2);
    assert_eq!(p1.count(SEND) + p2.count(SEND), 2);
}

// ---- methods Prism does not know --------------------------------------------------------------------

fn rpc(prism: &Prism, id: u64, method: &str, params: &str) -> crate::support::Response {
    Conn::connect(prism.addr()).request(&http::post_with(
        "/",
        call(&id.to_string(), method, params).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    ))
}

#[test]
fn submissions_and_unknown_methods_are_sent_once_when_the_provider_resets_after_reading() {
    let user_op = r#"[{"sender":"0x0000000000000000000000000000000000000001","nonce":"0x0","callData":"0x"},"0x0000000071727De22E5E9d8BAf0edAc6f37da032"]"#;
    for (method, params) in [
        ("eth_sendRawTransactionSync", format!("[\"{RAW_TX}\"]")),
        ("eth_sendUserOperation", user_op.to_string()),
        ("vendor_submitOrder", r#"[{"market":"ETH-USD","size":"1"}]"#.to_string()),
        (
            "timeboost_sendExpressLaneTransaction",
            r#"[{"round":"0x1"}]"#.to_string(),
        ),
    ] {
        let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
        p1.set_method_mode(method, Mode::Reset);
        p2.set_method_mode(method, Mode::Reset);
        let prism = builder(&p1, &p2, DEADLINE_MS).start();
        crate::support::wait_serving(&prism, &["p1", "p2"]);
        for i in 0..2 {
            let r = rpc(&prism, i, method, &params);
            let err = expect_failure(&r);
            assert_eq!(err["code"], -32098, "{method}: {}", r.describe());
            assert_eq!(
                p1.count(method) + p2.count(method),
                (i + 1) as usize,
                "{method}: sent once per call"
            );
        }
        let late = crate::support::wait_until(Duration::from_millis(300), || p1.count(method) + p2.count(method) > 2);
        assert!(!late, "{method} was sent again");
    }
}

#[test]
fn a_read_declared_in_config_is_retried_and_an_undeclared_one_is_not() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("vendor_getPortfolio", Mode::Reset);
    p2.set_reply("vendor_getPortfolio", Reply::Result("\"portfolio\"".into()));
    p1.set_method_mode("vendor_getOther", Mode::Reset);
    p2.set_method_mode("vendor_getOther", Mode::Reset);
    let prism = builder(&p1, &p2, 3000)
        .network_option("methods", r#"{ read = ["vendor_getPortfolio"] }"#)
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    // Round robin starts at p1: the declared read is retried on p2 and succeeds.
    let r = rpc(&prism, 1, "vendor_getPortfolio", "[]");
    assert_eq!(expect_http_result(&r, "1"), b"\"portfolio\"");
    // (A read may also be replayed once on a fresh connection to p1: the pool took the reset for a stale
    // keep-alive connection.)
    assert!(p1.count("vendor_getPortfolio") >= 1);
    assert_eq!(p2.count("vendor_getPortfolio"), 1, "retried once on p2");
    // The undeclared one ends where it went, wherever that is.
    let r = rpc(&prism, 2, "vendor_getOther", "[]");
    let err = expect_failure(&r);
    assert_eq!(err["code"], -32098, "{}", r.describe());
    assert!(
        err["data"].get("txHash").is_none(),
        "no transaction to poll: {}",
        r.describe()
    );
    assert_eq!(p1.count("vendor_getOther") + p2.count("vendor_getOther"), 1);
    let m = prism.metric("prism_unknown_method_calls_total");
    assert_eq!(m, 1.0, "the undeclared call was counted");
}

#[test]
fn identical_unknown_calls_and_notifications_are_sent_as_they_came_while_declared_reads_are_joined() {
    let p1 = FakeProvider::start();
    for m in ["vendor_ping", "vendor_quote"] {
        p1.set_delay(m, Duration::from_millis(300));
    }
    let prism = Prism::builder()
        .provider(&p1)
        .network_option("methods", r#"{ read = ["vendor_quote"] }"#)
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    let same = |id: Option<&str>, m: &str| match id {
        Some(id) => call(id, m, "[1]"),
        None => crate::support::notification(m, "[1]"),
    };
    // Three identical calls and three identical notifications of an unknown method, in one batch.
    let body = crate::support::batch(&[
        same(Some("1"), "vendor_ping"),
        same(Some("2"), "vendor_ping"),
        same(Some("3"), "vendor_ping"),
        same(None, "vendor_ping"),
        same(None, "vendor_ping"),
        same(None, "vendor_ping"),
    ]);
    let r = prism.rpc(body.as_bytes());
    assert_eq!(crate::support::batch_items(&r).len(), 3, "{}", r.describe());
    assert!(
        p1.wait_for_calls("vendor_ping", 6, Duration::from_secs(3)),
        "every unknown call and notification reaches the provider: {}",
        p1.count("vendor_ping")
    );
    // The same for a declared read: joined while one is in flight.
    let body = crate::support::batch(&[
        same(Some("1"), "vendor_quote"),
        same(Some("2"), "vendor_quote"),
        same(Some("3"), "vendor_quote"),
    ]);
    let r = prism.rpc(body.as_bytes());
    assert_eq!(crate::support::batch_items(&r).len(), 3, "{}", r.describe());
    assert_eq!(p1.count("vendor_quote"), 1, "a declared read is deduplicated");
    let late = crate::support::wait_until(Duration::from_millis(300), || p1.count("vendor_ping") > 6);
    assert!(!late, "an unknown call was sent twice");
}

#[test]
fn prism_check_refuses_a_submission_declared_as_a_read() {
    let scratch = crate::support::prism::Scratch::new();
    let path = scratch.file(
        "bad.toml",
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[networks]]\nname = \"n\"\nkind = \"evm\"\n\
         methods = { read = [\"vendor_quote\", \"eth_sendRawTransaction\"] }\n\n\
         [[networks.providers]]\nname = \"p\"\nurl = \"http://127.0.0.1:1\"\n",
    );
    let out = std::process::Command::new(crate::support::prism::BIN)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "check accepted it: {stderr}");
    assert!(
        stderr.contains("networks[0].methods.read[1]") && stderr.contains("cannot be declared a read"),
        "{stderr}"
    );
}

// ---- lost answers, looked up ------------------------------------------------------------------------

/// What `eth_getTransactionByHash` answers for our transaction (pending: no block yet).
fn tx_object() -> String {
    format!(
        r#"{{"hash":"{}","blockNumber":null,"nonce":"0x7"}}"#,
        keccak_hex(RAW_TX)
    )
}

fn receipt_object() -> String {
    format!(
        r#"{{"transactionHash":"{}","blockNumber":"0x101","status":"0x1","logs":[]}}"#,
        keccak_hex(RAW_TX)
    )
}

#[test]
fn a_write_whose_answer_is_lost_is_answered_with_its_hash_when_a_provider_knows_it() {
    for fault in [Mode::Reset, Mode::Hang, Mode::Garbage(Garbage::TruncatedJson)] {
        let p1 = FakeProvider::start();
        p1.set_method_mode(SEND, fault.clone());
        // The node took it: its pool answers the lookup.
        p1.set_reply("eth_getTransactionByHash", Reply::Result(tx_object()));
        let prism = Prism::builder()
            .provider(&p1)
            .limit("request_deadline_ms", 2000)
            .start();
        crate::support::wait_serving(&prism, &["p1"]);
        let t = Instant::now();
        let r = prism.rpc(call("7", SEND, &format!("[\"{RAW_TX}\"]")).as_bytes());
        assert_eq!(
            expect_http_result(&r, "7"),
            format!("\"{}\"", keccak_hex(RAW_TX)).as_bytes(),
            "{fault:?}"
        );
        assert!(
            t.elapsed() < Duration::from_millis(3000),
            "{fault:?}: {:?}",
            t.elapsed()
        );
        assert_eq!(p1.count(SEND), 1, "{fault:?}: one submission");
        assert!(p1.count("eth_getTransactionByHash") >= 1);
        assert_eq!(prism.metric("prism_submissions_settled_total{how=\"lost_found\"}"), 1.0);
    }
}

#[test]
fn a_lost_answer_is_looked_up_on_every_provider_and_unresolved_is_32098_with_the_hash() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode(SEND, Mode::Reset);
    p2.set_method_mode(SEND, Mode::Reset);
    p1.set_reply("eth_getTransactionByHash", Reply::Result("null".into()));
    // Only p2 has seen it (a gossiped pool): the first write goes to p1, whose lookup says nothing, but
    // p2's does.
    p2.set_reply("eth_getTransactionByHash", Reply::Result(tx_object()));
    let prism = builder(&p1, &p2, 2000).start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let (r, _) = send_tx(&prism, 0);
    assert_eq!(p1.count(SEND), 1);
    assert_eq!(p2.count(SEND), 0, "looked up on p2, never sent there");
    assert_eq!(
        expect_http_result(&r, "0"),
        format!("\"{}\"", keccak_hex(RAW_TX)).as_bytes()
    );
    // Now nobody knows it: -32098 with the hash, after polling within the deadline.
    p2.set_reply("eth_getTransactionByHash", Reply::Result("null".into()));
    let lookups = p1.count("eth_getTransactionByHash");
    let (r, took) = send_tx(&prism, 1);
    let err = expect_failure(&r);
    assert_eq!(err["code"], -32098, "{}", r.describe());
    assert_eq!(err["data"]["txHash"], keccak_hex(RAW_TX).as_str());
    assert_eq!(p1.count(SEND) + p2.count(SEND), 2, "one submission per write");
    assert!(
        p1.count("eth_getTransactionByHash") + p2.count("eth_getTransactionByHash") >= lookups + 2,
        "looked up on both providers"
    );
    assert!(took < Duration::from_millis(3000), "{took:?}");
}

#[test]
fn already_known_is_the_hash_and_nonce_too_low_is_the_nodes_error_unless_this_transaction_is_mined() {
    let p1 = FakeProvider::start();
    let prism = Prism::builder().provider(&p1).start();
    crate::support::wait_serving(&prism, &["p1"]);
    let hash = format!("\"{}\"", keccak_hex(RAW_TX));
    for message in ["already known", "Known transaction", "AlreadyKnown"] {
        p1.set_method_mode(
            SEND,
            Mode::RpcError {
                code: -32000,
                message: message.into(),
            },
        );
        let r = prism.rpc(call("1", SEND, &format!("[\"{RAW_TX}\"]")).as_bytes());
        assert_eq!(expect_http_result(&r, "1"), hash.as_bytes(), "{message}");
    }
    p1.set_method_mode(
        SEND,
        Mode::RpcError {
            code: -32000,
            message: "nonce too low: next nonce 8, tx nonce 7".into(),
        },
    );
    p1.set_reply("eth_getTransactionReceipt", Reply::Result("null".into()));
    let r = prism.rpc(call("2", SEND, &format!("[\"{RAW_TX}\"]")).as_bytes());
    let err = expect_failure(&r);
    assert_eq!(
        err["message"], "nonce too low: next nonce 8, tx nonce 7",
        "another transaction took the nonce"
    );
    p1.set_reply("eth_getTransactionReceipt", Reply::Result(receipt_object()));
    let r = prism.rpc(call("3", SEND, &format!("[\"{RAW_TX}\"]")).as_bytes());
    assert_eq!(
        expect_http_result(&r, "3"),
        hash.as_bytes(),
        "this very transaction is mined"
    );
    // "underpriced" with this very transaction in the pool (ganache's answer to a duplicate) is the hash;
    // with another one holding the nonce, the node's error.
    p1.set_method_mode(
        SEND,
        Mode::RpcError {
            code: -32003,
            message: "transaction underpriced".into(),
        },
    );
    p1.set_reply("eth_getTransactionByHash", Reply::Result(tx_object()));
    let r = prism.rpc(call("4", SEND, &format!("[\"{RAW_TX}\"]")).as_bytes());
    assert_eq!(
        expect_http_result(&r, "4"),
        hash.as_bytes(),
        "the pool holds this very transaction"
    );
    p1.set_reply("eth_getTransactionByHash", Reply::Result("null".into()));
    let r = prism.rpc(call("5", SEND, &format!("[\"{RAW_TX}\"]")).as_bytes());
    assert_eq!(expect_failure(&r)["message"], "transaction underpriced");
    assert_eq!(p1.count(SEND), 7, "each call one submission");
}

#[test]
fn a_sync_submission_whose_answer_is_lost_gets_its_receipt() {
    const SYNC: &str = "eth_sendRawTransactionSync";
    let p1 = FakeProvider::start();
    p1.set_method_mode(SYNC, Mode::Reset);
    p1.set_reply("eth_getTransactionReceipt", Reply::Result(receipt_object()));
    let prism = Prism::builder().provider(&p1).start();
    crate::support::wait_serving(&prism, &["p1"]);
    let r = prism.rpc(call("1", SYNC, &format!("[\"{RAW_TX}\"]")).as_bytes());
    let receipt: Value = serde_json::from_slice(&expect_http_result(&r, "1")).unwrap();
    assert_eq!(receipt["transactionHash"], keccak_hex(RAW_TX).as_str());
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(p1.count(SYNC), 1);
}

#[test]
fn a_sync_submission_may_wait_longer_than_the_request_deadline_when_it_asks() {
    const SYNC: &str = "eth_sendRawTransactionSync";
    let p1 = FakeProvider::start();
    p1.set_reply(SYNC, Reply::Result(receipt_object()));
    p1.set_delay(SYNC, Duration::from_millis(1500));
    let prism = Prism::builder().provider(&p1).limit("request_deadline_ms", 500).start();
    crate::support::wait_serving(&prism, &["p1"]);
    // The node waits up to 3 s for the receipt (the call's timeout): Prism waits for the node.
    let r = prism.rpc(call("1", SYNC, &format!("[\"{RAW_TX}\", 3000]")).as_bytes());
    let receipt: Value = serde_json::from_slice(&expect_http_result(&r, "1")).unwrap();
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(p1.count(SYNC), 1);
}
