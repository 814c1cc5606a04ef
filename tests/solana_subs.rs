//! Solana subscriptions at scale through the real binary (`crates/solana/src/subs.rs`): every client's
//! subscriptions share a few upstream sockets per side (at most `limits.solana_subscriptions_per_socket`
//! each), identical ones share one upstream subscription with each client keeping its own id, a lost socket
//! is replayed and what changed while it was down is delivered once, and a notification never overtakes
//! the answer that gave the client its subscription id.

use std::time::Duration;

use crate::support::solana_fake::*;
use crate::support::wait_until;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

fn ws(m: &Magic) -> SolWs {
    SolWs::connect(m.prism.addr(), "/")
}

fn account(name: &str, i: usize) -> String {
    b58(&{
        let mut k = [0u8; 32];
        k[..name.len()].copy_from_slice(name.as_bytes());
        k[31] = i as u8;
        k[30] = (i >> 8) as u8;
        k
    })
}

fn sub_params(key: &str) -> Value {
    json!([key, {"encoding": "base64", "commitment": "confirmed"}])
}

/// Waits for `sub`'s accountNotification with `lamports`; panics naming `what` when none comes.
fn note(c: &mut SolWs, sub: u64, lamports: u64, what: &str) -> Value {
    c.notification_where("accountNotification", WAIT, |n| {
        n["subscription"] == json!(sub) && n["result"]["value"]["lamports"] == json!(lamports)
    })
    .unwrap_or_else(|| panic!("{what}: no accountNotification with lamports {lamports} on subscription {sub}"))
}

#[test]
fn thirty_clients_following_five_accounts_each_share_a_few_upstream_sockets_per_side() {
    // Twenty subscriptions a socket: 30 x 4 base accounts need 6 base sockets, 30 ER accounts 2.
    // Clients that are not read for a while are not idle ones to drop.
    let m = Magic::start_with(false, |b| {
        b.limit("solana_subscriptions_per_socket", 20)
            .limit("idle_timeout_ms", 60_000)
    });
    let mut clients = Vec::new();
    for c in 0..30 {
        let keys: Vec<String> = (0..5).map(|j| account("tab", c * 5 + j)).collect();
        for k in &keys {
            m.base.set_lamports(k, 1_000);
        }
        // The first of each client's accounts is delegated to the ER.
        m.er1.set_account(&keys[0], Account::new(2_000, &pk("program"), &[]));
        m.base.delegate(&keys[0], &pk("er1_identity"));
        let mut ws = ws(&m);
        let subs: Vec<u64> = keys
            .iter()
            .map(|k| ws.subscribe("accountSubscribe", sub_params(k)))
            .collect();
        clients.push((ws, keys, subs));
    }
    // One base socket carries the delegation records (Prism's own); the clients' 150 share 8 more.
    let (base_open, er_open) = (m.base.ws_open(), m.er1.ws_open());
    eprintln!("30 clients x 5 accounts: {base_open} base sockets (1 for records), {er_open} ER sockets");
    assert!(base_open <= 1 + 6, "base sockets: {base_open}");
    assert!(er_open <= 2, "ER sockets: {er_open}");
    let per = |f: &SolanaFake, keys: &[String]| keys.iter().map(|k| f.account_subs(k)).sum::<usize>();
    let base_keys: Vec<String> = clients.iter().flat_map(|c| c.1[1..].to_vec()).collect();
    let er_keys: Vec<String> = clients.iter().map(|c| c.1[0].clone()).collect();
    assert_eq!(
        per(&m.base, &base_keys),
        120,
        "one upstream subscription per followed base account"
    );
    assert_eq!(
        per(&m.er1, &er_keys),
        30,
        "one upstream subscription per followed ER account"
    );
    // Every change reaches its client once, under the id it was given.
    for (_, keys, _) in &clients {
        m.er1.set_account(&keys[0], Account::new(2_001, &pk("program"), &[]));
        for k in &keys[1..] {
            m.base.set_lamports(k, 1_001);
        }
    }
    for (i, (ws, _, subs)) in clients.iter_mut().enumerate() {
        // The ER's and the base layer's notifications come over different sockets, in any order.
        let mut want: std::collections::HashMap<u64, u64> = subs.iter().map(|&s| (s, 1_001)).collect();
        want.insert(subs[0], 2_001);
        while !want.is_empty() {
            let n = ws
                .notification("accountNotification", WAIT)
                .unwrap_or_else(|| panic!("client {i}: no notification for {want:?}"));
            let sub = n["subscription"].as_u64().unwrap_or(0);
            assert_eq!(
                want.remove(&sub).map(|l| json!(l)),
                Some(n["result"]["value"]["lamports"].clone()),
                "client {i}: unexpected, or a second, notification: {n}"
            );
        }
        assert!(
            ws.notification("accountNotification", Duration::from_millis(50))
                .is_none(),
            "client {i}: a notification twice"
        );
    }
    // When every client is gone, so are the sockets that carried them (the records' stays).
    for (ws, _, _) in clients {
        ws.close();
    }
    assert!(
        wait_until(WAIT, || m.base.ws_open() == 1 && m.er1.ws_open() == 0),
        "sockets left open: base {}, ER {}",
        m.base.ws_open(),
        m.er1.ws_open()
    );
    assert_eq!(per(&m.base, &base_keys) + per(&m.er1, &er_keys), 0);
}

#[test]
fn identical_subscriptions_share_one_upstream_subscription_and_each_client_keeps_its_id() {
    let m = Magic::start();
    let alice = account("alice", 1);
    m.base.set_lamports(&alice, 10);
    let mut clients: Vec<(SolWs, u64)> = (0..10)
        .map(|_| {
            let mut c = ws(&m);
            let s = c.subscribe("accountSubscribe", sub_params(&alice));
            (c, s)
        })
        .collect();
    assert_eq!(m.base.account_subs(&alice), 1, "ten clients, one upstream subscription");
    m.base.set_lamports(&alice, 11);
    for (i, (c, s)) in clients.iter_mut().enumerate() {
        note(c, *s, 11, &format!("client {i}"));
    }
    // Leaving one by one: the upstream subscription goes with the last.
    let (mut first, s) = clients.remove(0);
    assert_eq!(first.call("accountUnsubscribe", json!([s]))["result"], json!(true));
    m.base.set_lamports(&alice, 12);
    for (i, (c, s)) in clients.iter_mut().enumerate() {
        note(c, *s, 12, &format!("client {} after the first left", i + 1));
    }
    assert!(first
        .notification("accountNotification", Duration::from_millis(100))
        .is_none());
    assert_eq!(m.base.account_subs(&alice), 1);
    for (c, _) in clients {
        c.close();
    }
    assert!(
        wait_until(WAIT, || m.base.account_subs(&alice) == 0),
        "upstream subscription kept after its last client left"
    );
}

#[test]
fn a_lost_socket_is_replayed_and_a_change_missed_meanwhile_is_delivered_once() {
    let m = Magic::start();
    let bob = account("bob", 2);
    let carol = account("carol", 3);
    m.base.set_lamports(&bob, 100);
    m.base.set_lamports(&carol, 300);
    let mut c = ws(&m);
    let sb = c.subscribe("accountSubscribe", sub_params(&bob));
    let sc = c.subscribe("accountSubscribe", sub_params(&carol));
    m.base.set_lamports(&bob, 101);
    note(&mut c, sb, 101, "before the drop");
    // The base layer's sockets drop and stay down while bob changes: nobody hears it.
    m.base.set_ws_refuse(true);
    assert!(m.base.drop_websockets() >= 1);
    m.base.set_lamports(&bob, 102);
    m.base.set_ws_refuse(false);
    // Back: resubscribed, bob's missed change is read and delivered; carol did not change and is not.
    note(&mut c, sb, 102, "the change missed while the socket was down");
    assert!(wait_until(WAIT, || m.base.account_subs(&carol) >= 1));
    m.base.set_lamports(&bob, 103);
    note(&mut c, sb, 103, "the next change, on the new socket");
    let mut seen = Vec::new();
    while let Some(n) = c.notification("accountNotification", Duration::from_millis(200)) {
        seen.push(n);
    }
    assert!(
        seen.is_empty(),
        "delivered more than once, or carol unchanged: {seen:?}"
    );
    m.base.set_lamports(&carol, 301);
    note(&mut c, sc, 301, "carol, same id after the reconnect");
}

#[test]
fn a_signature_that_landed_while_its_socket_was_down_is_delivered_once() {
    let m = Magic::start();
    let alice = pk("alice");
    m.base.set_lamports(&alice, 1);
    m.er1.set_account(&alice, Account::new(5, &pk("program"), &[]));
    m.base.delegate(&alice, &pk("er1_identity"));
    m.er1.hold_signatures(true);
    let sig = tx_str("write_alice_er", "signature");
    let v = m.call("sendTransaction", json!([tx_str("write_alice_er", "base58")]));
    assert_eq!(v["result"], json!(sig), "{v}");
    let mut c = ws(&m);
    let sub = c.subscribe("signatureSubscribe", json!([sig, {"commitment": "confirmed"}]));
    assert!(wait_until(WAIT, || m.er1.signature_subs(&sig) >= 1));
    // The ER's socket drops; the transaction lands while it is down.
    m.er1.set_ws_refuse(true);
    assert!(m.er1.drop_websockets() >= 1);
    m.er1.land(&sig);
    m.er1.set_ws_refuse(false);
    let n = c
        .notification("signatureNotification", WAIT)
        .expect("the signature's notification after the reconnect");
    assert_eq!(n["subscription"], json!(sub), "{n}");
    assert_eq!(n["result"]["value"]["err"], Value::Null, "{n}");
    assert!(
        c.notification("signatureNotification", Duration::from_millis(300))
            .is_none(),
        "a signature notified twice"
    );
    // It ended with its notification: unsubscribing it now is refused, as a node would.
    assert_eq!(c.call("signatureUnsubscribe", json!([sub]))["result"], json!(false));
}

#[test]
fn a_notification_never_comes_before_the_answer_that_gave_its_subscription_id() {
    // A signature that has landed already: the node answers the subscribe and notifies at once.
    let m = Magic::start();
    let sig = tx_str("read_alice", "signature");
    m.call("sendTransaction", json!([tx_str("read_alice", "base58")]));
    assert!(m.base.knows_signature(&sig));
    for round in 0..5 {
        let mut c = ws(&m);
        c.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "signatureSubscribe", "params": [sig, {"commitment": "confirmed"}]}));
        let first = c.next(WAIT).expect("an answer");
        assert_eq!(
            first["id"],
            json!(7),
            "round {round}: the first frame must be the answer: {first}"
        );
        let id = first["result"].as_u64().expect("a subscription id");
        let n = c.next(WAIT).expect("the notification");
        assert_eq!(n["method"], "signatureNotification", "{n}");
        assert_eq!(n["params"]["subscription"], json!(id), "{n}");
    }
}
