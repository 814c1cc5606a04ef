//! Circuit breakers through a running Prism, counted at the fake providers: open after exactly
//! `failure_threshold` failures (across shards), one half-open probe after the cooldown that closes the
//! breaker or reopens it with a doubled cooldown; reverts never trip a breaker; a 429 storm parks but never
//! opens; a lagging provider trips on drift alone and comes back when it catches up.

use crate::support::{
    call, expect_http_result, http, wait_serving, Conn, FakeProvider, Mode, Prism, PrismBuilder, Reply,
};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(5);
const BALANCE: &str = crate::support::BALANCE_PARAMS;
const KEY: &str = "rr-key-0001";

/// Two providers behind a round-robin key (so p1 keeps getting its turn until its breaker opens), quick
/// retries so every read still succeeds on p2.
fn builder(p1: &FakeProvider, p2: &FakeProvider, breaker: &str, probe_ms: u64) -> PrismBuilder {
    Prism::builder()
        .providers(&[p1, p2])
        .network_option("probe_interval_ms", probe_ms)
        .extra_toml(&format!(
            "[policy.retry]\nmax_attempts = 3\nbase_delay_ms = 1\nmax_delay_ms = 5\n\n[policy.breaker]\n{breaker}\n\n\
             [[keys]]\nname = \"rr\"\nkey = \"{KEY}\"\nstrategy = \"round_robin\"\n"
        ))
}

/// One read with the key, on a new connection (new connections spread over the shards).
fn read(prism: &Prism, id: u64) -> Vec<u8> {
    let r = prism.rpc_with(
        "/",
        call(&id.to_string(), "eth_getBalance", BALANCE).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    );
    expect_http_result(&r, &id.to_string())
}

/// Sends reads until p1 has seen `n` client reads (each fails there and succeeds on p2); returns when the
/// n-th arrived at p1.
fn reads_until_p1_saw(prism: &Prism, p1: &FakeProvider, n: usize) -> Instant {
    for i in 0..200 {
        read(prism, i);
        if p1.count("eth_getBalance") >= n {
            return p1.calls_to("eth_getBalance")[n - 1].at;
        }
    }
    panic!("p1 saw only {} reads out of 200", p1.count("eth_getBalance"));
}

/// Arrival times of `eth_blockNumber` calls (probes) at `fake` after `after`.
fn probes_after(fake: &FakeProvider, after: Instant) -> Vec<Instant> {
    probe_times(&fake.calls(), after)
}

fn probe_times(calls: &[crate::support::Call], after: Instant) -> Vec<Instant> {
    calls
        .iter()
        .filter(|c| c.method == "eth_blockNumber" && c.at > after)
        .map(|c| c.at)
        .collect()
}

#[test]
fn breaker_opens_after_exactly_the_threshold_across_shards() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("eth_getBalance", Mode::Status(500));
    let prism = builder(
        &p1,
        &p2,
        "failure_threshold = 3\nwindow_ms = 60000\ncooldown_ms = 60000",
        100,
    )
    .shards(2)
    .start();
    wait_serving(&prism, &["p1", "p2"]);
    for i in 0..60 {
        read(&prism, i);
    }
    assert_eq!(
        p1.count("eth_getBalance"),
        3,
        "p1 must get exactly failure_threshold (3) client calls, then none while open"
    );
    assert_eq!(p2.count("eth_getBalance"), 60, "every read was answered by p2");
    let row = prism.wait_provider("p1", WAIT, "3 failures reported", |r| r["failures"] == 3);
    assert_eq!(row["state"], "open", "{row}");
    assert_eq!(prism.provider_state("p2"), "closed");
}

#[test]
fn half_open_sends_exactly_one_probe_then_closes_when_it_succeeds() {
    const COOLDOWN_MS: u64 = 600;
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("eth_getBalance", Mode::Status(500));
    // Probes to p1 take a while, so the half-open state can be watched.
    p1.set_delay("eth_blockNumber", Duration::from_millis(300));
    let prism = builder(
        &p1,
        &p2,
        &format!("failure_threshold = 3\nwindow_ms = 60000\ncooldown_ms = {COOLDOWN_MS}"),
        50,
    )
    .start();
    wait_serving(&prism, &["p1", "p2"]);
    // Until p1's first (slow) probe returns, its head is unknown and the key's reads, whose mark p2's
    // answers raised, rightly go to p2 alone: wait for p1's head before counting its reads.
    prism.wait_provider("p1", WAIT, "a head", |r| r["head"].as_u64().is_some_and(|h| h > 0));
    let opened = reads_until_p1_saw(&prism, &p1, 3);
    p1.clear_method_mode("eth_getBalance");
    let row = prism.wait_provider("p1", WAIT, "open or half-open", |r| r["state"] != "closed");
    assert_ne!(row["state"], "closed");
    let reads_at_open = p1.count("eth_getBalance");

    let row = prism.wait_state("p1", "half-open", Duration::from_millis(COOLDOWN_MS + 2000));
    // Half-open means the probe's lease is taken; the fake records the probe once its bytes arrive, a
    // moment later (CI once saw the row first). Wait for that first one only, then count.
    let since = opened + Duration::from_millis(COOLDOWN_MS / 2);
    crate::support::wait_until(Duration::from_secs(2), || !probes_after(&p1, since).is_empty());
    let probes = probes_after(&p1, since);
    assert_eq!(probes.len(), 1, "exactly one half-open probe; row {row}");
    assert!(
        probes[0] >= opened + Duration::from_millis(COOLDOWN_MS - 50),
        "the probe came {:?} after opening, before the {COOLDOWN_MS} ms cooldown",
        probes[0] - opened
    );
    // Half-open: clients are not sent there while the probe is out.
    for i in 1000..1010 {
        read(&prism, i);
    }
    if prism.provider_state("p1") == "half-open" {
        assert_eq!(
            p1.count("eth_getBalance"),
            reads_at_open,
            "client calls reached a half-open provider"
        );
    }
    let row = prism.wait_state("p1", "closed", WAIT);
    assert_eq!(row["cooldownMs"], COOLDOWN_MS, "closing resets the cooldown: {row}");
    // Closed again: p1 takes its turn with clients.
    for i in 2000..2010 {
        read(&prism, i);
    }
    assert!(
        p1.count("eth_getBalance") >= reads_at_open + 3,
        "p1 gets client calls again after closing"
    );
}

/// The half-open probe goes when the cooldown ends, not at the next probe tick: with probes a minute apart
/// and a 600 ms cooldown, a provider that is back closes within about a second of the cooldown.
#[test]
fn the_half_open_probe_goes_when_the_cooldown_ends_not_at_the_next_tick() {
    const COOLDOWN_MS: u64 = 600;
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let prism = builder(
        &p1,
        &p2,
        &format!("failure_threshold = 3\nwindow_ms = 60000\ncooldown_ms = {COOLDOWN_MS}"),
        60_000,
    )
    .start();
    wait_serving(&prism, &["p1", "p2"]);
    p1.set_method_mode("eth_getBalance", Mode::Status(500));
    let opened = reads_until_p1_saw(&prism, &p1, 3);
    p1.clear_method_mode("eth_getBalance");
    prism.wait_provider("p1", WAIT, "open", |r| r["state"] != "closed");
    let row = prism.wait_state("p1", "closed", Duration::from_millis(COOLDOWN_MS + 1500));
    let closed_after = opened.elapsed();
    assert!(
        closed_after < Duration::from_millis(COOLDOWN_MS + 1500),
        "closed {closed_after:?} after opening: {row}"
    );
    let probes = probes_after(&p1, opened);
    assert_eq!(probes.len(), 1, "one half-open probe, no tick in between");
    assert!(
        probes[0] >= opened + Duration::from_millis(COOLDOWN_MS - 50),
        "not before the cooldown"
    );
}

#[test]
fn failed_half_open_probe_reopens_with_doubled_cooldown() {
    const COOLDOWN_MS: u64 = 800;
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("eth_getBalance", Mode::Status(500));
    let prism = builder(
        &p1,
        &p2,
        &format!("failure_threshold = 3\nwindow_ms = 60000\ncooldown_ms = {COOLDOWN_MS}\nmax_cooldown_ms = 60000"),
        50,
    )
    .start();
    wait_serving(&prism, &["p1", "p2"]);
    let opened = reads_until_p1_saw(&prism, &p1, 3);
    // From now on probes fail too.
    p1.set_method_mode("eth_blockNumber", Mode::Status(500));
    let row = prism.wait_state("p1", "open", WAIT);
    assert_eq!(row["cooldownMs"], COOLDOWN_MS, "{row}");

    // First half-open probe, after the cooldown; it fails: open again, cooldown doubled.
    let since = opened + Duration::from_millis(COOLDOWN_MS / 2);
    assert!(
        p1.wait_until(Duration::from_millis(COOLDOWN_MS + 3000), |v| !probe_times(
            v.calls, since
        )
        .is_empty()),
        "no half-open probe after the cooldown"
    );
    let row = prism.wait_provider("p1", WAIT, "cooldownMs doubled", |r| r["cooldownMs"] == 2 * COOLDOWN_MS);
    assert_eq!(row["state"], "open", "{row}");
    // The next probe only after the doubled cooldown: exactly one probe per half-open window.
    assert!(
        p1.wait_until(Duration::from_millis(2 * COOLDOWN_MS + 3000), |v| {
            probe_times(v.calls, since).len() >= 2
        }),
        "no second half-open probe"
    );
    let probes = probes_after(&p1, since);
    let gap = probes[1] - probes[0];
    assert!(
        gap >= Duration::from_millis(2 * COOLDOWN_MS - 100),
        "second probe {gap:?} after the first; the reopened cooldown is {} ms",
        2 * COOLDOWN_MS
    );
    assert!(
        gap < Duration::from_millis(2 * COOLDOWN_MS + 1500),
        "second probe came {gap:?} after the first"
    );
    prism.wait_provider("p1", WAIT, "cooldownMs doubled again", |r| {
        r["cooldownMs"] == 4 * COOLDOWN_MS
    });
    assert_eq!(
        p1.count("eth_getBalance"),
        3,
        "no client call reached p1 while it was open"
    );
}

#[test]
fn reverts_are_returned_byte_for_byte_and_never_trip_a_breaker() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let reverts = [
        r#"{ "code" : 3, "message":"execution reverted: Ownable: caller is not the owner","data" : "0x08c379a00000000000000000000000000000000000000000000000000000000000000020"}"#,
        r#"{"code":-32000,"message":"execution reverted"}"#,
    ];
    let prism = builder(&p1, &p2, "failure_threshold = 3\nwindow_ms = 60000", 100).start();
    wait_serving(&prism, &["p1", "p2"]);
    let mut sent = 0;
    for (k, revert) in reverts.iter().enumerate() {
        p1.set_reply("eth_call", Reply::Error(revert.to_string()));
        p2.set_reply("eth_call", Reply::Error(revert.to_string()));
        for i in 0..20 {
            let id = format!("\"r{k}-{i}\"");
            let r = prism.rpc_with(
                "/",
                call(
                    &id,
                    "eth_call",
                    r#"[{"to":"0x00000000000000000000000000000000000000aa","data":"0x"},"latest"]"#,
                )
                .as_bytes(),
                &[&format!("x-api-key: {KEY}")],
            );
            assert_eq!(r.status, 200, "{}", r.describe());
            let expected = format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{revert}}}"#);
            assert_eq!(r.text(), expected, "the revert must come back byte for byte");
            sent += 1;
        }
    }
    assert_eq!(
        p1.count("eth_call") + p2.count("eth_call"),
        sent,
        "a revert is an answer: never retried elsewhere"
    );
    for name in ["p1", "p2"] {
        let row = prism.wait_provider(name, WAIT, "calls reported", |r| r["calls"].as_u64() >= Some(10));
        assert_eq!(row["state"], "closed", "{row}");
        assert_eq!(row["failures"], 0, "reverts counted as failures: {row}");
    }
}

/// p1 answers 429 to every client read; reads keep succeeding on p2; p1 is parked, never opened, and no
/// failure is counted.
#[test]
fn client_429s_park_without_counting() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("eth_getBalance", Mode::Status(429));
    let prism = builder(&p1, &p2, "failure_threshold = 3\nwindow_ms = 60000", 100).start();
    wait_serving(&prism, &["p1", "p2"]);
    let mut states = Vec::new();
    let until = Instant::now() + Duration::from_millis(2500);
    let mut i = 0;
    while Instant::now() < until {
        read(&prism, i);
        i += 1;
        states.push(prism.provider_state("p1"));
    }
    assert!(
        p1.count("eth_getBalance") >= 3,
        "p1 saw {} throttled reads: not a storm",
        p1.count("eth_getBalance")
    );
    assert!(
        !states.iter().any(|s| s == "open"),
        "a 429 opened the breaker: {states:?}"
    );
    let row = prism.wait_provider("p1", WAIT, "throttles reported", |r| r["throttled"].as_u64() >= Some(3));
    assert_eq!(row["failures"], 0, "429s counted as failures: {row}");
    assert_ne!(row["state"], "open", "{row}");
}

/// A real storm: the provider answers 429 to everything, Prism's own health probes included. Parked, yes;
/// never opened, and not a single failure counted.
#[test]
fn a_429_storm_parks_but_never_opens() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let prism = builder(&p1, &p2, "failure_threshold = 3\nwindow_ms = 60000", 100).start();
    wait_serving(&prism, &["p1", "p2"]);
    p1.set_mode(Mode::Status(429));
    let mut states = Vec::new();
    let until = Instant::now() + Duration::from_millis(2000);
    let mut i = 0;
    while Instant::now() < until {
        read(&prism, i);
        i += 1;
        states.push(prism.provider_state("p1"));
    }
    let probes_429 = p1.count("eth_blockNumber");
    assert!(probes_429 >= 3, "only {probes_429} probes met the storm");
    let row = prism.provider_status("p1");
    assert!(
        !states.iter().any(|s| s == "open") && row["state"] != "open",
        "a 429 storm opened p1's breaker (states seen: {:?}); row {row}",
        states.iter().collect::<std::collections::BTreeSet<_>>()
    );
    assert_eq!(row["failures"], 0, "429s counted as failures: {row}");
}

#[test]
fn lagging_provider_trips_on_drift_alone_and_recovers_when_it_catches_up() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_head(1000);
    p2.set_head(1000);
    let prism = builder(&p1, &p2, "failure_threshold = 3", 50)
        .network_option("max_drift_blocks", 10)
        .start();
    wait_serving(&prism, &["p1", "p2"]);
    // Within the allowed drift: still serving.
    p1.set_mode(Mode::LagHead(5));
    prism.wait_provider("p1", WAIT, "lag 5 seen", |r| r["lag"] == 5);
    assert_eq!(prism.provider_state("p1"), "closed");
    // Beyond it: excluded on drift alone.
    p1.set_mode(Mode::LagHead(25));
    let row = prism.wait_state("p1", "open-drift", WAIT);
    assert_eq!(row["lag"], 25, "{row}");
    let before = p1.count("eth_getBalance");
    for i in 0..20 {
        read(&prism, i);
    }
    assert_eq!(
        p1.count("eth_getBalance"),
        before,
        "a drifted provider got client calls"
    );
    // The pool moves on; p1 catches up.
    p2.set_head(1100);
    p1.set_head(1100);
    p1.set_mode(Mode::Normal);
    let row = prism.wait_state("p1", "closed", WAIT);
    assert_eq!(row["failures"], 0, "drift is not a failure: {row}");
    for i in 100..110 {
        read(&prism, i);
    }
    assert!(p1.count("eth_getBalance") > before, "p1 serves again after catching up");
}

#[test]
fn breaker_state_is_shared_by_keep_alive_connections_on_every_shard() {
    // Keep-alive connections pinned to their shards: once p1 opens, no shard sends it client calls.
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("eth_getBalance", Mode::Status(500));
    let prism = builder(
        &p1,
        &p2,
        "failure_threshold = 4\nwindow_ms = 60000\ncooldown_ms = 60000",
        100,
    )
    .shards(2)
    .start();
    wait_serving(&prism, &["p1", "p2"]);
    let mut conns: Vec<Conn> = (0..6).map(|_| prism.conn()).collect();
    for round in 0..15u64 {
        for (k, c) in conns.iter_mut().enumerate() {
            let id = round * 10 + k as u64;
            let r = c.request(&http::post_with(
                "/",
                call(&id.to_string(), "eth_getBalance", BALANCE).as_bytes(),
                &[&format!("x-api-key: {KEY}")],
            ));
            expect_http_result(&r, &id.to_string());
        }
    }
    assert_eq!(
        p1.count("eth_getBalance"),
        4,
        "exactly the threshold, whichever shard saw them"
    );
}
