//! The deterministic-result cache, one per shard per network, bounded in bytes (S3-FIFO eviction via
//! quick_cache's unsync cache: no locks, the shard owns it).
//!
//! Cached: chain id; blocks, transactions and receipts by hash once included; calls and state reads pinned to
//! a block hash (EIP-1898); reads pinned to a block number at least `cache_depth_blocks` below the pool's head
//! or at or below the pool's agreed `finalized` block (`core::live::finality`); logs by block hash or for a closed
//! range below that depth or finalized. Never: latest/pending/safe/finalized reads, null results, errors,
//! anything a write could change, answers over `max_entry_bytes`.
//!
//! Every answer about a block not yet final is tied to that block (an [`Anchor`]): its height and the hash
//! this shard's [`ChainRecord`] holds there (a receipt, a transaction or a block names its own; a read
//! pinned to a number takes the record's hash at that number, and is not kept when the record has none).
//! It is served only while the record holds that hash *as the heads feed delivered it* and this shard
//! follows the chain's heads (a live `newHeads` feed on a provider at the pool's head, linked since it was
//! last subscribed, [`Proof::heads`]): then every reorg the node announces reaches the record before the next
//! read, and a height that gets another hash drops every entry anchored at or above it
//! (`ResultCache::observe`). A block the feed never showed (from before it started) proves nothing. Without a live feed only final answers are
//! served. Final answers (at or below `finalized`), chain id and reads pinned to a block hash are kept
//! until evicted: they cannot change (a block hash names one block, canonical or not, and a node that still
//! has it answers the same).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use quick_cache::unsync::Cache;
use quick_cache::{Lifecycle, Weighter};

use prism_wire::jsonscan::{hex_quantity, nth_element, object_field, plain_str};
use prism_wire::rpc::methods::{BlockRef, HeadHint, Kind, MethodId, MethodInfo};

use crate::live::chain::parse_hash;
pub use crate::live::chain::{ChainRecord, Hash, Named, Seen};

/// Why a request may be answered from the cache, if its answer qualifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// Never changes (chain id; a read pinned to a block hash).
    Forever,
    /// Depends on the block at this height (and every block below it) staying canonical.
    Height(u64),
    /// Depends on the block the answer itself names (a receipt's, a transaction's, a block's own).
    Named,
}

/// What a stored answer depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// Nothing that can change: chain id, a read pinned to a block hash, a final block.
    Forever,
    /// The block `hash` staying canonical at `height`.
    Block { height: u64, hash: Hash },
}

/// What a cached answer about a block not yet final needs before it is served.
#[derive(Debug, Clone, Copy, Default)]
pub struct Proof {
    /// The pool's agreed `finalized` block (0: unknown): at or below it, nothing needs proving.
    pub finalized: u64,
    /// This shard follows the chain's heads right now, so its record has every reorg the node announced.
    pub heads: bool,
}

/// Methods addressed by a hash whose answer names the block it depends on.
fn names_its_block(id: MethodId) -> bool {
    matches!(
        id,
        MethodId::GetBlockByHash
            | MethodId::GetTransactionByHash
            | MethodId::GetTransactionReceipt
            | MethodId::GetTransactionByBlockHashAndIndex
    )
}

/// Methods whose answer never changes once there is one: they name a block by hash and answer about that
/// block only (a node that has the block answers the same whether it is canonical or not).
fn fixed_by_hash(id: MethodId) -> bool {
    matches!(
        id,
        MethodId::GetBlockTransactionCountByHash
            | MethodId::GetUncleCountByBlockHash
            | MethodId::GetUncleByBlockHashAndIndex
            | MethodId::ChainId
            | MethodId::NetVersion
    )
}

/// Whether a request's answer could be cached, given the pool's best head and its agreed `finalized` block
/// (0: unknown). A block at or below `finalized` cannot be reorganised away, so it needs no depth.
pub fn request_pin(
    info: &MethodInfo,
    block: BlockRef,
    params: Option<&[u8]>,
    head: u64,
    depth: u64,
    finalized: u64,
) -> Option<Pin> {
    if !info.cacheable || !matches!(info.kind, Kind::Read | Kind::Local) || info.head == HeadHint::ResultIsHead {
        return None;
    }
    let deep = |n: u64| head > 0 && (n.saturating_add(depth) <= head || n <= finalized);
    match block {
        // `requireCanonical` asks the node to check the block is canonical now: an answer for the moment.
        BlockRef::Pinned if require_canonical(info, params) => None,
        BlockRef::Pinned => Some(Pin::Forever),
        BlockRef::Number(n) if deep(n) => Some(Pin::Height(n)),
        BlockRef::Number(_) | BlockRef::Latest | BlockRef::Tag | BlockRef::Final(_) => None,
        BlockRef::NotApplicable if names_its_block(info.id) => Some(Pin::Named),
        BlockRef::NotApplicable if fixed_by_hash(info.id) => Some(Pin::Forever),
        BlockRef::NotApplicable if info.id == MethodId::GetLogs => {
            let filter = nth_element(params?, 0)?;
            if object_field(filter, "blockHash").is_some() {
                return Some(Pin::Named);
            }
            let from = hex_quantity(object_field(filter, "fromBlock")?)?;
            let to = hex_quantity(object_field(filter, "toBlock")?)?;
            (from <= to && deep(to)).then_some(Pin::Height(to))
        }
        BlockRef::NotApplicable => None,
    }
}

/// EIP-1898's `{"blockHash": ..., "requireCanonical": true}`.
fn require_canonical(info: &MethodInfo, params: Option<&[u8]>) -> bool {
    info.block_param
        .and_then(|i| nth_element(params?, i))
        .and_then(|b| object_field(b, "requireCanonical"))
        == Some(b"true")
}

/// Whether an answer may be stored: a non-null result, and for transactions, one already in a block.
pub fn answer_cacheable(id: MethodId, value: &[u8], is_error: bool) -> bool {
    if is_error || value == b"null" {
        return false;
    }
    match id {
        MethodId::GetTransactionByHash | MethodId::GetTransactionByBlockHashAndIndex => {
            object_field(value, "blockHash").is_some_and(|h| h != b"null")
        }
        _ => true,
    }
}

/// The block an answer names, for the chain record and the cache's anchors: a block's own number, hash
/// and parent; a receipt's or a transaction's block.
pub fn named_block(id: MethodId, value: &[u8]) -> Option<Named> {
    let (number, hash, parent) = match id {
        MethodId::GetBlockByNumber | MethodId::GetBlockByHash => ("number", "hash", Some("parentHash")),
        MethodId::GetTransactionReceipt
        | MethodId::GetTransactionByHash
        | MethodId::GetTransactionByBlockHashAndIndex
        | MethodId::GetTransactionByBlockNumberAndIndex => ("blockNumber", "blockHash", None),
        _ => return None,
    };
    let field_hash = |f: &str| parse_hash(plain_str(object_field(value, f)?)?);
    Some(Named {
        number: hex_quantity(object_field(value, number)?)?,
        hash: field_hash(hash)?,
        parent: parent.and_then(field_hash),
    })
}

/// The block the first log of an `eth_getLogs` answer is in (all of a `blockHash` filter's are in one).
fn first_log_block(value: &[u8]) -> Option<Named> {
    let log = nth_element(value, 0)?;
    Some(Named {
        number: hex_quantity(object_field(log, "blockNumber")?)?,
        hash: parse_hash(plain_str(object_field(log, "blockHash")?)?)?,
        parent: None,
    })
}

/// A cached answer: the `result` bytes, and what they depend on.
#[derive(Clone)]
pub struct Entry {
    pub value: Rc<[u8]>,
    anchor: Anchor,
}

#[derive(Clone)]
struct Bytes;

/// Rough bookkeeping per entry beyond key and value.
const ENTRY_OVERHEAD: u64 = 64;

impl Weighter<Vec<u8>, Entry> for Bytes {
    fn weight(&self, key: &Vec<u8>, val: &Entry) -> u64 {
        key.len() as u64 + val.value.len() as u64 + ENTRY_OVERHEAD
    }
}

#[derive(Clone, Default)]
struct CountEvictions(Rc<Cell<u64>>);

impl Lifecycle<Vec<u8>, Entry> for CountEvictions {
    type RequestState = ();
    fn on_evict(&self, _state: &mut (), _key: Vec<u8>, _val: Entry) {
        self.0.set(self.0.get() + 1);
    }
}

pub struct ResultCache {
    entries: RefCell<Cache<Vec<u8>, Entry, Bytes, ahash::RandomState, CountEvictions>>,
    /// Keys of entries anchored to a block, by its height.
    by_height: RefCell<BTreeMap<u64, Vec<Vec<u8>>>>,
    /// The blocks this shard knows, which anchored entries are checked against.
    pub record: ChainRecord,
    evictions: CountEvictions,
    max_entry_bytes: usize,
}

impl ResultCache {
    pub fn new(max_bytes: u64, max_entry_bytes: usize) -> Self {
        let evictions = CountEvictions::default();
        let estimated = (max_bytes / 1024).clamp(16, 1 << 20) as usize;
        ResultCache {
            entries: RefCell::new(Cache::with(
                estimated,
                max_bytes.max(1),
                Bytes,
                ahash::RandomState::new(),
                evictions.clone(),
            )),
            by_height: RefCell::new(BTreeMap::new()),
            record: ChainRecord::default(),
            evictions,
            max_entry_bytes,
        }
    }

    /// The answer kept for `key`, if what it depends on is proven: final (or fixed) answers always, one
    /// anchored to a block not yet final only while the record holds that block and `proof.heads` says the
    /// record is following the chain.
    pub fn get(&self, key: &[u8], proof: Proof) -> Option<Rc<[u8]>> {
        let entries = self.entries.borrow();
        let e = entries.get(key)?;
        match e.anchor {
            Anchor::Forever => Some(e.value.clone()),
            Anchor::Block { height, .. } if proof.finalized > 0 && height <= proof.finalized => Some(e.value.clone()),
            Anchor::Block { height, hash } if proof.heads && self.record.proven(height) == Some(hash) => {
                Some(e.value.clone())
            }
            Anchor::Block { .. } => None,
        }
    }

    /// What an answer to a `pin`ned read depends on, or `None` when it cannot be tied to a block this
    /// shard knows (then it is not kept): the block the answer names, else the block at the pinned height.
    pub fn anchor(&self, pin: Pin, id: MethodId, value: &[u8], finalized: u64) -> Option<Anchor> {
        let named = match (pin, id) {
            (Pin::Forever, _) => return Some(Anchor::Forever),
            (Pin::Named, MethodId::GetLogs) => first_log_block(value),
            (_, _) => named_block(id, value),
        };
        let (height, named_hash) = match (pin, named) {
            (_, Some(b)) => (b.number, Some(b.hash)),
            (Pin::Height(n), None) => (n, None),
            _ => return None,
        };
        if finalized > 0 && height <= finalized {
            return Some(Anchor::Forever);
        }
        let hash = self.record.hash(height)?;
        (named_hash.is_none() || named_hash == Some(hash)).then_some(Anchor::Block { height, hash })
    }

    pub fn insert(&self, key: Vec<u8>, value: &[u8], anchor: Anchor) {
        if value.len() > self.max_entry_bytes {
            return;
        }
        if let Anchor::Block { height, .. } = anchor {
            self.by_height.borrow_mut().entry(height).or_default().push(key.clone());
        }
        self.entries.borrow_mut().insert(
            key,
            Entry {
                value: Rc::from(value),
                anchor,
            },
        );
    }

    /// Records a block an answer (`from_heads = false`) or the heads feed named; when that shows the
    /// chain replaced from some height, every entry anchored there or above is dropped. Returns how many.
    pub fn observe(&self, block: Named, from_heads: bool) -> usize {
        match self.record.observe(block, from_heads) {
            Seen::Replaced { from } => self.drop_from(from),
            Seen::Agrees | Seen::Contradicts => 0,
        }
    }

    /// Drops every entry anchored at or above `height`.
    pub fn drop_from(&self, height: u64) -> usize {
        let stale: Vec<Vec<u8>> = {
            let mut by_height = self.by_height.borrow_mut();
            let above = by_height.split_off(&height);
            above.into_values().flatten().collect()
        };
        let mut entries = self.entries.borrow_mut();
        let mut dropped = 0;
        for key in stale {
            let anchored_above = |e: &Entry| matches!(e.anchor, Anchor::Block { height: h, .. } if h >= height);
            if entries.remove_if(&key, anchored_above).is_some() {
                dropped += 1;
            }
        }
        dropped
    }

    pub fn bytes(&self) -> u64 {
        self.entries.borrow().weight()
    }

    pub fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn evictions(&self) -> u64 {
        self.evictions.0.get()
    }

    /// Forgets height index entries whose cache entries were evicted, so the index stays bounded.
    pub fn compact_index(&self) {
        let entries = self.entries.borrow();
        self.by_height.borrow_mut().retain(|_, keys| {
            keys.retain(|k| entries.contains_key(k));
            !keys.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prism_wire::rpc::methods::{block_ref, lookup};

    fn pin(method: &str, params: &str, head: u64) -> Option<Pin> {
        let info = lookup(method);
        let block = block_ref(&info, Some(params.as_bytes()));
        request_pin(&info, block, Some(params.as_bytes()), head, 64, 0)
    }

    #[test]
    fn at_or_below_finalized_needs_no_depth() {
        let info = lookup("eth_getBlockByNumber");
        let at = |params: &str, finalized| {
            let block = block_ref(&info, Some(params.as_bytes()));
            request_pin(&info, block, Some(params.as_bytes()), 1_000, 64, finalized)
        };
        assert_eq!(at(r#"["0x3e0",false]"#, 0), None, "within the depth, finality unknown");
        assert_eq!(at(r#"["0x3e0",false]"#, 992), Some(Pin::Height(992)), "finalized");
        assert_eq!(at(r#"["0x3e1",false]"#, 992), None, "above finalized");
        assert_eq!(at(r#"["finalized",false]"#, 992), None, "the tag itself moves");
        let logs = lookup("eth_getLogs");
        let params = r#"[{"fromBlock":"0x3d0","toBlock":"0x3e0"}]"#;
        assert_eq!(
            request_pin(&logs, BlockRef::NotApplicable, Some(params.as_bytes()), 1_000, 64, 992),
            Some(Pin::Height(992))
        );
    }

    #[test]
    fn what_may_be_cached() {
        assert_eq!(pin("eth_getBalance", r#"["0xa","0x10"]"#, 1000), Some(Pin::Height(16)));
        assert_eq!(
            pin("eth_getBalance", r#"["0xa","0x3c0"]"#, 1000),
            None,
            "too close to the head"
        );
        assert_eq!(pin("eth_getBalance", r#"["0xa","latest"]"#, 1000), None);
        assert_eq!(pin("eth_getBalance", r#"["0xa","finalized"]"#, 1000), None);
        assert_eq!(pin("eth_getBalance", r#"["0xa"]"#, 1000), None);
        assert_eq!(
            pin("eth_call", r#"[{}, {"blockHash":"0xab"}]"#, 1000),
            Some(Pin::Forever)
        );
        assert_eq!(
            pin(
                "eth_call",
                r#"[{}, {"blockHash":"0xab","requireCanonical":true}]"#,
                1000
            ),
            None,
            "canonical now is an answer for the moment"
        );
        for m in [
            "eth_getTransactionReceipt",
            "eth_getTransactionByHash",
            "eth_getBlockByHash",
        ] {
            assert_eq!(pin(m, r#"["0xab"]"#, 1000), Some(Pin::Named), "{m}");
        }
        assert_eq!(
            pin("eth_getUncleCountByBlockHash", r#"["0xab"]"#, 1000),
            Some(Pin::Forever)
        );
        assert_eq!(pin("eth_blockNumber", r#"[]"#, 1000), None);
        assert_eq!(pin("eth_sendRawTransaction", r#"["0x00"]"#, 1000), None);
        assert_eq!(
            pin("eth_getLogs", r#"[{"fromBlock":"0x1","toBlock":"0x20"}]"#, 1000),
            Some(Pin::Height(32))
        );
        assert_eq!(
            pin("eth_getLogs", r#"[{"fromBlock":"0x1","toBlock":"latest"}]"#, 1000),
            None
        );
        assert_eq!(pin("eth_getLogs", r#"[{"blockHash":"0xab"}]"#, 1000), Some(Pin::Named));
        assert_eq!(pin("eth_gasPrice", r#"[]"#, 1000), None);
        assert!(!answer_cacheable(
            MethodId::of("eth_getTransactionReceipt"),
            b"null",
            false
        ));
        assert!(!answer_cacheable(MethodId::of("eth_call"), b"{}", true));
        assert!(!answer_cacheable(
            MethodId::of("eth_getTransactionByHash"),
            br#"{"blockHash":null}"#,
            false
        ));
        assert!(answer_cacheable(
            MethodId::of("eth_getTransactionByHash"),
            br#"{"blockHash":"0x1"}"#,
            false
        ));
    }

    fn hash_hex(b: u8) -> String {
        format!("0x{}", format!("{b:02x}").repeat(32))
    }

    fn receipt(number: u64, hash: u8) -> Vec<u8> {
        format!(
            r#"{{"blockNumber":"0x{number:x}","blockHash":"{}","status":"0x1"}}"#,
            hash_hex(hash)
        )
        .into_bytes()
    }

    fn block(number: u64, hash: u8, parent: u8) -> Named {
        Named {
            number,
            hash: [hash; 32],
            parent: Some([parent; 32]),
        }
    }

    #[test]
    fn answers_are_anchored_to_the_block_they_depend_on_as_the_record_knows_it() {
        let c = ResultCache::new(1 << 20, 1 << 16);
        let r = MethodId::GetTransactionReceipt;
        assert_eq!(
            c.anchor(Pin::Named, r, &receipt(16, 1), 0),
            None,
            "a block the record does not know"
        );
        c.observe(block(16, 1, 0), false);
        assert_eq!(
            c.anchor(Pin::Named, r, &receipt(16, 1), 0),
            Some(Anchor::Block {
                height: 16,
                hash: [1; 32]
            })
        );
        assert_eq!(c.anchor(Pin::Named, r, &receipt(16, 2), 0), None, "another block at 16");
        assert_eq!(
            c.anchor(Pin::Named, r, &receipt(16, 2), 16),
            Some(Anchor::Forever),
            "final"
        );
        assert_eq!(
            c.anchor(Pin::Height(16), MethodId::of("eth_getBalance"), b"\"0x1\"", 0),
            Some(Anchor::Block {
                height: 16,
                hash: [1; 32]
            }),
            "a read at a number takes the record's hash there"
        );
        assert_eq!(
            c.anchor(Pin::Height(17), MethodId::of("eth_getBalance"), b"\"0x1\"", 0),
            None
        );
        assert_eq!(
            c.anchor(Pin::Forever, MethodId::of("eth_chainId"), b"\"0x1\"", 0),
            Some(Anchor::Forever)
        );
        let logs = format!(
            r#"[{{"blockNumber":"0x10","blockHash":"{}","logIndex":"0x0"}}]"#,
            hash_hex(1)
        );
        assert_eq!(
            c.anchor(Pin::Named, MethodId::of("eth_getLogs"), logs.as_bytes(), 0),
            Some(Anchor::Block {
                height: 16,
                hash: [1; 32]
            })
        );
        assert_eq!(
            c.anchor(Pin::Named, MethodId::of("eth_getLogs"), b"[]", 0),
            None,
            "no log names the block"
        );
    }

    #[test]
    fn an_entry_not_yet_final_is_served_only_while_proven() {
        let c = ResultCache::new(1 << 20, 1 << 16);
        c.observe(block(16, 1, 0), true);
        c.insert(
            b"r".to_vec(),
            b"1",
            Anchor::Block {
                height: 16,
                hash: [1; 32],
            },
        );
        c.insert(b"f".to_vec(), b"2", Anchor::Forever);
        let live = Proof {
            finalized: 0,
            heads: true,
        };
        assert_eq!(c.get(b"r", live).as_deref(), Some(&b"1"[..]));
        assert_eq!(c.get(b"r", Proof::default()), None, "without a live heads feed");
        assert_eq!(
            c.get(
                b"r",
                Proof {
                    finalized: 16,
                    heads: false
                }
            )
            .as_deref(),
            Some(&b"1"[..]),
            "final now"
        );
        assert_eq!(c.get(b"f", Proof::default()).as_deref(), Some(&b"2"[..]));
        // The feed shows another block at 16 (a rollback and a new block on the same parent).
        assert_eq!(c.observe(block(16, 9, 0), true), 1);
        assert_eq!(c.get(b"r", live), None);
        assert_eq!(c.get(b"f", live).as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn a_reorg_drops_entries_at_and_above_its_height() {
        let c = ResultCache::new(1 << 20, 1 << 16);
        for n in 5..=20u8 {
            c.observe(block(n.into(), n, n - 1), true);
        }
        c.insert(
            b"a".to_vec(),
            b"1",
            Anchor::Block {
                height: 10,
                hash: [10; 32],
            },
        );
        c.insert(
            b"b".to_vec(),
            b"2",
            Anchor::Block {
                height: 20,
                hash: [20; 32],
            },
        );
        c.insert(
            b"c".to_vec(),
            b"3",
            Anchor::Block {
                height: 5,
                hash: [5; 32],
            },
        );
        c.insert(b"d".to_vec(), b"4", Anchor::Forever);
        assert_eq!(c.observe(block(10, 10, 9), true), 0, "the same block: no reorg");
        assert_eq!(c.observe(block(10, 110, 9), true), 2);
        let live = Proof {
            finalized: 0,
            heads: true,
        };
        assert!(c.get(b"a", live).is_none() && c.get(b"b", live).is_none());
        assert_eq!(c.get(b"c", live).as_deref(), Some(&b"3"[..]));
        assert_eq!(c.get(b"d", live).as_deref(), Some(&b"4"[..]));
        // An answer contradicting the heads feed changes nothing (a provider behind the chain).
        assert_eq!(c.observe(block(11, 111, 77), false), 0);
        assert_eq!(c.get(b"c", live).as_deref(), Some(&b"3"[..]));
        // What answers alone said: an answer whose parent contradicts the block below, how deep the reorg
        // went is unknown, so every entry tied to a block goes.
        let c = ResultCache::new(1 << 20, 1 << 16);
        c.observe(block(10, 10, 9), false);
        c.insert(
            b"c".to_vec(),
            b"3",
            Anchor::Block {
                height: 9,
                hash: [9; 32],
            },
        );
        assert_eq!(c.observe(block(11, 111, 77), false), 1);
        assert!(c.get(b"c", live).is_none());
    }

    #[test]
    fn memory_bound_holds_under_a_flood() {
        let c = ResultCache::new(64 * 1024, 4096);
        for i in 0..100_000u32 {
            let anchor = Anchor::Block {
                height: u64::from(i),
                hash: [1; 32],
            };
            c.insert(i.to_le_bytes().to_vec(), &[7u8; 200], anchor);
            if i % 1000 == 0 {
                c.compact_index();
            }
        }
        assert!(c.bytes() <= 64 * 1024, "{}", c.bytes());
        assert!(c.evictions() > 90_000);
        c.compact_index();
        assert!(c.by_height.borrow().len() <= c.len());
        c.insert(b"big".to_vec(), &[0u8; 5000], Anchor::Forever);
        assert!(
            c.get(b"big", Proof::default()).is_none(),
            "oversize answers are not kept"
        );
    }
}
