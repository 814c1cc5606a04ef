//! A growable read buffer with a consumed prefix, so pipelined bytes after one message stay for the next.

use std::pin::Pin;
use std::task::Poll;

use futures_lite::{AsyncRead, AsyncReadExt};

use super::SpareBufs;

pub struct ReadBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
    /// The size the buffer is (re)allocated at.
    home: usize,
}

impl ReadBuf {
    pub fn with_capacity(cap: usize) -> Self {
        let home = cap.max(512);
        ReadBuf {
            data: vec![0; home],
            start: 0,
            end: 0,
            home,
        }
    }

    /// A buffer that holds no memory until bytes arrive (`read_idle_from`), then `cap`.
    pub fn idle(cap: usize) -> Self {
        ReadBuf {
            data: Vec::new(),
            start: 0,
            end: 0,
            home: cap.max(512),
        }
    }

    /// Bytes read but not yet consumed.
    pub fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Bytes of memory the buffer holds (0 while an idle read waits: `read_idle_from`).
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.len());
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Takes up to `n` unconsumed bytes into `out`.
    pub fn take_into(&mut self, n: usize, out: &mut Vec<u8>) -> usize {
        let n = n.min(self.len());
        out.extend_from_slice(&self.data[self.start..self.start + n]);
        self.consume(n);
        n
    }

    /// Reads once from `r`, up to `min_spare` bytes (making room for that many). Returns bytes read; 0 = EOF.
    pub async fn read_from<R: AsyncRead + Unpin>(&mut self, r: &mut R, min_spare: usize) -> std::io::Result<usize> {
        if self.data.len() - self.end < min_spare {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.data.len() - self.end < min_spare {
                let want = (self.end + min_spare).max(self.data.len() * 2);
                self.data.resize(want, 0);
            }
        }
        // Read at most `min_spare`: an idle connection's outstanding read (and the ring's buffer behind it)
        // stays as small as its caller asked.
        let until = (self.end + min_spare).min(self.data.len());
        let n = r.read(&mut self.data[self.end..until]).await?;
        self.end += n;
        Ok(n)
    }

    /// Reads once from `r`, up to `max` bytes, for a connection waiting for its next message with nothing
    /// buffered. While the read waits the buffer goes to `spares`, so an idle connection holds none; each
    /// poll takes one back (AsyncRead borrows a buffer only for the poll, so nothing is lent out). Returns
    /// bytes read; 0 = EOF.
    pub async fn read_idle_from<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut R,
        max: usize,
        spares: &SpareBufs,
    ) -> std::io::Result<usize> {
        debug_assert!(self.is_empty());
        futures_lite::future::poll_fn(|cx| {
            if self.data.is_empty() {
                self.data = spares.take();
                if self.data.len() < self.home {
                    self.data.resize(self.home, 0);
                }
            }
            let until = max.min(self.data.len());
            let read = Pin::new(&mut *r).poll_read(cx, &mut self.data[..until]);
            match read {
                Poll::Ready(Ok(n)) => self.end = n,
                Poll::Ready(Err(_)) => {}
                Poll::Pending => spares.give(std::mem::take(&mut self.data)),
            }
            read
        })
        .await
    }

    /// Hands the buffer to `spares` when nothing is buffered, for a connection going idle: it holds none
    /// until [`ReadBuf::take_from`] before its next read.
    pub fn give_to(&mut self, spares: &SpareBufs) {
        if self.is_empty() && !self.data.is_empty() {
            self.start = 0;
            self.end = 0;
            spares.give(std::mem::take(&mut self.data));
        }
    }

    /// Takes a buffer from `spares` (or a new one) when it holds none, at its home size.
    pub fn take_from(&mut self, spares: &SpareBufs) {
        if self.data.is_empty() {
            self.data = spares.take();
            if self.data.len() < self.home {
                self.data.resize(self.home, 0);
            }
        }
    }

    /// Gives memory back after an unusually large message, so idle connections stay small.
    pub fn shrink_to(&mut self, cap: usize) {
        if self.data.len() > cap && self.len() <= cap {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            self.data.truncate(cap);
            self.data.shrink_to_fit();
        }
    }
}
