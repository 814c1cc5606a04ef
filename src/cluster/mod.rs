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
//! The connection itself (URL or Sentinel, TLS, ACL credentials) is [`link`]'s.

mod link;

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::access::keys::KeyRing;
use link::{Link, LinkError};
use prism_config::{Cluster, Config};
use prism_core::live::marks::MarkKey;
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

/// Token bucket in Redis: refill at ARGV[1]/s up to ARGV[2], grant up to ARGV[3]. Uses Redis's clock.
const LEASE_SCRIPT: &str = r#"
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
local grant = math.min(want, math.floor(tokens))
if grant < 0 then grant = 0 end
tokens = tokens - grant
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], 60000)
return grant
"#;

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

struct Sync {
    cluster: Cluster,
    /// The running config and keys, as a reload last left them ([`Sync::refresh`] takes them each sync).
    config_cell: Arc<ArcSwap<Config>>,
    keys_cell: Arc<ArcSwap<KeyRing>>,
    config: Arc<Config>,
    lives: Vec<Arc<NetworkLive>>,
    keys: Arc<KeyRing>,
    state: Arc<ClusterState>,
    conn: Option<redis::Connection>,
    link: Link,
    /// This outage (or the failures since start) was logged: one warning each, not one per sync.
    outage_logged: bool,
    script: redis::Script,
    nodes: u32,
    /// Process-clock ms of the last warning about a refused value (rate limit).
    warned_ms: Cell<u64>,
}

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
            config_cell,
            keys_cell,
            lives,
            state,
            conn: None,
            link,
            outage_logged: false,
            script: redis::Script::new(LEASE_SCRIPT),
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
                        tracing::info!(node = %self.state.node_id, redis = %self.link.describe(), "cluster: Redis reachable; sharing state and limits");
                    }
                    self.state.last_sync_ms.store(wall_ms(), Ordering::Relaxed);
                }
                Err(e) => {
                    self.conn = None;
                    self.state.errors.fetch_add(1, Ordering::Relaxed);
                    let was_connected = self.state.connected.swap(false, Ordering::AcqRel);
                    if was_connected || !self.outage_logged {
                        self.outage_logged = true;
                        tracing::warn!(error = %e, redis = %self.link.describe(), nodes = self.nodes, "cluster: Redis unreachable; each limit falls back to this node's share (retrying every sync; errors counted in prism_cluster_redis_errors_total)");
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
        self.config = self.config_cell.load_full();
        self.keys = self.keys_cell.load_full();
    }

    fn connection(&mut self) -> Result<&mut redis::Connection, LinkError> {
        if self.conn.is_some() && self.link.master_moved() {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.conn = Some(self.link.connect()?);
        }
        Ok(self.conn.as_mut().expect("just connected"))
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
        let conn = self.connection()?;
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
                .query(self.conn.as_mut().expect("connected"))?
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

    /// This node's view, one fact per line.
    fn payload(&self) -> String {
        let mut out = String::from("v1\n");
        // Networks and providers by name: peers' configs need not list them in the same order.
        for (n, live) in self.lives.iter().enumerate() {
            let net = &self.config.networks[n];
            let _ = writeln!(out, "net {} {}", net.name, live.best_head.load(Ordering::Relaxed));
            let health = live.health.load();
            for (i, c) in net.providers.iter().enumerate().filter(|(_, c)| !c.retired) {
                let p = live.slot(prism_wire::rpc::ProviderId::new(i));
                let h = health.providers.get(i).cloned().unwrap_or_default();
                let open =
                    !p.breaker.is_closed() || p.drifted.load(Ordering::Relaxed) || p.outlier.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "prov {} {} {} {} {} {}",
                    net.name,
                    c.name,
                    u8::from(open),
                    p.head.load(Ordering::Relaxed),
                    h.overall.p50_us,
                    (h.overall.error_rate() * 1e6) as u64
                );
            }
            let keys = std::iter::once((0, "-")).chain(self.keys.entries().iter().map(|e| (e.index, e.name.as_str())));
            for (k, key) in keys {
                let m = live.marks.get(MarkKey::Key(k));
                if m > 0 {
                    let _ = writeln!(out, "mark {} {key} {m}", net.name);
                }
            }
            // Each key's demand on each quota-limited provider (fair shares): peers fill the quota with it.
            if live.quota.fair_on() {
                for (i, c) in net.providers.iter().enumerate().filter(|(_, c)| c.quota_rps.is_some()) {
                    for (k, credits) in live.quota.local_demand(prism_wire::rpc::ProviderId::new(i)) {
                        let name = if k == 0 {
                            Some("-")
                        } else {
                            self.keys
                                .entries()
                                .iter()
                                .find(|e| e.index == k)
                                .map(|e| e.name.as_str())
                        };
                        if let Some(name) = name {
                            let _ = writeln!(out, "fair {} {} {name} {}", net.name, c.name, (credits * 1000.0) as u64);
                        }
                    }
                }
            }
        }
        out
    }

    /// Folds a peer's view into this node's atomics. Heads and marks above `ceilings[n]` (where this node's own
    /// believed heads say network `n` can plausibly be) are ignored.
    fn apply(
        &self,
        peer: &str,
        payload: &str,
        ceilings: &[Option<u64>],
        demands: &mut Vec<(usize, usize, usize, f64)>,
    ) -> Peer {
        let until = now_ms() + self.cluster.ttl_ms;
        let mut open = Vec::new();
        let mut best_heads = vec![0; self.lives.len()];
        let network = |name: &str| self.config.networks.iter().position(|n| n.name == name);
        for line in payload.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
            let Some(n) = f.get(1).and_then(|name| network(name)) else {
                continue;
            };
            let live = &self.lives[n];
            match f.first() {
                Some(&"net") => {
                    // Advisory: ranks providers, never excludes one (drift uses this node's own view).
                    match num(2).map(|best| (best, bounded_head(best, ceilings[n]))) {
                        Some((_, Some(best))) => best_heads[n] = best,
                        Some((best, None)) => self.refuse(
                            "best head",
                            format_args!("peer {peer} reports {best} on {}, beyond {:?}", f[1], ceilings[n]),
                        ),
                        None => {}
                    }
                }
                Some(&"prov") => {
                    let provider = f
                        .get(2)
                        .and_then(|p| self.config.networks[n].providers.iter().position(|c| c.name == *p));
                    if let (Some(i), Some(1)) = (provider, num(3)) {
                        live.slot(prism_wire::rpc::ProviderId::new(i))
                            .peer_open_until_ms
                            .fetch_max(until, Ordering::AcqRel);
                        open.push(format!(
                            "{}/{}",
                            self.config.networks[n].name, self.config.networks[n].providers[i].name
                        ));
                    }
                }
                Some(&"fair") => {
                    // A peer's key demand on a quota-limited provider, in thousandths of a credit per second.
                    let provider = f
                        .get(2)
                        .and_then(|p| self.config.networks[n].providers.iter().position(|c| c.name == *p));
                    let key = match f.get(3) {
                        Some(&"-") => Some(0),
                        Some(name) => self.keys.entries().iter().find(|e| e.name == *name).map(|e| e.index),
                        None => None,
                    };
                    if let (Some(i), Some(k), Some(d)) = (provider, key, num(4)) {
                        demands.push((n, i, k, d as f64 / 1000.0));
                    }
                }
                Some(&"mark") => {
                    let key = match f.get(2) {
                        Some(&"-") => Some(0),
                        Some(name) => self.keys.entries().iter().find(|e| e.name == *name).map(|e| e.index),
                        None => None,
                    };
                    if let (Some(k), Some(h)) = (key, num(3)) {
                        match bounded_head(h, ceilings[n]) {
                            Some(h) => live.marks.raise(MarkKey::Key(k), h),
                            None => self.refuse(
                                "mark",
                                format_args!("peer {peer} reports mark {h} on {}, beyond {:?}", f[1], ceilings[n]),
                            ),
                        }
                    }
                }
                _ => {}
            }
        }
        Peer {
            id: peer.to_string(),
            open,
            best_heads,
        }
    }

    /// Peers' key demands on quota-limited providers (summed over peers) go to each provider's fair shares,
    /// bounded there (`core::live::quota::PEER_DEMAND_BOUND`) and valid for a ttl.
    fn share_demands(&self, mut demands: Vec<(usize, usize, usize, f64)>) {
        let until = now_ms() + self.cluster.ttl_ms;
        demands.sort_by_key(|d| (d.0, d.1, d.2));
        for (n, live) in self.lives.iter().enumerate() {
            if !live.quota.fair_on() {
                continue;
            }
            for (i, c) in self.config.networks[n].providers.iter().enumerate() {
                if c.quota_rps.is_none() {
                    continue;
                }
                let mut per_key: Vec<(usize, f64)> = Vec::new();
                for d in demands.iter().filter(|d| d.0 == n && d.1 == i) {
                    match per_key.last_mut() {
                        Some(last) if last.0 == d.2 => last.1 += d.3,
                        _ => per_key.push((d.2, d.3)),
                    }
                }
                let cut = live
                    .quota
                    .set_peer_demand(prism_wire::rpc::ProviderId::new(i), &per_key, until);
                if cut > 0 {
                    self.refuse(
                        "key demand",
                        format_args!(
                            "{cut} peer demands on {}/{} beyond the bound",
                            self.config.networks[n].name, c.name
                        ),
                    );
                }
            }
        }
    }

    /// Tops up leased tokens for every shared limit: about two sync intervals' worth, at least one.
    fn lease(&mut self) -> Result<(), LinkError> {
        let tick_s = self.cluster.sync_interval_ms as f64 / 1000.0;
        let mut wants: Vec<(String, f64, u32, i64, LeaseTarget)> = Vec::new();
        for (k, entry) in self.keys.entries().iter().enumerate() {
            if let Some(shared) = &entry.rate.shared {
                let target =
                    ((shared.rate_per_s * tick_s * 2.0).ceil() as i64).clamp(1, i64::from(shared.burst.max(1)));
                let stock = shared.stock.load(Ordering::Acquire);
                if stock < target {
                    wants.push((
                        self.key(&format!("bucket:key:{}", entry.name)),
                        shared.rate_per_s,
                        shared.burst,
                        target - stock,
                        LeaseTarget::Key(k),
                    ));
                }
            }
        }
        for (n, net) in self.config.networks.iter().enumerate() {
            for (i, p) in net.providers.iter().enumerate() {
                if let Some(q) = p.quota_rps {
                    let rate = f64::from(q);
                    let target = ((rate * tick_s * 2.0).ceil() as i64).max(1);
                    let stock = self.lives[n]
                        .slot(prism_wire::rpc::ProviderId::new(i))
                        .quota_stock
                        .load(Ordering::Acquire);
                    if stock < target {
                        let key = self.key(&format!("bucket:quota:{}:{}", net.name, p.name));
                        wants.push((key, rate, q, target - stock, LeaseTarget::Provider(n, i)));
                    }
                }
            }
        }
        for (key, rate, burst, want, target) in wants {
            let answered: i64 = self
                .script
                .key(&key)
                .arg(rate)
                .arg(burst)
                .arg(want)
                .invoke(self.conn.as_mut().expect("connected"))?;
            let granted = bounded_grant(answered, want);
            if granted != answered {
                self.refuse(
                    "token grant",
                    format_args!("{key}: Redis granted {answered} of {want} asked; using {granted}"),
                );
            }
            match target {
                LeaseTarget::Key(k) => {
                    if let Some(shared) = &self.keys.entries()[k].rate.shared {
                        shared.stock.fetch_add(granted, Ordering::AcqRel);
                        shared.active.store(true, Ordering::Release);
                    }
                }
                LeaseTarget::Provider(n, i) => {
                    let p = self.lives[n].slot(prism_wire::rpc::ProviderId::new(i));
                    p.quota_stock.fetch_add(granted, Ordering::AcqRel);
                    p.quota_leased.store(true, Ordering::Release);
                }
            }
        }
        Ok(())
    }

    /// Redis is away: every shared limit spends this node's share until it is back.
    fn fall_back(&self) {
        for entry in self.keys.entries() {
            if let Some(shared) = &entry.rate.shared {
                if shared.active.swap(false, Ordering::AcqRel) {
                    shared.set_nodes(self.nodes);
                    shared.stock.store(0, Ordering::Release);
                }
            }
        }
        for live in &self.lives {
            for p in live.providers().iter() {
                // Quota falls back to local burn measurement (the router's own quota_burn).
                p.quota_leased.store(false, Ordering::Release);
            }
        }
    }
}

enum LeaseTarget {
    Key(usize),
    Provider(usize, usize),
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
