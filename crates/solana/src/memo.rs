//! A small lock-free memory shared by all shards: a fixed array of atomics mapping a 64-bit key hash to a
//! one-byte value (a destination). It forgets on collision (the newer entry wins), which is fine for what it
//! remembers: a forgotten signature is asked of every side, a forgotten blockhash of the base layer.

use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Memo {
    slots: Box<[AtomicU64]>,
    mask: usize,
    hasher: ahash::RandomState,
}

impl Memo {
    /// `capacity` is rounded up to a power of two.
    pub fn new(capacity: usize) -> Memo {
        let n = capacity.next_power_of_two().max(16);
        Memo {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            mask: n - 1,
            // Fixed seeds: every shard must hash alike.
            hasher: ahash::RandomState::with_seeds(0x5eed, 0x0f, 0x5011, 0xa7a),
        }
    }

    fn locate<K: Hash + ?Sized>(&self, key: &K) -> (usize, u64) {
        let h = self.hasher.hash_one(key);
        // The tag is the hash's top 56 bits, never zero (zero marks an empty slot).
        ((h as usize) & self.mask, (h & !0xff) | 0x100)
    }

    pub fn put<K: Hash + ?Sized>(&self, key: &K, value: u8) {
        let (i, tag) = self.locate(key);
        self.slots[i].store(tag | value as u64, Ordering::Relaxed);
    }

    pub fn get<K: Hash + ?Sized>(&self, key: &K) -> Option<u8> {
        let (i, tag) = self.locate(key);
        let v = self.slots[i].load(Ordering::Relaxed);
        (v & !0xff == tag).then_some(v as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_and_forgets_only_by_overwrite() {
        let m = Memo::new(1024);
        m.put("sig-a", 2);
        m.put("sig-b", 0);
        assert_eq!(m.get("sig-a"), Some(2));
        assert_eq!(m.get("sig-b"), Some(0));
        assert_eq!(m.get("sig-c"), None);
        m.put("sig-a", 1);
        assert_eq!(m.get("sig-a"), Some(1));
    }
}
