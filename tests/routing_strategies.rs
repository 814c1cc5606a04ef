//! Per-key routing strategies through a running Prism, counted at the fake providers: round robin spreads
//! evenly, random spreads roughly evenly, weighted follows the providers' `weight`.

use crate::support::{call, expect_http_result, http, wait_serving, Conn, FakeProvider, Prism};

const CALLS: usize = 300;

/// Three providers (weights from `weights`), one key using `strategy`; sends `CALLS` distinct reads on one
/// keep-alive connection and returns how many each provider got.
fn spread(strategy: &str, weights: [u32; 3]) -> [usize; 3] {
    let fakes = [FakeProvider::start(), FakeProvider::start(), FakeProvider::start()];
    let mut b = Prism::builder();
    for (f, w) in fakes.iter().zip(weights) {
        b = b.provider_with(f, &format!("weight = {w}"));
    }
    let prism = b
        .network_option("probe_interval_ms", 200)
        .extra_toml(&format!(
            "[[keys]]\nname = \"s\"\nkey = \"strategy-key\"\nstrategy = \"{strategy}\"\n"
        ))
        .start();
    wait_serving(&prism, &["p1", "p2", "p3"]);
    let mut c = Conn::connect(prism.addr());
    for i in 0..CALLS {
        let params = format!("[\"0x{i:040x}\",\"latest\"]");
        let r = c.request(&http::post_with(
            "/",
            call(&i.to_string(), "eth_getBalance", &params).as_bytes(),
            &["x-api-key: strategy-key"],
        ));
        expect_http_result(&r, &i.to_string());
    }
    let counts = [
        fakes[0].count("eth_getBalance"),
        fakes[1].count("eth_getBalance"),
        fakes[2].count("eth_getBalance"),
    ];
    assert_eq!(counts.iter().sum::<usize>(), CALLS, "each call once: {counts:?}");
    counts
}

#[test]
fn round_robin_spreads_evenly() {
    let c = spread("round_robin", [1, 1, 1]);
    for n in c {
        assert!(
            (90..=110).contains(&n),
            "round robin over 3 providers, {CALLS} calls: {c:?}"
        );
    }
}

#[test]
fn random_spreads_over_every_provider() {
    let c = spread("random", [1, 1, 1]);
    for n in c {
        // Expected 100 each; 60 is about five standard deviations away.
        assert!(n >= 60, "random over 3 providers, {CALLS} calls: {c:?}");
    }
}

#[test]
fn weighted_follows_provider_weights() {
    let c = spread("weighted", [1, 1, 4]);
    // Expected 50 / 50 / 200.
    assert!((150..=250).contains(&c[2]), "weights 1/1/4: {c:?}");
    assert!(
        c[0] >= 20 && c[1] >= 20,
        "weights 1/1/4: every provider gets its share: {c:?}"
    );
    assert!(c[2] > c[0] + c[1], "weights 1/1/4: {c:?}");
}

#[test]
fn round_robin_ignores_weights() {
    let c = spread("round_robin", [1, 1, 4]);
    for n in c {
        assert!((90..=110).contains(&n), "round robin ignores weight: {c:?}");
    }
}
