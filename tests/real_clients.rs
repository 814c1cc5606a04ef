//! Real clients through Prism against a real EVM node: viem (`tests/evm/flow.mjs`) and web3.py
//! (`tests/evm/flow.py`) run their ordinary flows — read blocks and balances, deploy a contract, send signed
//! transactions and wait for receipts, call reverting functions, subscribe to `newHeads` over WebSocket —
//! with Prism in front of three relays that all forward to one ganache (chain id 4663).
//!
//! Asserted: every step succeeds as the client library sees it; every transaction the client signed was
//! forwarded to the node exactly once (counted at the relays); a revert reaches the client with the node's
//! own code, message and data, and counts against no provider (no failed attempt, breakers closed);
//! `newHeads` arrive in order.
//!
//! A lost answer (`tests/evm/lost_answer.mjs`): viem signs a transaction locally and sends it raw through Prism
//! in front of two relays; the relay it reaches forwards it and then resets the connection. The transaction
//! is on the node, so Prism finds it by its hash and viem gets the hash, without retrying; it reached the node
//! once.
//!
//! Needs `scripts/deps/evm.sh` (ganache + viem in tests/evm/node_modules, web3.py).

use crate::support::relay::{self, Ledger, Relay};
use crate::support::{wait_serving, Prism};
use serde_json::{json, Value};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed on drop.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `program args` in tests/evm, killed after `within`; returns (success, stdout, stderr).
fn run_client(program: &str, args: &[&str], within: Duration) -> (bool, String, String) {
    let mut child = Guard(
        Command::new(program)
            .args(args)
            .current_dir(relay::evm_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}")),
    );
    let mut out = child.0.stdout.take().unwrap();
    let mut err = child.0.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(st) = child.0.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.0.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (t_out.join().unwrap(), t_err.join().unwrap());
    match status {
        Some(st) => (st.success(), stdout, stderr),
        None => panic!("{program} {args:?} did not finish within {within:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"),
    }
}

/// Three relays in front of the node and Prism in front of them (HTTP and WebSocket), all serving.
fn setup() -> (Ledger, Vec<Relay>, Prism) {
    setup_with(3, true)
}

/// `n` relays in front of the node and Prism in front of them (with their WebSockets when `ws`), all serving.
fn setup_with(n: usize, ws: bool) -> (Ledger, Vec<Relay>, Prism) {
    let node = relay::node();
    let ledger = Ledger::new();
    let relays: Vec<Relay> = (1..=n).map(|i| Relay::start(&format!("r{i}"), node, &ledger)).collect();
    let mut b = Prism::builder()
        .limit("request_deadline_ms", 10000)
        .limit("idle_timeout_ms", 30000)
        .limit("client_timeout_ms", 10000)
        .network_option("probe_interval_ms", 200);
    for r in &relays {
        b = match ws {
            true => b.provider_url_with(&r.url(), &r.ws_option()),
            false => b.provider_url(&r.url()),
        };
    }
    let prism = b.start();
    let names: Vec<String> = (1..=n).map(|i| format!("p{i}")).collect();
    wait_serving(&prism, &names.iter().map(String::as_str).collect::<Vec<_>>());
    (ledger, relays, prism)
}

/// Sum of the `/metrics` samples of `name` whose labels contain every `label` fragment.
fn metric_sum(prism: &Prism, name: &str, labels: &[&str]) -> f64 {
    let text = prism.admin_get("/metrics").text();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter(|l| labels.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The node's own answer to `eth_call` of `function` (selector) on `contract`: its `error` object.
fn node_revert(contract: &str, selector: &str, from: &str) -> Value {
    let r = relay::node().rpc(
        "eth_call",
        json!([{"from": from, "to": contract, "data": selector}, "latest"]),
    );
    r.get("error")
        .cloned()
        .unwrap_or_else(|| panic!("node did not revert: {r}"))
}

const FAIL: &str = "0xa9cc4718"; // fail()
const FAIL_CUSTOM: &str = "0x8791bd33"; // failCustom()

/// The checks both clients share; `ok` is how each library spells a successful receipt status.
fn check_flow(out: &Value, ok: &Value, ledger: &Ledger, prism: &Prism) {
    assert_eq!(out["chainId"], 4663, "chain id through Prism: {out}");
    assert!(out["block"]["number"].as_u64().is_some(), "a latest block: {out}");
    assert!(
        out["balanceWei"].as_str().is_some_and(|b| b != "0"),
        "a funded account: {out}"
    );
    for k in ["deployStatus", "setStatus", "transferStatus"] {
        assert_eq!(&out[k], ok, "{k}: {out}");
    }
    assert_eq!(out["setLogs"].as_array().map(Vec::len), Some(1), "one Set event: {out}");

    // Every transaction the client signed reached the chain through exactly one relay, once.
    let hashes: Vec<&str> = out["txHashes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(hashes.len(), 3, "deploy, set, transfer: {out}");
    for h in &hashes {
        assert_eq!(ledger.count(h), 1, "tx {h} forwarded {} times", ledger.count(h));
    }
    assert!(ledger.duplicates().is_empty(), "duplicates: {:?}", ledger.duplicates());

    // newHeads over Prism's WebSocket, in order.
    let heads: Vec<u64> = out["heads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(heads.len(), 3, "three heads: {out}");
    assert!(heads.windows(2).all(|w| w[1] > w[0]), "heads in order: {heads:?}");

    // The reverts: breakers untouched, no provider charged with a failure.
    for p in ["p1", "p2", "p3"] {
        let row = prism.provider_status(p);
        assert_eq!(row["state"], "closed", "{p} after reverts: {row}");
        assert_eq!(row["failures"], 0, "{p} counted a failure: {row}");
        let failed = metric_sum(
            prism,
            "prism_upstream_attempts_total",
            &[&format!("provider=\"{p}\""), "result=\"failed\""],
        );
        assert_eq!(failed, 0.0, "{p}: failed upstream attempts");
    }
    let rpc_errors = metric_sum(
        prism,
        "prism_calls_total",
        &["method=\"eth_call\"", "result=\"rpc_error\""],
    );
    assert!(
        rpc_errors >= 2.0,
        "the reverting eth_calls were answered as rpc errors ({rpc_errors})"
    );
}

#[test]
fn viem_flow_through_prism() {
    let (ledger, _relays, prism) = setup();
    let url = format!("http://{}/", prism.addr());
    let ws = format!("ws://{}/testnet", prism.addr());
    let (ok, stdout, stderr) = run_client("node", &["flow.mjs", &url, &ws, "1"], Duration::from_secs(120));
    assert!(ok, "flow.mjs failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let out: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    println!("viem: {out}");
    check_flow(&out, &json!("success"), &ledger, &prism);

    // The revert as viem saw it is the node's: code, message and data.
    let contract = out["contract"].as_str().unwrap();
    let from = out["account"].as_str().unwrap();
    for (f, sel) in [("fail", FAIL), ("failCustom", FAIL_CUSTOM)] {
        let seen = &out["reverts"][f];
        let node = node_revert(contract, sel, from);
        assert_eq!(seen["reverted"], true, "{f}: {out}");
        assert_eq!(
            seen["code"], node["code"],
            "{f} code: viem saw {seen}, node says {node}"
        );
        assert_eq!(
            seen["message"], node["message"],
            "{f} message: viem saw {seen}, node says {node}"
        );
        assert_eq!(
            seen["data"], node["data"],
            "{f} data: viem saw {seen}, node says {node}"
        );
    }
    assert_eq!(
        out["reverts"]["fail"]["decoded"],
        json!({"name": "Error", "args": ["prism-test: deliberate revert"]})
    );
    assert_eq!(
        out["reverts"]["failCustom"]["decoded"],
        json!({"name": "Boom", "args": [42, "custom"]})
    );
}

#[test]
fn web3py_flow_through_prism() {
    let (ledger, _relays, prism) = setup();
    let url = format!("http://{}/testnet", prism.addr());
    let ws = format!("ws://{}/", prism.addr());
    let (ok, stdout, stderr) = run_client("python3", &["flow.py", &url, &ws, "2"], Duration::from_secs(120));
    assert!(ok, "flow.py failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let out: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    println!("web3.py: {out}");
    check_flow(&out, &json!(1), &ledger, &prism);
    assert_eq!(out["value"], 9, "set(9) read back: {out}");

    // The raw JSON-RPC error web3.py received is the node's error object, member for member.
    let contract = out["contract"].as_str().unwrap();
    let from = out["account"].as_str().unwrap();
    for (f, sel) in [("fail", FAIL), ("failCustom", FAIL_CUSTOM)] {
        let node = node_revert(contract, sel, &from.to_lowercase());
        assert_eq!(out["reverts"][f]["reverted"], true, "{f}: {out}");
        assert_eq!(
            out["reverts"][f]["rawError"], node,
            "{f}: web3.py's raw error vs the node's"
        );
        assert_eq!(
            out["reverts"][f]["data"], node["data"],
            "{f}: revert data as web3.py raised it"
        );
    }
    assert_eq!(out["reverts"]["failCustom"]["exception"], "ContractCustomError");
}

/// A real wallet's write whose answer is lost after it left Prism: viem signs locally and calls
/// `sendRawTransaction` (no client retry); the relay the write reaches forwards it to the node and then resets
/// the connection (only that request: probes and lookups pass). Prism must not send it again, and must find it
/// by its hash (`eth_getTransactionByHash`, issue 14), so viem gets the hash as a success and its receipt
/// follows. Before issue 14 Prism answers `-32098` (outcome unknown) and viem throws.
#[test]
fn viem_raw_write_whose_answer_is_lost_is_found_by_hash() {
    let (ledger, relays, prism) = setup_with(2, false);
    // Whichever relay the write reaches loses its answer, once.
    for r in &relays {
        r.reset_after_next("eth_sendRawTransaction");
    }
    let url = format!("http://{}/", prism.addr());
    let (ok, stdout, stderr) = run_client("node", &["lost_answer.mjs", &url, "3"], Duration::from_secs(60));
    let out: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("lost_answer.mjs printed no JSON ({e})\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    println!("viem: {out}");
    let hash = out["hash"]
        .as_str()
        .unwrap_or_else(|| panic!("no hash: {out}\nstderr:\n{stderr}"))
        .to_lowercase();
    let fired: Vec<&str> = relays.iter().filter(|r| !r.trap_armed()).map(Relay::name).collect();
    assert_eq!(
        fired.len(),
        1,
        "the write's answer was lost at exactly one relay: {fired:?}"
    );
    assert_eq!(
        ledger.count(&hash),
        1,
        "tx {hash} forwarded {} times: {:?}",
        ledger.count(&hash),
        ledger.duplicates()
    );
    assert!(
        ok && out.get("error").is_none(),
        "viem's sendRawTransaction (no retry) should get the hash after the answer was lost at {fired:?}; \
         viem saw {}\nstderr:\n{stderr}",
        out["error"]
    );
    assert_eq!(
        out["sent"].as_str().map(str::to_lowercase),
        Some(hash.clone()),
        "viem got another hash: {out}"
    );
    assert_eq!(out["status"], "success", "receipt: {out}");
    let receipt = relay::node().rpc("eth_getTransactionReceipt", json!([hash]));
    assert_eq!(receipt["result"]["status"], "0x1", "the node's receipt: {receipt}");
}

/// The relay itself: forwards to the node, lags on request, counts raw transactions by hash.
#[test]
fn relay_forwards_lags_and_counts() {
    let node = relay::node();
    let ledger = Ledger::new();
    let r = Relay::start("r", node, &ledger);
    let mut c = crate::support::Conn::connect(r.addr());
    let ask = |c: &mut crate::support::Conn, body: &str| {
        let resp = c.request(&crate::support::http::post("/", body.as_bytes()));
        assert_eq!(resp.status, 200, "{}", resp.describe());
        resp.json()
    };
    let v = ask(&mut c, &crate::support::call("7", "eth_chainId", "[]"));
    assert_eq!(v, json!({"jsonrpc":"2.0","id":7,"result":"0x1237"}));
    assert!(
        crate::support::wait_until(Duration::from_secs(10), || node.head() >= 3),
        "node mines"
    );
    r.set_lag(2);
    let head = node.head();
    let v = ask(&mut c, &crate::support::call("8", "eth_blockNumber", "[]"));
    let lagged = relay::hex_u64(&v["result"]).unwrap();
    assert!(
        lagged + 2 <= node.head() && lagged + 2 >= head,
        "lagged {lagged} vs node {head}"
    );
    // A garbage raw transaction still counts as forwarded (the node refuses it, the relay passed it on).
    let v = ask(
        &mut c,
        &crate::support::call("9", "eth_sendRawTransaction", r#"["0x1234"]"#),
    );
    assert!(v.get("error").is_some(), "{v}");
    assert_eq!(ledger.count(&relay::keccak_hex("0x1234").unwrap()), 1);
    assert_eq!(r.forwarded("eth_sendRawTransaction"), 1);

    // The one-shot trap: other methods pass; the next raw transaction is forwarded and its answer lost; the
    // one after is answered again.
    r.reset_after_next("eth_sendRawTransaction");
    let v = ask(&mut c, &crate::support::call("10", "eth_chainId", "[]"));
    assert_eq!(v["result"], "0x1237", "{v}");
    assert!(r.trap_armed());
    let mut lost = crate::support::Conn::connect(r.addr());
    let body = crate::support::call("11", "eth_sendRawTransaction", r#"["0x5678"]"#);
    let answer = lost
        .send(&crate::support::http::post("/", body.as_bytes()))
        .and_then(|_| lost.read_response());
    assert!(
        answer.is_err(),
        "the trapped request was answered: {:?}",
        answer.map(|r| r.describe())
    );
    assert!(!r.trap_armed());
    assert_eq!(ledger.count(&relay::keccak_hex("0x5678").unwrap()), 1);
    let v = ask(
        &mut c,
        &crate::support::call("12", "eth_sendRawTransaction", r#"["0x9abc"]"#),
    );
    assert!(v.get("error").is_some(), "{v}");
    assert_eq!(r.forwarded("eth_sendRawTransaction"), 3);
}

/// Every id Prism sends upstream must survive a JavaScript JSON parser (ganache, hardhat, many gateways):
/// numbers above 2^53 - 1 come back rounded, the answer no longer matches its request, and the provider is
/// judged broken (its breaker opens on the first probes).
#[test]
fn upstream_ids_are_exact_in_javascript() {
    let node = relay::node();
    let ledger = Ledger::new();
    let r = Relay::start("r1", node, &ledger);
    let prism = Prism::builder()
        .network_option("probe_interval_ms", 100)
        .provider_url(&r.url())
        .start();
    let probed = crate::support::wait_until(Duration::from_secs(10), || r.received("eth_blockNumber") >= 2);
    assert!(probed, "Prism never probed the relay");
    let resp = prism.rpc(crate::support::call("1", "eth_getBalance", crate::support::BALANCE_PARAMS).as_bytes());
    let max = r.max_id();
    assert!(
        max < (1u64 << 53),
        "Prism sent upstream id {max}, above 2^53-1: a JavaScript node answers with it rounded \
         ({}), so the answer never matches (client read answered: {})",
        max as f64,
        resp.text()
    );
    wait_serving(&prism, &["p1"]);
}

/// viem's `getLogs` from block 0 to the head through Prism, in front of two relays that refuse any
/// `eth_getLogs` over 3 blocks as QuickNode does (HTTP 413, -32614): Prism splits the range, and viem gets
/// exactly what the node answers directly (decoded, and the raw `result` bytes too).
#[test]
fn viem_get_logs_over_a_wide_range_through_range_limited_providers_is_the_nodes_answer() {
    let (_ledger, relays, prism) = setup_with(2, false);
    for r in &relays {
        r.set_logs_range_limit(Some(3));
    }
    let node = relay::node();
    // Account 7: the suite shares one ganache, and sync_submit.rs's presigned nonce-0 transfer is account 8's.
    let from = relay::DEV_ACCOUNTS[7];
    let (ok, stdout, stderr) = run_client(
        "node",
        &["logs.mjs", &format!("http://{}", prism.addr()), &node.http_url(), from],
        Duration::from_secs(90),
    );
    assert!(ok, "logs.mjs failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let out: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out["values"], serde_json::json!([0, 1, 10, 11, 20, 21]), "{out}");
    assert_eq!(
        out["same"], true,
        "viem's Set logs through Prism differ from the node's: {out}"
    );
    assert_eq!(
        out["sameAll"], true,
        "every log through Prism differs from the node's: {out}"
    );
    let head = out["head"].as_u64().unwrap();
    assert!(head > 3, "the range is wider than the relays' limit: {out}");
    let refused: u64 = relays.iter().map(Relay::logs_refused).sum();
    assert!(refused >= 1, "the relays' limit was met");
    // Byte for byte: the same filter straight to the node and through Prism.
    let body = crate::support::call(
        "7",
        "eth_getLogs",
        &format!(r#"[{{"fromBlock":"0x0","toBlock":"0x{head:x}"}}]"#),
    );
    let direct = crate::support::Conn::connect(node.addr).request(&crate::support::http::post("/", body.as_bytes()));
    let through = prism.rpc(body.as_bytes());
    let want = crate::support::json::field(&direct.body, "result").expect("node result");
    let got = crate::support::json::field(&through.body, "result").unwrap_or_else(|| panic!("{}", through.describe()));
    assert_eq!(String::from_utf8_lossy(got), String::from_utf8_lossy(want));
}
