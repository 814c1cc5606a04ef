//! The client envelope parser's cost per byte on repeated structure (keys, escapes, nesting, batches):
//! see `fuzz/checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::envelope_cost(data));
