//! Failover through a running Prism: a provider that resets, answers 500 or hangs is abandoned and the read
//! succeeds elsewhere; deadlines hold when the whole pool hangs; all-down answers -32603 at once with
//! `providersOpen` / `retryAfterMs`; a provider on the wrong chain never serves; overflow providers serve
//! only when nothing else can.

use crate::support::{
    call, expect_http_result, wait_serving, FakeProvider, Mode, Prism, PrismBuilder, Reply, BALANCE_PARAMS,
};
use std::thread;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(5);

/// Two providers, fast probes, quick retries, breakers out of the way unless a test sets them.
fn builder(fakes: &[&FakeProvider], deadline_ms: u64) -> PrismBuilder {
    Prism::builder()
        .providers(fakes)
        .limit("request_deadline_ms", deadline_ms)
        .network_option("probe_interval_ms", 100)
        .extra_toml("[policy.retry]\nmax_attempts = 3\nbase_delay_ms = 5\nmax_delay_ms = 20")
}

fn no_breaker() -> &'static str {
    "[policy.breaker]\nfailure_threshold = 1000000"
}

fn balance(prism: &Prism, id: u64) -> crate::support::Response {
    prism.rpc(call(&id.to_string(), "eth_getBalance", BALANCE_PARAMS).as_bytes())
}

/// p1 fails every client read in `mode`; p2 answers `"0x2a"`. Every read must succeed with p2's answer,
/// within the deadline, and p1 must have been tried (else the test proves nothing).
fn read_abandons(mode: Mode, deadline_ms: u64, reads: u64) {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p1.set_method_mode("eth_getBalance", mode.clone());
    p2.set_reply("eth_getBalance", Reply::Result("\"0x2a\"".into()));
    let prism = builder(&[&p1, &p2], deadline_ms).extra_toml(no_breaker()).start();
    wait_serving(&prism, &["p1", "p2"]);
    for i in 0..reads {
        let t = Instant::now();
        let r = balance(&prism, i);
        let took = t.elapsed();
        assert_eq!(
            expect_http_result(&r, &i.to_string()),
            b"\"0x2a\"",
            "read {i} with p1 in {mode:?}"
        );
        assert!(
            took < Duration::from_millis(deadline_ms),
            "read {i} took {took:?}, past the {deadline_ms} ms deadline"
        );
    }
    let tried = p1.count("eth_getBalance");
    assert!(
        tried >= 1,
        "p1 ({mode:?}) was never tried: the failover path was not exercised"
    );
    assert_eq!(
        p2.count("eth_getBalance") as u64,
        reads,
        "every read was answered by p2, once"
    );
}

#[test]
fn provider_that_resets_is_abandoned_and_the_read_succeeds_elsewhere() {
    read_abandons(Mode::Reset, 2000, 12);
}

#[test]
fn provider_answering_500_is_abandoned_and_the_read_succeeds_elsewhere() {
    read_abandons(Mode::Status(500), 2000, 12);
}

#[test]
fn provider_that_hangs_is_abandoned_and_the_read_succeeds_elsewhere() {
    // Each attempt gets a share of the deadline, so a hang costs ~1/3 of it, not all of it.
    read_abandons(Mode::Hang, 1500, 5);
}

#[test]
fn deadline_holds_when_every_provider_hangs() {
    const DEADLINE_MS: u64 = 700;
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let prism = builder(&[&p1, &p2], DEADLINE_MS).extra_toml(no_breaker()).start();
    wait_serving(&prism, &["p1", "p2"]);
    p1.set_method_mode("eth_getBalance", Mode::Hang);
    p2.set_method_mode("eth_getBalance", Mode::Hang);
    let addr = prism.addr();
    // Single calls and a batch, several clients at once.
    let handles: Vec<_> = (0..4)
        .map(|i| {
            thread::spawn(move || {
                let body = if i % 2 == 0 {
                    call(&i.to_string(), "eth_getBalance", BALANCE_PARAMS)
                } else {
                    crate::support::batch(&[
                        call("\"a\"", "eth_getBalance", BALANCE_PARAMS),
                        call("\"b\"", "eth_getBalance", BALANCE_PARAMS),
                    ])
                };
                let t = Instant::now();
                let r = crate::support::Conn::connect(addr).request(&crate::support::http::post("/", body.as_bytes()));
                (i, t.elapsed(), r)
            })
        })
        .collect();
    for h in handles {
        let (i, took, r) = h.join().unwrap();
        assert!(
            took < Duration::from_millis(DEADLINE_MS + 500),
            "client {i}: answered after {took:?}; deadline {DEADLINE_MS} ms"
        );
        assert!(
            took >= Duration::from_millis(DEADLINE_MS / 2),
            "client {i}: answered after only {took:?}: did Prism give up before trying?"
        );
        let v = r.json();
        let items = v.as_array().cloned().unwrap_or_else(|| vec![v.clone()]);
        for item in items {
            assert_eq!(item["error"]["code"], -32603, "client {i}: {}", r.describe());
        }
    }
}

#[test]
fn all_down_answers_at_once_with_providers_open_and_retry_after_ms() {
    const COOLDOWN_MS: u64 = 20_000;
    const DEADLINE_MS: u64 = 5_000;
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    let prism = builder(&[&p1, &p2], DEADLINE_MS)
        .extra_toml(&format!(
            "[policy.breaker]\nfailure_threshold = 2\ncooldown_ms = {COOLDOWN_MS}"
        ))
        .start();
    wait_serving(&prism, &["p1", "p2"]);
    // Both fail everything, probes included: their breakers open from probes alone.
    p1.set_mode(Mode::Status(500));
    p2.set_mode(Mode::Status(500));
    prism.wait_state("p1", "open", WAIT);
    prism.wait_state("p2", "open", WAIT);
    let before = p1.client_calls().len() + p2.client_calls().len();
    for i in 0..5 {
        let t = Instant::now();
        let r = balance(&prism, i);
        let took = t.elapsed();
        let (err, id) = crate::support::expect_http_error(&r, -32603);
        assert_eq!(id, i.to_string());
        assert_eq!(err["message"], "No healthy upstream available", "{}", r.describe());
        assert_eq!(err["data"]["providersOpen"], 2, "{}", r.describe());
        let retry = err["data"]["retryAfterMs"]
            .as_u64()
            .unwrap_or_else(|| panic!("retryAfterMs is not an integer: {}", r.describe()));
        assert!(
            retry > 1_000 && retry <= COOLDOWN_MS,
            "retryAfterMs {retry} should be the milliseconds left of a {COOLDOWN_MS} ms cooldown"
        );
        assert!(
            took < Duration::from_millis(300),
            "all-down took {took:?}; it must be answered at once, not after the {DEADLINE_MS} ms deadline"
        );
    }
    // A batch: every call gets the same answer, at once.
    let t = Instant::now();
    let r = prism.rpc(
        crate::support::batch(&[
            call("1", "eth_getBalance", BALANCE_PARAMS),
            call("2", "eth_call", "[{}, \"latest\"]"),
        ])
        .as_bytes(),
    );
    assert!(
        t.elapsed() < Duration::from_millis(300),
        "batch all-down took {:?}",
        t.elapsed()
    );
    for item in crate::support::batch_items(&r) {
        crate::support::expect_error(&item, -32603);
    }
    assert_eq!(
        p1.client_calls().len() + p2.client_calls().len(),
        before,
        "all-down calls reached an upstream"
    );
}

#[test]
fn provider_on_the_wrong_chain_is_excluded_and_never_serves() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p2.set_chain_id("0x1"); // Ethereum mainnet, not 4663
    let prism = builder(&[&p1, &p2], 2000).start();
    let row = prism.wait_state("p2", "wrong-chain", WAIT);
    assert!(row["name"] == "p2");
    wait_serving(&prism, &["p1"]);
    for i in 0..30 {
        expect_http_result(&balance(&prism, i), &i.to_string());
    }
    // Local answers come from config, not from whichever provider.
    let r = prism.rpc(call("1", "eth_chainId", "[]").as_bytes());
    assert_eq!(expect_http_result(&r, "1"), b"\"0x1237\"");
    assert_eq!(p1.count("eth_getBalance"), 30);
    crate::support::assert_no_client_calls(&p2, "a provider on the wrong chain");
    assert_eq!(prism.provider_state("p2"), "wrong-chain");
}

#[test]
fn overflow_provider_serves_only_when_the_others_are_down() {
    let (p1, p2, p3) = (FakeProvider::start(), FakeProvider::start(), FakeProvider::start());
    let prism = builder(&[], 2000)
        .provider(&p1)
        .provider(&p2)
        .provider_with(&p3, "overflow = true")
        .extra_toml("[policy.breaker]\nfailure_threshold = 2\ncooldown_ms = 60000")
        .start();
    wait_serving(&prism, &["p1", "p2", "p3"]);
    for i in 0..40 {
        expect_http_result(&balance(&prism, i), &i.to_string());
    }
    assert_eq!(p1.count("eth_getBalance") + p2.count("eth_getBalance"), 40);
    crate::support::assert_no_client_calls(&p3, "the overflow provider while primaries were healthy");

    p1.set_mode(Mode::Status(500));
    p2.set_mode(Mode::Status(500));
    prism.wait_state("p1", "open", WAIT);
    prism.wait_state("p2", "open", WAIT);
    let primaries = p1.count("eth_getBalance") + p2.count("eth_getBalance");
    for i in 100..120 {
        expect_http_result(&balance(&prism, i), &i.to_string());
    }
    assert_eq!(p3.count("eth_getBalance"), 20, "the overflow provider took over");
    assert_eq!(
        p1.count("eth_getBalance") + p2.count("eth_getBalance"),
        primaries,
        "open primaries got client calls"
    );
}
