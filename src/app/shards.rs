//! What each shard runs, from start to stop: it builds its first generation, starts its background work
//! (sweeping, trimming, taking reloaded generations, probing its share of providers), waits for the start
//! gate, binds its listeners and serves until shutdown. [`CrossShard`] is all it is started with.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::generation::build_gen;
use super::reload::{Reloader, WorldCell};
use super::{AppError, Ready};
use crate::edge::admin::AdminView;
use crate::edge::shard::Gen;
use crate::edge::tls::EdgeTls;
use crate::edge::{serve as serve_edge, Shard};
use prism_config::{Config, NetworkKind};
use prism_core::live::state::NetworkLive;
use prism_runtime::net::TcpListener;
use prism_runtime::{ShardId, Shutdown};
use prism_solana::SolanaNet;
use prism_telemetry::metrics::ShardMetrics;
use prism_telemetry::recorder::{Delta, Recorder};
use prism_wire::rpc::ProviderId;

/// What a shard is started with: what the shards share beyond config (live network state, the aggregator's
/// inbox, the start gate, the generations), where to listen, and its own metrics.
#[derive(Clone)]
pub(super) struct CrossShard {
    pub lives: Vec<Arc<NetworkLive>>,
    pub to_aggregator: crossbeam::channel::Sender<Vec<Delta>>,
    /// Opened by the main thread once providers' chain ids are checked (or the wait ran out).
    pub gate: Arc<AtomicBool>,
    pub shards: usize,
    pub tls: Option<Arc<EdgeTls>>,
    pub metrics: Arc<ShardMetrics>,
    /// Shard 0 serves the admin endpoints.
    pub admin: Option<Arc<AdminView>>,
    /// What all shards share of each solana-magic network, by network index.
    pub solana: Vec<Option<Arc<SolanaNet>>>,
    pub generations: Generations,
    pub shutdown: Shutdown,
    /// Open client connections across all shards, for `limits.max_connections`.
    pub open_global: Arc<AtomicUsize>,
    pub listen: Listeners,
}

/// The config generations: the one shards should run (a reload publishes a new one), and where a shard says
/// which one it runs.
#[derive(Clone)]
pub(super) struct Generations {
    pub world: Arc<WorldCell>,
    pub reloader: Arc<Reloader>,
}

/// The addresses a shard binds, worked out once from `[server]`.
#[derive(Clone, Copy)]
pub(super) struct Listeners {
    /// `server.listen`.
    pub client: SocketAddr,
    /// `server.admin_listen`: shard 0 serves the admin endpoints there.
    pub admin: Option<SocketAddr>,
    /// `server.ws_listen`: a second client listener (by default `listen`'s port + 1 when a solana-magic
    /// network is served, where web3.js looks for WebSockets).
    pub ws: Option<SocketAddr>,
}

impl Listeners {
    pub fn from_config(config: &Config) -> Listeners {
        let has_solana = config.networks.iter().any(|n| n.kind == NetworkKind::SolanaMagic);
        Listeners {
            client: config.server.listen.parse().expect("validated at load"),
            admin: config
                .server
                .admin_listen
                .as_deref()
                .map(|a| a.parse().expect("validated at load")),
            ws: config.server.ws_listen_addr(has_solana),
        }
    }
}

/// One shard's life: built, its background work started, its listeners bound once the gate opens (said on
/// `ready`, or why not), then serving until shutdown drains it.
pub(super) async fn shard_main(id: ShardId, shared: CrossShard, ready: mpsc::Sender<Ready>) {
    // The first timer on a shard is slow; pay for it before traffic arrives.
    prism_runtime::sleep(Duration::from_millis(1)).await;
    let shard = Rc::new(build_shard(id, &shared));
    start_background(id, &shard, &shared);
    while !shared.gate.load(Ordering::Acquire) && !shard.shutdown.is_triggered() {
        prism_runtime::sleep(Duration::from_millis(5)).await;
    }
    let listener = match bind(id, &shard, &shared) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    tracing::debug!(shard = id, "listening");
    let _ = ready.send(Ok(()));
    drop(ready);
    serve_edge(listener, shard).await;
    tracing::debug!(shard = id, "stopped");
}

/// Binds the shard's client listener and returns it; binds and starts serving the admin endpoints (shard
/// 0) and the `server.ws_listen` listener. The first address that cannot be bound is the error.
fn bind(id: ShardId, shard: &Rc<Shard>, shared: &CrossShard) -> Result<TcpListener, AppError> {
    let listen = shared.listen;
    let listener = TcpListener::bind(listen.client).map_err(|e| AppError::Bind {
        addr: listen.client,
        error: e.to_string(),
    })?;
    if let (Some(view), Some(addr)) = (&shared.admin, listen.admin) {
        match TcpListener::bind(addr) {
            Ok(admin) => {
                tracing::info!(%addr, "admin endpoints: /metrics /status /healthz /readyz and the status page at /");
                let (view, shutdown) = (view.clone(), shard.shutdown.clone());
                prism_runtime::spawn(async move { crate::edge::admin::serve_admin(admin, view, shutdown).await });
            }
            Err(e) => {
                return Err(AppError::Bind {
                    addr,
                    error: e.to_string(),
                })
            }
        }
    }
    if let Some(addr) = listen.ws {
        match TcpListener::bind(addr) {
            Ok(second) => {
                if id == 0 {
                    tracing::info!(%addr, "also serving on server.ws_listen (web3.js derives WebSockets as port + 1)");
                }
                let shard = shard.clone();
                prism_runtime::spawn(async move { serve_edge(second, shard).await });
            }
            Err(e) => {
                return Err(AppError::Bind {
                    addr,
                    error: format!("{e} (server.ws_listen; set it to \"off\" or another address)"),
                })
            }
        }
    }
    Ok(listener)
}

/// How often a shard frees the spare buffers no request took since the last time: a burst's surplus is
/// gone between one and two of these after it ends.
const SPARE_TRIM_INTERVAL: Duration = Duration::from_secs(5);

/// Per-shard background work: pool sweeping, trimming spare buffers, shipping health deltas, taking
/// reloaded generations, and probing this shard's share of providers.
fn start_background(id: ShardId, shard: &Rc<Shard>, shared: &CrossShard) {
    let sweeper = shard.clone();
    let (generations, solana) = (shared.generations.clone(), shared.solana.clone());
    let (lives, shards) = (shared.lives.clone(), shared.shards);
    prism_runtime::spawn(async move {
        let mut last_trim = Instant::now();
        while !sweeper.shutdown.is_triggered() {
            prism_runtime::sleep(Duration::from_millis(100)).await;
            if last_trim.elapsed() >= SPARE_TRIM_INTERVAL {
                last_trim = Instant::now();
                let freed = sweeper.trim_spares();
                if freed > 0 {
                    tracing::debug!(shard = id, freed, "spare buffers trimmed");
                }
                prism_runtime::memory::return_after_freeing(freed);
            }
            // A reloaded generation is built here, on the shard, between requests, and installed whole.
            let next = generations.world.load_full();
            if next.generation != sweeper.gen().number {
                let started = Instant::now();
                let current = sweeper.gen();
                let gen = build_gen(
                    &next,
                    Some(&current),
                    &sweeper.recorder,
                    &lives,
                    &solana,
                    &sweeper.shutdown,
                );
                let old = sweeper.install(gen);
                start_probers(id, &sweeper, Some(&old), shards);
                generations.reloader.applied(id, next.generation, started.elapsed());
            }
            sweep(&sweeper);
        }
    });
    start_probers(id, shard, None, shards);
}

/// One round of upkeep: idle upstream connections swept, the heads feeds the caches need kept, health
/// deltas shipped, the caches' indexes compacted and their sizes reported.
fn sweep(shard: &Shard) {
    let now = Instant::now();
    let gen = shard.gen();
    for net in &gen.networks {
        for up in &net.route.upstreams {
            up.pool.sweep(now);
        }
        // The heads feed the cache asked for, if it has none yet.
        prism_core::subs::SubHub::keep_heads(&net.route);
    }
    shard.recorder.flush();
    let (mut bytes, mut entries, mut evictions) = (0, 0, 0);
    for net in &gen.networks {
        if let Some(cache) = &net.route.shard.cache {
            cache.compact_index();
            bytes += cache.bytes();
            entries += cache.len() as u64;
            evictions += cache.evictions();
        }
    }
    shard.recorder.metrics().set_cache(bytes, entries, evictions);
}

/// Starts probers for this shard's share of the current generation's providers (slot k of all networks is
/// probed by shard k mod shards), for the routes that are new since `previous` (a reused route keeps its
/// probers). Retired providers are not probed.
fn start_probers(id: ShardId, shard: &Rc<Shard>, previous: Option<&Gen>, shards: usize) {
    let gen = shard.gen();
    let mut k = 0;
    for (n, net) in gen.networks.iter().enumerate() {
        let route = &net.route;
        let reused = previous.is_some_and(|p| p.networks.get(n).is_some_and(|o| Rc::ptr_eq(&o.route, route)));
        let interval = Duration::from_millis(gen.probe_interval_ms[n]);
        for i in ProviderId::all(route.upstreams.len()) {
            let mine = k % shards == id;
            k += 1;
            if !mine || reused || route.live.slot(i).retired.load(Ordering::Acquire) {
                continue;
            }
            let (route, shutdown) = (route.clone(), shard.shutdown.clone());
            prism_runtime::spawn(async move {
                crate::upstream::prober::probe_loop(&route, i, interval, &shutdown).await;
            });
        }
    }
}

fn build_shard(id: ShardId, shared: &CrossShard) -> Shard {
    let world = shared.generations.world.load_full();
    // The recorder grows when a reload adds providers (`Recorder::record`).
    let shape: Vec<usize> = world.config.networks.iter().map(|n| n.providers.len()).collect();
    let recorder = Rc::new(Recorder::new(
        &shape,
        shared.to_aggregator.clone(),
        shared.metrics.clone(),
    ));
    let shutdown = shared.shutdown.clone();
    let gen = build_gen(&world, None, &recorder, &shared.lives, &shared.solana, &shutdown);
    Shard::new(
        id,
        shared.tls.clone(),
        gen,
        shutdown,
        shared.open_global.clone(),
        recorder,
    )
}
