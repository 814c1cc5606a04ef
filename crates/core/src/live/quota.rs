//! Scarce provider quota, in the units the provider bills, shared fairly between keys.
//!
//! - **Credit units.** A provider may carry a price table (`credits = { default = 1, methods = {...} }`):
//!   each attempt there costs its method's credits, and its `quota_rps` is then credits per second. Its
//!   `quota_burn` in the score is the credits it was sent per second (this module's rate, measured every
//!   tick) over that quota, its leased share of a cluster-wide quota is spent in credits, and
//!   `prism_credits_total{key,provider}` counts what each key cost there.
//! - **Fair shares** (`[policy.fair_share] enabled = true`). When a provider's quota is the bottleneck, the
//!   keys sending to it get weighted max-min fair shares of it (`quota_weight` per key): every tick
//!   ([`TICK_MS`]) the aggregator thread measures each key's demand there (credits asked, sent or not), fills
//!   the quota like water (a key asking less than its weighted level gets all it asks and a quarter more,
//!   `HEADROOM`; the others split the rest by weight), and refills each key's stock with its share. Quota
//!   no key asks for, and what full stocks turn away, refills a spare stock any key may use, so an
//!   unsaturated provider refuses nobody and the headroom costs the other keys nothing. A key whose stock and the spare are
//!   empty is over its share: routing sends it to other providers first, and when only that provider is
//!   left its call is refused (`-32005`, HTTP 429 with `Retry-After` for a single call) without being sent.
//!   With `[cluster]`, nodes publish their keys' demands through Redis and fill the quota with everyone's
//!   (`cluster::Sync`), each node keeping its part of each key's share.
//!
//! Every number a shard touches is an atomic; the tick's own state stays on the aggregator thread.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use prism_config::Config;
use prism_wire::rpc::ProviderId;

/// How often shares are computed and stocks refilled.
pub const TICK_MS: u64 = 100;
/// A stock holds at most this many seconds of its share: providers meter quota per second.
const BURST_S: f64 = 1.0;
/// Weight of the newest tick in a demand's moving average.
const DEMAND_WEIGHT: f64 = 0.3;
/// Each key's demand counts this much larger when shares are filled: the estimate is a moving average of a
/// jittery rate, and a key sending steadily under its fair share must not be refused because the average dipped
/// below what it sends. What a key then leaves unused overflows its stock into the spare, so the headroom
/// costs the others nothing.
const HEADROOM: f64 = 1.25;
/// A key whose demand fell below this many credits per second takes no share.
const ACTIVE: f64 = 0.05;
/// A peer's claimed demand is bounded to this many times the provider's whole quota.
pub const PEER_DEMAND_BOUND: f64 = 10.0;

/// What one call costs at a provider, in its credits.
#[derive(Debug, Clone, Default)]
pub struct CreditTable {
    default: u32,
    methods: ahash::AHashMap<Box<str>, u32>,
}

impl CreditTable {
    pub fn new(c: &prism_config::Credits) -> CreditTable {
        CreditTable {
            default: c.default,
            methods: c.methods.iter().map(|(m, v)| (m.as_str().into(), *v)).collect(),
        }
    }

    pub fn cost(&self, method: &str) -> u32 {
        self.methods.get(method).copied().unwrap_or(self.default)
    }
}

/// One network's quota state, shared by every shard (in `NetworkLive`).
pub struct QuotaLive {
    fair: AtomicBool,
    providers: Box<[ProviderQuota]>,
    /// Each key slot's `quota_weight`, in thousandths (slot 0: calls without a key).
    weights: Box<[AtomicU32]>,
    last_tick_ms: AtomicU64,
}

/// One provider's quota.
#[derive(Default)]
pub struct ProviderQuota {
    /// `quota_rps` in thousandths of a credit (a call, without a price table) per second; 0 = none.
    limit_milli: AtomicU64,
    /// It has a price table: its burn is this module's rate, not the calls the health windows count.
    priced: AtomicBool,
    /// Credits sent here since the last tick, and the rate the ticks measured (thousandths per second).
    used: AtomicU64,
    rate_milli: AtomicU64,
    shares: OnceLock<KeyShares>,
}

/// The keys' shares of one provider's quota.
pub struct KeyShares {
    /// Credits each key asked here since the last tick (sent or refused).
    demand: Box<[AtomicU64]>,
    /// What each key may still spend here, in thousandths of a credit (may go below zero: a call is let
    /// through while any stock is left, and its cost repaid by the next refills).
    stock: Box<[AtomicI64]>,
    /// Each key's share as of the last tick, thousandths of a credit per second (for `Retry-After`).
    share: Box<[AtomicU64]>,
    /// Quota no key's share took: any key may spend it.
    spare: AtomicI64,
    /// Peers' demand per key (thousandths per second, bounded), and until when it holds.
    peer: Box<[AtomicU64]>,
    peer_until_ms: AtomicU64,
    /// The tick's own moving average of each key's demand here (credits per second, `f64` bits): written by
    /// the tick alone, read by the cluster thread for its peers.
    ewma: Box<[AtomicU64]>,
}

/// Why a call may not go to a provider now: over its key's share, and when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverShare {
    pub retry_after_ms: u64,
}

impl QuotaLive {
    /// `key_slots`: every key index a reload may give out, plus slot 0.
    pub fn new(key_slots: usize) -> QuotaLive {
        QuotaLive {
            fair: AtomicBool::new(false),
            providers: (0..ProviderId::MAX).map(|_| ProviderQuota::default()).collect(),
            weights: (0..key_slots).map(|_| AtomicU32::new(1000)).collect(),
            last_tick_ms: AtomicU64::new(0),
        }
    }

    /// Takes network `n` of `config` (at start and after each reload): quotas, price tables, key weights,
    /// whether shares are on.
    pub fn configure(&self, config: &Config, n: usize, keys: &[(usize, f64)]) {
        self.fair.store(config.policy.fair_share.enabled, Ordering::Release);
        for (p, c) in self.providers.iter().zip(&config.networks[n].providers) {
            let limit = if c.retired {
                0
            } else {
                c.quota_rps.map_or(0, |q| u64::from(q) * 1000)
            };
            p.limit_milli.store(limit, Ordering::Release);
            p.priced.store(c.credits.is_some(), Ordering::Release);
        }
        for w in self.weights.iter() {
            w.store(1000, Ordering::Relaxed);
        }
        for &(k, weight) in keys {
            if let Some(w) = self.weights.get(k) {
                w.store(
                    (weight * 1000.0).round().clamp(1.0, u32::MAX as f64) as u32,
                    Ordering::Release,
                );
            }
        }
    }

    /// Whether fair shares are on (one load: the request path asks nothing more when they are off).
    #[inline]
    pub fn fair_on(&self) -> bool {
        self.fair.load(Ordering::Relaxed)
    }

    /// Provider `p`'s key shares, when shares are on and it has a quota (and a tick has run).
    #[inline]
    pub fn shares(&self, p: ProviderId) -> Option<&KeyShares> {
        if !self.fair_on() {
            return None;
        }
        let q = self.providers.get(p.index())?;
        if q.limit_milli.load(Ordering::Relaxed) == 0 {
            return None;
        }
        q.shares.get()
    }

    /// Counts `credits` sent to `p` (for its measured rate), when it has a quota.
    pub fn spent(&self, p: ProviderId, credits: u32) {
        if let Some(q) = self.providers.get(p.index()) {
            if q.limit_milli.load(Ordering::Relaxed) > 0 {
                q.used.fetch_add(u64::from(credits), Ordering::Relaxed);
            }
        }
    }

    /// `p`'s quota burn from the credits it was sent, when it has a price table and a quota: `None`
    /// otherwise (the health windows' call rate applies).
    pub fn priced_burn(&self, p: ProviderId) -> Option<f64> {
        let q = self.providers.get(p.index())?;
        let limit = q.limit_milli.load(Ordering::Relaxed);
        (limit > 0 && q.priced.load(Ordering::Relaxed))
            .then(|| q.rate_milli.load(Ordering::Relaxed) as f64 / limit as f64)
    }

    /// The credits per second `p` was sent over the last ticks (for `/status` and tests).
    pub fn rate(&self, p: ProviderId) -> f64 {
        self.providers
            .get(p.index())
            .map_or(0.0, |q| q.rate_milli.load(Ordering::Relaxed) as f64 / 1000.0)
    }

    /// Peers' demand for `p` per key (credits per second), valid until `until_ms`. Values are bounded by
    /// [`PEER_DEMAND_BOUND`] times the quota; returns how many were cut to it.
    pub fn set_peer_demand(&self, p: ProviderId, demand: &[(usize, f64)], until_ms: u64) -> usize {
        let Some(q) = self.providers.get(p.index()) else {
            return 0;
        };
        let Some(s) = q.shares.get() else { return 0 };
        let bound = q.limit_milli.load(Ordering::Relaxed) as f64 * PEER_DEMAND_BOUND;
        for d in s.peer.iter() {
            d.store(0, Ordering::Relaxed);
        }
        let mut cut = 0;
        for &(k, credits) in demand {
            let Some(slot) = s.peer.get(k) else { continue };
            let milli = (credits.max(0.0) * 1000.0).min(bound);
            if milli < credits * 1000.0 {
                cut += 1;
            }
            slot.store(milli as u64, Ordering::Relaxed);
        }
        s.peer_until_ms.store(until_ms, Ordering::Release);
        cut
    }

    /// This node's demand for `p` per key with any (credits per second), for its peers.
    pub fn local_demand(&self, p: ProviderId) -> Vec<(usize, f64)> {
        let Some(s) = self.providers.get(p.index()).and_then(|q| q.shares.get()) else {
            return Vec::new();
        };
        s.ewma
            .iter()
            .map(|d| f64::from_bits(d.load(Ordering::Relaxed)))
            .enumerate()
            .filter(|&(_, d)| d >= ACTIVE)
            .collect()
    }

    /// One tick (the aggregator thread, every [`TICK_MS`] or so): measures rates and demands, fills each
    /// quota with the keys' weighted shares and refills their stocks for the time since the last tick.
    pub fn tick(&self, now_ms: u64) {
        let last = self.last_tick_ms.load(Ordering::Acquire);
        if last != 0 && now_ms < last + TICK_MS {
            return;
        }
        self.last_tick_ms.store(now_ms, Ordering::Release);
        // The first tick only makes the tables; demands are measured from then on.
        let elapsed = if last == 0 {
            0.0
        } else {
            ((now_ms - last) as f64 / 1000.0).min(1.0)
        };
        let fair = self.fair_on();
        for q in self.providers.iter() {
            let limit = q.limit_milli.load(Ordering::Relaxed) as f64 / 1000.0;
            if limit == 0.0 {
                q.used.store(0, Ordering::Relaxed);
                continue;
            }
            if fair {
                // A new table starts with a full spare: nobody is refused before demands are known.
                let s = q
                    .shares
                    .get_or_init(|| KeyShares::new(self.weights.len(), (limit * BURST_S * 1000.0) as i64));
                if elapsed > 0.0 {
                    s.tick(limit, &self.weights, elapsed, now_ms);
                }
            }
            if elapsed == 0.0 {
                continue;
            }
            let used = q.used.swap(0, Ordering::Relaxed) as f64 / elapsed;
            let rate = q.rate_milli.load(Ordering::Relaxed) as f64 / 1000.0;
            q.rate_milli.store(
                ((rate * (1.0 - DEMAND_WEIGHT) + used * DEMAND_WEIGHT) * 1000.0) as u64,
                Ordering::Relaxed,
            );
        }
    }
}

impl KeyShares {
    fn new(slots: usize, spare: i64) -> KeyShares {
        KeyShares {
            demand: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            stock: (0..slots).map(|_| AtomicI64::new(0)).collect(),
            share: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            spare: AtomicI64::new(spare),
            peer: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            peer_until_ms: AtomicU64::new(0),
            ewma: (0..slots).map(|_| AtomicU64::new(0f64.to_bits())).collect(),
        }
    }

    /// Whether key `k` may be sent here now (its stock, or the spare, has something left).
    #[inline]
    pub fn has_room(&self, k: usize) -> bool {
        self.stock.get(k).is_some_and(|s| s.load(Ordering::Relaxed) > 0) || self.spare.load(Ordering::Relaxed) > 0
    }

    /// Key `k` asks to send a call costing `credits` here: counted as demand, and let through while its
    /// stock (or else the spare) has anything left.
    pub fn take(&self, k: usize, credits: u32) -> Result<(), OverShare> {
        let Some(stock) = self.stock.get(k) else {
            return Ok(());
        };
        self.demand[k].fetch_add(u64::from(credits), Ordering::Relaxed);
        let c = i64::from(credits) * 1000;
        if stock.fetch_sub(c, Ordering::AcqRel) > 0 {
            return Ok(());
        }
        stock.fetch_add(c, Ordering::AcqRel);
        if self.spare.fetch_sub(c, Ordering::AcqRel) > 0 {
            return Ok(());
        }
        self.spare.fetch_add(c, Ordering::AcqRel);
        // Until the stock is above zero again at this key's share (at least a tick, at most a minute).
        let share = self.share[k].load(Ordering::Relaxed) as f64;
        let deficit = 1000.0 - stock.load(Ordering::Relaxed) as f64;
        let ms = if share > 0.0 {
            deficit / share * 1000.0
        } else {
            2.0 * TICK_MS as f64
        };
        Err(OverShare {
            retry_after_ms: (ms as u64).clamp(TICK_MS, 60_000),
        })
    }

    fn tick(&self, limit: f64, weights: &[AtomicU32], elapsed: f64, now_ms: u64) {
        let peers = self.peer_until_ms.load(Ordering::Acquire) > now_ms;
        // (key, local demand, everyone's demand, weight) for every key with any.
        let mut active: Vec<(usize, f64, f64, f64)> = Vec::new();
        for (k, slot) in self.ewma.iter().enumerate() {
            let fresh = self.demand[k].swap(0, Ordering::Relaxed) as f64 / elapsed;
            let mut d = f64::from_bits(slot.load(Ordering::Relaxed));
            d = d * (1.0 - DEMAND_WEIGHT) + fresh * DEMAND_WEIGHT;
            if d < ACTIVE && fresh == 0.0 {
                d = 0.0;
            }
            slot.store(d.to_bits(), Ordering::Relaxed);
            let peer = if peers {
                self.peer[k].load(Ordering::Relaxed) as f64 / 1000.0
            } else {
                0.0
            };
            if d > 0.0 || peer > 0.0 {
                let w = f64::from(weights[k].load(Ordering::Relaxed)) / 1000.0;
                active.push((k, d, d + peer, w));
            } else {
                self.share[k].store(0, Ordering::Relaxed);
            }
        }
        let shares = water_fill(limit, &active.iter().map(|a| (a.2 * HEADROOM, a.3)).collect::<Vec<_>>());
        let mut given = 0.0;
        // Thousandths of a call that keys' full stocks could not hold: the spare's.
        let mut overflow = 0i64;
        let (mut local_all, mut everyone_all) = (0.0, 0.0);
        for (&(k, local, everyone, _), s) in active.iter().zip(&shares) {
            given += s;
            local_all += local;
            everyone_all += everyone;
            // This node's part of the key's share: as much as its part of the key's demand.
            let mine = if everyone > 0.0 { s * local / everyone } else { 0.0 };
            self.share[k].store((mine * 1000.0) as u64, Ordering::Relaxed);
            overflow += refill(&self.stock[k], mine, elapsed);
        }
        let left = (limit - given).max(0.0);
        let mine = if everyone_all > 0.0 {
            left * local_all / everyone_all
        } else {
            left
        };
        let extra = if elapsed > 0.0 {
            overflow as f64 / 1000.0 / elapsed
        } else {
            0.0
        };
        refill(&self.spare, mine + extra, elapsed);
    }
}

/// Adds `rate × elapsed` to `stock` (thousandths), holding it at most [`BURST_S`] of the rate; a debt
/// (below zero) is repaid before anything accumulates. Returns what the cap turned away.
fn refill(stock: &AtomicI64, rate: f64, elapsed: f64) -> i64 {
    let add = (rate * elapsed * 1000.0) as i64;
    let cap = ((rate * BURST_S * 1000.0) as i64).max(0);
    let before = stock.fetch_add(add, Ordering::AcqRel);
    stock.fetch_min(cap, Ordering::AcqRel);
    (before + add - cap).clamp(0, add.max(0))
}

/// Weighted max-min fair shares of `capacity` for demands `(demand, weight)`: a demand at or below its
/// weighted level is met in full; what is left is split by weight among the rest.
pub fn water_fill(capacity: f64, demands: &[(f64, f64)]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by(|&a, &b| {
        let (da, wa) = demands[a];
        let (db, wb) = demands[b];
        (da / wa.max(1e-9)).total_cmp(&(db / wb.max(1e-9)))
    });
    let mut shares = vec![0.0; demands.len()];
    let mut left = capacity.max(0.0);
    let mut weight: f64 = demands.iter().map(|d| d.1.max(1e-9)).sum();
    for (n, &i) in order.iter().enumerate() {
        let (d, w) = demands[i];
        let w = w.max(1e-9);
        let level = left / weight * w;
        if d <= level {
            shares[i] = d;
            left -= d;
            weight -= w;
        } else {
            // Everyone from here on asks more than the level: they split what is left by weight.
            for &j in &order[n..] {
                shares[j] = left / weight * demands[j].1.max(1e-9);
            }
            break;
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_filling_meets_small_demands_and_splits_the_rest_by_weight() {
        let s = water_fill(100.0, &[(1000.0, 1.0), (30.0, 1.0), (30.0, 1.0)]);
        assert_eq!(s, vec![40.0, 30.0, 30.0], "one flooding key gets what the others leave");
        let s = water_fill(100.0, &[(1000.0, 1.0), (1000.0, 3.0)]);
        assert_eq!(s, vec![25.0, 75.0], "weights");
        let s = water_fill(100.0, &[(10.0, 1.0), (20.0, 1.0)]);
        assert_eq!(s, vec![10.0, 20.0], "unsaturated: demands met, the rest is spare");
        assert!(water_fill(100.0, &[]).is_empty());
    }

    #[test]
    fn a_flooding_key_is_held_to_its_share_and_the_others_keep_theirs() {
        let q = QuotaLive::new(4);
        q.fair.store(true, Ordering::Relaxed);
        q.providers[0].limit_milli.store(100_000, Ordering::Relaxed);
        let p = ProviderId::new(0);
        let mut now = 1_000;
        q.tick(now);
        // Twenty seconds of 100 ms ticks: key 1 asks 1000 calls/s, keys 2 and 3 ask 30/s each. Keys 2 and 3
        // get their demand with headroom (`HEADROOM`); once their stocks are full (about ten seconds) what
        // they leave overflows to the spare, which key 1 spends.
        let mut served = [0u32; 4];
        for t in 0..200 {
            now += TICK_MS;
            q.tick(now);
            let s = q.shares(p).expect("on, with a quota");
            for (k, per_tick) in [(1usize, 100u32), (2, 3), (3, 3)] {
                for _ in 0..per_tick {
                    if s.take(k, 1).is_ok() && t >= 150 {
                        served[k] += 1;
                    }
                }
            }
        }
        // The last five seconds: keys 2 and 3 keep their 30/s (within 10 %), key 1 gets the rest.
        for k in [2, 3] {
            assert!((135..=150).contains(&served[k]), "key {k}: {served:?}");
        }
        assert!((180..=230).contains(&served[1]), "key 1: {served:?}");
        let refused = q.shares(p).unwrap().take(1, 1).unwrap_err();
        assert!(refused.retry_after_ms >= TICK_MS, "{refused:?}");
    }

    #[test]
    fn an_unsaturated_provider_refuses_nobody_and_a_new_key_is_served_from_the_spare() {
        let q = QuotaLive::new(4);
        q.fair.store(true, Ordering::Relaxed);
        q.providers[0].limit_milli.store(100_000, Ordering::Relaxed);
        let p = ProviderId::new(0);
        let mut now = 1_000;
        for _ in 0..20 {
            now += TICK_MS;
            q.tick(now);
            for _ in 0..2 {
                assert!(q.shares(p).unwrap().take(1, 1).is_ok());
            }
        }
        assert!(q.shares(p).unwrap().take(3, 1).is_ok(), "a key never seen before");
    }

    #[test]
    fn peers_demand_shrinks_this_nodes_part() {
        let q = QuotaLive::new(3);
        q.fair.store(true, Ordering::Relaxed);
        q.providers[0].limit_milli.store(100_000, Ordering::Relaxed);
        let p = ProviderId::new(0);
        let mut now = 1_000;
        q.tick(now);
        for _ in 0..30 {
            now += TICK_MS;
            q.tick(now);
            // A peer's key 2 asks 500 calls/s; this node's key 1 asks 1000/s.
            assert_eq!(q.set_peer_demand(p, &[(2, 500.0)], now + 1_000), 0);
            let s = q.shares(p).unwrap();
            for _ in 0..100 {
                let _ = s.take(1, 1);
            }
        }
        let share = q.shares(p).unwrap().share[1].load(Ordering::Relaxed) as f64 / 1000.0;
        assert!(
            (45.0..=55.0).contains(&share),
            "half the quota is this node's key's: {share}"
        );
        assert_eq!(q.set_peer_demand(p, &[(2, 1e12)], now + 1_000), 1, "bounded");
    }
}
