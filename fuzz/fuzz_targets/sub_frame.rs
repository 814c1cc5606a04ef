//! Upstream WebSocket bytes (frames as tungstenite reads them with Prism's limits) and subscription
//! messages as the hub parses them: see `fuzz/checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::sub_frame(data));
