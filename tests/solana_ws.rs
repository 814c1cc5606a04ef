//! The Solana magic router over WebSocket, black box: accountSubscribe follows an account across delegation
//! changes under one client subscription id, slot and signature subscriptions reach the right side,
//! unsubscribes answer true, Prism listens on its port and on port + 1, and a dropped base-layer socket puts
//! accounts in limbo (refetched before routing, resubscribed and refetched after the reconnect).

use crate::support::solana_fake::*;
use crate::support::wait_until;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);
const ON_BASE: u64 = 1_111;
const ON_ER1: u64 = 2_222;

fn seed(m: &Magic, name: &str) -> String {
    let key = pk(name);
    m.base.set_lamports(&key, ON_BASE);
    m.er1.set_account(&key, Account::new(ON_ER1, &pk("program"), &[]));
    key
}

fn ws(m: &Magic) -> SolWs {
    SolWs::connect(m.prism.addr(), "/")
}

fn plus_one(m: &Magic) -> SocketAddr {
    let a = m.prism.addr();
    SocketAddr::new(a.ip(), a.port() + 1)
}

fn lamports(m: &Magic, key: &str) -> u64 {
    let r = m.result(
        "getAccountInfo",
        json!([key, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    r["value"]["lamports"]
        .as_u64()
        .unwrap_or_else(|| panic!("getAccountInfo {key}: {r}"))
}

/// Waits for an accountNotification of `sub` whose value has `lamports`.
fn account_note(c: &mut SolWs, sub: u64, lamports: u64, what: &str) -> Value {
    c.notification_where("accountNotification", WAIT, |n| {
        n["subscription"] == json!(sub) && n["result"]["value"]["lamports"] == json!(lamports)
    })
    .unwrap_or_else(|| panic!("{what}: no accountNotification with lamports {lamports} on subscription {sub}"))
}

#[test]
fn a_followed_account_never_shows_the_base_layers_delegated_copy() {
    // Delegating rewrites the account's owner on the base layer to the delegation program, and the base
    // layer notifies its subscribers of that copy; the client's subscription must go straight from the last
    // real base state to the ER's state.
    let m = Magic::start();
    let alice = seed(&m, "alice");
    let mut c = ws(&m);
    let sub = c.subscribe(
        "accountSubscribe",
        json!([alice, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    assert!(wait_until(WAIT, || m.base.account_subs(&alice) >= 1));
    m.base.delegate(&alice, &pk("er1_identity"));
    assert!(
        wait_until(WAIT, || m.er1.account_subs(&alice) >= 1),
        "delegated alice: subscription not moved to the ER"
    );
    m.er1.set_account(&alice, Account::new(ON_ER1 + 7, &pk("program"), &[]));
    let mut seen = Vec::new();
    let n = c.notification_where("accountNotification", WAIT, |n| {
        seen.push(n["result"]["value"]["owner"].clone());
        n["subscription"] == json!(sub) && n["result"]["value"]["lamports"] == json!(ON_ER1 + 7)
    });
    assert!(
        n.is_some(),
        "no ER notification after the delegation; saw owners {seen:?}"
    );
    assert!(
        !seen.iter().any(|o| o == DELEGATION_PROGRAM),
        "the client saw the base layer's delegated copy: owners {seen:?}"
    );
}

#[test]
fn websocket_is_served_on_the_listen_port_and_on_port_plus_one() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    m.base.delegate(&alice, &pk("er1_identity"));
    for addr in [m.prism.addr(), plus_one(&m)] {
        let mut c = SolWs::connect(addr, "/");
        let v = c.call("getSlot", json!([]));
        assert_eq!(v["result"], json!(m.base.slot()), "getSlot over WS on {addr}: {v}");
        // Plain calls over the socket follow the same routing as over HTTP.
        let v = c.call("getAccountInfo", json!([alice, {"encoding": "base64"}]));
        assert_eq!(
            v["result"]["value"]["lamports"],
            json!(ON_ER1),
            "delegated alice over WS on {addr}: {v}"
        );
        let sub = c.subscribe("slotSubscribe", json!([]));
        assert!(
            wait_until(WAIT, || m.base.slot_subs() >= 1),
            "no upstream slotSubscribe"
        );
        m.base.advance(1);
        let n = c
            .notification_where("slotNotification", WAIT, |n| {
                n["result"]["slot"] == json!(m.base.slot())
            })
            .unwrap_or_else(|| panic!("no slotNotification on {addr}"));
        assert_eq!(n["subscription"], json!(sub));
        let r = c.call("slotUnsubscribe", json!([sub]));
        assert_eq!(r["result"], json!(true), "{r}");
        c.close();
        // Released upstream, so the next round's wait proves its own subscription.
        assert!(
            wait_until(WAIT, || m.base.slot_subs() == 0),
            "slot subscription kept upstream after the client unsubscribed"
        );
    }
}

#[test]
fn account_subscription_follows_the_account_across_delegation_changes() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    let mut c = ws(&m);
    let sub = c.subscribe(
        "accountSubscribe",
        json!([alice, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    assert!(
        wait_until(WAIT, || m.base.account_subs(&alice) >= 1),
        "undelegated alice: subscribed on base"
    );
    assert_eq!(m.er1.account_subs(&alice), 0);
    m.base.set_lamports(&alice, ON_BASE + 1);
    account_note(&mut c, sub, ON_BASE + 1, "base change");

    m.base.delegate(&alice, &pk("er1_identity"));
    assert!(
        wait_until(WAIT, || m.er1.account_subs(&alice) >= 1),
        "delegated alice: subscription not moved to the ER"
    );
    m.er1.set_account(&alice, Account::new(ON_ER1 + 1, &pk("program"), &[]));
    let n = account_note(&mut c, sub, ON_ER1 + 1, "ER change after delegation");
    assert_eq!(n["result"]["value"]["owner"], json!(pk("program")));
    // Base changes no longer reach the client.
    m.base.set_lamports(&alice, ON_BASE + 2);
    m.er1.set_account(&alice, Account::new(ON_ER1 + 2, &pk("program"), &[]));
    let n = c
        .notification("accountNotification", WAIT)
        .expect("a notification after the ER change");
    assert_eq!(
        n["result"]["value"]["lamports"],
        json!(ON_ER1 + 2),
        "base-layer change leaked to a client of a delegated account: {n}"
    );

    m.base.undelegate(&alice);
    assert!(
        wait_until(WAIT, || m.base.account_subs(&alice) >= 1
            && m.er1.account_subs(&alice) == 0),
        "undelegated alice: subscription not moved back to base (base {}, er {})",
        m.base.account_subs(&alice),
        m.er1.account_subs(&alice)
    );
    m.base.set_lamports(&alice, ON_BASE + 3);
    account_note(&mut c, sub, ON_BASE + 3, "base change after undelegation");

    let r = c.call("accountUnsubscribe", json!([sub]));
    assert_eq!(r["result"], json!(true), "{r}");
    assert!(
        wait_until(WAIT, || m.base.account_subs(&alice) == 0),
        "upstream account subscription kept after the last client left"
    );
}

#[test]
fn slot_subscription_follows_the_callers_blockhash_origin() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    m.base.delegate(&alice, &pk("er1_identity"));
    // This caller (no keys, no session header: the shared caller) took an ER blockhash.
    m.result("getBlockhashForAccounts", json!([[alice]]));
    let mut c = ws(&m);
    let sub = c.subscribe("slotSubscribe", json!([]));
    assert!(
        wait_until(WAIT, || m.er1.slot_subs() >= 1),
        "slotSubscribe did not reach the ER"
    );
    m.er1.advance(1);
    let n = c
        .notification_where("slotNotification", WAIT, |n| n["result"]["slot"] == json!(m.er1.slot()))
        .expect("ER slot notification");
    assert_eq!(n["subscription"], json!(sub));
}

#[test]
fn signature_subscription_goes_to_the_side_the_transaction_went_to() {
    let m = Magic::start();
    seed(&m, "alice");
    m.base.delegate(&pk("alice"), &pk("er1_identity"));
    m.er1.hold_signatures(true);
    let sig = tx_str("write_alice_er", "signature");
    let v = m.call("sendTransaction", json!([tx_str("write_alice_er", "base58")]));
    assert_eq!(v["result"], json!(sig), "{v}");
    let mut c = ws(&m);
    let sub = c.subscribe("signatureSubscribe", json!([sig, {"commitment": "confirmed"}]));
    assert!(
        wait_until(WAIT, || m.er1.signature_subs(&sig) >= 1),
        "signatureSubscribe did not reach the ER"
    );
    assert_eq!(m.base.signature_subs(&sig), 0);
    m.er1.land(&sig);
    let n = c
        .notification("signatureNotification", WAIT)
        .expect("signatureNotification from the ER");
    assert_eq!(n["subscription"], json!(sub), "{n}");
    assert_eq!(n["result"]["value"]["err"], Value::Null, "{n}");

    // And on the base layer for a base transaction; unsubscribe answers true.
    m.base.hold_signatures(true);
    let sig2 = tx_str("read_alice", "signature");
    m.call("sendTransaction", json!([tx_str("read_alice", "base58")]));
    let sub2 = c.subscribe("signatureSubscribe", json!([sig2, {"commitment": "confirmed"}]));
    assert!(
        wait_until(WAIT, || m.base.signature_subs(&sig2) >= 1),
        "base signatureSubscribe"
    );
    let r = c.call("signatureUnsubscribe", json!([sub2]));
    assert_eq!(r["result"], json!(true), "{r}");
}

#[test]
fn a_dropped_base_socket_puts_accounts_in_limbo_until_refetched() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    let bob = seed(&m, "bob");
    m.base.delegate(&alice, &pk("er1_identity"));
    assert_eq!(lamports(&m, &alice), ON_ER1);
    assert_eq!(lamports(&m, &bob), ON_BASE);
    let (ra, rb) = (record_of("alice"), record_of("bob"));
    assert!(
        wait_until(WAIT, || m.base.account_subs(&ra) >= 1 && m.base.account_subs(&rb) >= 1),
        "records not subscribed"
    );
    // The base socket dies and cannot come back yet; alice is undelegated meanwhile, unheard.
    m.base.set_ws_refuse(true);
    assert!(m.base.drop_websockets() >= 1);
    m.base.undelegate(&alice);
    let fetched = m.base.count_for("getAccountInfo", &ra);
    assert_eq!(
        lamports(&m, &alice),
        ON_BASE,
        "a limbo account must be refetched before routing: alice is no longer delegated"
    );
    assert!(
        m.base.count_for("getAccountInfo", &ra) > fetched,
        "alice's record was not refetched"
    );
    // The socket comes back: Prism resubscribes (confirmed) and refetches what it covered (bob too).
    let bob_fetches = m.base.count_for("getAccountInfo", &rb);
    m.base.set_ws_refuse(false);
    assert!(
        wait_until(WAIT, || m.base.account_subs(&rb) >= 1),
        "bob's record not resubscribed after the reconnect"
    );
    assert!(
        wait_until(WAIT, || m.base.count_for("getAccountInfo", &rb) > bob_fetches),
        "bob's record not refetched after the reconnect"
    );
    // And delegation news flows again.
    m.base.delegate(&bob, &pk("er1_identity"));
    assert!(
        wait_until(WAIT, || lamports(&m, &bob) == ON_ER1),
        "bob never moved to the ER"
    );
}

#[test]
fn a_client_subscription_survives_an_er_socket_drop_with_the_same_id() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    m.base.delegate(&alice, &pk("er1_identity"));
    let mut c = ws(&m);
    let sub = c.subscribe(
        "accountSubscribe",
        json!([alice, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    assert!(
        wait_until(WAIT, || m.er1.account_subs(&alice) >= 1),
        "subscribed on the ER"
    );
    let accepted = m.er1.ws_accepted();
    assert!(m.er1.drop_websockets() >= 1);
    assert!(
        wait_until(WAIT, || m.er1.ws_accepted() > accepted
            && m.er1.account_subs(&alice) >= 1),
        "Prism did not resubscribe on the ER after its socket dropped"
    );
    m.er1.set_account(&alice, Account::new(ON_ER1 + 5, &pk("program"), &[]));
    account_note(&mut c, sub, ON_ER1 + 5, "ER change after the ER socket came back");
}

#[test]
fn an_undelegation_missed_while_the_base_socket_was_down_moves_the_client_subscription_back() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    m.base.delegate(&alice, &pk("er1_identity"));
    let mut c = ws(&m);
    let sub = c.subscribe(
        "accountSubscribe",
        json!([alice, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    assert!(
        wait_until(WAIT, || m.er1.account_subs(&alice) >= 1),
        "subscribed on the ER"
    );
    let record = record_of("alice");
    assert!(
        wait_until(WAIT, || m.base.account_subs(&record) >= 1),
        "record subscribed"
    );
    // The base socket dies; alice is undelegated while nobody listens; then the socket comes back.
    m.base.set_ws_refuse(true);
    assert!(m.base.drop_websockets() >= 1);
    m.base.undelegate(&alice);
    m.base.set_ws_refuse(false);
    assert!(
        wait_until(WAIT, || m.base.account_subs(&alice) >= 1
            && m.er1.account_subs(&alice) == 0),
        "after the reconnect's refetch, alice's client subscription must follow her back to base (base {}, ER {})",
        m.base.account_subs(&alice),
        m.er1.account_subs(&alice)
    );
    m.base.set_lamports(&alice, ON_BASE + 7);
    account_note(&mut c, sub, ON_BASE + 7, "base change after the missed undelegation");
}

#[test]
fn a_limbo_account_whose_record_cannot_be_read_is_not_routed_on_a_guess() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    m.base.delegate(&alice, &pk("er1_identity"));
    assert_eq!(lamports(&m, &alice), ON_ER1);
    assert!(wait_until(WAIT, || m.base.account_subs(&record_of("alice")) >= 1));
    m.base.set_ws_refuse(true);
    assert!(m.base.drop_websockets() >= 1);
    m.base.fail_method(
        "getAccountInfo",
        Some(json!({"code": -32005, "message": "Node is unhealthy"})),
    );
    let v = m.call("getBalance", json!([alice]));
    if let Some(err) = v.get("error") {
        assert_eq!(err["code"], -32603, "{v}");
        assert!(
            err["message"]
                .as_str()
                .unwrap_or("")
                .to_ascii_lowercase()
                .contains("delegation"),
            "{v}"
        );
    } else {
        // Served from what it knew before the drop would be a guess as well, unless by the ER: alice was
        // delegated there and no fact says otherwise; the base layer is never asked on a guess.
        assert_eq!(v["result"]["value"], json!(ON_ER1), "{v}");
    }
    assert_eq!(
        m.base.count_for("getBalance", &alice),
        0,
        "limbo account routed to base on a guess"
    );
}

#[test]
fn two_clients_on_one_account_keep_their_own_subscriptions_and_encodings() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    let mut c1 = ws(&m);
    let mut c2 = SolWs::connect(plus_one(&m), "/");
    let s1 = c1.subscribe(
        "accountSubscribe",
        json!([alice, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    let s2 = c2.subscribe(
        "accountSubscribe",
        json!([alice, {"encoding": "base58", "commitment": "confirmed"}]),
    );
    // Each client's own upstream subscription (their encodings differ) is live before the change.
    let has = |enc: &str| {
        m.base.account_sub_list().iter().any(|s| {
            matches!(s, SubKind::Account { pubkey, encoding, .. } if *pubkey == alice && encoding.as_deref() == Some(enc))
        })
    };
    assert!(
        wait_until(WAIT, || has("base64") && has("base58")),
        "both clients' subscriptions on base: {:?}",
        m.base.account_sub_list()
    );
    m.base
        .set_account(&alice, Account::new(ON_BASE + 1, SYSTEM_PROGRAM, b"abc"));
    let n1 = account_note(&mut c1, s1, ON_BASE + 1, "client 1");
    let n2 = account_note(&mut c2, s2, ON_BASE + 1, "client 2");
    assert_eq!(
        n1["result"]["value"]["data"],
        json!(["YWJj", "base64"]),
        "client 1 asked base64: {n1}"
    );
    assert_eq!(
        n2["result"]["value"]["data"],
        json!([b58(b"abc"), "base58"]),
        "client 2 asked base58: {n2}"
    );
    // Client 1 leaves; client 2 keeps hearing, on base and after the move to the ER.
    assert_eq!(c1.call("accountUnsubscribe", json!([s1]))["result"], json!(true));
    m.base.set_lamports(&alice, ON_BASE + 2);
    account_note(&mut c2, s2, ON_BASE + 2, "client 2 after client 1 left");
    m.base.delegate(&alice, &pk("er1_identity"));
    assert!(wait_until(WAIT, || m.er1.account_subs(&alice) >= 1), "moved to the ER");
    m.er1
        .set_account(&alice, Account::new(ON_ER1 + 3, &pk("program"), b"xyz"));
    let n = account_note(&mut c2, s2, ON_ER1 + 3, "client 2 after the move");
    assert_eq!(n["result"]["value"]["data"], json!([b58(b"xyz"), "base58"]), "{n}");
    assert!(
        c1.notification("accountNotification", Duration::from_millis(300))
            .is_none(),
        "client 1 unsubscribed but still hears"
    );
}

/// Not in the written contract, but what a real node guarantees and clients rely on (subscribe, then act,
/// then wait for the notification): once the subscription id comes back, changes are delivered. A slow
/// upstream handshake makes the gap deterministic.
#[test]
fn a_change_right_after_the_subscription_id_comes_back_is_delivered() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    m.base.set_ws_accept_delay(Some(Duration::from_millis(300)));
    let mut c = ws(&m);
    let sub = c.subscribe(
        "accountSubscribe",
        json!([alice, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    m.base.set_lamports(&alice, ON_BASE + 9);
    account_note(
        &mut c,
        sub,
        ON_BASE + 9,
        "the first change after the subscription id came back",
    );
}

/// What MagicBlock's Resolver does: subscribe to an account's delegation record (on the base layer only,
/// owned by the delegation program) and read every change of it.
#[test]
fn a_subscription_to_a_delegation_record_delivers_every_notification_in_order() {
    let m = Magic::two_ers();
    let dave = seed(&m, "dave");
    let record = record_of("dave");
    let mut c = ws(&m);
    let sub = c.subscribe(
        "accountSubscribe",
        json!([record, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    assert!(wait_until(WAIT, || m.base.account_subs(&record) >= 1));
    let mut owners = Vec::new();
    let mut next = |c: &mut SolWs, what: &str| {
        let n = c
            .notification_where("accountNotification", WAIT, |n| n["subscription"] == json!(sub))
            .unwrap_or_else(|| panic!("{what}: no notification of the record's subscription"));
        owners.push(n["result"]["value"]["owner"].clone());
        n["result"]["value"].clone()
    };
    // Written (delegated to ER 1), rewritten (redelegated to ER 2), closed (undelegated): three notifications,
    // in that order, each the record as the base layer sent it.
    m.base.delegate(&dave, &pk("er1_identity"));
    let v = next(&mut c, "written");
    assert_eq!(v["owner"], DELEGATION_PROGRAM, "{v}");
    assert_eq!(v["lamports"], json!(RECORD_LAMPORTS), "{v}");
    let data = record_data(&pk("er1_identity"), SYSTEM_PROGRAM, m.base.slot(), ON_BASE);
    use base64::Engine as _;
    assert_eq!(
        v["data"][0],
        json!(base64::engine::general_purpose::STANDARD.encode(&data)),
        "{v}"
    );
    m.base.delegate(&dave, &pk("er2_identity"));
    let v = next(&mut c, "changed");
    assert_eq!(v["owner"], DELEGATION_PROGRAM, "{v}");
    m.base.undelegate(&dave);
    let v = next(&mut c, "closed");
    assert_eq!(v["lamports"], json!(0), "{v}");
    assert_eq!(v["owner"], SYSTEM_PROGRAM, "{v}");
    // It never left the base layer, and no ER was asked about it.
    assert_eq!(m.base.account_subs(&record), 1);
    assert_eq!(m.er1.account_subs(&record) + m.er2().account_subs(&record), 0);
    assert_eq!(m.er1.count_for("accountSubscribe", &record), 0);
    assert!(
        c.notification("accountNotification", Duration::from_millis(200))
            .is_none(),
        "{owners:?}"
    );
}

#[test]
fn sysvar_subscriptions_stay_on_the_base_layer_without_a_record_lookup() {
    let m = Magic::start();
    let clock = "SysvarC1ock11111111111111111111111111111111";
    m.base.set_account(
        clock,
        Account::new(1_169_280, "Sysvar1111111111111111111111111111111111111", &[0; 40]),
    );
    let mut c = ws(&m);
    let sub = c.subscribe("accountSubscribe", json!([clock, {"encoding": "base64"}]));
    assert!(wait_until(WAIT, || m.base.account_subs(clock) >= 1));
    m.base.set_account(
        clock,
        Account::new(1_169_281, "Sysvar1111111111111111111111111111111111111", &[1; 40]),
    );
    account_note(&mut c, sub, 1_169_281, "the clock moved");
    let record = crate::support::solana_fake::delegation_record(clock);
    assert_eq!(
        m.base.count_for("getAccountInfo", &record),
        0,
        "a sysvar's record was read"
    );
    assert_eq!(m.base.account_subs(&record), 0, "a sysvar's record was subscribed");
}
