//! Finality tags (`safe`, `finalized`): each provider's own view of them, the pool's agreed value, and how a
//! tag read's answer is judged. Providers disagree on these tags by tens of blocks (one lagging node, a load
//! balancer over nodes at different heights), so a tag read forwarded to whoever scores best can go
//! backwards from one call to the next. The prober asks each provider for its tags now and then
//! (`upstream::prober`), routing prefers providers at or above the agreed value (`core::routing::router`, `Ask::tag`),
//! and each caller has a mark per tag (`MarkKey::in_lane`) that an answer must not go below.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use prism_wire::rpc::methods::{BlockRef, Finality};

/// What one provider last said its `safe` / `finalized` blocks are (0: not known).
#[derive(Debug, Default)]
pub struct TagHeads {
    heads: [AtomicU64; 2],
    /// The provider answered the tag with an error: it is not asked again, and routes no tag read first.
    unsupported: [AtomicBool; 2],
}

impl TagHeads {
    pub fn get(&self, t: Finality) -> u64 {
        self.heads[t.index()].load(Ordering::Relaxed)
    }

    /// A probe's answer: the tag is what the provider says now (it may have gone down: another node behind
    /// its load balancer).
    pub fn set(&self, t: Finality, n: u64) {
        self.heads[t.index()].store(n, Ordering::Relaxed);
    }

    /// A client's answer showed the provider at `n` at least.
    pub fn raise(&self, t: Finality, n: u64) {
        self.heads[t.index()].fetch_max(n, Ordering::Relaxed);
    }

    /// A client's answer showed the provider at `n`, below what it said before: routing moves off it until
    /// its next probe.
    pub fn lower(&self, t: Finality, n: u64) {
        self.heads[t.index()].fetch_min(n, Ordering::Relaxed);
    }

    pub fn unsupported(&self, t: Finality) -> bool {
        self.unsupported[t.index()].load(Ordering::Relaxed)
    }

    /// Remembers that the provider does not serve the tag; true the first time (to log once).
    pub fn set_unsupported(&self, t: Finality) -> bool {
        self.heads[t.index()].store(0, Ordering::Relaxed);
        !self.unsupported[t.index()].swap(true, Ordering::Relaxed)
    }
}

/// The pool's agreed value per tag, recomputed by the prober ([`agreed_value`]).
#[derive(Debug, Default)]
pub struct PoolTags {
    agreed: [AtomicU64; 2],
}

impl PoolTags {
    pub fn agreed(&self, t: Finality) -> u64 {
        self.agreed[t.index()].load(Ordering::Relaxed)
    }

    pub fn set(&self, t: Finality, n: u64) {
        self.agreed[t.index()].store(n, Ordering::Relaxed);
    }
}

/// One provider's report of a tag, with its own believed head.
#[derive(Debug, Clone, Copy)]
pub struct TagReport {
    pub tag: u64,
    pub head: u64,
}

/// The pool's agreed value of a tag: the highest tag reported by a provider that counts (right chain, not an
/// outlier, not drifted: the caller filters), among reports not above that provider's own believed head and
/// not above the pool's best head. Why the highest: finality is a fact of the chain, not of a node, so an
/// honest provider can only be behind on it, never ahead; the highest honest report is the closest to the
/// truth, and the others are lagging. A dishonest report cannot go far either: it is bounded by heads that
/// passed `HeadRule` (a tag above any believed head names a block nobody has). 0 when nobody reports one.
pub fn agreed_value(reports: impl IntoIterator<Item = TagReport>, best_head: u64) -> u64 {
    reports
        .into_iter()
        .filter(|r| r.tag > 0 && r.tag <= r.head && r.tag <= best_head)
        .map(|r| r.tag)
        .max()
        .unwrap_or(0)
}

/// The tag a read names, if it is one of the finality tags.
pub fn tag_of(block: BlockRef) -> Option<Finality> {
    match block {
        BlockRef::Final(t) => Some(t),
        _ => None,
    }
}

/// What a tag read's answer (the block `number` it revealed) means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagCheck {
    /// At or above the caller's mark for the tag: answer it, raise the mark.
    Fine,
    /// Below the caller's mark: the client has seen a later one; ask another provider.
    Lagging,
    /// Above any block the pool believes exists (`ceiling`, 0 = no head known yet): never answered, and never
    /// allowed to raise a mark (which would make every honest answer look lagging).
    Implausible,
}

pub fn check_answer(number: u64, mark: u64, ceiling: u64) -> TagCheck {
    if ceiling > 0 && number > ceiling {
        TagCheck::Implausible
    } else if number < mark {
        TagCheck::Lagging
    } else {
        TagCheck::Fine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(tag: u64, head: u64) -> TagReport {
        TagReport { tag, head }
    }

    #[test]
    fn the_agreed_value_is_the_highest_sound_report() {
        // Two honest providers, one 45 blocks behind on `safe` (eRPC #1030): the agreed value is the ahead one.
        assert_eq!(agreed_value([r(1_000, 1_064), r(955, 1_060)], 1_064), 1_000);
        // A tag above the provider's own head names a block it does not have: not counted.
        assert_eq!(agreed_value([r(2_000, 1_064), r(955, 1_060)], 1_064), 955);
        // A tag above the pool's best head (a provider whose head is an outlier's, say): not counted.
        assert_eq!(agreed_value([r(1_070, 1_080), r(955, 1_060)], 1_064), 955);
        // Nobody reports (unsupported everywhere, or not probed yet).
        assert_eq!(agreed_value([r(0, 1_064)], 1_064), 0);
        assert_eq!(agreed_value([], 0), 0);
        // Instant finality: the tag is the head.
        assert_eq!(agreed_value([r(1_064, 1_064)], 1_064), 1_064);
    }

    #[test]
    fn a_tag_answer_below_the_mark_is_lagging_and_above_every_head_is_implausible() {
        assert_eq!(check_answer(100, 100, 200), TagCheck::Fine);
        assert_eq!(check_answer(99, 100, 200), TagCheck::Lagging);
        assert_eq!(check_answer(201, 0, 200), TagCheck::Implausible);
        assert_eq!(
            check_answer(u64::MAX, 0, 0),
            TagCheck::Fine,
            "no head known yet: nothing to doubt it by"
        );
    }

    #[test]
    fn a_providers_tags_move_with_probes_and_answers() {
        let t = TagHeads::default();
        t.set(Finality::Safe, 100);
        t.raise(Finality::Safe, 90);
        assert_eq!(t.get(Finality::Safe), 100);
        t.lower(Finality::Safe, 80);
        assert_eq!(t.get(Finality::Safe), 80);
        assert_eq!(t.get(Finality::Finalized), 0);
        assert!(t.set_unsupported(Finality::Finalized));
        assert!(!t.set_unsupported(Finality::Finalized), "logged once");
        assert!(t.unsupported(Finality::Finalized) && !t.unsupported(Finality::Safe));
    }
}
