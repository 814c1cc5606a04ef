// Unless explicitly stated otherwise all files in this repository are licensed
// under the MIT/Apache-2.0 License, at your convenience
//
// This product includes software developed at Datadog (https://www.datadoghq.com/). Copyright 2020 Datadog, Inc.
//
use crate::{
    reactor::Reactor,
    sys::{self, DmaBuffer, Source, SourceType},
};
use futures_lite::ready;
use nix::sys::socket::MsgFlags;
use std::{
    cell::Cell,
    io,
    net::Shutdown,
    os::unix::io::{AsRawFd, FromRawFd, RawFd},
    rc::{Rc, Weak},
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

type Result<T> = crate::Result<T, ()>;

/// Root trait for socket stream receive buffer
pub trait RxBuf {
    fn read(&mut self, buf: &mut [u8]) -> usize;
    fn peek(&self, buf: &mut [u8]) -> usize;
    fn is_empty(&self) -> bool;
    fn as_bytes(&self) -> &[u8];
    fn consume(&mut self, amt: usize);
    fn buffer_size(&self) -> usize;
    fn handle_result(&mut self, result: usize);
    fn unfilled(&mut self) -> &mut [u8];
}

#[derive(Debug, Default)]
pub struct NonBuffered;

impl RxBuf for NonBuffered {
    fn read(&mut self, _buf: &mut [u8]) -> usize {
        0
    }

    fn peek(&self, _buf: &mut [u8]) -> usize {
        0
    }

    fn is_empty(&self) -> bool {
        true
    }

    fn as_bytes(&self) -> &[u8] {
        &[]
    }

    fn consume(&mut self, _amt: usize) {}

    fn buffer_size(&self) -> usize {
        0
    }

    fn handle_result(&mut self, _result: usize) {}

    fn unfilled(&mut self) -> &mut [u8] {
        &mut []
    }
}

/// Trait for receive buffer implementations
pub trait Buffered: RxBuf {}

/// Non-shared fixed sized receive buffer allocated
/// when buffered stream is created
#[derive(Debug)]
pub struct Preallocated {
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    cap: usize,
}

impl Preallocated {
    const DEFAULT_BUFFER_SIZE: usize = 8192;

    /// Creates a fixed sized receive buffer
    pub fn new(size: usize) -> Self {
        Self {
            buf: vec![0; size],
            tail: 0,
            head: 0,
            cap: size,
        }
    }
}

impl Default for Preallocated {
    fn default() -> Self {
        Self::new(Self::DEFAULT_BUFFER_SIZE)
    }
}

impl Preallocated {
    fn len(&self) -> usize {
        self.tail - self.head
    }
}

impl Buffered for Preallocated {}

impl RxBuf for Preallocated {
    fn read(&mut self, buf: &mut [u8]) -> usize {
        let sz = std::cmp::min(self.len(), buf.len());
        if sz > 0 {
            buf[..sz].copy_from_slice(&self.buf[self.head..self.head + sz]);
            self.head += sz;
        }
        sz
    }

    fn peek(&self, buf: &mut [u8]) -> usize {
        let sz = std::cmp::min(self.len(), buf.len());
        if sz > 0 {
            buf[..sz].copy_from_slice(&self.buf[self.head..self.head + sz]);
        }
        sz
    }

    fn is_empty(&self) -> bool {
        self.head >= self.tail
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[self.head..self.tail]
    }

    fn consume(&mut self, amt: usize) {
        self.head += std::cmp::min(self.len(), amt);
    }

    fn buffer_size(&self) -> usize {
        self.cap
    }

    fn handle_result(&mut self, result: usize) {
        self.tail += result;
    }

    fn unfilled(&mut self) -> &mut [u8] {
        if self.len() == 0 {
            self.head = 0;
            self.tail = 0;
        }
        &mut self.buf[self.tail..]
    }
}

#[derive(Debug)]
struct Timeout {
    id: u64,
    timeout: Cell<Option<Duration>>,
    timer: Cell<Option<Instant>>,
}

impl Timeout {
    fn new(id: u64) -> Self {
        Self {
            id,
            timeout: Cell::new(None),
            timer: Cell::new(None),
        }
    }

    fn get(&self) -> Option<Duration> {
        self.timeout.get()
    }

    fn set(&self, dur: Option<Duration>) -> Result<()> {
        if let Some(dur) = dur.as_ref() {
            if dur.as_nanos() == 0 {
                return Err(io::Error::from_raw_os_error(libc::EINVAL).into());
            }
        }
        self.timeout.set(dur);
        Ok(())
    }

    fn maybe_set_timer(&self, reactor: &Reactor, waker: &Waker) {
        if let Some(timeout) = self.timeout.get() {
            if self.timer.get().is_none() {
                let deadline = Instant::now() + timeout;
                reactor.insert_timer(self.id, deadline, waker.clone());
                self.timer.set(Some(deadline));
            }
        }
    }

    fn cancel_timer(&self, reactor: &Reactor) {
        if let Some(deadline) = self.timer.take() {
            reactor.remove_timer(self.id, deadline);
        }
    }

    fn check(&self, reactor: &Reactor) -> io::Result<()> {
        if let Some(deadline) = self.timer.get() {
            // Prism patch (change 15): a timer no longer registered has fired and left the map; there is
            // nothing to remove (upstream removed it again to clear its ID map).
            if !reactor.timer_exists(&(deadline, self.id)) {
                self.timer.take();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "Operation timed out",
                ));
            }
        }
        Ok(())
    }
}

/// Prism patch: the most a read submitted through the ring asks for. The buffer is held while the recv
/// waits, so an idle keep-alive connection holds this much; a read that fills it is followed by direct
/// `recv`s into the caller's buffer (see `NonBufferedStream::poll_read`), so larger messages cost one
/// syscall per caller buffer, as before.
const RING_RECV_MAX: usize = 2048;

/// Prism patch: writes up to this size are copied and queued on the ring; larger ones are sent directly
/// from the caller's buffer (the copy would cost more than the syscall it saves).
const RING_SEND_MAX: usize = 16 * 1024;

#[derive(Debug)]
pub(crate) struct NonBufferedStream<S> {
    reactor: Weak<Reactor>,
    stream: S,
    source_tx: Option<Source>,
    // Prism patch: reads go through the ring (a `SockRecv` source) instead of a readiness poll followed
    // by a `recv` syscall. `ring_rx` is the recv in flight, or completed and not read to its end yet;
    // `rx_taken` is how much of a completed one reads took; `rx_full` says the last read filled its
    // buffer, so more is likely queued and a direct `recv` is tried first.
    ring_rx: Option<Source>,
    rx_taken: usize,
    rx_full: bool,
    // Prism patch: the last ring recv found no provided buffer left; the next one brings its own.
    rx_starved: bool,
    // Prism patch: a write queued on the ring and not known to be done (see `poll_write`).
    ring_tx: Option<Source>,
    // Prism patch: how many bytes that write queued (its buffer is freed when it completes).
    tx_len: usize,
    write_timeout: Timeout,
    read_timeout: Timeout,
}

impl<S: AsRawFd> NonBufferedStream<S> {
    /// Prism patch: copies what the completed ring recv brought from `rx_taken` on, and says how much it
    /// brought; None while the recv is in flight or when there is none. Ok((0, 0)) is EOF.
    fn copy_ring_rx(&self, buf: &mut [u8]) -> Option<io::Result<(usize, usize)>> {
        let src = self.ring_rx.as_ref()?;
        let got = match src.result()? {
            Ok(got) => got,
            Err(e) => return Some(Err(e)),
        };
        let n = (got - self.rx_taken).min(buf.len());
        match &*src.source_type() {
            SourceType::SockRecv(Some(data)) => {
                buf[..n].copy_from_slice(&data.as_bytes()[self.rx_taken..self.rx_taken + n]);
            }
            SourceType::SockRecvProvided(recv) => {
                buf[..n].copy_from_slice(&recv.bytes(got)[self.rx_taken..self.rx_taken + n]);
            }
            _ => {}
        }
        Some(Ok((n, got)))
    }

    /// Prism patch: the ring recv found the provided buffers all taken (ENOBUFS): it took no bytes, and
    /// the socket's queue is where they are.
    fn ring_rx_starved(&self) -> bool {
        matches!(
            self.ring_rx.as_ref().and_then(|src| src.result()),
            Some(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS)
        )
    }

    pub(crate) fn try_peek(&self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        // Prism patch: bytes a ring recv already took out of the socket come first; while one is in
        // flight the socket's queue is not where the next bytes will land.
        if self.ring_rx.is_some() && !self.ring_rx_starved() {
            return self.copy_ring_rx(buf).map(|r| r.map(|(n, _)| n));
        }
        super::yolo_peek(self.stream.as_raw_fd(), buf)
    }

    pub(crate) async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        // Prism patch: a peek behind a ring recv in flight waits for that recv, not for more bytes.
        if let Some(src) = self.ring_rx.as_ref() {
            if src.collect_rw().await.is_ok() || !self.ring_rx_starved() {
                return self.try_peek(buf).unwrap_or(Ok(0));
            }
        }
        let source = self.reactor.upgrade().unwrap().recv(
            self.stream.as_raw_fd(),
            buf.len(),
            MsgFlags::MSG_PEEK,
        );

        let sz = source.collect_rw().await?;
        match source.extract_source_type() {
            SourceType::SockRecv(mut src) => {
                buf[0..sz].copy_from_slice(&src.take().unwrap().as_bytes()[0..sz]);
            }
            _ => unreachable!(),
        }
        Ok(sz)
    }

    /// Prism patch: upstream polled for readiness, then called `recv`, and after every short read armed
    /// another poll: a poll SQE plus one `recvfrom` per read. Now a read that has to wait submits the
    /// `recv` itself through the ring (no syscall of its own: it goes out with the reactor's next
    /// `io_uring_enter`, and the kernel runs it as soon as bytes arrive). Only when the previous read
    /// filled its buffer, so more is probably queued, is a direct non-blocking `recv` tried first.
    /// The recv's buffer belongs to its source, so a read future dropped mid-wait loses nothing: the
    /// next read picks the bytes up.
    pub(crate) fn poll_read(
        &mut self,
        cx: &Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let reactor = self.reactor.upgrade().unwrap();
        let reactor = reactor.as_ref();

        if self.ring_rx_starved() {
            // No bytes taken: read them with a buffer of this stream's own (below).
            self.ring_rx = None;
            self.rx_starved = true;
        }
        if let Some(src) = self.ring_rx.as_ref() {
            let Some(copied) = self.copy_ring_rx(buf) else {
                poll_err!(self.read_timeout.check(reactor));
                src.add_waiter_single(cx.waker());
                self.read_timeout.maybe_set_timer(reactor, cx.waker());
                return Poll::Pending;
            };
            self.read_timeout.cancel_timer(reactor);
            let (n, got) = match copied {
                Ok(copied) => copied,
                Err(e) => {
                    self.ring_rx = None;
                    return Poll::Ready(Err(e));
                }
            };
            self.rx_taken += n;
            if self.rx_taken >= got {
                self.ring_rx = None;
                self.rx_taken = 0;
            }
            self.rx_full = n == buf.len() && n > 0;
            return Poll::Ready(Ok(n));
        }

        if self.rx_full || buf.is_empty() {
            if let Some(result) = super::yolo_recv(self.stream.as_raw_fd(), buf) {
                self.read_timeout.cancel_timer(reactor);
                let n = poll_err!(result);
                self.rx_full = n == buf.len() && n > 0;
                return Poll::Ready(Ok(n));
            }
        }
        self.rx_full = false;

        poll_err!(self.read_timeout.check(reactor));
        self.reap_ring_tx();
        let fd = self.stream.as_raw_fd();
        let len = buf.len().min(RING_RECV_MAX);
        // The recv takes a provided buffer when bytes arrive, so a connection waiting for its next
        // request holds none. Only right after the provided ones ran out does it bring its own.
        let provided = match std::mem::take(&mut self.rx_starved) {
            false => reactor.recv_provided(fd, len),
            true => None,
        };
        let src = provided.unwrap_or_else(|| reactor.recv(fd, len, MsgFlags::empty()));
        src.add_waiter_single(cx.waker());
        self.ring_rx = Some(src);
        self.read_timeout.maybe_set_timer(reactor, cx.waker());
        Poll::Pending
    }

    /// Prism patch: lets go of a queued write the kernel finished whole, with its copy of the bytes, so a
    /// connection that answered and now waits for its next request holds neither. One that failed or went
    /// out short is kept: the next write, flush or close reports it.
    fn reap_ring_tx(&mut self) {
        let Some(src) = self.ring_tx.as_ref() else {
            return;
        };
        if matches!(src.result(), Some(Ok(sent)) if sent >= self.tx_len) {
            self.ring_tx = None;
        }
    }

    /// Prism patch: waits until no ring write is outstanding, and reports how the last one ended.
    fn poll_ring_tx(&mut self, cx: &Context<'_>) -> Poll<io::Result<()>> {
        let Some(src) = self.ring_tx.as_ref() else {
            return Poll::Ready(Ok(()));
        };
        let reactor = self.reactor.upgrade().unwrap();
        let reactor = reactor.as_ref();
        match src.result() {
            None => {
                poll_err!(self.write_timeout.check(reactor));
                src.add_waiter_single(cx.waker());
                self.write_timeout.maybe_set_timer(reactor, cx.waker());
                Poll::Pending
            }
            Some(result) => {
                self.write_timeout.cancel_timer(reactor);
                self.ring_tx = None;
                let sent = poll_err!(result);
                if sent < self.tx_len {
                    // MSG_WAITALL makes the kernel finish the write or fail it; a short count here
                    // means bytes the caller was told were written are gone, so the stream is broken.
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "a queued socket write went out short",
                    )));
                }
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Prism patch: upstream called `send` for every write. On kernels with `MSG_WAITALL` for ring
    /// sends (`sys::ring_sends`), a write of up to `RING_SEND_MAX` bytes is copied, queued on the ring
    /// and reported written at once: it leaves with the reactor's next `io_uring_enter`, usually the
    /// one that also submits the read of the answer. Bytes stay in order because a write waits until
    /// the queued one is done; its error, if any, is returned by the next write, flush or close; a
    /// stream dropped with one queued hands it to a task that keeps it until the kernel is done.
    pub(crate) fn poll_write(&mut self, cx: &Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        poll_err!(ready!(self.poll_ring_tx(cx)));
        if sys::ring_sends() && !buf.is_empty() && buf.len() <= RING_SEND_MAX {
            let mut copy = DmaBuffer::new_unaligned(buf.len()).expect("failed to allocate buffer");
            copy.as_bytes_mut().copy_from_slice(buf);
            let reactor = self.reactor.upgrade().unwrap();
            self.ring_tx = Some(reactor.queued_send(self.stream.as_raw_fd(), copy));
            self.tx_len = buf.len();
            return Poll::Ready(Ok(buf.len()));
        }
        // On the write path, we always start with calling `yolo_send`, because
        // it is very likely to success. It could be a waste if it already timed
        // out since the last `poll_write`, but it would not cost much more to
        // give it one last chance in this case.
        if let Some(result) = super::yolo_send(self.stream.as_raw_fd(), buf) {
            let reactor = self.reactor.upgrade().unwrap();
            self.write_timeout.cancel_timer(reactor.as_ref());
            self.source_tx.take();
            return Poll::Ready(result);
        }

        let reactor = self.reactor.upgrade().unwrap();
        let reactor = reactor.as_ref();
        poll_err!(self.write_timeout.check(reactor));

        let no_pending_poll = self
            .source_tx
            .as_ref()
            .map(|src| src.result().is_some())
            .unwrap_or(true);

        if no_pending_poll {
            self.source_tx = Some(reactor.poll_write_ready(self.stream.as_raw_fd()));
        }

        let source = self.source_tx.as_ref().unwrap();
        source.add_waiter_single(cx.waker());
        self.write_timeout.maybe_set_timer(reactor, cx.waker());
        Poll::Pending
    }

    /// Prism patch: a flush does not wait for a queued write (that would cost a reactor turn per
    /// answer); it reports the error of one that already failed.
    pub(crate) fn poll_flush(&mut self, _cx: &Context<'_>) -> Poll<io::Result<()>> {
        if let Some(Some(Err(err))) = self.ring_tx.as_ref().map(|src| src.result()) {
            self.ring_tx = None;
            return Poll::Ready(Err(err));
        }
        Poll::Ready(Ok(()))
    }

    pub(crate) fn poll_close(&mut self, cx: &Context<'_>) -> Poll<io::Result<()>> {
        // Prism patch: the FIN goes after the queued write, not before it.
        poll_err!(ready!(self.poll_ring_tx(cx)));
        self.source_tx.take();
        Poll::Ready(sys::shutdown(self.stream.as_raw_fd(), Shutdown::Write))
    }

    /// io_uring has support for shutdown now, but it is not in any released
    /// kernel. Even with my "let's use latest" policy it would be crazy to
    /// mandate a kernel that doesn't even exist. So in preparation for that
    /// we'll sync-emulate this but already on an async wrapper
    pub(crate) fn poll_shutdown(
        &self,
        cx: &mut Context<'_>,
        how: Shutdown,
    ) -> Poll<io::Result<()>> {
        // Prism patch: shutting the write side waits for a queued write, as close does.
        if how != Shutdown::Read {
            if let Some(src) = self.ring_tx.as_ref() {
                if src.result().is_none() {
                    src.add_waiter_single(cx.waker());
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(sys::shutdown(self.stream.as_raw_fd(), how))
    }
}

/// Prism patch: a write queued on the ring must reach the kernel before the socket closes: the fd number
/// is only resolved at submission, so closing first could aim it at a reused fd. The main ring is
/// submitted now, which nearly always completes the write at once. A write the kernel took but has not
/// finished (socket buffer full) is kept by a task until it has, because dropping an in-flight source
/// cancels it; the kernel holds the file meanwhile, so the close that follows sends the FIN after the
/// bytes. Only if the ring could not be submitted (in use further up the stack) is the write withdrawn
/// unsent, as upstream withdraws any queued source that is dropped.
impl<S> Drop for NonBufferedStream<S> {
    fn drop(&mut self) {
        let Some(src) = self.ring_tx.take() else {
            return;
        };
        if src.result().is_some() {
            return;
        }
        if let Some(reactor) = self.reactor.upgrade() {
            reactor.sys.submit_main_now();
            if src.result().is_none() && src.is_dispatched() && crate::executor::executor_running() {
                crate::spawn_local(async move {
                    let _ = src.collect_rw().await;
                })
                .detach();
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct GlommioStream<S, B> {
    stream: NonBufferedStream<S>,
    rx_buf: B,
    rx_done: Cell<bool>,
}

impl<S> From<socket2::Socket> for GlommioStream<S, NonBuffered>
where
    S: AsRawFd + From<socket2::Socket> + Unpin,
{
    fn from(socket: socket2::Socket) -> Self {
        let reactor = crate::executor().reactor();
        let stream = NonBufferedStream {
            reactor: Rc::downgrade(&reactor),
            stream: socket.into(),
            source_tx: None,
            ring_rx: None,
            rx_taken: 0,
            rx_full: false,
            rx_starved: false,
            tx_len: 0,
            ring_tx: None,
            write_timeout: Timeout::new(reactor.register_timer()),
            read_timeout: Timeout::new(reactor.register_timer()),
        };
        GlommioStream {
            stream,
            rx_buf: NonBuffered,
            rx_done: Cell::new(false),
        }
    }
}

impl<S: AsRawFd> AsRawFd for GlommioStream<S, NonBuffered> {
    fn as_raw_fd(&self) -> RawFd {
        self.stream.stream.as_raw_fd()
    }
}

impl<S> FromRawFd for GlommioStream<S, NonBuffered>
where
    S: AsRawFd + FromRawFd + From<socket2::Socket> + Unpin,
{
    unsafe fn from_raw_fd(fd: RawFd) -> Self {
        let socket = socket2::Socket::from_raw_fd(fd);
        GlommioStream::from(socket)
    }
}

impl<S> GlommioStream<S, NonBuffered> {
    pub(crate) fn buffered_with<B: Buffered>(self, rx_buf: B) -> GlommioStream<S, B> {
        GlommioStream {
            stream: self.stream,
            rx_buf,
            rx_done: self.rx_done,
        }
    }
}

impl<S: AsRawFd, B: RxBuf> GlommioStream<S, B> {
    /// Receives data on the socket from the remote address to which it is
    /// connected, without removing that data from the queue.
    ///
    /// On success, returns the number of bytes peeked.
    /// Successive calls return the same data. This is accomplished by passing
    /// `MSG_PEEK` as a flag to the underlying `recv` system call.
    pub(crate) async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut pos = self.rx_buf.peek(buf);
        if pos < buf.len() && !self.rx_done.get() {
            if let Some(result) = self.stream.try_peek(&mut buf[pos..]) {
                match result {
                    Err(e) => return Err(e),
                    Ok(len) => {
                        pos += len;
                        if len == 0 {
                            self.rx_done.set(true);
                        }
                    }
                }
            }
        }
        if pos > 0 || self.rx_done.get() {
            return Ok(pos);
        }
        self.stream.peek(buf).await
    }

    pub(crate) fn poll_read(
        &mut self,
        cx: &Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if self.rx_buf.is_empty() {
            if buf.len() >= self.rx_buf.buffer_size() {
                return self.stream.poll_read(cx, buf);
            }
            if !self.rx_done.get() {
                poll_err!(ready!(self.poll_replenish_buffer(cx)));
            }
        }
        Poll::Ready(Ok(self.rx_buf.read(buf)))
    }

    fn poll_replenish_buffer(&mut self, cx: &Context<'_>) -> Poll<io::Result<usize>> {
        let result = poll_err!(ready!(self.stream.poll_read(cx, self.rx_buf.unfilled())));
        self.rx_buf.handle_result(result);
        if result == 0 {
            self.rx_done.set(true);
        }
        Poll::Ready(Ok(result))
    }

    pub(crate) fn poll_write(&mut self, cx: &Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stream.poll_write(cx, buf)
    }

    pub(crate) fn poll_flush(&mut self, cx: &Context<'_>) -> Poll<io::Result<()>> {
        self.stream.poll_flush(cx)
    }

    pub(crate) fn poll_close(&mut self, cx: &Context<'_>) -> Poll<io::Result<()>> {
        self.stream.poll_close(cx)
    }

    pub(crate) fn poll_shutdown(
        &self,
        cx: &mut Context<'_>,
        how: Shutdown,
    ) -> Poll<io::Result<()>> {
        self.stream.poll_shutdown(cx, how)
    }

    pub(crate) fn set_write_timeout(&self, dur: Option<Duration>) -> Result<()> {
        self.stream.write_timeout.set(dur)
    }

    pub(crate) fn set_read_timeout(&self, dur: Option<Duration>) -> Result<()> {
        self.stream.read_timeout.set(dur)
    }

    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        self.stream.write_timeout.get()
    }

    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        self.stream.read_timeout.get()
    }

    pub(crate) fn stream(&self) -> &S {
        &self.stream.stream
    }
}

impl<S: AsRawFd, B: Buffered> GlommioStream<S, B> {
    pub(crate) fn poll_fill_buf(&mut self, cx: &Context<'_>) -> Poll<io::Result<&[u8]>> {
        if self.rx_buf.is_empty() {
            poll_err!(ready!(self.poll_replenish_buffer(cx)));
        }
        Poll::Ready(Ok(self.rx_buf.as_bytes()))
    }

    pub(crate) fn consume(&mut self, amt: usize) {
        self.rx_buf.consume(amt);
    }
}
