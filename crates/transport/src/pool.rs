//! A per-shard keep-alive pool for one upstream. Owned by its shard: `RefCell`, never a lock.
//!
//! Reuse rules: newest idle connection first; one idle longer than `idle_timeout`, or that the peer closed
//! (non-blocking peek), is dropped at checkout. A replay-safe call skips the peek (one system call) on a
//! connection idle under [`PEEK_AFTER`]: if that one is dead, the call is resent on a fresh one by the
//! keep-alive race rule below. A connection goes back only when its response was read to the end and
//! keep-alive holds. A reused connection that dies before answering is the classic keep-alive
//! race: the request is sent again on a fresh connection when it is replay-safe, or when not one byte of it
//! could have reached the server.
//!
//! At most `max_connections` connections (busy and idle together, dials included) exist per upstream per
//! shard: beyond that a call waits, first in first out, for one to come back or close, until its deadline,
//! then fails with [`TransportError::ConnectionLimit`]. A burst cannot exhaust file descriptors, and the
//! wait is Prism's own limit, never the provider's failure.
//!
//! What a burst or a stall leaves behind is given back: an idle connection holds no read buffer (the pool
//! lends one per exchange), and idle connections no call took during a whole [`SURPLUS_WINDOW`] are
//! closed, all but one, without waiting for their `idle_timeout`.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use event_listener::{Event, IntoNotification};
use futures_lite::AsyncWriteExt;
use futures_rustls::TlsConnector;
use rustls::pki_types::ServerName;

use prism_config::Endpoint;
use prism_runtime::timeout_at;
use prism_wire::http1::SpareBufs;

use super::auth::ExtraHeaders;
use super::conn::Conn;
use super::response::{read_response, UpstreamResponse};
use super::TransportError;

#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    pub max_idle: usize,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub max_response_bytes: usize,
    /// Connections (busy, idle and being dialled) per upstream per shard.
    pub max_connections: usize,
}

struct Idle {
    conn: Conn,
    slot: Slot,
    since: Instant,
}

/// The pool's connection count and the callers waiting for it to drop.
#[derive(Default)]
struct Slots {
    open: Cell<usize>,
    /// Notified (one waiter each time) when a slot frees or a connection goes back idle.
    freed: Event,
}

/// One of the pool's `max_connections` places, held by a connection for as long as it lives (also while
/// dialling). Dropping it frees the place and wakes one waiter.
struct Slot(Rc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.set(self.0.open.get() - 1);
        self.0.freed.notify(1.additional());
    }
}

/// How long a connection may sit idle before even a replay-safe call peeks at it. Servers close idle
/// keep-alive connections after seconds (nginx 75 s, geth 120 s); one closed sooner is caught by the
/// keep-alive race rule at the cost of one resend. A call that is not replay-safe always peeks.
const PEEK_AFTER: Duration = Duration::from_secs(1);

/// Idle connections that stayed idle through a whole window of this length were not needed by the load of
/// that window (a stall or a burst opened them): all but [`KEEP_SPARE`] of them are closed.
pub const SURPLUS_WINDOW: Duration = Duration::from_secs(5);
/// Idle connections kept through a window in which none was taken, so a trickle of calls (one every few
/// seconds) does not dial each time.
const KEEP_SPARE: usize = 1;

pub struct UpstreamPool {
    endpoint: Endpoint,
    addrs: Arc<[SocketAddr]>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    settings: PoolSettings,
    idle: RefCell<Vec<Idle>>,
    next_addr: Cell<usize>,
    slots: Rc<Slots>,
    /// Request buffers between calls.
    requests: SpareBufs,
    /// Read buffers between exchanges: idle connections hold none.
    reads: SpareBufs,
    /// The fewest idle connections since `window` began: that many were not needed in it.
    idle_low: Cell<usize>,
    /// When the current surplus window began (the first sweep starts the first one).
    window: Cell<Option<Instant>>,
    /// The provider's own header lines (credentials), replaced by a reload that rotates them.
    headers: RefCell<ExtraHeaders>,
}

enum Acquired {
    Reused(Conn, Slot),
    Fresh(Slot),
}

impl UpstreamPool {
    /// `tls_config` is required for https endpoints; give each shard its own.
    pub fn new(
        endpoint: Endpoint,
        addrs: Arc<[SocketAddr]>,
        tls_config: Option<Arc<rustls::ClientConfig>>,
        settings: PoolSettings,
    ) -> Result<Self, TransportError> {
        let tls = super::dial::tls_for(&endpoint, tls_config)?;
        Ok(UpstreamPool {
            endpoint,
            addrs,
            tls,
            settings,
            idle: RefCell::new(Vec::new()),
            next_addr: Cell::new(0),
            slots: Rc::new(Slots::default()),
            requests: SpareBufs::small(),
            reads: SpareBufs::small(),
            idle_low: Cell::new(0),
            window: Cell::new(None),
            headers: RefCell::new(ExtraHeaders::default()),
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The provider's extra header lines for every request from now on (a reload's rotated secret takes
    /// effect on the next request; connections are kept).
    pub fn set_headers(&self, headers: ExtraHeaders) {
        if *self.headers.borrow() != headers {
            *self.headers.borrow_mut() = headers;
        }
    }

    pub fn headers(&self) -> ExtraHeaders {
        self.headers.borrow().clone()
    }

    /// POSTs `body` and reads the response, all before `deadline`. `replay_safe` allows sending it again
    /// on a fresh connection when a reused one turns out dead.
    pub async fn post(
        &self,
        body: &[u8],
        deadline: Instant,
        replay_safe: bool,
    ) -> Result<UpstreamResponse, TransportError> {
        let mut request = self.requests.take_empty();
        super::write_post(
            &mut request,
            &self.endpoint.path,
            &self.endpoint.host_header,
            self.headers.borrow().wire(),
            body,
        );
        let answer = self.post_request(&request, deadline, replay_safe).await;
        self.requests.give(request);
        answer
    }

    /// [`UpstreamPool::post`] once the request is written.
    async fn post_request(
        &self,
        request: &[u8],
        deadline: Instant,
        replay_safe: bool,
    ) -> Result<UpstreamResponse, TransportError> {
        match self.acquire(deadline, false, replay_safe).await? {
            Acquired::Reused(conn, slot) => match self.exchange(conn, slot, request, deadline).await {
                Ok(resp) => return Ok(resp),
                Err((e, wrote_any)) => {
                    let stale = matches!(e, TransportError::Reset { .. });
                    if !(stale && (replay_safe || !wrote_any)) {
                        return Err(e);
                    }
                    tracing::debug!(upstream = %self.endpoint, "pooled connection was dead; using a fresh one");
                }
            },
            Acquired::Fresh(slot) => {
                let conn = self.connect(deadline).await?;
                return self.exchange(conn, slot, request, deadline).await.map_err(|(e, _)| e);
            }
        }
        let Acquired::Fresh(slot) = self.acquire(deadline, true, replay_safe).await? else {
            unreachable!("acquire(fresh) never hands out an idle connection")
        };
        let conn = self.connect(deadline).await?;
        self.exchange(conn, slot, request, deadline).await.map_err(|(e, _)| e)
    }

    /// An idle connection (unless `fresh`), or a place for a new one: at once when there is one, else in
    /// turn as they come back or close, until `deadline`.
    async fn acquire(&self, deadline: Instant, fresh: bool, replay_safe: bool) -> Result<Acquired, TransportError> {
        let now = || -> Option<Acquired> {
            if !fresh {
                if let Some((conn, slot)) = self.checkout(replay_safe) {
                    return Some(Acquired::Reused(conn, slot));
                }
            } else if self.slots.open.get() >= self.settings.max_connections.max(1) {
                // Room for a fresh connection: close the oldest idle one, if any.
                let mut idle = self.idle.borrow_mut();
                if !idle.is_empty() {
                    drop(idle.remove(0));
                }
            }
            self.try_reserve().map(Acquired::Fresh)
        };
        loop {
            if let Some(a) = now() {
                return Ok(a);
            }
            let freed = self.slots.freed.listen();
            // Checked again once listening, so a release in between is not missed.
            if let Some(a) = now() {
                return Ok(a);
            }
            if timeout_at(deadline, freed).await.is_err() {
                return Err(TransportError::ConnectionLimit {
                    max: self.settings.max_connections,
                });
            }
        }
    }

    fn try_reserve(&self) -> Option<Slot> {
        let open = self.slots.open.get();
        if open >= self.settings.max_connections.max(1) {
            return None;
        }
        self.slots.open.set(open + 1);
        Some(Slot(self.slots.clone()))
    }

    /// Frees the request and read buffers no call took since the last trim (`SpareBufs::trim`); returns
    /// the bytes.
    pub fn trim_spares(&self) -> usize {
        self.requests.trim() + self.reads.trim()
    }

    /// Closes idle connections past their idle timeout, and at the end of each [`SURPLUS_WINDOW`] the
    /// oldest of those no call took during it (keeping [`KEEP_SPARE`]). Called from the shard's
    /// housekeeping loop.
    pub fn sweep(&self, now: Instant) {
        let timeout = self.settings.idle_timeout;
        let mut idle = self.idle.borrow_mut();
        idle.retain(|i| now.duration_since(i.since) < timeout);
        match self.window.get() {
            Some(began) if now.duration_since(began) < SURPLUS_WINDOW => return,
            Some(_) => {
                // The bottom of the stack is the oldest: a call takes the newest first.
                let surplus = self.idle_low.get().min(idle.len()).saturating_sub(KEEP_SPARE);
                if surplus > 0 {
                    tracing::debug!(upstream = %self.endpoint, surplus, "closing idle connections the load did not need");
                    idle.drain(..surplus);
                }
            }
            None => {}
        }
        self.window.set(Some(now));
        self.idle_low.set(idle.len());
    }

    fn checkout(&self, replay_safe: bool) -> Option<(Conn, Slot)> {
        let now = Instant::now();
        let mut idle = self.idle.borrow_mut();
        let taken = loop {
            let Some(Idle { conn, slot, since }) = idle.pop() else {
                break None;
            };
            let age = now.duration_since(since);
            let trusted = replay_safe && age < PEEK_AFTER;
            if age < self.settings.idle_timeout && (trusted || conn.stream.looks_alive()) {
                break Some((conn, slot));
            }
        };
        self.idle_low.set(self.idle_low.get().min(idle.len()));
        taken
    }

    fn checkin(&self, mut conn: Conn, slot: Slot) {
        conn.buf.give_to(&self.reads);
        let mut idle = self.idle.borrow_mut();
        if idle.len() < self.settings.max_idle {
            idle.push(Idle {
                conn,
                slot,
                since: Instant::now(),
            });
            // A waiter can take this one (dropping the slot instead wakes one by itself).
            self.slots.freed.notify(1.additional());
        }
    }

    /// Writes the request and reads the response. On failure also says whether any byte was written.
    async fn exchange(
        &self,
        mut conn: Conn,
        slot: Slot,
        request: &[u8],
        deadline: Instant,
    ) -> Result<UpstreamResponse, (TransportError, bool)> {
        let written = Cell::new(false);
        conn.buf.take_from(&self.reads);
        let work = async {
            written.set(true);
            if conn.stream.write_all(request).await.is_err() || conn.stream.flush().await.is_err() {
                return Err(TransportError::Reset { sent: true });
            }
            read_response(&mut conn, self.settings.max_response_bytes).await
        };
        match timeout_at(deadline, work).await {
            Ok(Ok(resp)) => {
                if resp.reusable {
                    self.checkin(conn, slot);
                } else {
                    conn.buf.give_to(&self.reads);
                }
                Ok(resp)
            }
            Ok(Err(e)) => Err((e, written.get())),
            Err(_) => Err((TransportError::Timeout { sent: written.get() }, written.get())),
        }
    }

    async fn connect(&self, deadline: Instant) -> Result<Conn, TransportError> {
        let start = self.next_addr.get();
        self.next_addr.set(start.wrapping_add(1));
        // Boxed: dialing (TCP connect, then the TLS handshake) is a 3 KB future, and inline it would be
        // carried by every call's future (and, through the answer's future, a connection's task) though
        // few calls open a connection.
        let stream = Box::pin(super::dial::dial(
            &self.addrs,
            start,
            self.tls.as_ref(),
            deadline.min(Instant::now() + self.settings.connect_timeout),
        ))
        .await?;
        Ok(Conn::new(stream))
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
