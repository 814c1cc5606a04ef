//! A per-shard keep-alive pool for one upstream. Owned by its shard: `RefCell`, never a lock.
//!
//! Reuse rules: newest idle connection first; one idle longer than `idle_timeout`, or that the peer closed
//! (non-blocking peek), is dropped at checkout; a connection goes back only when its response was read to
//! the end and keep-alive holds. A reused connection that dies before answering is the classic keep-alive
//! race: the request is sent again on a fresh connection when it is replay-safe, or when not one byte of it
//! could have reached the server.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::AsyncWriteExt;
use futures_rustls::TlsConnector;
use rustls::pki_types::ServerName;

use crate::config::Endpoint;
use crate::runtime::timeout_at;

use super::conn::Conn;
use super::response::{read_response, UpstreamResponse};
use super::TransportError;

#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    pub max_idle: usize,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub max_response_bytes: usize,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

pub struct UpstreamPool {
    endpoint: Endpoint,
    addrs: Arc<[SocketAddr]>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    settings: PoolSettings,
    idle: RefCell<Vec<Idle>>,
    next_addr: Cell<usize>,
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
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// POSTs `body` and reads the response, all before `deadline`. `replay_safe` allows sending it again
    /// on a fresh connection when a reused one turns out dead.
    pub async fn post(
        &self,
        body: &[u8],
        deadline: Instant,
        replay_safe: bool,
    ) -> Result<UpstreamResponse, TransportError> {
        let mut request = Vec::new();
        super::write_post(&mut request, &self.endpoint.path, &self.endpoint.host_header, body);
        if let Some(conn) = self.checkout() {
            match self.exchange(conn, &request, deadline).await {
                Ok(resp) => return Ok(resp),
                Err((e, wrote_any)) => {
                    let stale = matches!(e, TransportError::Reset { .. });
                    if !(stale && (replay_safe || !wrote_any)) {
                        return Err(e);
                    }
                    tracing::debug!(upstream = %self.endpoint, "pooled connection was dead; using a fresh one");
                }
            }
        }
        let conn = self.connect(deadline).await?;
        self.exchange(conn, &request, deadline).await.map_err(|(e, _)| e)
    }

    /// Closes idle connections past their idle timeout. Called from the shard's housekeeping timer.
    pub fn sweep(&self, now: Instant) {
        let timeout = self.settings.idle_timeout;
        self.idle.borrow_mut().retain(|i| now.duration_since(i.since) < timeout);
    }

    fn checkout(&self) -> Option<Conn> {
        let now = Instant::now();
        let mut idle = self.idle.borrow_mut();
        while let Some(Idle { conn, since }) = idle.pop() {
            if now.duration_since(since) < self.settings.idle_timeout && conn.stream.looks_alive() {
                return Some(conn);
            }
        }
        None
    }

    fn checkin(&self, conn: Conn) {
        let mut idle = self.idle.borrow_mut();
        if idle.len() < self.settings.max_idle {
            idle.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }

    /// Writes the request and reads the response. On failure also says whether any byte was written.
    async fn exchange(
        &self,
        mut conn: Conn,
        request: &[u8],
        deadline: Instant,
    ) -> Result<UpstreamResponse, (TransportError, bool)> {
        let written = Cell::new(false);
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
                    self.checkin(conn);
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
        let stream = super::dial::dial(
            &self.addrs,
            start,
            self.tls.as_ref(),
            deadline.min(Instant::now() + self.settings.connect_timeout),
        )
        .await?;
        Ok(Conn::new(stream))
    }
}
