//! Reorgs as a real node makes them (issue 37): Foundry's anvil (`tests/support/anvil.rs`) replaces its last
//! blocks on demand (`anvil_reorg`, `anvil_rollback`), and Prism, in front of it over HTTP and WebSocket, must
//! never serve what the chain no longer holds.
//!
//! - **Cached answers**: receipts, transactions, blocks (by number and by hash), logs and state reads are read
//!   through Prism (twice, so whatever Prism caches is cached), the node reorganises (depth 1, depth 3, and
//!   depth 4 with `cache_depth_blocks = 2`, deeper than the cache's depth), and once Prism has announced the
//!   reorg to a `newHeads` subscriber every read through Prism must equal anvil's own answer: a dropped
//!   transaction's receipt is `null`, a moved one names its new block.
//! - **Subscriptions**: `newHeads` and `logs` through Prism across a reorg and a rollback, against anvil's
//!   own stream: every replaced height re-announced once, in order, each head's `parentHash` the head
//!   delivered before it at the height below; the logs of replaced blocks re-delivered with
//!   `"removed": true` (as geth sends them; anvil itself does not) before the new ones.
//!
//! Each test prints what it measured (stale answers, time from the reorg to the first frame announcing it).
//! Needs `scripts/deps/evm.sh` (anvil in tests/evm/node_modules).

use crate::support::anvil::{Anvil, ACCOUNTS};
use crate::support::wsfeed::Feed;
use crate::support::{wait_serving, Prism};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Prism in front of `anvil` (HTTP and WebSocket), probing every 100 ms, with this cache depth.
fn prism_for(anvil: &Anvil, cache_depth: u64) -> Prism {
    let prism = Prism::builder()
        .network_option("probe_interval_ms", 100)
        .network_option("cache_depth_blocks", cache_depth)
        .provider_url_with(&anvil.http_url(), &anvil.ws_option())
        .start();
    wait_serving(&prism, &["p1"]);
    prism
}

/// A read through Prism: its `result`, or `{"error": ...}`.
fn through(prism: &Prism, method: &str, params: &Value) -> Value {
    through_cached(prism, method, params).0
}

/// [`through`], and whether Prism answered it from its cache (`x-prism-cache: hit`).
fn through_cached(prism: &Prism, method: &str, params: &Value) -> (Value, bool) {
    let body = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}).to_string();
    let r = prism.rpc(body.as_bytes());
    assert_eq!(r.status, 200, "{method} through Prism: {}", r.describe());
    let hit = r.header("x-prism-cache") == Some("hit");
    let v = r.json();
    let value = match v.get("error") {
        Some(e) => json!({ "error": e }),
        None => v["result"].clone(),
    };
    (value, hit)
}

/// The same read straight to anvil.
fn direct(anvil: &Anvil, method: &str, params: &Value) -> Value {
    let v = anvil.rpc(method, params.clone());
    match v.get("error") {
        Some(e) => json!({ "error": e }),
        None => v["result"].clone(),
    }
}

fn hex(n: u64) -> String {
    format!("0x{n:x}")
}

fn hash_of(block: &Value) -> String {
    block["hash"].as_str().unwrap_or_default().to_string()
}

/// Two `set` transactions on `contract`, A (from ACCOUNTS[1]) and B (from ACCOUNTS[2]), mined into the last
/// `depth` blocks: at depth 1 both are in the head block; otherwise A is in the first block a reorg of
/// `depth` replaces and B in the next one. Returns (raw A, hash A, hash B, head).
fn two_transactions(anvil: &Anvil, contract: &str, depth: u64) -> (String, String, String, u64) {
    let raw_a = anvil.sign_set(ACCOUNTS[1], contract, 1, anvil.nonce(ACCOUNTS[1]));
    let raw_b = anvil.sign_set(ACCOUNTS[2], contract, 2, anvil.nonce(ACCOUNTS[2]));
    let send = |raw: &str| {
        anvil
            .result("eth_sendRawTransaction", json!([raw]))
            .as_str()
            .unwrap()
            .to_string()
    };
    let (a, b);
    if depth == 1 {
        a = send(&raw_a);
        b = send(&raw_b);
        anvil.mine(1);
    } else {
        a = send(&raw_a);
        anvil.mine(1);
        b = send(&raw_b);
        anvil.mine(1);
        anvil.mine(depth - 2);
    }
    let head = anvil.head();
    for h in [&a, &b] {
        let r = anvil.result("eth_getTransactionReceipt", json!([h]));
        assert_eq!(r["status"], "0x1", "{h} mined: {r}");
    }
    (raw_a, a, b, head)
}

/// Every read a client of this chain makes about the blocks a reorg of `depth` at `head` replaces (and the
/// one below them), with params.
fn reads(contract: &str, a: &str, b: &str, head: u64, depth: u64, old_hashes: &[String]) -> Vec<(String, Value)> {
    let first = head + 1 - depth;
    let mut r: Vec<(String, Value)> = vec![
        ("eth_getTransactionReceipt".into(), json!([a])),
        ("eth_getTransactionReceipt".into(), json!([b])),
        ("eth_getTransactionByHash".into(), json!([a])),
        ("eth_getTransactionByHash".into(), json!([b])),
    ];
    for h in first.saturating_sub(1)..=head {
        r.push(("eth_getBlockByNumber".into(), json!([hex(h), false])));
        r.push(("eth_getBalance".into(), json!([ACCOUNTS[1], hex(h)])));
        r.push((
            "eth_getLogs".into(),
            json!([{"address": contract, "fromBlock": hex(first.saturating_sub(1)), "toBlock": hex(h)}]),
        ));
    }
    for hash in old_hashes {
        r.push(("eth_getBlockByHash".into(), json!([hash, false])));
        r.push(("eth_getLogs".into(), json!([{ "blockHash": hash }])));
    }
    r
}

/// Stale answers Prism serves after anvil reorganises its last `depth` blocks (A moved to the new head
/// block, B dropped), with `cache_depth_blocks = cache_depth`, once Prism has announced the reorg.
fn stale_after_reorg(depth: u64, cache_depth: u64) {
    let anvil = Anvil::start();
    let contract = anvil.deploy_probe();
    anvil.mine(6);
    let prism = prism_for(&anvil, cache_depth);
    let feed = Feed::connect(&format!("ws://{}/", prism.addr()));
    let heads = feed.subscribe(json!(["newHeads"]));
    // A and B are mined once the subscription (Prism's heads feed too) is up: the feed delivers their blocks,
    // which is what proves cached answers about them.
    let (raw_a, a, b, head) = two_transactions(&anvil, &contract, depth);
    let top = hash_of(&anvil.block(head));
    assert!(
        feed.wait(Duration::from_secs(10), |f| f
            .of(&heads)
            .iter()
            .any(|fr| fr.result["hash"] == top.as_str())),
        "Prism never delivered the head"
    );
    let first = head + 1 - depth;
    let old_hashes: Vec<String> = (first..=head).map(|h| hash_of(&anvil.block(h))).collect();
    let reads = reads(&contract, &a, &b, head, depth, &old_hashes);
    // Twice each: whatever Prism caches is in its cache now, and served from it.
    let mut cached = 0;
    for (round, (m, p)) in reads.iter().chain(reads.iter()).enumerate() {
        let (got, hit) = through_cached(&prism, m, p);
        assert_eq!(got, direct(&anvil, m, p), "{m} {p} before the reorg");
        cached += usize::from(hit && round >= reads.len());
    }
    // Receipts, transactions, blocks by hash and the logs of A's and B's blocks by hash at least (blocks,
    // balances and logs by number too where they are deeper than the cache's depth).
    let by_hash = 4 + depth as usize + depth.min(2) as usize;
    assert!(
        cached >= by_hash,
        "only {cached} of {} reads came from the cache before the reorg",
        reads.len()
    );

    // A goes into the new head block, B is gone.
    let started = Instant::now();
    anvil.reorg(depth, json!([[raw_a, depth - 1]]));
    let new_head = anvil.block(head);
    assert_ne!(
        hash_of(&new_head),
        old_hashes[old_hashes.len() - 1],
        "anvil replaced the head block"
    );
    assert!(
        anvil.rpc("eth_getTransactionReceipt", json!([b]))["result"].is_null(),
        "anvil dropped B"
    );
    let announced = feed.wait(Duration::from_secs(5), |f| {
        f.of(&heads).iter().any(|fr| fr.result["hash"] == new_head["hash"])
    });
    let announce_ms = feed
        .of(&heads)
        .iter()
        .filter(|fr| fr.at > started)
        .find(|fr| {
            fr.result["number"]
                .as_str()
                .and_then(|n| u64::from_str_radix(&n[2..], 16).ok())
                <= Some(head)
        })
        .map(|fr| fr.at.saturating_duration_since(started).as_secs_f64() * 1000.0);

    // The order: the client reads the new latest block first (its parentHash contradicts what was
    // cached below it), then everything it read before.
    let latest = through(&prism, "eth_getBlockByNumber", &json!(["latest", false]));
    let mut stale = Vec::new();
    for (m, p) in std::iter::once(("eth_getBlockByNumber".to_string(), json!([hex(head), false]))).chain(reads) {
        let (got, want) = (through(&prism, &m, &p), direct(&anvil, &m, &p));
        if got != want {
            eprintln!("  stale: {m} {p}");
            stale.push(format!("{m} {p}: Prism {got} / anvil {want}"));
        }
    }
    let total = 1 + reads_len(depth);
    eprintln!(
        "depth {depth} (cache_depth_blocks {cache_depth}): {cached} of {} reads from the cache before the reorg; \
         {} stale of {total} reads after it; first newHeads frame announcing it after {announce_ms:?} ms; latest {}",
        reads_len(depth),
        stale.len(),
        latest["number"]
    );
    assert!(
        announced,
        "Prism never re-announced height {head} with its new hash on newHeads; frames: {:?}",
        feed.of(&heads)
            .iter()
            .map(|f| (&f.result["number"], &f.result["hash"]))
            .collect::<Vec<_>>()
    );
    assert!(stale.is_empty(), "{} stale answers:\n{}", stale.len(), stale.join("\n"));
}

fn reads_len(depth: u64) -> usize {
    4 + 3 * (depth as usize + 1) + 2 * depth as usize
}

#[test]
fn answers_after_a_reorg_of_one_block_are_the_nodes() {
    stale_after_reorg(1, 64);
}

#[test]
fn answers_after_a_reorg_of_three_blocks_are_the_nodes() {
    stale_after_reorg(3, 64);
}

#[test]
fn answers_after_a_reorg_deeper_than_the_cache_depth_are_the_nodes() {
    stale_after_reorg(4, 2);
}

/// (number, hash) of a head frame.
fn head_id(f: &crate::support::wsfeed::Frame) -> (u64, String) {
    let n = f.result["number"].as_str().unwrap_or("0x0");
    (
        u64::from_str_radix(&n[2..], 16).unwrap_or(0),
        f.result["hash"].as_str().unwrap_or("").to_string(),
    )
}

/// (blockHash, logIndex, removed) of a log frame.
fn log_id(log: &Value) -> (String, String, bool) {
    (
        log["blockHash"].as_str().unwrap_or("").to_string(),
        log["logIndex"].as_str().unwrap_or("").to_string(),
        log["removed"] == true,
    )
}

/// `newHeads` and `logs` through Prism across a reorg of depth 3 (one transaction moved, others dropped) and
/// a rollback followed by a new block, against anvil's own streams on the same chain: the same heads in the
/// same order (every replaced height once again, with its new hash), the parent chain unbroken, and the logs
/// as geth sends them (anvil itself sends no removed logs): those of replaced blocks again with
/// `"removed": true`, before the new chain's.
#[test]
fn new_heads_and_logs_through_prism_follow_the_nodes_reorgs() {
    let anvil = Anvil::start();
    let contract = anvil.deploy_probe();
    anvil.mine(3);
    let prism = prism_for(&anvil, 64);
    let node = Feed::connect(&anvil.ws_url());
    let via = Feed::connect(&format!("ws://{}/", prism.addr()));
    let filter = json!(["logs", {"address": contract}]);
    let (node_heads, node_logs) = (node.subscribe(json!(["newHeads"])), node.subscribe(filter.clone()));
    let (heads, logs) = (via.subscribe(json!(["newHeads"])), via.subscribe(filter));
    // A first block both streams show: Prism's upstream subscriptions are in place from here.
    anvil.mine(1);
    let first = hash_of(&anvil.block(anvil.head()));
    let has = |f: &Feed, sub: &str, hash: &str| f.of(sub).iter().any(|fr| fr.result["hash"] == hash);
    assert!(
        via.wait(Duration::from_secs(10), |f| has(f, &heads, &first)),
        "Prism delivered no head"
    );
    let sets = |value: u64| {
        let from = ACCOUNTS[1 + (value as usize % 3)];
        anvil.send(
            json!({"from": from, "to": contract, "data": crate::support::anvil::set_data(value), "gas": "0x186a0"}),
        )
    };
    for v in 1..=4 {
        sets(v);
        anvil.mine(1);
    }
    let before = hash_of(&anvil.block(anvil.head()));
    assert!(via.wait(Duration::from_secs(10), |f| has(f, &heads, &before)));
    let reorg_at = Instant::now();
    // Depth 3: the last three blocks (logs of sets 2..4) replaced; a new set(10) in the second new block.
    let moved = anvil.sign_set(ACCOUNTS[1], &contract, 10, anvil.nonce(ACCOUNTS[1]));
    anvil.reorg(3, json!([[moved, 1]]));
    // anvil announces a block to a subscription lazily: one it replaces again right away may never be sent
    // to a subscription (seen for Prism's, not the test's). So the reorg's announcement is waited for.
    let reorged = hash_of(&anvil.block(anvil.head()));
    for (f, sub, who) in [(&node, &node_heads, "anvil"), (&via, &heads, "Prism")] {
        assert!(
            f.wait(Duration::from_secs(10), |f| has(f, sub, &reorged)),
            "{who} never showed the reorg's head"
        );
    }
    // A rollback of the head and a new block with a set(11) in it.
    anvil.rollback(1);
    sets(11);
    anvil.mine(1);
    sets(12);
    anvil.mine(2);
    let last = hash_of(&anvil.block(anvil.head()));
    for (f, sub, who) in [(&node, &node_heads, "anvil"), (&via, &heads, "Prism")] {
        assert!(
            f.wait(Duration::from_secs(10), |f| has(f, sub, &last)),
            "{who} never showed the last head"
        );
    }
    // The node's last log through Prism too (logs may follow their head).
    let node_last_log = node
        .of(&node_logs)
        .last()
        .map(|f| log_id(&f.result))
        .expect("anvil sent logs");
    assert!(
        via.wait(Duration::from_secs(5), |f| f
            .of(&logs)
            .iter()
            .any(|fr| log_id(&fr.result) == node_last_log)),
        "Prism never delivered the node's last log"
    );

    // Heads: the node's sequence from the first common head on, exactly.
    let from_first = |frames: Vec<crate::support::wsfeed::Frame>| -> Vec<(u64, String)> {
        let ids: Vec<(u64, String)> = frames.iter().map(head_id).collect();
        let start = ids
            .iter()
            .position(|(_, h)| *h == first)
            .expect("the first common head");
        ids[start..].to_vec()
    };
    let want = from_first(node.of(&node_heads));
    let got = from_first(via.of(&heads));
    assert_eq!(got, want, "newHeads through Prism differ from anvil's own");
    // The parent chain is unbroken: each head's parent is the head delivered before it one height below.
    let mut delivered = std::collections::HashMap::new();
    for f in via.of(&heads) {
        let (n, h) = head_id(&f);
        if let Some(prev) = delivered.get(&(n - 1)) {
            assert_eq!(
                &f.result["parentHash"],
                prev,
                "head {n}'s parent is not the head delivered at {}",
                n - 1
            );
        }
        delivered.insert(n, f.result["hash"].clone());
        let _ = h;
    }
    let announced = via
        .of(&heads)
        .iter()
        .find(|f| f.at > reorg_at)
        .map(|f| f.at.duration_since(reorg_at));

    // Logs: anvil's stream replayed as geth sends it (a head at or below the last head seen is a reorg from
    // its height: the logs delivered from there up come again, removed, oldest first).
    let mut expected: Vec<(String, String, bool)> = Vec::new();
    let mut live: Vec<(u64, Value)> = Vec::new();
    let mut top = 0u64;
    let mut node_frames: Vec<crate::support::wsfeed::Frame> = node.of(&node_heads);
    // The block the node ends up with at each height (the last head it announced there).
    let settled: std::collections::HashMap<u64, String> = node_frames.iter().map(head_id).collect();
    node_frames.extend(node.of(&node_logs));
    node_frames.sort_by_key(|f| f.at);
    for f in node_frames {
        if f.subscription == node_heads {
            let (n, hash) = head_id(&f);
            if n <= top {
                // anvil may send a block's logs before its head, even before the head of the height below
                // it when that one is announced late: the logs of the new chain's blocks stay.
                let (stay, gone): (Vec<_>, Vec<_>) = live.drain(..).partition(|(b, l)| {
                    *b < n
                        || (*b == n && l["blockHash"] == hash.as_str())
                        || (*b > n && settled.get(b).is_some_and(|h| l["blockHash"] == h.as_str()))
                });
                live = stay;
                expected.extend(gone.iter().map(|(_, l)| (log_id(l).0, log_id(l).1, true)));
            }
            top = top.max(n);
        } else {
            let n = u64::from_str_radix(&f.result["blockNumber"].as_str().unwrap()[2..], 16).unwrap();
            expected.push(log_id(&f.result));
            live.push((n, f.result.clone()));
        }
    }
    let got_logs: Vec<(String, String, bool)> = via.of(&logs).iter().map(|f| log_id(&f.result)).collect();
    let removed = got_logs.iter().filter(|l| l.2).count();
    let first_removed = via
        .of(&logs)
        .iter()
        .find(|f| f.result["removed"] == true)
        .map(|f| f.at.duration_since(reorg_at));
    eprintln!(
        "heads through Prism: {} ({} after the reorg); first frame after the reorg in {announced:?}; logs: {} ({removed} removed), first removed log in {first_removed:?}",
        got.len(),
        via.of(&heads).iter().filter(|f| f.at > reorg_at).count(),
        got_logs.len()
    );
    assert!(
        removed >= 3,
        "the logs of the three replaced blocks came again removed: {got_logs:?}"
    );
    assert_eq!(
        got_logs, expected,
        "logs through Prism differ from anvil's stream as geth sends it"
    );
    // What stands at the end is the node's own answer.
    let final_logs = anvil.result(
        "eth_getLogs",
        json!([{"address": contract, "fromBlock": "0x0", "toBlock": "latest"}]),
    );
    let mut standing: Vec<(String, String, bool)> = Vec::new();
    for l in &got_logs {
        if l.2 {
            standing.retain(|s| (&s.0, &s.1) != (&l.0, &l.1));
        } else {
            standing.push(l.clone());
        }
    }
    let want_standing: Vec<(String, String, bool)> = final_logs.as_array().unwrap().iter().map(log_id).collect();
    let in_view: Vec<_> = want_standing.iter().filter(|l| standing.contains(l)).cloned().collect();
    assert_eq!(
        standing, in_view,
        "logs left standing through Prism are not the chain's"
    );
}

/// viem (`tests/evm/reorg.mjs`), a real client, through Prism and straight to anvil at once: its reads of
/// receipts, transactions, blocks and logs through Prism equal the node's before the reorg, after it (the
/// dropped transaction's receipt "not found" on both) and after a rollback; its `watchBlocks` through
/// Prism shows the node's blocks in the node's order (a client notices the reorg where the node's stream
/// shows it: a block that does not build on the previous one); its `watchContractEvent` through Prism gets
/// the node's logs, and the replaced blocks' logs again with `removed: true`.
#[test]
fn viem_through_prism_sees_the_nodes_reorg_as_the_node_shows_it() {
    let anvil = Anvil::start();
    anvil.mine(3);
    let prism = prism_for(&anvil, 64);
    let mut cmd = std::process::Command::new("node");
    cmd.current_dir(crate::support::relay::evm_dir()).args([
        "reorg.mjs",
        &format!("http://{}/", prism.addr()),
        &format!("ws://{}/", prism.addr()),
        &anvil.http_url(),
        &anvil.ws_url(),
    ]);
    let ran = crate::support::tools::run_with_timeout(cmd, b"", Duration::from_secs(120));
    assert!(
        ran.ok,
        "reorg.mjs failed\nstdout:\n{}\nstderr:\n{}",
        ran.stdout, ran.stderr
    );
    let out: Value = serde_json::from_str(ran.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", ran.stdout));
    assert_eq!(out["errors"], json!({"prism": null, "node": null}), "watcher errors");
    // viem read everything twice before the reorg: the second time from Prism's cache, proven by its heads
    // feed (so what follows checks the cache too, not only the node's answers).
    assert!(
        prism.metric("prism_cache_hits_total") >= 4.0,
        "A's and B's receipts and transactions came from Prism's cache the second time"
    );
    for phase in ["before", "after", "end"] {
        assert_eq!(
            out[phase]["prism"], out[phase]["node"],
            "viem's reads {phase} the reorg: through Prism vs the node"
        );
    }
    let after = &out["after"]["node"];
    assert!(after["receiptB"]["notFound"].is_string(), "B was dropped: {after}");
    assert_ne!(
        after["receiptA"]["blockHash"], out["before"]["node"]["receiptA"]["blockHash"],
        "A moved to another block: {out}"
    );

    // watchBlocks: the node's blocks, in the node's order, from the first one both showed.
    let from_first = |blocks: &Value| -> Vec<Value> {
        let all = blocks.as_array().unwrap();
        let start = all
            .iter()
            .position(|b| b["hash"] == out["first"])
            .expect("the first block");
        all[start..].to_vec()
    };
    let (via, node) = (from_first(&out["blocks"]["prism"]), from_first(&out["blocks"]["node"]));
    assert_eq!(via, node, "viem's watchBlocks through Prism vs on the node");
    let reorgs = via.iter().filter(|b| b["buildsOnPrevious"] == false).count();
    assert!(
        reorgs >= 2,
        "viem saw the reorg and the rollback (a block not on the previous): {via:?}"
    );

    // watchContractEvent: the node's logs; the replaced blocks' logs again, removed, before the new ones.
    let logs = |side: &str| out["logs"][side].as_array().unwrap().clone();
    let (via_logs, node_logs) = (logs("prism"), logs("node"));
    let live: Vec<&Value> = via_logs.iter().filter(|l| l["removed"] == false).collect();
    let node_live: Vec<&Value> = node_logs.iter().filter(|l| l["removed"] == false).collect();
    assert_eq!(live, node_live, "the logs themselves, through Prism vs on the node");
    let removed: Vec<&Value> = via_logs.iter().filter(|l| l["removed"] == true).collect();
    let at = |block: &Value, removed: bool| {
        via_logs
            .iter()
            .position(|l| l["blockHash"] == *block && l["removed"] == removed)
            .unwrap_or_else(|| panic!("no log of block {block} with removed {removed} through Prism: {via_logs:?}"))
    };
    let (before, after) = (&out["before"]["node"], &out["after"]["node"]);
    at(&before["receiptB"]["blockHash"], true);
    assert!(
        at(&before["receiptA"]["blockHash"], true) < at(&after["receiptA"]["blockHash"], false),
        "A's old log came removed before its new one: {via_logs:?}"
    );
    // Exactly the logs delivered from blocks the chain no longer has came again removed (the reorg's, and
    // the rolled-back head's), in the order they were delivered.
    let standing: Vec<&Value> = out["end"]["node"]["logs"].as_array().unwrap().iter().collect();
    let off_chain: Vec<(&Value, &Value)> = live
        .iter()
        .filter(|l| !standing.iter().any(|s| s["blockHash"] == l["blockHash"]))
        .map(|l| (&l["blockHash"], &l["value"]))
        .collect();
    let removed: Vec<(&Value, &Value)> = removed.iter().map(|l| (&l["blockHash"], &l["value"])).collect();
    assert_eq!(
        removed, off_chain,
        "the logs of blocks no longer in the chain came again removed: {via_logs:?}"
    );
}

/// A node that announces only a reorg's new head, as geth does after a reorg (the relay drops anvil's
/// re-announcements of the heights below it): Prism walks back by parent hash (`eth_getBlockByHash`) to the
/// head it delivered before the fork and delivers every replaced height anyway, so its stream is still the
/// one anvil sends its own subscribers; a receipt cached before the reorg is gone after it.
#[test]
fn a_reorg_announced_by_its_new_head_alone_is_linked_by_parent_hashes() {
    let anvil = Anvil::start();
    let contract = anvil.deploy_probe();
    anvil.mine(3);
    let ledger = crate::support::relay::Ledger::new();
    let relay = crate::support::relay::Relay::start("geth-like", &anvil.as_node(), &ledger);
    relay.set_only_new_heads(true);
    let prism = Prism::builder()
        .network_option("probe_interval_ms", 100)
        .provider_url_with(&relay.url(), &relay.ws_option())
        .start();
    wait_serving(&prism, &["p1"]);
    let node = Feed::connect(&anvil.ws_url());
    let via = Feed::connect(&format!("ws://{}/", prism.addr()));
    let (node_heads, heads) = (node.subscribe(json!(["newHeads"])), via.subscribe(json!(["newHeads"])));
    let (raw_a, a, b, head) = two_transactions(&anvil, &contract, 3);
    let has = |f: &Feed, sub: &str, hash: &str| f.of(sub).iter().any(|fr| fr.result["hash"] == hash);
    let top = hash_of(&anvil.block(head));
    assert!(via.wait(Duration::from_secs(10), |f| has(f, &heads, &top)));
    for _ in 0..2 {
        assert_eq!(
            through(&prism, "eth_getTransactionReceipt", &json!([b])),
            direct(&anvil, "eth_getTransactionReceipt", &json!([b]))
        );
    }
    let (_, cached) = through_cached(&prism, "eth_getTransactionReceipt", &json!([b]));
    assert!(cached, "B's receipt comes from the cache before the reorg");

    anvil.reorg(3, json!([[raw_a, 2]]));
    let reorged = hash_of(&anvil.block(head));
    for (f, sub, who) in [(&node, &node_heads, "anvil"), (&via, &heads, "Prism")] {
        assert!(
            f.wait(Duration::from_secs(10), |f| has(f, sub, &reorged)),
            "{who} never showed the reorg's head"
        );
    }
    let ids = |f: &Feed, sub: &str| -> Vec<(u64, String)> {
        let all: Vec<(u64, String)> = f.of(sub).iter().map(head_id).collect();
        let start = all.iter().position(|(n, _)| *n == head + 1 - 3).unwrap_or(0);
        all[start..].to_vec()
    };
    assert_eq!(
        ids(&via, &heads),
        ids(&node, &node_heads),
        "Prism's stream (the node sent it only the new head) vs anvil's own"
    );
    assert!(
        relay.received("eth_getBlockByHash") >= 2,
        "the replaced heights were fetched by parent hash"
    );
    assert_eq!(
        through(&prism, "eth_getTransactionReceipt", &json!([b])),
        Value::Null,
        "B was dropped"
    );
    assert_eq!(
        through(&prism, "eth_getTransactionReceipt", &json!([a]))["blockHash"],
        json!(reorged),
        "A moved to the new head block"
    );
}
