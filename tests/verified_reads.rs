//! Verified reads (`[[keys]] verify`) through a running Prism.
//!
//! Against a real node: two relays in front of one ganache, one of them serving its head 3 blocks behind;
//! a verified `eth_getBlockByNumber("latest")` is pinned to a block both have, so they agree (a plain read of
//! each would not), and the answer says `x-prism-verified: 2`.
//!
//! Against fakes, for what no honest node does on demand: answers that differ (an error naming the
//! providers and the block, never a silent pick; a third provider settles it, and only then does the one
//! outvoted lose standing), a provider that lacks the block (no vote, replaced), one down (an error, or the
//! answer unverified when the key says so). Writes cannot be verified (`prism check` refuses the key).

use std::time::Duration;

use crate::support::relay::{self, Ledger, Relay};
use crate::support::{FakeProvider, Mode, Prism, Reply};
use serde_json::{json, Value};

const KEY: &str = "verify-key";
const PLAIN: &str = "plain-key";

fn keys(verify: &str) -> String {
    format!(
        "[[keys]]\nname = \"v\"\nkey = \"{KEY}\"\nverify = {verify}\n\n[[keys]]\nname = \"plain\"\nkey = \"{PLAIN}\"\n"
    )
}

fn read(prism: &Prism, key: &str, method: &str, params: Value) -> (Value, Option<String>) {
    let body = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}).to_string();
    let r = prism.rpc_with("/", body.as_bytes(), &[&format!("x-api-key: {key}")]);
    assert_eq!(r.status, 200, "{}", r.describe());
    (r.json(), r.header("x-prism-verified").map(str::to_string))
}

/// Attempts provider `name` failed, from `/metrics`.
fn failed_attempts(prism: &Prism, name: &str) -> f64 {
    let text = prism.admin_get("/metrics").text();
    text.lines()
        .filter(|l| {
            l.starts_with("prism_upstream_attempts_total{")
                && l.contains(&format!("provider=\"{name}\""))
                && l.contains("result=\"failed\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn a_lagging_relay_of_a_real_node_agrees_at_the_pinned_block() {
    let node = relay::node();
    let ledger = Ledger::new();
    let (r1, r2) = (Relay::start("r1", node, &ledger), Relay::start("r2", node, &ledger));
    r2.set_lag(3);
    // ganache mines a block a second: wait until the lag is real.
    assert!(crate::support::wait_until(Duration::from_secs(20), || node.head() >= 5));
    let prism = Prism::builder()
        .network_option("probe_interval_ms", 100)
        .network_option("max_drift_blocks", 10)
        .provider_url(&r1.url())
        .provider_url(&r2.url())
        .extra_toml(&keys(
            r#"{ methods = ["eth_getBlockByNumber", "eth_getBalance"], quorum = 2 }"#,
        ))
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    // Unpinned, the two relays answer different blocks for "latest".
    let at = |r: &Relay| -> Value {
        let mut c = crate::support::Conn::connect(r.addr());
        let body = json!({"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest", false]});
        c.request(&crate::support::http::post("/", body.to_string().as_bytes()))
            .json()["result"]["number"]
            .clone()
    };
    assert_ne!(at(&r1), at(&r2), "the relays disagree on latest");
    for _ in 0..5 {
        let (v, verified) = read(&prism, KEY, "eth_getBlockByNumber", json!(["latest", false]));
        assert!(v["result"]["hash"].is_string(), "{v}");
        assert_eq!(verified.as_deref(), Some("2"), "{v}");
        let (v, _) = read(&prism, KEY, "eth_getBalance", json!([relay::DEV_ACCOUNTS[0], "latest"]));
        assert!(v["result"].is_string(), "{v}");
    }
    assert_eq!(prism.metric("prism_verified_reads_total{outcome=\"agreed\"}"), 10.0);
    assert_eq!(prism.metric("prism_verified_reads_total{outcome=\"disagreed\"}"), 0.0);
    let (_, verified) = read(&prism, PLAIN, "eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(verified, None, "a key without verify gets plain reads");
}

/// Fakes at head 0x100 answering `eth_getBalance` with `balance` each.
fn fakes(balances: &[&str]) -> Vec<FakeProvider> {
    balances
        .iter()
        .map(|b| {
            let f = FakeProvider::start();
            f.set_reply("eth_getBalance", Reply::Result(format!("\"{b}\"")));
            f
        })
        .collect()
}

fn start(fakes: &[FakeProvider], verify: &str) -> Prism {
    start_with(fakes, &[], verify)
}

/// [`start`] with extra lines for some providers' tables (`options[i]` for provider i).
fn start_with(fakes: &[FakeProvider], options: &[&str], verify: &str) -> Prism {
    let mut b = Prism::builder();
    for (i, f) in fakes.iter().enumerate() {
        b = b.provider_with(f, options.get(i).copied().unwrap_or(""));
    }
    let prism = b
        .network_option("probe_interval_ms", 100)
        .extra_toml(&format!("[cache]\nenabled = false\ndedupe = false\n\n{}", keys(verify)))
        .start();
    let names: Vec<String> = (1..=fakes.len()).map(|i| format!("p{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    crate::support::wait_serving(&prism, &names);
    // A verified read needs every provider's head (it pins the block to the lowest).
    let heads = crate::support::wait_until(Duration::from_secs(10), || {
        names
            .iter()
            .zip(fakes)
            .all(|(n, f)| prism.provider_status(n)["head"].as_u64() == Some(f.head()))
    });
    assert!(heads, "heads never known: {}", prism.status());
    prism
}

const BALANCE: &str = r#"{ methods = ["eth_getBalance"], quorum = 2 }"#;
const ADDR: &str = "0x00000000000000000000000000000000000000aa";

#[test]
fn agreeing_providers_are_asked_at_one_pinned_block_and_the_answer_says_so() {
    let f = fakes(&["0x10", "0x10"]);
    f[1].set_head(0xfe);
    let prism = start(&f, BALANCE);
    let (v, verified) = read(&prism, KEY, "eth_getBalance", json!([ADDR, "latest"]));
    assert_eq!(v["result"], "0x10", "{v}");
    assert_eq!(verified.as_deref(), Some("2"));
    for p in &f {
        let calls = p.calls_to("eth_getBalance");
        assert_eq!(calls.len(), 1);
        let params = String::from_utf8(calls[0].params.clone().unwrap()).unwrap();
        assert_eq!(params, format!(r#"["{ADDR}","0xfe"]"#), "pinned to the lower head");
    }
    // An absent block parameter is "latest": pinned as well.
    let (v, verified) = read(&prism, KEY, "eth_getBalance", json!([ADDR]));
    assert_eq!((v["result"].as_str(), verified.as_deref()), (Some("0x10"), Some("2")));
    // `pending` cannot be pinned: refused, never answered from one pool.
    let (v, _) = read(&prism, KEY, "eth_getBalance", json!([ADDR, "pending"]));
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

#[test]
fn a_disagreement_is_an_error_naming_it_and_nobody_loses_standing_without_a_third() {
    let f = fakes(&["0x10", "0x11"]);
    let prism = start(&f, BALANCE);
    let (v, verified) = read(&prism, KEY, "eth_getBalance", json!([ADDR, "latest"]));
    assert_eq!(verified, None);
    assert_eq!(v["error"]["code"], -32097, "{v}");
    let mut names: Vec<&str> = v["error"]["data"]["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["p1", "p2"], "{v}");
    assert_eq!(v["error"]["data"]["block"], "0x100", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("disagree"), "{v}");
    assert_eq!(prism.metric("prism_verified_reads_total{outcome=\"disagreed\"}"), 1.0);
    assert_eq!(failed_attempts(&prism, "p1") + failed_attempts(&prism, "p2"), 0.0);
    // The plain key is not verified: it gets one provider's answer.
    let (v, _) = read(&prism, PLAIN, "eth_getBalance", json!([ADDR, "latest"]));
    assert!(v["result"].is_string(), "{v}");
}

#[test]
fn a_third_provider_settles_a_disagreement_and_only_the_outvoted_one_loses_standing() {
    // p2 answers otherwise; p3 agrees with p1, and ranks last (an overflow provider), so it is asked third.
    let f = fakes(&["0x10", "0x11", "0x10"]);
    let prism = start_with(&f, &["", "", "overflow = true"], BALANCE);
    for _ in 0..3 {
        let (v, verified) = read(&prism, KEY, "eth_getBalance", json!([ADDR, "latest"]));
        assert_eq!(v["result"], "0x10", "{v}");
        assert_eq!(verified.as_deref(), Some("2"), "{v}");
    }
    assert!(prism.metric("prism_verified_reads_total{outcome=\"settled\"}") >= 1.0);
    assert!(failed_attempts(&prism, "p2") >= 1.0, "the outvoted provider is counted");
    assert_eq!(failed_attempts(&prism, "p1") + failed_attempts(&prism, "p3"), 0.0);
}

#[test]
fn a_provider_without_the_block_is_replaced_not_taken_for_a_disagreement() {
    let f = fakes(&["0x10", "0x10", "0x10"]);
    f[1].set_method_mode(
        "eth_getBalance",
        Mode::RpcError {
            code: -32000,
            message: "header not found".into(),
        },
    );
    let prism = start(&f, BALANCE);
    for _ in 0..4 {
        let (v, verified) = read(&prism, KEY, "eth_getBalance", json!([ADDR, "latest"]));
        assert_eq!(v["result"], "0x10", "{v}");
        assert_eq!(verified.as_deref(), Some("2"), "{v}");
    }
    assert_eq!(prism.metric("prism_verified_reads_total{outcome=\"disagreed\"}"), 0.0);
}

#[test]
fn a_provider_down_is_a_clear_error_or_the_answer_unverified_as_configured() {
    for (when_short, unverified) in [("error", false), ("unverified", true)] {
        let f = fakes(&["0x10", "0x10"]);
        let prism = start(
            &f,
            &format!(r#"{{ methods = ["eth_getBalance"], quorum = 2, when_short = "{when_short}" }}"#),
        );
        f[1].set_method_mode("eth_getBalance", Mode::Status(503));
        let (v, verified) = read(&prism, KEY, "eth_getBalance", json!([ADDR, "latest"]));
        assert_eq!(verified, None, "{v}");
        if unverified {
            assert_eq!(v["result"], "0x10", "{v}");
            assert_eq!(prism.metric("prism_verified_reads_total{outcome=\"unverified\"}"), 1.0);
        } else {
            assert_eq!(v["error"]["code"], -32096, "{v}");
            assert_eq!(v["error"]["data"], json!({"answered": 1, "quorum": 2}), "{v}");
        }
    }
}

#[test]
fn writes_and_unpinnable_reads_cannot_be_verified() {
    for (methods, field) in [
        (
            r#"["eth_getBalance", "eth_sendRawTransaction"]"#,
            "keys[0].verify.methods[1]",
        ),
        (r#"["eth_gasPrice"]"#, "keys[0].verify.methods[0]"),
    ] {
        let dir = crate::support::prism::Scratch::new();
        let cfg = dir.file(
            "prism.toml",
            &format!(
                "[server]\nlisten = \"127.0.0.1:1\"\n\n[[networks]]\nname = \"n\"\nkind = \"evm\"\n\n  [[networks.providers]]\n  name = \"p\"\n  url = \"http://127.0.0.1:2\"\n\n[[keys]]\nname = \"k\"\nkey = \"s\"\nverify = {{ methods = {methods} }}\n"
            ),
        );
        let out = crate::support::prism::run_cli(
            &["check", "--config", cfg.to_str().unwrap()],
            &[],
            Duration::from_secs(20),
        );
        assert!(!out.success(), "{}", out.all());
        assert!(out.all().contains(field), "names the field: {}", out.all());
    }
}
