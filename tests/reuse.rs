//! In-flight deduplication and the deterministic-result cache, through a running Prism: what reaches the
//! fake provider is counted there, and every caller must still get its own id and the provider's bytes.
//!
//! These fakes have no WebSocket, so Prism has no heads feed to prove an answer about a block not yet final
//! with: only final answers (at or below the pool's `finalized`, [`FINALIZED`]) are served from the cache
//! here. Reorgs against cached answers are tested with a real node in `tests/reorgs.rs`.

use std::time::Duration;

use crate::support::fake::Reply;
use crate::support::{call, expect_http_result, wait_until, FakeProvider, Prism};

const HEAD: u64 = 1000;
/// The fake's `finalized` block.
const FINALIZED: u64 = 900;

/// One shard (dedupe and cache are per shard), a fake at head 1000 with `finalized` at 900, and Prism's pool
/// head and agreed `finalized` learned.
fn setup(extra: &str) -> (FakeProvider, Prism) {
    let fake = FakeProvider::start();
    fake.set_head(HEAD);
    fake.set_tag("finalized", FINALIZED);
    let prism = Prism::builder()
        .network("testnet", 4663)
        .network_option("probe_interval_ms", 100)
        .provider(&fake)
        .extra_toml(extra)
        .start();
    assert!(
        wait_until(Duration::from_secs(5), || {
            let s = prism.status();
            s["networks"][0]["bestHead"].as_u64() == Some(HEAD) && s["networks"][0]["finalized"] == FINALIZED
        }),
        "Prism never learned the head and the finalized block"
    );
    (fake, prism)
}

#[test]
fn fifty_identical_calls_share_one_upstream_call() {
    let (fake, prism) = setup("");
    fake.set_delay("eth_call", Duration::from_millis(400));
    let params = r#"[{"to":"0x00000000000000000000000000000000000000aa","data":"0x70a08231"},"latest"]"#;
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let addr = prism.addr();
            std::thread::spawn(move || {
                let mut conn = crate::support::http::Conn::connect(addr);
                let resp = conn.request(&crate::support::http::post(
                    "/",
                    call(&format!("\"caller-{i}\""), "eth_call", params).as_bytes(),
                ));
                (i, resp)
            })
        })
        .collect();
    for h in handles {
        let (i, resp) = h.join().unwrap();
        expect_http_result(&resp, &format!("\"caller-{i}\""));
    }
    assert_eq!(
        fake.count("eth_call"),
        1,
        "fifty identical reads in flight must reach the provider once"
    );
    assert!(prism.metric("prism_dedupe_joins_total") >= 40.0);
}

#[test]
fn distinct_params_never_share_an_answer() {
    let (fake, prism) = setup("");
    fake.set_delay("eth_getBalance", Duration::from_millis(300));
    // Pairs that look alike but ask different questions, plus two spellings of the same question.
    let params = [
        r#"["0x00000000000000000000000000000000000000aa","latest"]"#,
        r#"["0x00000000000000000000000000000000000000AA"]"#, // same as the first: hex case, missing tag
        r#"["0x00000000000000000000000000000000000000ab","latest"]"#,
        r#"["0x00000000000000000000000000000000000000aa","pending"]"#,
        r#"["0x00000000000000000000000000000000000000aa","0x3e7"]"#,
        r#"["0x00000000000000000000000000000000000000aa","Latest"]"#,
    ];
    let handles: Vec<_> = params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let addr = prism.addr();
            let body = call(&i.to_string(), "eth_getBalance", p);
            std::thread::spawn(move || {
                let mut conn = crate::support::http::Conn::connect(addr);
                (i, conn.request(&crate::support::http::post("/", body.as_bytes())))
            })
        })
        .collect();
    for h in handles {
        let (i, resp) = h.join().unwrap();
        expect_http_result(&resp, &i.to_string());
    }
    assert_eq!(
        fake.count("eth_getBalance"),
        5,
        "five distinct questions, one asked twice"
    );
}

#[test]
fn final_reads_are_cached_and_latest_never_is() {
    let (fake, prism) = setup("");
    let read_at = |id: &str, block: &str| {
        call(
            id,
            "eth_getBalance",
            &format!(r#"["0x00000000000000000000000000000000000000aa",{block}]"#),
        )
    };
    let deep = read_at("1", r#""0x10""#);
    let latest = read_at("2", r#""latest""#);
    let near = read_at("3", &format!(r#""0x{:x}""#, HEAD - 3));
    // 64 blocks deep but above `finalized`: its block is not one Prism knows, and without a heads feed
    // nothing would prove it anyway.
    let unproven = read_at("4", &format!(r#""0x{:x}""#, FINALIZED + 10));
    fake.set_reply("eth_getBalance", Reply::Result("\"0x1bc16d674ec80000\"".into()));
    for _ in 0..3 {
        let r = prism.rpc(deep.as_bytes());
        assert_eq!(expect_http_result(&r, "1"), b"\"0x1bc16d674ec80000\"");
        prism.rpc(latest.as_bytes());
        prism.rpc(near.as_bytes());
        prism.rpc(unproven.as_bytes());
    }
    let deep_calls = fake
        .calls_to("eth_getBalance")
        .iter()
        .filter(|c| c.params.as_deref().is_some_and(|p| p.ends_with(b"\"0x10\"]")))
        .count();
    assert_eq!(deep_calls, 1, "a read below the finalized block is asked once");
    assert_eq!(
        fake.count("eth_getBalance"),
        1 + 3 + 3 + 3,
        "latest, near-head and unproven reads always go upstream"
    );
    assert!(prism.metric("prism_cache_hits_total") >= 2.0);
}

#[test]
fn null_and_error_answers_never_stick() {
    let (fake, prism) = setup("");
    let receipt = call(
        "7",
        "eth_getTransactionReceipt",
        &format!(r#"["0x{}"]"#, "ab".repeat(32)),
    );
    fake.set_reply("eth_getTransactionReceipt", Reply::Result("null".into()));
    for _ in 0..2 {
        assert_eq!(expect_http_result(&prism.rpc(receipt.as_bytes()), "7"), b"null");
    }
    assert_eq!(
        fake.count("eth_getTransactionReceipt"),
        2,
        "a null receipt (not mined yet) is asked again"
    );
    fake.set_reply(
        "eth_getTransactionReceipt",
        Reply::Error(r#"{"code":-32000,"message":"boom"}"#.into()),
    );
    prism.rpc(receipt.as_bytes());
    prism.rpc(receipt.as_bytes());
    assert_eq!(fake.count("eth_getTransactionReceipt"), 4, "errors are never cached");
    let mined = r#"{"blockNumber":"0x10","blockHash":"0x1111111111111111111111111111111111111111111111111111111111111111","status":"0x1"}"#;
    fake.set_reply("eth_getTransactionReceipt", Reply::Result(mined.into()));
    for _ in 0..3 {
        assert_eq!(
            expect_http_result(&prism.rpc(receipt.as_bytes()), "7"),
            mined.as_bytes()
        );
    }
    assert_eq!(
        fake.count("eth_getTransactionReceipt"),
        5,
        "a receipt in a final block is asked once more, then cached"
    );
}

#[test]
fn a_receipt_in_a_block_not_yet_final_is_asked_every_time_without_a_heads_feed() {
    let (fake, prism) = setup("");
    let receipt = call(
        "7",
        "eth_getTransactionReceipt",
        &format!(r#"["0x{}"]"#, "cd".repeat(32)),
    );
    let mined = format!(
        r#"{{"blockNumber":"0x{:x}","blockHash":"0x{}","status":"0x1"}}"#,
        HEAD - 2,
        "22".repeat(32)
    );
    fake.set_reply("eth_getTransactionReceipt", Reply::Result(mined.clone()));
    for _ in 0..3 {
        assert_eq!(
            expect_http_result(&prism.rpc(receipt.as_bytes()), "7"),
            mined.as_bytes()
        );
    }
    assert_eq!(
        fake.count("eth_getTransactionReceipt"),
        3,
        "nothing proves the block is still canonical: the node is asked"
    );
}

#[test]
fn the_memory_bound_holds_under_a_flood_of_distinct_keys() {
    let (fake, prism) = setup("[cache]\nmax_bytes = 65536\nmax_entry_bytes = 4096\n");
    fake.set_reply("eth_getBalance", Reply::Result(format!("\"0x{}\"", "f".repeat(1000))));
    let mut conn = prism.conn();
    for i in 0..600u32 {
        // At block 16, final: cacheable.
        let body = call(&i.to_string(), "eth_getBalance", &format!(r#"["0x{:040x}","0x10"]"#, i));
        let r = conn.request(&crate::support::http::post("/", body.as_bytes()));
        expect_http_result(&r, &i.to_string());
    }
    assert!(
        wait_until(Duration::from_secs(3), || prism.metric("prism_cache_evictions_total")
            > 0.0),
        "a flood past the bound must evict"
    );
    let bytes = prism.metric("prism_cache_bytes");
    assert!(
        bytes > 0.0 && bytes <= 65536.0,
        "cache holds {bytes} bytes, bound is 65536"
    );
}
