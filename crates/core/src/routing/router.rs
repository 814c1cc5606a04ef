//! Choosing a provider for one attempt.
//!
//! `score(p) = w_latency·norm(cost) + w_error·error_rate_5m + w_quota·quota_burn + w_affinity·region_distance`
//! over providers whose breaker is closed (and that are not drifted, parked, on the wrong chain, below the
//! client's high-water mark, or already tried by this request), divided by the provider's `weight`. The
//! cost is the family's p50, raised by what the shard's calls in flight show (`core::live::inflight::Pressure`).
//! Lower is better. Round robin, random and weighted use the same candidate set and the same function with
//! latency weight zero. Overflow providers, and providers past their quota, are used only when nothing
//! else is usable; providers pruned below the block a read needs come after all of those. A `safe` /
//! `finalized` read prefers providers whose tag is at or above the pool's agreed value.

use std::sync::atomic::Ordering;

use crate::live::breaker::BreakerState;
use crate::live::inflight::Pressure;
use crate::live::state::NetworkLive;
use prism_config::{Strategy, Weights};
use prism_telemetry::snapshot::NetworkHealth;
use prism_wire::rpc::methods::{Family, Finality};
use prism_wire::rpc::ProviderId;

/// What routing knows about a provider from config.
#[derive(Debug, Clone)]
pub struct ProviderStatic {
    pub weight: f64,
    pub overflow: bool,
    /// 0 = same region as this node (or unknown), 1 = elsewhere.
    pub region_distance: f64,
    pub quota_rps: Option<f64>,
    /// Its price table (`core::live::quota`): each call costs its method's credits; `quota_rps` is then credits.
    pub credits: Option<std::sync::Arc<crate::live::quota::CreditTable>>,
}

/// One routing question.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    pub family: Family,
    pub strategy: Strategy,
    pub weights: Weights,
    /// Providers whose head is below this are avoided (the client's high-water mark, less tolerance).
    pub min_head: u64,
    /// Data was unavailable at a provider: prefer the deepest head.
    pub prefer_deeper: bool,
    /// Providers already tried by this request (one `ProviderId::bit` each).
    pub exclude: u64,
    /// Providers that have requests from this shard in flight for much longer than it usually takes
    /// (it turned slow, and its slow answers have not reached the latency windows yet): used only when
    /// nothing else is.
    pub stalled: u64,
    /// The lowest block the read needs (`core::live::availability::lowest_block`): providers whose floor is above
    /// it come after every provider that has it (a later tier), never before.
    pub at_block: Option<u64>,
    /// A `safe` / `finalized` read and the least tag value it wants (the pool's agreed value, or the caller's
    /// mark for the tag if higher): providers at or above it are kept; if none is, the highest.
    pub tag: Option<(Finality, u64)>,
    /// The caller's key slot (0: no key): with fair shares on, a provider whose quota share this key has
    /// spent comes after the others (`core::live::quota`).
    pub key: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choice {
    Provider(ProviderId),
    /// Nothing usable. `open` breakers, and when one may be usable again.
    AllDown {
        open: usize,
        retry_after_ms: u64,
    },
    /// Everything usable has been tried already.
    Exhausted,
}

/// Score added to a provider more than `max_drift_blocks` behind the best head peers report.
const PEER_LAG_PENALTY: f64 = 0.2;

/// Ties within this score distance share traffic in rotation instead of all going to one.
const TIE: f64 = 0.02;

/// The pool as one shard sees it at one instant: config, the shared live state, the health snapshot and this
/// shard's calls in flight (`core::live::inflight`). What [`choose`] reads; it writes nothing.
#[derive(Clone, Copy)]
pub struct Pool<'a> {
    pub statics: &'a [ProviderStatic],
    pub live: &'a NetworkLive,
    pub health: &'a NetworkHealth,
    pub pressure: &'a Pressure,
    pub now_ms: u64,
}

/// The shard's draw for one choice: its rotation (round robin, and which of tied providers) and a uniform
/// number in 0..1 (random and weighted), so [`choose`] stays a pure function.
#[derive(Debug, Clone, Copy, Default)]
pub struct Draw {
    pub rotation: usize,
    pub dice: f64,
}

/// The providers still in the running for one choice. Fixed-size scratch, no allocation.
struct Candidates {
    ids: [ProviderId; 64],
    len: usize,
}

impl Candidates {
    fn as_slice(&self) -> &[ProviderId] {
        &self.ids[..self.len]
    }

    /// Keeps the candidates whose `value` (read once each) is at least `floor(highest value)`.
    #[inline]
    fn keep_at_least(&mut self, value: impl Fn(ProviderId) -> u64, floor: impl FnOnce(u64) -> u64) {
        let mut values = [0u64; 64];
        for (k, &i) in self.as_slice().iter().enumerate() {
            values[k] = value(i);
        }
        let highest = values[..self.len].iter().copied().max().unwrap_or(0);
        let floor = floor(highest);
        let mut kept = 0;
        for (j, &v) in values[..self.len].iter().enumerate() {
            if v >= floor {
                self.ids[kept] = self.ids[j];
                kept += 1;
            }
        }
        self.len = kept;
    }
}

/// Picks a provider for `ask` (see the module doc).
pub fn choose(pool: &Pool<'_>, ask: &Ask, draw: Draw) -> Choice {
    let mut cand = match usable(pool, ask) {
        Ok(cand) => cand,
        Err(none) => return none,
    };
    let live = pool.live;
    // The client's high-water mark: keep providers at or above it; if none is, keep the deepest.
    if ask.min_head > 0 || ask.prefer_deeper {
        // Each head is read once: probes may lower one at any moment, and the deepest must stay a candidate.
        // A Solana provider's slot is where its cadence has taken it since it was last seen (`slot_now`): a
        // mark raised by the freshest answer against slots up to a probe interval old left every provider
        // but the last one to answer out, and a round-robin key's reads all went to it. An answer still
        // below the mark is lagging and asked elsewhere (`forward`), so no caller's slot goes back.
        cand.keep_at_least(
            |i| live.slot_now(i, pool.now_ms),
            |deepest| {
                if ask.prefer_deeper {
                    deepest
                } else {
                    ask.min_head.min(deepest)
                }
            },
        );
    }
    // A finality tag read: keep providers whose tag is at or above what it wants; if none is, the highest.
    if let Some((t, want)) = ask.tag {
        cand.keep_at_least(|i| live.providers()[i].tags.get(t), |highest| want.min(highest));
    }
    debug_assert!(cand.len > 0, "the deepest candidate always survives the mark filter");
    let cand = cand.as_slice();
    let m = cand.len();
    match ask.strategy {
        Strategy::RoundRobin => Choice::Provider(cand[draw.rotation % m]),
        Strategy::Random => Choice::Provider(cand[((draw.dice * m as f64) as usize).min(m - 1)]),
        Strategy::Weighted => weighted(pool, ask, cand, draw.dice),
        Strategy::Score => scored(pool, ask, cand, draw.rotation),
    }
}

/// The usable providers `ask` has not excluded, in the best tier there is. Tier 0: primaries within quota;
/// tier 1: overflow, over quota (locally, the node's leased share spent, or this key's fair share), failing
/// at peers, or stalled; tiers 2 and 3: the same, for providers that lack the block the read needs (pruned
/// below it). `Err`: nothing usable (all down) or everything usable tried (exhausted).
#[inline]
fn usable(pool: &Pool<'_>, ask: &Ask) -> Result<Candidates, Choice> {
    let Pool {
        statics,
        live,
        health,
        now_ms,
        ..
    } = *pool;
    let mut cand = Candidates {
        ids: [ProviderId::default(); 64],
        len: 0,
    };
    let mut tier = [0u8; 64];
    let mut any_unexcluded = false;
    let fair = live.quota.fair_on();
    for (i, s) in ProviderId::all(statics.len()).zip(statics) {
        if i.is_in(ask.exclude) {
            continue;
        }
        any_unexcluded = true;
        let p = &live.providers()[i];
        if !live.admissible(i) || !p.breaker.is_closed() || p.is_parked(now_ms) {
            continue;
        }
        let burn = quota_burn(s, live, health, i);
        // Fair shares: this key spent its share of the provider's quota (and nobody left any spare).
        let over_share = fair && live.quota.shares(i).is_some_and(|q| !q.has_room(ask.key as usize));
        let lacks = ask.at_block.is_some_and(|b| !p.floor.has(b));
        cand.ids[cand.len] = i;
        tier[cand.len] = u8::from(
            s.overflow || burn >= 1.0 || over_share || p.quota_spent() || p.peer_open(now_ms) || i.is_in(ask.stalled),
        ) + 2 * u8::from(lacks);
        cand.len += 1;
    }
    if cand.len == 0 {
        return Err(if any_unexcluded {
            all_down(live, now_ms)
        } else {
            Choice::Exhausted
        });
    }
    let best_tier = tier[..cand.len].iter().copied().min().unwrap_or(0);
    let mut kept = 0;
    for (k, &t) in tier[..cand.len].iter().enumerate() {
        if t == best_tier {
            cand.ids[kept] = cand.ids[k];
            kept += 1;
        }
    }
    cand.len = kept;
    Ok(cand)
}

/// Weighted: a draw over the candidates, each weighted by its `weight` over one plus its score without latency.
fn weighted(pool: &Pool<'_>, ask: &Ask, cand: &[ProviderId], dice: f64) -> Choice {
    let w = Weights {
        latency: 0.0,
        ..ask.weights
    };
    let mut weights = [0f64; 64];
    let mut total = 0.0;
    for (k, &i) in cand.iter().enumerate() {
        let s = score(pool, &w, ask.family, i, 0.0);
        weights[k] = pool.statics[i].weight / (1.0 + s);
        total += weights[k];
    }
    let mut target = dice * total;
    for (k, &i) in cand.iter().enumerate() {
        if target < weights[k] {
            return Choice::Provider(i);
        }
        target -= weights[k];
    }
    Choice::Provider(cand[cand.len() - 1])
}

/// Score: the lowest score wins; near ties share traffic in rotation.
#[inline]
fn scored(pool: &Pool<'_>, ask: &Ask, cand: &[ProviderId], rotation: usize) -> Choice {
    let Pool {
        statics,
        live,
        health,
        pressure,
        now_ms,
    } = *pool;
    // The latency each candidate shows now: its p50 for the family, or more while calls it has in flight
    // are far older than that (or it answered far slower just now), times its calls in flight plus one
    // (`core::live::inflight`). Written into `scores` first, then turned into scores in place.
    let mut scores = [0f64; 64];
    let mut max_cost = 1f64;
    for (k, &i) in cand.iter().enumerate() {
        let p50 = health
            .providers
            .get(i.index())
            .map_or(0, |h| h.figures(ask.family).p50_us) as f64;
        scores[k] = pressure.cost(i, p50);
        max_cost = max_cost.max(scores[k]);
    }
    let mut best = f64::INFINITY;
    // Peers (with `[cluster]`) may know a higher head: a provider far behind it ranks lower, but is never
    // excluded on a peer's word.
    let peer_best = live.peer_best(now_ms);
    for (k, &i) in cand.iter().enumerate() {
        let behind_peers = peer_best > 0
            && live.providers()[i]
                .heads
                .head
                .load(Ordering::Relaxed)
                .saturating_add(live.rule.max_drift)
                < peer_best;
        scores[k] = (score(pool, &ask.weights, ask.family, i, scores[k] / max_cost)
            + if behind_peers { PEER_LAG_PENALTY } else { 0.0 })
            / statics[i].weight;
        best = best.min(scores[k]);
    }
    let ties = scores[..cand.len()].iter().filter(|&&s| s <= best + TIE).count();
    let nth = rotation % ties;
    let mut seen = 0;
    for (k, &i) in cand.iter().enumerate() {
        if scores[k] <= best + TIE {
            if seen == nth {
                return Choice::Provider(i);
            }
            seen += 1;
        }
    }
    Choice::Provider(cand[0])
}

/// How much of its quota a provider is using: the credits it was sent per second when it has a price
/// table (`core::live::quota`), else its recent calls per second, over `quota_rps`.
fn quota_burn(s: &ProviderStatic, live: &NetworkLive, health: &NetworkHealth, i: ProviderId) -> f64 {
    match (s.quota_rps, health.providers.get(i.index())) {
        (Some(_), _) if s.credits.is_some() => live.quota.priced_burn(i).unwrap_or(0.0),
        (Some(q), Some(h)) if q > 0.0 => h.recent_rps / q,
        _ => 0.0,
    }
}

/// A candidate's score; `latency` is its normalized latency (0..1, its cost over the candidates' highest).
#[inline(always)]
fn score(pool: &Pool<'_>, w: &Weights, family: Family, i: ProviderId, latency: f64) -> f64 {
    let err = pool
        .health
        .providers
        .get(i.index())
        .map_or(0.0, |h| h.figures(family).error_rate());
    w.latency * latency
        + w.error * err
        + w.quota * quota_burn(&pool.statics[i], pool.live, pool.health, i).min(1.0)
        + w.affinity * pool.statics[i].region_distance
}

/// The all-down answer: how many breakers are open and when the first may be usable.
fn all_down(live: &NetworkLive, now_ms: u64) -> Choice {
    let mut open = 0;
    let mut retry_after = u64::MAX;
    for p in live.providers().iter().filter(|p| !p.retired.load(Ordering::Relaxed)) {
        match p.breaker.state(now_ms) {
            BreakerState::Closed => {
                let parked = p.parked_until_ms.load(Ordering::Relaxed);
                if parked > now_ms {
                    retry_after = retry_after.min(parked - now_ms);
                }
            }
            BreakerState::Open { retry_in_ms } => {
                open += 1;
                retry_after = retry_after.min(retry_in_ms);
            }
            BreakerState::ProbeDue | BreakerState::HalfOpen => {
                open += 1;
                retry_after = retry_after.min(1000);
            }
        }
    }
    Choice::AllDown {
        open,
        retry_after_ms: if retry_after == u64::MAX { 1000 } else { retry_after },
    }
}

#[cfg(test)]
mod tests;
