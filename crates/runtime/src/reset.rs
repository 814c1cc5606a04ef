//! Ending a connection that cannot be closed gracefully. A small write is queued on the shard's ring and
//! reported done at once (vendor/README.md, change 5); one to a peer that stopped reading waits in the
//! kernel for room, and a stream dropped meanwhile leaves it to a task that keeps the socket (its file
//! descriptor and its kernel buffers) until the kernel is done: for a peer that keeps the connection open
//! and never reads, never. A reset ends that wait now.

use std::os::fd::RawFd;

/// Resets the connection on `fd`, an open socket the caller owns (its stream is dropped right after):
/// unsent bytes are discarded, the peer gets an RST instead of the rest of the stream, and a write waiting
/// on the socket fails at once, so the socket is freed when its stream is dropped, not when the peer reads.
pub fn reset(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: plain system calls on a descriptor the caller owns; `linger` outlives the call. Failures
    // (the peer already gone) leave the socket to close as it would have.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
        // Wakes a write parked on the full buffer: it fails with EPIPE and lets go of the socket.
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// Caps the kernel's send buffer of the socket on `fd` at `bytes` (the kernel doubles it for its own
/// bookkeeping; autotuning is off for it afterwards). A long-lived stream to a client that may stop reading
/// (a WebSocket session) otherwise lets the kernel queue up to `net.ipv4.tcp_wmem`'s maximum (4 MiB by
/// default) before a write waits: minutes at a notification stream's rate before the client is found slow,
/// and that memory held meanwhile. Best effort: a failure leaves the kernel's default.
pub fn cap_send_buffer(fd: RawFd, bytes: usize) {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a plain system call on a descriptor the caller owns; `bytes` outlives the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}
