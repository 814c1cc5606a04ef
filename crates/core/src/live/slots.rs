//! Solana slots per provider. Slots are not one chain's heads: the base layer and each ephemeral rollup
//! run their own clocks, so every rule here compares a provider only with its own side.
//!
//! - Each provider's slot comes from its probe (`getSlot`) and from the `context.slot` of its answers; an
//!   answer may claim at most what the provider's last probe said plus what the fastest clock could have
//!   made since (and `max_slot_drift`), so one absurd `context.slot` cannot raise anybody's mark.
//! - Each provider's **cadence** (time per slot) is learned from its probes: the median of its last
//!   [`CADENCE_SAMPLES`] intervals in which the slot advanced. A 50 ms ER and a 400 ms base layer each get
//!   their own.
//! - A provider is `stalled` (left out; on an ER side with no live provider its accounts' calls get an error
//!   naming the ER, `solana::router`) when a probe shows it has made no slot for `slot_stall_slots` of its
//!   own slot times (at least [`MIN_STALL_MS`]; at most `slot_stall_ms`), or when nothing has shown it
//!   advance for `slot_stall_ms`. An ER's `getHealth` says "ok" whatever its state; its slot does not lie.
//!   A probe that sees the slot move again puts it back.
//! - A base-layer provider more than `max_slot_drift` behind the best base-layer provider is left out
//!   (`drifted`) until it catches up; so is a provider of any side that answered "Node is behind by N
//!   slots" (`-32005`), taken at its word (its slot is the best of its side less N) until its next probe.
//! - Where a provider's slot is now, between probes ([`NetworkLive::slot_now`]): its last known slot plus
//!   what its cadence made since, so a caller's mark (raised by the freshest answer) is compared with a
//!   current figure, not a probe's up to an interval old.

use std::sync::atomic::Ordering;

pub use crate::live::sides::CADENCE_SAMPLES;
use crate::live::sides::{SlotClock, COMMITMENTS};
use crate::live::state::NetworkLive;
use prism_wire::jsonscan::{object_field, plain_str, plain_u64};
use prism_wire::rpc::ProviderId;

/// The fastest slot clock an answer's claim is bounded by (ERs make a slot every 50 ms; base ~400 ms).
const FASTEST_SLOT_MS: u64 = 10;

/// How far (a factor either way) an interval's µs per slot may be from the cadence and still count at once.
const ODD: f64 = 1.5;

/// The shortest a slot may stand still before its provider is stalled, whatever its cadence: a probe's
/// estimate of when the newest slot was made is off by a fraction of the probe interval.
pub const MIN_STALL_MS: u64 = 500;

/// What changed for one provider when slots were re-evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotChange {
    Drifted(bool),
    Stalled(bool),
}

/// A provider said it is behind and was left out ([`NetworkLive::told_behind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    pub behind: u64,
    /// It was in rotation until now (not already out on an earlier "behind").
    pub newly: bool,
}

impl SlotClock {
    /// µs per slot (0 while unknown).
    pub fn per_slot_us(&self) -> u64 {
        self.per_slot_us.load(Ordering::Relaxed)
    }

    /// Takes one interval's µs per slot. One far (more than [`ODD`] times) from the cadence is kept back;
    /// a second one on the same side means the clock changed, and both count.
    fn sample(&self, us: u64) {
        let us = us.clamp(1, u32::MAX as u64) as u32;
        let per = self.per_slot_us() as u32;
        let side = |v: u32| match (per, v) {
            (0, _) => 0i8,
            (p, v) if v as f64 > p as f64 * ODD => 1,
            (p, v) if (v as f64) < p as f64 / ODD => -1,
            _ => 0,
        };
        let held = self.odd.swap(0, Ordering::Relaxed);
        match side(us) {
            0 => {}
            s if held != 0 && side(held) == s => self.record(held),
            _ => {
                self.odd.store(us, Ordering::Relaxed);
                return;
            }
        }
        self.record(us);
    }

    fn record(&self, us: u32) {
        let k = self.next.fetch_add(1, Ordering::Relaxed) % CADENCE_SAMPLES;
        self.samples[k].store(us, Ordering::Relaxed);
        let mut v = [0u32; CADENCE_SAMPLES];
        let mut n = 0;
        for s in &self.samples {
            let s = s.load(Ordering::Relaxed);
            if s > 0 {
                v[n] = s;
                n += 1;
            }
        }
        let v = &mut v[..n];
        v.sort_unstable();
        self.per_slot_us.store(u64::from(v[n / 2]), Ordering::Relaxed);
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

    /// A probe's slot: the provider's slot is what it says now. Learns its cadence and when its newest
    /// slot was made; a probe clears a "behind" the provider told.
    pub fn observe_probed_slot(&self, p: ProviderId, slot: u64, now_ms: u64) {
        let live = &self.providers()[p];
        let prev_slot = live.slots.probed_slot.swap(slot, Ordering::Relaxed);
        let prev_at = live.slots.probed_at_ms.swap(now_ms, Ordering::Relaxed);
        let clock = &live.slots.clock;
        clock.told_behind.store(false, Ordering::Relaxed);
        if slot > prev_slot {
            let per_us = clock.per_slot_us();
            // The slots since the last probe were made from then on, one per slot time: the newest one that
            // long after it (a clock that stopped half-way shows it now, not a probe interval later).
            // A first sighting, or one after a stall, is taken as made now.
            let made = if prev_slot == 0 || per_us == 0 || live.slots.stalled.load(Ordering::Relaxed) {
                now_ms
            } else {
                prev_at
                    .saturating_add((slot - prev_slot).saturating_mul(per_us) / 1000)
                    .min(now_ms)
            };
            clock.made_at_ms.store(made, Ordering::Relaxed);
            let (moved, moved_at) = (
                clock.moved_slot.load(Ordering::Relaxed),
                clock.moved_at_ms.load(Ordering::Relaxed),
            );
            // A cadence sample runs from the last advance to this one, unless probes in between saw the clock
            // stand still for longer than two slot times (a pause, not a cadence).
            let stood_ms = prev_at.saturating_sub(moved_at);
            let paused = per_us > 0 && stood_ms.saturating_mul(1000) > 2 * per_us;
            if moved > 0 && slot > moved && now_ms > moved_at && !paused {
                clock.sample((now_ms - moved_at).saturating_mul(1000) / (slot - moved));
            }
            clock.moved_slot.store(slot, Ordering::Relaxed);
            clock.moved_at_ms.store(now_ms, Ordering::Relaxed);
        } else if slot < prev_slot {
            // Its clock went back (a restarted node, another node behind one URL): start over from here.
            clock.made_at_ms.store(now_ms, Ordering::Relaxed);
            clock.moved_slot.store(slot, Ordering::Relaxed);
            clock.moved_at_ms.store(now_ms, Ordering::Relaxed);
        }
        self.advance_slot(p, slot, now_ms, true);
    }

    /// An answer's `context.slot`: believed (and returned as the provider's slot) only within what its last
    /// probe said plus what the fastest clock could have made since and `max_slot_drift`.
    pub fn observe_answer_slot(&self, p: ProviderId, slot: u64, now_ms: u64) -> bool {
        let Some(rule) = &self.slots else { return false };
        let live = &self.providers()[p];
        let probed = live.slots.probed_slot.load(Ordering::Relaxed);
        if probed > 0 {
            let since = now_ms.saturating_sub(live.slots.probed_at_ms.load(Ordering::Relaxed));
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
            live.heads.head.swap(slot, Ordering::AcqRel)
        } else {
            live.heads.head.fetch_max(slot, Ordering::AcqRel)
        };
        if slot > before || live.heads.head_at_ms.load(Ordering::Relaxed) == 0 {
            live.heads.head_at_ms.store(now_ms, Ordering::Relaxed);
        }
        live.heads.seen_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Provider `p` answered `error` (a `-32005` "Node is behind by N slots", with `data.numSlotsBehind`
    /// or the number in the message): its slot is taken as the best of its side less N, and it is out of
    /// rotation until its next probe says otherwise. The best of the side is the other usable providers'
    /// (so one provider's words move only its own standing); with none, nothing changes. `None` when the
    /// error is not one of those, or nothing changed.
    pub fn told_behind(&self, p: ProviderId, error: &[u8], now_ms: u64) -> Option<Told> {
        let told = self.told_behind_quietly(p, error, now_ms)?;
        if told.newly {
            tracing::warn!(network = %self.names.network, provider = %self.provider_name(p), behind = told.behind,
                "provider says it is behind; excluded until its next probe says otherwise");
        }
        Some(told)
    }

    fn told_behind_quietly(&self, p: ProviderId, error: &[u8], now_ms: u64) -> Option<Told> {
        let rule = self.slots.as_ref()?;
        let behind = slots_behind(error)?;
        let side = rule.side.get(p.index()).copied().unwrap_or(0);
        let best = ProviderId::all(self.providers().len())
            .filter(|&q| q != p && rule.side.get(q.index()).copied() == Some(side))
            .filter(|&q| self.admissible(q) && self.providers()[q].breaker.is_closed())
            .map(|q| self.slot_now(q, now_ms))
            .max();
        // With nobody else on its side, leaving it out would only turn its own answer into "none".
        let best = best.filter(|&b| b > 0)?;
        let live = &self.providers()[p];
        live.heads.head.store(best.saturating_sub(behind), Ordering::Release);
        live.heads.drifted.store(true, Ordering::Release);
        let newly = !live.slots.clock.told_behind.swap(true, Ordering::Relaxed);
        Some(Told { behind, newly })
    }

    /// Where provider `p`'s slot may be now: its last known slot plus what its cadence made since (a quarter
    /// more, rounded up), for up to `slot_stall_slots` slots (beyond that it would be stalled). Its last known slot when its cadence is
    /// unknown, it is stalled, or on an EVM network (its head).
    pub fn slot_now(&self, p: ProviderId, now_ms: u64) -> u64 {
        let live = &self.providers()[p];
        let head = live.heads.head.load(Ordering::Acquire);
        let Some(rule) = &self.slots else { return head };
        let per_us = live.slots.clock.per_slot_us();
        if per_us == 0 || head == 0 || live.slots.stalled.load(Ordering::Relaxed) {
            return head;
        }
        let since_ms = now_ms.saturating_sub(live.heads.head_at_ms.load(Ordering::Relaxed));
        // A quarter more than the cadence says, rounded up: a cadence learned a little slow must not leave a
        // provider that keeps pace out (one a slot behind costs a lagging answer, asked again elsewhere).
        let made = since_ms
            .saturating_mul(1250)
            .div_ceil(per_us)
            .min(rule.stall_slots.max(1));
        head.saturating_add(made)
    }

    /// How long provider `p`'s slot may stand still before it is stalled: `slot_stall_slots` of its own
    /// slot times, within [`MIN_STALL_MS`] and `slot_stall_ms` (just `slot_stall_ms` while its cadence is
    /// unknown or `slot_stall_slots` is 0). 0 = the check is off.
    pub fn stall_after_ms(&self, p: ProviderId) -> u64 {
        let Some(rule) = &self.slots else { return 0 };
        let per_us = self.providers()[p].slots.clock.per_slot_us();
        if rule.stall_ms == 0 || rule.stall_slots == 0 || per_us == 0 {
            return rule.stall_ms;
        }
        (rule.stall_slots.saturating_mul(per_us) / 1000)
            .max(MIN_STALL_MS)
            .min(rule.stall_ms)
    }

    /// Re-evaluates drift (base layer, and "behind" told on any side) and stalls (every side) for every
    /// provider; returns the changes.
    pub fn update_slots(&self, now_ms: u64) -> Vec<(ProviderId, SlotChange)> {
        let Some(rule) = &self.slots else { return Vec::new() };
        let all = ProviderId::all(self.providers().len());
        let slot = |p: ProviderId| self.providers()[p].heads.head.load(Ordering::Acquire);
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
            let told = live.slots.clock.told_behind.load(Ordering::Relaxed);
            let behind = told || (rule.side[p.index()] == 0 && s > 0 && base_best.saturating_sub(s) > rule.max_drift);
            if live.heads.drifted.swap(behind, Ordering::AcqRel) != behind && !told {
                changes.push((p, SlotChange::Drifted(behind)));
            }
            let made = live.slots.clock.made_at_ms.load(Ordering::Relaxed);
            let stall_ms = self.stall_after_ms(p);
            // What its last probe showed (the clock stood still from `made` to then), or, when probes stopped
            // showing anything, how long nothing has shown it advance (answers included).
            let observed = live.slots.probed_at_ms.load(Ordering::Relaxed);
            let alive = made.max(live.heads.head_at_ms.load(Ordering::Relaxed));
            let stalled = rule.stall_ms > 0
                && s > 0
                && made > 0
                && (observed.saturating_sub(made) >= stall_ms || now_ms.saturating_sub(alive) >= rule.stall_ms);
            if live.slots.stalled.swap(stalled, Ordering::AcqRel) != stalled {
                changes.push((p, SlotChange::Stalled(stalled)));
            }
        }
        changes
    }

    /// The slot provider `p` last showed, and since when it has not advanced (ms on the process clock).
    pub fn slot_of(&self, p: ProviderId) -> (u64, u64) {
        let live = &self.providers()[p];
        (
            live.heads.head.load(Ordering::Acquire),
            live.heads.head_at_ms.load(Ordering::Relaxed),
        )
    }
}

/// N of a "Node is behind by N slots" error object (`-32005`): `data.numSlotsBehind`, else the number in
/// the message. `None` for any other error (a "Node is unhealthy" without a number included).
pub fn slots_behind(error: &[u8]) -> Option<u64> {
    if object_field(error, "code").and_then(|c| std::str::from_utf8(c).ok()) != Some("-32005") {
        return None;
    }
    let stated = object_field(error, "data")
        .and_then(|d| object_field(d, "numSlotsBehind"))
        .and_then(plain_u64);
    stated.or_else(|| {
        let message = object_field(error, "message").and_then(plain_str)?;
        let rest = &message[message.to_ascii_lowercase().find("behind by ")? + "behind by ".len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..digits.min(19)].parse().ok()
    })
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
