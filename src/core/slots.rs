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

use super::sides::COMMITMENTS;
use super::state::NetworkLive;
use crate::rpc::ProviderId;

/// The fastest slot clock an answer's claim is bounded by (ERs make a slot every 50 ms; base ~400 ms).
const FASTEST_SLOT_MS: u64 = 10;

/// What changed for one provider when slots were re-evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotChange {
    Drifted(bool),
    Stalled(bool),
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
        let live = &self.providers()[p];
        live.probed_slot.store(slot, Ordering::Relaxed);
        live.probed_at_ms.store(now_ms, Ordering::Relaxed);
        self.advance_slot(p, slot, now_ms, true);
    }

    /// An answer's `context.slot`: believed (and returned as the provider's slot) only within what its last
    /// probe said plus what the fastest clock could have made since and `max_slot_drift`.
    pub fn observe_answer_slot(&self, p: ProviderId, slot: u64, now_ms: u64) -> bool {
        let Some(rule) = &self.slots else { return false };
        let live = &self.providers()[p];
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
        let live = &self.providers()[p];
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
        let all = ProviderId::all(self.providers().len());
        let slot = |p: ProviderId| self.providers()[p].head.load(Ordering::Acquire);
        let base_best = all
            .clone()
            .filter(|&p| rule.side[p.index()] == 0 && self.providers()[p].breaker.is_closed())
            .map(slot)
            .max()
            .unwrap_or(0);
        let mut changes = Vec::new();
        for p in all {
            let live = &self.providers()[p];
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
        let live = &self.providers()[p];
        (
            live.head.load(Ordering::Acquire),
            live.head_at_ms.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
