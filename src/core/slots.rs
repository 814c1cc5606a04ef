//! Solana slots per provider. Slots are not one chain's heads: the base layer and each ephemeral rollup
//! run their own clocks, so every rule here compares a provider only with its own side.
//!
//! - Each provider's slot comes from its probe (`getSlot`) and from the `context.slot` of its answers; an
//!   answer may claim at most what the provider's last probe said plus what the fastest clock could have
//!   made since (and `max_slot_drift`), so one absurd `context.slot` cannot raise anybody's mark.
//! - A base-layer provider more than `max_slot_drift` behind the best base-layer provider is left out
//!   (`drifted`) until it catches up.
//! - A provider whose slot has not advanced for `slot_stall_ms` is `stalled`: left out, and on an ER side
//!   with no live provider its accounts' calls get an error naming the ER (`solana::router`). An ER's
//!   `getHealth` says "ok" whatever its state; its slot does not lie.

use std::sync::atomic::Ordering;

use super::state::NetworkLive;
use crate::config::{Network, NetworkKind, ProviderRole};
use crate::rpc::ProviderId;

/// Commitment levels (`processed`, `confirmed`, `finalized`), each with its own mark per side.
pub const COMMITMENTS: usize = 3;

/// The fastest slot clock an answer's claim is bounded by (ERs make a slot every 50 ms; base ~400 ms).
const FASTEST_SLOT_MS: u64 = 10;

/// Each provider's side (0 = base layer, k + 1 = ER k in order of first appearance, as `SolanaNet` counts
/// them) and the slot rules of one solana-magic network.
#[derive(Debug)]
pub struct SlotRule {
    side: Box<[u8]>,
    sides: usize,
    max_drift: u64,
    stall_ms: u64,
}

/// What changed for one provider when slots were re-evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotChange {
    Drifted(bool),
    Stalled(bool),
}

impl SlotRule {
    pub fn for_network(n: &Network) -> Option<SlotRule> {
        if n.kind != NetworkKind::SolanaMagic {
            return None;
        }
        let mut identities: Vec<&str> = Vec::new();
        let side = n
            .providers
            .iter()
            .map(|p| match (p.role, p.identity.as_deref()) {
                (Some(ProviderRole::Ephemeral), Some(id)) => {
                    let k = identities.iter().position(|x| *x == id).unwrap_or_else(|| {
                        identities.push(id);
                        identities.len() - 1
                    });
                    (k + 1).min(u8::MAX as usize) as u8
                }
                _ => 0,
            })
            .collect();
        Some(SlotRule {
            side,
            sides: identities.len() + 1,
            max_drift: n.max_slot_drift,
            stall_ms: n.slot_stall_ms,
        })
    }

    /// How many marks each caller has: one per side and commitment level on Solana (a `finalized` answer
    /// is ~32 slots behind a `processed` one by design, so each level keeps its own), one on EVM.
    pub fn mark_lanes(n: &Network) -> usize {
        SlotRule::for_network(n).map_or(1, |r| r.sides * COMMITMENTS)
    }
}

impl NetworkLive {
    /// The mark lane of `side` at `commitment` (0 processed, 1 confirmed, 2 finalized) and how many lanes
    /// there are: what `MarkKey::on_side` takes.
    pub fn mark_lane(&self, side: u8, commitment: u8) -> (u8, usize) {
        let sides = self.slots.as_ref().map_or(1, |r| r.sides);
        (side * COMMITMENTS as u8 + commitment.min(2), sides * COMMITMENTS)
    }

    /// Provider `p`'s side (0 on EVM networks and for the base layer) and how many sides there are.
    pub fn side_of(&self, p: ProviderId) -> (u8, usize) {
        self.slots
            .as_ref()
            .map_or((0, 1), |r| (r.side.get(p.index()).copied().unwrap_or(0), r.sides))
    }

    /// A probe's slot: the provider's slot is what it says now.
    pub fn observe_probed_slot(&self, p: ProviderId, slot: u64, now_ms: u64) {
        let live = &self.providers[p];
        live.probed_slot.store(slot, Ordering::Relaxed);
        live.probed_at_ms.store(now_ms, Ordering::Relaxed);
        self.advance_slot(p, slot, now_ms, true);
    }

    /// An answer's `context.slot`: believed (and returned as the provider's slot) only within what its last
    /// probe said plus what the fastest clock could have made since and `max_slot_drift`.
    pub fn observe_answer_slot(&self, p: ProviderId, slot: u64, now_ms: u64) -> bool {
        let Some(rule) = &self.slots else { return false };
        let live = &self.providers[p];
        let probed = live.probed_slot.load(Ordering::Relaxed);
        if probed > 0 {
            let since = now_ms.saturating_sub(live.probed_at_ms.load(Ordering::Relaxed));
            let ceiling = probed
                .saturating_add(since / FASTEST_SLOT_MS)
                .saturating_add(rule.max_drift);
            if slot > ceiling {
                return false;
            }
        }
        self.advance_slot(p, slot, now_ms, false);
        true
    }

    fn advance_slot(&self, p: ProviderId, slot: u64, now_ms: u64, probe: bool) {
        let live = &self.providers[p];
        let before = if probe {
            live.head.swap(slot, Ordering::AcqRel)
        } else {
            live.head.fetch_max(slot, Ordering::AcqRel)
        };
        if slot > before || live.head_at_ms.load(Ordering::Relaxed) == 0 {
            live.head_at_ms.store(now_ms, Ordering::Relaxed);
        }
        live.seen_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Re-evaluates drift (base layer) and stalls (every side) for every provider; returns the changes.
    pub fn update_slots(&self, now_ms: u64) -> Vec<(ProviderId, SlotChange)> {
        let Some(rule) = &self.slots else { return Vec::new() };
        let all = ProviderId::all(self.providers.len());
        let slot = |p: ProviderId| self.providers[p].head.load(Ordering::Acquire);
        let base_best = all
            .clone()
            .filter(|&p| rule.side[p.index()] == 0 && self.providers[p].breaker.is_closed())
            .map(slot)
            .max()
            .unwrap_or(0);
        let mut changes = Vec::new();
        for p in all {
            let live = &self.providers[p];
            let s = slot(p);
            if rule.side[p.index()] == 0 {
                let behind = s > 0 && base_best.saturating_sub(s) > rule.max_drift;
                if live.drifted.swap(behind, Ordering::AcqRel) != behind {
                    changes.push((p, SlotChange::Drifted(behind)));
                }
            }
            let since = now_ms.saturating_sub(live.head_at_ms.load(Ordering::Relaxed));
            let stalled = rule.stall_ms > 0 && s > 0 && since >= rule.stall_ms;
            if live.stalled.swap(stalled, Ordering::AcqRel) != stalled {
                changes.push((p, SlotChange::Stalled(stalled)));
            }
        }
        changes
    }

    /// The slot provider `p` last showed, and since when it has not advanced (ms on the process clock).
    pub fn slot_of(&self, p: ProviderId) -> (u64, u64) {
        let live = &self.providers[p];
        (
            live.head.load(Ordering::Acquire),
            live.head_at_ms.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
