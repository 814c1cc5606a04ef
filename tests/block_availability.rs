//! Block availability through a running Prism, counted at the fakes: a pruned provider (history from block
//! 9 000, answering geth's "missing trie node" below it) and an archive one. Reads below the floor go to the
//! archive node first, whether the floor is declared (`floor_block`) or learned from one miss; reads above it
//! are routed as usual (round robin here, so both must get traffic); a learned floor is re-checked by the
//! prober, and a node that gained history is used again.

use crate::support::{call, expect_http_result, http, wait_serving, wait_until, Conn, FakeProvider, Prism};
use std::time::Duration;

const HEAD: u64 = 10_000;
const FLOOR: u64 = 9_000;
const KEY: &str = "avail-key";
/// The prober's recheck asks for the zero address's balance: client reads here use others.
const ZERO: &str = "0x0000000000000000000000000000000000000000";

fn setup(pruned_options: &str) -> (FakeProvider, FakeProvider, Prism) {
    let pruned = FakeProvider::start();
    let archive = FakeProvider::start();
    for f in [&pruned, &archive] {
        f.set_head(HEAD);
    }
    pruned.set_floor(FLOOR);
    let prism = Prism::builder()
        .shards(2)
        // A learned floor is re-checked every 150 probe intervals: 3 s here.
        .network_option("probe_interval_ms", 20)
        .provider_with(&pruned, pruned_options)
        .provider(&archive)
        .extra_toml(&format!(
            "[[keys]]\nname = \"a\"\nkey = \"{KEY}\"\nstrategy = \"round_robin\"\n"
        ))
        .start();
    wait_serving(&prism, &["p1", "p2"]);
    assert!(
        wait_until(Duration::from_secs(5), || prism.status()["networks"][0]["bestHead"]
            .as_u64()
            == Some(HEAD)),
        "Prism never learned the head"
    );
    (pruned, archive, prism)
}

/// Client balance reads at any block (the prober's rechecks left out).
fn reads(f: &FakeProvider) -> usize {
    f.calls_to("eth_getBalance")
        .iter()
        .filter(|c| {
            !c.params
                .as_deref()
                .is_some_and(|p| p.starts_with(format!("[\"{ZERO}\"").as_bytes()))
        })
        .count()
}

/// One balance read at `block` for a fresh address (so the cache never answers it), on a new connection
/// every time (so both shards serve them). Panics unless it got a result.
fn read_at(prism: &Prism, n: usize, block: u64) {
    let params = format!("[\"0x{:040x}\",\"0x{block:x}\"]", n + 1);
    let mut c = Conn::connect(prism.addr());
    let r = c.request(&http::post_with(
        "/",
        call(&n.to_string(), "eth_getBalance", &params).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    ));
    expect_http_result(&r, &n.to_string());
}

fn floor_of(prism: &Prism, name: &str) -> u64 {
    prism.provider_status(name)["floorBlock"]
        .as_u64()
        .expect("floorBlock in /status")
}

#[test]
fn a_declared_floor_keeps_older_reads_off_the_pruned_provider_and_newer_ones_spread() {
    let (pruned, archive, prism) = setup(&format!("floor_block = {FLOOR}"));
    assert_eq!(floor_of(&prism, "p1"), FLOOR);
    assert_eq!(floor_of(&prism, "p2"), 0, "archive by default");
    for n in 0..40 {
        read_at(&prism, n, FLOOR - 1 - n as u64 * 20);
    }
    assert_eq!(
        reads(&pruned),
        0,
        "no read below its declared floor reaches the pruned provider"
    );
    assert_eq!(reads(&archive), 40);
    for n in 40..80 {
        read_at(&prism, n, FLOOR + 500 + n as u64);
    }
    let (p, a) = (reads(&pruned), reads(&archive) - 40);
    assert!(
        p >= 10 && a >= 10,
        "reads above the floor go by the key's strategy to both: {p} / {a}"
    );
}

#[test]
fn a_floor_is_learned_from_one_miss_and_rechecked_until_the_node_has_history_again() {
    let (pruned, archive, prism) = setup("");
    assert_eq!(floor_of(&prism, "p1"), 0, "nothing declared, nothing learned yet");
    // Round robin: within a few reads one lands on the pruned provider, misses, and is answered by the
    // archive node.
    let mut n = 0;
    while reads(&pruned) == 0 {
        assert!(n < 20, "round robin never reached the pruned provider");
        read_at(&prism, n, FLOOR - 1);
        n += 1;
    }
    assert_eq!(reads(&pruned), 1);
    assert_eq!(floor_of(&prism, "p1"), FLOOR, "learned: the block it lacked, plus one");
    for k in 0..40 {
        read_at(&prism, 100 + k, FLOOR - 1 - k as u64 * 10);
    }
    assert_eq!(
        reads(&pruned),
        1,
        "once the floor is known, older reads never reach the pruned provider"
    );
    let before = (reads(&pruned), reads(&archive));
    for k in 0..40 {
        read_at(&prism, 200 + k, FLOOR + 100 + k as u64);
    }
    let (p, a) = (reads(&pruned) - before.0, reads(&archive) - before.1);
    assert!(p >= 10 && a >= 10, "reads above the floor go to both: {p} / {a}");

    // The prober re-checks the learned floor; while the node still lacks the block, it stays.
    let recheck = format!("[\"{ZERO}\",\"0x{:x}\"]", FLOOR - 1);
    assert!(
        pruned.wait_until(Duration::from_secs(10), |v| v.calls.iter().any(|c| c.method
            == "eth_getBalance"
            && c.params.as_deref() == Some(recheck.as_bytes()))),
        "the learned floor was never re-checked"
    );
    assert_eq!(floor_of(&prism, "p1"), FLOOR, "a recheck that misses keeps the floor");

    // The node gains history: the next recheck forgets the floor, and older reads reach it again.
    pruned.set_floor(0);
    prism.wait_provider("p1", Duration::from_secs(10), "floor forgotten", |r| {
        r["floorBlock"] == 0
    });
    let before = reads(&pruned);
    let mut k = 0;
    while reads(&pruned) == before {
        assert!(k < 20, "the provider never served an older read again");
        read_at(&prism, 300 + k, FLOOR - 1 - k as u64);
        k += 1;
    }
}
