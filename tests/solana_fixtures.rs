//! The Solana test material checks itself: the Rust PDA derivation agrees with solders on every fixture
//! account, the fixture transactions decode to what the generator says, and the fake base layer / ER speaks
//! the shapes real nodes speak (HTTP on P, WebSocket on P+1, delegation records as the program writes them).
//! No Prism here; the router's tests are solana_routing.rs, solana_ws.rs and solana_client.rs.

use crate::support::solana_fake::*;
use base64::Engine as _;
use serde_json::{json, Value};
use std::time::Duration;

fn rpc(url: &str, method: &str, params: Value) -> Value {
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let r = crate::support::Conn::connect(addr).request(&crate::support::http::post("/", body.as_bytes()));
    assert_eq!(r.status, 200, "{}", r.describe());
    r.json()
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[test]
fn rust_pda_derivation_matches_solders_for_every_fixture_account() {
    let accounts = fixtures()["accounts"].as_object().unwrap();
    assert!(accounts.len() >= 10);
    for (name, a) in accounts {
        let want = a["delegation_record"].as_str().unwrap();
        assert_eq!(
            delegation_record(a["pubkey"].as_str().unwrap()),
            want,
            "record PDA of {name}"
        );
    }
    // The delegation fixture names erin's record PDA as the instruction's delegation_record account.
    assert_eq!(tx_str("delegate_erin", "delegation_record"), record_of("erin"));
}

#[test]
fn fixture_transactions_decode_to_what_the_generator_recorded() {
    for (name, t) in fixtures()["transactions"].as_object().unwrap() {
        let raw = b64(t["base64"].as_str().unwrap());
        let from58 = bs58::decode(t["base58"].as_str().unwrap()).into_vec().unwrap();
        assert_eq!(raw, from58, "{name}: base58 and base64 carry the same bytes");
        assert_eq!(raw.len() as u64, t["raw_len"].as_u64().unwrap(), "{name}: raw_len");
        assert_eq!(raw[0], 1, "{name}: one signature");
        assert_eq!(
            b58(&raw[1..65]),
            t["signature"].as_str().unwrap(),
            "{name}: first signature"
        );
        if let Some(keys) = t["account_keys"].as_array() {
            let writable = t["writable"].as_array().unwrap();
            assert_eq!(keys.len(), writable.len(), "{name}");
            assert_eq!(keys[0], json!(pk("payer")), "{name}: fee payer first");
            assert_eq!(writable[0], json!(true), "{name}: fee payer writable");
        }
    }
    let big = tx("oversized");
    assert!(big["raw_len"].as_u64().unwrap() > 1232);
    assert!(big["base64"].as_str().unwrap().len() > 1644);
    assert!(big["base58"].as_str().unwrap().len() > 1683);
    let v1 = b64(tx("v1_message")["base64"].as_str().unwrap());
    assert_eq!(v1[65], 0x81, "v1 message byte");
    let v0 = b64(tx("v0_alt_carol")["base64"].as_str().unwrap());
    assert_eq!(v0[65], 0x80, "v0 message byte");
    // carol reaches the v0 transaction only through the lookup table.
    assert!(!tx("v0_alt_carol")["account_keys"]
        .as_array()
        .unwrap()
        .contains(&json!(pk("carol"))));
    let alt = b64(fixtures()["alt"]["data_base64"].as_str().unwrap());
    assert_eq!(alt.len(), 56 + 32 * 3);
    assert_eq!(&alt[56..88], &pubkey_bytes(&pk("carol")));
}

#[test]
fn fake_serves_account_shapes_and_errors_like_a_node() {
    let base = SolanaFake::base();
    let alice = pk("alice");
    base.set_lamports(&alice, 42);
    let r = rpc(&base.url(), "getAccountInfo", json!([alice, {"encoding": "base64"}]));
    assert_eq!(r["result"]["context"]["apiVersion"], "2.2.0");
    assert_eq!(r["result"]["context"]["slot"], base.slot());
    let v = &r["result"]["value"];
    assert_eq!(v["lamports"], 42);
    assert_eq!(v["owner"], SYSTEM_PROGRAM);
    assert_eq!(v["data"], json!(["", "base64"]));
    assert_eq!(v["rentEpoch"], json!(u64::MAX));
    assert_eq!(v["space"], 0);
    let r = rpc(
        &base.url(),
        "getAccountInfo",
        json!([pk("bob"), {"encoding": "base64"}]),
    );
    assert_eq!(r["result"]["value"], Value::Null);
    let r = rpc(&base.url(), "getTokenAccountBalance", json!([alice]));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["message"], "Invalid param: not a Token account");
    base.set_account(
        &pk("token_alice"),
        Account::new(
            2_039_280,
            TOKEN_PROGRAM,
            &token_account_data(&pk("program"), &alice, 1_500_000),
        ),
    );
    let r = rpc(&base.url(), "getTokenAccountBalance", json!([pk("token_alice")]));
    assert_eq!(r["result"]["value"]["amount"], "1500000");
    let r = rpc(
        &base.url(),
        "getMultipleAccounts",
        json!([[alice, pk("bob")], {"encoding": "base64"}]),
    );
    assert_eq!(r["result"]["value"][0]["lamports"], 42);
    assert_eq!(r["result"]["value"][1], Value::Null);
    // What MagicBlock's ER validator asks of its base layer: program accounts by filter, base64+zstd data.
    base.set_account(&pk("carol"), Account::new(7, &pk("program"), &[9; 48]));
    base.set_account(&pk("dave"), Account::new(8, &pk("program"), &[9; 40]));
    let r = rpc(
        &base.url(),
        "getProgramAccounts",
        json!([pk("program"), {"encoding": "base64", "filters": [{"dataSize": 48}, {"memcmp": {"offset": 1, "bytes": b58(&[9, 9])}}]}]),
    );
    assert_eq!(r["result"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r["result"][0]["pubkey"], json!(pk("carol")), "{r}");
    let r = rpc(
        &base.url(),
        "getAccountInfo",
        json!([pk("dave"), {"encoding": "base64+zstd"}]),
    );
    let zstd = &r["result"]["value"]["data"];
    assert_eq!(zstd[1], "base64+zstd", "{r}");
    use base64::Engine as _;
    let frame = base64::engine::general_purpose::STANDARD
        .decode(zstd[0].as_str().unwrap())
        .unwrap();
    assert_eq!(frame, zstd_raw(&[9; 40]));
    assert_eq!(&frame[..4], &[0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");

    let sent = rpc(
        &base.url(),
        "sendTransaction",
        json!([tx_str("transfer_payer_alice", "base58")]),
    );
    assert_eq!(sent["result"], json!(tx_str("transfer_payer_alice", "signature")));
    let sent = rpc(
        &base.url(),
        "sendTransaction",
        json!([tx_str("write_alice_bob", "base64"), {"encoding": "base64"}]),
    );
    assert_eq!(sent["result"], json!(tx_str("write_alice_bob", "signature")));
    let st = rpc(
        &base.url(),
        "getSignatureStatuses",
        json!([[
            tx_str("write_alice_bob", "signature"),
            tx_str("read_alice", "signature")
        ]]),
    );
    assert_eq!(st["result"]["value"].as_array().unwrap().len(), 2);
    assert_eq!(st["result"]["value"][0]["confirmationStatus"], "finalized");
    assert_eq!(st["result"]["value"][1], Value::Null);
    assert_eq!(base.count("sendTransaction"), 2);
    assert_eq!(base.count_for("getAccountInfo", &alice), 1);
}

#[test]
fn fake_delegation_writes_the_record_and_notifies_on_port_plus_one() {
    let base = SolanaFake::base();
    let er = SolanaFake::er(&pk("er1_identity"));
    assert_eq!(
        base.ws_url(),
        format!("ws://127.0.0.1:{}", base.port() + 1),
        "WebSocket on HTTP port + 1"
    );
    let erin = pk("erin");
    let record = record_of("erin");
    base.set_lamports(&erin, 5_000);
    let ws_addr: std::net::SocketAddr = base.ws_url().trim_start_matches("ws://").parse().unwrap();
    let mut ws = SolWs::connect(ws_addr, "/");
    let sub = ws.subscribe(
        "accountSubscribe",
        json!([record, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    let acc_sub = ws.subscribe("accountSubscribe", json!([erin, {"encoding": "base64"}]));
    assert_ne!(sub, acc_sub);
    base.delegate(&erin, &er.identity());

    let n = ws
        .notification_where("accountNotification", WS_WAIT, |n| n["subscription"] == sub)
        .expect("record notification");
    let v = &n["result"]["value"];
    assert_eq!(v["owner"], DELEGATION_PROGRAM);
    assert_eq!(v["lamports"], RECORD_LAMPORTS);
    let data = b64(v["data"][0].as_str().unwrap());
    assert_eq!(data.len(), 96);
    assert_eq!(u64::from_le_bytes(data[..8].try_into().unwrap()), 100);
    assert_eq!(b58(&data[8..40]), er.identity());
    assert_eq!(b58(&data[40..72]), SYSTEM_PROGRAM, "original owner");
    let n = ws
        .notification_where("accountNotification", WS_WAIT, |n| n["subscription"] == acc_sub)
        .expect("account notification");
    assert_eq!(n["result"]["value"]["owner"], DELEGATION_PROGRAM);

    base.undelegate(&erin);
    let n = ws
        .notification_where("accountNotification", WS_WAIT, |n| n["subscription"] == sub)
        .expect("closed record notification");
    assert_eq!(n["result"]["value"]["lamports"], 0);
    assert_eq!(n["result"]["value"]["owner"], SYSTEM_PROGRAM);
    assert!(base.account(&record).is_none());
    assert_eq!(base.account(&erin).unwrap().owner, SYSTEM_PROGRAM);

    // Signatures: subscribe before landing, hear it once when it lands.
    base.hold_signatures(true);
    let sig = tx_str("transfer_payer_alice", "signature");
    rpc(
        &base.url(),
        "sendTransaction",
        json!([tx_str("transfer_payer_alice", "base58")]),
    );
    let ssub = ws.subscribe("signatureSubscribe", json!([sig, {"commitment": "confirmed"}]));
    assert!(ws
        .notification("signatureNotification", Duration::from_millis(200))
        .is_none());
    base.land(&sig);
    let n = ws
        .notification("signatureNotification", WS_WAIT)
        .expect("signature notification");
    assert_eq!(n["subscription"], ssub);
    assert_eq!(n["result"]["value"]["err"], Value::Null);
    // Slots.
    let slot_sub = ws.subscribe("slotSubscribe", json!([]));
    base.advance(1);
    let n = ws.notification("slotNotification", WS_WAIT).expect("slot notification");
    assert_eq!(n["subscription"], slot_sub);
    assert_eq!(n["result"]["slot"], base.slot());
    assert_eq!(base.drop_websockets(), 1);
}
