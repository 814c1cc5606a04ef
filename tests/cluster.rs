//! Several Prism nodes sharing health, marks and limits through a real `redis-server` (one per test, on
//! its own loopback port): a breaker opened on node A steers node B; a key's rate limit is shared within a
//! few percent; killing Redis mid-load loses no request and overspends at most each node's share; a
//! restarted Redis brings sharing back; a key's high-water mark reaches the other node. Against the Redis
//! people run: over TLS (`rediss://`, a private CA; a node with the wrong CA refuses and keeps serving),
//! with an ACL user (a wrong password is a clear error), and through Sentinel (a failover mid-load loses
//! no request and the nodes follow the new master).
//!
//! The tests run one at a time (a file-wide lock): each drives two or three Prism processes, fakes and
//! Redis on a small machine, and the limit and timing checks are fairer without a neighbour's load.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "tests and their fakes run on plain threads, not shards; the size targets are for the product"
)]

mod support;

use support::redis as redis_server;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis_server::{RedisOptions, RedisServer, Sentinel};
use support::fake::Reply;
use support::http::{self, Conn};
use support::{call, expect_http_result, wait_serving, wait_until, FakeProvider, Mode, Prism, PrismBuilder};

const KEY: &str = "cluster-key-0001";
const BALANCE: &str = support::BALANCE_PARAMS;
/// What the fakes answer to `eth_getBalance`: distinctive bytes, for byte-for-byte comparisons.
const BALANCE_RESULT: &str = r#""0x1bc16d674ec80000""#;
/// The shared key limit of the quota tests.
const RATE: f64 = 50.0;
const BURST: f64 = 50.0;
const SYNC_MS: u64 = 50;
const TTL_MS: u64 = 1000;
/// Tokens a node leases ahead: two sync intervals' worth (see `cluster::lease`).
const LEASE_TARGET: f64 = 5.0;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// `[cluster]` for every node of a test.
fn cluster_toml(redis: &RedisServer, prefix: &str) -> String {
    format!(
        "[cluster]\nredis_url = \"{}\"\nttl_ms = {TTL_MS}\nsync_interval_ms = {SYNC_MS}\nexpected_nodes = 2\nprefix = \"{prefix}\"\n",
        redis.url()
    )
}

/// One `[[keys]]` entry named "k", round robin, with an optional `(rate_per_s, burst)`.
fn key_toml(limit: Option<(f64, f64)>) -> String {
    let mut t = format!("\n[[keys]]\nname = \"k\"\nkey = \"{KEY}\"\nstrategy = \"round_robin\"\n");
    if let Some((rate, burst)) = limit {
        t.push_str(&format!("rate_per_s = {rate:.1}\nburst = {}\n", burst as u32));
    }
    t
}

/// Quick in-Prism retries, so a failing provider costs a client nothing.
const QUICK_RETRY: &str = "\n[policy.retry]\nmax_attempts = 3\nbase_delay_ms = 1\nmax_delay_ms = 5\n";

fn node(providers: &[&FakeProvider], extra: &str) -> PrismBuilder {
    Prism::builder()
        .network("testnet", 4663)
        .network_option("probe_interval_ms", 100)
        .providers(providers)
        .extra_toml(extra)
}

/// `/status` → `cluster`.
fn cluster(prism: &Prism) -> serde_json::Value {
    let s = prism.status();
    assert!(s["cluster"].is_object(), "no cluster object in /status: {s}");
    s["cluster"].clone()
}

fn node_id(prism: &Prism) -> String {
    cluster(prism)["node"].as_str().expect("cluster.node").to_string()
}

/// Waits until every node is connected to Redis and sees every other node as a peer.
fn wait_cluster(nodes: &[&Prism], within: Duration) {
    let ids: Vec<String> = nodes.iter().map(|n| node_id(n)).collect();
    for (i, n) in nodes.iter().enumerate() {
        let mut last = serde_json::Value::Null;
        let ok = wait_until(within, || {
            last = cluster(n);
            let peers: Vec<&str> = last["peers"]
                .as_array()
                .map(|a| a.iter().filter_map(|p| p["node"].as_str()).collect())
                .unwrap_or_default();
            last["connected"] == true
                && ids
                    .iter()
                    .enumerate()
                    .all(|(j, id)| j == i || peers.contains(&id.as_str()))
        });
        assert!(ok, "node {i} did not join the cluster within {within:?}: {last}");
    }
}

/// The peer entry of `peer_id` in `prism`'s `/status`.
fn peer_entry(prism: &Prism, peer_id: &str) -> Option<serde_json::Value> {
    cluster(prism)["peers"]
        .as_array()?
        .iter()
        .find(|p| p["node"] == peer_id)
        .cloned()
}

fn keyed(prism: &Prism, body: &str) -> http::Response {
    prism.rpc_with("/", body.as_bytes(), &[&format!("x-api-key: {KEY}")])
}

/// `eth_blockNumber` with the key, as a number.
fn block_number(prism: &Prism, id: u64) -> u64 {
    let r = keyed(prism, &call(&id.to_string(), "eth_blockNumber", "[]"));
    let raw = expect_http_result(&r, &id.to_string());
    let text = String::from_utf8(raw).unwrap();
    let hex = text.trim_matches('"').trim_start_matches("0x");
    u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("eth_blockNumber result {text}: {e}"))
}

/// A read with the key; asserts a result and returns it.
fn read(prism: &Prism, id: u64) -> Vec<u8> {
    let r = keyed(prism, &call(&id.to_string(), "eth_getBalance", BALANCE));
    expect_http_result(&r, &id.to_string())
}

// ---- load ------------------------------------------------------------------------------------------

/// One answered (or failed) request of a load run.
struct Rec {
    /// When the answer (or the failure) came.
    at: Instant,
    node: usize,
    status: u16,
    /// The whole HTTP body, for 200s.
    body: Vec<u8>,
    /// Connection error, timeout or malformed response.
    error: Option<String>,
}

/// Threads sending the same keyed request over keep-alive connections until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<Vec<Rec>>>,
    started: Instant,
}

/// The request every load thread sends: identical bytes, so identical successful answers are expected.
fn load_body() -> Vec<u8> {
    http::post_with(
        "/",
        call("7", "eth_getBalance", BALANCE).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    )
}

impl Load {
    /// `threads` per node, each pausing `pace` between requests.
    fn start(nodes: &[(usize, SocketAddr)], threads: usize, pace: Duration) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for &(node, addr) in nodes {
            for _ in 0..threads {
                let stop = stop.clone();
                handles.push(thread::spawn(move || drive(node, addr, pace, &stop)));
            }
        }
        Load {
            stop,
            handles,
            started: Instant::now(),
        }
    }

    /// Stops the threads; returns every record and how long the load ran.
    fn finish(self) -> (Vec<Rec>, Duration) {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Vec::new();
        for h in self.handles {
            all.extend(h.join().expect("load thread panicked"));
        }
        (all, self.started.elapsed())
    }
}

fn drive(node: usize, addr: SocketAddr, pace: Duration, stop: &AtomicBool) -> Vec<Rec> {
    let req = load_body();
    let mut recs = Vec::new();
    let mut conn: Option<Conn> = None;
    while !stop.load(Ordering::SeqCst) {
        let fail = |e: String| Rec {
            at: Instant::now(),
            node,
            status: 0,
            body: Vec::new(),
            error: Some(e),
        };
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Conn::try_connect(addr) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    recs.push(fail(format!("connect: {e}")));
                    thread::sleep(pace);
                    continue;
                }
            },
        };
        if let Err(e) = c.send(&req) {
            recs.push(fail(format!("send: {e}")));
            conn = None;
            continue;
        }
        match c.read_response_within(Duration::from_secs(3)) {
            Ok(r) => {
                if r.closes() {
                    conn = None;
                }
                recs.push(Rec {
                    at: Instant::now(),
                    node,
                    status: r.status,
                    body: if r.status == 200 { r.body } else { Vec::new() },
                    error: None,
                });
            }
            Err(e) => {
                recs.push(fail(format!("read: {e}")));
                conn = None;
            }
        }
        thread::sleep(pace);
    }
    recs
}

/// Asserts every record is a 200 with exactly `expected` as body, or a 429 from the key limit.
fn assert_all_answered(recs: &[Rec], expected: &[u8], what: &str) {
    let errors: Vec<&String> = recs.iter().filter_map(|r| r.error.as_ref()).collect();
    assert!(
        errors.is_empty(),
        "{what}: {} of {} requests failed without an HTTP answer, e.g. {:?}",
        errors.len(),
        recs.len(),
        &errors[..errors.len().min(5)]
    );
    let odd: Vec<u16> = recs
        .iter()
        .map(|r| r.status)
        .filter(|s| *s != 200 && *s != 429)
        .collect();
    assert!(
        odd.is_empty(),
        "{what}: statuses other than 200/429: {:?}",
        &odd[..odd.len().min(20)]
    );
    let differing: Vec<String> = recs
        .iter()
        .filter(|r| r.status == 200 && r.body != expected)
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(
        differing.is_empty(),
        "{what}: {} successful answers differ from {:?}, e.g. {:?}",
        differing.len(),
        String::from_utf8_lossy(expected),
        &differing[..differing.len().min(3)]
    );
}

fn accepted(recs: &[Rec], node: Option<usize>, after: Option<Instant>) -> usize {
    recs.iter()
        .filter(|r| r.status == 200)
        .filter(|r| node.is_none_or(|n| r.node == n))
        .filter(|r| after.is_none_or(|t| r.at > t))
        .count()
}

/// Redis, one shared fake answering reads, and two nodes with the key limited to RATE/s, BURST.
fn two_limited_nodes(prefix: &str) -> (RedisServer, FakeProvider, Prism, Prism) {
    let redis = RedisServer::start();
    let fake = FakeProvider::start();
    fake.set_reply("eth_getBalance", Reply::Result(BALANCE_RESULT.into()));
    let extra = format!("{}{}", cluster_toml(&redis, prefix), key_toml(Some((RATE, BURST))));
    let a = node(&[&fake], &extra).start();
    let b = node(&[&fake], &extra).start();
    wait_serving(&a, &["p1"]);
    wait_serving(&b, &["p1"]);
    wait_cluster(&[&a, &b], Duration::from_secs(5));
    (redis, fake, a, b)
}

/// The exact bytes of one successful load request through `prism` (keyed calls on new connections,
/// waiting out 429s from the key limit for up to 3 s).
fn reference_body(prism: &Prism) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let r = prism.conn().request(&load_body());
        if r.status == 429 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
            continue;
        }
        expect_http_result(&r, "7");
        return r.body;
    }
}

// ---- tests -----------------------------------------------------------------------------------------

#[test]
fn breaker_opened_on_one_node_steers_the_other() {
    let _serial = serial();
    let redis = RedisServer::start();
    // Each node has its own pair of fakes (named p1, p2 on both), so what each node sends is counted apart.
    let (a1, a2) = (FakeProvider::start(), FakeProvider::start());
    let (b1, b2) = (FakeProvider::start(), FakeProvider::start());
    a1.set_method_mode("eth_getBalance", Mode::Status(500));
    let shared = format!("{}{}{QUICK_RETRY}", cluster_toml(&redis, "steer"), key_toml(None));
    let a = node(
        &[&a1, &a2],
        &format!("{shared}\n[policy.breaker]\nfailure_threshold = 1\nwindow_ms = 60000\ncooldown_ms = 60000\n"),
    )
    .start();
    let b = node(&[&b1, &b2], &shared).start();
    wait_serving(&a, &["p1", "p2"]);
    wait_serving(&b, &["p1", "p2"]);
    wait_cluster(&[&a, &b], Duration::from_secs(5));
    let a_id = node_id(&a);

    // Before: B spreads reads over both of its providers; nothing is open anywhere.
    for i in 0..20 {
        read(&b, i);
    }
    assert!(
        b1.count("eth_getBalance") >= 5 && b2.count("eth_getBalance") >= 5,
        "round robin on B should use both providers: p1 {} p2 {}",
        b1.count("eth_getBalance"),
        b2.count("eth_getBalance")
    );
    assert_eq!(
        peer_entry(&b, &a_id).expect("A is B's peer")["open"],
        serde_json::json!([])
    );

    // Open A's p1 breaker: its first failing read does it (threshold 1); A's client still gets p2's answer.
    let mut i = 100;
    while a1.count("eth_getBalance") == 0 {
        read(&a, i);
        i += 1;
        assert!(i < 200, "A never sent a read to p1");
    }
    let opened = a1.calls_to("eth_getBalance")[0].at;
    a.wait_provider("p1", Duration::from_secs(2), "open on A", |r| r["state"] == "open");

    // B learns it through Redis within a second or two.
    let mut last = serde_json::Value::Null;
    let seen = wait_until(Duration::from_secs(2), || {
        last = peer_entry(&b, &a_id).unwrap_or_default();
        last["open"]
            .as_array()
            .is_some_and(|o| o.iter().any(|p| p == "testnet/p1"))
    });
    let steer_ms = opened.elapsed().as_millis();
    assert!(seen, "B's /status does not show p1 open at peer A within 2 s: {last}");
    eprintln!("B saw A's open breaker within {steer_ms} ms of the failure (reported by /status)");
    assert_eq!(
        b.provider_state("p1"),
        "closed",
        "a peer's view never opens B's own breaker"
    );

    // B now avoids p1 (its own, healthy p1) while p2 serves.
    let before = b1.count("eth_getBalance");
    let before2 = b2.count("eth_getBalance");
    for i in 1000..1040 {
        read(&b, i);
    }
    assert_eq!(
        b1.count("eth_getBalance") - before,
        0,
        "B kept sending reads to p1 although peer A reports it open"
    );
    assert_eq!(b2.count("eth_getBalance") - before2, 40, "p2 served every read");

    // Advisory only: with B's p2 failing, p1 is B's last resort and every read still succeeds there.
    b2.set_method_mode("eth_getBalance", Mode::Status(500));
    let before = b1.count("eth_getBalance");
    for i in 2000..2020 {
        read(&b, i);
    }
    assert_eq!(
        b1.count("eth_getBalance") - before,
        20,
        "with p2 failing, B must fall back on p1 for every read"
    );
    let still = peer_entry(&b, &a_id).unwrap_or_default();
    assert!(
        still["open"]
            .as_array()
            .is_some_and(|o| o.iter().any(|p| p == "testnet/p1")),
        "the peer's open breaker must still be reported while p1 served as last resort: {still}"
    );
    drop(redis);
}

#[test]
fn key_limit_is_shared_across_nodes_within_ten_percent() {
    let _serial = serial();
    let (_redis, _fake, a, b) = two_limited_nodes("quota");
    let reference = reference_body(&a);
    assert_eq!(reference_body(&b), reference, "both nodes answer the same bytes");
    // Let the bucket refill from those two calls.
    thread::sleep(Duration::from_millis(200));

    // Each node alone would allow BURST + RATE·t; together they must not exceed that once.
    let load = Load::start(&[(0, a.addr()), (1, b.addr())], 2, Duration::from_millis(5));
    thread::sleep(Duration::from_secs(4));
    let (recs, elapsed) = load.finish();
    assert_all_answered(&recs, &reference, "shared limit");
    let total = accepted(&recs, None, None) as f64;
    let (on_a, on_b) = (accepted(&recs, Some(0), None), accepted(&recs, Some(1), None));
    let expected = BURST + RATE * elapsed.as_secs_f64();
    let demand = recs.len();
    eprintln!(
        "shared limit: {total} accepted (A {on_a}, B {on_b}) of {demand} requests in {:.2} s; expected {expected:.1} (burst {BURST} + {RATE}/s), {:+.1} %",
        elapsed.as_secs_f64(),
        (total / expected - 1.0) * 100.0
    );
    assert!(
        demand as f64 > 2.0 * expected,
        "the load must ask for more than the limit: {demand} requests"
    );
    assert!(
        (total - expected).abs() <= expected * 0.10,
        "accepted {total} across both nodes, expected {expected:.1} ± 10 % (A {on_a}, B {on_b})"
    );
    assert!(on_a > 0 && on_b > 0, "both nodes must admit some: A {on_a}, B {on_b}");
}

#[test]
fn redis_dying_mid_load_loses_no_request_and_overspends_at_most_each_share() {
    let _serial = serial();
    let (mut redis, _fake, a, b) = two_limited_nodes("outage");
    let reference = reference_body(&a);
    assert_eq!(reference_body(&b), reference);
    let errors_before = [
        a.metric("prism_cluster_redis_errors_total"),
        b.metric("prism_cluster_redis_errors_total"),
    ];
    assert_eq!(a.metric("prism_cluster_connected"), 1.0);
    assert_eq!(a.metric("prism_cluster_peers"), 1.0);

    let load = Load::start(&[(0, a.addr()), (1, b.addr())], 2, Duration::from_millis(5));
    thread::sleep(Duration::from_millis(1500));
    redis.kill();
    let killed = Instant::now();
    for (n, p) in [&a, &b].iter().enumerate() {
        assert!(
            wait_until(Duration::from_secs(2), || p.metric("prism_cluster_connected") == 0.0),
            "node {n}: prism_cluster_connected still 1 two seconds after Redis died"
        );
    }
    let noticed = killed.elapsed();
    thread::sleep(Duration::from_millis(2500).saturating_sub(noticed));
    let (recs, _) = load.finish();
    let outage = killed.elapsed().as_secs_f64();

    assert_all_answered(&recs, &reference, "Redis killed mid-load");
    let during = recs.iter().filter(|r| r.at > killed).count();
    assert!(during > 100, "only {during} requests answered during the outage");
    let per_node: Vec<usize> = (0..2).map(|n| accepted(&recs, Some(n), Some(killed))).collect();
    let total: usize = per_node.iter().sum();
    // Each node: its share of the burst and of the rate, plus tokens it had leased before Redis died.
    let share = BURST / 2.0 + RATE / 2.0 * outage + LEASE_TARGET;
    let limit = BURST + RATE * outage;
    eprintln!(
        "outage of {outage:.2} s (noticed in {} ms): accepted A {} B {} = {total} of {during}; per-node bound {share:.1}, one shared bucket would allow {limit:.1}",
        noticed.as_millis(),
        per_node[0],
        per_node[1]
    );
    for (n, &got) in per_node.iter().enumerate() {
        assert!(
            got as f64 <= share * 1.05 + 2.0,
            "node {n} admitted {got} during a {outage:.2} s outage, more than its share {share:.1}"
        );
        assert!(
            got as f64 >= RATE / 2.0 * outage * 0.6,
            "node {n} admitted only {got} during the outage: it must keep serving its share"
        );
    }
    assert!(
        (total as f64) <= limit + 2.0 * LEASE_TARGET + 5.0,
        "overspend: {total} admitted during the outage, limit {limit:.1}"
    );

    for (n, p) in [&a, &b].iter().enumerate() {
        let errs = p.metric("prism_cluster_redis_errors_total");
        assert!(
            errs > errors_before[n],
            "node {n}: prism_cluster_redis_errors_total did not grow ({} → {errs})",
            errors_before[n]
        );
        assert_eq!(p.metric("prism_cluster_connected"), 0.0);
        let c = cluster(p);
        assert_eq!(c["connected"], false, "node {n}: {c}");
        assert!(c["redisErrors"].as_u64().unwrap_or(0) > 0, "node {n}: {c}");
        let lag = p.metric("prism_cluster_sync_lag_seconds");
        assert!(lag >= 0.5, "node {n}: sync lag {lag} s while Redis is down");
    }
    // Still serving identical bytes once the load is gone.
    assert_eq!(reference_body(&a), reference);
    assert_eq!(reference_body(&b), reference);
}

#[test]
fn redis_back_resumes_sync_and_shared_limits() {
    let _serial = serial();
    let (mut redis, _fake, a, b) = two_limited_nodes("back");
    let (a_id, b_id) = (node_id(&a), node_id(&b));
    let reference = reference_body(&a);

    redis.kill();
    for (n, p) in [&a, &b].iter().enumerate() {
        assert!(
            wait_until(Duration::from_secs(2), || cluster(p)["connected"] == false),
            "node {n} still connected 2 s after Redis died"
        );
    }
    // Without Redis, node A alone gets its share only: half the burst and half the rate.
    let load = Load::start(&[(0, a.addr())], 2, Duration::from_millis(5));
    thread::sleep(Duration::from_millis(1500));
    let (recs, elapsed) = load.finish();
    assert_all_answered(&recs, &reference, "Redis down");
    let alone_down = accepted(&recs, None, None) as f64;
    let share = BURST / 2.0 + RATE / 2.0 * elapsed.as_secs_f64();
    eprintln!(
        "Redis down: A alone admitted {alone_down} in {:.2} s (its share: {share:.1})",
        elapsed.as_secs_f64()
    );
    assert!(
        alone_down <= share * 1.1 + 2.0,
        "A admitted {alone_down} without Redis, more than its share {share:.1}"
    );

    // Redis back on the same port (empty): both nodes reconnect and see each other again.
    redis.restart();
    let back = Instant::now();
    for (n, p) in [&a, &b].iter().enumerate() {
        let mut last = serde_json::Value::Null;
        let ok = wait_until(Duration::from_secs(3), || {
            last = cluster(p);
            let other = if n == 0 { &b_id } else { &a_id };
            last["connected"] == true
                && last["syncLagMs"].as_u64().is_some_and(|l| l < 500)
                && last["peers"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|q| q["node"] == other.as_str()))
        });
        assert!(
            ok,
            "node {n} did not reconnect and see its peer within 3 s of Redis coming back: {last}"
        );
    }
    let reconnect_ms = back.elapsed().as_millis();
    assert_eq!(
        redis.command(&["ZCARD", "back:nodes"]).unwrap(),
        ":2",
        "both nodes registered again"
    );
    for p in [&a, &b] {
        assert_eq!(p.metric("prism_cluster_connected"), 1.0);
        assert_eq!(p.metric("prism_cluster_peers"), 1.0);
    }
    assert_eq!(
        redis.command(&["EXISTS", "back:bucket:key:k"]).unwrap(),
        ":1",
        "the key's bucket is leased from Redis again"
    );

    // Leasing again: node A alone may now spend the whole shared limit, not just its half.
    let load = Load::start(&[(0, a.addr())], 2, Duration::from_millis(5));
    thread::sleep(Duration::from_secs(2));
    let (recs, elapsed) = load.finish();
    assert_all_answered(&recs, &reference, "Redis back");
    let alone_up = accepted(&recs, None, None) as f64;
    let expected = BURST + RATE * elapsed.as_secs_f64();
    eprintln!(
        "Redis back: reconnected in {reconnect_ms} ms; A alone admitted {alone_up} in {:.2} s (shared limit {expected:.1}, {:+.1} %)",
        elapsed.as_secs_f64(),
        (alone_up / expected - 1.0) * 100.0
    );
    assert!(
        (alone_up - expected).abs() <= expected * 0.10 + LEASE_TARGET,
        "A alone admitted {alone_up} with Redis back, expected the whole shared limit {expected:.1} ± 10 %"
    );
}

#[test]
fn a_keys_high_water_mark_reaches_the_other_node() {
    let _serial = serial();
    const H: u64 = 5000;
    let redis = RedisServer::start();
    let fa = FakeProvider::start();
    fa.set_head(H);
    let fb = FakeProvider::start();
    fb.set_head(H - 5);
    let extra = format!("{}{}", cluster_toml(&redis, "marks"), key_toml(None));
    let a = node(&[&fa], &extra).start();
    let b = node(&[&fb], &extra).start();
    a.wait_provider("p1", Duration::from_secs(5), "head H", |r| r["head"] == H);
    b.wait_provider("p1", Duration::from_secs(5), "head H-5", |r| r["head"] == H - 5);
    wait_serving(&a, &["p1"]);
    wait_serving(&b, &["p1"]);
    wait_cluster(&[&a, &b], Duration::from_secs(5));

    // The key has seen nothing above H-5 yet: B answers its provider's head.
    assert_eq!(block_number(&b, 1), H - 5, "B before the key saw H anywhere");
    // Through A the key sees H ...
    assert_eq!(block_number(&a, 2), H);
    let seen_at = Instant::now();
    // ... and from then on B never answers below it (every provider of B is at H-5: B answers the mark).
    let mut last = 0;
    let ok = wait_until(Duration::from_secs(1), || {
        last = block_number(&b, 3);
        last >= H
    });
    assert!(ok, "B still answers {last} (< {H}) 1 s after the key saw {H} through A");
    eprintln!("mark reached B within {} ms", seen_at.elapsed().as_millis());
    let mut prev = last;
    for i in 0..100 {
        let (p, label) = if i % 4 == 3 { (&a, "A") } else { (&b, "B") };
        let h = block_number(p, 100 + i);
        assert!(
            h >= prev && h >= H,
            "the chain went backwards for the key: {h} from {label} after {prev}"
        );
        prev = h;
    }
    assert_eq!(fb.head(), H - 5, "B's provider stayed behind all along");
    drop(redis);
}

#[test]
fn a_peer_ahead_never_makes_a_node_refuse_what_its_own_provider_serves() {
    let _serial = serial();
    const H: u64 = 5000;
    let redis = RedisServer::start();
    let fa = FakeProvider::start();
    fa.set_head(H);
    // B's only provider is 20 blocks behind A's: more than max_drift_blocks (10), but B's only one.
    let fb = FakeProvider::start();
    fb.set_head(H - 20);
    fb.set_reply("eth_getBalance", Reply::Result(BALANCE_RESULT.into()));
    let extra = format!("{}{}", cluster_toml(&redis, "ahead"), key_toml(None));
    let b = node(&[&fb], &extra).start();
    b.wait_provider("p1", Duration::from_secs(5), "head H-20", |r| r["head"] == H - 20);
    wait_serving(&b, &["p1"]);
    assert_eq!(
        read(&b, 1),
        BALANCE_RESULT.as_bytes(),
        "B alone serves from its provider"
    );

    let a = node(&[&fa], &extra).start();
    wait_cluster(&[&a, &b], Duration::from_secs(5));
    assert!(
        wait_until(Duration::from_secs(2), || b.status()["cluster"]["peers"][0]
            ["bestHeads"][0]
            == H),
        "B never learned A's higher head (peers' heads are advisory: B's own bestHead stays its own)"
    );
    // Peers' heads may steer B's routing, never cost it a request its own provider can answer.
    let until = Instant::now() + Duration::from_secs(1);
    let mut i = 10;
    while Instant::now() < until {
        let r = keyed(&b, &call(&i.to_string(), "eth_getBalance", BALANCE));
        assert!(
            r.status == 200 && support::json::field(&r.body, "result").is_some(),
            "B refused a read its own (healthy, 20 blocks behind the peer) provider serves: {}; B's p1 row: {}",
            r.describe(),
            b.provider_status("p1")
        );
        i += 1;
        thread::sleep(Duration::from_millis(20));
    }
    drop(redis);
}

// ---- the key's mark across nodes while providers' heads toggle (issue 37) ------------------------------

/// The two heights the providers toggle between, 20 blocks apart.
const HIGH: u64 = 1_000_068;
const LOW: u64 = HIGH - 20;

/// The key of run `run` of the toggling scenario: each run is a client key nobody has used yet, so its mark
/// starts at zero on both nodes.
fn toggle_key(run: usize) -> String {
    format!("toggle-key-{run:04}")
}

/// One run of issue 37's scenario on nodes `addrs`: four clients of a fresh key, each alternating between
/// the nodes on every call and between `eth_blockNumber` and `eth_getBlockByNumber("latest")`, 24 calls
/// each. Returns the backward steps they saw ("method from node: height after previous") and the heights
/// they read.
fn toggling_run(addrs: [SocketAddr; 2], run: usize) -> (Vec<String>, usize) {
    let key = toggle_key(run);
    thread::scope(|scope| {
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let key = key.clone();
                scope.spawn(move || toggling_client(addrs, &key, c))
            })
            .collect();
        let mut steps = Vec::new();
        let mut reads = 0;
        for c in clients {
            let (s, r) = c.join().unwrap();
            steps.extend(s);
            reads += r;
        }
        (steps, reads)
    })
}

/// One client of [`toggling_run`]: starts at node A and alternates nodes per call (so B's first answer for
/// the key may come before A's mark reached it), and methods every two calls (client `c` starting with
/// `c`'s parity). Returns its backward steps and the heights it read.
fn toggling_client(addrs: [SocketAddr; 2], key: &str, c: usize) -> (Vec<String>, usize) {
    let mut conns = [Conn::connect(addrs[0]), Conn::connect(addrs[1])];
    let (mut prev, mut steps, mut reads) = (0u64, Vec::new(), 0usize);
    for i in 0..24 {
        let n = i % 2;
        let (method, params) = if (i / 2 + c).is_multiple_of(2) {
            ("eth_blockNumber", "[]")
        } else {
            ("eth_getBlockByNumber", r#"["latest",false]"#)
        };
        let body = http::post_with(
            "/",
            call(&i.to_string(), method, params).as_bytes(),
            &[&format!("x-api-key: {key}")],
        );
        let v = conns[n].request(&body).json();
        // An error ("every provider is behind ...; retry shortly") moves nobody's height.
        let raw = match (&v["result"], method) {
            (serde_json::Value::String(s), "eth_blockNumber") => s.clone(),
            (serde_json::Value::Object(o), _) => o["number"].as_str().unwrap_or("0x0").to_string(),
            _ => continue,
        };
        let h = u64::from_str_radix(raw.trim_start_matches("0x"), 16).unwrap();
        reads += 1;
        if h < prev {
            steps.push(format!("{method} from {}: {h} after {prev}", ["A", "B"][n]));
        }
        prev = prev.max(h);
    }
    (steps, reads)
}

/// Issue 37: two nodes sharing Redis in front of the same two providers, whose heads swap between HIGH and
/// LOW (20 blocks apart) every 50 ms, both kept in the pool (a generous `max_drift_blocks`); clients of one
/// key alternate between the nodes on every call. The key's mark replicates through Redis only every
/// `sync_interval_ms`, so a node must also hold a `latest` read to what its own providers have shown it.
#[test]
fn a_keys_height_never_goes_back_across_nodes_while_providers_toggle() {
    let _serial = serial();
    // The failure this guards against showed in about half of the runs: 16 runs miss it 1 time in 65 536.
    // PRISM_TOGGLE_RUNS sets another count (the issue's figure is over 20).
    let runs: usize = std::env::var("PRISM_TOGGLE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let redis = RedisServer::start();
    let (f1, f2) = (FakeProvider::start(), FakeProvider::start());
    for f in [&f1, &f2] {
        f.serve_blocks();
    }
    f1.set_head(HIGH);
    f2.set_head(LOW);
    let mut extra = cluster_toml(&redis, "toggle");
    for run in 0..runs {
        extra.push_str(&format!(
            "\n[[keys]]\nname = \"k{run}\"\nkey = \"{}\"\nstrategy = \"round_robin\"\n",
            toggle_key(run)
        ));
    }
    let start = || {
        node(&[&f1, &f2], &extra)
            .network_option("max_drift_blocks", 100)
            .start()
    };
    let (a, b) = (start(), start());
    for n in [&a, &b] {
        n.wait_provider("p1", Duration::from_secs(5), "head HIGH", |r| r["head"] == HIGH);
        n.wait_provider("p2", Duration::from_secs(5), "head LOW", |r| r["head"] == LOW);
    }
    wait_cluster(&[&a, &b], Duration::from_secs(5));

    let stop = AtomicBool::new(false);
    let failed = thread::scope(|scope| {
        let _stop_toggling = support::StopOnDrop(&stop);
        scope.spawn(|| {
            let mut up = false;
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(50));
                up = !up;
                f1.set_head(if up { LOW } else { HIGH });
                f2.set_head(if up { HIGH } else { LOW });
            }
        });
        let mut failed = Vec::new();
        for run in 0..runs {
            let (steps, reads) = toggling_run([a.addr(), b.addr()], run);
            eprintln!("run {run}: {} backward steps in {reads} heights read", steps.len());
            if !steps.is_empty() {
                failed.push(format!("run {run}: {:?}", &steps[..steps.len().min(3)]));
            }
        }
        stop.store(true, Ordering::SeqCst);
        failed
    });
    eprintln!("{} of {runs} runs with a backward step", failed.len());
    assert!(
        failed.is_empty(),
        "clients saw the height go back in {} of {runs} runs:\n{}",
        failed.len(),
        failed.join("\n")
    );
    drop(redis);
}

// ---- the Redis people run: TLS, ACL users, Sentinel ---------------------------------------------------

/// Both nodes share the key limit: what they admit together is the one bucket's, within 10 %.
fn assert_limit_shared(a: &Prism, b: &Prism, what: &str) {
    let reference = reference_body(a);
    assert_eq!(reference_body(b), reference, "{what}: both nodes answer the same bytes");
    // A full bucket to start from (an earlier load may have emptied it): burst / rate to refill.
    thread::sleep(Duration::from_secs_f64(BURST / RATE + 0.2));
    let load = Load::start(&[(0, a.addr()), (1, b.addr())], 2, Duration::from_millis(5));
    thread::sleep(Duration::from_secs(2));
    let (recs, elapsed) = load.finish();
    assert_all_answered(&recs, &reference, what);
    let total = accepted(&recs, None, None) as f64;
    let expected = BURST + RATE * elapsed.as_secs_f64();
    eprintln!("{what}: {total} accepted across both nodes, expected {expected:.1}");
    assert!(
        (total - expected).abs() <= expected * 0.10 + LEASE_TARGET,
        "{what}: accepted {total} across both nodes, expected {expected:.1} ± 10 % (one shared bucket)"
    );
}

/// A node that cannot use Redis: it counts errors, says why in its log, and keeps serving reads.
fn assert_refused_but_serving(n: &Prism, log_says: &[&str]) {
    let ok = wait_until(Duration::from_secs(5), || {
        let c = cluster(n);
        c["connected"] == false && c["redisErrors"].as_u64().unwrap_or(0) >= 2
    });
    assert!(
        ok,
        "the node should count Redis errors and stay disconnected: {}",
        cluster(n)
    );
    let log = n.log();
    assert!(
        log.contains("cluster: Redis unreachable") && log_says.iter().any(|s| log.contains(s)),
        "the node's log should say why Redis is refused ({log_says:?}):\n{log}"
    );
    assert_eq!(
        read(n, 77),
        BALANCE_RESULT.as_bytes(),
        "a node without Redis keeps serving"
    );
}

#[test]
fn two_nodes_share_a_limit_over_tls_and_a_node_with_another_ca_refuses_and_serves() {
    let _serial = serial();
    let dir = support::prism::Scratch::new();
    let ca = support::tls::TestCa::new("prism test Redis CA");
    let (cert, key) = ca.issue(&["127.0.0.1", "localhost"]).write(&dir.0, "redis");
    let ca_file = ca.write_cert(&dir.0, "ca.pem");
    let redis = RedisServer::start_with(RedisOptions {
        tls: Some((cert, key, ca_file.clone())),
        ..Default::default()
    });
    let fake = FakeProvider::start();
    fake.set_reply("eth_getBalance", Reply::Result(BALANCE_RESULT.into()));
    let cluster = |url: &str, ca: &std::path::Path| {
        format!(
            "[cluster]\nredis_url = \"{url}\"\ntls_ca_file = \"{}\"\nttl_ms = {TTL_MS}\nsync_interval_ms = {SYNC_MS}\nexpected_nodes = 2\nprefix = \"tls\"\n{}",
            ca.display(),
            key_toml(Some((RATE, BURST)))
        )
    };
    let extra = cluster(&redis.tls_url(), &ca_file);
    let a = node(&[&fake], &extra).start();
    let b = node(&[&fake], &extra).start();
    wait_serving(&a, &["p1"]);
    wait_serving(&b, &["p1"]);
    wait_cluster(&[&a, &b], Duration::from_secs(5));
    assert_eq!(
        redis.command(&["ZCARD", "tls:nodes"]).unwrap(),
        ":2",
        "both nodes registered through the TLS port"
    );
    assert_limit_shared(&a, &b, "over rediss://");

    // Same server, a CA that did not sign its certificate: refused, counted, logged; the node serves.
    let other = support::tls::TestCa::new("some other CA");
    let other_file = other.write_cert(&dir.0, "other-ca.pem");
    let c = node(&[&fake], &cluster(&redis.tls_url(), &other_file)).start();
    wait_serving(&c, &["p1"]);
    assert_refused_but_serving(&c, &["certificate", "UnknownIssuer"]);
    assert_eq!(
        redis.command(&["ZCARD", "tls:nodes"]).unwrap(),
        ":2",
        "C never registered"
    );
}

/// The ACL rules docs/OPERATIONS.md gives for Prism's user (prefix "prism").
const ACL_RULES: &str = "~prism:* +@connection +set +mget +zadd +zrangebyscore +zremrangebyscore +zcount +eval +evalsha +script|load +time +hmget +hset +pexpire";

#[test]
fn a_client_certificate_is_sent_when_redis_requires_one() {
    let _serial = serial();
    let dir = support::prism::Scratch::new();
    let ca = support::tls::TestCa::new("prism test Redis CA");
    let (cert, key) = ca.issue(&["127.0.0.1"]).write(&dir.0, "redis");
    let ca_file = ca.write_cert(&dir.0, "ca.pem");
    let (client_cert, client_key) = ca.issue_client("prism-node").write(&dir.0, "client");
    let redis = RedisServer::start_with(RedisOptions {
        tls: Some((cert, key, ca_file.clone())),
        tls_client_certs: true,
        ..Default::default()
    });
    let fake = FakeProvider::start();
    fake.set_reply("eth_getBalance", Reply::Result(BALANCE_RESULT.into()));
    let base = format!(
        "[cluster]\nredis_url = \"{}\"\ntls_ca_file = \"{}\"\nsync_interval_ms = {SYNC_MS}\nprefix = \"mtls\"\n",
        redis.tls_url(),
        ca_file.display()
    );
    let with_cert = format!(
        "{base}tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
        client_cert.display(),
        client_key.display()
    );
    let a = node(&[&fake], &with_cert).start();
    let without = node(&[&fake], &base).start();
    wait_serving(&a, &["p1"]);
    wait_serving(&without, &["p1"]);
    assert!(
        wait_until(Duration::from_secs(5), || cluster(&a)["connected"] == true),
        "the node with a client certificate did not connect: {}",
        cluster(&a)
    );
    assert_eq!(redis.command(&["ZCARD", "mtls:nodes"]).unwrap(), ":1");
    assert_refused_but_serving(&without, &["error="]);
}

#[test]
fn an_acl_user_shares_state_and_a_wrong_password_is_a_clear_error() {
    let _serial = serial();
    const PASS: &str = "s3cret-acl-pass";
    let acl = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    let redis = RedisServer::start_with(RedisOptions {
        auth: Some(("prism".into(), PASS.into())),
        // Least privilege, as docs/OPERATIONS.md gives it: Prism's commands (and its Lua script's) on its prefix.
        args: [
            acl(&format!(
                "--user prism on >{PASS} {}",
                ACL_RULES.replace("prism:", "acl:")
            )),
            acl("--user default off"),
        ]
        .concat(),
        ..Default::default()
    });
    assert!(
        redis_server::command_at(redis.addr(), None, &["PING"])
            .unwrap()
            .starts_with("-NOAUTH"),
        "the default user is off: nothing works without credentials"
    );
    let fake = FakeProvider::start();
    fake.set_reply("eth_getBalance", Reply::Result(BALANCE_RESULT.into()));
    let tail = format!(
        "ttl_ms = {TTL_MS}\nsync_interval_ms = {SYNC_MS}\nexpected_nodes = 2\nprefix = \"acl\"\n{}",
        key_toml(Some((RATE, BURST)))
    );
    // A: credentials in the URL; B: explicit keys, the password from the environment.
    let a = node(
        &[&fake],
        &format!(
            "[cluster]\nredis_url = \"redis://prism:{PASS}@127.0.0.1:{}\"\n{tail}",
            redis.port()
        ),
    )
    .start();
    let b = node(
        &[&fake],
        &format!(
            "[cluster]\nredis_url = \"{}\"\nusername = \"prism\"\npassword = \"${{TEST_REDIS_PASSWORD}}\"\n{tail}",
            redis.url()
        ),
    )
    .env("TEST_REDIS_PASSWORD", PASS)
    .start();
    wait_serving(&a, &["p1"]);
    wait_serving(&b, &["p1"]);
    wait_cluster(&[&a, &b], Duration::from_secs(5));
    assert_limit_shared(&a, &b, "as ACL user prism");

    let c = node(
        &[&fake],
        &format!(
            "[cluster]\nredis_url = \"{}\"\nusername = \"prism\"\npassword = \"not-the-password\"\n{tail}",
            redis.url()
        ),
    )
    .start();
    wait_serving(&c, &["p1"]);
    assert_refused_but_serving(&c, &["WRONGPASS", "authentication failed"]);
    for (n, p) in [&a, &b, &c].iter().enumerate() {
        let log = p.log();
        assert!(
            !log.contains(PASS) && !log.contains("not-the-password"),
            "node {n} logged a Redis password:\n{log}"
        );
    }
    assert!(
        a.log().contains("redis://prism:***@127.0.0.1"),
        "A's log names its Redis with the password redacted:\n{}",
        a.log()
    );
}

#[test]
fn a_sentinel_failover_mid_load_loses_no_request_and_the_nodes_follow_the_new_master() {
    let _serial = serial();
    const NAME: &str = "mymaster";
    // No 5 s pause before the replica's first sync (the default diskless delay).
    let master = RedisServer::start_with(RedisOptions {
        args: vec!["--repl-diskless-sync-delay".into(), "0".into()],
        ..Default::default()
    });
    let replica = RedisServer::start_with(RedisOptions {
        args: vec!["--replicaof".into(), "127.0.0.1".into(), master.port().to_string()],
        ..Default::default()
    });
    let sentinel = Sentinel::start(NAME, master.port());
    let sentinel_url = format!("redis://{}", sentinel.addr());
    let mut sconn = redis::Client::open(sentinel_url.as_str())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(1))
        .unwrap();
    // Sentinel learns the replica from the master's INFO; a failover needs it known and in sync.
    let known = wait_until(Duration::from_secs(15), || {
        let replicas: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
            .arg("replicas")
            .arg(NAME)
            .query(&mut sconn)
            .unwrap_or_default();
        replicas.iter().any(|r| {
            r.get("port") == Some(&replica.port().to_string())
                && r.get("master-link-status").map(String::as_str) == Some("ok")
        })
    });
    assert!(known, "sentinel never saw the replica in sync:\n{}", sentinel.log());

    let fake = FakeProvider::start();
    fake.set_reply("eth_getBalance", Reply::Result(BALANCE_RESULT.into()));
    let extra = format!(
        "[cluster]\nsentinels = [\"{}\"]\nsentinel_master = \"{NAME}\"\nttl_ms = {TTL_MS}\nsync_interval_ms = {SYNC_MS}\nexpected_nodes = 2\nprefix = \"sent\"\n{}",
        sentinel.addr(),
        key_toml(Some((RATE, BURST)))
    );
    let a = node(&[&fake], &extra).start();
    let b = node(&[&fake], &extra).start();
    wait_serving(&a, &["p1"]);
    wait_serving(&b, &["p1"]);
    wait_cluster(&[&a, &b], Duration::from_secs(5));
    assert_eq!(
        master.command(&["ZCARD", "sent:nodes"]).unwrap(),
        ":2",
        "both nodes write to the master"
    );
    let reference = reference_body(&a);
    assert_eq!(reference_body(&b), reference);

    let load = Load::start(&[(0, a.addr()), (1, b.addr())], 2, Duration::from_millis(5));
    thread::sleep(Duration::from_millis(1000));
    let answer: String = redis::cmd("SENTINEL")
        .arg("failover")
        .arg(NAME)
        .query(&mut sconn)
        .unwrap();
    assert_eq!(answer, "OK");
    let failover = Instant::now();
    let promoted = wait_until(Duration::from_secs(15), || {
        replica.command(&["ROLE"]).is_ok_and(|r| r == "*3")
            && redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(NAME)
                .query::<(String, u16)>(&mut sconn)
                .is_ok_and(|(_, port)| port == replica.port())
    });
    assert!(
        promoted,
        "sentinel did not promote the replica within 15 s:\n{}",
        sentinel.log()
    );
    let promoted_ms = failover.elapsed().as_millis();

    // The new master takes writes now. Only a node writing to it brings back what is deleted there.
    let ids = [node_id(&a), node_id(&b)];
    let mut last = String::new();
    let followed = wait_until(Duration::from_secs(10), || {
        for id in &ids {
            let _ = replica.command(&["DEL", &format!("sent:node:{id}")]);
        }
        thread::sleep(Duration::from_millis(4 * SYNC_MS));
        last = ids
            .iter()
            .map(|id| {
                replica
                    .command(&["EXISTS", &format!("sent:node:{id}")])
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(",");
        last == ":1,:1"
    });
    let followed_ms = failover.elapsed().as_millis();
    assert!(
        followed,
        "the nodes did not write to the new master within 10 s of its promotion ({last}); A's log:\n{}\nsentinel log:\n{}",
        a.log(),
        sentinel.log()
    );
    wait_cluster(&[&a, &b], Duration::from_secs(5));
    thread::sleep(Duration::from_millis(500));
    let (recs, _) = load.finish();
    eprintln!(
        "sentinel failover: replica promoted {promoted_ms} ms after SENTINEL FAILOVER; both nodes writing to it at {followed_ms} ms; {} requests during the run",
        recs.len()
    );
    assert_all_answered(&recs, &reference, "Sentinel failover mid-load");
    assert!(
        recs.iter().filter(|r| r.at > failover).count() > 100,
        "the load kept running through the failover"
    );
    for (n, p) in [&a, &b].iter().enumerate() {
        assert!(
            p.log().contains(&format!("127.0.0.1:{}", replica.port())),
            "node {n} should log the new master Sentinel names:\n{}",
            p.log()
        );
    }
    assert_limit_shared(&a, &b, "after the failover");
}
