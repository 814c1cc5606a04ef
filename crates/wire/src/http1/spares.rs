//! Buffers a shard's connections hand back when they go idle, for the next connection that has bytes to
//! read or an answer to write: an idle keep-alive connection holds none, and a busy shard allocates none per
//! request. Owned by one shard (`edge::Shard`), so no locking.
//!
//! What a burst leaves kept is given back to malloc by `trim`, which the shard's sweeper calls every few
//! seconds: a buffer nobody took since the last trim is surplus.

use std::cell::{Cell, RefCell};

/// A buffer larger than this is dropped rather than kept (an unusually large message).
const KEEP_BYTES: usize = 64 * 1024;
/// At most this many are kept: enough for the connections of one shard busy at once.
const KEEP_COUNT: usize = 256;

pub struct SpareBufs {
    /// A stack: `take` pops the newest, so the oldest sit at the bottom until they are trimmed.
    bufs: RefCell<Vec<Vec<u8>>>,
    /// The fewest buffers kept at any moment since the last `trim`: the bottom `low` were never taken.
    low: Cell<usize>,
    /// Bytes of the buffers `give` did not keep since the last `trim` (freed to malloc there and then).
    dropped: Cell<usize>,
    keep_count: usize,
    keep_bytes: usize,
}

/// The shard's own pools: every connection of the shard draws on them.
impl Default for SpareBufs {
    fn default() -> Self {
        SpareBufs::new(KEEP_COUNT, KEEP_BYTES)
    }
}

impl SpareBufs {
    /// For pools a shard keeps many of (one per network, one per upstream): at most 32 buffers of at most
    /// 16 KiB, so what a burst leaves held stays small however many there are. Calls larger than that
    /// allocate as they did before.
    pub fn small() -> Self {
        SpareBufs::new(32, 16 * 1024)
    }

    /// Keeps at most `keep_count` buffers of at most `keep_bytes` each: what a burst can leave held.
    pub fn new(keep_count: usize, keep_bytes: usize) -> Self {
        SpareBufs {
            bufs: RefCell::new(Vec::new()),
            low: Cell::new(0),
            dropped: Cell::new(0),
            keep_count,
            keep_bytes,
        }
    }

    /// A buffer given back earlier, as it was given (its length and bytes included: callers clear or
    /// overwrite), or a new empty one.
    pub fn take(&self) -> Vec<u8> {
        let mut bufs = self.bufs.borrow_mut();
        let buf = bufs.pop().unwrap_or_default();
        if bufs.len() < self.low.get() {
            self.low.set(bufs.len());
        }
        buf
    }

    /// An empty buffer, with the capacity of one given back earlier when there is one: for callers that
    /// write a message from the start.
    pub fn take_empty(&self) -> Vec<u8> {
        let mut buf = self.take();
        buf.clear();
        buf
    }

    /// Keeps `buf` for a later `take`, unless it holds nothing or too much, or enough are kept.
    pub fn give(&self, buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap == 0 {
            return;
        }
        let mut bufs = self.bufs.borrow_mut();
        if cap <= self.keep_bytes && bufs.len() < self.keep_count {
            bufs.push(buf);
        } else {
            self.dropped.set(self.dropped.get() + cap);
        }
    }

    /// Frees the buffers no `take` reached since the last trim (the bottom of the stack) and returns how
    /// many bytes of capacity went back to malloc since the last trim: those, and the buffers `give` did
    /// not keep (a burst wider than `keep_count` frees its surplus as it ends). A shard that keeps as busy
    /// as before keeps what it uses; one whose burst is over is back to nothing kept after two trims.
    pub fn trim(&self) -> usize {
        let mut bufs = self.bufs.borrow_mut();
        let unused = self.low.get().min(bufs.len());
        let freed: usize = bufs.drain(..unused).map(|b| b.capacity()).sum();
        self.low.set(bufs.len());
        freed + self.dropped.replace(0)
    }

    /// Buffers kept now, and their capacity in bytes.
    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        let bufs = self.bufs.borrow();
        (bufs.len(), bufs.iter().map(Vec::capacity).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_comes_back_as_it_was_given() {
        let spares = SpareBufs::default();
        let mut buf = Vec::with_capacity(300);
        buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        spares.give(buf);
        let again = spares.take();
        assert_eq!(again, b"HTTP/1.1 200 OK\r\n");
        assert!(again.capacity() >= 300);
        assert_eq!(spares.take().capacity(), 0, "one given, one taken");
        spares.give(again);
        let empty = spares.take_empty();
        assert!(empty.is_empty() && empty.capacity() >= 300);
    }

    #[test]
    fn oversized_and_surplus_buffers_are_not_kept() {
        let spares = SpareBufs::default();
        spares.give(Vec::with_capacity(KEEP_BYTES + 1));
        assert_eq!(spares.take().capacity(), 0);
        for _ in 0..KEEP_COUNT + 10 {
            spares.give(Vec::with_capacity(64));
        }
        let mut kept = 0;
        while spares.take().capacity() > 0 {
            kept += 1;
        }
        assert_eq!(kept, KEEP_COUNT);
    }

    #[test]
    fn trim_counts_the_buffers_give_did_not_keep() {
        let spares = SpareBufs::new(2, 100);
        spares.give(Vec::with_capacity(500));
        for _ in 0..3 {
            spares.give(Vec::with_capacity(100));
        }
        spares.give(Vec::new());
        assert_eq!(spares.kept().0, 2);
        // The first trim frees nothing kept (both arrived since the count began) but reports what was
        // dropped: 500 over the size bound, 100 over the count.
        assert_eq!(spares.trim(), 600);
        assert_eq!(spares.trim(), 200, "then the two no take reached");
        assert_eq!(spares.trim(), 0);
    }

    #[test]
    fn a_small_pool_keeps_within_its_own_bounds() {
        let spares = SpareBufs::new(2, 100);
        spares.give(Vec::with_capacity(101));
        assert_eq!(spares.take().capacity(), 0, "over its byte bound");
        for _ in 0..5 {
            spares.give(Vec::with_capacity(100));
        }
        assert!(spares.take().capacity() >= 100);
        assert!(spares.take().capacity() >= 100);
        assert_eq!(spares.take().capacity(), 0, "over its count bound");
    }

    #[test]
    fn trim_frees_what_no_take_reached_and_keeps_what_is_in_use() {
        let spares = SpareBufs::default();
        // A burst leaves 10 kept.
        for _ in 0..10 {
            spares.give(Vec::with_capacity(1000));
        }
        assert_eq!(spares.kept().0, 10);
        // The first trim only starts the count: all 10 arrived after the last one.
        spares.trim();
        assert_eq!(spares.kept().0, 10);
        // Steady traffic after the burst needs at most 3 at once.
        for _ in 0..50 {
            let bufs: Vec<_> = (0..3).map(|_| spares.take()).collect();
            for b in bufs {
                spares.give(b);
            }
        }
        let freed = spares.trim();
        assert_eq!(spares.kept().0, 3, "the 7 nobody took are freed, the 3 in use stay");
        assert!(freed >= 7 * 1000);
        // Still used at the same rate: nothing more goes.
        for _ in 0..5 {
            let a = spares.take();
            let b = spares.take();
            let c = spares.take();
            spares.give(a);
            spares.give(b);
            spares.give(c);
        }
        assert_eq!(spares.trim(), 0);
        assert_eq!(spares.kept().0, 3);
        // The traffic stops: one interval with no take, and nothing is kept.
        spares.trim();
        assert_eq!(spares.kept(), (0, 0));
        // A take of nothing kept is a new buffer, and trim has nothing to do.
        assert_eq!(spares.take().capacity(), 0);
        assert_eq!(spares.trim(), 0);
    }
}
