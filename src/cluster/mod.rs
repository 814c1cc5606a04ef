//! Several Prism nodes sharing what they learn through Redis, on one background thread per node. Nothing on
//! the request path waits for Redis: shards only read atomics this thread updates.
//!
//! Every `sync_interval_ms` a node publishes its view (breaker states, heads, latency summaries, per-key
//! high-water marks) under a key that expires after `ttl_ms`, and reads its live peers'. A peer's open
//! breaker makes a provider a last resort here (a node's own breaker and probes still decide exclusion);
//! a peer's higher head raises the pool's best head; a peer's mark raises the same key's mark here.
//! Rate limits and provider quota are shared by leasing tokens in chunks from a token bucket kept in Redis
//! (a Lua script, Redis's clock): no Redis call per request. When Redis is unreachable each node spends
//! only its share of every limit (limit / last known node count) and keeps serving.
//!
//! Redis is advisory, never trusted: whatever is read back is bounded before it touches an atomic. A peer's
//! best head or mark beyond where this node's own believed heads say the chain can be is ignored; a node
//! entry that claims to live far in the future is ignored; a token grant outside `0..=asked` is clamped.
//! Each refusal is counted (`prism_cluster_refused_total`) and logged at warn, at most once per
//! [`WARN_EVERY_MS`].
//!
//! The connection itself (URL or Sentinel, TLS, ACL credentials) is [`link`]'s; what a node publishes and
//! how a peer's view is read back is [`view`]'s; the token leases are [`lease`]'s. This file is the thread's
//! loop: each sync's round trip, and the bounds what Redis says must keep.

mod lease;
mod link;
mod view;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::access::keys::KeyRing;
use link::{Link, LinkError};
use prism_config::{Cluster, Config};
use prism_core::live::state::NetworkLive;
use prism_runtime::Shutdown;
use prism_telemetry::clock::now_ms;

/// A peer as this node last saw it.
#[derive(Debug, Clone)]
pub struct Peer {
    pub id: String,
    /// Providers the peer reports with an open breaker, as "network/provider".
    pub open: Vec<String>,
    pub best_heads: Vec<u64>,
}

/// What the admin endpoints and metrics show about the cluster.
pub struct ClusterState {
    pub node_id: String,
    pub connected: AtomicBool,
    /// Wall-clock ms of the last successful sync (0 = never).
    pub last_sync_ms: AtomicU64,
    pub errors: AtomicU64,
    /// Values read from Redis that were out of bounds and ignored (or clamped).
    pub refused: AtomicU64,
    pub peers: ArcSwap<Vec<Peer>>,
}

impl ClusterState {
    /// Milliseconds since the last successful sync.
    pub fn lag_ms(&self) -> u64 {
        match self.last_sync_ms.load(Ordering::Relaxed) {
            0 => u64::MAX,
            t => wall_ms().saturating_sub(t),
        }
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Refusals of what Redis says are logged at most this often.
pub const WARN_EVERY_MS: u64 = 10_000;
/// Most peers read per sync.
const MAX_PEERS: usize = 256;

/// A token grant as Redis returned it, bounded to what was asked.
fn bounded_grant(granted: i64, want: i64) -> i64 {
    granted.clamp(0, want.max(0))
}

/// The latest a live node's entry may expire: its ttl from now (a peer's ttl is assumed within twice ours),
/// plus a second of clock skew. An entry scored beyond it is not a live node.
fn node_horizon(now: u64, ttl_ms: u64) -> u64 {
    now.saturating_add(ttl_ms.saturating_mul(2)).saturating_add(1000)
}

/// A peer's head or mark, if this node's view of the chain makes it plausible.
fn bounded_head(value: u64, ceiling: Option<u64>) -> Option<u64> {
    match ceiling {
        Some(c) if value <= c && value <= prism_core::live::state::MAX_HEIGHT => Some(value),
        _ => None,
    }
}

/// Starts the cluster thread when `[cluster]` is configured.
pub fn start(
    config: Arc<ArcSwap<Config>>,
    lives: Vec<Arc<NetworkLive>>,
    keys: Arc<ArcSwap<KeyRing>>,
    shutdown: Shutdown,
) -> Option<Arc<ClusterState>> {
    let cluster = config.load().cluster.clone()?;
    let state = Arc::new(ClusterState {
        node_id: format!("{:016x}", fastrand::u64(..)),
        connected: AtomicBool::new(false),
        last_sync_ms: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        peers: ArcSwap::from_pointee(Vec::new()),
    });
    let shared = state.clone();
    std::thread::Builder::new()
        .name("prism-cluster".into())
        .spawn(move || Sync::new(cluster, config, lives, keys, shared).run(&shutdown))
        .expect("spawn cluster thread");
    Some(state)
}

/// The cluster thread's state between syncs.
struct Sync {
    cluster: Cluster,
    sources: Sources,
    /// The running config and keys, as a reload last left them ([`Sync::refresh`] takes them each sync).
    config: Arc<Config>,
    lives: Vec<Arc<NetworkLive>>,
    keys: Arc<KeyRing>,
    state: Arc<ClusterState>,
    redis: Redis,
    /// This outage (or the failures since start) was logged: one warning each, not one per sync.
    outage_logged: bool,
    nodes: u32,
    /// Process-clock ms of the last warning about a refused value (rate limit).
    warned_ms: Cell<u64>,
}

/// Where each sync takes the running config and keys from: a reload swaps them.
struct Sources {
    config: Arc<ArcSwap<Config>>,
    keys: Arc<ArcSwap<KeyRing>>,
}

/// The Redis side: how to reach it, the connection while it holds, and the lease script.
struct Redis {
    link: Link,
    conn: Option<redis::Connection>,
    script: redis::Script,
}

// === impl Redis ===

impl Redis {
    fn connection(&mut self) -> Result<&mut redis::Connection, LinkError> {
        if self.conn.is_some() && self.link.master_moved() {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.conn = Some(self.link.connect()?);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }
}

// === impl Sync ===

impl Sync {
    fn new(
        cluster: Cluster,
        config_cell: Arc<ArcSwap<Config>>,
        lives: Vec<Arc<NetworkLive>>,
        keys_cell: Arc<ArcSwap<KeyRing>>,
        state: Arc<ClusterState>,
    ) -> Self {
        let nodes = cluster.expected_nodes.max(1);
        let link = Link::new(&cluster);
        Sync {
            cluster,
            config: config_cell.load_full(),
            keys: keys_cell.load_full(),
            sources: Sources {
                config: config_cell,
                keys: keys_cell,
            },
            lives,
            state,
            redis: Redis {
                link,
                conn: None,
                script: redis::Script::new(lease::LEASE_SCRIPT),
            },
            outage_logged: false,
            nodes,
            warned_ms: Cell::new(0),
        }
    }

    fn run(mut self, shutdown: &Shutdown) {
        let interval = Duration::from_millis(self.cluster.sync_interval_ms.max(10));
        while !shutdown.is_triggered() {
            let started = Instant::now();
            self.refresh();
            match self.sync_once() {
                Ok(()) => {
                    self.outage_logged = false;
                    if !self.state.connected.swap(true, Ordering::AcqRel) {
                        tracing::info!(node = %self.state.node_id, redis = %self.redis.link.describe(), "cluster: Redis reachable; sharing state and limits");
                    }
                    self.state.last_sync_ms.store(wall_ms(), Ordering::Relaxed);
                }
                Err(e) => {
                    self.redis.conn = None;
                    self.state.errors.fetch_add(1, Ordering::Relaxed);
                    let was_connected = self.state.connected.swap(false, Ordering::AcqRel);
                    if was_connected || !self.outage_logged {
                        self.outage_logged = true;
                        tracing::warn!(error = %e, redis = %self.redis.link.describe(), nodes = self.nodes, "cluster: Redis unreachable; each limit falls back to this node's share (retrying every sync; errors counted in prism_cluster_redis_errors_total)");
                    }
                    self.fall_back();
                    // Peers cannot be seen without Redis; their advisory state expires on its own.
                    self.state.peers.store(Arc::new(Vec::new()));
                }
            }
            #[allow(clippy::disallowed_methods, reason = "the cluster's own thread between Redis rounds")]
            std::thread::sleep(interval.saturating_sub(started.elapsed()));
        }
    }

    /// Takes the config and keys a reload may have swapped. Within one sync they do not change, so the
    /// positions a lease pass takes stay valid.
    fn refresh(&mut self) {
        self.config = self.sources.config.load_full();
        self.keys = self.sources.keys.load_full();
    }

    /// A value read from Redis is out of bounds: count it, warn now and then, change nothing.
    fn refuse(&self, what: &str, detail: std::fmt::Arguments<'_>) {
        self.state.refused.fetch_add(1, Ordering::Relaxed);
        let now = now_ms();
        let last = self.warned_ms.get();
        if last == 0 || now.saturating_sub(last) >= WARN_EVERY_MS {
            self.warned_ms.set(now);
            tracing::warn!(what, detail = %detail, refused = self.state.refused.load(Ordering::Relaxed), "cluster: ignored an implausible value read from Redis (advisory only; further ones are counted in prism_cluster_refused_total)");
        }
    }

    fn key(&self, parts: &str) -> String {
        format!("{}:{parts}", self.cluster.prefix)
    }

    fn sync_once(&mut self) -> Result<(), LinkError> {
        let payload = self.payload();
        let ttl = self.cluster.ttl_ms.max(1);
        let now = wall_ms();
        let id = self.state.node_id.clone();
        let node_key = self.key(&format!("node:{id}"));
        let nodes_key = self.key("nodes");
        let horizon = node_horizon(now, ttl);
        let conn = self.redis.connection()?;
        let (live_ids, future): (Vec<String>, u64) = redis::pipe()
            .cmd("SET")
            .arg(&node_key)
            .arg(&payload)
            .arg("PX")
            .arg(ttl)
            .ignore()
            .cmd("ZADD")
            .arg(&nodes_key)
            .arg(now + ttl)
            .arg(&id)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&nodes_key)
            .arg("-inf")
            .arg(now)
            .ignore()
            .cmd("ZRANGEBYSCORE")
            .arg(&nodes_key)
            .arg(now)
            .arg(horizon)
            .cmd("ZCOUNT")
            .arg(&nodes_key)
            .arg(format!("({horizon}"))
            .arg("+inf")
            .query(conn)?;
        if future > 0 {
            self.refuse(
                "node entry",
                format_args!(
                    "{future} node entries claim to live beyond {} ms from now",
                    horizon - now
                ),
            );
        }
        let mut peers: Vec<String> = live_ids.into_iter().filter(|p| *p != id).collect();
        if peers.len() > MAX_PEERS {
            self.refuse(
                "node entry",
                format_args!("{} live node entries; reading {MAX_PEERS}", peers.len()),
            );
            peers.truncate(MAX_PEERS);
        }
        let payloads: Vec<Option<String>> = if peers.is_empty() {
            Vec::new()
        } else {
            let keys: Vec<String> = peers
                .iter()
                .map(|p| format!("{}:node:{p}", self.cluster.prefix))
                .collect();
            redis::cmd("MGET")
                .arg(keys)
                .query(self.redis.conn.as_mut().expect("connected"))?
        };
        let mut seen = Vec::new();
        let ceilings: Vec<Option<u64>> = self.lives.iter().map(|l| l.plausible_ceiling(now_ms())).collect();
        let mut demands = Vec::new();
        for (peer, payload) in peers.iter().zip(payloads) {
            if let Some(p) = payload {
                seen.push(self.apply(peer, &p, &ceilings, &mut demands));
            }
        }
        self.share_demands(demands);
        // Peers' best heads, bounded per peer in `apply`: replaced every sync, never kept as a maximum.
        let until = now_ms() + self.cluster.ttl_ms;
        for (n, live) in self.lives.iter().enumerate() {
            let best = seen.iter().map(|p| p.best_heads[n]).max().unwrap_or(0);
            live.set_peer_best(best, until);
        }
        self.nodes = (seen.len() as u32 + 1).max(1);
        self.state.peers.store(Arc::new(seen));
        self.lease()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_redis_says_is_bounded() {
        assert_eq!(bounded_grant(3, 5), 3);
        assert_eq!(bounded_grant(-1_000_000, 5), 0, "a negative grant takes nothing away");
        assert_eq!(bounded_grant(i64::MAX, 5), 5, "a huge grant is no more than asked");
        assert_eq!(bounded_grant(2, -1), 0);
        assert_eq!(bounded_head(100, Some(100)), Some(100));
        assert_eq!(bounded_head(101, Some(100)), None);
        assert_eq!(bounded_head(1, None), None, "nothing to bound it by: not taken");
        assert_eq!(bounded_head(u64::MAX, Some(u64::MAX)), None);
        assert_eq!(node_horizon(1_000, 500), 3_000);
        assert_eq!(node_horizon(u64::MAX - 1, u64::MAX), u64::MAX);
    }
}
