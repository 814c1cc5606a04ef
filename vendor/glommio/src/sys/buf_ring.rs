// Prism patch: a ring of provided buffers (IORING_REGISTER_PBUF_RING, Linux 5.19) for socket reads.
//
// A stream's read that has to wait submits a recv. With a buffer of its own, every idle keep-alive
// connection holds that buffer for as long as it stays idle: 10 000 idle clients, 10 000 buffers. With
// IOSQE_BUFFER_SELECT the recv names a group instead, and the kernel takes a buffer from it only when
// bytes arrive; the reader copies them out and gives the buffer back to the ring. An idle connection
// then holds no buffer at all, and the buffers in use are those whose bytes no task has read yet.
//
// The ring is shared with the kernel: an array of `io_uring_buf` entries whose tail (where this thread
// adds given-back buffers) lives in the first entry's reserved field, written with release ordering.
// Only the executor's thread touches it; the kernel reads entries up to the tail.

use std::{
    cell::Cell,
    io,
    os::unix::io::RawFd,
    ptr,
    sync::atomic::{AtomicU16, Ordering},
};

/// The buffer group the stream recvs name.
pub(crate) const RECV_GROUP: u16 = 0;

const IORING_REGISTER_PBUF_RING: libc::c_uint = 22;
const IORING_UNREGISTER_PBUF_RING: libc::c_uint = 23;

#[repr(C)]
struct IoUringBuf {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

#[repr(C)]
struct IoUringBufReg {
    ring_addr: u64,
    ring_entries: u32,
    bgid: u16,
    flags: u16,
    resv: [u64; 3],
}

/// The provided buffers of one io_uring: `entries` buffers of `buf_len` bytes, and the ring that hands
/// them to the kernel. Registered on one ring (the main ring, where stream recvs go).
#[derive(Debug)]
pub(crate) struct BufRing {
    /// One mapping: the entry array (a page, or more for many entries), then the buffers.
    map: *mut u8,
    map_len: usize,
    entries: u16,
    buf_len: usize,
    /// The next tail to publish; the kernel has consumed up to its own head.
    tail: Cell<u16>,
    /// Set once unregistered: buffers given back after that are not published.
    ring_fd: Cell<Option<RawFd>>,
}

impl BufRing {
    /// Maps `entries` (a power of two) buffers of `buf_len` bytes and registers them with the ring
    /// `ring_fd` as group `RECV_GROUP`. Fails on kernels without provided-buffer rings (before 5.19).
    pub(crate) fn register(ring_fd: RawFd, entries: u16, buf_len: usize) -> io::Result<BufRing> {
        assert!(entries.is_power_of_two());
        let ring_bytes = (entries as usize * std::mem::size_of::<IoUringBuf>() + 4095) & !4095;
        let map_len = ring_bytes + entries as usize * buf_len;
        // SAFETY: an anonymous private mapping; checked for failure below.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = BufRing {
            map: map as *mut u8,
            map_len,
            entries,
            buf_len,
            tail: Cell::new(0),
            ring_fd: Cell::new(None),
        };
        let reg = IoUringBufReg {
            ring_addr: map as u64,
            ring_entries: entries as u32,
            bgid: RECV_GROUP,
            flags: 0,
            resv: [0; 3],
        };
        // SAFETY: `reg` is a valid io_uring_buf_reg; the kernel reads it during the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                ring_fd,
                IORING_REGISTER_PBUF_RING,
                &reg as *const IoUringBufReg,
                1,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error()); // `ring` unmaps on drop
        }
        ring.ring_fd.set(Some(ring_fd));
        for bid in 0..entries {
            ring.give_back(bid);
        }
        Ok(ring)
    }

    /// The most one buffer holds: a recv that names the group asks for no more.
    pub(crate) fn buf_len(&self) -> usize {
        self.buf_len
    }

    fn ring_bytes(&self) -> usize {
        self.map_len - self.entries as usize * self.buf_len
    }

    fn buf_ptr(&self, bid: u16) -> *mut u8 {
        assert!(bid < self.entries);
        // SAFETY: within the mapping: the buffers follow the entry array.
        unsafe { self.map.add(self.ring_bytes() + bid as usize * self.buf_len) }
    }

    /// The first `len` bytes of buffer `bid`, which the kernel filled and handed over with a completion.
    pub(crate) fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        // SAFETY: the buffer is out of the kernel's hands until it is given back, and `len` is what the
        // kernel reported writing, at most `buf_len`.
        unsafe { std::slice::from_raw_parts(self.buf_ptr(bid), len.min(self.buf_len)) }
    }

    /// Puts buffer `bid` back at the tail, for the kernel to use again.
    pub(crate) fn give_back(&self, bid: u16) {
        if self.ring_fd.get().is_none() {
            return;
        }
        let tail = self.tail.get();
        let mask = self.entries - 1;
        let base = self.map as *mut IoUringBuf;
        // SAFETY: the entry is within the array. Only addr, len and bid are written: the first entry's
        // reserved field is the ring's tail.
        unsafe {
            let entry = base.add((tail & mask) as usize);
            ptr::addr_of_mut!((*entry).addr).write(self.buf_ptr(bid) as u64);
            ptr::addr_of_mut!((*entry).len).write(self.buf_len as u32);
            ptr::addr_of_mut!((*entry).bid).write(bid);
            let tail_field = ptr::addr_of_mut!((*base).resv) as *const AtomicU16;
            (*tail_field).store(tail.wrapping_add(1), Ordering::Release);
        }
        self.tail.set(tail.wrapping_add(1));
    }

    /// Withdraws the ring from the kernel. Called while the io_uring is still open (the reactor's drop),
    /// so the mapping is not freed under a ring that could still fill it.
    pub(crate) fn unregister(&self) {
        let Some(fd) = self.ring_fd.take() else {
            return;
        };
        let reg = IoUringBufReg {
            ring_addr: 0,
            ring_entries: 0,
            bgid: RECV_GROUP,
            flags: 0,
            resv: [0; 3],
        };
        // SAFETY: as in `register`.
        unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                fd,
                IORING_UNREGISTER_PBUF_RING,
                &reg as *const IoUringBufReg,
                1,
            );
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        if self.ring_fd.get().is_some() {
            // Still registered: the ring outlived its reactor's drop, which should not happen. Leaking the
            // mapping is the safe choice, the kernel may still write into it.
            return;
        }
        // SAFETY: the mapping made in `register`; the kernel no longer knows it.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_len);
        }
    }
}

/// A stream recv that names the provided group, and, once it completed with bytes, the buffer the kernel
/// put them in. The buffer goes back to the ring when this is dropped, however the source ends.
#[derive(Debug)]
pub(crate) struct ProvidedRecv {
    pub(crate) ring: std::rc::Rc<BufRing>,
    pub(crate) bid: Option<u16>,
}

impl ProvidedRecv {
    /// The first `len` bytes the recv brought; empty when it brought none.
    pub(crate) fn bytes(&self, len: usize) -> &[u8] {
        match self.bid {
            Some(bid) => self.ring.bytes(bid, len),
            None => &[],
        }
    }
}

impl Drop for ProvidedRecv {
    fn drop(&mut self) {
        if let Some(bid) = self.bid.take() {
            self.ring.give_back(bid);
        }
    }
}
