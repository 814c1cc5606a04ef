//! Submissions against a second real node, Foundry's anvil (`tests/support/anvil.rs`), which answers them
//! differently from ganache: it serves `eth_sendRawTransactionSync` (EIP-7966; 1.7.1 takes `[raw]` only, so
//! Prism must pass the params as they came), and answers a transaction it already holds with -32003
//! "transaction already imported" (ganache says nothing of the kind).
//!
//! - A sync submission through Prism gets anvil's receipt.
//! - A sync submission whose answer is lost after the relay forwarded it is looked up and gets the receipt,
//!   sent once (counted at the relay).
//! - A raw submission whose answer is lost is found by its hash in anvil's pool, sent once.
//! - The same raw transaction sent again is "already imported" at anvil: the client gets the hash.
//!
//! Needs `scripts/deps/evm.sh` (anvil in tests/evm/node_modules).

use crate::support::anvil::{Anvil, ACCOUNTS};
use crate::support::relay::{Ledger, Relay};
use crate::support::{call, expect_http_result, wait_serving, Prism};
use serde_json::{json, Value};

/// Prism in front of `relays` (each forwarding to one anvil).
fn prism_for(relays: &[&Relay]) -> Prism {
    let mut b = Prism::builder()
        .limit("request_deadline_ms", 10_000)
        .limit("client_timeout_ms", 10_000)
        .network_option("probe_interval_ms", 100);
    for r in relays {
        b = b.provider_url(&r.url());
    }
    let prism = b.start();
    let names: Vec<String> = (1..=relays.len()).map(|i| format!("p{i}")).collect();
    wait_serving(&prism, &names.iter().map(String::as_str).collect::<Vec<_>>());
    prism
}

/// A signed transfer from `from` (anvil signs it; not sent).
fn signed_transfer(anvil: &Anvil, from: &str) -> String {
    let tx = json!({
        "from": from, "to": ACCOUNTS[0], "value": "0x3e8", "gas": "0x5208",
        "gasPrice": "0x77359400", "chainId": "0x1237",
        "nonce": format!("0x{:x}", anvil.nonce(from)),
    });
    anvil
        .result("eth_signTransaction", json!([tx]))
        .as_str()
        .unwrap()
        .to_string()
}

fn hash_of(raw: &str) -> String {
    crate::support::relay::keccak_hex(raw).unwrap()
}

#[test]
fn a_sync_submission_gets_anvils_receipt() {
    let anvil = Anvil::start_automine();
    let ledger = Ledger::new();
    let relay = Relay::start("r1", &anvil.as_node(), &ledger);
    let prism = prism_for(&[&relay]);
    let raw = signed_transfer(&anvil, ACCOUNTS[1]);
    let r = prism.rpc(call("1", "eth_sendRawTransactionSync", &format!("[\"{raw}\"]")).as_bytes());
    let receipt: Value = serde_json::from_slice(&expect_http_result(&r, "1")).unwrap();
    let hash = hash_of(&raw);
    assert_eq!(receipt["transactionHash"], hash.as_str());
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(
        receipt,
        anvil.result("eth_getTransactionReceipt", json!([hash])),
        "anvil's own receipt"
    );
    assert_eq!(ledger.count(&hash), 1);
}

#[test]
fn a_sync_submission_whose_answer_is_lost_gets_its_receipt_and_is_sent_once() {
    let anvil = Anvil::start_automine();
    let ledger = Ledger::new();
    let (r1, r2) = (
        Relay::start("r1", &anvil.as_node(), &ledger),
        Relay::start("r2", &anvil.as_node(), &ledger),
    );
    let prism = prism_for(&[&r1, &r2]);
    for r in [&r1, &r2] {
        r.reset_after_next("eth_sendRawTransactionSync");
    }
    let raw = signed_transfer(&anvil, ACCOUNTS[2]);
    let r = prism.rpc(call("1", "eth_sendRawTransactionSync", &format!("[\"{raw}\"]")).as_bytes());
    let hash = hash_of(&raw);
    let fired = [&r1, &r2].iter().filter(|r| !r.trap_armed()).count();
    assert_eq!(fired, 1, "the answer was lost at one relay");
    let receipt: Value = serde_json::from_slice(&expect_http_result(&r, "1")).unwrap();
    assert_eq!(receipt, anvil.result("eth_getTransactionReceipt", json!([hash])));
    assert_eq!(ledger.count(&hash), 1, "sent once: {:?}", ledger.duplicates());
}

#[test]
fn a_raw_submission_whose_answer_is_lost_is_found_in_anvils_pool_and_a_resend_is_already_imported() {
    let anvil = Anvil::start();
    let ledger = Ledger::new();
    let relay = Relay::start("r1", &anvil.as_node(), &ledger);
    let prism = prism_for(&[&relay]);
    relay.reset_after_next("eth_sendRawTransaction");
    let raw = signed_transfer(&anvil, ACCOUNTS[3]);
    let hash = hash_of(&raw);
    let body = call("1", "eth_sendRawTransaction", &format!("[\"{raw}\"]"));
    let r = prism.rpc(body.as_bytes());
    assert!(!relay.trap_armed(), "the answer was lost");
    assert_eq!(
        expect_http_result(&r, "1"),
        format!("\"{hash}\"").as_bytes(),
        "found pending at anvil by its hash"
    );
    assert_eq!(ledger.count(&hash), 1);
    // The client sends it again: anvil holds it ("transaction already imported", -32003): it is the hash.
    let direct = anvil.rpc("eth_sendRawTransaction", json!([raw]));
    assert_eq!(
        direct["error"]["code"], -32003,
        "anvil's answer to a duplicate: {direct}"
    );
    let r = prism.rpc(body.as_bytes());
    assert_eq!(expect_http_result(&r, "1"), format!("\"{hash}\"").as_bytes());
    assert_eq!(ledger.count(&hash), 2, "each client call one submission");
    anvil.mine(1);
    let receipt = anvil.result("eth_getTransactionReceipt", json!([hash]));
    assert_eq!(receipt["status"], "0x1");
}
