//! One monotonic process clock in milliseconds, so breakers, parking and windows share a time base.

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Milliseconds since the process clock started (starts at 1, so 0 can mean "never").
pub fn now_ms() -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    epoch.elapsed().as_millis() as u64 + 1
}

/// Nanoseconds on the same clock, for rate limiting.
pub fn now_ns() -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    epoch.elapsed().as_nanos() as u64 + 1_000_000
}
