//! Solana's own error table through the real binary: two base-layer fakes behind one solana-magic network,
//! one of them answering an Agave error code. Each code must move the provider's health the way Solana
//! means it (the same codes mean other things on EVM nodes: `core/classify/solana.rs`).

use std::time::Duration;

use crate::support::solana_fake::{tx_str, Magic, SolanaFake};
use serde_json::{json, Value};

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
    crate::support::wait_serving(&m.prism, &["base-1", "base-2"]);
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
    slots_until_base1_answered_by(m, n, |m, method, params| m.call(method, params))
}

/// As `slots_until_base1_answered`, each call made by `call`.
fn slots_until_base1_answered_by(m: &Magic, n: usize, call: impl Fn(&Magic, &str, Value) -> Value) -> usize {
    let mut calls = 0;
    while m.base.count("getVersion") < n {
        assert!(
            calls < 200,
            "base-1 was asked {} times in {calls} calls",
            m.base.count("getVersion")
        );
        let v = call(m, "getVersion", json!([]));
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
    // Round robin: base-1 gets every other call while it is in rotation, whatever the latencies.
    let (m, _base2) = two_bases_round_robin();
    let rr = |m: &Magic, method: &str, params: Value| call_rr(m, method, params).0;
    let behind = json!({"code": -32005, "message": "Node is behind by 42 slots", "data": {"numSlotsBehind": 42}});
    m.base.fail_method("getVersion", Some(behind.clone()));
    slots_until_base1_answered_by(&m, 1, rr);
    // Lagging: not this provider's to answer now, not its failure (EVM's -32005 is a rate limit: parked).
    assert_eq!(attempts(&m, "base-1", "rerouted"), 1.0);
    assert_eq!(attempts(&m, "base-1", "throttled"), 0.0);
    // It told its slot: left out (not counted against its breaker) while it says so, its health check too.
    m.base.fail_method("getHealth", Some(behind));
    m.prism.wait_state("base-1", "open-drift", Duration::from_secs(10));
    m.base.fail_method("getHealth", None);
    m.prism.wait_state("base-1", "closed", Duration::from_secs(10));
    m.base.fail_method(
        "getVersion",
        Some(json!({"code": -32005, "message": "Node is unhealthy", "data": {"numSlotsBehind": null}})),
    );
    slots_until_base1_answered_by(&m, 2, rr);
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

/// The magic network with base-2 (probes every second) and a key that reads round robin ("rr-key").
fn two_bases_round_robin() -> (Magic, SolanaFake) {
    let base2 = SolanaFake::base();
    let url = base2.url();
    let m = Magic::start_with_network(
        false,
        |net, _| {
            format!(
                "{}\n  [[networks.providers]]\n  name = \"base-2\"\n  role = \"base\"\n  url = \"{url}\"\n\n\
                 [[keys]]\nname = \"rr\"\nkey = \"rr-key\"\nstrategy = \"round_robin\"\n",
                net.replacen(
                    "slot_stall_ms = 0\n",
                    "slot_stall_ms = 0\nprobe_interval_ms = 1000\n",
                    1
                )
            )
        },
        |b| b,
    );
    crate::support::wait_serving(&m.prism, &["base-1", "base-2"]);
    (m, base2)
}

/// One call with the round-robin key: the answer and the provider that gave it (`x-prism-provider`).
fn call_rr(m: &Magic, method: &str, params: Value) -> (Value, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let r = m.prism.rpc_with("/", body.as_bytes(), &["x-api-key: rr-key"]);
    assert_eq!(r.status, 200, "{method}: {}", r.describe());
    let by = r.header("x-prism-provider").unwrap_or_default().to_string();
    (r.json(), by)
}

/// Issue 36: after a stream of callers' own errors, the next 12 reads of a round-robin key all went to one
/// base provider while `/status` showed both closed. The errors were not the cause: a caller's mark (the
/// newest `context.slot` it saw) was compared with each provider's slot as last probed, so on a chain whose
/// slots advance, every provider but the one that answered last looked behind the caller.
#[test]
fn both_base_providers_share_a_round_robin_keys_reads_while_their_slots_advance_after_callers_errors() {
    let (m, base2) = two_bases_round_robin();
    // Two providers of one chain, making a slot every 100 ms in step; probes learn the cadence.
    SolanaFake::start_tickers_together(&[&m.base, &base2], Duration::from_millis(100));
    for name in ["base-1", "base-2"] {
        m.prism
            .wait_provider(name, Duration::from_secs(20), "cadence learned", |row| {
                row["slotMs"].as_f64().is_some_and(|ms| (80.0..=130.0).contains(&ms))
            });
    }
    let accounts: Vec<String> = (0..24u8)
        .map(|i| crate::support::solana_fake::b58(&[i + 1; 32]))
        .collect();
    for a in &accounts {
        m.base.set_lamports(a, 5);
        base2.set_lamports(a, 5);
    }
    // The callers' own errors, as both nodes would answer them.
    let errors = [
        (
            "getBalance",
            json!({"code": -32016, "message": "Minimum context slot has not been reached", "data": {"contextSlot": 7}}),
        ),
        (
            "getBlock",
            json!({"code": -32015, "message": "Transaction version (0) is not supported by the requesting client"}),
        ),
        (
            "sendTransaction",
            json!({"code": -32002, "message": "Transaction simulation failed: Blockhash not found", "data": {"err": "BlockhashNotFound", "logs": []}}),
        ),
        (
            "simulateTransaction",
            json!({"code": -32003, "message": "Transaction signature verification failure"}),
        ),
    ];
    for (method, e) in &errors {
        m.base.fail_method(method, Some(e.clone()));
        base2.fail_method(method, Some(e.clone()));
    }
    for (i, a) in accounts[..12].iter().enumerate() {
        let (v, _) = call_rr(&m, "getBalance", json!([a, {"minContextSlot": 999_999_999_999u64}]));
        assert!(v.get("error").is_some(), "{i}: {v}");
        let (v, _) = call_rr(&m, "getBlock", json!([312345678, {"encoding": "json"}]));
        assert_eq!(v["error"]["code"], -32015, "{v}");
        let (v, _) = call_rr(&m, "sendTransaction", json!([tx_str("read_alice", "base58")]));
        assert_eq!(v["error"]["code"], -32002, "{v}");
        let (v, _) = call_rr(&m, "simulateTransaction", json!([tx_str("read_alice", "base58")]));
        assert_eq!(v["error"]["code"], -32003, "{v}");
    }
    for (method, _) in &errors {
        m.base.fail_method(method, None);
        base2.fail_method(method, None);
    }
    assert_eq!(m.prism.provider_state("base-1"), "closed");
    assert_eq!(m.prism.provider_state("base-2"), "closed");
    // Reads paced at the chain's own speed: each sees a newer slot than the one before.
    let mut by = std::collections::HashMap::<String, usize>::new();
    let mut last = 0;
    for a in &accounts[12..] {
        std::thread::sleep(Duration::from_millis(100));
        let (v, who) = call_rr(&m, "getBalance", json!([a]));
        assert_eq!(v["result"]["value"], json!(5), "{v}");
        let slot = v["result"]["context"]["slot"].as_u64().expect("context.slot");
        assert!(slot >= last, "context.slot went back from {last} to {slot}");
        last = slot;
        *by.entry(who).or_default() += 1;
    }
    let (one, two) = (
        by.get("base-1").copied().unwrap_or(0),
        by.get("base-2").copied().unwrap_or(0),
    );
    eprintln!("a round-robin key's 12 reads answered by base-1 {one}, base-2 {two}");
    assert_eq!(one + two, 12, "each read answered once: {by:?}");
    assert!(
        one >= 4 && two >= 4,
        "a round-robin key's 12 reads must be shared by both closed base providers: base-1 {one}, base-2 {two}"
    );
}

/// Distinct undelegated accounts both base providers hold.
fn accounts(m: &Magic, base2: &SolanaFake, tag: u8, n: u8) -> Vec<String> {
    (0..n)
        .map(|i| {
            let a = crate::support::solana_fake::b58(&[
                tag, i, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
            ]);
            m.base.set_lamports(&a, 9);
            base2.set_lamports(&a, 9);
            a
        })
        .collect()
}

fn behind(n: u64) -> Value {
    json!({"code": -32005, "message": format!("Node is behind by {n} slots"), "data": {"numSlotsBehind": n}})
}

#[test]
fn a_provider_that_says_it_is_behind_gets_no_more_reads_until_a_probe_says_otherwise() {
    // Round robin, so base-2 would get every other read if it stayed in rotation.
    let (m, base2) = two_bases_round_robin();
    let keys = accounts(&m, &base2, 1, 30);
    // base-2 is 42 slots behind (fewer than max_slot_drift): it says so to every read.
    base2.fail_method("getBalance", Some(behind(42)));
    let started = std::time::Instant::now();
    for (i, k) in keys.iter().enumerate() {
        let (v, _) = call_rr(&m, "getBalance", json!([k]));
        assert_eq!(v["result"]["value"], json!(9), "read {i}: answered by base-1: {v}");
    }
    let wasted = base2.count("getBalance");
    eprintln!(
        "reads sent to the provider that said it was behind: {wasted} of {} (in {:?})",
        keys.len(),
        started.elapsed()
    );
    // The first read hears it; each probe (every second: its getHealth says "ok") brings it back for one more.
    let allowed = 2 + started.elapsed().as_secs() as usize;
    assert!(
        wasted <= allowed,
        "{wasted} of 30 reads went to a provider that said it was behind"
    );
    // It catches up: its next probe brings it back, and reads are shared again.
    base2.fail_method("getBalance", None);
    m.prism.wait_state("base-2", "closed", Duration::from_secs(10));
    let before = base2.count("getBalance");
    for k in accounts(&m, &base2, 2, 10) {
        let (v, _) = call_rr(&m, "getBalance", json!([k]));
        assert_eq!(v["result"]["value"], json!(9), "{v}");
    }
    assert!(base2.count("getBalance") > before, "back in rotation after catching up");
}

#[test]
fn a_provider_whose_health_says_it_is_behind_is_left_out_before_any_read() {
    let base2 = SolanaFake::base();
    let url = base2.url();
    let m = Magic::start_with_network(
        false,
        |net, _| {
            format!(
                "{}\n  [[networks.providers]]\n  name = \"base-2\"\n  role = \"base\"\n  url = \"{url}\"\n",
                net.replacen("slot_stall_ms = 0\n", "slot_stall_ms = 0\nprobe_interval_ms = 100\n", 1)
            )
        },
        |b| b,
    );
    crate::support::wait_serving(&m.prism, &["base-1", "base-2"]);
    // A real node that is behind says so to getHealth (Agave's health check) and to reads alike.
    base2.fail_method("getHealth", Some(behind(300)));
    base2.fail_method("getBalance", Some(behind(300)));
    m.prism.wait_state("base-2", "open-drift", Duration::from_secs(10));
    let keys = accounts(&m, &base2, 3, 20);
    for k in &keys {
        m.result("getBalance", json!([k]));
    }
    assert_eq!(
        base2.count("getBalance"),
        0,
        "left out across its probes while it says it is behind"
    );
    base2.fail_method("getHealth", None);
    base2.fail_method("getBalance", None);
    m.prism.wait_state("base-2", "closed", Duration::from_secs(10));
}
