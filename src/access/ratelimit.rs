//! Per-key token bucket as GCRA in one atomic: exact across shards, no lock. One token per client call
//! (a batch of n costs n); retries inside Prism are never billed.

use std::sync::atomic::{AtomicU64, Ordering};

/// Generic cell rate algorithm state: the theoretical arrival time, in ns on the caller's clock.
pub struct Gcra {
    /// Nanoseconds per token.
    interval_ns: u64,
    /// How far ahead of now the TAT may run: `burst` tokens' worth.
    tolerance_ns: u64,
    tat: AtomicU64,
}

impl Gcra {
    /// `rate_per_s` tokens per second, up to `burst` at once.
    pub fn new(rate_per_s: f64, burst: u32) -> Self {
        let interval_ns = (1e9 / rate_per_s).max(1.0) as u64;
        Gcra {
            interval_ns,
            tolerance_ns: interval_ns * u64::from(burst.max(1)),
            tat: AtomicU64::new(0),
        }
    }

    /// Takes `cost` tokens at `now_ns` if available. `Err(wait_ns)` says how long until they would be.
    pub fn try_take(&self, now_ns: u64, cost: u64) -> Result<(), u64> {
        let need = self.interval_ns.saturating_mul(cost.max(1));
        let mut tat = self.tat.load(Ordering::Acquire);
        loop {
            let start = tat.max(now_ns);
            let new_tat = start + need;
            if new_tat > now_ns + self.tolerance_ns {
                return Err(new_tat - now_ns - self.tolerance_ns);
            }
            match self
                .tat
                .compare_exchange_weak(tat, new_tat, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(()),
                Err(current) => tat = current,
            }
        }
    }
}

/// A limit shared by several Prism nodes: tokens leased from Redis in chunks (by the cluster thread) are
/// spent here with one atomic; while Redis is unreachable the node falls back to its share of the limit.
pub struct SharedBucket {
    /// Leasing works: spend `stock`.
    pub active: std::sync::atomic::AtomicBool,
    /// Tokens leased and not yet spent.
    pub stock: std::sync::atomic::AtomicI64,
    /// This node's share of the limit, for when Redis is away.
    pub fallback: arc_swap::ArcSwap<Gcra>,
    pub rate_per_s: f64,
    pub burst: u32,
}

/// How long a client is told to wait when the node's leased tokens run out.
const LEASE_RETRY_NS: u64 = 100_000_000;

impl SharedBucket {
    pub fn new(rate_per_s: f64, burst: u32, nodes: u32) -> Self {
        SharedBucket {
            active: std::sync::atomic::AtomicBool::new(false),
            stock: std::sync::atomic::AtomicI64::new(0),
            fallback: arc_swap::ArcSwap::from_pointee(Self::share(rate_per_s, burst, nodes)),
            rate_per_s,
            burst,
        }
    }

    fn share(rate: f64, burst: u32, nodes: u32) -> Gcra {
        let n = nodes.max(1);
        Gcra::new(rate / f64::from(n), burst.div_ceil(n).max(1))
    }

    /// Re-sizes the fallback share when the number of live nodes changes.
    pub fn set_nodes(&self, nodes: u32) {
        self.fallback
            .store(std::sync::Arc::new(Self::share(self.rate_per_s, self.burst, nodes)));
    }

    pub fn try_take(&self, now_ns: u64, cost: u64) -> Result<(), u64> {
        use std::sync::atomic::Ordering;
        if !self.active.load(Ordering::Acquire) {
            return self.fallback.load().try_take(now_ns, cost);
        }
        let cost = cost as i64;
        if self.stock.fetch_sub(cost, Ordering::AcqRel) >= cost {
            Ok(())
        } else {
            self.stock.fetch_add(cost, Ordering::AcqRel);
            Err(LEASE_RETRY_NS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let g = Gcra::new(10.0, 5);
        let t0 = 1_000_000_000;
        for _ in 0..5 {
            assert!(g.try_take(t0, 1).is_ok());
        }
        let wait = g.try_take(t0, 1).unwrap_err();
        assert_eq!(wait, 100_000_000);
        assert!(g.try_take(t0 + 100_000_000, 1).is_ok());
        assert!(g.try_take(t0 + 100_000_000, 1).is_err());
        // One more every 100 ms: at +200 ms, +300 ms, ... +1000 ms.
        let ok = (0..1000)
            .filter(|i| g.try_take(t0 + 100_000_000 + i * 1_000_000, 1).is_ok())
            .count();
        assert_eq!(ok, 9);
        assert!(
            g.try_take(t0 + 10_000_000_000, 6).is_err(),
            "a batch larger than the burst never fits"
        );
        assert!(g.try_take(t0 + 10_000_000_000, 5).is_ok());
    }

    #[test]
    fn shared_bucket_spends_leases_and_falls_back_to_its_share() {
        use std::sync::atomic::Ordering;
        let b = SharedBucket::new(100.0, 100, 4);
        // Fallback: a quarter of the burst.
        let ok = (0..100).filter(|_| b.try_take(1_000_000_000, 1).is_ok()).count();
        assert_eq!(ok, 25);
        b.active.store(true, Ordering::Release);
        b.stock.store(10, Ordering::Release);
        let ok = (0..100).filter(|_| b.try_take(2_000_000_000, 1).is_ok()).count();
        assert_eq!(ok, 10);
        assert_eq!(
            b.stock.load(Ordering::Acquire),
            0,
            "refused takes give their tokens back"
        );
        assert!(b.try_take(2_000_000_000, 3).is_err());
    }

    #[test]
    fn exact_across_threads() {
        let g = std::sync::Arc::new(Gcra::new(1.0, 100));
        let ok: usize = (0..4)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || (0..1000).filter(|_| g.try_take(5_000_000_000, 1).is_ok()).count())
            })
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(ok, 100);
    }
}
