//! Answer buffers a shard's connections hand back when they go idle, for the next answer on the shard: an
//! idle keep-alive connection holds none, and a busy one allocates none per request.

use std::cell::RefCell;

/// A buffer larger than this is dropped rather than kept (an unusually large answer).
const KEEP_BYTES: usize = 64 * 1024;
/// At most this many are kept: enough for the connections answering at once on one shard.
const KEEP_COUNT: usize = 256;

#[derive(Default)]
pub struct SpareBufs {
    bufs: RefCell<Vec<Vec<u8>>>,
}

impl SpareBufs {
    /// An empty buffer, with the capacity an earlier answer gave it when one is spare.
    pub fn take(&self) -> Vec<u8> {
        self.bufs.borrow_mut().pop().unwrap_or_default()
    }

    /// Keeps `buf` for a later `take`, unless it holds nothing or too much, or enough are kept.
    pub fn give(&self, mut buf: Vec<u8>) {
        if buf.capacity() == 0 || buf.capacity() > KEEP_BYTES {
            return;
        }
        let mut bufs = self.bufs.borrow_mut();
        if bufs.len() < KEEP_COUNT {
            buf.clear();
            bufs.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_comes_back_empty_with_its_capacity() {
        let spares = SpareBufs::default();
        let mut buf = Vec::with_capacity(300);
        buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        spares.give(buf);
        let again = spares.take();
        assert!(again.is_empty());
        assert!(again.capacity() >= 300);
        assert_eq!(spares.take().capacity(), 0, "one given, one taken");
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
}
