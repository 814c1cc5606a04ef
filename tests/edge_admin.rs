//! The admin listener of a running Prism: `/healthz` is 200 while the process lives; `/readyz` is 200 while
//! every network has a usable provider, 503 when all of a network's providers are down, and 200 again as
//! soon as one recovers; `/status` carries the documented provider fields.

use crate::support::{FakeProvider, Mode, Prism};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn healthz_and_readyz_follow_provider_health() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let prism = Prism::builder()
        .providers(&[&p1, &p2])
        .network_option("probe_interval_ms", 50)
        .extra_toml("[policy.breaker]\nfailure_threshold = 2\ncooldown_ms = 300\nmax_cooldown_ms = 600")
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    assert_eq!(prism.admin_get("/healthz").status, 200);
    assert_eq!(prism.admin_get("/readyz").status, 200);

    // Both down (probes fail): not ready, still alive.
    p1.set_mode(Mode::Status(500));
    p2.set_mode(Mode::Status(500));
    prism.wait_provider("p1", WAIT, "not closed", |r| r["state"] != "closed");
    prism.wait_provider("p2", WAIT, "not closed", |r| r["state"] != "closed");
    let r = prism.admin_get("/readyz");
    assert_eq!(r.status, 503, "{}", r.describe());
    assert!(
        r.text().contains("testnet"),
        "say which network is not ready: {}",
        r.describe()
    );
    assert_eq!(prism.admin_get("/healthz").status, 200, "alive while not ready");

    // One recovers: its half-open probe succeeds; ready again.
    p1.set_mode(Mode::Normal);
    prism.wait_state("p1", "closed", WAIT);
    let r = prism.admin_get("/readyz");
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_ne!(prism.provider_state("p2"), "closed");
}

#[test]
fn readyz_is_503_while_no_provider_is_on_the_right_chain() {
    let p1 = FakeProvider::start();
    p1.set_chain_id("0x1");
    let prism = Prism::builder()
        .provider(&p1)
        .network_option("probe_interval_ms", 100)
        .start();
    prism.wait_state("p1", "wrong-chain", WAIT);
    assert_eq!(prism.admin_get("/readyz").status, 503);
    assert_eq!(prism.admin_get("/healthz").status, 200);
}

#[test]
fn status_json_carries_the_documented_provider_fields() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p2.set_head(0x100 - 3);
    let prism = Prism::builder()
        .provider_with(&p1, "region = \"eu-west\"")
        .provider(&p2)
        .network_option("probe_interval_ms", 50)
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    for i in 0..10 {
        let r = prism
            .rpc(crate::support::call(&i.to_string(), "eth_getBalance", crate::support::BALANCE_PARAMS).as_bytes());
        crate::support::expect_http_result(&r, &i.to_string());
    }
    let row = prism.wait_provider("p2", WAIT, "lag 3", |r| r["lag"] == 3);
    // Figures come from the health aggregator: wait until the calls are in.
    let total_calls = |s: &serde_json::Value| -> u64 {
        s["networks"][0]["providers"]
            .as_array()
            .map_or(0, |ps| ps.iter().filter_map(|p| p["calls"].as_u64()).sum())
    };
    assert!(
        crate::support::wait_until(WAIT, || total_calls(&prism.status()) >= 10),
        "calls never reached /status: {}",
        prism.status()
    );
    let s = prism.status();
    let net = &s["networks"][0];
    assert_eq!(net["name"], "testnet", "{s}");
    assert_eq!(net["bestHead"], 0x100, "{s}");
    let providers = net["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 2, "{s}");
    for p in providers {
        for field in ["p50Ms", "p99Ms", "success", "share"] {
            assert!(p[field].is_number(), "{field} in {p}");
        }
        for field in ["head", "lag", "calls", "failures", "throttled", "cooldownMs"] {
            assert!(p[field].is_u64(), "{field} in {p}");
        }
        assert!(p["name"].is_string() && p["state"].is_string(), "{p}");
        assert!(p.get("region").is_some(), "region in {p}");
        let state = p["state"].as_str().unwrap();
        assert!(
            [
                "closed",
                "open",
                "half-open",
                "open-drift",
                "wrong-chain",
                "parked",
                "unverified"
            ]
            .contains(&state),
            "unknown state {state}"
        );
    }
    assert_eq!(providers[0]["region"], "eu-west");
    assert_eq!(providers[1]["region"], serde_json::Value::Null);
    assert_eq!(providers[0]["head"], 0x100);
    assert_eq!(row["head"], 0x100 - 3);
    let share: f64 = providers.iter().map(|p| p["share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 0.01, "shares add up to 1: {s}");
    let calls: u64 = providers.iter().map(|p| p["calls"].as_u64().unwrap()).sum();
    assert!(calls >= 10, "calls {calls}: {s}");
}

/// `prism status` prints the live provider table of a running node from its admin listener, for an
/// operator in an SSH session; a node that is not there is a clear error and a failing exit status.
#[test]
fn prism_status_prints_the_provider_table_of_a_running_node() {
    let (healthy, failing) = (FakeProvider::start(), FakeProvider::start());
    failing.set_mode(Mode::Status(503));
    let prism = Prism::start(&[&healthy, &failing]);
    crate::support::wait_serving(&prism, &["p1"]);
    prism.wait_state("p2", "open", std::time::Duration::from_secs(15));
    let out = std::process::Command::new(crate::support::prism::BIN)
        .args(["status", "--admin", &prism.admin_addr().to_string()])
        .output()
        .expect("run prism status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"))
            .to_string()
    };
    // Columns: provider p50 ms p99 ms success share head lag badge state [last error...].
    let state = |name: &str| row(name).split_whitespace().nth(10).unwrap_or("").to_string();
    assert_eq!(state("p1"), "closed", "{text}");
    assert_eq!(state("p2"), "open", "{text}");
    assert!(row("p2").contains("http_5xx"), "the cause: {text}");
    let gone = std::process::Command::new(crate::support::prism::BIN)
        .args(["status", "--admin", "127.0.0.1:9"])
        .output()
        .expect("run prism status");
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no Prism admin listener at 127.0.0.1:9"));
}
