//! What every shard must agree on about a network's providers, shared through atomics: breakers, heads,
//! drift, parking, chain-id checks, the per-key high-water marks, and the latest health snapshot.
//! Built once at start-up and shared behind an `Arc`; no lock on any path. A network has room for
//! [`ProviderId::MAX`] provider slots from the start: a config reload adds providers in new slots and retires
//! removed ones (they drain), so a slot's index never changes meaning while the process lives.
//!
//! Heads need evidence ([`HeadRule`]): a reported height is believed only if the chain can have got there
//! since the heads already believed were first seen, and, with two or more other live providers, only if it
//! is not far above their median. A provider reporting anything else is an `outlier`: the head is dropped
//! (never the pool's best head, a client's mark, another provider's drift or what peers are told), the
//! provider is left out of routing, and it is back as soon as a head of its is plausible again.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::live::finality::{agreed_value, PoolTags, TagReport};
use crate::live::marks::{MarkKey, Marks, ShownHead};
use prism_config::{BreakerPolicy, Network};
use prism_telemetry::clock::now_ms;
use prism_telemetry::snapshot::NetworkHealth;
use prism_wire::rpc::methods::Finality;
use prism_wire::rpc::ProviderId;

/// Above this no answer is a block height: JavaScript clients read heights as doubles (exact below 2^53),
/// and no chain is anywhere near it. Such an answer is malformed, the provider's failure.
pub const MAX_HEIGHT: u64 = 1 << 53;

/// Most providers a network's plausibility check looks at (the router's own bound).
const MAX_PROVIDERS: usize = prism_wire::rpc::ProviderId::MAX;

/// What is known of one provider's head: the height, when it first reached it, when it last confirmed it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeadRef {
    pub head: u64,
    /// Process-clock ms at which this provider first reported `head`.
    pub at_ms: u64,
    /// Process-clock ms of its last believed report.
    pub seen_ms: u64,
}

/// How far a reported head may be believed (per network, from config).
#[derive(Debug, Clone, Copy)]
pub struct HeadRule {
    /// The chain's block time; the chain is assumed to make at most twice that many blocks.
    pub block_time_ms: u64,
    /// Blocks allowed on top of every bound (start-up, jitter, clocks).
    pub slack_blocks: u64,
    /// The network's `max_drift_blocks`: an honest provider may be this far ahead of the others.
    pub max_drift: u64,
    /// A provider counts towards the median while its last believed report is this recent.
    pub live_ms: u64,
    /// A provider no other live provider can vouch for or against proves a jump (a node that caught up
    /// after a resync) by repeating it, consistently, for at least this long.
    pub confirm_ms: u64,
}

/// What [`HeadRule::judge`] makes of a reported head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadVerdict {
    Accepted,
    /// A height, but not one the chain can be at: the provider is an outlier until it reports a plausible one.
    Implausible,
    /// Not a block height at all (beyond [`MAX_HEIGHT`]): a malformed answer.
    Malformed,
}

impl HeadVerdict {
    pub fn accepted(self) -> bool {
        self == HeadVerdict::Accepted
    }
}

impl HeadRule {
    pub fn new(network: &Network) -> Self {
        HeadRule {
            block_time_ms: network.block_time_ms.max(1),
            slack_blocks: network.head_slack_blocks,
            max_drift: network.max_drift_blocks,
            live_ms: network.probe_interval_ms.saturating_mul(5).max(10_000),
            confirm_ms: network.probe_interval_ms.clamp(500, 5_000),
        }
    }

    /// Blocks beyond the time bound or the median a head may still be.
    pub fn margin(&self) -> u64 {
        self.max_drift.saturating_add(self.slack_blocks)
    }

    /// Most blocks the chain can have made in `elapsed_ms`: twice the configured rate.
    pub fn blocks_in(&self, elapsed_ms: u64) -> u64 {
        elapsed_ms.saturating_mul(2) / self.block_time_ms.max(1)
    }

    /// Highest the chain can be now, judging from one believed head.
    fn reach(&self, r: &HeadRef, now_ms: u64) -> u64 {
        r.head.saturating_add(self.blocks_in(now_ms.saturating_sub(r.at_ms)))
    }

    /// The highest head `refs` make plausible now (margin included); `None` without any reference.
    pub fn ceiling<'a>(&self, now_ms: u64, refs: impl IntoIterator<Item = &'a HeadRef>) -> Option<u64> {
        refs.into_iter()
            .filter(|r| r.head > 0)
            .map(|r| self.reach(r, now_ms))
            .max()
            .map(|c| c.saturating_add(self.margin()))
    }

    /// The rule. `own`: what this provider last reported believably (`None` before its first report);
    /// `others`: the other providers that count (right chain, not outliers, with a head).
    ///
    /// - Beyond [`MAX_HEIGHT`]: malformed.
    /// - Not above a head already believed (its own or another's): accepted.
    /// - Time: above every believed head plus what the chain can have made since it was first seen, plus
    ///   the margin: implausible. A provider's first report is bounded by the others; with no reference at
    ///   all (the pool's very first report) there is nothing to doubt it by.
    /// - Agreement: with two or more other providers live, above the (upper) median of their heads
    ///   (each carried forward by the time since it was first seen) plus the margin: implausible.
    pub fn judge(&self, height: u64, now_ms: u64, own: Option<HeadRef>, others: &[HeadRef]) -> HeadVerdict {
        if height > MAX_HEIGHT {
            return HeadVerdict::Malformed;
        }
        // Agreement first: a head this provider already got believed (it was the pool's first report, say)
        // is still judged by the others once they speak, so an early spike cannot own the best head.
        if self.beyond_agreement(height, now_ms, others) {
            return HeadVerdict::Implausible;
        }
        let known = own.iter().chain(others).map(|r| r.head).max().unwrap_or(0);
        if height <= known {
            return HeadVerdict::Accepted;
        }
        if let Some(ceiling) = self.ceiling(now_ms, own.iter().chain(others)) {
            if height > ceiling {
                return HeadVerdict::Implausible;
            }
        }
        HeadVerdict::Accepted
    }

    /// How many of `others` are live (recent enough to vote).
    pub fn live_count(&self, now_ms: u64, others: &[HeadRef]) -> usize {
        others
            .iter()
            .filter(|r| r.head > 0 && now_ms.saturating_sub(r.seen_ms) <= self.live_ms)
            .count()
    }

    /// Whether `height`, now, carries on a run of implausible claims that began with `claim` at
    /// `claim_at_ms`: at or above it, and within what the chain can have made since (margin included).
    pub fn continues(&self, height: u64, now_ms: u64, claim: u64, claim_at_ms: u64) -> bool {
        claim > 0
            && height >= claim
            && height
                <= claim
                    .saturating_add(self.blocks_in(now_ms.saturating_sub(claim_at_ms)))
                    .saturating_add(self.margin())
    }

    /// A run that carried on for at least `confirm_ms`: the provider's jump is evidence enough when no other
    /// live provider can say otherwise. A one-off spike is never repeated, so it never gets here.
    pub fn confirms(&self, height: u64, now_ms: u64, claim: u64, claim_at_ms: u64) -> bool {
        self.continues(height, now_ms, claim, claim_at_ms) && now_ms.saturating_sub(claim_at_ms) >= self.confirm_ms
    }

    /// With two or more other providers live: above the (upper) median of their reach plus the margin.
    fn beyond_agreement(&self, height: u64, now_ms: u64, others: &[HeadRef]) -> bool {
        let mut live = [0u64; MAX_PROVIDERS];
        let mut n = 0;
        for r in others.iter().take(MAX_PROVIDERS) {
            if r.head > 0 && now_ms.saturating_sub(r.seen_ms) <= self.live_ms {
                live[n] = self.reach(r, now_ms);
                n += 1;
            }
        }
        if n < 2 {
            return false;
        }
        let live = &mut live[..n];
        live.sort_unstable();
        height > live[n / 2].saturating_add(self.margin())
    }
}

pub use crate::live::provider::{ChainCheck, ProviderLive};

pub struct NetworkLive {
    /// Every slot, used or not ([`ProviderId::MAX`]); the first `slots` are this network's providers.
    all: Box<[ProviderLive]>,
    /// Slots in use (grows when a reload adds a provider; retired ones keep theirs).
    used: AtomicUsize,
    /// The pool's best head, what peers report, the outliers.
    pub heads: PoolHeads,
    /// What config fixes beyond the head rule.
    pub settings: LiveSettings,
    pub marks: Marks,
    /// The highest head shown lately (`core::live::marks::ShownHead`): what a `latest` read is held to besides the
    /// caller's mark ([`NetworkLive::held_head`]).
    pub shown: ShownHead,
    pub health: ArcSwap<NetworkHealth>,
    pub rule: HeadRule,
    /// For logs: the network's and providers' names.
    pub(super) names: Names,
    /// Solana: each provider's side and the slot rules (`core::live::slots`); `None` on EVM networks.
    pub(super) slots: Option<crate::live::sides::SlotRule>,
    /// The pool's agreed `safe` / `finalized` blocks (`core::live::finality::agreed_value`).
    pub tags: PoolTags,
    /// Provider quota in credits and the keys' fair shares of it (`core::live::quota`).
    pub quota: crate::live::quota::QuotaLive,
}

/// The pool's heads.
#[derive(Default)]
pub struct PoolHeads {
    /// Best head across the pool: the greatest believed head of a provider that counts (right chain, not an
    /// outlier), recomputed whenever one changes, so nothing a provider once said sticks in it.
    pub best_head: AtomicU64,
    /// Best head peer nodes report (advisory, `[cluster]`), valid until `peer_best_until_ms`.
    pub peer_best_head: AtomicU64,
    pub peer_best_until_ms: AtomicU64,
    /// Providers now outliers; when all are, none is left out for it (each answer is still checked).
    outliers: AtomicUsize,
}

/// What config fixes of a network's live state beyond the head rule (whose `max_drift` is the network's
/// `max_drift_blocks`).
pub struct LiveSettings {
    /// `hwm_tolerance_blocks`: how far below a client's mark a non-`latest` read may be answered from.
    pub hwm_tolerance: u64,
    /// Configured chain id: providers must match it before they serve.
    pub chain_id: Option<u64>,
    /// Key slots of the marks table (keys + 1): the stride between an EVM caller's mark lanes.
    key_slots: usize,
}

/// The network's and its providers' names, for logs (a reload may add providers).
pub(super) struct Names {
    pub(super) network: String,
    providers: ArcSwap<Vec<String>>,
}

impl NetworkLive {
    pub fn new(network: &Network, policy: &BreakerPolicy, keys: usize) -> Arc<Self> {
        let live = Arc::new(NetworkLive {
            all: (0..MAX_PROVIDERS).map(|_| ProviderLive::new(policy)).collect(),
            used: AtomicUsize::new(network.providers.len()),
            heads: PoolHeads::default(),
            settings: LiveSettings {
                hwm_tolerance: network.hwm_tolerance_blocks,
                chain_id: network.chain_id,
                key_slots: keys + 1,
            },
            marks: Marks::new((keys + 1) * crate::live::sides::SlotRule::mark_lanes(network) - 1),
            // Two probe intervals: by then every provider has been asked again.
            shown: ShownHead::new(network.probe_interval_ms.saturating_mul(2)),
            health: ArcSwap::from_pointee(NetworkHealth::empty(network.providers.len())),
            rule: HeadRule::new(network),
            names: Names {
                network: network.name.clone(),
                providers: ArcSwap::from_pointee(network.providers.iter().map(|p| p.name.clone()).collect()),
            },
            slots: crate::live::sides::SlotRule::for_network(network),
            tags: PoolTags::default(),
            quota: crate::live::quota::QuotaLive::new(keys + 1),
        });
        live.apply_floors(network);
        live
    }

    /// A read pinned to `block` found no data at `provider`: raise its learned floor if that proves one
    /// (`Floor::learn`: only well below its head, by the head rule's margin).
    pub fn learn_floor(&self, provider: ProviderId, block: u64) {
        let p = &self.all[provider];
        if p.floor.learn(
            block,
            p.heads.head.load(Ordering::Acquire),
            self.rule.margin(),
            now_ms(),
        ) {
            tracing::info!(network = %self.names.network, provider = %self.provider_name(provider), floor = p.floor.get(),
                "provider lacks history below this block; older reads go to providers that have it first");
        }
    }

    /// Each provider's configured `floor_block` (at start-up and on a reload; learned floors stay).
    fn apply_floors(&self, network: &Network) {
        for (p, live) in network.providers.iter().zip(self.all.iter()) {
            live.floor.set_configured(p.floor_block);
        }
    }

    /// The caller's mark for finality tag `t` (its own lane, `MarkKey::in_lane`).
    pub fn tag_mark(&self, k: MarkKey, t: Finality) -> MarkKey {
        k.in_lane(1 + t.index() as u8, self.settings.key_slots)
    }

    /// Recomputes the pool's agreed value of each tag from the providers that count and are not drifted
    /// (see `core::live::finality::agreed_value`). Called by the prober, never on the request path.
    pub fn recompute_tags(&self) {
        let best = self.heads.best_head.load(Ordering::Acquire);
        for t in Finality::ALL {
            let reports = ProviderId::all(self.providers().len())
                .filter(|&i| self.counts(i) && !self.all[i].heads.drifted.load(Ordering::Relaxed))
                .map(|i| TagReport {
                    tag: self.all[i].tags.get(t),
                    head: self.all[i].heads.head.load(Ordering::Acquire),
                });
            self.tags.set(t, agreed_value(reports, best));
        }
    }

    /// This network's providers, by slot (retired ones included: they keep their slot).
    pub fn providers(&self) -> &[ProviderLive] {
        &self.all[..self.used.load(Ordering::Acquire)]
    }

    /// Slot `i`, in use or not: for readers that walk the running config's provider list, which a reload
    /// may lengthen a moment before [`NetworkLive::providers`] does.
    pub fn slot(&self, i: ProviderId) -> &ProviderLive {
        &self.all[i]
    }

    /// A provider's name, for logs.
    pub fn provider_name(&self, i: ProviderId) -> String {
        self.names.providers.load().get(i.index()).cloned().unwrap_or_default()
    }

    /// Takes a reloaded roster (`network.providers` in slot order, removed ones marked `retired`): new slots
    /// come into use, retired providers stop being routed to. Slots only grow; a slot's index keeps its
    /// provider.
    pub fn apply_roster(&self, network: &Network) {
        let n = network.providers.len().min(MAX_PROVIDERS);
        for (p, live) in network.providers.iter().zip(self.all.iter()) {
            live.retired.store(p.retired, Ordering::Release);
        }
        self.names
            .providers
            .store(Arc::new(network.providers.iter().map(|p| p.name.clone()).collect()));
        self.used.fetch_max(n, Ordering::AcqRel);
        self.apply_floors(network);
        self.recompute_best();
    }

    /// Whether provider `i`'s head counts towards the pool's (right chain, not an outlier).
    fn counts(&self, i: ProviderId) -> bool {
        let p = &self.all[i];
        !p.heads.outlier.load(Ordering::Relaxed)
            && !p.retired.load(Ordering::Relaxed)
            && match p.chain() {
                ChainCheck::Ok => true,
                ChainCheck::Wrong => false,
                ChainCheck::Unknown => self.settings.chain_id.is_none(),
            }
    }

    fn head_ref(&self, i: ProviderId) -> HeadRef {
        let p = &self.all[i];
        HeadRef {
            head: p.heads.head.load(Ordering::Acquire),
            at_ms: p.heads.head_at_ms.load(Ordering::Relaxed),
            seen_ms: p.heads.seen_ms.load(Ordering::Relaxed),
        }
    }

    /// Recomputes the pool's best head from the providers that count; returns it. When every provider is an
    /// outlier, their last believed heads (never an implausible one) are all there is.
    pub fn recompute_best(&self) -> u64 {
        let (mut best, mut fallback) = (0, 0);
        for (i, p) in ProviderId::all(self.providers().len()).zip(self.providers().iter()) {
            let head = p.heads.head.load(Ordering::Acquire);
            if self.counts(i) {
                best = best.max(head);
            } else if p.chain() != ChainCheck::Wrong {
                fallback = fallback.max(head);
            }
        }
        let best = if best == 0 { fallback } else { best };
        self.heads.best_head.store(best, Ordering::Release);
        best
    }

    /// Records a head reported by `provider` (an answer, a newHeads notification), if it is plausible.
    pub fn observe_head(&self, provider: ProviderId, height: u64) -> HeadVerdict {
        self.observe_head_at(provider, height, now_ms())
    }

    /// A probe's head: the provider's head is what it says now, lower than before or not.
    /// Probes always get the whole rule (no shortcut for heads already believed): once per probe interval
    /// each provider's head is checked against the others' again.
    pub fn observe_probe(&self, provider: ProviderId, height: u64) -> HeadVerdict {
        let now = now_ms();
        let verdict = self.observe_at(provider, height, now, true);
        if verdict.accepted() {
            let p = &self.all[provider];
            if p.heads.head.fetch_min(height, Ordering::AcqRel) > height {
                p.heads.head_at_ms.store(now, Ordering::Relaxed);
                self.recompute_best();
            }
        }
        verdict
    }

    /// [`NetworkLive::observe_head`] at a given time. Cheap when the head is not above the pool's best (the
    /// common case: no loop over providers); otherwise the rule looks at every provider, on the stack.
    pub fn observe_head_at(&self, provider: ProviderId, height: u64, now_ms: u64) -> HeadVerdict {
        self.observe_at(provider, height, now_ms, false)
    }

    fn observe_at(&self, provider: ProviderId, height: u64, now_ms: u64, audit: bool) -> HeadVerdict {
        let p = &self.all[provider];
        let own = self.head_ref(provider);
        let verdict = if !audit
            && height <= MAX_HEIGHT
            && (height <= own.head || height <= self.heads.best_head.load(Ordering::Acquire))
        {
            HeadVerdict::Accepted
        } else {
            let mut others = [HeadRef::default(); MAX_PROVIDERS];
            let mut n = 0;
            for j in ProviderId::all(self.providers().len()).filter(|&j| j != provider && self.counts(j)) {
                let r = self.head_ref(j);
                if r.head > 0 && n < MAX_PROVIDERS {
                    others[n] = r;
                    n += 1;
                }
            }
            let verdict = self
                .rule
                .judge(height, now_ms, (own.head > 0).then_some(own), &others[..n]);
            if verdict == HeadVerdict::Implausible && self.rule.live_count(now_ms, &others[..n]) == 0 {
                self.lone_claim(provider, height, now_ms)
            } else {
                verdict
            }
        };
        match verdict {
            HeadVerdict::Accepted => {
                if p.heads.claim_run.load(Ordering::Relaxed) != 0 {
                    p.heads.claim_run.store(0, Ordering::Relaxed);
                }
                p.heads.seen_ms.store(now_ms, Ordering::Relaxed);
                let before = p.heads.head.fetch_max(height, Ordering::AcqRel);
                if height > before {
                    p.heads.head_at_ms.store(now_ms, Ordering::Relaxed);
                }
                let recovered = p.heads.outlier.swap(false, Ordering::AcqRel);
                if recovered {
                    self.heads.outliers.fetch_sub(1, Ordering::AcqRel);
                    tracing::warn!(network = %self.names.network, provider = %self.provider_name(provider), head = height, "provider reports a plausible head again; back in the pool");
                }
                if self.counts(provider) {
                    self.shown.show(height, now_ms);
                }
                if recovered || height > before {
                    self.recompute_best();
                }
            }
            HeadVerdict::Implausible => {
                p.heads.outlier_heads.fetch_add(1, Ordering::Relaxed);
                p.heads.claimed_head.store(height, Ordering::Relaxed);
                if !p.heads.outlier.swap(true, Ordering::AcqRel) {
                    self.heads.outliers.fetch_add(1, Ordering::AcqRel);
                    tracing::warn!(network = %self.names.network, provider = %self.provider_name(provider), head = height, best = self.heads.best_head.load(Ordering::Relaxed), "provider reports a head the chain cannot be at; excluded as an outlier");
                    self.recompute_best();
                }
            }
            HeadVerdict::Malformed => {}
        }
        verdict
    }

    /// An implausible head from a provider no other live provider can vouch for or against: accepted once
    /// it has been repeated consistently for `confirm_ms` (a real jump, e.g. a node that caught up after a
    /// resync), implausible until then (a one-off spike).
    fn lone_claim(&self, provider: ProviderId, height: u64, now_ms: u64) -> HeadVerdict {
        let p = &self.all[provider];
        let (run, at) = (
            p.heads.claim_run.load(Ordering::Relaxed),
            p.heads.claimed_at_ms.load(Ordering::Relaxed),
        );
        if self.rule.confirms(height, now_ms, run, at) {
            tracing::warn!(network = %self.names.network, provider = %self.provider_name(provider), head = height, since_ms = now_ms.saturating_sub(at),
                "a jump in head repeated consistently with no other provider to contradict it; accepted");
            return HeadVerdict::Accepted;
        }
        if !self.rule.continues(height, now_ms, run, at) {
            p.heads.claim_run.store(height, Ordering::Relaxed);
            p.heads.claimed_at_ms.store(now_ms, Ordering::Relaxed);
        }
        HeadVerdict::Implausible
    }

    /// Where the chain can plausibly be now by this node's own believed heads (margin included); `None`
    /// while no provider has reported one. Bounds what peers say.
    pub fn plausible_ceiling(&self, now_ms: u64) -> Option<u64> {
        let mut refs = [HeadRef::default(); MAX_PROVIDERS];
        let mut n = 0;
        for j in ProviderId::all(self.providers().len()).filter(|&j| self.counts(j)) {
            if n < MAX_PROVIDERS {
                refs[n] = self.head_ref(j);
                n += 1;
            }
        }
        self.rule.ceiling(now_ms, &refs[..n])
    }

    /// A provider answered from below what it reported before (a load balancer behind it switched nodes, or
    /// it fell back): its head is what it just showed, so routing stops sending it clients who are ahead.
    pub fn lower_head(&self, provider: ProviderId, height: u64) {
        if self.all[provider].heads.head.fetch_min(height, Ordering::AcqRel) > height {
            self.recompute_best();
        }
    }

    /// Re-evaluates drift for every provider against the best head. Returns (provider, now drifted) for each
    /// change, so the caller can log it.
    pub fn update_drift(&self) -> Vec<(ProviderId, bool)> {
        let best = self.heads.best_head.load(Ordering::Acquire);
        let mut changes = Vec::new();
        for (i, p) in ProviderId::all(self.providers().len()).zip(self.providers().iter()) {
            let head = p.heads.head.load(Ordering::Acquire);
            let behind = head > 0 && best.saturating_sub(head) > self.rule.max_drift;
            if p.heads.drifted.swap(behind, Ordering::AcqRel) != behind {
                changes.push((i, behind));
            }
        }
        changes
    }

    /// The provider's state as operators see it: the breaker, or why it is excluded.
    pub fn describe(&self, provider: ProviderId, now_ms: u64) -> &'static str {
        let p = &self.all[provider];
        if p.chain() == ChainCheck::Unknown
            && self.settings.chain_id.is_some()
            && p.breaker.is_closed()
            && !p.cordon.is_on()
        {
            "unverified"
        } else {
            p.describe(now_ms)
        }
    }

    /// What peers report as their best head (already bounded by [`NetworkLive::plausible_ceiling`]), valid
    /// until `until_ms`. Replaces the previous report: nothing a peer once said sticks.
    pub fn set_peer_best(&self, best: u64, until_ms: u64) {
        self.heads.peer_best_head.store(best, Ordering::Release);
        self.heads
            .peer_best_until_ms
            .store(if best == 0 { 0 } else { until_ms }, Ordering::Release);
    }

    /// The head a `latest` read on this node may not be answered far below (less `hwm_tolerance`): the pool's
    /// best head, or the highest one a provider showed lately if that is higher.
    pub fn held_head(&self, now_ms: impl FnOnce() -> u64) -> u64 {
        self.shown
            .at_least(self.heads.best_head.load(Ordering::Acquire), now_ms)
    }

    /// The best head peers report, while their reports are fresh.
    pub fn peer_best(&self, now_ms: u64) -> u64 {
        if self.heads.peer_best_until_ms.load(Ordering::Acquire) > now_ms {
            self.heads.peer_best_head.load(Ordering::Acquire)
        } else {
            0
        }
    }

    /// Whether the provider may be routed to at all (breaker aside). An outlier is not, unless every provider
    /// is one (leaving all out helps no client: their answers are checked one by one anyway).
    pub fn admissible(&self, provider: ProviderId) -> bool {
        let p = &self.all[provider];
        !p.retired.load(Ordering::Relaxed)
            && !p.cordon.is_on()
            && !p.heads.drifted.load(Ordering::Relaxed)
            && !p.slots.stalled.load(Ordering::Relaxed)
            && (!p.heads.outlier.load(Ordering::Relaxed)
                || self.heads.outliers.load(Ordering::Relaxed) >= self.providers().len())
            && match p.chain() {
                ChainCheck::Ok => true,
                ChainCheck::Wrong => false,
                ChainCheck::Unknown => self.settings.chain_id.is_none(),
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prism_config::Config;

    /// 250 ms blocks, slack 100, drift 10: margin 110; live for 10 s.
    const RULE: HeadRule = HeadRule {
        block_time_ms: 250,
        slack_blocks: 100,
        max_drift: 10,
        live_ms: 10_000,
        confirm_ms: 2_000,
    };

    fn at(head: u64, at_ms: u64) -> HeadRef {
        HeadRef {
            head,
            at_ms,
            seen_ms: at_ms,
        }
    }

    #[test]
    fn beyond_2_pow_53_is_malformed() {
        assert_eq!(RULE.judge(MAX_HEIGHT + 1, 1, None, &[]), HeadVerdict::Malformed);
        assert_eq!(RULE.judge(u64::MAX, 1, Some(at(5, 1)), &[]), HeadVerdict::Malformed);
        assert_eq!(
            RULE.judge(MAX_HEIGHT, 1, None, &[]),
            HeadVerdict::Accepted,
            "nothing to doubt it by"
        );
    }

    #[test]
    fn time_bounds_a_provider_by_its_own_head() {
        let own = Some(at(1_000, 10_000));
        // 10 s later: at most 2 × 40 blocks + margin 110.
        assert_eq!(RULE.judge(1_190, 20_000, own, &[]), HeadVerdict::Accepted);
        assert_eq!(RULE.judge(1_191, 20_000, own, &[]), HeadVerdict::Implausible);
        assert_eq!(RULE.judge(0xffff_ffff_ffff, 20_000, own, &[]), HeadVerdict::Implausible);
        // Going down, or staying, is never doubted.
        assert_eq!(RULE.judge(900, 20_000, own, &[]), HeadVerdict::Accepted);
        // An hour later far more is possible.
        assert_eq!(RULE.judge(1_000 + 28_800, 3_610_000, own, &[]), HeadVerdict::Accepted);
    }

    #[test]
    fn a_first_report_is_bounded_by_the_others() {
        let others = [at(5_000, 1_000)];
        assert_eq!(RULE.judge(5_110, 1_000, None, &others), HeadVerdict::Accepted);
        assert_eq!(RULE.judge(5_111, 1_000, None, &others), HeadVerdict::Implausible);
        // A provider catching up to the pool may move much faster than the chain.
        assert_eq!(
            RULE.judge(5_000, 1_000, Some(at(10, 900)), &others),
            HeadVerdict::Accepted
        );
        // Not above anything believed: accepted, whatever time says.
        assert_eq!(
            RULE.judge(4_000, 1_000, Some(at(10, 1_000)), &others),
            HeadVerdict::Accepted
        );
    }

    #[test]
    fn far_above_the_median_of_two_or_more_others_is_an_outlier() {
        // The provider itself was ahead a long time ago, so time alone would allow a lot.
        let own = Some(at(1_000_000, 0));
        let now = 3_600_000;
        let others = [at(2_000, now - 100), at(2_001, now - 50), at(1_999, now - 20)];
        assert_eq!(RULE.judge(1_000_100, now, own, &others), HeadVerdict::Implausible);
        // Within drift + slack of the median: fine.
        assert_eq!(RULE.judge(2_000 + 110, now, own, &others[..2]), HeadVerdict::Accepted);
        // One other is no majority: only time applies.
        assert_eq!(RULE.judge(1_000_100, now, own, &others[..1]), HeadVerdict::Accepted);
        // Others not seen for longer than live_ms do not vote.
        let stale = [at(2_000, 0), at(2_001, 0)];
        assert_eq!(RULE.judge(1_000_100, now, own, &stale), HeadVerdict::Accepted);
    }

    fn network(providers: usize) -> Arc<NetworkLive> {
        let mut toml = String::from(
            "[server]\nlisten = \"127.0.0.1:1\"\n[[networks]]\nname = \"n\"\nkind = \"evm\"\nhead_slack_blocks = 100\n",
        );
        for i in 0..providers {
            toml.push_str(&format!(
                "[[networks.providers]]\nname = \"p{i}\"\nurl = \"http://127.0.0.1:{}\"\n",
                1000 + i
            ));
        }
        let c = Config::from_toml_with(&toml, |_| None).unwrap();
        NetworkLive::new(&c.networks[0], &BreakerPolicy::default(), 0)
    }

    #[test]
    fn a_spike_never_moves_the_best_head_and_its_provider_recovers() {
        let l = network(2);
        assert!(l.observe_head_at(ProviderId::new(0), 1_000, 1_000).accepted());
        assert!(l.observe_head_at(ProviderId::new(1), 1_001, 1_000).accepted());
        assert_eq!(
            l.observe_head_at(ProviderId::new(1), 0xffff_ffff_ffff, 1_100),
            HeadVerdict::Implausible
        );
        assert_eq!(
            l.heads.best_head.load(Ordering::Relaxed),
            1_000,
            "the spiking provider no longer counts"
        );
        assert_eq!(
            l.providers()[1].heads.head.load(Ordering::Relaxed),
            1_001,
            "its head stays what it was"
        );
        assert!(!l.admissible(ProviderId::new(1)));
        assert!(l.admissible(ProviderId::new(0)));
        assert_eq!(l.describe(ProviderId::new(1), 1_100), "outlier");
        assert!(l.update_drift().is_empty(), "nobody drifts behind a spike");
        assert!(l.observe_head_at(ProviderId::new(1), 1_002, 1_200).accepted());
        assert!(l.admissible(ProviderId::new(1)));
        assert_eq!(l.heads.best_head.load(Ordering::Relaxed), 1_002);
        assert_eq!(l.providers()[1].heads.outlier_heads.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_best_head_is_recomputed_so_a_first_report_cannot_stick() {
        // The pool's very first report is an absurd one: nothing to doubt it by, yet.
        let l = network(1);
        assert!(l.observe_probe(ProviderId::new(0), 0xffff_ffff_ffff).accepted());
        assert!(l.observe_probe(ProviderId::new(0), 1_000).accepted());
        assert_eq!(l.heads.best_head.load(Ordering::Relaxed), 1_000);
        // A single-provider pool: time still applies, and its only provider is never left out for it.
        assert_eq!(
            l.observe_head_at(ProviderId::new(0), 0xffff_ffff_ffff, now_ms()),
            HeadVerdict::Implausible
        );
        assert_eq!(l.heads.best_head.load(Ordering::Relaxed), 1_000);
        assert!(l.admissible(ProviderId::new(0)));
    }

    #[test]
    fn a_lone_provider_proves_a_real_jump_by_repeating_it_but_a_spike_never_sticks() {
        let l = network(1);
        assert!(l.observe_head_at(ProviderId::new(0), 1_000, 1_000).accepted());
        // A spike, then normal again: never accepted, and the run it began is forgotten.
        assert_eq!(
            l.observe_head_at(ProviderId::new(0), 0xffff_ffff_ffff, 1_100),
            HeadVerdict::Implausible
        );
        assert!(l.observe_head_at(ProviderId::new(0), 1_001, 1_200).accepted());
        assert_eq!(
            l.observe_head_at(ProviderId::new(0), 0xffff_ffff_ffff, 5_000),
            HeadVerdict::Implausible
        );
        assert_eq!(l.heads.best_head.load(Ordering::Relaxed), 1_001);
        // A node that caught up 10 000 blocks: implausible at first, accepted once repeated (and moving on
        // at the chain's pace) for the confirmation time.
        assert_eq!(
            l.observe_head_at(ProviderId::new(0), 11_000, 6_000),
            HeadVerdict::Implausible
        );
        assert_eq!(
            l.observe_head_at(ProviderId::new(0), 11_001, 6_100),
            HeadVerdict::Implausible
        );
        assert!(l
            .observe_head_at(ProviderId::new(0), 11_004, 6_000 + RULE.confirm_ms)
            .accepted());
        assert_eq!(l.heads.best_head.load(Ordering::Relaxed), 11_004);
    }

    #[test]
    fn an_absurd_first_report_is_caught_by_the_next_probe_once_others_speak() {
        let l = network(4);
        // The hostile provider answers first, before anyone else has a head: nothing to doubt it by.
        assert!(l
            .observe_head_at(ProviderId::new(3), 0xffff_ffff_ffff, 1_000)
            .accepted());
        for i in 0..3 {
            assert!(l.observe_head_at(ProviderId::new(i), 5_000, 1_100).accepted());
        }
        // Its next probe repeats the (already believed) value: the others now outvote it.
        assert_eq!(
            l.observe_probe(ProviderId::new(3), 0xffff_ffff_ffff),
            HeadVerdict::Implausible
        );
        assert!(!l.admissible(ProviderId::new(3)) || l.providers()[3].heads.outlier.load(Ordering::Relaxed));
        assert_eq!(l.heads.best_head.load(Ordering::Relaxed), 5_000);
    }

    #[test]
    fn one_provider_far_ahead_of_three_that_agree_is_an_outlier() {
        let l = network(4);
        for i in 0..3 {
            assert!(l.observe_head_at(ProviderId::new(i), 5_000, 1_000).accepted());
        }
        // Even as the pool's first report from it, and even after a long time.
        assert_eq!(
            l.observe_head_at(ProviderId::new(3), 1_005_000, 1_000),
            HeadVerdict::Implausible
        );
        for i in 0..3 {
            assert!(l.observe_head_at(ProviderId::new(i), 5_001, 2_000).accepted());
        }
        assert_eq!(
            l.observe_head_at(ProviderId::new(3), 1_005_001, 2_000),
            HeadVerdict::Implausible
        );
        assert_eq!(l.heads.best_head.load(Ordering::Relaxed), 5_001);
        assert_eq!(l.plausible_ceiling(2_000), Some(5_001 + 110));
    }
}
