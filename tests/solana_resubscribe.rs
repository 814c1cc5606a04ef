//! After the base-layer WebSocket drops, the delegation-record subscriptions come back at
//! `limits.record_resubscribe_per_sec`, not in one burst, and an account touched meanwhile is read and
//! followed at once.
//!
//! `PRISM_RESUBSCRIBE_N=10000 cargo test --test suite solana_resubscribe:: -- --nocapture` prints the figure for
//! another number of tracked accounts (default 1000).

use std::time::{Duration, Instant};

use crate::support::solana_fake::{b58, pk, Account, Magic};
use crate::support::wait_until;
use serde_json::json;

const RATE: usize = 500;

#[test]
fn record_subscriptions_come_back_at_the_configured_rate_and_touched_accounts_first() {
    let n: usize = std::env::var("PRISM_RESUBSCRIBE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let m = Magic::start_with(false, |b| b.limit("record_resubscribe_per_sec", RATE));
    let keys: Vec<String> = (0..n as u32)
        .map(|i| {
            let mut b = [0x33u8; 32];
            b[..4].copy_from_slice(&i.to_le_bytes());
            b58(&b)
        })
        .collect();
    for chunk in keys.chunks(100) {
        m.result("getMultipleAccounts", json!([chunk, {"encoding": "base64"}]));
    }
    let subscribed = || m.base.count("accountSubscribe");
    assert!(
        wait_until(Duration::from_secs(60), || subscribed() >= n),
        "only {} of {n} records subscribed",
        subscribed()
    );
    let before = subscribed();
    // The socket drops and reconnects are refused for a while: every account is in limbo.
    m.base.set_ws_refuse(true);
    m.base.drop_websockets();
    assert!(
        wait_until(Duration::from_secs(10), || m
            .prism
            .metric("prism_solana_base_link_drops_total")
            >= 1.0),
        "the link drop was not seen"
    );
    let refused_at = m.base.ws_accepted();
    m.base.set_ws_refuse(false);
    let back = Instant::now();
    // Right after the link is back, one of the tracked accounts is delegated: a read of it is followed to
    // the ER (its record is read before it is trusted, and its subscription goes first).
    let touched = &keys[n / 2];
    m.er1.set_account(touched, Account::new(4_242, &pk("program"), &[]));
    m.base.delegate(touched, &pk("er1_identity"));
    assert!(
        wait_until(Duration::from_secs(10), || {
            m.call("getBalance", json!([touched]))["result"]["value"] == json!(4_242)
        }),
        "the delegation made after the reconnect was not followed"
    );
    assert!(
        wait_until(Duration::from_secs(60 + n as u64 / 100), || subscribed() >= before + n),
        "only {} of {n} records resubscribed",
        subscribed() - before
    );
    let took = back.elapsed();
    assert!(m.base.ws_accepted() > refused_at, "a new base socket was accepted");
    eprintln!(
        "{n} record subscriptions restored in {:.2} s at record_resubscribe_per_sec = {RATE} (floor {:.2} s)",
        took.as_secs_f64(),
        (n as f64 / RATE as f64) - 0.1
    );
    // The rate is honoured: n records at RATE a second take at least n / RATE (less one batch) seconds.
    let floor = Duration::from_secs_f64((n as f64 / RATE as f64 - 0.2).max(0.0));
    assert!(took >= floor, "{n} resubscribed in {took:?}: faster than {RATE}/s");
}
