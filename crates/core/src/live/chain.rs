//! What one shard knows of the chain's recent blocks: one hash per height, learned from every answer that
//! names a block (a block, a receipt, a transaction) and from the `newHeads` frames the subscriptions hub
//! delivers. The cache ties each answer about a block not yet final to the block's hash here, and serves it
//! only while this record still holds that hash (`core::reuse::cache`).
//!
//! A block's hash commits to its whole ancestry, so a height holding another hash than before means that
//! block and everything above it were replaced. What the record can tell from one block:
//! - another hash at a height it holds, with the block's `parentHash` matching what it holds one below: the
//!   chain was replaced from that height exactly (a rollback of one block and a new one mined);
//! - a `parentHash` that does not match the height below, or another hash and no parent to compare (a
//!   receipt names its block, not the parent): replaced from somewhere at or below, how deep this block
//!   cannot say, so everything the record holds is forgotten.
//!
//! Heads delivered by the hub come in order from the fork point up (the hub walks the parent chain back to
//! what it delivered before), so a reorg seen through them is always exact.
//!
//! The heads feed outranks answers: an answer naming another block at a height the feed delivered is a
//! provider behind the chain (or on a fork the feed's provider left); it changes nothing here, and the
//! cache does not keep it.

use std::cell::RefCell;
use std::collections::BTreeMap;

/// A 32-byte block hash.
pub type Hash = [u8; 32];

/// Heights remembered (the oldest are forgotten first).
const HEIGHTS_KEPT: usize = 4096;

/// A block one answer or head names: its height, hash and (blocks only) its parent's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    pub number: u64,
    pub hash: Hash,
    pub parent: Option<Hash>,
}

/// What the record made of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Nothing it held says otherwise (it holds the block now).
    Agrees,
    /// The chain was replaced from this height up: whatever depends on a block there or above is stale.
    Replaced { from: u64 },
    /// An answer naming another block than the heads feed delivered at that height: not recorded.
    Contradicts,
}

#[derive(Debug, Clone, Copy)]
struct Known {
    hash: Hash,
    /// Delivered by the heads feed (a `newHeads` frame, or a block the hub fetched to link one).
    from_heads: bool,
}

#[derive(Default)]
pub struct ChainRecord {
    blocks: RefCell<BTreeMap<u64, Known>>,
}

impl ChainRecord {
    /// The hash held at `height`.
    pub fn hash(&self, height: u64) -> Option<Hash> {
        self.blocks.borrow().get(&height).map(|k| k.hash)
    }

    /// The hash at `height` if the heads feed delivered that block (or confirmed what an answer said): a
    /// block the feed never showed is not proven by it (it may be from before the feed started, or from a
    /// provider on a chain the feed's provider left).
    pub fn proven(&self, height: u64) -> Option<Hash> {
        self.blocks
            .borrow()
            .get(&height)
            .filter(|k| k.from_heads)
            .map(|k| k.hash)
    }

    /// The lowest height held.
    pub fn lowest(&self) -> Option<u64> {
        self.blocks.borrow().keys().next().copied()
    }

    /// Records block `b`, named by the heads feed (`from_heads`) or by an answer.
    pub fn observe(&self, b: Named, from_heads: bool) -> Seen {
        let mut blocks = self.blocks.borrow_mut();
        let below = b.number.checked_sub(1);
        let at = blocks.get(&b.number).copied();
        let under = below.and_then(|n| blocks.get(&n).copied());
        let parent_differs = matches!((b.parent, under), (Some(p), Some(k)) if p != k.hash);
        if !from_heads {
            let against_heads =
                |k: Option<Known>, h: Option<Hash>| matches!((k, h), (Some(k), Some(h)) if k.from_heads && k.hash != h);
            if against_heads(at, Some(b.hash)) || against_heads(under, b.parent) {
                return Seen::Contradicts;
            }
        }
        let replaced_at = at.is_some_and(|k| k.hash != b.hash);
        let from = match (replaced_at, parent_differs, b.parent.is_some() && under.is_some()) {
            // Another block here on the same parent: exactly this height was replaced.
            (true, false, true) => Some(b.number),
            // Another block here or another parent, and no way to tell how deep: all of it.
            (true, _, _) | (_, true, _) => Some(0),
            _ => None,
        };
        if let Some(from) = from {
            drop(blocks.split_off(&from));
        }
        let mark = |k: &mut Known| k.from_heads |= from_heads;
        blocks.entry(b.number).and_modify(mark).or_insert(Known {
            hash: b.hash,
            from_heads,
        });
        if let (Some(n), Some(p)) = (below, b.parent) {
            // A block's parent is as canonical as the block.
            blocks
                .entry(n)
                .and_modify(mark)
                .or_insert(Known { hash: p, from_heads });
        }
        while blocks.len() > HEIGHTS_KEPT {
            blocks.pop_first();
        }
        match from {
            Some(from) => Seen::Replaced { from },
            None => Seen::Agrees,
        }
    }
}

/// `0x` + 64 hex digits.
pub fn parse_hash(s: &str) -> Option<Hash> {
    let hex = s.strip_prefix("0x")?;
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> Hash {
        [n; 32]
    }

    fn block(number: u64, hash: u8, parent: u8) -> Named {
        Named {
            number,
            hash: h(hash),
            parent: Some(h(parent)),
        }
    }

    #[test]
    fn a_chain_that_grows_agrees_and_its_parents_are_recorded() {
        let r = ChainRecord::default();
        assert_eq!(r.observe(block(10, 10, 9), true), Seen::Agrees);
        assert_eq!(r.observe(block(11, 11, 10), true), Seen::Agrees);
        assert_eq!(r.hash(9), Some(h(9)), "the parent of 10");
        assert_eq!(
            r.observe(block(11, 11, 10), false),
            Seen::Agrees,
            "the same block again"
        );
    }

    #[test]
    fn another_block_on_the_same_parent_replaces_exactly_its_height() {
        let r = ChainRecord::default();
        for n in 10..=12u8 {
            r.observe(block(n.into(), n, n - 1), true);
        }
        // A rollback of one block and another one mined: 12' on 11.
        assert_eq!(r.observe(block(12, 112, 11), true), Seen::Replaced { from: 12 });
        assert_eq!(r.hash(12), Some(h(112)));
        assert_eq!(r.hash(11), Some(h(11)));
    }

    #[test]
    fn a_head_whose_parent_differs_forgets_everything_it_cannot_vouch_for() {
        let r = ChainRecord::default();
        for n in 10..=12u8 {
            r.observe(block(n.into(), n, n - 1), true);
        }
        assert_eq!(r.observe(block(13, 113, 112), true), Seen::Replaced { from: 0 });
        assert_eq!(r.hash(11), None, "how deep the reorg went is unknown");
        assert_eq!((r.hash(13), r.hash(12)), (Some(h(113)), Some(h(112))));
        // A receipt naming another block at a held height (no parent to compare): the same.
        let r = ChainRecord::default();
        r.observe(block(12, 12, 11), false);
        let receipt = Named {
            number: 12,
            hash: h(99),
            parent: None,
        };
        assert_eq!(r.observe(receipt, false), Seen::Replaced { from: 0 });
    }

    #[test]
    fn only_blocks_the_heads_feed_showed_are_proven() {
        let r = ChainRecord::default();
        r.observe(block(12, 12, 11), false);
        assert_eq!((r.hash(12), r.proven(12)), (Some(h(12)), None), "an answer alone");
        r.observe(block(13, 13, 12), true);
        assert_eq!(r.proven(12), Some(h(12)), "the feed's head names it as its parent");
        assert_eq!(r.proven(13), Some(h(13)));
    }

    #[test]
    fn an_answer_never_overrides_the_heads_feed() {
        let r = ChainRecord::default();
        r.observe(block(12, 12, 11), true);
        assert_eq!(r.observe(block(12, 99, 11), false), Seen::Contradicts);
        assert_eq!(
            r.observe(block(13, 13, 98), false),
            Seen::Contradicts,
            "its parent contradicts"
        );
        assert_eq!(r.hash(12), Some(h(12)));
        // ... but answers replace what answers said.
        r.observe(block(20, 20, 19), false);
        assert_eq!(r.observe(block(20, 120, 19), false), Seen::Replaced { from: 20 });
        // ... and the feed replaces what answers said.
        assert_eq!(r.observe(block(20, 220, 19), true), Seen::Replaced { from: 20 });
    }

    #[test]
    fn the_record_is_bounded() {
        let r = ChainRecord::default();
        for n in 0..(HEIGHTS_KEPT as u64 + 100) {
            r.observe(
                Named {
                    number: n,
                    hash: [1; 32],
                    parent: None,
                },
                true,
            );
        }
        assert_eq!(r.blocks.borrow().len(), HEIGHTS_KEPT);
        assert_eq!(r.lowest(), Some(100));
    }

    #[test]
    fn hashes_are_parsed_strictly() {
        let s = format!("0x{}", "aB".repeat(32));
        assert_eq!(parse_hash(&s), Some([0xab; 32]));
        assert_eq!(parse_hash(&s[..65]), None);
        assert_eq!(parse_hash(&format!("0x{}", "zz".repeat(32))), None);
        assert_eq!(parse_hash(&"ab".repeat(33)), None);
    }
}
