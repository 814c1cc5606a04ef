//! An upstream HTTP answer (head, framing, body) through parsing, validation, classification and head
//! extraction: see `fuzz/checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::upstream_answer(data));
