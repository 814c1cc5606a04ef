//! Per-client high-water marks: the greatest block height Prism has returned to a client. Exact across
//! shards with `fetch_max`. Per API key always; per session when the client sends `x-prism-session`.
//!
//! Sessions hash into a fixed table: two sessions sharing a slot share a mark, which can only make the
//! mark higher than needed (a provider excluded a little longer), never let the chain go backwards.
//!
//! A key's mark reaches other Prism nodes only through Redis, every `sync_interval_ms`: a client that
//! alternates between nodes can be faster. So a `latest` read is also held to [`ShownHead`], the highest
//! head this node's own providers have shown lately (less the tolerance): what the client may have been
//! answered by another node in front of the same providers.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots in the session table.
const SESSION_SLOTS: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKey {
    /// Index of the API key (0 when the endpoint is open).
    Key(usize),
    /// Hash of the session header value.
    Session(u64),
}

impl MarkKey {
    /// This caller's mark on one side of a Solana network (`side` of `sides`: the base layer and each ER
    /// keep their own clocks, so each has its own mark). Key marks stay exact (the table is sized for
    /// every key on every side); session marks hash the side in.
    pub fn on_side(self, side: u8, sides: usize) -> MarkKey {
        match self {
            MarkKey::Key(i) => MarkKey::Key(i * sides + side as usize),
            MarkKey::Session(h) => MarkKey::Session(h ^ (side as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        }
    }

    /// This caller's mark in lane `lane` of an EVM network (0 = latest, the mark itself; 1 = `safe`,
    /// 2 = `finalized`: each tag keeps its own, never backwards, as `latest` does). Lane 0 is the key
    /// unchanged so the latest mark stays where it always was; key marks of lane `l` sit after `l` tables of
    /// `stride` (the key slots), session marks hash the lane in as [`MarkKey::on_side`] does.
    pub fn in_lane(self, lane: u8, stride: usize) -> MarkKey {
        match self {
            MarkKey::Key(i) => MarkKey::Key(lane as usize * stride + i.min(stride.saturating_sub(1))),
            MarkKey::Session(_) => self.on_side(lane, 0),
        }
    }
}

/// The highest head any provider of the pool has shown (a believed head: a probe, an answer, a `newHeads`
/// frame), kept for `hold_ms` after it was last shown. The pool's best head is recomputed from each
/// provider's latest report, so it drops for a moment whenever the provider at the top falls back before the
/// one that overtook it is heard from again; this does not. Past `hold_ms` without any provider showing it
/// again (every provider has been probed twice by then) the pool really is lower, and it no longer counts.
pub struct ShownHead {
    head: AtomicU64,
    at_ms: AtomicU64,
    hold_ms: u64,
}

impl ShownHead {
    pub fn new(hold_ms: u64) -> Self {
        ShownHead {
            head: AtomicU64::new(0),
            at_ms: AtomicU64::new(0),
            hold_ms,
        }
    }

    /// A provider showed `height` (already believed) at `now_ms`.
    pub fn show(&self, height: u64, now_ms: u64) {
        if height >= self.head.fetch_max(height, Ordering::AcqRel) {
            self.at_ms.fetch_max(now_ms, Ordering::AcqRel);
        }
    }

    /// The highest head shown within `hold_ms` of `now_ms`; 0 when none was.
    pub fn get(&self, now_ms: u64) -> u64 {
        if now_ms.saturating_sub(self.at_ms.load(Ordering::Acquire)) <= self.hold_ms {
            self.head.load(Ordering::Acquire)
        } else {
            0
        }
    }

    /// `at_least` or the highest head shown within `hold_ms`, whichever is higher; the clock (`now_ms`) is
    /// read only when the shown head is higher (the pool's best head is usually the shown head itself).
    pub fn at_least(&self, at_least: u64, now_ms: impl FnOnce() -> u64) -> u64 {
        if self.head.load(Ordering::Acquire) <= at_least {
            return at_least;
        }
        at_least.max(self.get(now_ms()))
    }
}

pub struct Marks {
    keys: Box<[AtomicU64]>,
    sessions: Box<[AtomicU64]>,
}

impl Marks {
    /// `keys` = number of configured API keys; index 0..keys, plus one for "no key".
    pub fn new(keys: usize) -> Self {
        Marks {
            keys: (0..=keys).map(|_| AtomicU64::new(0)).collect(),
            sessions: (0..SESSION_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn slot(&self, k: MarkKey) -> &AtomicU64 {
        match k {
            MarkKey::Key(i) => &self.keys[i.min(self.keys.len() - 1)],
            MarkKey::Session(h) => &self.sessions[(h as usize) % SESSION_SLOTS],
        }
    }

    pub fn get(&self, k: MarkKey) -> u64 {
        self.slot(k).load(Ordering::Acquire)
    }

    pub fn raise(&self, k: MarkKey, height: u64) {
        self.slot(k).fetch_max(height, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_only_rise() {
        let m = Marks::new(2);
        m.raise(MarkKey::Key(1), 10);
        m.raise(MarkKey::Key(1), 7);
        assert_eq!(m.get(MarkKey::Key(1)), 10);
        assert_eq!(m.get(MarkKey::Key(0)), 0);
        m.raise(MarkKey::Session(42), 5);
        assert_eq!(m.get(MarkKey::Session(42)), 5);
        assert_eq!(
            m.get(MarkKey::Session(42 + SESSION_SLOTS as u64)),
            5,
            "collisions share, conservatively"
        );
    }

    #[test]
    fn a_shown_head_holds_for_its_time_and_is_renewed_only_by_showing_it_again() {
        let s = ShownHead::new(200);
        assert_eq!(s.get(0), 0);
        s.show(100, 1_000);
        s.show(80, 1_150);
        assert_eq!(s.get(1_150), 100, "a lower head does not lower it");
        assert_eq!(s.get(1_200), 100);
        assert_eq!(
            s.get(1_201),
            0,
            "not shown again within its time: the pool is lower now"
        );
        s.show(100, 1_300);
        assert_eq!(s.get(1_450), 100, "shown again");
        s.show(101, 1_460);
        assert_eq!(s.get(1_660), 101);
        assert_eq!(s.at_least(101, || panic!("no clock needed")), 101);
        assert_eq!(s.at_least(90, || 1_660), 101);
        assert_eq!(s.at_least(90, || 1_661), 90, "expired");
    }

    #[test]
    fn tag_lanes_are_their_own_marks_and_lane_zero_is_the_key() {
        // Two keys plus "no key": 3 key slots, 3 lanes.
        let m = Marks::new(3 * 3 - 1);
        assert_eq!(MarkKey::Key(1).in_lane(0, 3), MarkKey::Key(1));
        m.raise(MarkKey::Key(1), 100);
        m.raise(MarkKey::Key(1).in_lane(2, 3), 40);
        m.raise(MarkKey::Key(2).in_lane(1, 3), 70);
        assert_eq!(m.get(MarkKey::Key(1)), 100);
        assert_eq!(m.get(MarkKey::Key(1).in_lane(2, 3)), 40);
        assert_eq!(m.get(MarkKey::Key(1).in_lane(1, 3)), 0);
        assert_eq!(m.get(MarkKey::Key(2).in_lane(1, 3)), 70);
        assert_eq!(m.get(MarkKey::Key(2)), 0);
        let s = MarkKey::Session(9);
        assert_eq!(s.in_lane(0, 3), s);
        m.raise(s.in_lane(2, 3), 5);
        assert_eq!(m.get(s), 0);
    }
}
