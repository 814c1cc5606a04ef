//! `eth_sendRawTransactionSync` (EIP-7966) through providers that do not serve it.
//!
//! Against a real node: ganache 7.9.2 has no `eth_sendRawTransactionSync` (it answers "The method ... does
//! not exist/is not available", with code -32700),
//! behind a relay that counts what reaches it. Prism learns that from the node's own answer (or from
//! `sync_submit = "emulate"`), sends `eth_sendRawTransaction` once to that provider, and waits for the
//! receipt itself: the client gets the node's receipt, or EIP-7966's timeout error (code 4, the hash as
//! `data`) for a transaction no block includes in time. Each transaction reaches the chain once.
//!
//! Against fakes: in a pool where one provider serves the method and one lacks it, Prism sends the method to
//! the one that serves it, and a provider that refused it once is not sent it again.

use std::time::{Duration, Instant};

use crate::support::relay::{self, Ledger, Relay};
use crate::support::{FakeProvider, Mode, Prism, Reply};
use serde_json::{json, Value};

const SYNC: &str = "eth_sendRawTransactionSync";
const SEND: &str = "eth_sendRawTransaction";

/// A presigned raw transaction from tests/evm/presigned.json: (raw, hash).
fn presigned(name: &str) -> (String, String) {
    let text = std::fs::read_to_string(relay::evm_dir().join("presigned.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let t = &v[name];
    (
        t["raw"].as_str().unwrap().to_string(),
        t["hash"].as_str().unwrap().to_lowercase(),
    )
}

/// Prism with one relay in front of the node, the provider's table lines `options`.
fn single(options: &str) -> (Ledger, Relay, Prism) {
    let ledger = Ledger::new();
    let r = Relay::start("r1", relay::node(), &ledger);
    let prism = Prism::builder()
        .limit("request_deadline_ms", 4000)
        .network_option("probe_interval_ms", 200)
        .provider_url_with(&r.url(), options)
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    (ledger, r, prism)
}

fn sync(prism: &Prism, raw: &str, timeout_ms: u64) -> Value {
    let body = json!({"jsonrpc":"2.0","id":7,"method":SYNC,"params":[raw, timeout_ms]}).to_string();
    let r = prism.rpc(body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.describe());
    let v = r.json();
    assert_eq!(v["id"], 7, "{v}");
    v
}

/// What the node itself answers for the transaction's receipt.
fn node_receipt(hash: &str) -> Value {
    relay::node().rpc("eth_getTransactionReceipt", json!([hash]))["result"].clone()
}

#[test]
fn the_node_lacks_the_method_and_the_client_gets_its_receipt_from_one_submission() {
    let (raw, hash) = presigned("account8");
    let (ledger, r, prism) = single("");
    // The node's own answer to the method, as a client calling it directly would see it: ganache says
    // "does not exist/is not available" with code -32700 (not -32601): the words decide, not the code.
    let direct = relay::node().rpc(SYNC, json!([raw]));
    let said = direct["error"]["message"].as_str().unwrap_or("");
    assert!(
        said.contains("does not exist/is not available"),
        "ganache lacks the method: {direct}"
    );

    let started = Instant::now();
    let v = sync(&prism, &raw, 8000);
    let took = started.elapsed();
    let receipt = &v["result"];
    assert_eq!(receipt["transactionHash"], hash.as_str(), "{v}");
    assert_eq!(receipt["status"], "0x1", "{v}");
    assert_eq!(receipt, &node_receipt(&hash), "the node's receipt, as it has it");
    // ganache mines a block every second: the wait is the block's, not the timeout's.
    assert!(took < Duration::from_millis(4000), "answered after {took:?}");
    assert_eq!(r.received(SYNC), 1, "the method was tried once, and refused");
    // The ledger records both methods as they are forwarded: the refused sync call (the node did not
    // take the transaction) and the one eth_sendRawTransaction that submitted it.
    assert_eq!(
        ledger.count(&hash),
        2,
        "the refused sync call, then one submission reached the node"
    );
    assert_eq!(r.forwarded(SEND), 1);

    // Learned: the next one goes as eth_sendRawTransaction at once.
    let (raw2, hash2) = presigned("account9");
    let v = sync(&prism, &raw2, 8000);
    assert_eq!(v["result"]["transactionHash"], hash2.as_str(), "{v}");
    assert_eq!(r.received(SYNC), 1, "not sent the method again");
    assert_eq!(ledger.count(&hash2), 1);
    assert_eq!(
        prism.metric("prism_sync_submissions_emulated_total{outcome=\"receipt\"}"),
        2.0
    );
}

#[test]
fn a_declared_provider_is_never_sent_the_method_and_a_late_receipt_is_eip7966s_timeout() {
    let (ledger, r, prism) = single("sync_submit = \"emulate\"");
    let (raw, hash) = presigned("account5");
    let v = sync(&prism, &raw, 8000);
    assert_eq!(v["result"]["transactionHash"], hash.as_str(), "{v}");
    assert_eq!(ledger.count(&hash), 1);

    // Nonces 0..6 of this account were never sent: the node takes the transaction into its pool, and no
    // block will include it. Prism waits the call's timeout, then answers as EIP-7966 says.
    let (gap, gap_hash) = presigned("account4_gap");
    let started = Instant::now();
    let v = sync(&prism, &gap, 1200);
    let took = started.elapsed();
    assert_eq!(v["error"]["code"], 4, "{v}");
    assert_eq!(v["error"]["data"], gap_hash.as_str(), "{v}");
    assert!(
        took >= Duration::from_millis(1100) && took < Duration::from_millis(3500),
        "waited the call's timeout: {took:?}"
    );
    assert_eq!(ledger.count(&gap_hash), 1, "sent once");
    let pooled = relay::node().rpc("eth_getTransactionByHash", json!([gap_hash]));
    assert_eq!(
        pooled["result"]["hash"],
        gap_hash.as_str(),
        "in the node's pool: {pooled}"
    );
    assert_eq!(r.received(SYNC), 0, "declared: never sent the method");
    assert_eq!(
        prism.metric("prism_sync_submissions_emulated_total{outcome=\"timeout\"}"),
        1.0
    );
}

/// The receipt fakes answer for any hash (the assertions read only the fields Prism must keep).
fn receipt_for(hash: &str) -> String {
    format!(r#"{{"transactionHash":"{hash}","status":"0x1","blockNumber":"0x10"}}"#)
}

#[test]
fn the_method_goes_to_a_provider_that_serves_it_and_a_refusal_is_learned() {
    let (raw, hash) = presigned("account6");
    let lacking = FakeProvider::start();
    lacking.set_method_mode(
        SYNC,
        Mode::RpcError {
            code: -32601,
            message: "the method eth_sendRawTransactionSync does not exist/is not available".into(),
        },
    );
    lacking.set_reply(SEND, Reply::Result(format!("\"{hash}\"")));
    lacking.set_reply("eth_getTransactionReceipt", Reply::Result(receipt_for(&hash)));
    let serving = FakeProvider::start();
    serving.set_reply(SYNC, Reply::Result(receipt_for(&hash)));
    let prism = Prism::builder()
        .providers(&[&lacking, &serving])
        .limit("request_deadline_ms", 4000)
        .extra_toml("[[keys]]\nname = \"rr\"\nkey = \"rr-sync\"\nstrategy = \"round_robin\"\n")
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let send = |n: u64| {
        let body = json!({"jsonrpc":"2.0","id":n,"method":SYNC,"params":[raw, 3000]}).to_string();
        let r = prism.rpc_with("/", body.as_bytes(), &["x-api-key: rr-sync"]);
        assert_eq!(r.status, 200, "{}", r.describe());
        let v = r.json();
        assert_eq!(v["result"]["transactionHash"], hash.as_str(), "{v}");
        r.header("x-prism-provider").unwrap_or("").to_string()
    };
    // Round robin takes turns; whichever provider a call lands on, it is one submission at one provider.
    let mut at = Vec::new();
    for n in 0..6 {
        at.push(send(n));
    }
    let (refused, raw_sent, native) = (lacking.count(SYNC), lacking.count(SEND), serving.count(SYNC));
    assert!(refused <= 1, "a refusal is learned: {refused} refusals");
    assert_eq!(raw_sent, refused, "emulated only where it was refused: {at:?}");
    assert_eq!(native + raw_sent, 6, "one submission per call: {at:?}");
    assert_eq!(serving.count(SEND), 0);
}
