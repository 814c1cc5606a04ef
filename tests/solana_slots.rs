//! Slot awareness through the real binary (`core/slots.rs`): base-layer drift, a frozen ER, `minContextSlot`
//! and a caller's `context.slot` that never goes backwards, with the Solana fakes' clocks set by each test.

use std::time::Duration;

use crate::support::solana_fake::{pk, Magic, SolanaFake};
use serde_json::{json, Value};

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
    crate::support::wait_serving(&m.prism, &["base-1", "base-2"]);
    (m, base2)
}

/// An undelegated account both base providers hold.
fn account(m: &Magic, base2: &SolanaFake, name: &str) -> String {
    let key = crate::support::solana_fake::b58(
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
    crate::support::wait_serving(&m.prism, &["base-1", "er-1"]);
    let alice = crate::support::solana_fake::b58(&[7u8; 32]);
    m.base.set_lamports(&alice, 1);
    m.er1.set_account(
        &alice,
        crate::support::solana_fake::Account::new(42, &pk("program"), &[]),
    );
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

/// Default settings (probes every 2 s, `slot_stall_ms` 10 000, `slot_stall_slots` 20): a 50 ms ER and a
/// 400 ms base layer whose clocks stop (while `getHealth` still says "ok") are each marked down within
/// about 20 of their own slot times plus one probe interval. Prints both times (issue 36: before the cadence
/// rule both took the fixed 10 s and more).
#[test]
fn with_default_settings_a_frozen_er_and_base_are_down_within_twenty_of_their_own_slots() {
    let m = Magic::start_with_network(false, |net, _| net.replacen("slot_stall_ms = 0\n", "", 1), |b| b);
    m.base.start_ticker(Duration::from_millis(400));
    m.er1.start_ticker(Duration::from_millis(50));
    crate::support::wait_serving(&m.prism, &["base-1", "er-1"]);
    // A few probes to learn each cadence (two advancing probe intervals at least).
    let learned = |name: &str, lo: f64, hi: f64| {
        m.prism
            .wait_provider(name, Duration::from_secs(20), "cadence learned", |row| {
                row["slotMs"].as_f64().is_some_and(|ms| (lo..=hi).contains(&ms)) && row["state"] == "closed"
            })
    };
    let er_row = learned("er-1", 40.0, 65.0);
    let base_row = learned("base-1", 350.0, 460.0);
    eprintln!(
        "cadence learned: er-1 {} ms per slot (stalled after {} ms), base-1 {} ms per slot (after {} ms)",
        er_row["slotMs"], er_row["stallAfterMs"], base_row["slotMs"], base_row["stallAfterMs"]
    );
    let alice = crate::support::solana_fake::b58(&[9u8; 32]);
    m.er1.set_account(
        &alice,
        crate::support::solana_fake::Account::new(42, &pk("program"), &[]),
    );
    m.base.delegate(&alice, &pk("er1_identity"));
    assert_eq!(m.result("getBalance", json!([alice]))["value"], json!(42));
    m.er1.freeze(true);
    m.base.freeze(true);
    let frozen = std::time::Instant::now();
    let mut er_took = None;
    let mut base_took = None;
    while (er_took.is_none() || base_took.is_none()) && frozen.elapsed() < Duration::from_secs(30) {
        if er_took.is_none() && m.prism.provider_state("er-1") == "stalled" {
            er_took = Some(frozen.elapsed());
        }
        if base_took.is_none() && m.prism.provider_state("base-1") == "stalled" {
            base_took = Some(frozen.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "frozen clocks marked down: er-1 (50 ms slots) after {er_took:?}, base-1 (400 ms slots) after {base_took:?}"
    );
    let er_took = er_took.expect("er-1 never marked down");
    let base_took = base_took.expect("base-1 never marked down");
    // 20 × 50 ms + one 2 s probe interval = 3 s; 2 s of headroom for a loaded machine.
    assert!(er_took < Duration::from_secs(5), "er-1 took {er_took:?}");
    // 20 × 400 ms + 2 s = 10 s, within slot_stall_ms (10 s) + the probe interval.
    assert!(base_took < Duration::from_secs(13), "base-1 took {base_took:?}");
    assert!(
        er_took < base_took,
        "each from its own cadence: er-1 {er_took:?}, base-1 {base_took:?}"
    );
    let err = m.error("getBalance", json!([alice]));
    let message = err["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("er-1") && message.contains("down"),
        "an error naming the ER: {err}"
    );
}
