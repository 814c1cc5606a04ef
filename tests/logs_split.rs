//! A wide `eth_getLogs` through Prism against providers that cap the block range or the result count:
//! split to fit, merged byte for byte into what a node without limits answers, limits learned and kept,
//! declared limits used up front, and clean failures (issue 17).

use std::time::{Duration, Instant};

use crate::support::logs_fake::{hash_of_block, Limits, LogsFake, RangeStyle};
use crate::support::{json, Prism};

/// 10 000 blocks, the dense stretch (5000..5100, 20 logs a block) inside.
const WIDE: &str = r#"{"fromBlock":"0x3e8","toBlock":"0x2af7"}"#;

fn limited(style: RangeStyle) -> Limits {
    Limits {
        max_range: Some(100),
        max_results: Some(1000),
        style,
    }
}

fn prism(fake: &LogsFake, options: &str) -> Prism {
    let prism = Prism::builder()
        .limit("request_deadline_ms", 30_000)
        .provider_url_with(&fake.url(), options)
        .start();
    // The pool's head is known (a `latest` bound can be pinned) once the probe has answered.
    prism.wait_provider("p1", Duration::from_secs(10), "head 20000", |r| r["head"] == 20_000);
    prism
}

/// The `result` bytes of `eth_getLogs` with `filter` through Prism, and how long it took; panics with the
/// body on anything else.
fn get_logs(prism: &Prism, filter: &str) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let r = prism.rpc(crate::support::call("1", "eth_getLogs", &format!("[{filter}]")).as_bytes());
    let took = started.elapsed();
    let result = json::field(&r.body, "result").unwrap_or_else(|| panic!("no result: {}", r.describe()));
    (result.to_vec(), took)
}

fn assert_same(got: &[u8], want: &str) {
    assert!(
        got == want.as_bytes(),
        "merged answer differs: {} bytes vs {} bytes from the unlimited node; first difference at byte {}",
        got.len(),
        want.len(),
        got.iter()
            .zip(want.as_bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()))
    );
}

#[test]
fn a_wide_filter_is_split_and_merged_byte_for_byte_and_the_limit_is_learned() {
    let reference = LogsFake::start(Limits::NONE);
    let want = reference.answer(WIDE).unwrap();
    for style in [RangeStyle::QuickNode, RangeStyle::Ankr] {
        let fake = LogsFake::start(limited(style));
        let prism = prism(&fake, "");
        let (got, cold_took) = get_logs(&prism, WIDE);
        assert_same(&got, &want);
        let cold = fake.logs_calls();
        let cold_refused = cold.iter().filter(|c| c.refused).count();
        assert!(cold_refused >= 1, "{style:?}: the provider's limit was met");
        fake.reset();
        let (got, warm_took) = get_logs(&prism, WIDE);
        assert_same(&got, &want);
        let warm = fake.logs_calls();
        let warm_refused = warm.iter().filter(|c| c.refused).count();
        // The range limit is used at once; only the dense stretch (over 1000 logs in 100 blocks) is refused
        // again: a results limit depends on the data, not on the range.
        let refused: Vec<_> = warm.iter().filter(|c| c.refused).map(|c| &c.params).collect();
        assert!(
            warm_refused <= 1 && warm_refused < cold_refused,
            "{style:?}: {refused:?}"
        );
        // Direct, for the report: the same filter against a node without limits.
        let started = Instant::now();
        let direct = crate::support::Conn::connect(reference.addr()).request(&crate::support::http::post(
            "/",
            crate::support::call("1", "eth_getLogs", &format!("[{WIDE}]")).as_bytes(),
        ));
        let direct_took = started.elapsed();
        assert_same(json::field(&direct.body, "result").unwrap(), &want);
        eprintln!(
            "{style:?}: {} bytes; cold {cold_took:?} ({} calls, {cold_refused} refused); warm {warm_took:?} ({} calls, {warm_refused} refused); direct to an unlimited node {direct_took:?}",
            want.len(),
            cold.len(),
            warm.len()
        );
    }
}

#[test]
fn a_declared_max_logs_range_is_used_without_a_refused_call() {
    let reference = LogsFake::start(Limits::NONE);
    let fake = LogsFake::start(Limits {
        max_results: None,
        ..limited(RangeStyle::Ankr)
    });
    let prism = prism(&fake, "max_logs_range = 100");
    let (got, _) = get_logs(&prism, WIDE);
    assert_same(&got, &reference.answer(WIDE).unwrap());
    let calls = fake.logs_calls();
    assert_eq!(calls.iter().filter(|c| c.refused).count(), 0, "{calls:?}");
    assert!(
        calls.len() >= 100,
        "split into parts of at most 100 blocks: {} calls",
        calls.len()
    );
}

#[test]
fn a_latest_bound_is_pinned_to_the_pools_head_and_split() {
    let reference = LogsFake::start(Limits::NONE);
    let fake = LogsFake::start(limited(RangeStyle::QuickNode));
    let prism = prism(&fake, "");
    let filter = r#"{"fromBlock":"0x4650","toBlock":"latest","address":"0x00000000000000000000000000000000c0de0001"}"#;
    let (got, _) = get_logs(&prism, filter);
    assert_same(&got, &reference.answer(filter).unwrap());
    assert!(fake.logs_calls().len() > 2, "split");
}

#[test]
fn a_provider_that_refuses_every_range_fails_cleanly_and_promptly() {
    let fake = LogsFake::start(Limits {
        max_range: Some(0),
        max_results: None,
        style: RangeStyle::Ankr,
    });
    let prism = prism(&fake, "");
    for _ in 0..2 {
        fake.reset();
        let started = Instant::now();
        let r = prism.rpc(crate::support::call("1", "eth_getLogs", &format!("[{WIDE}]")).as_bytes());
        let took = started.elapsed();
        let body = r.json();
        assert_eq!(body["error"]["code"], -32005, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("refuse"), "{message}");
        assert!(json::field(&r.body, "result").is_none());
        let calls = fake.logs_calls().len();
        assert!(calls <= 80, "halving ends at one block: {calls} calls");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
}

#[test]
fn block_hash_filters_are_sent_once_unsplit() {
    let reference = LogsFake::start(Limits::NONE);
    let fake = LogsFake::start(Limits {
        max_range: Some(0),
        max_results: None,
        style: RangeStyle::Ankr,
    });
    let prism = prism(&fake, "max_logs_range = 1");
    let filter = format!(r#"{{"blockHash":"{}"}}"#, hash_of_block(5000));
    let (got, _) = get_logs(&prism, &filter);
    assert_same(&got, &reference.answer(&filter).unwrap());
    let calls = fake.logs_calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].params.contains("blockHash") && !calls[0].params.contains("fromBlock"));
}

#[test]
fn a_part_that_fails_fails_the_whole_call_never_a_partial_answer() {
    let fake = LogsFake::start(limited(RangeStyle::QuickNode));
    fake.set_broken_block(Some(7_777));
    let prism = prism(&fake, "max_logs_range = 100");
    let r = prism.rpc(crate::support::call("1", "eth_getLogs", &format!("[{WIDE}]")).as_bytes());
    assert!(json::field(&r.body, "result").is_none(), "{}", r.describe());
    let body = r.json();
    let message = body["error"]["message"].as_str().unwrap_or_else(|| panic!("{body}"));
    assert!(message.contains("internal error") || message.contains("7700"), "{body}");
}

/// Logs merged from parts over `limits.max_response_bytes` get the same code and message as one upstream
/// answer over it (-32005, naming the limit and its value), never a part of them.
#[test]
fn logs_over_max_response_bytes_are_refused_naming_the_limit() {
    let fake = LogsFake::start(limited(RangeStyle::QuickNode));
    let prism = Prism::builder()
        .limit("request_deadline_ms", 30_000)
        .limit("max_response_bytes", 100_000)
        .provider_url_with(&fake.url(), "")
        .start();
    prism.wait_provider("p1", Duration::from_secs(10), "head 20000", |r| r["head"] == 20_000);
    // The dense stretch (20 logs a block) over 200 blocks: each part fits, the whole does not.
    let filter = r#"{"fromBlock":"0x1388","toBlock":"0x144f"}"#;
    assert!(LogsFake::start(Limits::NONE).answer(filter).unwrap().len() > 100_000);
    let r = prism.rpc(crate::support::call("1", "eth_getLogs", &format!("[{filter}]")).as_bytes());
    let (err, id) = crate::support::expect_http_error(&r, -32005);
    assert_eq!(id, "1");
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("limits.max_response_bytes (100000 bytes)"), "{err}");
    assert!(message.contains("5000..=5199"), "says which blocks: {err}");
}
