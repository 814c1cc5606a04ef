//! Blame needs evidence (issue 13): a tenant's bad calls never cost a healthy provider its breaker.
//!
//! An error no classifier rule knows, in a well-formed 200 answer to a read, is asked once of another
//! provider. A result there blames the first provider (its breaker counts; the client gets the result);
//! the same error there blames nobody (the client gets the node's bytes; no breaker counts). The verdict is
//! remembered, so a stream of the same bad call costs one second opinion. Writes are never asked twice.
//! Everything is observed at the fake providers (calls received) and on /status and /metrics.

use crate::support::{call, json, wait_until, FakeProvider, Prism, Reply};
use std::time::Duration;

const KEY: &str = "rr-key-0001";
const SIM: &str = "eth_simulateV1";
const SIM_PARAMS: &str =
    r#"[{"blockStateCalls":[{"blockOverrides":{"number":"0x9a"}},{"blockOverrides":{"number":"0x90"}}]},"latest"]"#;

/// Two providers behind a round-robin key, so both get client calls from the start.
fn start(p1: &FakeProvider, p2: &FakeProvider) -> Prism {
    let prism = Prism::builder()
        .providers(&[p1, p2])
        .extra_toml(&format!(
            "[policy.retry]\nmax_attempts = 3\nbase_delay_ms = 1\nmax_delay_ms = 5\n\n\
             [[keys]]\nname = \"rr\"\nkey = \"{KEY}\"\nstrategy = \"round_robin\"\n"
        ))
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    prism
}

/// One call with the key; returns the raw answer object.
fn ask(prism: &Prism, id: u64, method: &str, params: &str) -> Vec<u8> {
    let r = prism.rpc_with(
        "/",
        call(&id.to_string(), method, params).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    );
    assert_eq!(r.status, 200, "{}", r.describe());
    json::whole(&r.body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.describe()))
        .to_vec()
}

/// The sum of every /metrics line of `name` whose labels include all of `labels`.
fn metric_sum(prism: &Prism, name: &str, labels: &[&str]) -> f64 {
    let text = prism.admin_get("/metrics").text();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|lab| l.contains(lab)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Upstream attempts at provider `p` that counted as its failure.
fn failures_at(prism: &Prism, p: &str) -> f64 {
    metric_sum(
        prism,
        "prism_upstream_attempts_total",
        &[&format!("provider=\"{p}\""), "result=\"failed\""],
    )
}

fn second_opinions(prism: &Prism, outcome: &str) -> f64 {
    metric_sum(
        prism,
        "prism_second_opinions_total",
        &[&format!("outcome=\"{outcome}\"")],
    )
}

fn unasked(prism: &Prism, how: &str) -> f64 {
    metric_sum(
        prism,
        "prism_unknown_errors_unasked_total",
        &[&format!("how=\"{how}\"")],
    )
}

#[test]
fn an_unknown_error_another_provider_answers_is_blamed_on_the_first() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_reply(
        "eth_call",
        Reply::Error(r#"{"code":-32000,"message":"leveldb: closed"}"#.into()),
    );
    p2.set_reply("eth_call", Reply::Result(r#""0x2a""#.into()));
    let prism = start(&p1, &p2);
    let params = r#"[{"to":"0x00000000000000000000000000000000000000aa","data":"0x01"},"latest"]"#;
    // Every client gets p2's result; p1 is blamed until its breaker opens (5 failures by default).
    let mut answers = Vec::new();
    let opened = wait_until(Duration::from_secs(10), || {
        let id = answers.len() as u64 + 1;
        let a = ask(&prism, id, "eth_call", params);
        answers.push(a);
        prism.provider_state("p1") == "open" || answers.len() >= 60
    }) && prism.provider_state("p1") == "open";
    for (i, a) in answers.iter().enumerate() {
        let result = json::field(a, "result").unwrap_or_else(|| panic!("call {i}: {}", json::text(a)));
        assert_eq!(result, b"\"0x2a\"", "call {i}");
    }
    assert!(
        opened,
        "p1 answered {} eth_calls with an error p2 contradicted, yet its breaker is {:?}",
        p1.count("eth_call"),
        prism.provider_state("p1")
    );
    assert_eq!(prism.provider_state("p2"), "closed");
    assert!(failures_at(&prism, "p1") >= 5.0, "p1's failures were not counted");
    assert_eq!(failures_at(&prism, "p2"), 0.0);
    // One second opinion found the fault; the remembered verdict blamed the rest without asking again.
    assert_eq!(
        second_opinions(&prism, "provider"),
        1.0,
        "{}",
        prism.admin_get("/metrics").text()
    );
    assert!(unasked(&prism, "remembered_provider") >= 1.0);
}

#[test]
fn the_same_unknown_error_from_both_is_nobodys_and_a_stream_of_it_costs_one_second_opinion() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    // An error no rule knows (byte for byte, escapes and member order included).
    let error = r#"{"message":"simulation says no: 144 \u003c= 154","code":-39999,"data":{"hint":"\u00e9"}}"#;
    p1.set_reply(SIM, Reply::Error(error.into()));
    p2.set_reply(SIM, Reply::Error(error.into()));
    let prism = start(&p1, &p2);
    for id in 1..=50 {
        let a = ask(&prism, id, SIM, SIM_PARAMS);
        assert_eq!(
            json::field(&a, "error"),
            Some(error.as_bytes()),
            "call {id}: {}",
            json::text(&a)
        );
        assert_eq!(json::field(&a, "id"), Some(id.to_string().as_bytes()));
    }
    let asked = p1.count(SIM) + p2.count(SIM);
    assert!(
        (50..=52).contains(&asked),
        "50 identical bad calls cost {asked} upstream calls (p1 {}, p2 {})",
        p1.count(SIM),
        p2.count(SIM)
    );
    assert_eq!(
        second_opinions(&prism, "client"),
        1.0,
        "{}",
        prism.admin_get("/metrics").text()
    );
    assert_eq!(second_opinions(&prism, "provider"), 0.0);
    assert!(unasked(&prism, "remembered_client") >= 48.0);
    for p in ["p1", "p2"] {
        assert_eq!(failures_at(&prism, p), 0.0, "{p} was blamed for the client's call");
        assert_eq!(prism.provider_state(p), "closed");
    }
    // Both still serve.
    let a = ask(&prism, 99, "eth_getBalance", crate::support::BALANCE_PARAMS);
    assert!(json::field(&a, "result").is_some(), "{}", json::text(&a));
}

#[test]
fn an_unknown_error_on_a_write_is_the_users_and_is_sent_once() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let error = r#"{"code":-39998,"message":"pool says no"}"#;
    p1.set_reply("eth_sendRawTransaction", Reply::Error(error.into()));
    p2.set_reply("eth_sendRawTransaction", Reply::Error(error.into()));
    let prism = start(&p1, &p2);
    for id in 1..=6 {
        let a = ask(&prism, id, "eth_sendRawTransaction", r#"["0x02f8"]"#);
        assert_eq!(json::field(&a, "error"), Some(error.as_bytes()), "{}", json::text(&a));
    }
    assert_eq!(
        p1.count("eth_sendRawTransaction") + p2.count("eth_sendRawTransaction"),
        6,
        "a write was sent twice"
    );
    assert_eq!(
        second_opinions(&prism, "client") + second_opinions(&prism, "provider"),
        0.0
    );
    assert_eq!(failures_at(&prism, "p1") + failures_at(&prism, "p2"), 0.0);
}

#[test]
fn an_unknown_error_with_nobody_else_to_ask_is_nobodys() {
    let p1 = FakeProvider::start();
    let error = r#"{"code":-39997,"message":"odd"}"#;
    p1.set_reply(SIM, Reply::Error(error.into()));
    let prism = Prism::builder().provider(&p1).start();
    crate::support::wait_serving(&prism, &["p1"]);
    for id in 1..=12 {
        let r = prism.rpc(call(&id.to_string(), SIM, SIM_PARAMS).as_bytes());
        let a = json::whole(&r.body).unwrap().to_vec();
        assert_eq!(json::field(&a, "error"), Some(error.as_bytes()), "{}", r.describe());
    }
    assert_eq!(p1.count(SIM), 12);
    assert_eq!(prism.provider_state("p1"), "closed");
    assert_eq!(failures_at(&prism, "p1"), 0.0);
    assert_eq!(unasked(&prism, "alone"), 12.0);
}
