//! Buffers a shard's connections hand back when they go idle, for the next connection that has bytes to
//! read or an answer to write: an idle keep-alive connection holds none, and a busy shard allocates none per
//! request. Owned by one shard (`edge::Shard`), so no locking.

use std::cell::RefCell;

/// A buffer larger than this is dropped rather than kept (an unusually large message).
const KEEP_BYTES: usize = 64 * 1024;
/// At most this many are kept: enough for the connections of one shard busy at once.
const KEEP_COUNT: usize = 256;

pub struct SpareBufs {
    bufs: RefCell<Vec<Vec<u8>>>,
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
            keep_count,
            keep_bytes,
        }
    }

    /// A buffer given back earlier, as it was given (its length and bytes included: callers clear or
    /// overwrite), or a new empty one.
    pub fn take(&self) -> Vec<u8> {
        self.bufs.borrow_mut().pop().unwrap_or_default()
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
        if buf.capacity() == 0 || buf.capacity() > self.keep_bytes {
            return;
        }
        let mut bufs = self.bufs.borrow_mut();
        if bufs.len() < self.keep_count {
            bufs.push(buf);
        }
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
}
