//! Replays every committed fuzz input (`fuzz/corpus/<target>/` seeds and `fuzz/crashes/<target>/` findings)
//! through the same property checks the fuzz targets run (`fuzz/checks.rs`), under plain `cargo test`: no
//! nightly, no cargo-fuzz. An input that failed once keeps failing here until its fix lands.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut seen = 0;
    for dir in ["corpus", "crashes"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(outcome.is_ok(), "{target}: {} fails its checks", file.display());
            seen += 1;
        }
    }
    assert!(
        seen > 0,
        "no committed inputs for {target} under fuzz/corpus or fuzz/crashes"
    );
}

#[test]
fn upstream_answer() {
    replay("upstream_answer", checks::upstream_answer);
}

#[test]
fn client_ws() {
    replay("client_ws", checks::client_ws);
}

#[test]
fn sub_frame() {
    replay("sub_frame", checks::sub_frame);
}

#[test]
fn solana_account() {
    replay("solana_account", checks::solana_account);
}

#[test]
fn envelope_cost() {
    replay("envelope_cost", checks::envelope_cost);
}
