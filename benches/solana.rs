//! Micro-benchmarks of the Solana router's per-request work outside the network:
//! - decoding and parsing a real signed transaction (legacy and v0 with a lookup table, base64 and base58);
//! - deriving a delegation record PDA (paid once per account per shard, when it enters the table);
//! - the shared signature memory (put + get).
//!
//! Run: `cargo bench --bench solana`.

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use prism::solana::memo::Memo;
use prism::solana::pubkey::{Pubkey, DELEGATION_PROGRAM};
use prism::solana::tx::{decode_payload, Encoding, Transaction};

fn fixture(name: &str, field: &str) -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/solana/fixtures.json"
    ))
    .expect("fixtures");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    v["transactions"][name][field].as_str().expect("field").to_string()
}

fn benches(c: &mut Criterion) {
    for (name, enc, encoding) in [
        ("write_alice_bob", "base64", Encoding::Base64),
        ("write_alice_bob", "base58", Encoding::Base58),
        ("v0_alt_carol", "base64", Encoding::Base64),
    ] {
        let text = fixture(name, enc);
        c.bench_function(&format!("tx decode+parse {name} {enc}"), |b| {
            b.iter(|| {
                let wire = decode_payload(black_box(text.as_bytes()), encoding).unwrap();
                Transaction::parse(&wire).unwrap()
            })
        });
    }
    let program = Pubkey::from_base58(DELEGATION_PROGRAM).unwrap();
    let account = Pubkey::from_base58("9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin").unwrap();
    c.bench_function("delegation record PDA", |b| {
        b.iter(|| black_box(account).delegation_record(&program))
    });
    let memo = Memo::new(1 << 16);
    let sig = fixture("write_alice_bob", "signature");
    c.bench_function("signature memo put+get", |b| {
        b.iter(|| {
            memo.put(black_box(sig.as_str()), 1);
            memo.get(black_box(sig.as_str()))
        })
    });
}

criterion_group! {
    name = solana;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(solana);
