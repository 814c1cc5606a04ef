//! The Solana magic router over HTTP, black box: a real Prism in front of a fake base layer and fake ephemeral
//! rollups (tests/support/solana_fake.rs), real signed transactions from tests/fixtures/solana. One test per
//! routing rule of the contract (delegation status, reads, getMultipleAccounts, transactions, race repair,
//! signatures, blockhashes, compat methods, unsupported and base-only methods, batches).
//!
//! Which side served a call is read from the fakes' call counters and from the answer itself: every account
//! has different lamports on the base layer and on each ER.

use crate::support::solana_fake::*;
use crate::support::wait_until;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);
/// Lamports an account holds on the base layer / ER 1 / ER 2 (so an answer tells where it came from).
const ON_BASE: u64 = 1_111;
const ON_ER1: u64 = 2_222;
const ON_ER2: u64 = 3_333;

fn acct(pubkey: &str) -> Value {
    json!([pubkey, {"encoding": "base64", "commitment": "confirmed"}])
}

/// Puts `name` on every side with that side's lamports (owner: the fixture program on the ERs).
fn seed(m: &Magic, name: &str) -> String {
    let key = pk(name);
    m.base.set_lamports(&key, ON_BASE);
    m.er1.set_account(&key, Account::new(ON_ER1, &pk("program"), &[]));
    if let Some(er2) = &m.er2 {
        er2.set_account(&key, Account::new(ON_ER2, &pk("program"), &[]));
    }
    key
}

/// The lamports in a getAccountInfo answer through Prism (panics on an error or a null value).
fn lamports(m: &Magic, key: &str) -> u64 {
    let r = m.result("getAccountInfo", acct(key));
    r["value"]["lamports"]
        .as_u64()
        .unwrap_or_else(|| panic!("getAccountInfo {key}: no lamports in {r}"))
}

/// Seeds `name`, delegates it on the base layer to `authority`, and returns its key.
fn delegated(m: &Magic, name: &str, authority: &str) -> String {
    let key = seed(m, name);
    m.base.delegate(&key, authority);
    key
}

fn msg(err: &Value) -> String {
    err["message"].as_str().unwrap_or("").to_ascii_lowercase()
}

// ---- delegation status ---------------------------------------------------------------------------------

#[test]
fn any_path_serves_the_single_network() {
    let m = Magic::start();
    // Client calls carry params Prism's own getSlot probes do not, so the counts tell them apart.
    let params = json!([{"commitment": "confirmed", "minContextSlot": 1}]);
    for path in ["/", "/solana", "/solana/anything"] {
        let v = m.call_at(path, "getSlot", params.clone());
        assert_eq!(v["result"], json!(m.base.slot()), "getSlot on {path}: {v}");
    }
    assert_eq!(m.base.count_params("getSlot", &params), 3);
    assert_eq!(
        m.er1.count_params("getSlot", &params),
        0,
        "getSlot is a base-layer method"
    );
}

/// The web3.js SDK's `getDelegationStatus` POSTs to `${rpcEndpoint}/getDelegationStatus`: with the endpoint
/// written with or without a trailing slash, with the network in the path, and with an API key segment.
#[test]
fn get_delegation_status_is_served_on_the_sdks_path_suffix() {
    let keys = "[[keys]]\nname = \"app\"\nkey = \"app-5e1f\"\n";
    let m = Magic::start_with(false, |b| b.extra_toml(keys));
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    for path in [
        "/solana/app-5e1f/getDelegationStatus",
        "/solana/app-5e1f//getDelegationStatus",
        "/app-5e1f/getDelegationStatus",
    ] {
        let v = m.call_at(path, "getDelegationStatus", json!([alice]));
        assert_eq!(v["result"]["isDelegated"], json!(true), "{path}: {v}");
    }
    let open = Magic::start();
    let bob = seed(&open, "bob");
    for path in [
        "/getDelegationStatus",
        "//getDelegationStatus",
        "/solana/getDelegationStatus",
    ] {
        let v = open.call_at(path, "getDelegationStatus", json!([bob]));
        assert_eq!(v["result"], json!({"isDelegated": false}), "{path}: {v}");
    }
}

#[test]
fn undelegated_account_reads_the_base_layer_after_fetching_its_record_confirmed_base64() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    assert_eq!(lamports(&m, &alice), ON_BASE);
    assert_eq!(
        m.er1.count("getAccountInfo"),
        0,
        "ER asked about an undelegated account"
    );
    // Prism derived the PDA exactly as solders does and fetched it: commitment confirmed, base64.
    let fetches = m.base.params_of("getAccountInfo");
    let record = record_of("alice");
    let f = fetches
        .iter()
        .find(|p| p[0] == json!(record))
        .unwrap_or_else(|| panic!("no getAccountInfo of alice's record {record} on the base layer: {fetches:?}"));
    assert_eq!(f[1]["commitment"], "confirmed", "record fetch {f}");
    assert_eq!(f[1]["encoding"], "base64", "record fetch {f}");
    // ... and keeps it fresh with a confirmed accountSubscribe on the record.
    assert!(
        wait_until(WAIT, || m.base.account_subs(&record) >= 1),
        "no base-layer accountSubscribe on alice's record; live: {:?}",
        m.base.account_sub_list()
    );
    // While the subscription keeps it fresh, reads do not refetch the record (one refetch right after the
    // subscription is confirmed closes the gap between the first read and the subscription; allowed).
    let fetched = m.base.count_for("getAccountInfo", &record);
    for _ in 0..10 {
        assert_eq!(lamports(&m, &alice), ON_BASE);
    }
    let refetched = m.base.count_for("getAccountInfo", &record) - fetched;
    assert!(
        refetched <= 1,
        "the record was refetched {refetched} times over 10 reads although its subscription is live"
    );
    for s in m.base.account_sub_list() {
        if let SubKind::Account { pubkey, commitment, .. } = s {
            if pubkey == record {
                assert_eq!(
                    commitment.as_deref(),
                    Some("confirmed"),
                    "record subscription commitment"
                );
            }
        }
    }
}

#[test]
fn delegated_account_reads_go_to_its_er() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    assert_eq!(lamports(&m, &alice), ON_ER1);
    let b = m.result("getBalance", json!([alice]));
    assert_eq!(b["value"], json!(ON_ER1), "getBalance {b}");
    assert_eq!(
        m.base.count_for("getAccountInfo", &alice),
        0,
        "base asked for a delegated account"
    );
    assert_eq!(
        m.base.count_for("getBalance", &alice),
        0,
        "base asked for a delegated account"
    );
    assert_eq!(m.er1.count_for("getAccountInfo", &alice), 1);
    assert_eq!(m.er1.count_for("getBalance", &alice), 1);
}

#[test]
fn record_authority_picks_the_er_and_the_default_authority_means_default_er() {
    let m = Magic::two_ers();
    let alice = delegated(&m, "alice", &pk("er2_identity"));
    let bob = delegated(&m, "bob", DEFAULT_PUBKEY);
    let carol = delegated(&m, "carol", &pk("er1_identity"));
    assert_eq!(lamports(&m, &alice), ON_ER2, "alice is delegated to er-2");
    assert_eq!(
        lamports(&m, &bob),
        ON_ER1,
        "a default-authority record means default_er = er-1"
    );
    assert_eq!(lamports(&m, &carol), ON_ER1, "carol is delegated to er-1");
}

/// An account delegated to an ER this router does not serve gets MagicBlock's router error (`UnknownErNode`,
/// -32604) on every call about it, never a guess.
#[test]
fn an_account_delegated_to_an_unknown_er_gets_the_routers_error() {
    let m = Magic::start();
    let stranger = pk("alt_authority");
    let erin = delegated(&m, "erin", &stranger);
    let want = format!("account has been delegated to unknown ER node: {stranger}");
    for (method, params) in [
        ("getAccountInfo", acct(&erin)),
        ("getBalance", json!([erin])),
        ("getDelegationStatus", json!([erin])),
        ("getBlockhashForAccounts", json!([[erin]])),
    ] {
        let e = m.error(method, params);
        assert_eq!(e["code"], -32604, "{method}: {e}");
        assert_eq!(e["message"], json!(want), "{method}: {e}");
    }
    assert_eq!(m.er1.count_for("getAccountInfo", &erin), 0);
}

#[test]
fn records_that_are_not_valid_delegations_leave_the_account_on_base() {
    let m = Magic::start();
    let er = pk("er1_identity");
    let good = record_data(&er, SYSTEM_PROGRAM, 1, 1);
    // Wrong owner, too short, wrong discriminator, zero lamports: none is a delegation.
    let mut wrong_disc = good.clone();
    wrong_disc[0] = 99;
    let cases = [
        ("alice", Account::new(RECORD_LAMPORTS, SYSTEM_PROGRAM, &good)),
        ("bob", Account::new(RECORD_LAMPORTS, DELEGATION_PROGRAM, &good[..80])),
        ("carol", Account::new(RECORD_LAMPORTS, DELEGATION_PROGRAM, &wrong_disc)),
        ("dave", Account::new(0, DELEGATION_PROGRAM, &good)),
    ];
    for (name, record) in cases {
        let key = seed(&m, name);
        m.base.set_record(&key, record.clone());
        assert_eq!(
            lamports(&m, &key),
            ON_BASE,
            "{name}: record {record:?} is not a delegation"
        );
    }
    assert_eq!(m.er1.count("getAccountInfo"), 0);
}

#[test]
fn delegation_and_undelegation_seen_on_the_record_subscription_move_reads() {
    let m = Magic::start();
    let alice = seed(&m, "alice");
    assert_eq!(lamports(&m, &alice), ON_BASE);
    let record = record_of("alice");
    assert!(
        wait_until(WAIT, || m.base.account_subs(&record) >= 1),
        "record subscription"
    );
    m.base.delegate(&alice, &pk("er1_identity"));
    assert!(
        wait_until(WAIT, || lamports(&m, &alice) == ON_ER1),
        "reads never moved to the ER after delegation"
    );
    // Undelegation: the record closes (one notification, lamports 0); reads come back to base.
    let before = m.er1.count_for("getAccountInfo", &alice);
    m.base.undelegate(&alice);
    assert!(
        wait_until(WAIT, || lamports(&m, &alice) == ON_BASE),
        "reads never came back to base after undelegation"
    );
    assert!(m.er1.count_for("getAccountInfo", &alice) >= before);
}

#[test]
fn a_failed_record_fetch_is_never_taken_as_undelegated() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    m.base.fail_method(
        "getAccountInfo",
        Some(json!({"code": -32005, "message": "Node is behind by 42 slots"})),
    );
    for i in 0..3 {
        let v = m.call("getBalance", json!([alice]));
        if let Some(err) = v.get("error") {
            assert_eq!(err["code"], -32603, "attempt {i}: {v}");
            assert!(
                msg(err).contains("delegation"),
                "attempt {i}: error should name delegation status: {v}"
            );
        } else {
            assert_eq!(
                v["result"]["value"],
                json!(ON_ER1),
                "attempt {i}: served, but not by the ER: {v}"
            );
        }
    }
    assert_eq!(
        m.base.count_for("getBalance", &alice),
        0,
        "routed to the base layer on a guess while the status was unknown"
    );
    // An account that is in fact undelegated is not served on a guess either while its record is unreadable.
    let bob = seed(&m, "bob");
    let v = m.call("getBalance", json!([bob]));
    assert_eq!(v["error"]["code"], -32603, "bob's status is unknown: {v}");
    assert!(msg(&v["error"]).contains("delegation"), "{v}");
    assert_eq!(m.base.count_for("getBalance", &bob), 0, "bob routed to base on a guess");
    m.base.fail_method("getAccountInfo", None);
    assert!(
        wait_until(WAIT, || m.call("getBalance", json!([alice]))["result"]["value"]
            == json!(ON_ER1)),
        "once the record can be read, the delegated account is served by the ER"
    );
    assert_eq!(m.base.count_for("getBalance", &alice), 0);
}

// ---- account reads ---------------------------------------------------------------------------------------

/// MagicBlock's Resolver reads an account's delegation record through the router: the record lives only on
/// the base layer (owned by the delegation program, like the base copy of a delegated account, but with no
/// record of its own), so it is served from there, even with a default ER to guess.
#[test]
fn delegation_records_and_sysvars_are_read_from_the_base_layer() {
    let m = Magic::two_ers();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let record = record_of("alice");
    for _ in 0..2 {
        let v = m.result(
            "getAccountInfo",
            json!([record, {"encoding": "base64", "commitment": "confirmed"}]),
        );
        assert_eq!(v["value"]["owner"], DELEGATION_PROGRAM, "the record itself: {v}");
        assert_eq!(v["context"]["slot"], json!(m.base.slot()), "{v}");
    }
    let v = m.result("getMultipleAccounts", json!([[alice, record], {"encoding": "base64"}]));
    assert_eq!(v["value"][0]["lamports"], json!(ON_ER1), "alice from ER 1: {v}");
    assert_eq!(
        v["value"][1]["owner"], DELEGATION_PROGRAM,
        "its record from the base layer: {v}"
    );
    assert_eq!(m.er1.count_for("getAccountInfo", &record), 0);
    assert_eq!(m.er2().count_for("getAccountInfo", &record), 0);
    assert_eq!(m.prism.metric("prism_solana_rerouted_total"), 0.0);
    // The base layer's copy of alice is still never served.
    let v = m.result("getAccountInfo", acct(&alice));
    assert_eq!(v["value"]["lamports"], json!(ON_ER1), "{v}");
    // Sysvars: no record lookup at all.
    let rent = "SysvarRent111111111111111111111111111111111";
    m.base.set_account(
        rent,
        Account::new(1_009_200, "Sysvar1111111111111111111111111111111111111", &[0; 17]),
    );
    let v = m.result("getAccountInfo", acct(rent));
    assert_eq!(v["value"]["lamports"], json!(1_009_200), "{v}");
    assert_eq!(
        m.base
            .count_for("getAccountInfo", &crate::support::solana_fake::delegation_record(rent)),
        0
    );
}

#[test]
fn token_account_balance_routes_by_its_account() {
    let m = Magic::start();
    let (ta, tb) = (pk("token_alice"), pk("token_bob"));
    let mint = pk("program");
    for (key, base_amt, er_amt) in [(&ta, 10u64, 20u64), (&tb, 30, 40)] {
        m.base.set_account(
            key,
            Account::new(
                2_039_280,
                TOKEN_PROGRAM,
                &token_account_data(&mint, &pk("alice"), base_amt),
            ),
        );
        m.er1.set_account(
            key,
            Account::new(
                2_039_280,
                TOKEN_PROGRAM,
                &token_account_data(&mint, &pk("alice"), er_amt),
            ),
        );
    }
    m.base.delegate(&ta, &pk("er1_identity"));
    let a = m.result("getTokenAccountBalance", json!([ta]));
    assert_eq!(a["value"]["amount"], "20", "delegated token account from the ER: {a}");
    let b = m.result("getTokenAccountBalance", json!([tb]));
    assert_eq!(b["value"]["amount"], "30", "undelegated token account from base: {b}");
}

#[test]
fn not_a_token_account_on_base_for_a_just_delegated_account_is_rerouted_to_the_er() {
    let m = Magic::start();
    let ta = pk("token_alice");
    let mint = pk("program");
    m.base.set_account(
        &ta,
        Account::new(2_039_280, TOKEN_PROGRAM, &token_account_data(&mint, &pk("alice"), 10)),
    );
    m.er1.set_account(
        &ta,
        Account::new(2_039_280, TOKEN_PROGRAM, &token_account_data(&mint, &pk("alice"), 20)),
    );
    assert_eq!(m.result("getTokenAccountBalance", json!([ta]))["value"]["amount"], "10");
    // Delegated, and Prism does not hear about it on the record subscription: base now answers "not a
    // Token account" (the delegation program owns the account there); that is the signal to ask the ER.
    m.base.set_notify_accounts(false);
    m.base.delegate(&ta, &pk("er1_identity"));
    let v = m.call("getTokenAccountBalance", json!([ta]));
    assert_eq!(v["result"]["value"]["amount"], "20", "expected the ER's balance: {v}");
}

#[test]
fn an_absent_account_is_null_and_an_upstream_error_is_passed_unchanged() {
    let m = Magic::start();
    let frank = pk("frank");
    let v = m.result("getAccountInfo", acct(&frank));
    assert_eq!(v["value"], Value::Null, "absent account: {v}");
    assert_eq!(v["context"]["slot"], json!(m.base.slot()));
    let err =
        json!({"code": -32016, "message": "Minimum context slot has not been reached", "data": {"contextSlot": 7}});
    m.base.fail_method("getBalance", Some(err.clone()));
    let v = m.call("getBalance", json!([frank]));
    assert_eq!(v["error"], err, "upstream error must come back as sent: {v}");
}

// ---- getMultipleAccounts ---------------------------------------------------------------------------------

#[test]
fn get_multiple_accounts_over_100_keys_is_refused() {
    let m = Magic::start();
    let keys: Vec<String> = (0..101u8).map(|i| b58(&[i.max(1); 32])).collect();
    let err = m.error("getMultipleAccounts", json!([keys, {"encoding": "base64"}]));
    assert_eq!(err["code"], -32602, "{err}");
    assert_eq!(
        m.base.count("getMultipleAccounts") + m.er1.count("getMultipleAccounts"),
        0
    );
}

#[test]
fn get_multiple_accounts_splits_and_merges_in_order_with_every_field_and_the_base_context() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let bob = seed(&m, "bob");
    let carol = delegated(&m, "carol", &pk("er1_identity"));
    let dave = seed(&m, "dave");
    let frank = pk("frank"); // absent everywhere
    m.er1
        .set_account(&carol, Account::new(ON_ER1 + 1, &pk("program"), b"carol on the ER"));
    m.base
        .set_account(&dave, Account::new(ON_BASE + 1, &pk("program"), b"dave on base"));
    let keys = [&alice, &bob, &carol, &dave, &frank];
    let raw = m.raw(
        "getMultipleAccounts",
        json!([keys, {"encoding": "base64", "commitment": "confirmed"}]),
    );
    let v: Value = serde_json::from_slice(&raw).unwrap();
    let vals = v["result"]["value"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(vals.len(), 5, "{v}");
    let lam: Vec<Value> = vals.iter().map(|a| a["lamports"].clone()).collect();
    assert_eq!(
        lam,
        vec![
            json!(ON_ER1),
            json!(ON_BASE),
            json!(ON_ER1 + 1),
            json!(ON_BASE + 1),
            Value::Null
        ],
        "values in request order from the right sides: {v}"
    );
    assert_eq!(vals[4], Value::Null);
    assert_eq!(
        vals[2],
        Account::new(ON_ER1 + 1, &pk("program"), b"carol on the ER").to_json(Some("base64"))
    );
    assert_eq!(
        vals[3],
        Account::new(ON_BASE + 1, &pk("program"), b"dave on base").to_json(Some("base64"))
    );
    // Every value keeps its fields as sent, including a rentEpoch that no f64 can hold.
    let text = String::from_utf8_lossy(&raw);
    assert_eq!(
        text.matches("\"rentEpoch\":18446744073709551615").count(),
        4,
        "rentEpoch must pass byte-exact: {text}"
    );
    assert_eq!(
        v["result"]["context"]["slot"],
        json!(m.base.slot()),
        "split: the base layer's context"
    );
    // Each side was asked only for its own keys.
    for p in m.er1.params_of("getMultipleAccounts") {
        assert_eq!(p[0], json!([alice, carol]), "ER part {p}");
    }
    let base_parts: Vec<Value> = m
        .base
        .params_of("getMultipleAccounts")
        .into_iter()
        .filter(|p| p[0].to_string().contains(&bob))
        .collect();
    assert_eq!(base_parts.len(), 1, "one base part");
    assert_eq!(base_parts[0][0], json!([bob, dave, frank]), "base part");
}

#[test]
fn get_multiple_accounts_on_one_side_passes_its_context_through() {
    let m = Magic::two_ers();
    m.er1.set_slot(11_111);
    m.er2().set_slot(22_222);
    let (bob, dave) = (seed(&m, "bob"), seed(&m, "dave"));
    let v = m.result("getMultipleAccounts", json!([[bob, dave], {"encoding": "base64"}]));
    assert_eq!(
        v["context"],
        json!({"apiVersion": "2.2.0", "slot": m.base.slot()}),
        "all on base: {v}"
    );
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let carol = delegated(&m, "carol", &pk("er1_identity"));
    let v = m.result("getMultipleAccounts", json!([[alice, carol], {"encoding": "base64"}]));
    assert_eq!(
        v["context"],
        json!({"apiVersion": "2.2.0", "slot": 11_111}),
        "all on er-1: {v}"
    );
    // No base part: the first ER's context.
    let erin = delegated(&m, "erin", &pk("er2_identity"));
    let v = m.result("getMultipleAccounts", json!([[alice, erin], {"encoding": "base64"}]));
    assert_eq!(v["value"][0]["lamports"], json!(ON_ER1), "{v}");
    assert_eq!(v["value"][1]["lamports"], json!(ON_ER2), "{v}");
    assert_eq!(
        v["context"]["slot"],
        json!(11_111),
        "no base part: the first ER's context: {v}"
    );
}

#[test]
fn get_multiple_accounts_with_no_key_is_the_base_layers_answer_with_its_context() {
    // web3.js checks the context's slot: Prism must not make up `{"context":{}}` for an empty list.
    let m = Magic::two_ers();
    let before = m.base.count("getMultipleAccounts");
    let v = m.result("getMultipleAccounts", json!([[], {"encoding": "base64"}]));
    assert_eq!(v["value"], json!([]), "{v}");
    assert_eq!(v["context"]["slot"], json!(m.base.slot()), "{v}");
    assert_eq!(
        m.base.count("getMultipleAccounts"),
        before + 1,
        "asked of the base layer once"
    );
}

#[test]
fn priority_fees_follow_the_accounts_they_name() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let bob = seed(&m, "bob");
    let method = "getRecentPrioritizationFees";
    m.result(method, json!([[alice]]));
    assert_eq!(
        (m.er1.count(method), m.base.count(method)),
        (1, 0),
        "an ER account's fees are the ER's"
    );
    m.result(method, json!([[bob]]));
    assert_eq!(
        (m.er1.count(method), m.base.count(method)),
        (1, 1),
        "an undelegated account's, the base layer's"
    );
    m.result(method, json!([]));
    assert_eq!(m.base.count(method), 2, "no account named: the base layer");
    let helius = "getPriorityFeeEstimate";
    m.result(
        helius,
        json!([{"accountKeys": [alice], "options": {"recommended": true}}]),
    );
    assert_eq!((m.er1.count(helius), m.base.count(helius)), (1, 0));
    let e = m.error(method, json!([["not-a-key"]]));
    assert_eq!(e["code"], -32602, "{e}");
}

// ---- transactions ----------------------------------------------------------------------------------------

fn send(m: &Magic, name: &str, base64: bool) -> Value {
    if base64 {
        m.call(
            "sendTransaction",
            json!([tx_str(name, "base64"), {"encoding": "base64"}]),
        )
    } else {
        m.call("sendTransaction", json!([tx_str(name, "base58")]))
    }
}

#[test]
fn send_transaction_with_no_delegated_writable_account_goes_to_base() {
    let m = Magic::start();
    seed(&m, "alice");
    let v = send(&m, "transfer_payer_alice", false);
    assert_eq!(v["result"], json!(tx_str("transfer_payer_alice", "signature")), "{v}");
    assert!(m.base.knows_signature(&tx_str("transfer_payer_alice", "signature")));
    assert_eq!(m.er1.count("sendTransaction"), 0);
}

#[test]
fn send_transaction_writing_a_delegated_account_goes_to_its_er_in_both_encodings() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    for (name, b64) in [("transfer_payer_alice", false), ("write_alice_er", true)] {
        let v = send(&m, name, b64);
        assert_eq!(v["result"], json!(tx_str(name, "signature")), "{name}: {v}");
        assert!(
            m.er1.knows_signature(&tx_str(name, "signature")),
            "{name} did not reach the ER"
        );
    }
    assert_eq!(
        m.base.count("sendTransaction"),
        0,
        "a write to a delegated account reached base"
    );
}

#[test]
fn a_read_only_delegated_account_does_not_move_a_transaction_but_a_delegated_fee_payer_does() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    let v = send(&m, "read_alice", false);
    assert_eq!(v["result"], json!(tx_str("read_alice", "signature")), "{v}");
    assert!(
        m.base.knows_signature(&tx_str("read_alice", "signature")),
        "read-only alice: base"
    );
    assert_eq!(m.er1.count("sendTransaction"), 0);

    let m = Magic::start();
    delegated(&m, "payer", &pk("er1_identity"));
    let v = send(&m, "read_alice", true);
    assert_eq!(v["result"], json!(tx_str("read_alice", "signature")), "{v}");
    assert!(
        m.er1.knows_signature(&tx_str("read_alice", "signature")),
        "delegated fee payer: its ER"
    );
    assert_eq!(m.base.count("sendTransaction"), 0);
}

#[test]
fn writes_to_accounts_of_two_different_ers_are_refused() {
    let m = Magic::two_ers();
    delegated(&m, "alice", &pk("er1_identity"));
    delegated(&m, "bob", &pk("er2_identity"));
    for method in ["sendTransaction", "simulateTransaction"] {
        let v = m.call(method, json!([tx_str("write_alice_bob", "base58")]));
        let err = &v["error"];
        // MagicBlock's router: ConflictingDelegations, -32604.
        assert_eq!(err["code"], -32604, "{method}: {v}");
        assert!(
            msg(err).starts_with("transaction contains accounts that were delegated to different er nodes"),
            "{method}: {v}"
        );
    }
    for f in [&m.base, &m.er1, m.er2()] {
        assert_eq!(
            f.count("sendTransaction") + f.count("simulateTransaction"),
            0,
            "{}",
            f.name()
        );
    }
}

#[test]
fn v0_lookup_table_accounts_are_resolved_on_base_and_route_the_transaction() {
    let alt = fixtures()["alt"]["address"].as_str().unwrap().to_string();
    let sig = tx_str("v0_alt_carol", "signature");
    // carol undelegated: base.
    let m = Magic::start();
    seed(&m, "carol");
    let v = send(&m, "v0_alt_carol", true);
    assert_eq!(v["result"], json!(sig), "{v}");
    assert!(m.base.knows_signature(&sig));
    // carol delegated, reachable only through the table: her ER.
    let m = Magic::start();
    delegated(&m, "carol", &pk("er1_identity"));
    let v = send(&m, "v0_alt_carol", false);
    assert_eq!(v["result"], json!(sig), "{v}");
    assert!(
        m.er1.knows_signature(&sig),
        "a write to delegated carol (from the lookup table) must go to the ER"
    );
    assert_eq!(m.base.count("sendTransaction"), 0);
    assert!(
        m.base.count_for("getAccountInfo", &alt) + m.base.count_mentioning("getMultipleAccounts", &alt) >= 1,
        "the lookup table was not fetched from the base layer"
    );
    // dave is read-only in the table: delegating him alone does not move it.
    let m = Magic::start();
    delegated(&m, "dave", &pk("er1_identity"));
    let v = send(&m, "v0_alt_carol", false);
    assert_eq!(v["result"], json!(sig), "{v}");
    assert!(
        m.base.knows_signature(&sig),
        "read-only table account dave must not move the transaction"
    );
}

#[test]
fn v1_oversized_and_undecodable_transactions_are_refused_before_any_upstream() {
    let m = Magic::start();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("v1 base58", json!([tx_str("v1_message", "base58")]), "v1"),
        (
            "v1 base64",
            json!([tx_str("v1_message", "base64"), {"encoding": "base64"}]),
            "v1",
        ),
        ("oversized base58", json!([tx_str("oversized", "base58")]), "too large"),
        (
            "oversized base64",
            json!([tx_str("oversized", "base64"), {"encoding": "base64"}]),
            "too large",
        ),
        ("not base58", json!(["0OIl-not-base58!"]), ""),
        ("not base64", json!(["***", {"encoding": "base64"}]), ""),
        ("truncated", json!([tx_str("transfer_payer_alice", "base58")[..40]]), ""),
    ];
    for method in ["sendTransaction", "simulateTransaction"] {
        for (what, params, needle) in &cases {
            let v = m.call(method, params.clone());
            assert_eq!(v["error"]["code"], -32602, "{method} {what}: {v}");
            assert!(
                msg(&v["error"]).contains(needle),
                "{method} {what}: message should say {needle:?}: {v}"
            );
        }
    }
    assert_eq!(m.base.count("sendTransaction") + m.er1.count("sendTransaction"), 0);
    assert_eq!(
        m.base.count("simulateTransaction") + m.er1.count("simulateTransaction"),
        0
    );
}

#[test]
fn simulate_transaction_routes_like_send_and_answers_exactly_what_the_upstream_said() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    let v = m.result(
        "simulateTransaction",
        json!([tx_str("write_alice_er", "base64"), {"encoding": "base64"}]),
    );
    assert_eq!(
        v["value"]["logs"],
        json!([format!("Program log: simulated by {}", m.er1.name())]),
        "{v}"
    );
    let v = m.result("simulateTransaction", json!([tx_str("read_alice", "base58")]));
    assert_eq!(
        v["value"]["logs"],
        json!([format!("Program log: simulated by {}", m.base.name())]),
        "{v}"
    );
    // A failed submission comes back exactly as the ER sent it.
    let err = json!({"code": -32002, "message": "Transaction simulation failed: Blockhash not found",
                     "data": {"accounts": null, "err": "BlockhashNotFound", "logs": []}});
    m.er1.fail_method("sendTransaction", Some(err.clone()));
    let v = send(&m, "transfer_payer_alice", false);
    assert_eq!(v["error"], err, "{v}");
    assert_eq!(m.er1.count("sendTransaction"), 1, "sent once");
    assert_eq!(m.base.count("sendTransaction"), 0, "never retried elsewhere");
}

#[test]
fn a_transaction_whose_er_fails_is_sent_once_and_never_elsewhere() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    m.er1.fail_http("sendTransaction", Some(503));
    let v = send(&m, "write_alice_er", true);
    assert!(
        v.get("error").is_some(),
        "an ER that answered 503 cannot have accepted it: {v}"
    );
    assert_eq!(
        m.er1.count("sendTransaction"),
        1,
        "a transaction submission is sent exactly once"
    );
    assert_eq!(
        m.base.count("sendTransaction"),
        0,
        "a delegated write never falls back to base"
    );
}

#[test]
fn a_transaction_whose_answer_is_lost_is_looked_up_on_its_side_and_never_resent() {
    let m = Magic::start_with(false, |b| b.limit("request_deadline_ms", 2000));
    delegated(&m, "alice", &pk("er1_identity"));
    // The ER takes the transaction, then the connection dies before the answer.
    m.er1.lose_answers("sendTransaction", true);
    let v = send(&m, "write_alice_er", true);
    let sig = m.er1.signatures();
    assert_eq!(sig.len(), 1, "the ER took it");
    assert_eq!(v["result"], json!(sig[0]), "its status on the ER says it landed: {v}");
    assert!(m.er1.count("getSignatureStatuses") >= 1, "looked up on the ER");
    assert_eq!(m.base.count("getSignatureStatuses"), 0, "not on the other side");
    assert_eq!(m.er1.count("sendTransaction"), 1, "sent once");
    assert_eq!(m.base.count("sendTransaction"), 0, "never elsewhere");
    // When the ER cannot say (its lookups fail), the client gets -32098 with the signature.
    m.er1.fail_http("getSignatureStatuses", Some(503));
    let v = send(&m, "write_alice_er", false);
    assert_eq!(v["error"]["code"], -32098, "{v}");
    assert_eq!(v["error"]["data"]["signature"], json!(sig[0]), "{v}");
    assert_eq!(m.er1.count("sendTransaction"), 2, "each call sent once");
    assert_eq!(m.base.count("sendTransaction"), 0);
}

#[test]
fn a_transaction_the_er_has_already_processed_is_answered_with_its_signature() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    let sig = send(&m, "write_alice_er", true)["result"].clone();
    assert!(sig.is_string(), "the first submission lands: {sig}");
    // Resent, the ER says it already has it: the client's intent holds, the answer is the signature.
    m.er1.fail_method(
        "sendTransaction",
        Some(json!({"code": -32002, "message": "Transaction simulation failed: This transaction has already been processed",
                    "data": {"err": "AlreadyProcessed", "logs": []}})),
    );
    let v = send(&m, "write_alice_er", true);
    assert_eq!(v["result"], sig, "{v}");
    assert_eq!(m.er1.count("sendTransaction"), 2, "each call sent once");
    assert_eq!(m.base.count("sendTransaction"), 0);
}

#[test]
fn an_unlisted_method_goes_to_base_once_and_is_counted_while_listed_reads_are_not() {
    let m = Magic::start();
    let before = m.base.count("vendor_relayBundle");
    m.base.fail_http("vendor_relayBundle", Some(503));
    let v = m.call("vendor_relayBundle", json!([{"tip": 1000}]));
    assert!(v.get("error").is_some(), "{v}");
    assert_eq!(
        m.base.count("vendor_relayBundle"),
        before + 1,
        "sent once, never retried"
    );
    assert_eq!(m.er1.count("vendor_relayBundle"), 0);
    let _ = m.result("getSlot", json!([]));
    assert_eq!(
        m.prism.metric("prism_unknown_method_calls_total"),
        1.0,
        "only the unlisted call counts"
    );
}

// ---- race repair -------------------------------------------------------------------------------------------

#[test]
fn a_delegation_transaction_makes_prism_watch_the_account_before_it_answers() {
    let m = Magic::start();
    // A slow base-layer WebSocket handshake: the first subscription takes a while to confirm, and the
    // answer must still wait for it.
    m.base.set_ws_accept_delay(Some(Duration::from_millis(300)));
    let erin = seed(&m, "erin");
    let record = record_of("erin");
    let v = send(&m, "delegate_erin", false);
    assert_eq!(v["result"], json!(tx_str("delegate_erin", "signature")), "{v}");
    assert!(
        m.base.knows_signature(&tx_str("delegate_erin", "signature")),
        "the delegation goes to base"
    );
    // Before the answer came back: the record was fetched and is subscribed.
    assert!(
        m.base.count_for("getAccountInfo", &record) >= 1,
        "erin's record was not fetched before answering"
    );
    assert!(
        m.base.account_subs(&record) >= 1,
        "erin's record was not subscribed before answering; live: {:?}",
        m.base.account_sub_list()
    );
    m.base.delegate(&erin, &pk("er1_identity"));
    assert!(
        wait_until(WAIT, || lamports(&m, &erin) == ON_ER1),
        "reads of erin never moved to the ER"
    );
}

#[test]
fn delegate_then_read_at_once_answers_from_the_er() {
    let m = Magic::start();
    let names = ["alice", "bob", "carol", "dave", "frank"];
    let keys: Vec<String> = names.iter().map(|n| seed(&m, n)).collect();
    for k in &keys {
        assert_eq!(lamports(&m, k), ON_BASE);
    }
    for k in &keys {
        m.base.delegate(k, &pk("er1_identity"));
        assert_eq!(lamports(&m, k), ON_ER1, "read right after delegating {k}");
    }
}

#[test]
fn a_base_answer_owned_by_the_delegation_program_is_reasked_of_the_er_even_without_a_notification() {
    let m = Magic::start();
    let (alice, bob, carol) = (seed(&m, "alice"), seed(&m, "bob"), seed(&m, "carol"));
    assert_eq!(lamports(&m, &alice), ON_BASE);
    let v = m.result("getMultipleAccounts", json!([[bob, carol], {"encoding": "base64"}]));
    assert_eq!(v["value"][0]["lamports"], json!(ON_BASE));
    // The delegation's notifications are lost: only the owner in base's answer tells.
    m.base.set_notify_accounts(false);
    m.base.delegate(&alice, &pk("er1_identity"));
    m.base.delegate(&carol, &pk("er1_identity"));
    let v = m.result("getAccountInfo", acct(&alice));
    assert_eq!(v["value"]["lamports"], json!(ON_ER1), "getAccountInfo: {v}");
    assert_ne!(v["value"]["owner"], DELEGATION_PROGRAM);
    let v = m.result("getMultipleAccounts", json!([[bob, carol], {"encoding": "base64"}]));
    assert_eq!(v["value"][0]["lamports"], json!(ON_BASE), "bob stays on base: {v}");
    assert_eq!(
        v["value"][1]["lamports"],
        json!(ON_ER1),
        "carol re-asked of the ER: {v}"
    );
    // Operators see it: the three accounts tracked, two of them delegated. (Whether a read needed the
    // wrong-side repair, counted in prism_solana_rerouted_total, depends on whether the post-subscription
    // record read ran before or after the delegation.)
    assert_eq!(m.prism.metric("prism_solana_tracked_accounts"), 3.0);
    assert_eq!(m.prism.metric("prism_solana_delegated_accounts"), 2.0);
    assert!(m.prism.metric("prism_solana_record_reads_total") >= 3.0);
}

// ---- signatures -------------------------------------------------------------------------------------------

#[test]
fn a_signature_sent_through_prism_is_looked_up_where_it_went() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    let sig = tx_str("write_alice_er", "signature");
    let v = send(&m, "write_alice_er", false);
    assert_eq!(v["result"], json!(sig));
    let base_before = m.base.count("getSignatureStatuses");
    let st = m.result(
        "getSignatureStatuses",
        json!([[sig], {"searchTransactionHistory": true}]),
    );
    let vals = st["value"].as_array().unwrap_or_else(|| panic!("{st}"));
    assert_eq!(vals.len(), 1, "{st}");
    assert_eq!(vals[0]["confirmationStatus"], "finalized", "{st}");
    assert_eq!(
        m.base.count("getSignatureStatuses"),
        base_before,
        "a remembered signature went to base"
    );
    assert_eq!(m.er1.count("getSignatureStatuses"), 1);
    let t = m.result(
        "getTransaction",
        json!([sig, {"encoding": "base64", "maxSupportedTransactionVersion": 0}]),
    );
    assert_eq!(t["transaction"][0], json!(tx_str("write_alice_er", "base64")), "{t}");
    assert_eq!(m.base.count("getTransaction"), 0);
}

#[test]
fn unknown_signatures_are_asked_of_every_side_and_merged_per_index() {
    let m = Magic::start();
    let on_base = tx_str("read_alice", "signature");
    let on_er = tx_str("write_alice_er", "signature");
    let nowhere = tx_str("write_alice_bob", "signature");
    m.base.add_signature(&on_base);
    m.er1.add_signature(&on_er);
    let st = m.result("getSignatureStatuses", json!([[on_base, nowhere, on_er]]));
    let vals = st["value"].as_array().unwrap_or_else(|| panic!("{st}"));
    assert_eq!(vals.len(), 3, "same length as asked: {st}");
    assert_eq!(vals[0]["slot"], json!(m.base.slot()), "{st}");
    assert_eq!(vals[1], Value::Null, "{st}");
    assert_eq!(vals[2]["slot"], json!(m.er1.slot()), "{st}");
    let t = m.result("getTransaction", json!([on_er, {"encoding": "base64"}]));
    assert_eq!(t["slot"], json!(m.er1.slot()), "unknown signature found on the ER: {t}");
    let t = m.call("getTransaction", json!([nowhere, {"encoding": "base64"}]));
    assert_eq!(t["result"], Value::Null, "{t}");
}

// ---- blockhashes -------------------------------------------------------------------------------------------

#[test]
fn blockhashes_come_from_the_side_of_the_accounts_and_are_checked_where_they_came_from() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let bob = seed(&m, "bob");
    let v = m.result("getLatestBlockhash", json!([{"commitment": "confirmed"}]));
    assert_eq!(v["value"]["blockhash"], json!(m.base.blockhash()), "{v}");
    // As MagicBlock's router answers it: the bare {blockhash, lastValidBlockHeight}, asked `confirmed`.
    let v = m.result("getBlockhashForAccounts", json!([[alice]]));
    assert_eq!(
        v,
        json!({"blockhash": m.er1.blockhash(), "lastValidBlockHeight": m.er1.block_height() + 150}),
        "delegated alice: the ER's blockhash: {v}"
    );
    assert_eq!(
        m.er1.params_of("getLatestBlockhash").last(),
        Some(&json!([{"commitment": "confirmed"}]))
    );
    let v = m.result("getBlockhashForAccounts", json!([[bob]]));
    assert_eq!(v["blockhash"], json!(m.base.blockhash()), "undelegated bob: base: {v}");
    // `[[]]`, what the kit SDK's isRouter sends: the base layer's.
    let v = m.result("getBlockhashForAccounts", json!([[]]));
    assert_eq!(v["blockhash"], json!(m.base.blockhash()), "no account: base: {v}");
    assert!(v.get("context").is_none(), "{v}");

    let before = (m.base.count("isBlockhashValid"), m.er1.count("isBlockhashValid"));
    let v = m.result(
        "isBlockhashValid",
        json!([m.er1.blockhash(), {"commitment": "confirmed"}]),
    );
    assert_eq!(v["value"], json!(true), "the ER's blockhash is valid on the ER: {v}");
    assert_eq!(m.er1.count("isBlockhashValid"), before.1 + 1);
    assert_eq!(m.base.count("isBlockhashValid"), before.0);
    let v = m.result("isBlockhashValid", json!([b58(&[9u8; 32])]));
    assert_eq!(v["value"], json!(false), "{v}");
    assert_eq!(
        m.base.count("isBlockhashValid"),
        before.0 + 1,
        "unknown blockhash: base"
    );
}

#[test]
fn block_height_and_epoch_info_follow_the_callers_latest_blockhash() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let (base_h, er_h) = (m.base.block_height(), m.er1.block_height());
    assert_eq!(
        m.result("getBlockHeight", json!([])),
        json!(base_h),
        "no blockhash yet: base"
    );
    m.result("getBlockhashForAccounts", json!([[alice]]));
    assert_eq!(
        m.result("getBlockHeight", json!([])),
        json!(er_h),
        "after an ER blockhash: ER heights"
    );
    assert_eq!(m.result("getEpochInfo", json!([]))["blockHeight"], json!(er_h));
    m.result("getLatestBlockhash", json!([]));
    assert_eq!(
        m.result("getBlockHeight", json!([])),
        json!(base_h),
        "after a base blockhash: base heights"
    );

    // Callers told apart by x-prism-session.
    let call = |session: &str, method: &str, params: Value| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let h = format!("x-prism-session: {session}");
        let r = m.prism.rpc_with("/", body.as_bytes(), &[&h]);
        assert_eq!(r.status, 200, "{}", r.describe());
        r.json()["result"].clone()
    };
    call("er-client", "getBlockhashForAccounts", json!([[alice]]));
    call("base-client", "getLatestBlockhash", json!([]));
    assert_eq!(call("er-client", "getBlockHeight", json!([])), json!(er_h));
    assert_eq!(call("base-client", "getBlockHeight", json!([])), json!(base_h));
    assert_eq!(call("er-client", "getEpochInfo", json!([]))["blockHeight"], json!(er_h));
}

#[test]
fn block_height_follows_the_blockhash_of_each_api_key() {
    let keys = "[[keys]]\nname = \"er-app\"\nkey = \"er-app-4f2a9c\"\n\n[[keys]]\nname = \"base-app\"\nkey = \"base-app-8b1d3e\"\n";
    let m = Magic::start_with(false, |b| b.extra_toml(keys));
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let (base_h, er_h) = (m.base.block_height(), m.er1.block_height());
    let at = |key: &str, method: &str, params: Value| -> Value {
        let v = m.call_at(&format!("/solana/{key}"), method, params);
        assert!(v.get("result").is_some(), "{method} with key {key}: {v}");
        v["result"].clone()
    };
    at("er-app-4f2a9c", "getBlockhashForAccounts", json!([[alice]]));
    at("base-app-8b1d3e", "getLatestBlockhash", json!([]));
    assert_eq!(
        at("er-app-4f2a9c", "getBlockHeight", json!([])),
        json!(er_h),
        "key with an ER blockhash"
    );
    assert_eq!(
        at("base-app-8b1d3e", "getBlockHeight", json!([])),
        json!(base_h),
        "key with a base blockhash"
    );
    assert_eq!(
        at("er-app-4f2a9c", "getEpochInfo", json!([]))["blockHeight"],
        json!(er_h)
    );
    assert_eq!(
        at("base-app-8b1d3e", "getEpochInfo", json!([]))["blockHeight"],
        json!(base_h)
    );
}

#[test]
fn with_two_shards_every_connection_sees_the_callers_blockhash_origin_and_signatures() {
    // Each call below goes on a new connection, so SO_REUSEPORT spreads them over both shards; what one
    // shard learned (blockhash origin, where a signature went) must hold on the other.
    let m = Magic::start_with(false, |b| b.shards(2));
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let er_h = m.er1.block_height();
    m.result("getBlockhashForAccounts", json!([[alice]]));
    for i in 0..20 {
        assert_eq!(
            m.result("getBlockHeight", json!([])),
            json!(er_h),
            "call {i}: a connection on another shard lost the caller's ER blockhash"
        );
    }
    let sig = tx_str("write_alice_er", "signature");
    assert_eq!(send(&m, "write_alice_er", false)["result"], json!(sig));
    for i in 0..20 {
        let st = m.result("getSignatureStatuses", json!([[sig]]));
        assert_eq!(st["value"][0]["slot"], json!(m.er1.slot()), "call {i}: {st}");
    }
}

// ---- compat, unsupported, base-only ----------------------------------------------------------------------

#[test]
fn delegation_status_routes_and_identity_compat_methods() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let bob = seed(&m, "bob");
    let v = m.result("getDelegationStatus", json!([alice]));
    assert_eq!(v["isDelegated"], json!(true), "{v}");
    assert_eq!(
        v["fqdn"].as_str().map(|s| s.trim_end_matches('/')),
        Some(m.er1.url().as_str()),
        "{v}"
    );
    let rec = &v["delegationRecord"];
    assert_eq!(rec["authority"], json!(pk("er1_identity")), "{v}");
    assert_eq!(rec["owner"], json!(SYSTEM_PROGRAM), "original owner: {v}");
    assert!(rec["delegationSlot"].is_u64(), "{v}");
    assert!(rec["lamports"].is_u64(), "{v}");
    // As magic-router serialises an undelegated account: no fqdn, no record.
    let v = m.result("getDelegationStatus", json!([bob]));
    assert_eq!(v, json!({"isDelegated": false}), "{v}");
    let routes = m.result("getRoutes", json!([]));
    let routes = routes.as_array().unwrap_or_else(|| panic!("getRoutes: {routes}"));
    assert_eq!(routes.len(), 1, "{routes:?}");
    // magic-router's RouteInfo fields, with Prism's defaults when the config sets none.
    assert_eq!(
        routes[0],
        json!({"identity": pk("er1_identity"), "fqdn": m.er1.url(), "baseFee": 0, "blockTimeMs": 50, "countryCode": ""})
    );
    // MagicBlock's SDK delegates to what the router's getIdentity names: the ER, with its public URL.
    assert_eq!(
        m.result("getIdentity", json!([])),
        json!({"identity": pk("er1_identity"), "fqdn": m.er1.url()})
    );
}

#[test]
fn unsupported_methods_are_refused_with_a_clear_error() {
    let m = Magic::start();
    let owner = pk("program");
    for method in [
        "getProgramAccounts",
        "getTokenAccountsByOwner",
        "getTokenAccountsByDelegate",
        "getLargestAccounts",
        "getTokenLargestAccounts",
    ] {
        let v = m.call(
            method,
            json!([owner, {"programId": TOKEN_PROGRAM}, {"encoding": "base64"}]),
        );
        let err = &v["error"];
        assert_eq!(err["code"], -32601, "{method}: {v}");
        assert!(
            msg(err).contains(&method.to_ascii_lowercase()),
            "{method}: message names it: {v}"
        );
        assert!(msg(err).contains("not support"), "{method}: says not supported: {v}");
        assert_eq!(
            m.base.count(method) + m.er1.count(method),
            0,
            "{method} reached an upstream"
        );
    }
}

#[test]
fn base_only_and_unlisted_methods_go_to_base_with_its_answer_unchanged() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    m.result("getBlockhashForAccounts", json!([[pk("alice")]])); // the caller now holds an ER blockhash
    let slot_params = json!([{"commitment": "confirmed", "minContextSlot": 1}]);
    assert_eq!(
        m.result("getSlot", slot_params.clone()),
        json!(m.base.slot()),
        "getSlot"
    );
    assert_eq!(m.base.count_params("getSlot", &slot_params), 1);
    assert_eq!(m.er1.count_params("getSlot", &slot_params), 0, "getSlot reached the ER");
    for (method, want) in [
        (
            "getVersion",
            json!({"feature-set": 3_294_202_862u64, "solana-core": "2.2.0"}),
        ),
        ("getHealth", json!("ok")),
    ] {
        assert_eq!(m.result(method, json!([])), want, "{method}");
    }
    let g = m.result("getGenesisHash", json!([]));
    let base_genesis = {
        let addr: std::net::SocketAddr = m.base.url().trim_start_matches("http://").parse().unwrap();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "getGenesisHash"}).to_string();
        crate::support::Conn::connect(addr)
            .request(&crate::support::http::post("/", body.as_bytes()))
            .json()["result"]
            .clone()
    };
    assert_eq!(g, base_genesis);
    // Unlisted: forwarded to base, whose "method not found" comes back as sent.
    let v = m.call("getSupply", json!([]));
    assert_eq!(
        v["error"],
        json!({"code": -32601, "message": "Method not found"}),
        "{v}"
    );
    assert_eq!(m.base.count("getSupply"), 1);
    // getHealth is left out: Prism's health prober asks it of every provider, ERs included (getSlot is
    // checked above by its params, which no probe sends).
    for method in ["getVersion", "getGenesisHash", "getSupply"] {
        assert_eq!(m.er1.count(method), 0, "{method} reached the ER");
    }
}

#[test]
fn a_batch_mixing_every_kind_of_call_answers_each_by_its_rule() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let bob = seed(&m, "bob");
    let body = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "getAccountInfo", "params": acct(&alice)},
        {"jsonrpc": "2.0", "id": 2, "method": "getBalance", "params": [bob]},
        {"jsonrpc": "2.0", "id": 3, "method": "getSlot"},
        {"jsonrpc": "2.0", "id": 4, "method": "getProgramAccounts", "params": [pk("program")]},
        {"jsonrpc": "2.0", "id": 5, "method": "sendTransaction", "params": [tx_str("write_alice_er", "base58")]},
        {"jsonrpc": "2.0", "id": 6, "method": "getMultipleAccounts", "params": [[bob, alice], {"encoding": "base64"}]},
        {"jsonrpc": "2.0", "id": 7, "method": "sendTransaction", "params": [tx_str("v1_message", "base58")]},
    ])
    .to_string();
    let r = m.prism.rpc(body.as_bytes());
    let items = crate::support::batch_items(&r);
    assert_eq!(items.len(), 7, "{}", r.describe());
    let by_id = |id: u64| -> Value {
        items
            .iter()
            .map(|i| serde_json::from_slice::<Value>(i).unwrap())
            .find(|v| v["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer with id {id}: {}", r.describe()))
    };
    assert_eq!(by_id(1)["result"]["value"]["lamports"], json!(ON_ER1));
    assert_eq!(by_id(2)["result"]["value"], json!(ON_BASE));
    assert_eq!(by_id(3)["result"], json!(m.base.slot()));
    assert_eq!(by_id(4)["error"]["code"], -32601);
    assert_eq!(by_id(5)["result"], json!(tx_str("write_alice_er", "signature")));
    let v6 = by_id(6);
    assert_eq!(v6["result"]["value"][0]["lamports"], json!(ON_BASE), "{v6}");
    assert_eq!(v6["result"]["value"][1]["lamports"], json!(ON_ER1), "{v6}");
    assert_eq!(by_id(7)["error"]["code"], -32602);
    assert!(m.er1.knows_signature(&tx_str("write_alice_er", "signature")));
}

// ---- edges worth pinning down -----------------------------------------------------------------------------

#[test]
fn get_multiple_accounts_keeps_duplicates_and_params_without_a_config() {
    let m = Magic::start();
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    let bob = seed(&m, "bob");
    let v = m.result("getMultipleAccounts", json!([[alice, bob, alice, bob, bob]]));
    let lam: Vec<Value> = v["value"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|a| a["lamports"].clone())
        .collect();
    assert_eq!(
        lam,
        vec![
            json!(ON_ER1),
            json!(ON_BASE),
            json!(ON_ER1),
            json!(ON_BASE),
            json!(ON_BASE)
        ],
        "duplicate keys each get their own answer in place: {v}"
    );
    // No config object: the legacy default encoding (a bare base58 string) comes back from both sides.
    assert!(v["value"][0]["data"].is_string(), "{v}");
    assert!(v["value"][1]["data"].is_string(), "{v}");
    let v = m.result("getAccountInfo", json!([alice]));
    assert_eq!(
        v["value"]["lamports"],
        json!(ON_ER1),
        "getAccountInfo without a config: {v}"
    );
}

#[test]
fn a_transaction_is_forwarded_with_the_clients_params_unchanged() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    let params = json!([
        tx_str("write_alice_er", "base64"),
        {"encoding": "base64", "skipPreflight": true, "preflightCommitment": "processed", "maxRetries": 0}
    ]);
    let v = m.call("sendTransaction", params.clone());
    assert_eq!(v["result"], json!(tx_str("write_alice_er", "signature")), "{v}");
    assert_eq!(
        m.er1.params_of("sendTransaction"),
        vec![params],
        "the ER must see the client's params"
    );
}

#[test]
fn a_transaction_writing_one_delegated_and_one_undelegated_account_goes_to_the_er() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    seed(&m, "bob");
    let v = send(&m, "write_alice_bob", false);
    assert_eq!(v["result"], json!(tx_str("write_alice_bob", "signature")), "{v}");
    assert!(m.er1.knows_signature(&tx_str("write_alice_bob", "signature")));
    assert_eq!(m.base.count("sendTransaction"), 0);
}

#[test]
fn the_largest_legal_transaction_is_not_refused() {
    let m = Magic::start();
    seed(&m, "alice");
    let t = tx("max_size");
    assert_eq!(t["raw_len"], json!(1232));
    assert_eq!(t["base64"].as_str().unwrap().len(), 1644);
    for (params, enc) in [
        (json!([tx_str("max_size", "base58")]), "base58"),
        (json!([tx_str("max_size", "base64"), {"encoding": "base64"}]), "base64"),
    ] {
        for method in ["simulateTransaction", "sendTransaction"] {
            let v = m.call(method, params.clone());
            assert!(
                v.get("result").is_some(),
                "{method} of a 1232-byte transaction ({enc}) refused: {v}"
            );
        }
    }
    assert_eq!(m.base.count("sendTransaction"), 2);
}

#[test]
fn signature_statuses_for_signatures_sent_to_different_sides_are_merged() {
    let m = Magic::start();
    delegated(&m, "alice", &pk("er1_identity"));
    let to_base = tx_str("read_alice", "signature");
    let to_er = tx_str("write_alice_er", "signature");
    assert_eq!(send(&m, "read_alice", false)["result"], json!(to_base));
    assert_eq!(send(&m, "write_alice_er", false)["result"], json!(to_er));
    assert!(m.base.knows_signature(&to_base) && m.er1.knows_signature(&to_er));
    let unknown = tx_str("write_alice_bob", "signature");
    for order in [vec![&to_base, &to_er, &unknown], vec![&to_er, &unknown, &to_base]] {
        let st = m.result("getSignatureStatuses", json!([order]));
        let vals = st["value"].as_array().unwrap_or_else(|| panic!("{st}"));
        assert_eq!(vals.len(), 3, "{st}");
        for (sig, val) in order.iter().zip(vals) {
            let want = if **sig == to_base {
                json!(m.base.slot())
            } else if **sig == to_er {
                json!(m.er1.slot())
            } else {
                Value::Null
            };
            let got = if val.is_null() {
                Value::Null
            } else {
                val["slot"].clone()
            };
            assert_eq!(got, want, "status of {sig} in {order:?}: {st}");
        }
    }
}

#[test]
fn delegation_status_of_a_default_authority_and_routes_of_two_ers() {
    let m = Magic::two_ers();
    let bob = delegated(&m, "bob", DEFAULT_PUBKEY);
    let v = m.result("getDelegationStatus", json!([bob]));
    assert_eq!(v["isDelegated"], json!(true), "{v}");
    assert_eq!(
        v["fqdn"].as_str().map(|s| s.trim_end_matches('/')),
        Some(m.er1.url().as_str()),
        "a default-authority record is served by default_er: {v}"
    );
    let routes = m.result("getRoutes", json!([]));
    let mut got: Vec<(Value, Option<String>)> = routes
        .as_array()
        .unwrap_or_else(|| panic!("{routes}"))
        .iter()
        .map(|r| {
            (
                r["identity"].clone(),
                r["fqdn"].as_str().map(|s| s.trim_end_matches('/').to_string()),
            )
        })
        .collect();
    got.sort_by_key(|(i, _)| i.to_string());
    let mut want = vec![
        (json!(pk("er1_identity")), Some(m.er1.url())),
        (json!(pk("er2_identity")), Some(m.er2().url())),
    ];
    want.sort_by_key(|(i, _)| i.to_string());
    assert_eq!(got, want, "{routes}");
}

/// `getIdentity` names the ER to delegate to: `default_er` while it is live, else the live one; `getRoutes`
/// lists only live ERs; an ER without `public_url` has a null `fqdn` (never its upstream URL).
#[test]
fn get_identity_names_a_live_er_and_get_routes_lists_only_live_ones() {
    let m = Magic::start_with_network(
        true,
        |net, _| {
            let net = net.replacen(
                "kind = \"solana-magic\"",
                "kind = \"solana-magic\"\nprobe_interval_ms = 100",
                1,
            );
            // er-2 keeps no public address (its fqdn is null) and says what getRoutes lists for it.
            let cut = net.rfind("  public_url=").expect("er-2's public_url");
            let end = cut + net[cut..].find('\n').unwrap() + 1;
            format!(
                "{}  base_fee = 5000\n  block_time_ms = 30\n  country_code = \"NL\"\n{}",
                &net[..cut],
                &net[end..]
            )
        },
        |b| b,
    );
    crate::support::wait_serving(&m.prism, &["base-1", "er-1", "er-2"]);
    assert_eq!(
        m.result("getIdentity", json!([])),
        json!({"identity": pk("er1_identity"), "fqdn": m.er1.url()}),
        "default_er while it is live"
    );
    let routes = m.result("getRoutes", json!([]));
    assert_eq!(routes.as_array().map(Vec::len), Some(2), "{routes}");
    let er2 = routes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["identity"] == json!(pk("er2_identity")))
        .unwrap_or_else(|| panic!("{routes}"));
    assert_eq!(
        er2["fqdn"],
        Value::Null,
        "no public_url: null, never the upstream URL: {routes}"
    );
    // er-1 stops answering: its breaker opens, and it is no longer offered.
    m.er1.set_http_status(Some(503));
    m.prism.wait_state("er-1", "open", Duration::from_secs(10));
    assert_eq!(
        m.result("getIdentity", json!([])),
        json!({"identity": pk("er2_identity"), "fqdn": Value::Null}),
        "the live ER when default_er is down"
    );
    let routes = m.result("getRoutes", json!([]));
    assert_eq!(
        routes,
        json!([{"identity": pk("er2_identity"), "fqdn": Value::Null, "baseFee": 5000, "blockTimeMs": 30, "countryCode": "NL"}])
    );
    // Back: default_er again.
    m.er1.set_http_status(None);
    m.prism.wait_state("er-1", "closed", Duration::from_secs(40));
    assert_eq!(
        m.result("getIdentity", json!([]))["identity"],
        json!(pk("er1_identity"))
    );
}

#[test]
fn get_multiple_accounts_of_100_keys_alternating_sides_merges_in_order() {
    let m = Magic::start();
    let keys: Vec<String> = (1..=100u8)
        .map(|i| {
            let mut b = [0u8; 32];
            b[0] = i;
            b[31] = 0x5a;
            b58(&b)
        })
        .collect();
    for (i, k) in keys.iter().enumerate() {
        m.base.set_lamports(k, 10_000 + i as u64);
        m.er1
            .set_account(k, Account::new(20_000 + i as u64, &pk("program"), &[]));
        if i % 3 == 0 {
            m.base.delegate(k, &pk("er1_identity"));
        }
    }
    let v = m.result("getMultipleAccounts", json!([keys, {"encoding": "base64"}]));
    let vals = v["value"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(vals.len(), 100);
    for (i, a) in vals.iter().enumerate() {
        let want = if i % 3 == 0 { 20_000 } else { 10_000 } + i as u64;
        assert_eq!(a["lamports"], json!(want), "key {i} ({})", keys[i]);
    }
}

/// A provider URL's path and query often carry the operator's API key: `getRoutes` and
/// `getDelegationStatus` report the ER's `public_url` only, and the key shows up in no log, metric or status.
#[test]
fn er_urls_with_a_key_in_the_path_never_leak() {
    const SECRET: &str = "k3y-s3cr3t-0f-the-0perat0r";
    let m = Magic::start_with_network(
        false,
        |net, er1| {
            let plain = format!("url = \"{}\"", er1.url());
            assert!(net.contains(&plain), "{net}");
            net.replace(&plain, &format!("url = \"{}/v1/{SECRET}?apikey={SECRET}\"", er1.url()))
        },
        |b| b,
    );
    let alice = delegated(&m, "alice", &pk("er1_identity"));
    assert_eq!(lamports(&m, &alice), ON_ER1, "the ER behind the keyed URL serves");
    let v = m.result("getDelegationStatus", json!([alice]));
    assert_eq!(v["fqdn"], json!(m.er1.url()), "{v}");
    let routes = m.result("getRoutes", json!([]));
    assert_eq!(routes[0]["fqdn"], json!(m.er1.url()), "{routes}");
    let metrics = String::from_utf8_lossy(&m.prism.admin_get("/metrics").body).into_owned();
    let status = String::from_utf8_lossy(&m.prism.admin_get("/status").body).into_owned();
    for (what, text) in [("log", m.prism.log()), ("metrics", metrics), ("status", status)] {
        assert!(!text.contains(SECRET), "the URL's key is in the {what}:\n{text}");
    }
}

/// A client's Solana method name is written into upstream frames as a JSON string: a name built to
/// smuggle a second `method` key reaches no upstream as anything but one (unknown) method.
#[test]
fn a_subscription_method_name_cannot_inject_json_into_upstream_frames() {
    let m = Magic::start();
    let mut ws = SolWs::connect(m.prism.addr(), "/");
    let evil = r#"getX","method":"requestAirdrop","id":"zSubscribe"#;
    let reply = ws.call(evil, json!([]));
    assert!(reply.get("error").is_some() || reply.get("result").is_some(), "{reply}");
    for fake in [&m.base, &m.er1] {
        let methods: Vec<String> = fake.calls().iter().map(|c| c.method.clone()).collect();
        assert!(
            !methods.iter().any(|x| x == "requestAirdrop"),
            "an upstream saw the smuggled method: {methods:?}"
        );
    }
}
