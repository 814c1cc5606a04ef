//! In-flight awareness: what this shard's own calls say about a provider before their answers come back.
//!
//! Routing's health snapshot learns only from answers, and a provider that stalls sends none: every read
//! routed there in the meantime waits. So, per provider and latency family, each shard keeps (`Flight`):
//! the calls it has in flight there (count and the sum of their start times, so their mean age is known
//! without a list) and a peak-EWMA of its answers' latency (a slower answer takes over at once, faster ones
//! pull it down gradually, and it decays with time), as Finagle's and linkerd's balancers do. Before each
//! attempt the route reads them into a [`Pressure`]: a provider's cost is the latency it looks to have now —
//! its usual p50, or the age of its calls in flight or its recent peak when either is well above that —
//! times its calls in flight plus one. A provider whose calls stopped answering is left the moment its
//! oldest call is older than what the others take, not when its slow answers finally arrive; an idle one
//! wins a tie against a busy one. Only the score strategy ranks by cost; every strategy leaves a provider
//! whose calls are far older than its p50 for the last tier (`route::NetworkRoute::pressure`).

use std::cell::Cell;

use prism_wire::rpc::ProviderId;

/// Half-life of the recent peak latency: a provider left after a slow answer is tried again by a real read
/// once its peak has decayed to near its usual latency (about 8 s after a 400 ms answer from a 1 ms
/// provider), and that read's own age keeps the others away while it is out.
const PEAK_HALF_LIFE_MS: f64 = 1_000.0;

/// The age of calls in flight, or a recent peak, counts only when it is this many times the provider's
/// usual latency and at least [`SLOW_FLOOR_US`]: an answer a little slower than the median is noise.
pub const SLOW_FACTOR: f64 = 2.0;
pub const SLOW_FLOOR_US: f64 = 5_000.0;

/// One provider's calls of one family from one shard: those in flight, and the latency of recent answers.
#[derive(Debug, Default)]
pub struct Flight {
    count: Cell<u32>,
    started_sum_ms: Cell<u64>,
    peak_us: Cell<f64>,
    peak_at_ms: Cell<u64>,
}

impl Flight {
    /// Calls in flight.
    pub fn count(&self) -> u32 {
        self.count.get()
    }

    /// The mean age of the calls in flight (ms), 0 when there are none.
    pub fn mean_age_ms(&self, now_ms: u64) -> f64 {
        self.started_sum_ms
            .get()
            .checked_div(self.count.get() as u64)
            .map_or(0.0, |started| now_ms.saturating_sub(started) as f64)
    }

    /// The peak-EWMA latency (µs) as of `now_ms`: halved every [`PEAK_HALF_LIFE_MS`] since it was last fed.
    pub fn peak_us(&self, now_ms: u64) -> f64 {
        let raw = self.peak_us.get();
        if raw == 0.0 {
            return 0.0;
        }
        raw * halvings(now_ms.saturating_sub(self.peak_at_ms.get()) as f64 / PEAK_HALF_LIFE_MS)
    }

    /// The undecayed peak: bounds [`Flight::peak_us`], so a caller can skip the decay when this is small.
    pub fn peak_bound_us(&self) -> f64 {
        self.peak_us.get()
    }

    /// Feeds one client call's latency (probes stay out: one slow health method must not push a provider's
    /// client traffic away).
    pub fn observe(&self, latency_us: u64, now_ms: u64) {
        let x = latency_us as f64;
        // Peak: a slower answer takes over at once (no decay to work out: the undecayed peak bounds it);
        // faster ones pull the decayed peak down gradually.
        let next = if x >= self.peak_us.get() {
            x
        } else {
            let decayed = self.peak_us(now_ms);
            if x >= decayed {
                x
            } else {
                decayed * 0.7 + x * 0.3
            }
        };
        self.peak_us.set(next);
        self.peak_at_ms.set(now_ms);
    }
}

impl Default for Pressure {
    fn default() -> Self {
        Pressure::NONE
    }
}

/// `2^-t` for `t >= 0`, within 0.3 %: the whole halvings through the exponent bits, the fraction by a
/// quadratic. The request path reads a decayed peak for every busy provider, and `exp2` cost more than
/// the rest of it.
fn halvings(t: f64) -> f64 {
    if t.is_nan() || t >= 1000.0 {
        return 0.0;
    }
    let n = t as u64;
    let f = t - n as f64;
    let whole = f64::from_bits((1023 - n) << 52);
    whole * (1.0 - 0.6699 * f + 0.1699 * f * f)
}

/// Counts one call in flight for as long (also when the client goes away and the call's future
/// is dropped, or a hedge won and the slower attempt is dropped).
pub struct FlightGuard<'a> {
    flight: &'a Flight,
    started_ms: u64,
}

impl<'a> FlightGuard<'a> {
    pub fn new(flight: &'a Flight, now_ms: u64) -> Self {
        flight.count.set(flight.count.get() + 1);
        flight.started_sum_ms.set(flight.started_sum_ms.get() + now_ms);
        FlightGuard {
            flight,
            started_ms: now_ms,
        }
    }
}

impl Drop for FlightGuard<'_> {
    fn drop(&mut self) {
        self.flight.count.set(self.flight.count.get() - 1);
        self.flight
            .started_sum_ms
            .set(self.flight.started_sum_ms.get() - self.started_ms);
    }
}

/// What this shard's calls in flight say about each provider, for one score decision: each busy provider's
/// calls in flight and how slow it looks now. Entries outside `busy` are not read, so a `Pressure` is
/// filled in place without clearing.
#[derive(Debug, Clone, Copy)]
pub struct Pressure {
    /// Providers with calls in flight or a recent peak worth reading (`pending` and `slow_us` are set).
    pub busy: u64,
    pending: [u16; ProviderId::MAX],
    slow_us: [f32; ProviderId::MAX],
}

impl Pressure {
    /// Nothing in flight anywhere (tests, and decisions made outside a call).
    pub const NONE: Pressure = Pressure {
        busy: 0,
        pending: [0; ProviderId::MAX],
        slow_us: [0.0; ProviderId::MAX],
    };

    /// Starts a new reading: no provider busy.
    pub fn clear(&mut self) {
        self.busy = 0;
    }

    /// Records provider `i`'s calls in flight and how slow it looks (µs).
    pub fn set(&mut self, i: ProviderId, pending: u32, slow_us: f64) {
        self.busy |= i.bit();
        self.pending[i.index()] = pending.min(u16::MAX as u32) as u16;
        self.slow_us[i.index()] = slow_us as f32;
    }

    /// What sending one more call to `i` looks like it will cost, against `usual_us` (its p50 for the
    /// family): the latency it shows now (the usual one, or an age or peak well above it) times its calls
    /// in flight plus one.
    pub fn cost(&self, i: ProviderId, usual_us: f64) -> f64 {
        if !i.is_in(self.busy) {
            return usual_us;
        }
        let slow = self.slow_us[i.index()] as f64;
        let now = if slow >= (SLOW_FACTOR * usual_us).max(SLOW_FLOOR_US) {
            slow
        } else {
            usual_us
        };
        now * (self.pending[i.index()] as f64 + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_jumps_on_a_slow_answer_and_decays_with_time() {
        let f = Flight::default();
        for t in 0..50 {
            f.observe(2_000, t * 100);
        }
        assert!(f.peak_us(5_000) < 3_000.0);
        f.observe(1_200_000, 5_000);
        assert!(f.peak_us(5_000) >= 1_199_000.0);
        assert!(f.peak_us(7_000) < 310_000.0, "halved every second");
        // Fast answers pull it down.
        for t in 0..20 {
            f.observe(2_000, 5_000 + t);
        }
        assert!(f.peak_us(5_020) < SLOW_FLOOR_US);
    }

    #[test]
    fn halvings_are_close_to_exp2() {
        for i in 0..4000 {
            let t = i as f64 / 100.0;
            let (got, want) = (halvings(t), (-t).exp2());
            assert!((got - want).abs() <= want * 0.003, "{t}: {got} vs {want}");
        }
        assert_eq!(halvings(1e9), 0.0);
        assert_eq!(halvings(f64::NAN), 0.0);
    }

    #[test]
    fn calls_in_flight_age_until_dropped() {
        let f = Flight::default();
        assert_eq!(f.mean_age_ms(100), 0.0);
        let a = FlightGuard::new(&f, 100);
        let b = FlightGuard::new(&f, 300);
        assert_eq!((f.count(), f.mean_age_ms(500)), (2, 300.0));
        drop(a);
        assert_eq!((f.count(), f.mean_age_ms(500)), (1, 200.0));
        drop(b);
        assert_eq!((f.count(), f.mean_age_ms(500)), (0, 0.0));
    }

    #[test]
    fn cost_counts_calls_in_flight_and_an_age_well_above_usual() {
        let mut p = Pressure::NONE;
        let (a, b) = (ProviderId::new(0), ProviderId::new(1));
        assert_eq!(p.cost(a, 1_000.0), 1_000.0, "idle: its usual latency");
        p.set(a, 1, 300.0);
        assert_eq!(p.cost(a, 1_000.0), 2_000.0, "one call in flight, young: twice");
        p.set(a, 1, 40_000.0);
        assert_eq!(p.cost(a, 1_000.0), 80_000.0, "a call 40 ms old at a 1 ms provider");
        p.set(b, 0, 3_000.0);
        assert_eq!(p.cost(b, 1_000.0), 1_000.0, "3 ms is noise under the 5 ms floor");
        p.set(b, 0, 120_000.0);
        assert_eq!(p.cost(b, 100_000.0), 100_000.0, "within twice its usual");
        p.clear();
        assert_eq!(p.cost(a, 1_000.0), 1_000.0, "cleared");
    }
}
