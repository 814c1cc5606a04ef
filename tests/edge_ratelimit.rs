//! Per-key rate limits through a running Prism: the bucket's burst and rate hold across two shards and many
//! connections (accepted ≈ burst + rate × elapsed, within a few percent); over the limit is HTTP 429 with
//! `Retry-After` and a -32005 JSON-RPC error that never reaches an upstream; batch calls cost one token
//! each; retries inside Prism are not billed.

use crate::support::{batch, call, expect_http_result, http, json, Conn, FakeProvider, Mode, Prism, Response};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn key_toml(name: &str, key: &str, rate: f64, burst: u32, extra: &str) -> String {
    format!("[[keys]]\nname = \"{name}\"\nkey = \"{key}\"\nrate_per_s = {rate}\nburst = {burst}\n{extra}\n")
}

/// A distinct read per `n`, so in-flight deduplication never merges two of them.
fn read(id: u64) -> String {
    call(
        &id.to_string(),
        "eth_getBalance",
        &format!("[\"0x{id:040x}\",\"latest\"]"),
    )
}

fn assert_throttled(r: &Response) -> u64 {
    assert_eq!(r.status, 429, "{}", r.describe());
    let retry_after: u64 = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("429 without Retry-After: {}", r.describe()))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After is not delta-seconds: {}", r.describe()));
    assert!(retry_after >= 1, "{}", r.describe());
    let body = json::whole(&r.body).unwrap_or_else(|e| panic!("429 body is not JSON ({e}): {}", r.describe()));
    let err = crate::support::expect_error(body, -32005);
    assert!(err["message"].is_string());
    retry_after
}

#[test]
fn bucket_rate_and_burst_hold_across_shards_and_connections() {
    const RATE: f64 = 200.0;
    const BURST: u32 = 60;
    const RUN: Duration = Duration::from_millis(2000);
    const CLIENTS: usize = 12;
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .shards(2)
        .provider(&fake)
        .limit("max_connections", 1000)
        .extra_toml(&key_toml("limited", "limited-key-01", RATE, BURST, ""))
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    let accepted = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let addr = prism.addr();
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (accepted, refused, go) = (accepted.clone(), refused.clone(), go.clone());
            thread::spawn(move || {
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let start = Instant::now();
                let mut conn = Conn::connect(addr);
                let mut n = 0u64;
                while start.elapsed() < RUN {
                    // New connections now and then: they land on both shards.
                    if n % 25 == 24 {
                        conn = Conn::connect(addr);
                    }
                    let id = (c as u64) << 32 | n;
                    let r = conn.request(&http::post_with(
                        "/",
                        read(id).as_bytes(),
                        &["x-api-key: limited-key-01"],
                    ));
                    match r.status {
                        200 => {
                            expect_http_result(&r, &id.to_string());
                            accepted.fetch_add(1, Ordering::Relaxed);
                        }
                        429 => {
                            assert_throttled(&r);
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => panic!("unexpected answer: {}", r.describe()),
                    }
                    n += 1;
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    go.store(true, Ordering::Release);
    for h in handles {
        h.join().unwrap();
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let ok = accepted.load(Ordering::Relaxed) as f64;
    let no = refused.load(Ordering::Relaxed);
    let expected = f64::from(BURST) + RATE * elapsed;
    eprintln!("accepted {ok}, refused {no}, elapsed {elapsed:.3} s, expected {expected:.1}");
    assert!(no > 100, "only {no} refusals: the clients did not push past the limit");
    // The last requests finish a little after the first ones start; allow for that and a few percent.
    let low = (f64::from(BURST) + RATE * (elapsed - 0.1)) * 0.97 - 2.0;
    let high = expected * 1.03 + 2.0;
    assert!(
        ok >= low && ok <= high,
        "accepted {ok} calls in {elapsed:.3} s; burst {BURST} + {RATE}/s × elapsed = {expected:.1} \
         (allowed {low:.1}..{high:.1})"
    );
    // Every accepted call went upstream once; no refused call did.
    assert_eq!(fake.count("eth_getBalance") as f64, ok, "upstream calls vs accepted");
}

#[test]
fn over_the_limit_is_429_with_retry_after_and_a_json_rpc_error() {
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .extra_toml(&key_toml("slow", "slow-key-02", 0.5, 2, ""))
        .extra_toml(&key_toml("other", "other-key-03", 0.5, 2, ""))
        .start();
    let h = ["x-api-key: slow-key-02"];
    expect_http_result(&prism.rpc_with("/", read(1).as_bytes(), &h), "1");
    expect_http_result(&prism.rpc_with("/", read(2).as_bytes(), &h), "2");
    let r = prism.rpc_with("/", read(3).as_bytes(), &h);
    let retry_after = assert_throttled(&r);
    // 0.5 tokens/s: the next one is about 2 s away.
    assert!(
        (1..=3).contains(&retry_after),
        "Retry-After {retry_after}: {}",
        r.describe()
    );
    let err = crate::support::error_of(&r);
    let ms = err["data"]["retryAfterMs"].as_u64().unwrap_or(0);
    assert!(ms > 0 && ms <= 2000, "retryAfterMs {ms}: {}", r.describe());
    assert_eq!(fake.count("eth_getBalance"), 2, "a throttled call reached the upstream");
    // Each key has its own bucket.
    expect_http_result(
        &prism.rpc_with("/", read(4).as_bytes(), &["x-api-key: other-key-03"]),
        "4",
    );
    // The refusal is counted per key in the metrics.
    let m = prism.admin_get("/metrics").text();
    let line = m
        .lines()
        .find(|l| l.starts_with("prism_key_throttled_total{key=\"slow\"}"))
        .unwrap_or_else(|| panic!("no throttle counter for key slow:\n{m}"));
    assert!(line.ends_with(" 1"), "{line}");
}

#[test]
fn batch_calls_each_cost_one_token() {
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .limit("max_batch", 20)
        .extra_toml(&key_toml("b", "batch-key-04", 0.01, 5, ""))
        .start();
    let h = ["x-api-key: batch-key-04"];
    let r = prism.rpc_with("/", batch(&[read(1), read(2), read(3), read(4)]).as_bytes(), &h);
    assert_eq!(crate::support::batch_items(&r).len(), 4);
    // One token left: a batch of two does not fit, and costs nothing.
    assert_throttled(&prism.rpc_with("/", batch(&[read(5), read(6)]).as_bytes(), &h));
    expect_http_result(&prism.rpc_with("/", read(7).as_bytes(), &h), "7");
    assert_throttled(&prism.rpc_with("/", read(8).as_bytes(), &h));
    assert_eq!(fake.count("eth_getBalance"), 5);
}

#[test]
fn retries_inside_prism_are_not_billed() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("eth_getBalance", Mode::Status(500));
    let prism = Prism::builder()
        .providers(&[&p1, &p2])
        .extra_toml("[policy.retry]\nbase_delay_ms = 1\nmax_delay_ms = 5\n[policy.breaker]\nfailure_threshold = 1000")
        .extra_toml(&key_toml("r", "retry-key-05", 0.01, 4, "strategy = \"round_robin\""))
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let h = ["x-api-key: retry-key-05"];
    for i in 0..4 {
        expect_http_result(&prism.rpc_with("/", read(i).as_bytes(), &h), &i.to_string());
    }
    assert!(
        p1.count("eth_getBalance") >= 2,
        "reads were retried (p1 failed some first)"
    );
    assert_eq!(p2.count("eth_getBalance"), 4);
    // Four calls, four tokens, however many upstream attempts they took.
    assert_throttled(&prism.rpc_with("/", read(99).as_bytes(), &h));
}
