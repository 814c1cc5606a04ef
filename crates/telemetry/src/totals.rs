//! Node-wide rates for the status page: requests per second, cache hit and dedupe join rates, rate-limit
//! refusals per key. Derived from the shards' counters, which the aggregator samples once per history
//! point, so a rate is over the last closed interval (10 s) and needs no counters of its own.

use super::history::{Ring, POINTS};
use super::metrics::Counters;

/// One key's requests and rate-limit refusals: since start and in the last interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KeyTotals {
    pub requests: u64,
    pub throttled: u64,
    pub throttled_last: u64,
}

/// What the page shows under "Totals". Rates are `None` until two samples exist (or when nothing they
/// divide by happened in the interval).
#[derive(Debug, Clone)]
pub struct Totals {
    /// Span of the last interval, ms (0 before the second sample).
    pub interval_ms: u64,
    pub rps: Option<f64>,
    /// Hits over cacheable calls (hits + misses) in the interval.
    pub cache_hit_rate: Option<f64>,
    /// Joined calls over all calls answered in the interval.
    pub join_rate: Option<f64>,
    /// Hedges sent over all calls answered in the interval (the extra upstream calls hedging cost).
    pub hedge_rate: Option<f64>,
    /// Index 0 = requests without a key, then the configured keys in order.
    pub keys: Vec<KeyTotals>,
    /// Requests per second, one per interval, oldest first.
    pub rps_points: Ring<f64>,
    last: Option<(u64, Counters)>,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            interval_ms: 0,
            rps: None,
            cache_hit_rate: None,
            join_rate: None,
            hedge_rate: None,
            keys: Vec::new(),
            rps_points: Ring::new(POINTS),
            last: None,
        }
    }
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

impl Totals {
    /// Takes the counters as they are at `now_ms`; rates are over the span since the previous sample.
    pub fn sample(&mut self, now_ms: u64, c: Counters) {
        self.keys = c
            .key_requests
            .iter()
            .zip(&c.key_throttled)
            .map(|(&requests, &throttled)| KeyTotals {
                requests,
                throttled,
                throttled_last: 0,
            })
            .collect();
        if let Some((then, prev)) = &self.last {
            let span = now_ms.saturating_sub(*then).max(1);
            let d = |a: u64, b: u64| a.saturating_sub(b);
            let calls = d(c.calls, prev.calls);
            let hits = d(c.cache_hits, prev.cache_hits);
            let rps = calls as f64 * 1000.0 / span as f64;
            self.interval_ms = span;
            self.rps = Some(rps);
            self.cache_hit_rate = ratio(hits, hits + d(c.cache_misses, prev.cache_misses));
            self.join_rate = ratio(d(c.dedupe_joins, prev.dedupe_joins), calls);
            self.hedge_rate = ratio(d(c.hedges, prev.hedges), calls);
            for (k, t) in self.keys.iter_mut().enumerate() {
                t.throttled_last = d(t.throttled, prev.key_throttled.get(k).copied().unwrap_or(0));
            }
            self.rps_points.push(rps);
        }
        self.last = Some((now_ms, c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(calls: u64, hits: u64, misses: u64, joins: u64, throttled: u64) -> Counters {
        Counters {
            calls,
            cache_hits: hits,
            cache_misses: misses,
            dedupe_joins: joins,
            hedges: joins / 5,
            key_requests: vec![calls, calls],
            key_throttled: vec![0, throttled],
        }
    }

    #[test]
    fn rates_are_over_the_last_interval_only() {
        let mut t = Totals::default();
        t.sample(1_000, counters(500, 10, 10, 5, 3));
        assert_eq!(t.rps, None, "one sample is no rate");
        t.sample(11_000, counters(1_500, 40, 40, 105, 10));
        assert_eq!(t.interval_ms, 10_000);
        assert!((t.rps.unwrap() - 100.0).abs() < 1e-9);
        assert!(
            (t.cache_hit_rate.unwrap() - 0.5).abs() < 1e-9,
            "30 hits of 60 cacheable"
        );
        assert!((t.join_rate.unwrap() - 0.1).abs() < 1e-9, "100 joins of 1000 calls");
        assert_eq!(
            t.keys[1],
            KeyTotals {
                requests: 1_500,
                throttled: 10,
                throttled_last: 7
            }
        );
        // A quiet interval: zero rate, and no ratio to show rather than a made-up one.
        t.sample(21_000, counters(1_500, 40, 40, 105, 10));
        assert_eq!(t.rps, Some(0.0));
        assert_eq!((t.cache_hit_rate, t.join_rate), (None, None));
        assert_eq!(t.rps_points.iter().copied().collect::<Vec<_>>(), [100.0, 0.0]);
    }
}
