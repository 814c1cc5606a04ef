//! Micro-benchmarks of the per-request decisions outside the envelope:
//! - routing: `choose` over 3 and 20 providers with the score strategy and a live health snapshot
//!   (aim ≤ 1 µs, issue 3);
//! - the edge's per-request key work: key lookup (digest + constant-time scan), method allowlist, token
//!   bucket (aim ≤ 200 ns together, issue 4);
//! - the canonical key used by dedupe and the cache.
//!
//! Run: `cargo bench --bench decisions`.

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use prism::config::{BreakerPolicy, Config, Strategy, Weights};
use prism::core::live::inflight::Pressure;
use prism::core::live::state::NetworkLive;
use prism::core::methods::{lookup, Family};
use prism::core::reuse::canon::canonical_key;
use prism::core::routing::router::{choose, Ask, Draw, Pool, ProviderStatic};
use prism::edge::keys::KeyRing;
use prism::rpc::ProviderId;
use prism::telemetry::snapshot::{NetworkHealth, ProviderHealth};

fn config(providers: usize) -> Config {
    let mut text = String::from("[server]\nlisten = \"127.0.0.1:1\"\n[[networks]]\nname = \"n\"\nkind = \"evm\"\n");
    for i in 0..providers {
        text.push_str(&format!(
            "  [[networks.providers]]\n  name = \"p{i}\"\n  url = \"http://127.0.0.1:{}\"\n",
            2000 + i
        ));
    }
    for i in 0..8 {
        text.push_str(&format!(
            "[[keys]]\nname = \"k{i}\"\nkey = \"secret-key-number-{i}-0123456789abcdef\"\nrate_per_s = 1000000000\nburst = 1000000000\n\
             allow = [\"eth_blockNumber\", \"eth_call\", \"eth_getBalance\", \"net_*\", \"eth_get*\"]\n"
        ));
    }
    Config::from_toml_with(&text, |_| None).expect("bench config")
}

fn routing(c: &mut Criterion) {
    for n in [3usize, 20] {
        let cfg = config(n);
        let live = NetworkLive::new(&cfg.networks[0], &BreakerPolicy::default(), cfg.keys.len());
        let statics: Vec<ProviderStatic> = (0..n)
            .map(|i| ProviderStatic {
                weight: 1.0,
                overflow: i == n - 1,
                region_distance: (i % 2) as f64,
                quota_rps: Some(300.0),
                credits: None,
            })
            .collect();
        let health = NetworkHealth {
            providers: (0..n)
                .map(|i| {
                    let mut h = ProviderHealth::default();
                    h.overall.p50_us = 30_000 + (i as u64 * 7_919) % 20_000;
                    h.overall.calls = 1000;
                    h.overall.failures = (i as u64 * 13) % 20;
                    h.recent_rps = 100.0;
                    h
                })
                .collect(),
            built_at_ms: 0,
            history: Default::default(),
        };
        for i in 0..n {
            live.observe_head(ProviderId::new(i), 1_000_000 - (i as u64 % 3));
        }
        let ask = Ask {
            family: Family::Execute,
            strategy: Strategy::Score,
            weights: Weights::default(),
            min_head: 999_998,
            prefer_deeper: false,
            exclude: 0,
            stalled: 0,
            at_block: None,
            tag: None,
            key: 0,
        };
        let mut rotation = 0usize;
        c.bench_function(&format!("route/score/{n}_providers"), |b| {
            b.iter(|| {
                rotation += 1;
                black_box(choose(
                    &Pool {
                        statics: &statics,
                        live: &live,
                        health: &health,
                        pressure: &Pressure::NONE,
                        now_ms: 1000,
                    },
                    black_box(&ask),
                    Draw { rotation, dice: 0.5 },
                ))
            })
        });
    }
}

fn edge(c: &mut Criterion) {
    let cfg = config(3);
    let ring = KeyRing::from_config(&cfg);
    let presented = b"secret-key-number-5-0123456789abcdef";
    let mut now = 1_000_000_000u64;
    c.bench_function("edge/key+allowlist+bucket", |b| {
        b.iter(|| {
            now += 1000;
            let k = ring.find(black_box(presented)).expect("known key");
            let allowed = k.allows(black_box("eth_getBalance"));
            black_box((allowed, k.admit(now, 1)))
        })
    });
}

fn canon(c: &mut Criterion) {
    let info = lookup("eth_call");
    let params = br#"[{"to":"0xABCdef0000000000000000000000000000000001","data":"0x70a08231000000000000000000000000abcdef0000000000000000000000000000000002"},"latest"]"#;
    c.bench_function("canonical_key/eth_call", |b| {
        b.iter(|| black_box(canonical_key("eth_call", &info, Some(black_box(params)))))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = routing, edge, canon
}
criterion_main!(benches);
