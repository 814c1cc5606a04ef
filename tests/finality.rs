//! Finality tags through a running Prism, counted at the fakes: providers disagree on `safe` and `finalized`
//! (one 45 blocks behind, as in eRPC #1030; one does not serve the tags at all). Tag reads go to providers
//! at or above the pool's agreed value, a client's `safe` / `finalized` never goes backwards (per key, over
//! two shards, while the providers' tags move and swap who lags), a provider that does not serve the tags is
//! asked once, and blocks at or below `finalized` are cached even within the depth rule.

use crate::support::{call, http, wait_serving, wait_until, Conn, FakeProvider, Prism};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const HEAD: u64 = 10_000;
const KEY: &str = "finality-key";

/// Prism's own calls use ids from 2^50 up (`rpc::ids::PROBES`); a client's are below.
fn client_tag_calls(f: &FakeProvider, tag: &str) -> usize {
    f.calls_to("eth_getBlockByNumber")
        .iter()
        .filter(|c| {
            let id: u64 = std::str::from_utf8(c.id.as_deref().unwrap_or(b"0"))
                .unwrap()
                .parse()
                .unwrap_or(0);
            id < 1 << 50
                && c.params
                    .as_deref()
                    .is_some_and(|p| p.starts_with(format!("[\"{tag}\"").as_bytes()))
        })
        .count()
}

fn probe_tag_calls(f: &FakeProvider, tag: &str) -> usize {
    f.calls_to("eth_getBlockByNumber")
        .iter()
        .filter(|c| {
            c.params
                .as_deref()
                .is_some_and(|p| p.starts_with(format!("[\"{tag}\"").as_bytes()))
        })
        .count()
        - client_tag_calls(f, tag)
}

fn start(fakes: &[&FakeProvider]) -> Prism {
    let mut b = Prism::builder().shards(2).network_option("probe_interval_ms", 20);
    for f in fakes {
        b = b.provider(f);
    }
    b.extra_toml(&format!(
        "[[keys]]\nname = \"f\"\nkey = \"{KEY}\"\nstrategy = \"round_robin\"\n"
    ))
    .start()
}

/// The block number `eth_getBlockByNumber(block)` answers, or `None` for an error.
fn block_number(c: &mut Conn, id: usize, block: &str) -> Option<u64> {
    let r = c.request(&http::post_with(
        "/",
        call(&id.to_string(), "eth_getBlockByNumber", &format!("[\"{block}\",false]")).as_bytes(),
        &[&format!("x-api-key: {KEY}")],
    ));
    assert_eq!(r.status, 200, "{}", r.describe());
    let v = r.json();
    let n = v["result"]["number"].as_str()?;
    Some(u64::from_str_radix(n.trim_start_matches("0x"), 16).unwrap())
}

#[test]
fn tag_reads_go_to_providers_at_the_agreed_value_and_finalized_blocks_are_cached() {
    let (ahead, behind, none) = (FakeProvider::start(), FakeProvider::start(), FakeProvider::start());
    for f in [&ahead, &behind, &none] {
        f.set_head(HEAD);
        f.serve_blocks();
    }
    ahead.set_tag("safe", HEAD - 5);
    ahead.set_tag("finalized", HEAD - 10);
    behind.set_tag("safe", HEAD - 50);
    behind.set_tag("finalized", HEAD - 55);
    // `none` serves blocks but answers both tags with "finalized block not found".
    let prism = start(&[&ahead, &behind, &none]);
    wait_serving(&prism, &["p1", "p2", "p3"]);
    assert!(
        wait_until(Duration::from_secs(5), || {
            let s = prism.status();
            s["networks"][0]["safe"] == HEAD - 5 && s["networks"][0]["finalized"] == HEAD - 10
        }),
        "the agreed tags never showed: {}",
        prism.status()
    );
    let p2 = prism.wait_provider("p2", Duration::from_secs(5), "tags probed", |r| {
        r["safeHead"] == HEAD - 50
    });
    assert_eq!(p2["finalizedHead"], HEAD - 55);
    assert_eq!(prism.provider_status("p3")["safeHead"], 0);

    // Round robin would give each provider a third: the tag keeps them on the one at the agreed value.
    let mut c = Conn::connect(prism.addr());
    for i in 0..30 {
        assert_eq!(block_number(&mut c, i, "finalized"), Some(HEAD - 10));
        assert_eq!(block_number(&mut c, i, "safe"), Some(HEAD - 5));
    }
    for tag in ["safe", "finalized"] {
        assert_eq!(client_tag_calls(&ahead, tag), 30);
        assert_eq!(
            client_tag_calls(&behind, tag),
            0,
            "the lagging provider got {tag} reads"
        );
        assert_eq!(
            client_tag_calls(&none, tag),
            0,
            "the provider without tags got {tag} reads"
        );
    }

    // A provider that answers the tags with an error is asked once per tag, never again.
    assert!(
        wait_until(Duration::from_secs(5), || probe_tag_calls(&ahead, "safe") >= 20),
        "tags are probed on every 4th probe"
    );
    assert_eq!(probe_tag_calls(&none, "safe"), 1);
    assert_eq!(probe_tag_calls(&none, "finalized"), 1);

    // Blocks at or below `finalized` are cached though within the depth rule (64); above it they are not.
    let asked = |n: u64| {
        let p = format!("[\"0x{n:x}\",false]");
        [&ahead, &behind, &none]
            .iter()
            .map(|f| {
                f.calls_to("eth_getBlockByNumber")
                    .iter()
                    .filter(|c| c.params.as_deref() == Some(p.as_bytes()))
                    .count()
            })
            .sum::<usize>()
    };
    // One connection: one shard, whose cache it is (the last one sat idle past the idle timeout).
    let mut c = Conn::connect(prism.addr());
    for _ in 0..3 {
        assert_eq!(block_number(&mut c, 1, &format!("0x{:x}", HEAD - 20)), Some(HEAD - 20));
        assert_eq!(block_number(&mut c, 2, &format!("0x{:x}", HEAD - 8)), Some(HEAD - 8));
    }
    assert_eq!(asked(HEAD - 20), 1, "a finalized block is asked once");
    assert_eq!(
        asked(HEAD - 8),
        3,
        "a block above finalized, within the depth, is always asked"
    );
}

/// Moves the chain while clients poll: every tick the head and every tag advance by one; every 40 ticks
/// the provider that lags on its tags (45 blocks) changes.
fn run_chain(fakes: Vec<Arc<FakeProvider>>, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut head = HEAD;
        let mut tick = 0u64;
        while !stop.load(Ordering::SeqCst) {
            head += 1;
            let lagger = (tick / 40) as usize % fakes.len();
            for (k, f) in fakes.iter().enumerate() {
                let lag = if k == lagger { 45 } else { 0 };
                f.set_head(head);
                f.set_tag("safe", head - 10 - lag);
                f.set_tag("finalized", head - 20 - lag);
            }
            tick += 1;
            thread::sleep(Duration::from_millis(3));
        }
    })
}

#[test]
fn a_clients_safe_and_finalized_never_go_backwards_while_providers_disagree() {
    let fakes: Vec<Arc<FakeProvider>> = (0..2).map(|_| Arc::new(FakeProvider::start())).collect();
    for f in &fakes {
        f.set_head(HEAD);
        f.serve_blocks();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let chain = run_chain(fakes.clone(), stop.clone());
    let prism = start(&[&fakes[0], &fakes[1]]);
    wait_serving(&prism, &["p1", "p2"]);
    assert!(
        wait_until(Duration::from_secs(5), || prism.status()["networks"][0]["finalized"]
            .as_u64()
            > Some(0)),
        "the agreed finalized block never showed"
    );
    let addr = prism.addr();
    let clients: Vec<_> = (0..4)
        .map(|client| {
            thread::spawn(move || {
                let mut seen: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
                let mut errors = 0;
                let mut c = Conn::connect(addr);
                for i in 0..150 {
                    if i % 25 == 0 {
                        c = Conn::connect(addr); // both shards serve this client
                    }
                    let (lane, tag) = if i % 2 == 0 { (0, "safe") } else { (1, "finalized") };
                    match block_number(&mut c, client * 1000 + i, tag) {
                        Some(n) => seen[lane].push(n),
                        None => errors += 1,
                    }
                }
                (seen, errors)
            })
        })
        .collect();
    let mut answered = 0;
    let mut errors = 0;
    for h in clients {
        let (seen, e) = h.join().unwrap();
        errors += e;
        for (lane, s) in seen.iter().enumerate() {
            answered += s.len();
            for w in s.windows(2) {
                assert!(
                    w[1] >= w[0],
                    "lane {lane} went backwards: {} then {} in {s:?}",
                    w[0],
                    w[1]
                );
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    chain.join().unwrap();
    assert!(
        answered >= 500,
        "answered {answered}, errors {errors}: tag reads must mostly be served"
    );
}
