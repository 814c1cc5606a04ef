//! Circuit breaker, shared by every shard through atomics: exact thresholds across shards, one half-open
//! probe across all shards, and no lock anywhere.
//!
//! closed → open after `failure_threshold` failures within `window_ms` (a sliding window: the threshold-th
//! most recent failure is inside the window); open for the current cooldown; then one caller wins the probe
//! (half-open). Probe success closes it and resets the cooldown; probe failure reopens it with the cooldown
//! × `backoff_multiplier`, up to `max_cooldown_ms`. Time is a parameter (ms on any monotonic clock).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use prism_config::BreakerPolicy;

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;

/// A probe that has not reported within this long is presumed lost, and another may start.
const PROBE_LEASE_MS: u64 = 30_000;

fn pack(state: u64, at_ms: u64) -> u64 {
    (at_ms << 2) | state
}
fn unpack(word: u64) -> (u64, u64) {
    (word & 3, word >> 2)
}

/// What routing sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    /// Open; `retry_in_ms` until a probe may go.
    Open {
        retry_in_ms: u64,
    },
    /// Open with the cooldown over: the next `try_probe` wins.
    ProbeDue,
    HalfOpen,
}

impl BreakerState {
    pub fn name(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } | BreakerState::ProbeDue => "open",
            BreakerState::HalfOpen => "half-open",
        }
    }
}

/// What a finished call reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    None,
    Opened,
    Reopened { cooldown_ms: u64 },
    Closed,
}

pub struct Breaker {
    threshold: usize,
    window_ms: u64,
    base_cooldown_ms: u64,
    multiplier: f64,
    max_cooldown_ms: u64,
    /// State and the time it was entered (opened at / probe started at).
    word: AtomicU64,
    cooldown_ms: AtomicU64,
    /// Times (ms + 1; 0 = empty) of the most recent failures, a ring of `threshold` slots.
    failures: Box<[AtomicU64]>,
    cursor: AtomicUsize,
}

impl Breaker {
    pub fn new(policy: &BreakerPolicy) -> Self {
        let threshold = policy.failure_threshold.max(1) as usize;
        Breaker {
            threshold,
            window_ms: policy.window_ms,
            base_cooldown_ms: policy.cooldown_ms,
            multiplier: policy.backoff_multiplier,
            max_cooldown_ms: policy.max_cooldown_ms,
            word: AtomicU64::new(pack(CLOSED, 0)),
            cooldown_ms: AtomicU64::new(policy.cooldown_ms),
            failures: (0..threshold).map(|_| AtomicU64::new(0)).collect(),
            cursor: AtomicUsize::new(0),
        }
    }

    pub fn state(&self, now_ms: u64) -> BreakerState {
        let (state, at) = unpack(self.word.load(Ordering::Acquire));
        match state {
            CLOSED => BreakerState::Closed,
            OPEN => {
                let until = at + self.cooldown_ms.load(Ordering::Relaxed);
                if now_ms >= until {
                    BreakerState::ProbeDue
                } else {
                    BreakerState::Open {
                        retry_in_ms: until - now_ms,
                    }
                }
            }
            _ if now_ms >= at + PROBE_LEASE_MS => BreakerState::ProbeDue,
            _ => BreakerState::HalfOpen,
        }
    }

    pub fn is_closed(&self) -> bool {
        unpack(self.word.load(Ordering::Acquire)).0 == CLOSED
    }

    /// The current cooldown (grows with failed probes).
    pub fn cooldown_ms(&self) -> u64 {
        self.cooldown_ms.load(Ordering::Relaxed)
    }

    /// Claims the single half-open probe. True for exactly one caller per cooldown, across all shards.
    pub fn try_probe(&self, now_ms: u64) -> bool {
        let word = self.word.load(Ordering::Acquire);
        if self.state(now_ms) != BreakerState::ProbeDue {
            return false;
        }
        self.word
            .compare_exchange(word, pack(HALF_OPEN, now_ms), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A call (or probe) succeeded.
    pub fn on_success(&self, now_ms: u64) -> Transition {
        let word = self.word.load(Ordering::Acquire);
        if unpack(word).0 != HALF_OPEN {
            return Transition::None;
        }
        if self
            .word
            .compare_exchange(word, pack(CLOSED, now_ms), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.cooldown_ms.store(self.base_cooldown_ms, Ordering::Relaxed);
            for slot in self.failures.iter() {
                slot.store(0, Ordering::Relaxed);
            }
            return Transition::Closed;
        }
        Transition::None
    }

    /// A call failed in a way that counts (see the classifier).
    pub fn on_failure(&self, now_ms: u64) -> Transition {
        let word = self.word.load(Ordering::Acquire);
        match unpack(word).0 {
            HALF_OPEN => {
                let next = ((self.cooldown_ms.load(Ordering::Relaxed) as f64 * self.multiplier) as u64)
                    .clamp(self.base_cooldown_ms, self.max_cooldown_ms);
                if self
                    .word
                    .compare_exchange(word, pack(OPEN, now_ms), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.cooldown_ms.store(next, Ordering::Relaxed);
                    return Transition::Reopened { cooldown_ms: next };
                }
                Transition::None
            }
            OPEN => Transition::None, // stragglers sent before it opened do not extend the cooldown
            _ => {
                let slot = self.cursor.fetch_add(1, Ordering::AcqRel) % self.threshold;
                self.failures[slot].store(now_ms + 1, Ordering::Release);
                // The oldest of the last `threshold` failures decides.
                let oldest = self.failures[(slot + 1) % self.threshold].load(Ordering::Acquire);
                let full = self.failures.iter().all(|f| f.load(Ordering::Acquire) != 0);
                if full
                    && oldest != 0
                    && now_ms + 1 - oldest.min(now_ms + 1) <= self.window_ms
                    && self
                        .word
                        .compare_exchange(word, pack(OPEN, now_ms), Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                {
                    return Transition::Opened;
                }
                Transition::None
            }
        }
    }

    /// The probe ended without a verdict (throttled, cancelled): open again with the same cooldown.
    pub fn on_inconclusive(&self, now_ms: u64) {
        let word = self.word.load(Ordering::Acquire);
        if unpack(word).0 == HALF_OPEN {
            let _ = self
                .word
                .compare_exchange(word, pack(OPEN, now_ms), Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Opens the breaker at once (drift, wrong chain): not counted as a failed probe.
    pub fn force_open(&self, now_ms: u64) -> bool {
        let word = self.word.load(Ordering::Acquire);
        unpack(word).0 == CLOSED
            && self
                .word
                .compare_exchange(word, pack(OPEN, now_ms), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(&BreakerPolicy::default())
    }

    #[test]
    fn opens_after_exactly_threshold_failures_in_window() {
        let b = breaker();
        for i in 0..4 {
            assert_eq!(b.on_failure(1000 + i * 1000), Transition::None);
            assert!(b.is_closed());
        }
        assert_eq!(b.on_failure(5000), Transition::Opened);
        assert_eq!(b.state(5000), BreakerState::Open { retry_in_ms: 15_000 });
    }

    #[test]
    fn failures_spread_beyond_the_window_do_not_open() {
        let b = breaker();
        for i in 0..20 {
            assert_eq!(b.on_failure(i * 8_000), Transition::None, "failure {i}");
        }
        assert!(b.is_closed());
    }

    #[test]
    fn one_probe_after_cooldown_then_close_or_back_off() {
        let b = breaker();
        for i in 0..5 {
            b.on_failure(i);
        }
        assert!(!b.try_probe(10_000), "still cooling down");
        assert!(b.try_probe(15_004));
        assert!(!b.try_probe(15_005), "exactly one probe");
        assert_eq!(b.state(15_005), BreakerState::HalfOpen);
        assert_eq!(b.on_failure(15_100), Transition::Reopened { cooldown_ms: 30_000 });
        assert!(!b.try_probe(15_100 + 29_999));
        assert!(b.try_probe(15_100 + 30_000));
        assert_eq!(b.on_failure(50_000), Transition::Reopened { cooldown_ms: 60_000 });
        // Doubling stops at the maximum.
        let mut now = 50_000;
        for _ in 0..10 {
            now += b.cooldown_ms();
            assert!(b.try_probe(now));
            b.on_failure(now);
        }
        assert_eq!(b.cooldown_ms(), 300_000);
        now += 300_000;
        assert!(b.try_probe(now));
        assert_eq!(b.on_success(now + 1), Transition::Closed);
        assert!(b.is_closed());
        assert_eq!(b.cooldown_ms(), 15_000);
        // The window restarts empty after closing.
        for i in 0..4 {
            assert_eq!(b.on_failure(now + 2 + i), Transition::None);
        }
    }

    #[test]
    fn lost_probe_is_reclaimed_after_its_lease() {
        let b = breaker();
        for i in 0..5 {
            b.on_failure(i);
        }
        assert!(b.try_probe(20_000));
        assert!(!b.try_probe(20_000 + PROBE_LEASE_MS - 1));
        assert!(b.try_probe(20_000 + PROBE_LEASE_MS));
    }

    #[test]
    fn exactly_one_probe_across_threads() {
        let b = std::sync::Arc::new(breaker());
        for i in 0..5 {
            b.on_failure(i);
        }
        let winners: usize = (0..8)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..1000).filter(|_| b.try_probe(16_000)).count())
            })
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(winners, 1);
    }
}
