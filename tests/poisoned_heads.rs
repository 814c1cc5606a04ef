//! Heads need evidence: a provider that reports a head the chain cannot be at, once or all the time, is an
//! outlier. It never raises the pool's best head, a client's high-water mark, the drift of the others or
//! what other nodes learn through Redis; calls keep being served by the honest providers and `/readyz`
//! stays 200. A height beyond 2^53 is a malformed answer, the provider's failure. What a (hostile) Redis
//! says is bounded by what this node's own providers make plausible.

use crate::support::redis as redis_server;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::{call, wait_serving, wait_until, FakeProvider, Mode, Prism, PrismBuilder};
use redis_server::RedisServer;

/// The honest chain starts here and makes a block every `BLOCK_MS`.
const START: u64 = 50_000;
const BLOCK_MS: u64 = 50;
/// `0xffffffffffff`: the absurd head.
const ABSURD: u64 = 0xffff_ffff_ffff;
const AHEAD: u64 = 1_000_000;
const QUICK_RETRY: &str = "\n[policy.retry]\nmax_attempts = 3\nbase_delay_ms = 1\nmax_delay_ms = 5\n";

/// The tests start several Prism processes (and Redis) on a small machine: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Moves the heads: every `BLOCK_MS` the chain makes a block; each fake reports the chain plus its offset.
struct Chain {
    head: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Chain {
    fn run(fakes: Vec<(Arc<FakeProvider>, Arc<AtomicU64>)>) -> Chain {
        let head = Arc::new(AtomicU64::new(START));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (head.clone(), stop.clone());
        let set = move |n: u64| {
            for (f, offset) in &fakes {
                f.set_head(n + offset.load(Ordering::SeqCst));
            }
        };
        set(START);
        let handle = thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(BLOCK_MS));
                set(h.fetch_add(1, Ordering::SeqCst) + 1);
            }
        });
        Chain {
            head,
            stop,
            handle: Some(handle),
        }
    }

    /// The honest chain's head now.
    fn head(&self) -> u64 {
        self.head.load(Ordering::SeqCst)
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn honest(fake: &Arc<FakeProvider>) -> (Arc<FakeProvider>, Arc<AtomicU64>) {
    (fake.clone(), Arc::new(AtomicU64::new(0)))
}

fn node(fakes: &[&Arc<FakeProvider>]) -> PrismBuilder {
    let mut b = Prism::builder()
        .network("testnet", 4663)
        .network_option("probe_interval_ms", 50)
        .network_option("block_time_ms", BLOCK_MS)
        .network_option("max_drift_blocks", 20);
    for f in fakes {
        b = b.provider(f);
    }
    b.extra_toml(QUICK_RETRY)
}

/// `{"jsonrpc":"2.0","id":ID,"result":"0x..."}` for `Mode::Raw`.
fn raw_head(height: u64) -> Mode {
    Mode::Raw(format!(r#"{{"jsonrpc":"2.0","id":{{id}},"result":"0x{height:x}"}}"#))
}

/// One client polling `eth_blockNumber`: what it saw, and every error it got.
#[derive(Default)]
struct Client {
    last: u64,
    calls: u64,
    errors: Vec<String>,
}

impl Client {
    /// One `eth_blockNumber`; checks it is a height, not below the last one, and not above the honest chain.
    fn poll(&mut self, prism: &Prism, chain: &Chain) {
        self.calls += 1;
        let r = prism.rpc(call(&self.calls.to_string(), "eth_blockNumber", "[]").as_bytes());
        assert_eq!(r.status, 200, "eth_blockNumber: {}", r.describe());
        let v = r.json();
        if let Some(e) = v.get("error") {
            self.errors.push(e.to_string());
            return;
        }
        let text = v["result"]
            .as_str()
            .unwrap_or_else(|| panic!("no result: {}", r.describe()));
        let h = u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{text}: {e}"));
        let ceiling = chain.head();
        assert!(h >= self.last, "eth_blockNumber went backwards: {} then {h}", self.last);
        assert!(
            h <= ceiling,
            "eth_blockNumber answered {h:#x}, beyond the honest chain ({ceiling})"
        );
        self.last = h;
    }

    fn assert_no_errors(&self, what: &str) {
        assert!(
            self.errors.is_empty(),
            "{what}: {} of {} calls failed, e.g. {}",
            self.errors.len(),
            self.calls,
            self.errors[0]
        );
    }
}

fn outlier_heads(prism: &Prism, provider: &str) -> f64 {
    prism.metric(&format!(
        "prism_provider_outlier_heads_total{{network=\"testnet\",provider=\"{provider}\"}}"
    ))
}

/// `/readyz` is 200 and no provider in `honest` is excluded.
fn assert_pool_healthy(prism: &Prism, honest: &[&str]) {
    let r = prism.admin_get("/readyz");
    assert_eq!(r.status, 200, "/readyz: {}", r.describe());
    for name in honest {
        let state = prism.provider_state(name);
        assert!(
            state == "closed" || state == "parked",
            "honest provider {name} is {state:?}: {}",
            prism.status()
        );
    }
}

#[test]
fn a_one_off_absurd_head_changes_nothing() {
    let _g = serial();
    let a = Arc::new(FakeProvider::start());
    let b = Arc::new(FakeProvider::start());
    let chain = Chain::run(vec![honest(&a), honest(&b)]);
    let prism = node(&[&a, &b]).start();
    wait_serving(&prism, &["p1", "p2"]);
    let mut client = Client::default();
    for _ in 0..20 {
        client.poll(&prism, &chain);
    }
    // Only eth_blockNumber reaches the fakes from now on (probes and this client): B's very next answer is
    // the absurd head, then it is honest again.
    let before = b.count("eth_blockNumber");
    b.set_mode_for_next(1, raw_head(ABSURD));
    let mut spiked_at = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        client.poll(&prism, &chain);
        assert_pool_healthy(&prism, &["p1"]);
        if spiked_at.is_none() && b.count("eth_blockNumber") > before {
            spiked_at = Some(Instant::now());
        }
        // Well past the spike: B reported honest heads since, so it is back.
        if spiked_at.is_some_and(|t| t.elapsed() > Duration::from_millis(1500))
            && prism.provider_state("p2") == "closed"
        {
            break;
        }
    }
    assert!(spiked_at.is_some(), "B was never asked for a head");
    assert_eq!(
        outlier_heads(&prism, "p2"),
        1.0,
        "the absurd head was seen and counted once"
    );
    assert_eq!(outlier_heads(&prism, "p1"), 0.0);
    assert_eq!(
        prism.provider_state("p2"),
        "closed",
        "B is back once its heads are plausible"
    );
    client.assert_no_errors("one absurd head from one of two providers");
    let best = prism.status()["networks"][0]["bestHead"].as_u64().unwrap();
    assert!(
        best <= chain.head() && best + 100 > chain.head(),
        "best head {best}, chain {}",
        chain.head()
    );
    eprintln!("{} calls, none failed; best head {best}", client.calls);
}

#[test]
fn a_provider_far_ahead_of_three_that_agree_is_an_outlier() {
    let _g = serial();
    let fakes: Vec<Arc<FakeProvider>> = (0..4).map(|_| Arc::new(FakeProvider::start())).collect();
    let ahead = Arc::new(AtomicU64::new(0));
    let mut heads: Vec<_> = fakes[..3].iter().map(honest).collect();
    heads.push((fakes[3].clone(), ahead.clone()));
    let chain = Chain::run(heads);
    let prism = node(&fakes.iter().collect::<Vec<_>>()).start();
    wait_serving(&prism, &["p1", "p2", "p3", "p4"]);
    let mut client = Client::default();
    for _ in 0..20 {
        client.poll(&prism, &chain);
    }
    // From now on p4 reports a chain a million blocks ahead, every time.
    ahead.store(AHEAD, Ordering::SeqCst);
    let ok = wait_until(Duration::from_secs(10), || {
        client.poll(&prism, &chain);
        assert_pool_healthy(&prism, &["p1", "p2", "p3"]);
        prism.provider_state("p4") == "outlier"
    });
    assert!(ok, "p4 was never excluded as an outlier: {}", prism.status());
    // It stays excluded, and the three serve everything.
    fakes[3].reset_stats();
    for i in 0..100 {
        client.poll(&prism, &chain);
        let r = prism.rpc(
            call(
                &format!("{}", 1000 + i),
                "eth_getBalance",
                crate::support::BALANCE_PARAMS,
            )
            .as_bytes(),
        );
        crate::support::expect_http_result(&r, &format!("{}", 1000 + i));
    }
    assert_pool_healthy(&prism, &["p1", "p2", "p3"]);
    assert_eq!(prism.provider_state("p4"), "outlier");
    crate::support::assert_no_client_calls(&fakes[3], "an outlier provider");
    assert!(outlier_heads(&prism, "p4") >= 1.0);
    client.assert_no_errors("one provider a million blocks ahead of three");
    let row = prism.provider_status("p4");
    assert!(row["claimedHead"].as_u64().unwrap() > AHEAD, "{row}");
    // Back in line: back in the pool.
    ahead.store(0, Ordering::SeqCst);
    prism.wait_state("p4", "closed", Duration::from_secs(10));
    client.assert_no_errors("after p4 recovered");
}

#[test]
fn a_height_beyond_2_pow_53_is_a_malformed_answer() {
    let _g = serial();
    let a = Arc::new(FakeProvider::start());
    let b = Arc::new(FakeProvider::start());
    let chain = Chain::run(vec![honest(&a), honest(&b)]);
    let prism = node(&[&a, &b]).start();
    wait_serving(&prism, &["p1", "p2"]);
    let mut client = Client::default();
    // Every eth_blockNumber B answers from now on is 2^53 + 1: no block height.
    b.set_method_mode("eth_blockNumber", raw_head((1 << 53) + 1));
    let ok = wait_until(Duration::from_secs(10), || {
        client.poll(&prism, &chain);
        assert_pool_healthy(&prism, &["p1"]);
        prism.provider_state("p2") == "open"
    });
    assert!(ok, "B's breaker never opened on malformed heads: {}", prism.status());
    let row = prism.provider_status("p2");
    assert!(
        row["failures"].as_u64().unwrap_or(0) > 0 || row["state"] == "open",
        "{row}"
    );
    assert_eq!(outlier_heads(&prism, "p2"), 0.0, "malformed, not an outlier");
    for _ in 0..20 {
        client.poll(&prism, &chain);
    }
    client.assert_no_errors("one provider answering heights beyond 2^53");
}

// ---- through Redis -------------------------------------------------------------------------------------

const SYNC_MS: u64 = 50;
const TTL_MS: u64 = 1000;

fn cluster_toml(redis: &RedisServer, prefix: &str) -> String {
    format!(
        "[cluster]\nredis_url = \"{}\"\nttl_ms = {TTL_MS}\nsync_interval_ms = {SYNC_MS}\nexpected_nodes = 2\nprefix = \"{prefix}\"\n",
        redis.url()
    )
}

fn cluster(prism: &Prism) -> serde_json::Value {
    prism.status()["cluster"].clone()
}

/// Waits until `prism` is connected and sees `peers` live peers.
fn wait_peers(prism: &Prism, peers: usize) {
    let ok = wait_until(Duration::from_secs(10), || {
        let c = cluster(prism);
        c["connected"] == true && c["peers"].as_array().map_or(0, |p| p.len()) == peers
    });
    assert!(ok, "cluster never formed: {}", cluster(prism));
}

/// Node B's view is unaffected: its best head, what its peers told it, and what its clients see.
fn assert_node_unaffected(prism: &Prism, client: &mut Client, chain: &Chain) {
    client.poll(prism, chain);
    assert_pool_healthy(prism, &["p1", "p2"]);
    let s = prism.status();
    let best = s["networks"][0]["bestHead"].as_u64().unwrap();
    assert!(best <= chain.head(), "B's best head {best}, chain {}", chain.head());
    for peer in s["cluster"]["peers"].as_array().unwrap() {
        let heads = peer["bestHeads"].as_array().unwrap();
        assert!(
            heads.iter().all(|h| h.as_u64().unwrap() <= chain.head()),
            "B keeps a peer's implausible best head: {peer}"
        );
    }
}

#[test]
fn a_poisoned_provider_on_one_node_does_not_reach_the_other_through_redis() {
    let _g = serial();
    let redis = RedisServer::start();
    let h1 = Arc::new(FakeProvider::start());
    let h2 = Arc::new(FakeProvider::start());
    let poison = Arc::new(FakeProvider::start());
    let ahead = Arc::new(AtomicU64::new(0));
    let chain = Chain::run(vec![honest(&h1), honest(&h2), (poison.clone(), ahead.clone())]);
    // A sees the poisoned provider (as p3), B does not.
    let a = node(&[&h1, &h2, &poison])
        .extra_toml(&cluster_toml(&redis, "poison"))
        .start();
    let b = node(&[&h1, &h2]).extra_toml(&cluster_toml(&redis, "poison")).start();
    wait_serving(&a, &["p1", "p2", "p3"]);
    wait_serving(&b, &["p1", "p2"]);
    wait_peers(&a, 1);
    wait_peers(&b, 1);
    let (mut on_a, mut on_b) = (Client::default(), Client::default());
    for _ in 0..10 {
        on_a.poll(&a, &chain);
        on_b.poll(&b, &chain);
    }
    // First a one-off absurd head, then a million blocks ahead for good.
    poison.set_mode_for_next(1, raw_head(ABSURD));
    let spiked = wait_until(Duration::from_secs(10), || {
        on_a.poll(&a, &chain);
        assert_node_unaffected(&b, &mut on_b, &chain);
        outlier_heads(&a, "p3") >= 1.0
    });
    assert!(spiked, "A never saw the absurd head: {}", a.status());
    ahead.store(AHEAD, Ordering::SeqCst);
    let excluded = wait_until(Duration::from_secs(10), || {
        on_a.poll(&a, &chain);
        assert_node_unaffected(&b, &mut on_b, &chain);
        a.provider_state("p3") == "outlier"
    });
    assert!(excluded, "A never excluded p3: {}", a.status());
    // Many syncs later B still has nothing of it: not in its best head, marks, routing or peers' heads.
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        on_a.poll(&a, &chain);
        assert_node_unaffected(&b, &mut on_b, &chain);
    }
    assert_pool_healthy(&a, &["p1", "p2"]);
    on_a.assert_no_errors("node A, with the poisoned provider");
    on_b.assert_no_errors("node B");
    // A's own published best head is the honest one.
    let best_a = a.status()["networks"][0]["bestHead"].as_u64().unwrap();
    assert!(best_a <= chain.head(), "A's best head {best_a}");
}

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn what_a_hostile_redis_says_is_bounded() {
    let _g = serial();
    let redis = RedisServer::start();
    let h1 = Arc::new(FakeProvider::start());
    let h2 = Arc::new(FakeProvider::start());
    let chain = Chain::run(vec![honest(&h1), honest(&h2)]);
    let b = node(&[&h1, &h2]).extra_toml(&cluster_toml(&redis, "hostile")).start();
    wait_serving(&b, &["p1", "p2"]);
    wait_until(Duration::from_secs(10), || cluster(&b)["connected"] == true);
    let mut client = Client::default();
    for _ in 0..10 {
        client.poll(&b, &chain);
    }
    // Two forged nodes: one whose entry claims to live for centuries, one live whose best head and the
    // open endpoint's mark are absurd.
    let forged = format!("v1\nnet testnet {ABSURD}\nmark testnet - {ABSURD}\n");
    for (id, score) in [("ancient", 99_999_999_999_999u64), ("liar", wall_ms() + 2000)] {
        assert_eq!(
            redis.command(&["SET", &format!("hostile:node:{id}"), &forged]).unwrap(),
            "+OK"
        );
        redis
            .command(&["ZADD", "hostile:nodes", &score.to_string(), id])
            .unwrap();
    }
    let refused = wait_until(Duration::from_secs(10), || {
        client.poll(&b, &chain);
        b.metric("prism_cluster_refused_total") >= 2.0
    });
    assert!(refused, "B never refused the forged entries: {}", cluster(&b));
    let c = cluster(&b);
    let peers: Vec<&str> = c["peers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["node"].as_str())
        .collect();
    assert!(
        !peers.contains(&"ancient"),
        "a far-future node entry counts as a peer: {c}"
    );
    for _ in 0..30 {
        assert_node_unaffected(&b, &mut client, &chain);
    }
    client.assert_no_errors("hostile Redis");
}
