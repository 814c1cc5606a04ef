//! Solana's own error table through the real binary: two base-layer fakes behind one solana-magic network,
//! one of them answering an Agave error code. Each code must move the provider's health the way Solana
//! means it (the same codes mean other things on EVM nodes: `core/classify/solana.rs`).

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::solana_fake::{Magic, SolanaFake};

/// The magic network with a second base-layer provider, "base-2".
fn two_bases() -> (Magic, SolanaFake) {
    let base2 = SolanaFake::base();
    let url = base2.url();
    let m = Magic::start_with_network(
        false,
        |net, _| {
            format!("{net}\n  [[networks.providers]]\n  name = \"base-2\"\n  role = \"base\"\n  url = \"{url}\"\n")
        },
        |b| b,
    );
    support::wait_serving(&m.prism, &["base-1", "base-2"]);
    (m, base2)
}

/// `prism_upstream_attempts_total` of one provider and result.
fn attempts(m: &Magic, provider: &str, result: &str) -> f64 {
    let r = m.prism.admin_get("/metrics");
    let (who, how) = (format!("provider=\"{provider}\""), format!("result=\"{result}\""));
    r.text()
        .lines()
        .filter(|l| l.starts_with("prism_upstream_attempts_total{") && l.contains(&who) && l.contains(&how))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn err(code: i64, message: &str) -> Value {
    json!({"code": code, "message": message})
}

/// Sends `getVersion` until base-1 has answered it `n` times; every call must get an answer (from base-2 when
/// base-1 fails). Returns the calls made.
fn slots_until_base1_answered(m: &Magic, n: usize) -> usize {
    let mut calls = 0;
    while m.base.count("getVersion") < n {
        assert!(
            calls < 200,
            "base-1 was asked {} times in {calls} calls",
            m.base.count("getVersion")
        );
        let v = m.call("getVersion", json!([]));
        assert!(
            v["result"].is_object(),
            "call {calls}: an answer from the other base provider, got {v}"
        );
        calls += 1;
    }
    calls
}

#[test]
fn minimum_context_slot_not_reached_asks_another_provider_and_parks_nobody() {
    let (m, base2) = two_bases();
    m.base.fail_method(
        "getVersion",
        Some(
            json!({"code": -32016, "message": "Minimum context slot has not been reached", "data": {"contextSlot": 7}}),
        ),
    );
    slots_until_base1_answered(&m, 6);
    assert!(base2.count("getVersion") > 0);
    assert_eq!(
        attempts(&m, "base-1", "rerouted"),
        6.0,
        "not this provider's to answer: rerouted"
    );
    // On an EVM network this code is a rate limit (parked); on Solana the provider is only behind this call.
    let state = m.prism.provider_state("base-1");
    assert_eq!(state, "closed", "-32016 is neither a failure nor a throttle on Solana");
}

#[test]
fn a_node_behind_asks_another_and_an_unhealthy_node_is_counted() {
    let (m, _base2) = two_bases();
    m.base.fail_method(
        "getVersion",
        Some(json!({"code": -32005, "message": "Node is behind by 42 slots", "data": {"numSlotsBehind": 42}})),
    );
    slots_until_base1_answered(&m, 1);
    // Lagging: not this provider's to answer now, not its failure (EVM's -32005 is a rate limit: parked).
    assert_eq!(attempts(&m, "base-1", "rerouted"), 1.0);
    assert_eq!(attempts(&m, "base-1", "throttled"), 0.0);
    assert_eq!(m.prism.provider_state("base-1"), "closed");
    m.base.fail_method(
        "getVersion",
        Some(json!({"code": -32005, "message": "Node is unhealthy", "data": {"numSlotsBehind": null}})),
    );
    slots_until_base1_answered(&m, 2);
    assert_eq!(
        attempts(&m, "base-1", "failed"),
        1.0,
        "an unhealthy node's answer counts against it"
    );
    assert_eq!(attempts(&m, "base-1", "throttled"), 0.0);
}

#[test]
fn a_transaction_version_error_is_the_callers_and_asked_of_one_provider_only() {
    let (m, base2) = two_bases();
    let message = "Transaction version (0) is not supported by the requesting client. Please try the request \
                   again with the following configuration parameter: \"maxSupportedTransactionVersion\": 0";
    m.base.fail_method("getBlock", Some(err(-32015, message)));
    base2.fail_method("getBlock", Some(err(-32015, message)));
    for n in 1..=4 {
        let e = m.error("getBlock", json!([312345678, {"encoding": "json"}]));
        assert_eq!(e["code"], -32015, "the node's own error, as it came: {e}");
        assert_eq!(e["message"], message);
        // The shared table reads "not supported" as an unsupported method and would ask the other one too.
        assert_eq!(
            m.base.count("getBlock") + base2.count("getBlock"),
            n,
            "call {n}: one provider asked"
        );
    }
    assert_eq!(m.prism.provider_state("base-1"), "closed");
    assert_eq!(m.prism.provider_state("base-2"), "closed");
}

#[test]
fn a_throttle_phrase_beats_agaves_slot_skipped_code() {
    let (m, base2) = two_bases();
    m.base.fail_method(
        "getVersion",
        Some(err(
            -32007,
            "15/second request limit reached - reduce calls per second or upgrade your account",
        )),
    );
    slots_until_base1_answered(&m, 1);
    assert!(base2.count("getVersion") > 0);
    m.prism
        .wait_provider("base-1", Duration::from_secs(5), "parked", |row| {
            row["state"] == "parked"
        });
}
