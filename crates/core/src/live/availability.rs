//! Block availability: the lowest block each provider has state and logs for (its floor). A pruned or
//! snapshot-synced node answers "missing trie node" / "pruned" below it; asking it first costs every
//! historical read a wasted round trip. The floor is declared (`floor_block`, never forgotten) or learned
//! from answers ([`Floor::learn`]), shared by every shard through atomics on `ProviderLive`. Routing puts a
//! provider whose floor is above a read's block in a later tier (`core::routing::router`); the prober re-asks a
//! learned floor now and then ([`Floor::recheck_due`]) so a node that gained history is used again.

use std::sync::atomic::{AtomicU64, Ordering};

use prism_wire::jsonscan::{hex_quantity, nth_element, object_field, plain_str};
use prism_wire::rpc::methods::{BlockRef, MethodId};

/// One provider's floor: the configured one and the one its answers taught.
#[derive(Debug, Default)]
pub struct Floor {
    configured: AtomicU64,
    learned: AtomicU64,
    /// When `learned` last rose or was last re-checked (process-clock ms).
    learned_at_ms: AtomicU64,
}

impl Floor {
    pub fn new(configured: u64) -> Self {
        Floor {
            configured: AtomicU64::new(configured),
            ..Default::default()
        }
    }

    /// A reload may change `floor_block`; what was learned stays.
    pub fn set_configured(&self, floor: u64) {
        self.configured.store(floor, Ordering::Relaxed);
    }

    /// The lowest block this provider is believed to have (0: everything).
    pub fn get(&self) -> u64 {
        self.configured
            .load(Ordering::Relaxed)
            .max(self.learned.load(Ordering::Relaxed))
    }

    pub fn learned(&self) -> u64 {
        self.learned.load(Ordering::Relaxed)
    }

    /// Whether the provider should have `block`.
    pub fn has(&self, block: u64) -> bool {
        block >= self.get()
    }

    /// A read pinned to `block` found no data there. That proves a floor above `block` only when the block
    /// is well below the provider's own `head`: near (or above) its head the node may simply not have it
    /// yet ("header not found" from a node a block behind), and learning a floor there would push the
    /// provider out of every historical read. Returns whether the floor rose.
    pub fn learn(&self, block: u64, head: u64, margin: u64, now_ms: u64) -> bool {
        if !proves_floor(block, head, margin) {
            return false;
        }
        let floor = block + 1;
        let before = self.learned.fetch_max(floor, Ordering::AcqRel);
        if floor > before {
            self.learned_at_ms.store(now_ms, Ordering::Relaxed);
            return floor > self.configured.load(Ordering::Relaxed);
        }
        false
    }

    /// The block to re-ask when a learned floor (above the configured one) has not been checked for
    /// `every_ms`: the highest block the provider was found to lack. Claims the check (restarts the clock), so
    /// one shard asks.
    pub fn recheck_due(&self, now_ms: u64, every_ms: u64) -> Option<u64> {
        let learned = self.learned.load(Ordering::Acquire);
        if learned == 0 || learned <= self.configured.load(Ordering::Relaxed) {
            return None;
        }
        let at = self.learned_at_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(at) < every_ms {
            return None;
        }
        self.learned_at_ms
            .compare_exchange(at, now_ms, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| learned - 1)
    }

    /// The re-check at `block` found data: the node has history again, so the learned floor is forgotten
    /// (a new miss teaches it again). Only if nothing raised it meanwhile.
    pub fn forget(&self, block: u64) {
        let _ = self
            .learned
            .compare_exchange(block + 1, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Whether no data at `block` from a provider at `head` shows the provider lacks history there.
pub fn proves_floor(block: u64, head: u64, margin: u64) -> bool {
    head > 0 && block.saturating_add(margin) < head
}

/// The lowest block a read needs, when it names one: a block number, or the `fromBlock` of an
/// `eth_getLogs` filter (`earliest` is block 0). Reads at a tag or a hash name none.
pub fn lowest_block(id: MethodId, block: BlockRef, params: Option<&[u8]>) -> Option<u64> {
    match block {
        BlockRef::Number(n) => Some(n),
        BlockRef::NotApplicable if id == MethodId::GetLogs => {
            let filter = nth_element(params?, 0)?;
            let from = object_field(filter, "fromBlock")?;
            match plain_str(from) {
                Some("earliest") => Some(0),
                _ => hex_quantity(from),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_well_below_the_head_raises_the_floor_and_one_near_it_does_not() {
        let f = Floor::new(0);
        assert!(f.has(0));
        assert!(f.learn(999, 10_000, 10, 5), "a miss deep in history proves a floor");
        assert_eq!(f.get(), 1_000);
        assert!(!f.has(999) && f.has(1_000));
        assert!(!f.learn(500, 10_000, 10, 6), "a lower miss teaches nothing new");
        assert_eq!(f.get(), 1_000, "never lowered by a miss");
        assert!(
            !f.learn(9_995, 10_000, 10, 7),
            "near the head the node may just not have it yet"
        );
        assert!(!f.learn(20_000, 10_000, 10, 7), "above its head");
        assert!(!f.learn(5, 0, 10, 7), "a provider with no known head proves nothing");
        assert_eq!(f.get(), 1_000);
    }

    #[test]
    fn a_configured_floor_is_kept_and_only_learned_ones_are_rechecked() {
        let f = Floor::new(2_000);
        assert!(
            !f.learn(1_500, 10_000, 10, 0),
            "below the configured floor: nothing new"
        );
        assert_eq!(f.recheck_due(1_000_000, 1), None, "a declared floor is never rechecked");
        assert!(f.learn(2_999, 10_000, 10, 100));
        assert_eq!(f.get(), 3_000);
        assert_eq!(f.recheck_due(150, 100), None, "not yet");
        assert_eq!(f.recheck_due(200, 100), Some(2_999));
        assert_eq!(f.recheck_due(200, 100), None, "claimed: one shard asks");
        f.forget(2_999);
        assert_eq!(f.get(), 2_000, "the declared floor stays");
        assert_eq!(f.recheck_due(10_000, 100), None);
    }

    #[test]
    fn forgetting_loses_to_a_floor_raised_meanwhile() {
        let f = Floor::new(0);
        assert!(f.learn(99, 10_000, 10, 0));
        assert_eq!(f.recheck_due(1_000, 100), Some(99));
        assert!(f.learn(199, 10_000, 10, 1_001));
        f.forget(99);
        assert_eq!(f.get(), 200);
    }

    #[test]
    fn the_lowest_block_of_a_read() {
        assert_eq!(
            lowest_block(MethodId::of("eth_call"), BlockRef::Number(7), None),
            Some(7)
        );
        assert_eq!(lowest_block(MethodId::of("eth_call"), BlockRef::Latest, None), None);
        assert_eq!(
            lowest_block(
                MethodId::of("eth_getLogs"),
                BlockRef::NotApplicable,
                Some(br#"[{"fromBlock":"0x10","toBlock":"0x20"}]"#)
            ),
            Some(16)
        );
        assert_eq!(
            lowest_block(
                MethodId::of("eth_getLogs"),
                BlockRef::NotApplicable,
                Some(br#"[{"fromBlock":"earliest"}]"#)
            ),
            Some(0)
        );
        assert_eq!(
            lowest_block(
                MethodId::of("eth_getLogs"),
                BlockRef::NotApplicable,
                Some(br#"[{"blockHash":"0xab"}]"#)
            ),
            None
        );
    }
}
