//! Hedged reads: when a read's answer is later than its provider's recent p95 for the call's family (and
//! at least `min_delay_ms`), the same read goes to the next-best provider of another operator, and the
//! first good answer wins (`core::call::forward` races the two; the loser is dropped, and a connection whose
//! answer was not read in full is never reused). Only idempotent reads in the configured families are
//! hedged, never writes, filters or unknown methods, and each shard keeps a budget: hedges may add at most
//! `budget_percent` of its attempts on the network, and a provider that turned slow gets it first. Hedges are never billed to a key (billing is per client
//! call, at the edge).

use std::cell::Cell;
use std::time::Duration;

use prism_config::HedgePolicy;
use prism_telemetry::snapshot::NetworkHealth;
use prism_wire::rpc::methods::Family;
use prism_wire::rpc::ProviderId;

/// Hedges a quiet shard may save up: a burst after a calm spell stays small.
const MAX_CREDIT: f64 = 10.0;
/// Credit a hedge of a provider in its usual form must leave in the budget. About 5 % of any provider's
/// answers are later than its own p95 by definition; without a reserve that noise would spend the whole
/// budget before a provider that turned slow (the calls hedging exists for) got any.
const RESERVE_FOR_DEGRADED: f64 = 4.0;

/// How late an attempt may be before it is hedged, and whether its provider is degraded (its own p95
/// above the pool's typical one): a degraded provider's hedges come first in the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lateness {
    pub after: Duration,
    pub degraded: bool,
}

/// The hedging rules of one network, ready for the request path.
#[derive(Debug, Clone)]
pub struct Hedging {
    pub enabled: bool,
    /// Credit earned per attempt (`budget_percent / 100`).
    pub per_attempt: f64,
    pub min_delay: Duration,
    /// Bit `f` = family `f` is hedged.
    families: u8,
}

impl Hedging {
    pub fn new(policy: &HedgePolicy) -> Hedging {
        let families = Family::ALL
            .iter()
            .filter(|f| policy.families.iter().any(|n| n == f.name()))
            .fold(0u8, |bits, f| bits | (1 << *f as u8));
        Hedging {
            enabled: policy.enabled && policy.budget_percent > 0.0,
            per_attempt: policy.budget_percent / 100.0,
            min_delay: Duration::from_millis(policy.min_delay_ms),
            families,
        }
    }

    pub fn off() -> Hedging {
        Hedging::new(&HedgePolicy {
            enabled: false,
            ..HedgePolicy::default()
        })
    }

    pub fn covers(&self, family: Family) -> bool {
        self.enabled && self.families & (1 << family as u8) != 0
    }

    /// How long to wait for provider `p`'s answer before hedging: its recent p95 for `family`, or the
    /// pool's typical p95 (the lower median over providers with samples) when that is lower: a provider
    /// that turned slow has a slow p95 of its own, and waiting that long would hedge nothing. At least
    /// `min_delay`. `None` while `p` has no samples for the family (lateness cannot be told yet).
    pub fn delay(&self, health: &NetworkHealth, p: ProviderId, family: Family) -> Option<Lateness> {
        let own = health.providers.get(p.index())?.by_family[family as usize].p95_us;
        if own == 0 {
            return None;
        }
        let mut all = [0u64; ProviderId::MAX];
        let mut n = 0;
        for h in health.providers.iter().take(ProviderId::MAX) {
            let v = h.by_family[family as usize].p95_us;
            if v > 0 {
                all[n] = v;
                n += 1;
            }
        }
        all[..n].sort_unstable();
        let typical = all[(n - 1) / 2];
        Some(Lateness {
            after: Duration::from_micros(own.min(typical)).max(self.min_delay),
            degraded: own > typical,
        })
    }
}

/// A shard's hedge budget on one network: every attempt earns `per_attempt` of a hedge, a hedge spends one.
#[derive(Debug, Default)]
pub struct HedgeBudget {
    credit: Cell<f64>,
}

impl HedgeBudget {
    pub fn earn(&self, per_attempt: f64) {
        self.credit.set((self.credit.get() + per_attempt).min(MAX_CREDIT));
    }

    /// Takes one hedge from the budget, if there is one; a hedge of a provider that is not degraded must
    /// leave [`RESERVE_FOR_DEGRADED`] behind.
    pub fn spend(&self, degraded: bool) -> bool {
        let needs = if degraded { 1.0 } else { 1.0 + RESERVE_FOR_DEGRADED };
        if self.credit.get() >= needs {
            self.credit.set(self.credit.get() - 1.0);
            true
        } else {
            false
        }
    }
}

/// The providers run by the same operator as `p` (bit i = provider i), `p` included: a hedge goes elsewhere.
pub fn same_operator(operators: &[u16], p: ProviderId) -> u64 {
    let mine = operators.get(p.index()).copied();
    operators
        .iter()
        .enumerate()
        .filter(|(_, &o)| Some(o) == mine)
        .fold(0u64, |bits, (i, _)| bits | (1u64 << i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prism_telemetry::snapshot::ProviderHealth;

    #[test]
    fn the_budget_allows_its_share_of_attempts() {
        let b = HedgeBudget::default();
        let mut hedges = 0;
        for _ in 0..10_000 {
            b.earn(0.05);
            if b.spend(true) {
                hedges += 1;
            }
        }
        assert!((499..=500).contains(&hedges), "{hedges}");
        // A calm spell saves at most MAX_CREDIT.
        for _ in 0..100_000 {
            b.earn(0.05);
        }
        let burst = (0..100).take_while(|_| b.spend(true)).count();
        assert_eq!(burst, MAX_CREDIT as usize);
        // A provider in its usual form leaves the reserve to degraded ones.
        for _ in 0..100_000 {
            b.earn(0.05);
        }
        let usual = (0..100).take_while(|_| b.spend(false)).count();
        assert_eq!(usual, (MAX_CREDIT - RESERVE_FOR_DEGRADED) as usize);
        assert!(b.spend(true), "the reserve is there for a degraded provider");
    }

    #[test]
    fn families_and_delay() {
        let h = Hedging::new(&HedgePolicy::default());
        assert!(h.covers(Family::Light) && h.covers(Family::Execute) && h.covers(Family::Logs));
        assert!(!h.covers(Family::Submit) && !h.covers(Family::Trace));
        assert!(!Hedging::off().covers(Family::Light));
        let mut health = NetworkHealth::empty(2);
        assert_eq!(
            h.delay(&health, ProviderId::new(0), Family::Light),
            None,
            "no samples, no hedge"
        );
        let at = |ms, degraded| {
            Some(Lateness {
                after: Duration::from_millis(ms),
                degraded,
            })
        };
        let mut p = ProviderHealth::default();
        p.by_family[Family::Light as usize].p95_us = 5_000;
        health.providers[0] = p.clone();
        assert_eq!(h.delay(&health, ProviderId::new(0), Family::Light), at(20, false));
        p.by_family[Family::Light as usize].p95_us = 80_000;
        health.providers[1] = p;
        assert_eq!(
            h.delay(&health, ProviderId::new(1), Family::Light),
            at(20, true),
            "a provider slower than the pool's typical p95 is hedged at the pool's, and comes first"
        );
        health.providers[0].by_family[Family::Light as usize].p95_us = 120_000;
        assert_eq!(h.delay(&health, ProviderId::new(1), Family::Light), at(80, false));
    }

    #[test]
    fn operators_group_providers() {
        let ops = [0, 1, 0, 2];
        assert_eq!(same_operator(&ops, ProviderId::new(2)), 0b0101);
        assert_eq!(same_operator(&ops, ProviderId::new(3)), 0b1000);
    }
}
