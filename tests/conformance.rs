//! Conformance: what a client gets through Prism is what the node said, byte for byte.
//!
//! `tests/conformance/corpus.jsonl` holds request/response pairs recorded from a real EVM node (ganache
//! 7.9.2, chain 4663; `tests/conformance/record.mjs` rerecords it) for every method in Prism's method
//! table, errors included. A [`ReplayNode`] plays that node back on loopback (recorded bytes, the id Prism
//! sent), and the real Prism binary runs in front of it. For every exchange, singly and in batches, the
//! client must get the recorded `result` or `error` value byte for byte, with its own id byte for byte,
//! for every kind of id JSON allows. The few places where Prism answers differently on purpose are listed
//! in [`deliberate`] with the reason.

use crate::support::replay::{load_corpus, Exchange, ReplayNode};
use crate::support::{json, Prism, Response};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

const CHAIN_ID: u64 = 4663;

fn corpus() -> Vec<Exchange> {
    load_corpus(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/corpus.jsonl"))
}

/// The error answers of the ethereum/execution-apis test fixtures (`tests/<method>/<case>.io` at commit
/// 033ca6e, geth's answers to the spec's cases): eth_simulateV1's -380xx codes, invalid arguments, reverts,
/// trace and storage errors. Every one is a correct answer to a wrong call.
fn execution_apis() -> Vec<Exchange> {
    load_corpus(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/execution-apis.jsonl"))
}

/// Prism in front of one replaying node, serving (chain id verified), batches as large as the corpus.
fn start(node: &ReplayNode, max_batch: usize) -> Prism {
    let prism = Prism::builder()
        .network("testnet", CHAIN_ID)
        .provider_url(&node.url())
        .limit("max_batch", max_batch)
        .limit("max_body_bytes", 1 << 20)
        .limit("request_deadline_ms", 5000)
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    prism
}

/// What the client must get instead of the recorded value, where Prism differs on purpose.
#[derive(Debug)]
enum Expect {
    /// The recorded value, byte for byte.
    Recorded,
    /// Prism answers from its config; the value must mean the same as the node's (compared as JSON).
    SameMeaning(&'static str),
    /// Prism refuses the call itself with this error code; the node is never asked.
    RefusedLocally(i64, &'static str),
    /// The node lacks `eth_sendRawTransactionSync` (its recorded answer says so): Prism submits the same raw
    /// transaction with `eth_sendRawTransaction`, once, and answers what the node said to that (EIP-7966
    /// emulation, docs/ROUTING.md), which the corpus also holds.
    EmulatedSync,
}

fn deliberate(ex: &Exchange) -> Expect {
    match ex.method.as_str() {
        "eth_chainId" | "net_version" => {
            Expect::SameMeaning("answered by Prism from networks[].chain_id once the provider's chain id is verified")
        }
        "eth_subscribe" | "eth_unsubscribe" => Expect::RefusedLocally(
            -32601,
            "subscriptions need a WebSocket; over HTTP Prism refuses them instead of forwarding",
        ),
        "eth_sendRawTransactionSync"
            if ex
                .error()
                .is_some_and(|e| json::text(e).contains("does not exist/is not available")) =>
        {
            Expect::EmulatedSync
        }
        _ => Expect::Recorded,
    }
}

/// The node's recorded answer to `eth_sendRawTransaction` of the raw transaction `sync` submits.
fn submission_of(sync: &Exchange) -> Exchange {
    let raw = Value::Array(vec![sync.params[0].clone()]);
    corpus()
        .into_iter()
        .find(|e| e.method == "eth_sendRawTransaction" && e.params == raw)
        .unwrap_or_else(|| panic!("the corpus has no eth_sendRawTransaction {raw} for {:?}", sync.name))
}

/// A call object for `ex` with raw id text `id`.
fn call_text(ex: &Exchange, id: &str) -> String {
    crate::support::call(id, &ex.method, &ex.params_text())
}

/// Checks one response object (raw bytes) for exchange `ex` asked with raw id `id`.
fn check(ex: &Exchange, id: &str, obj: &[u8]) -> Result<(), String> {
    let what = format!("{:?} ({} {})", ex.name, ex.method, ex.params_text());
    let fields = json::object(obj).map_err(|e| format!("{what}: answer not an object ({e}): {}", json::text(obj)))?;
    let get = |k: &str| fields.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    if get("jsonrpc") != Some(&b"\"2.0\""[..]) {
        return Err(format!("{what}: jsonrpc member in {}", json::text(obj)));
    }
    if get("id") != Some(id.as_bytes()) {
        return Err(format!("{what}: id {id} came back as {:?}", get("id").map(json::text)));
    }
    let (result, error) = (get("result"), get("error"));
    if result.is_some() == error.is_some() {
        return Err(format!("{what}: want exactly one of result/error: {}", json::text(obj)));
    }
    let expect = deliberate(ex);
    let submission = matches!(expect, Expect::EmulatedSync).then(|| submission_of(ex));
    let recorded = submission.as_ref().unwrap_or(ex);
    match expect {
        Expect::Recorded | Expect::EmulatedSync => {
            let (want, got, kind) = match (recorded.result(), recorded.error()) {
                (Some(r), _) => (r, result, "result"),
                (None, Some(e)) => (e, error, "error"),
                (None, None) => return Err(format!("{what}: recording has neither result nor error")),
            };
            match got {
                Some(got) if got == want => Ok(()),
                Some(got) => Err(format!(
                    "{what}: {kind} differs\n  node:  {}\n  prism: {}",
                    json::text(want),
                    json::text(got)
                )),
                None => Err(format!(
                    "{what}: node answered a {kind}, Prism answered {}",
                    json::text(obj)
                )),
            }
        }
        Expect::SameMeaning(why) => {
            let want: Value = serde_json::from_slice(ex.result().expect("recorded result")).unwrap();
            let got: Value = result
                .map(|r| serde_json::from_slice(r).unwrap())
                .ok_or_else(|| format!("{what}: no result in {}", json::text(obj)))?;
            if got == want {
                Ok(())
            } else {
                Err(format!("{what}: {got} does not mean {want} ({why})"))
            }
        }
        Expect::RefusedLocally(code, why) => {
            let err: Value = serde_json::from_slice(error.ok_or_else(|| format!("{what}: not refused"))?).unwrap();
            if err["code"].as_i64() == Some(code) && err["message"].is_string() {
                Ok(())
            } else {
                Err(format!("{what}: want error {code} ({why}), got {err}"))
            }
        }
    }
}

fn single_body(resp: &Response) -> &[u8] {
    assert_eq!(resp.status, 200, "{}", resp.describe());
    json::whole(&resp.body).unwrap_or_else(|e| panic!("body not JSON ({e}): {}", resp.describe()))
}

/// Fails with every mismatch at once (a list is more useful than the first one).
fn report(failures: Vec<String>, total: usize) {
    assert!(
        failures.is_empty(),
        "{} of {total} exchanges differ:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Every non-local method in the corpus reached the node, and the node had a recording for every call it
/// got (a miss would mean Prism changed the method or params on the way).
fn assert_forwarded(node: &ReplayNode, corpus: &[Exchange]) {
    let asked = node.asked();
    let misses: Vec<_> = asked.iter().filter(|a| !a.hit).collect();
    assert!(
        misses.is_empty(),
        "calls with no recording reached the node: {misses:?}"
    );
    for ex in corpus {
        if let Expect::RefusedLocally(_, why) = deliberate(ex) {
            assert_eq!(node.count(&ex.method), 0, "{} reached the node, yet {why}", ex.method);
        }
        if matches!(deliberate(ex), Expect::Recorded) {
            assert!(
                asked.iter().any(|a| a.method == ex.method),
                "{} never reached the node: Prism answered {:?} itself",
                ex.method,
                ex.name
            );
        }
    }
}

#[test]
fn corpus_covers_every_method_prism_knows() {
    let corpus = corpus();
    assert!(corpus.len() >= 90, "corpus has only {} exchanges", corpus.len());
    // KNOWN_METHODS, plus the names `lookup` classifies without a metrics series of their own.
    let lookup_only = [
        "eth_mining",
        "eth_hashrate",
        "eth_coinbase",
        "eth_submitWork",
        "eth_submitHashrate",
        "eth_sign",
        "eth_signTransaction",
        "eth_sendPrivateTransaction",
    ];
    for m in prism::core::methods::KNOWN_METHODS.iter().chain(&lookup_only) {
        assert!(
            corpus.iter().any(|ex| ex.method == *m),
            "no recording of {m}, a method Prism's table knows"
        );
    }
    // Error answers are cases too: reverts, bad params, unknown methods, refused writes.
    let errors = corpus.iter().filter(|ex| ex.error().is_some()).count();
    assert!(errors >= 20, "only {errors} error answers in the corpus");
    for name in [
        "call that reverts",
        "unknown method",
        "raw transaction, nonce too low",
        "raw transaction reusing a mined nonce",
    ] {
        let ex = corpus
            .iter()
            .find(|ex| ex.name == name)
            .unwrap_or_else(|| panic!("no {name:?}"));
        assert!(ex.error().is_some(), "{name:?} is recorded as an error");
    }
}

#[test]
fn single_calls_get_the_node_answer_byte_for_byte() {
    let corpus = corpus();
    let node = ReplayNode::start(&corpus);
    // Every recorded block final: receipts, transactions and blocks are cached (without a heads feed only
    // final answers are), and the cache's copies are checked too.
    node.finalize_at_head();
    let prism = start(&node, 10);
    assert!(
        crate::support::wait_until(std::time::Duration::from_secs(10), || prism.status()["networks"][0]
            ["finalized"]
            .as_u64()
            .is_some_and(|f| f > 0)),
        "Prism never learned the finalized block"
    );
    let mut failures = Vec::new();
    // Twice: the second round gets pinned reads (by block hash, by transaction hash) from Prism's cache,
    // and those answers must be the node's bytes too.
    for round in 0..2 {
        for (i, ex) in corpus.iter().enumerate() {
            let id = (1000 * (round + 1) + i).to_string();
            let resp = prism.rpc(call_text(ex, &id).as_bytes());
            if let Err(e) = check(ex, &id, single_body(&resp)) {
                failures.push(format!("round {round}: {e}"));
            }
        }
    }
    report(failures, corpus.len() * 2);
    assert_forwarded(&node, &corpus);
    let hits = prism.metric("prism_cache_hits_total");
    assert!(
        hits >= 5.0,
        "the second round was not served from the cache ({hits} hits): nothing proven"
    );
}

/// Sends `items` (exchange, raw id) as one batch and checks every answer, matched by id.
fn check_batch(prism: &Prism, items: &[(&Exchange, String)], failures: &mut Vec<String>) {
    let body = crate::support::batch(&items.iter().map(|(ex, id)| call_text(ex, id)).collect::<Vec<_>>());
    let resp = prism.rpc(body.as_bytes());
    let answers = crate::support::batch_items(&resp);
    assert_eq!(
        answers.len(),
        items.len(),
        "one answer per call in a batch of {}: {}",
        items.len(),
        resp.describe()
    );
    let mut by_id: HashMap<Vec<u8>, &[u8]> = HashMap::new();
    for a in &answers {
        let id = json::field(a, "id").unwrap_or_else(|| panic!("batch answer without id: {}", json::text(a)));
        assert!(
            by_id.insert(id.to_vec(), a).is_none(),
            "id {} answered twice",
            json::text(id)
        );
    }
    for (ex, id) in items {
        match by_id.get(id.as_bytes()) {
            Some(a) => {
                if let Err(e) = check(ex, id, a) {
                    failures.push(e);
                }
            }
            None => failures.push(format!("{:?}: no answer with id {id} in the batch", ex.name)),
        }
    }
}

#[test]
fn batches_get_the_node_answers_byte_for_byte() {
    let corpus = corpus();
    let node = ReplayNode::start(&corpus);
    let prism = start(&node, corpus.len());
    let mut failures = Vec::new();
    // Batches of 7 (mixed methods, results and errors together), then the whole corpus in one batch.
    for (n, chunk) in corpus.chunks(7).enumerate() {
        let items: Vec<_> = chunk
            .iter()
            .enumerate()
            .map(|(i, ex)| (ex, format!("\"b{n}-{i}\"")))
            .collect();
        check_batch(&prism, &items, &mut failures);
    }
    let items: Vec<_> = corpus
        .iter()
        .enumerate()
        .map(|(i, ex)| (ex, (i * 3).to_string()))
        .collect();
    check_batch(&prism, &items, &mut failures);
    report(failures, corpus.len() * 2);
    assert_forwarded(&node, &corpus);
}

/// Every id JSON allows comes back as the bytes the client sent.
const IDS: &[&str] = &[
    "0",
    "7",
    "18446744073709551616123",
    "-42",
    "-0",
    "1.0",
    "2.50",
    "1e3",
    "-1.5E-7",
    "123456789012345678901234567890.5e-10",
    r#""""#,
    r#""plain""#,
    r#""with \"quotes\", \\ backslash, \n newline, \u00e9 and \ud83d\ude00""#,
    "\"\u{e9}t\u{e9} raw utf-8\"",
    "null",
];

/// Exchanges with a result, one with an error, and a write: ids must survive all three paths.
fn id_cases(corpus: &[Exchange]) -> Vec<&Exchange> {
    [
        "balance",
        "block by hash",
        "call that reverts",
        "raw transaction reusing a mined nonce",
    ]
    .iter()
    .map(|n| {
        corpus
            .iter()
            .find(|ex| ex.name == *n)
            .unwrap_or_else(|| panic!("no {n:?}"))
    })
    .collect()
}

#[test]
fn every_id_type_comes_back_byte_for_byte_in_single_calls() {
    let corpus = corpus();
    let node = ReplayNode::start(&corpus);
    let prism = start(&node, 10);
    let mut failures = Vec::new();
    for ex in id_cases(&corpus) {
        for id in IDS {
            let resp = prism.rpc(call_text(ex, id).as_bytes());
            if let Err(e) = check(ex, id, single_body(&resp)) {
                failures.push(e);
            }
        }
    }
    report(failures, IDS.len() * 4);
    let misses: Vec<_> = node.asked().into_iter().filter(|a| !a.hit).collect();
    assert!(
        misses.is_empty(),
        "calls with no recording reached the node: {misses:?}"
    );
}

#[test]
fn every_id_type_comes_back_byte_for_byte_in_batches() {
    let corpus = corpus();
    let node = ReplayNode::start(&corpus);
    let prism = start(&node, IDS.len());
    let mut failures = Vec::new();
    // The same call under every id in one batch: identical reads may be joined upstream, yet each caller
    // must get its own id back.
    for ex in id_cases(&corpus) {
        let items: Vec<_> = IDS.iter().map(|id| (ex, id.to_string())).collect();
        check_batch(&prism, &items, &mut failures);
    }
    // Different calls, each id once.
    let cases = id_cases(&corpus);
    let items: Vec<_> = IDS
        .iter()
        .enumerate()
        .map(|(i, id)| (cases[i % cases.len()], id.to_string()))
        .collect();
    check_batch(&prism, &items, &mut failures);
    report(failures, IDS.len() * 5);
    let misses: Vec<_> = node.asked().into_iter().filter(|a| !a.hit).collect();
    assert!(
        misses.is_empty(),
        "calls with no recording reached the node: {misses:?}"
    );
}

#[test]
fn replay_node_answers_with_the_callers_id() {
    // The fake itself: recorded bytes, the asker's id, misses counted (so the tests above can trust it).
    let corpus = corpus();
    let node = ReplayNode::start(&corpus);
    let ex = corpus.iter().find(|ex| ex.name == "balance").unwrap();
    let addr: std::net::SocketAddr = node.url().trim_start_matches("http://").parse().unwrap();
    let mut conn = crate::support::Conn::connect(addr);
    let resp = conn.request(&crate::support::http::post("/", call_text(ex, "\"x\\\"y\"").as_bytes()));
    let want = crate::support::replay::with_id(&ex.response, b"\"x\\\"y\"");
    assert_eq!(resp.body, want, "{}", resp.describe());
    let resp = conn.request(&crate::support::http::post(
        "/",
        crate::support::call(
            "1",
            "eth_getBalance",
            r#"["0x0000000000000000000000000000000000000009","latest"]"#,
        )
        .as_bytes(),
    ));
    assert_eq!(resp.json()["error"]["code"], -32099, "{}", resp.describe());
    let asked = node.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].hit && !asked[1].hit, "{asked:?}");
}

/// Bodies that are not JSON: each must get -32700 and nothing may reach the node. simd-json ends a number
/// or literal at a NUL byte, or after a long number at any byte, and skips what follows up to the next
/// structural character; the skipped bytes stay in the spans Prism forwards (params) and echoes (id).
#[test]
fn invalid_json_after_a_number_is_refused_not_forwarded() {
    let corpus = corpus();
    let node = ReplayNode::start(&corpus);
    let prism = start(&node, 10);
    let bodies: [&[u8]; 5] = [
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[1\0garbage]}",
        b"{\"jsonrpc\":\"2.0\",\"id\":3\0xyz,\"method\":\"eth_getBalance\",\"params\":[]}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[18446744073709551616x]}",
        b"{\"jsonrpc\":\"2.0\",\"id\":66666666666666666626.5vvv,\"method\":\"eth_getBalance\",\"params\":[]}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[1e400,-1E+-400]}",
    ];
    let mut failures = Vec::new();
    for body in bodies {
        let resp = prism.rpc(body);
        let v: Option<Value> = serde_json::from_slice(&resp.body).ok();
        if v.as_ref().and_then(|v| v["error"]["code"].as_i64()) != Some(-32700) {
            failures.push(format!("{:?} → {}", json::text(body), resp.describe()));
        }
    }
    // Anything but Prism's own probes (a forwarded body the node cannot parse shows up with no method).
    let reached = node
        .asked()
        .iter()
        .filter(|a| !crate::support::BACKGROUND_METHODS.contains(&a.method.as_str()))
        .count();
    assert!(
        failures.is_empty() && reached == 0,
        "invalid JSON accepted ({reached} calls reached the node):\n{}",
        failures.join("\n")
    );
}

/// Valid JSON with a long exponent is a request like any other.
#[test]
fn valid_json_with_a_long_exponent_is_served() {
    let corpus = corpus();
    let node = ReplayNode::start(&corpus);
    let prism = start(&node, 10);
    let ex = corpus.iter().find(|ex| ex.name == "balance").unwrap();
    for extra in ["0e99999999999", "1e99999999999", "2e-4345678901234567890"] {
        // An extra member Prism ignores and forwards nothing of; the call itself is the recorded one.
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"eth_getBalance","params":{},"x":{extra}}}"#,
            ex.params_text()
        );
        let resp = prism.rpc(body.as_bytes());
        if let Err(e) = check(ex, "5", single_body(&resp)) {
            panic!("with \"x\":{extra}: {e}");
        }
    }
}

/// What finding 2 costs a deployment: a node answers an unparsable body as geth does (`-32700`, id null),
/// Prism takes that for a broken provider (wrong id) and counts it toward the breaker, so a few malformed
/// requests from one client take a healthy provider out for everyone.
#[test]
fn malformed_bodies_do_not_open_a_healthy_providers_breaker() {
    let fake = crate::support::FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .network_option("probe_interval_ms", 100)
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    for _ in 0..10 {
        let _ = prism.rpc(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[1\0x]}");
    }
    let state = prism.provider_state("p1");
    let resp = prism.rpc(crate::support::call("2", "eth_getBalance", crate::support::BALANCE_PARAMS).as_bytes());
    assert_eq!(
        state,
        "closed",
        "p1 after 10 malformed client bodies; then a valid read got {}",
        resp.describe()
    );
    crate::support::expect_http_result(&resp, "2");
}

/// Issue 13: errors no rule of Prism's knows (eth_simulateV1's -38020 "block numbers must be in order", ...)
/// used to count as the provider's failure on a read, so one tenant replaying the execution-apis fixtures
/// opened the only provider's breaker and the calls after it got -32603 instead of the node's answer.
/// With one provider there is nobody to ask for a second opinion: nobody is blamed, the breaker never
/// opens, and every answer is the node's bytes. Three rounds: a remembered verdict must not change that.
#[test]
fn execution_apis_error_answers_never_open_the_only_providers_breaker() {
    let errors = execution_apis();
    assert!(errors.len() >= 40, "only {} execution-apis error answers", errors.len());
    assert!(
        errors.iter().filter(|ex| ex.method == "eth_simulateV1").count() >= 20,
        "eth_simulateV1 answers missing"
    );
    let mut all = corpus();
    all.extend(errors.iter().cloned());
    let node = ReplayNode::start(&all);
    let prism = start(&node, 10);
    let mut failures = Vec::new();
    let mut internal = 0;
    for round in 0..3 {
        for (i, ex) in errors.iter().enumerate() {
            let id = format!("\"r{round}-{i}\"");
            let resp = prism.rpc(call_text(ex, &id).as_bytes());
            let body = single_body(&resp);
            if json::field(body, "error").and_then(|e| json::field(e, "code")) == Some(&b"-32603"[..])
                && ex.error().and_then(|e| json::field(e, "code")) != Some(&b"-32603"[..])
            {
                internal += 1;
            }
            if let Err(e) = check(ex, &id, body) {
                failures.push(format!("round {round}: {e}"));
            }
        }
    }
    let state = prism.provider_state("p1");
    let balance = all.iter().find(|ex| ex.name == "balance").unwrap();
    let after = prism.rpc(call_text(balance, "7").as_bytes());
    assert!(
        failures.is_empty() && state == "closed",
        "p1 is {state:?} after {} execution-apis error answers; {internal} calls got -32603; then a valid read got {}\n{} of {} differ:\n\n{}",
        errors.len() * 3,
        after.describe(),
        failures.len(),
        errors.len() * 3,
        failures.join("\n\n")
    );
    check(balance, "7", single_body(&after)).unwrap();
    let misses: Vec<_> = node.asked().into_iter().filter(|a| !a.hit).collect();
    assert!(
        misses.is_empty(),
        "calls with no recording reached the node: {misses:?}"
    );
}
