//! The deterministic-result cache, one per shard per network: answers that can never change, bounded in
//! bytes (S3-FIFO eviction via quick_cache's unsync cache: no locks, the shard owns it).
//!
//! Cached: chain id; blocks, transactions and receipts by hash once included; calls and state reads pinned to
//! a block hash (EIP-1898); reads pinned to a block number at least `cache_depth_blocks` below the pool's head
//! or at or below the pool's agreed `finalized` block (`core::finality`); logs by block hash or for a closed
//! range below that depth or finalized. Never: latest/pending/safe/finalized reads,
//! null results, errors, anything a write could change, answers over `max_entry_bytes`.
//! Reorg safety: entries that depend on a block number are indexed by height; when an answer reveals a
//! different hash at a height we have seen, every entry at or above that height is dropped.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use quick_cache::unsync::Cache;
use quick_cache::{Lifecycle, Weighter};

use crate::jsonscan::{hex_quantity, nth_element, object_field, plain_str};
use crate::rpc::methods::{BlockRef, HeadHint, Kind, MethodInfo};

/// Why a request may be answered from the cache, if its answer qualifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// Never changes (by hash, chain id).
    Forever,
    /// Depends on the block at this height (and below) staying canonical.
    Height(u64),
}

/// Methods whose answer is addressed by a hash that pins it once included.
fn by_hash(method: &str) -> bool {
    matches!(
        method,
        "eth_getBlockByHash"
            | "eth_getTransactionByHash"
            | "eth_getTransactionReceipt"
            | "eth_getTransactionByBlockHashAndIndex"
            | "eth_getBlockTransactionCountByHash"
            | "eth_getUncleCountByBlockHash"
            | "eth_getUncleByBlockHashAndIndex"
            | "eth_chainId"
            | "net_version"
    )
}

/// Whether a request's answer could be cached, given the pool's best head and its agreed `finalized` block
/// (0: unknown). A block at or below `finalized` cannot be reorganised away, so it needs no depth.
pub fn request_pin(
    method: &str,
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
        BlockRef::Pinned => Some(Pin::Forever),
        BlockRef::Number(n) if deep(n) => Some(Pin::Height(n)),
        BlockRef::Number(_) | BlockRef::Latest | BlockRef::Tag | BlockRef::Final(_) => None,
        BlockRef::NotApplicable if by_hash(method) => Some(Pin::Forever),
        BlockRef::NotApplicable if method == "eth_getLogs" => {
            let filter = nth_element(params?, 0)?;
            if object_field(filter, "blockHash").is_some() {
                return Some(Pin::Forever);
            }
            let from = hex_quantity(object_field(filter, "fromBlock")?)?;
            let to = hex_quantity(object_field(filter, "toBlock")?)?;
            (from <= to && deep(to)).then_some(Pin::Height(to))
        }
        BlockRef::NotApplicable => None,
    }
}

/// Whether an answer may be stored: a non-null result, and for transactions, one already in a block.
pub fn answer_cacheable(method: &str, value: &[u8], is_error: bool) -> bool {
    if is_error || value == b"null" {
        return false;
    }
    match method {
        "eth_getTransactionByHash" | "eth_getTransactionByBlockHashAndIndex" => {
            object_field(value, "blockHash").is_some_and(|h| h != b"null")
        }
        _ => true,
    }
}

/// A block (number, hash) an answer reveals, for reorg detection.
pub fn revealed_block(method: &str, value: &[u8]) -> Option<(u64, [u8; 32])> {
    let (number, hash) = match method {
        "eth_getBlockByNumber" | "eth_getBlockByHash" => ("number", "hash"),
        "eth_getTransactionReceipt" | "eth_getTransactionByHash" => ("blockNumber", "blockHash"),
        _ => return None,
    };
    let n = hex_quantity(object_field(value, number)?)?;
    let h = parse_hash(plain_str(object_field(value, hash)?)?)?;
    Some((n, h))
}

fn parse_hash(s: &str) -> Option<[u8; 32]> {
    let hex = s.strip_prefix("0x")?;
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// A cached answer: the `result` bytes only.
#[derive(Clone)]
pub struct Entry {
    pub value: Rc<[u8]>,
    pin: Pin,
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

/// How many block hashes are remembered for reorg detection.
const HASHES_KEPT: usize = 4096;

pub struct ResultCache {
    entries: RefCell<Cache<Vec<u8>, Entry, Bytes, ahash::RandomState, CountEvictions>>,
    /// Keys of entries pinned to a height, by that height.
    by_height: RefCell<BTreeMap<u64, Vec<Vec<u8>>>>,
    /// Block hashes seen per height.
    hashes: RefCell<BTreeMap<u64, [u8; 32]>>,
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
            hashes: RefCell::new(BTreeMap::new()),
            evictions,
            max_entry_bytes,
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<Rc<[u8]>> {
        self.entries.borrow().get(key).map(|e| e.value.clone())
    }

    pub fn insert(&self, key: Vec<u8>, value: &[u8], pin: Pin) {
        if value.len() > self.max_entry_bytes {
            return;
        }
        if let Pin::Height(h) = pin {
            self.by_height.borrow_mut().entry(h).or_default().push(key.clone());
        }
        self.entries.borrow_mut().insert(
            key,
            Entry {
                value: Rc::from(value),
                pin,
            },
        );
    }

    /// Records a block an answer revealed; a different hash at a known height is a reorg there.
    /// Returns how many entries were dropped.
    pub fn observe_block(&self, height: u64, hash: [u8; 32]) -> usize {
        let previous = self.hashes.borrow_mut().insert(height, hash);
        {
            let mut hashes = self.hashes.borrow_mut();
            while hashes.len() > HASHES_KEPT {
                hashes.pop_first();
            }
        }
        match previous {
            Some(h) if h != hash => self.drop_from(height),
            _ => 0,
        }
    }

    /// Drops every entry pinned at or above `height`.
    pub fn drop_from(&self, height: u64) -> usize {
        let stale: Vec<Vec<u8>> = {
            let mut by_height = self.by_height.borrow_mut();
            let above = by_height.split_off(&height);
            above.into_values().flatten().collect()
        };
        let mut entries = self.entries.borrow_mut();
        let mut dropped = 0;
        for key in stale {
            if entries
                .remove_if(&key, |e| matches!(e.pin, Pin::Height(h) if h >= height))
                .is_some()
            {
                dropped += 1;
            }
        }
        self.hashes.borrow_mut().retain(|&h, _| h < height);
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
    use crate::rpc::methods::{block_ref, lookup};

    fn pin(method: &str, params: &str, head: u64) -> Option<Pin> {
        let info = lookup(method);
        let block = block_ref(&info, Some(params.as_bytes()));
        request_pin(method, &info, block, Some(params.as_bytes()), head, 64, 0)
    }

    #[test]
    fn at_or_below_finalized_needs_no_depth() {
        let info = lookup("eth_getBlockByNumber");
        let at = |params: &str, finalized| {
            let block = block_ref(&info, Some(params.as_bytes()));
            request_pin(
                "eth_getBlockByNumber",
                &info,
                block,
                Some(params.as_bytes()),
                1_000,
                64,
                finalized,
            )
        };
        assert_eq!(at(r#"["0x3e0",false]"#, 0), None, "within the depth, finality unknown");
        assert_eq!(at(r#"["0x3e0",false]"#, 992), Some(Pin::Height(992)), "finalized");
        assert_eq!(at(r#"["0x3e1",false]"#, 992), None, "above finalized");
        assert_eq!(at(r#"["finalized",false]"#, 992), None, "the tag itself moves");
        let logs = lookup("eth_getLogs");
        let params = r#"[{"fromBlock":"0x3d0","toBlock":"0x3e0"}]"#;
        assert_eq!(
            request_pin(
                "eth_getLogs",
                &logs,
                BlockRef::NotApplicable,
                Some(params.as_bytes()),
                1_000,
                64,
                992
            ),
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
            pin("eth_getTransactionReceipt", r#"["0xab"]"#, 1000),
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
        assert_eq!(
            pin("eth_getLogs", r#"[{"blockHash":"0xab"}]"#, 1000),
            Some(Pin::Forever)
        );
        assert_eq!(pin("eth_gasPrice", r#"[]"#, 1000), None);
        assert!(!answer_cacheable("eth_getTransactionReceipt", b"null", false));
        assert!(!answer_cacheable("eth_call", b"{}", true));
        assert!(!answer_cacheable(
            "eth_getTransactionByHash",
            br#"{"blockHash":null}"#,
            false
        ));
        assert!(answer_cacheable(
            "eth_getTransactionByHash",
            br#"{"blockHash":"0x1"}"#,
            false
        ));
    }

    #[test]
    fn reorg_drops_entries_at_and_above_its_height() {
        let c = ResultCache::new(1 << 20, 1 << 16);
        c.insert(b"a".to_vec(), b"1", Pin::Height(10));
        c.insert(b"b".to_vec(), b"2", Pin::Height(20));
        c.insert(b"c".to_vec(), b"3", Pin::Height(5));
        c.insert(b"d".to_vec(), b"4", Pin::Forever);
        assert_eq!(c.observe_block(10, [1; 32]), 0);
        assert_eq!(c.observe_block(10, [1; 32]), 0, "same hash: no reorg");
        assert_eq!(c.observe_block(10, [2; 32]), 2);
        assert!(c.get(b"a").is_none() && c.get(b"b").is_none());
        assert_eq!(&*c.get(b"c").unwrap(), b"3");
        assert_eq!(&*c.get(b"d").unwrap(), b"4");
    }

    #[test]
    fn memory_bound_holds_under_a_flood() {
        let c = ResultCache::new(64 * 1024, 4096);
        for i in 0..100_000u32 {
            c.insert(i.to_le_bytes().to_vec(), &[7u8; 200], Pin::Height(u64::from(i)));
            if i % 1000 == 0 {
                c.compact_index();
            }
        }
        assert!(c.bytes() <= 64 * 1024, "{}", c.bytes());
        assert!(c.evictions() > 90_000);
        c.compact_index();
        assert!(c.by_height.borrow().len() <= c.len());
        c.insert(b"big".to_vec(), &[0u8; 5000], Pin::Forever);
        assert!(c.get(b"big").is_none(), "oversize answers are not kept");
    }
}
