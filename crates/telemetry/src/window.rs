//! Sliding windows over time buckets: latency (hdrhistogram) and outcome counts for the 5-minute rolling
//! figures, and a short rate window for quota burn. Time is a parameter.

use hdrhistogram::Histogram;

use super::history::Point;
use super::snapshot::Figures;

/// Latency samples are microseconds from 1 µs to 10 minutes at 2 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 2).expect("valid histogram bounds")
}

/// What a shard accumulated for one provider and family since its last flush.
#[derive(Debug, Clone)]
pub struct Sample {
    pub latency_us: Histogram<u64>,
    pub calls: u64,
    pub failures: u64,
    pub throttled: u64,
    /// Of `calls`, those that were Prism's own health probes (not client traffic).
    pub probes: u64,
}

impl Default for Sample {
    fn default() -> Self {
        Sample {
            latency_us: new_histogram(),
            calls: 0,
            failures: 0,
            throttled: 0,
            probes: 0,
        }
    }
}

impl Sample {
    pub fn record(&mut self, latency_us: u64, failed: bool, throttled: bool, probe: bool) {
        let _ = self.latency_us.record(latency_us.clamp(1, 600_000_000));
        self.calls += 1;
        self.probes += u64::from(probe);
        self.failures += u64::from(failed);
        self.throttled += u64::from(throttled);
    }

    pub fn is_empty(&self) -> bool {
        self.calls == 0
    }
}

struct Bucket {
    start_ms: u64,
    sample: Sample,
}

/// A window of `buckets` buckets of `bucket_ms` each. A running total avoids merging on every read:
/// samples are added to it on arrival and subtracted when their bucket expires.
pub struct Window {
    bucket_ms: u64,
    buckets: Vec<Bucket>,
    total: Sample,
}

impl Window {
    pub fn new(span_ms: u64, buckets: usize) -> Self {
        let buckets = buckets.max(1);
        Window {
            bucket_ms: (span_ms / buckets as u64).max(1),
            buckets: (0..buckets)
                .map(|_| Bucket {
                    start_ms: 0,
                    sample: Sample::default(),
                })
                .collect(),
            total: Sample::default(),
        }
    }

    /// The default rolling window: 5 minutes in 10 buckets of 30 s.
    pub fn five_minutes() -> Self {
        Self::new(300_000, 10)
    }

    fn expire(&mut self, now_ms: u64) {
        let span = self.bucket_ms * self.buckets.len() as u64;
        for b in &mut self.buckets {
            if b.sample.calls > 0 && now_ms >= b.start_ms + span {
                let _ = self.total.latency_us.subtract(&b.sample.latency_us);
                self.total.calls -= b.sample.calls;
                self.total.failures -= b.sample.failures;
                self.total.throttled -= b.sample.throttled;
                self.total.probes -= b.sample.probes;
                b.sample = Sample::default();
            }
        }
    }

    pub fn add(&mut self, now_ms: u64, s: &Sample) {
        self.expire(now_ms);
        let start = now_ms - now_ms % self.bucket_ms;
        let idx = ((now_ms / self.bucket_ms) % self.buckets.len() as u64) as usize;
        let b = &mut self.buckets[idx];
        if b.start_ms != start {
            if b.sample.calls > 0 {
                let _ = self.total.latency_us.subtract(&b.sample.latency_us);
                self.total.calls -= b.sample.calls;
                self.total.failures -= b.sample.failures;
                self.total.throttled -= b.sample.throttled;
                self.total.probes -= b.sample.probes;
            }
            b.start_ms = start;
            b.sample = Sample::default();
        }
        let _ = b.sample.latency_us.add(&s.latency_us);
        b.sample.calls += s.calls;
        b.sample.failures += s.failures;
        b.sample.throttled += s.throttled;
        b.sample.probes += s.probes;
        let _ = self.total.latency_us.add(&s.latency_us);
        self.total.calls += s.calls;
        self.total.failures += s.failures;
        self.total.throttled += s.throttled;
        self.total.probes += s.probes;
    }

    pub fn figures(&mut self, now_ms: u64) -> Figures {
        self.expire(now_ms);
        let h = &self.total.latency_us;
        let (p50, p95, p99) = if h.is_empty() {
            (0, 0, 0)
        } else {
            (
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.95),
                h.value_at_quantile(0.99),
            )
        };
        Figures {
            p50_us: p50,
            p95_us: p95,
            p99_us: p99,
            calls: self.total.calls,
            failures: self.total.failures,
            probes: self.total.probes,
        }
    }

    pub fn throttled(&self) -> u64 {
        self.total.throttled
    }

    /// Calls per second over the whole window span.
    pub fn rate(&mut self, now_ms: u64) -> f64 {
        self.expire(now_ms);
        let span_s = (self.bucket_ms * self.buckets.len() as u64) as f64 / 1000.0;
        self.total.calls as f64 / span_s
    }
}

/// Accumulates one provider's samples between two status-page points (`telemetry::history`).
#[derive(Debug, Default)]
pub struct Interval {
    sample: Sample,
}

impl Interval {
    pub fn add(&mut self, s: &Sample) {
        let _ = self.sample.latency_us.add(&s.latency_us);
        self.sample.calls += s.calls;
        self.sample.failures += s.failures;
        self.sample.probes += s.probes;
    }

    /// Closes the interval into a point (share filled in by the caller, who knows the network's total).
    pub fn close(&mut self, at_ms: u64) -> Point {
        let s = std::mem::take(&mut self.sample);
        let h = &s.latency_us;
        let (p50_us, p99_us) = if h.is_empty() {
            (0, 0)
        } else {
            (h.value_at_quantile(0.5), h.value_at_quantile(0.99))
        };
        Point {
            at_ms,
            p50_us,
            p99_us,
            calls: s.calls,
            failures: s.failures,
            probes: s.probes,
            share: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(latency_us: u64, n: u64, failures: u64) -> Sample {
        let mut s = Sample::default();
        for i in 0..n {
            s.record(latency_us, i < failures, false, false);
        }
        s
    }

    #[test]
    fn rolls_over_and_forgets() {
        let mut w = Window::five_minutes();
        w.add(1_000, &sample(1_000, 100, 10));
        w.add(40_000, &sample(50_000, 100, 0));
        let f = w.figures(40_000);
        assert_eq!((f.calls, f.failures), (200, 10));
        assert!((990..=1010).contains(&f.p50_us), "{f:?}");
        assert!(f.p99_us >= 49_000, "{f:?}");
        // Five minutes after the first bucket, only the second remains.
        let f = w.figures(301_000);
        assert_eq!((f.calls, f.failures), (100, 0));
        assert!(f.p50_us >= 49_000);
        let f = w.figures(400_000);
        assert_eq!(f.calls, 0);
        assert_eq!(f.p50_us, 0);
    }

    #[test]
    fn an_interval_closes_into_its_own_calls_and_latency_then_starts_empty() {
        let mut iv = Interval::default();
        iv.add(&sample(2_000, 20, 10));
        iv.add(&sample(2_000, 10, 5));
        let p = iv.close(10_000);
        assert_eq!((p.at_ms, p.calls, p.failures), (10_000, 30, 15));
        assert!(
            (1_990..=2_010).contains(&p.p50_us) && (1_990..=2_010).contains(&p.p99_us),
            "{p:?}"
        );
        assert_eq!(
            iv.close(20_000),
            Point {
                at_ms: 20_000,
                ..Point::default()
            }
        );
    }

    #[test]
    fn rate_over_a_short_window() {
        let mut w = Window::new(5_000, 5);
        for t in 0..5 {
            w.add(t * 1000 + 10, &sample(10, 100, 0));
        }
        assert!((w.rate(4_500) - 100.0).abs() < 1e-9);
    }
}
