//! Slot awareness through the real binary (`core/slots.rs`): base-layer drift, a frozen ER, `minContextSlot`
//! and a caller's `context.slot` that never goes backwards, with the Solana fakes' clocks set by each test.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::solana_fake::{pk, Magic, SolanaFake};

const WAIT: Duration = Duration::from_secs(10);

/// The magic network with a second base-layer provider "base-2", probes every 100 ms and `extra` network
/// keys (the fixture turns the stall check off; a test turns it back on here).
fn two_bases(extra: &str) -> (Magic, SolanaFake) {
    let base2 = SolanaFake::base();
    let url = base2.url();
    let extra = extra.to_string();
    let m = Magic::start_with_network(
        false,
        move |net, _| {
            let net = net.replacen(
                "slot_stall_ms = 0\n",
                &format!("slot_stall_ms = 0\nprobe_interval_ms = 100\n{extra}"),
                1,
            );
            format!("{net}\n  [[networks.providers]]\n  name = \"base-2\"\n  role = \"base\"\n  url = \"{url}\"\n")
        },
        |b| b,
    );
    support::wait_serving(&m.prism, &["base-1", "base-2"]);
    (m, base2)
}

/// An undelegated account both base providers hold.
fn account(m: &Magic, base2: &SolanaFake, name: &str) -> String {
    let key = support::solana_fake::b58(
        name.as_bytes()
            .iter()
            .cycle()
            .take(32)
            .copied()
            .collect::<Vec<_>>()
            .as_slice(),
    );
    m.base.set_lamports(&key, 1_000);
    base2.set_lamports(&key, 1_000);
    key
}

fn balance(m: &Magic, key: &str, config: Value) -> Value {
    m.result("getBalance", json!([key, config]))
}

#[test]
fn a_base_provider_500_slots_behind_is_left_out_until_it_catches_up() {
    let (m, base2) = two_bases("");
    m.base.set_slot(100_000);
    base2.set_slot(99_500);
    m.prism.wait_state("base-2", "open-drift", WAIT);
    let key = account(&m, &base2, "alice");
    let before = base2.count("getBalance");
    for _ in 0..10 {
        assert_eq!(balance(&m, &key, json!({}))["context"]["slot"], json!(100_000));
    }
    assert_eq!(
        base2.count("getBalance"),
        before,
        "a provider 500 slots behind is not asked"
    );
    base2.set_slot(100_000);
    m.prism.wait_state("base-2", "closed", WAIT);
}

#[test]
fn min_context_slot_goes_to_a_provider_that_has_reached_it() {
    let (m, base2) = two_bases("");
    m.base.set_slot(10_000);
    base2.set_slot(10_100);
    // Both within max_slot_drift (150): both usable; wait until the probes have seen both slots.
    m.prism
        .wait_provider("base-2", WAIT, "slot seen", |row| row["head"] == json!(10_100));
    m.prism
        .wait_provider("base-1", WAIT, "slot seen", |row| row["head"] == json!(10_000));
    let key = account(&m, &base2, "bob");
    let before = m.base.count("getBalance");
    for _ in 0..10 {
        let v = balance(&m, &key, json!({"minContextSlot": 10_050}));
        assert_eq!(v["context"]["slot"], json!(10_100), "{v}");
    }
    assert_eq!(
        m.base.count("getBalance"),
        before,
        "base-1 (10000) has not reached 10050"
    );
}

#[test]
fn a_callers_context_slot_never_goes_backwards_while_two_base_providers_disagree() {
    let (m, base2) = two_bases("");
    m.base.set_slot(20_060);
    base2.set_slot(20_000);
    m.prism
        .wait_provider("base-2", WAIT, "slot seen", |row| row["head"] == json!(20_000));
    let key = account(&m, &base2, "carol");
    let mut last = 0;
    for i in 0..100 {
        let slot = balance(&m, &key, json!({"commitment": "confirmed"}))["context"]["slot"]
            .as_u64()
            .unwrap_or_else(|| panic!("call {i}: no context.slot"));
        assert!(slot >= last, "call {i}: context.slot went back from {last} to {slot}");
        last = slot;
    }
    // Another commitment level is another view: a finalized read may be behind a confirmed one.
    let finalized = balance(&m, &key, json!({"commitment": "finalized"}));
    assert!(finalized["context"]["slot"].is_u64());
}

#[test]
fn an_er_whose_slot_freezes_is_down_and_its_accounts_get_an_error_naming_it() {
    let m = Magic::start_with_network(
        false,
        |net, _| {
            net.replacen(
                "slot_stall_ms = 0\n",
                "slot_stall_ms = 800\nprobe_interval_ms = 100\n",
                1,
            )
        },
        |b| b,
    );
    m.base.start_ticker(Duration::from_millis(50));
    m.er1.start_ticker(Duration::from_millis(50));
    support::wait_serving(&m.prism, &["base-1", "er-1"]);
    let alice = support::solana_fake::b58(&[7u8; 32]);
    m.base.set_lamports(&alice, 1);
    m.er1
        .set_account(&alice, support::solana_fake::Account::new(42, &pk("program"), &[]));
    m.base.delegate(&alice, &pk("er1_identity"));
    let v = m.result("getBalance", json!([alice]));
    assert_eq!(v["value"], json!(42), "served by er-1 while its slot advances: {v}");
    m.er1.freeze(true);
    let started = std::time::Instant::now();
    m.prism.wait_state("er-1", "stalled", WAIT);
    let took = started.elapsed();
    let err = m.error("getBalance", json!([alice]));
    let message = err["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("er-1") && message.contains("down"),
        "an error naming the ER: {err}"
    );
    assert_eq!(
        m.base.count_for("getBalance", &alice),
        0,
        "never a silent answer from the base layer"
    );
    eprintln!("er-1 marked stalled {took:?} after its slot froze (slot_stall_ms 800, probes every 100 ms)");
    m.er1.freeze(false);
    m.prism.wait_state("er-1", "closed", WAIT);
    assert_eq!(m.result("getBalance", json!([alice]))["value"], json!(42));
}
