//! The Solana transaction parser (crates/solana/src/tx.rs) on arbitrary bytes:
//! - `Transaction::parse` never panics, and whatever it accepts serializes back to exactly the input (the
//!   wire format is canonical: shortvec lengths, no trailing bytes), so nothing was skipped or invented;
//!   the accessors (`signature`, `is_static_writable`, `accounts`) never panic on a parsed transaction;
//! - `decode_payload` agrees with the reference crates: base58 with `bs58`, base64 with `base64`'s
//!   standard engine, size caps included; Prism's own limb-wise base58 decoder agrees with `bs58` on any
//!   text;
//! - `lookup_table_addresses` never panics and returns whole keys only.
#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;
use prism::solana::tx::{
    decode_payload, lookup_table_addresses, Encoding, Transaction, TxError, Version, MAX_BASE58_BYTES,
    MAX_BASE64_BYTES, MAX_WIRE_BYTES,
};
use prism::solana::Pubkey;

fn shortvec(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// The wire bytes of a parsed transaction, written independently of the parser.
fn serialize(tx: &Transaction) -> Vec<u8> {
    let mut out = Vec::new();
    shortvec(&mut out, tx.signatures.len());
    for s in &tx.signatures {
        out.extend_from_slice(s);
    }
    if tx.version == Version::V0 {
        out.push(0x80);
    }
    out.extend_from_slice(&[
        tx.header.required_signatures,
        tx.header.readonly_signed,
        tx.header.readonly_unsigned,
    ]);
    shortvec(&mut out, tx.static_keys.len());
    for k in &tx.static_keys {
        out.extend_from_slice(&k.0);
    }
    out.extend_from_slice(&tx.blockhash);
    shortvec(&mut out, tx.instructions.len());
    for ix in &tx.instructions {
        out.push(ix.program);
        shortvec(&mut out, ix.accounts.len());
        out.extend_from_slice(&ix.accounts);
        shortvec(&mut out, ix.data.len());
        out.extend_from_slice(&ix.data);
    }
    if tx.version == Version::V0 {
        shortvec(&mut out, tx.lookups.len());
        for l in &tx.lookups {
            out.extend_from_slice(&l.table.0);
            shortvec(&mut out, l.writable.len());
            out.extend_from_slice(&l.writable);
            shortvec(&mut out, l.readonly.len());
            out.extend_from_slice(&l.readonly);
        }
    }
    out
}

fn check_parse(wire: &[u8]) {
    let Ok(tx) = Transaction::parse(wire) else {
        return;
    };
    assert_eq!(
        serialize(&tx),
        wire,
        "parsed {tx:?} does not serialize back to its input"
    );
    let _ = tx.signature();
    let _ = tx.blockhash_base58();
    for i in 0..tx.static_keys.len() + 2 {
        let _ = tx.is_static_writable(i);
    }
    // Tables of a size taken from the input: some lookups resolve, some point past their table.
    let keys: Vec<Pubkey> = (0..=255u8).map(|i| Pubkey([i; 32])).collect();
    let tables: Vec<&[Pubkey]> = tx
        .lookups
        .iter()
        .enumerate()
        .map(|(i, _)| &keys[..usize::from(wire[i % wire.len()])])
        .collect();
    if let Some(accounts) = tx.accounts(&tables) {
        let looked_up: usize = tx.lookups.iter().map(|l| l.writable.len() + l.readonly.len()).sum();
        assert_eq!(accounts.len(), tx.static_keys.len() + looked_up, "account list length");
    }
}

fn check_decode(text: &[u8]) {
    // base58 against bs58, with the caps decode_payload promises.
    let reference = bs58::decode(text).into_vec().ok();
    assert_eq!(
        prism::solana::base58::decode(text),
        reference,
        "base58 of {:?}",
        String::from_utf8_lossy(text)
    );
    let want = match &reference {
        _ if text.len() > MAX_BASE58_BYTES => Err("too large"),
        None => Err("encoding"),
        Some(w) if w.len() > MAX_WIRE_BYTES => Err("too large"),
        Some(w) => Ok(w.clone()),
    };
    check_payload(text, Encoding::Base58, want);

    let reference = base64::engine::general_purpose::STANDARD.decode(text).ok();
    let want = match &reference {
        _ if text.len() > MAX_BASE64_BYTES => Err("too large"),
        None => Err("encoding"),
        Some(w) if w.len() > MAX_WIRE_BYTES => Err("too large"),
        Some(w) => Ok(w.clone()),
    };
    check_payload(text, Encoding::Base64, want);
}

fn check_payload(text: &[u8], encoding: Encoding, want: Result<Vec<u8>, &str>) {
    let got = decode_payload(text, encoding);
    match (&got, &want) {
        (Ok(g), Ok(w)) => assert_eq!(g, w, "{encoding:?} payload of {:?}", String::from_utf8_lossy(text)),
        (Err(TxError::TooLarge { .. }), Err("too large")) | (Err(TxError::Encoding(_)), Err("encoding")) => {}
        _ => panic!(
            "{encoding:?} payload of {:?}: got {got:?}, want {want:?}",
            String::from_utf8_lossy(text)
        ),
    }
    if let Ok(wire) = got {
        check_parse(&wire);
    }
}

fuzz_target!(|data: &[u8]| {
    check_parse(data);
    check_decode(data);
    if let Some(keys) = lookup_table_addresses(data) {
        assert_eq!(keys.len() * 32 + 56, data.len(), "table of {} bytes", data.len());
    }
});
