//! Solana delegation records, account data, lookup tables and account notifications: see
//! `fuzz/checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::solana_account(data));
