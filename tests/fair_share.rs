//! Fair shares of scarce provider quota (`[policy.fair_share]`) and credit units (`credits` on a provider),
//! through running Prisms, counted at the client and at the fake providers.
//!
//! - Three tenants against one provider with `quota_rps = 100`: one floods (400 calls/s), the other two ask
//!   30/s each. The two keep their 30/s within 10 %; the flood gets what they leave (about 40/s) and its
//!   other calls are refused with HTTP 429, `Retry-After` and `-32005`, never sent.
//! - With a second provider that has no quota, the flood's excess goes there instead: nobody is refused.
//! - Two nodes sharing one Redis: the flood on one node, a modest tenant on the other; the modest one keeps
//!   its share, because nodes fill the quota with each other's demand.
//! - Credit units: a provider's price table counts `eth_call` at 26 and the rest at 1
//!   (`prism_credits_total{key,provider}`), and its quota burn is in credits: a provider whose quota is
//!   100 credits/s gets about 100/26 `eth_call`s a second, the rest going to one without a quota (counted
//!   in calls, 10 a second would have been well within 100).
//!
//! The tests run one at a time (a file-wide lock): rates on a small shared machine are fairer alone.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "tests and their fakes run on plain threads, not shards; the size targets are for the product"
)]

mod support;

use support::redis as redis_server;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis_server::RedisServer;
use support::http::{self, Conn};
use support::{FakeProvider, Prism};

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keys "a" (the flood), "b" and "c".
const KEYS: &str = "\n[[keys]]\nname = \"a\"\nkey = \"key-a\"\n\n[[keys]]\nname = \"b\"\nkey = \"key-b\"\n\n[[keys]]\nname = \"c\"\nkey = \"key-c\"\n";
const FAIR: &str = "\n[policy.fair_share]\nenabled = true\n\n[cache]\nenabled = false\ndedupe = false\n";

/// What one tenant got: answered calls, refusals over its share (HTTP 429 with `Retry-After`), and
/// anything else.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    refused: AtomicU64,
    other: AtomicU64,
}

/// Sends `rate` distinct reads per second with `key` over `threads` keep-alive connections until `stop`;
/// counts what comes back while `counting` is set.
fn tenant(
    addr: std::net::SocketAddr,
    key: &'static str,
    rate: f64,
    threads: usize,
    stop: Arc<AtomicBool>,
    counting: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> Vec<JoinHandle<()>> {
    (0..threads)
        .map(|t| {
            let (stop, counting, tally) = (stop.clone(), counting.clone(), tally.clone());
            thread::spawn(move || {
                let period = Duration::from_secs_f64(threads as f64 / rate);
                let mut c = Conn::connect(addr);
                let start = Instant::now();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let due = start + period * n as u32;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        thread::sleep(wait);
                    }
                    n += 1;
                    let body = format!(
                        r#"{{"jsonrpc":"2.0","id":{n},"method":"eth_getBalance","params":["0x{t:02x}{n:038x}","latest"]}}"#
                    );
                    let r = c.request(&http::post_with("/", body.as_bytes(), &[&format!("x-api-key: {key}")]));
                    if r.closes() {
                        c = Conn::connect(addr);
                    }
                    if !counting.load(Ordering::Relaxed) {
                        continue;
                    }
                    let v = r.json();
                    if r.status == 200 && v["result"].is_string() {
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                    } else if r.status == 429
                        && v["error"]["code"] == -32005
                        && r.header("retry-after").is_some()
                        && v["error"]["data"]["retryAfterMs"].is_u64()
                    {
                        tally.refused.fetch_add(1, Ordering::Relaxed);
                    } else {
                        tally.other.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect()
}

/// Runs `(prism address, key, rate, threads)` tenants for `warm` then counts for `measure`; returns each
/// tenant's tally.
fn run(
    tenants: &[(std::net::SocketAddr, &'static str, f64, usize)],
    warm: Duration,
    measure: Duration,
) -> Vec<Arc<Tally>> {
    run_watching(tenants, warm, measure, &mut || {})
}

/// [`run`], calling `edge` as the measured window opens and as it closes (to read a provider's counts over
/// the same window).
fn run_watching(
    tenants: &[(std::net::SocketAddr, &'static str, f64, usize)],
    warm: Duration,
    measure: Duration,
    edge: &mut dyn FnMut(),
) -> Vec<Arc<Tally>> {
    let stop = Arc::new(AtomicBool::new(false));
    let counting = Arc::new(AtomicBool::new(false));
    let tallies: Vec<Arc<Tally>> = tenants.iter().map(|_| Arc::new(Tally::default())).collect();
    let mut handles = Vec::new();
    for (t, tally) in tenants.iter().zip(&tallies) {
        handles.extend(tenant(
            t.0,
            t.1,
            t.2,
            t.3,
            stop.clone(),
            counting.clone(),
            tally.clone(),
        ));
    }
    thread::sleep(warm);
    counting.store(true, Ordering::Relaxed);
    edge();
    thread::sleep(measure);
    counting.store(false, Ordering::Relaxed);
    edge();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    tallies
}

fn per_s(t: &Tally, measure: Duration) -> f64 {
    t.ok.load(Ordering::Relaxed) as f64 / measure.as_secs_f64()
}

#[test]
fn three_tenants_one_flooding_the_others_keep_their_shares() {
    let _serial = serial();
    let p = FakeProvider::start();
    let prism = Prism::builder()
        .provider_with(&p, "quota_rps = 100")
        .extra_toml(&format!("{FAIR}{KEYS}"))
        .start();
    support::wait_serving(&prism, &["p1"]);
    let addr = prism.addr();
    let measure = Duration::from_secs(4);
    let t = run(
        &[
            (addr, "key-a", 400.0, 4),
            (addr, "key-b", 30.0, 1),
            (addr, "key-c", 30.0, 1),
        ],
        Duration::from_secs(2),
        measure,
    );
    let (a, b, c) = (per_s(&t[0], measure), per_s(&t[1], measure), per_s(&t[2], measure));
    eprintln!(
        "answered per second: a {a:.1}, b {b:.1}, c {c:.1}; a refused {}",
        t[0].refused.load(Ordering::Relaxed)
    );
    for (name, got, tally) in [("b", b, &t[1]), ("c", c, &t[2])] {
        assert!(got >= 27.0, "{name} keeps its 30/s within 10 %: {got:.1}/s");
        assert_eq!(tally.other.load(Ordering::Relaxed), 0, "{name}: nothing else came back");
        let refused = tally.refused.load(Ordering::Relaxed);
        assert!(refused <= 3, "{name} is under its share: {refused} refused");
    }
    assert!(
        (28.0..=60.0).contains(&a),
        "the flood gets what the others leave (about 40/s): {a:.1}/s"
    );
    assert!(
        t[0].refused.load(Ordering::Relaxed) > 500,
        "the flood's excess is refused"
    );
    assert_eq!(t[0].other.load(Ordering::Relaxed), 0);
    assert!(prism.metric("prism_key_over_share_total{key=\"a\"}") > 500.0);
}

#[test]
fn a_tenant_over_its_share_goes_to_another_provider_first() {
    let _serial = serial();
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let prism = Prism::builder()
        .provider_with(&p1, "quota_rps = 50")
        .provider(&p2)
        .extra_toml(&format!("{FAIR}{KEYS}"))
        .start();
    support::wait_serving(&prism, &["p1", "p2"]);
    let addr = prism.addr();
    let measure = Duration::from_secs(3);
    // p1's calls over the measured window: the quota is steered by the rate p1 was sent recently, which
    // starts from nothing, so the warm-up's first moments are not what the quota holds to.
    let mut window: Vec<(usize, Instant)> = Vec::new();
    let t = run_watching(
        &[(addr, "key-a", 200.0, 2), (addr, "key-b", 20.0, 1)],
        Duration::from_secs(1),
        measure,
        &mut || window.push((p1.count("eth_getBalance"), Instant::now())),
    );
    let p1_rate = (window[1].0 - window[0].0) as f64 / (window[1].1 - window[0].1).as_secs_f64();
    for tally in &t {
        assert_eq!(
            tally.refused.load(Ordering::Relaxed),
            0,
            "another provider takes the excess"
        );
        assert_eq!(tally.other.load(Ordering::Relaxed), 0);
    }
    assert!(
        per_s(&t[0], measure) >= 170.0,
        "the flood is served: {:.1}/s",
        per_s(&t[0], measure)
    );
    assert!(
        p1_rate <= 60.0,
        "the quota-limited provider stays near its 50/s: {p1_rate:.1}"
    );
}

#[test]
fn shares_hold_across_nodes_sharing_redis() {
    let _serial = serial();
    let redis = RedisServer::start();
    let p = FakeProvider::start();
    let cluster = format!(
        "\n[cluster]\nredis_url = \"{}\"\nttl_ms = 1000\nsync_interval_ms = 50\nexpected_nodes = 2\nprefix = \"fair\"\n",
        redis.url()
    );
    let node = || {
        Prism::builder()
            .provider_with(&p, "quota_rps = 100")
            .extra_toml(&format!("{FAIR}{KEYS}{cluster}"))
            .start()
    };
    let (n1, n2) = (node(), node());
    support::wait_serving(&n1, &["p1"]);
    support::wait_serving(&n2, &["p1"]);
    let measure = Duration::from_secs(4);
    let t = run(
        &[(n1.addr(), "key-a", 400.0, 4), (n2.addr(), "key-b", 30.0, 1)],
        Duration::from_secs(3),
        measure,
    );
    let (a, b) = (per_s(&t[0], measure), per_s(&t[1], measure));
    eprintln!("across nodes, answered per second: a {a:.1} (node 1), b {b:.1} (node 2)");
    assert!(b >= 27.0, "b keeps its 30/s within 10 % on the other node: {b:.1}/s");
    assert!(
        a <= 80.0,
        "the flood is held to what b leaves (about 70/s), by b's demand read from Redis: {a:.1}/s"
    );
}

#[test]
fn credits_are_counted_per_method_and_quota_burns_in_credits() {
    let _serial = serial();
    let (priced, free) = (FakeProvider::start(), FakeProvider::start());
    let prism = Prism::builder()
        .provider_with(
            &priced,
            "quota_rps = 100\ncredits = { default = 1, methods = { eth_call = 26 } }",
        )
        .provider(&free)
        .extra_toml(&format!(
            "[cache]\nenabled = false\ndedupe = false\n{KEYS}\n[[keys]]\nname = \"only-priced\"\nkey = \"key-p\"\nstrategy = \"round_robin\"\n"
        ))
        .start();
    support::wait_serving(&prism, &["p1", "p2"]);
    // Sent to the priced provider alone (a round-robin key, the other provider kept busy elsewhere is not
    // needed: count what reached it).
    let mut c = Conn::connect(prism.addr());
    for n in 0..20u64 {
        let (method, params) = if n % 2 == 0 {
            ("eth_call", format!(r#"[{{"to":"0x{n:040x}","data":"0x"}},"latest"]"#))
        } else {
            ("eth_getBalance", format!(r#"["0x{n:040x}","latest"]"#))
        };
        let body = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"{method}","params":{params}}}"#);
        let r = c.request(&http::post_with("/", body.as_bytes(), &["x-api-key: key-p"]));
        assert_eq!(r.status, 200, "{}", r.describe());
    }
    let calls = priced.count("eth_call") as f64;
    let reads = priced.count("eth_getBalance") as f64;
    assert!(calls + reads > 0.0, "round robin reached the priced provider");
    assert_eq!(
        prism.metric("prism_credits_total{network=\"testnet\",key=\"only-priced\",provider=\"p1\"}"),
        calls * 26.0 + reads,
        "26 per eth_call, 1 per other call"
    );
    // Score routing: 10 eth_call/s would cost 260 credits/s at the priced provider against its 100: it
    // burns past its quota while it takes more than about 4 a second, and the rest go to the free one.
    let addr = prism.addr();
    let before = (priced.count("eth_call"), free.count("eth_call"));
    let stop = Arc::new(AtomicBool::new(false));
    let caller = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut c = Conn::connect(addr);
            let mut n = 1000u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{n},"method":"eth_call","params":[{{"to":"0x{n:040x}","data":"0x"}},"latest"]}}"#
                );
                let r = c.request(&http::post_with("/", body.as_bytes(), &["x-api-key: key-a"]));
                assert_eq!(r.status, 200);
                thread::sleep(Duration::from_millis(100));
            }
        })
    };
    thread::sleep(Duration::from_secs(4));
    let during = (priced.count("eth_call"), free.count("eth_call"));
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    caller.join().unwrap();
    let late_priced = priced.count("eth_call") - during.0;
    let late_free = free.count("eth_call") - during.1;
    eprintln!(
        "eth_call at 10/s: priced {} then {late_priced}, free {} then {late_free}",
        during.0 - before.0,
        during.1 - before.1
    );
    let credits_per_s = late_priced as f64 * 26.0 / 2.0;
    // Steering is by the burn measured over the last moments, so it settles around the quota, not under a
    // hard cap: at most an even split (130 credits/s at 10 calls/s; a slowed machine sends fewer calls).
    assert!(
        credits_per_s <= 140.0 && late_free >= late_priced && late_free > 0,
        "the priced provider is held near its 100 credits/s: {credits_per_s:.0}/s (priced {late_priced}, free {late_free})"
    );
}
