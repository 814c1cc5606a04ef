//! The composition root: turns a validated config into running shards. Each shard gets its own listener
//! (SO_REUSEPORT), its own upstream pools and parser; they share only the immutable registry and the
//! connection counter.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::access::keys::KeyRing;
use crate::edge::admin::AdminView;
use crate::edge::shard::Gen;
use crate::edge::tls::EdgeTls;
use crate::edge::{serve as serve_edge, Network, Shard};
use crate::upstream::Registry;
use prism_config::{Config, NetworkKind};
use prism_core::call::logs::{DeclaredLimits, LogsSettings};
use prism_core::call::submit::SubmitLimits;
use prism_core::live::state::{ChainCheck, NetworkLive};
use prism_core::reuse::cache::ResultCache;
use prism_core::reuse::dedupe::InFlight;
use prism_core::routing::route::WsTarget;
use prism_core::routing::router::ProviderStatic;
use prism_core::{NetworkRoute, Upstream};
use prism_runtime::net::TcpListener;
use prism_runtime::{run_shards, ShardId, ShardPlacement, Shutdown};
use prism_solana::{SolanaNet, SolanaRoute};
use prism_telemetry::metrics::ShardMetrics;
use prism_telemetry::recorder::{Delta, Recorder};
use prism_transport::{tls, PoolSettings, UpstreamPool};
use prism_wire::rpc::methods::{self, Declared, DeclaredError};
use prism_wire::rpc::ProviderId;

pub mod lint;
mod reload;
pub use reload::World;
use reload::{Reloader, WorldCell};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: SocketAddr, error: String },
    #[error(transparent)]
    Shards(#[from] prism_runtime::shards::ShardError),
    #[error("a shard stopped before it was ready")]
    ShardLost,
    #[error(transparent)]
    Tls(#[from] crate::edge::tls::TlsError),
    #[error(transparent)]
    Solana(#[from] prism_solana::net::NetError),
    #[error("invalid config: {0}")]
    Methods(#[from] DeclaredError),
}

/// Each network's `methods.read` / `methods.write`, checked against its own method table (EVM or Solana):
/// a known submission can never be declared a read. `prism check` and `prism serve` both call it.
pub fn declared_methods(config: &Config) -> Result<Vec<Declared>, DeclaredError> {
    config
        .networks
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let at = format!("networks[{i}]");
            match n.kind {
                NetworkKind::SolanaMagic => {
                    Declared::new(&at, &n.methods.read, &n.methods.write, prism_solana::methods::lookup)
                }
                NetworkKind::Evm => Declared::new(&at, &n.methods.read, &n.methods.write, methods::lookup),
            }
        })
        .collect()
}

/// What a shard reports once it is listening (or why it cannot).
type Ready = Result<(), AppError>;

/// Runs Prism until `shutdown` triggers and in-flight requests drain. Returns once every shard has stopped.
/// `on_ready` runs once every shard listens, with the read-only view the admin endpoints use. With
/// `config_path`, SIGHUP and the admin `POST /reload` re-read that file (see `app::reload`).
#[expect(clippy::too_many_lines, reason = "listed in scripts/targets.allow until it is split")]
pub fn serve(
    config: Config,
    config_path: Option<std::path::PathBuf>,
    shutdown: Shutdown,
    on_ready: impl FnOnce(Arc<AdminView>),
) -> Result<(), AppError> {
    let config = Arc::new(config);
    let registry = Arc::new(Registry::resolve(&config));
    let listen: SocketAddr = config.server.listen.parse().expect("validated at load");
    let solana: Vec<Option<Arc<SolanaNet>>> = config
        .networks
        .iter()
        .map(|n| {
            (n.kind == NetworkKind::SolanaMagic)
                .then(|| SolanaNet::new(n))
                .transpose()
        })
        .collect::<Result<_, _>>()?;
    let declared = Arc::new(declared_methods(&config)?);
    if config.keys.is_empty() {
        tracing::warn!("no [[keys]] configured: the endpoint is open to anyone who can reach it");
    }
    let placement = ShardPlacement {
        shards: config.server.shards,
        pin: config.server.pin_cores,
        io_memory: config.server.io_memory_kib * 1024,
        spin_before_park: Duration::from_micros(config.server.spin_before_park_us),
    };
    let shards = placement.resolved_shards();
    let open_global = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
    let keys = Arc::new(KeyRing::from_config(&config));
    // Marks and per-key metrics are sized for the keys a reload may add.
    let lives: Vec<Arc<NetworkLive>> = config
        .networks
        .iter()
        .map(|n| NetworkLive::new(n, &config.policy.breaker, keys.capacity()))
        .collect();
    for (n, live) in lives.iter().enumerate() {
        live.quota.configure(&config, n, &keys.quota_weights());
    }
    // Every network has room for every provider slot a reload may fill (see `config::changes`).
    let slots: Vec<usize> = config.networks.iter().map(|_| ProviderId::MAX).collect();
    let metrics: Vec<Arc<ShardMetrics>> = (0..shards)
        .map(|_| Arc::new(ShardMetrics::new(&slots, keys.capacity())))
        .collect();
    let totals = Arc::new(arc_swap::ArcSwap::from_pointee(Default::default()));
    let to_aggregator = crate::upstream::health::spawn_aggregator(
        crate::upstream::health::Inputs {
            networks: lives.clone(),
            metrics: metrics.clone(),
            totals: totals.clone(),
        },
        shutdown.clone(),
    );
    let gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // SIGHUP's default action ends the process: catch it whatever is configured.
    if let Err(e) = prism_runtime::hangup::install() {
        tracing::warn!(error = %e, "cannot catch SIGHUP; `kill -HUP` would end the process");
    }
    let tls = match &config.server.tls {
        Some(files) => {
            let tls = EdgeTls::load(files, shards)?;
            if let Err(e) = tls.reload_on_sighup() {
                tracing::warn!(error = %e, "cannot watch SIGHUP for certificate reloads");
            }
            Some(tls)
        }
        None => None,
    };
    let config_cell = Arc::new(ArcSwap::new(config.clone()));
    let keys_cell = Arc::new(ArcSwap::new(keys.clone()));
    let world: Arc<WorldCell> = Arc::new(ArcSwap::from_pointee(World {
        generation: 0,
        config: config.clone(),
        registry,
        keys,
        declared,
    }));
    let reloader = Arc::new(Reloader::new(
        config_path,
        world.clone(),
        config_cell.clone(),
        keys_cell.clone(),
        lives.clone(),
        shards,
    ));
    if reloader.has_file() {
        let on_hup = reloader.clone();
        prism_runtime::hangup::on_hangup(move || {
            use crate::edge::admin::Reload;
            on_hup.reload();
        });
    }
    let cluster = crate::cluster::start(config_cell.clone(), lives.clone(), keys_cell.clone(), shutdown.clone());
    let view = Arc::new(AdminView {
        cluster,
        config: config_cell,
        lives: lives.clone(),
        metrics: metrics.clone(),
        keys: keys_cell,
        open_connections: open_global.clone(),
        started: Instant::now(),
        reloader: reloader
            .has_file()
            .then(|| reloader.clone() as Arc<dyn crate::edge::admin::Reload>),
        totals,
        solana: solana.clone(),
    });
    let shard_gate = gate.clone();
    let shard_lives = lives.clone();

    let shard_shutdown = shutdown.clone();
    let shard_view = view.clone();
    let runner = std::thread::Builder::new()
        .name("prism-shards".into())
        .spawn(move || {
            run_shards(placement, move |id| {
                let config = config.clone();
                let shutdown = shard_shutdown.clone();
                let open_global = open_global.clone();
                let ready_tx = ready_tx.clone();
                let shared = CrossShard {
                    lives: shard_lives.clone(),
                    to_aggregator: to_aggregator.clone(),
                    gate: shard_gate.clone(),
                    shards,
                    tls: tls.clone(),
                    metrics: metrics[id.min(metrics.len() - 1)].clone(),
                    admin: (id == 0).then(|| shard_view.clone()),
                    solana: solana.clone(),
                    world: world.clone(),
                    reloader: reloader.clone(),
                };
                async move { shard_main(id, listen, &config, shutdown, open_global, shared, ready_tx).await }
            })
        })
        .expect("spawn shard runner thread");

    wait_for_chain_checks(&lives, Duration::from_secs(3));
    gate.store(true, std::sync::atomic::Ordering::Release);
    let mut ready = 0;
    while ready < shards {
        match ready_rx.recv() {
            Ok(Ok(())) => ready += 1,
            Ok(Err(e)) => {
                shutdown.trigger();
                let _ = runner.join();
                return Err(e);
            }
            Err(_) => {
                shutdown.trigger();
                return match runner.join() {
                    Ok(Err(e)) => Err(e.into()),
                    _ => Err(AppError::ShardLost),
                };
            }
        }
    }
    tracing::info!(%listen, shards, "prism is serving");
    on_ready(view);
    match runner.join() {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(AppError::ShardLost),
    }
}

/// What the shards share beyond config: live network state, the aggregator's inbox, the start gate.
struct CrossShard {
    lives: Vec<Arc<NetworkLive>>,
    to_aggregator: crossbeam::channel::Sender<Vec<Delta>>,
    /// Opened by the main thread once providers' chain ids are checked (or the wait ran out).
    gate: Arc<std::sync::atomic::AtomicBool>,
    shards: usize,
    tls: Option<Arc<EdgeTls>>,
    metrics: Arc<ShardMetrics>,
    /// Shard 0 serves the admin endpoints.
    admin: Option<Arc<AdminView>>,
    /// What all shards share of each solana-magic network, by network index.
    solana: Vec<Option<Arc<SolanaNet>>>,
    /// The config generation shards should run: a reload publishes a new one.
    world: Arc<WorldCell>,
    /// Where a shard says which generation it runs.
    reloader: Arc<Reloader>,
}

/// Gives the probers a moment to verify chain ids before clients arrive, so the first requests do not
/// meet an empty pool. Bounded: a provider that never answers stays excluded, it does not delay start-up.
fn wait_for_chain_checks(lives: &[Arc<NetworkLive>], max: Duration) {
    let until = Instant::now() + max;
    while Instant::now() < until {
        let pending = lives.iter().filter(|n| n.settings.chain_id.is_some()).any(|n| {
            !n.providers().iter().any(|p| p.chain() == ChainCheck::Ok)
                && n.providers().iter().any(|p| p.chain() == ChainCheck::Unknown)
        });
        if !pending {
            return;
        }
        // Not a shard: the main thread, before serving: no shard runs here.
        #[allow(clippy::disallowed_methods, reason = "not a shard thread")]
        std::thread::sleep(Duration::from_millis(5));
    }
    tracing::warn!("some networks have no provider with a verified chain id yet; serving anyway");
}

#[allow(clippy::too_many_arguments)]
async fn shard_main(
    id: ShardId,
    listen: SocketAddr,
    config: &Config,
    shutdown: Shutdown,
    open_global: Arc<AtomicUsize>,
    shared: CrossShard,
    ready: mpsc::Sender<Ready>,
) {
    // The first timer on a shard is slow; pay for it before traffic arrives.
    prism_runtime::sleep(Duration::from_millis(1)).await;
    let shard = Rc::new(build_shard(id, shutdown, open_global, &shared));
    start_background(id, &shard, &shared);
    while !shared.gate.load(std::sync::atomic::Ordering::Acquire) && !shard.shutdown.is_triggered() {
        prism_runtime::sleep(Duration::from_millis(5)).await;
    }
    let listener = match TcpListener::bind(listen) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(AppError::Bind {
                addr: listen,
                error: e.to_string(),
            }));
            return;
        }
    };
    if let (Some(view), Some(addr)) = (&shared.admin, config.server.admin_listen.as_deref()) {
        let addr: SocketAddr = addr.parse().expect("validated at load");
        match TcpListener::bind(addr) {
            Ok(admin) => {
                tracing::info!(%addr, "admin endpoints: /metrics /status /healthz /readyz and the status page at /");
                let (view, shutdown) = (view.clone(), shard.shutdown.clone());
                prism_runtime::spawn(async move { crate::edge::admin::serve_admin(admin, view, shutdown).await });
            }
            Err(e) => {
                let _ = ready.send(Err(AppError::Bind {
                    addr,
                    error: e.to_string(),
                }));
                return;
            }
        }
    }
    let has_solana = config.networks.iter().any(|n| n.kind == NetworkKind::SolanaMagic);
    if let Some(addr) = config.server.ws_listen_addr(has_solana) {
        match TcpListener::bind(addr) {
            Ok(second) => {
                if id == 0 {
                    tracing::info!(%addr, "also serving on server.ws_listen (web3.js derives WebSockets as port + 1)");
                }
                let shard = shard.clone();
                prism_runtime::spawn(async move { serve_edge(second, shard).await });
            }
            Err(e) => {
                let _ = ready.send(Err(AppError::Bind {
                    addr,
                    error: format!("{e} (server.ws_listen; set it to \"off\" or another address)"),
                }));
                return;
            }
        }
    }
    tracing::debug!(shard = id, "listening");
    let _ = ready.send(Ok(()));
    drop(ready);
    serve_edge(listener, shard).await;
    tracing::debug!(shard = id, "stopped");
}

/// How often a shard frees the spare buffers no request took since the last time: a burst's surplus is
/// gone between one and two of these after it ends.
const SPARE_TRIM_INTERVAL: Duration = Duration::from_secs(5);

/// Per-shard background work: pool sweeping, trimming spare buffers, shipping health deltas, taking
/// reloaded generations, and probing this shard's share of providers.
fn start_background(id: ShardId, shard: &Rc<Shard>, shared: &CrossShard) {
    let sweeper = shard.clone();
    let (world, reloader, solana) = (shared.world.clone(), shared.reloader.clone(), shared.solana.clone());
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
            let next = world.load_full();
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
                reloader.applied(id, next.generation, started.elapsed());
            }
            let now = Instant::now();
            let gen = sweeper.gen();
            for net in &gen.networks {
                for up in &net.route.upstreams {
                    up.pool.sweep(now);
                }
                // The heads feed the cache asked for, if it has none yet.
                prism_core::subs::SubHub::keep_heads(&net.route);
            }
            sweeper.recorder.flush();
            let (mut bytes, mut entries, mut evictions) = (0, 0, 0);
            for net in &gen.networks {
                if let Some(cache) = &net.route.cache {
                    cache.compact_index();
                    bytes += cache.bytes();
                    entries += cache.len() as u64;
                    evictions += cache.evictions();
                }
            }
            sweeper.recorder.metrics().set_cache(bytes, entries, evictions);
        }
    });
    start_probers(id, shard, None, shards);
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
            if !mine || reused || route.live.slot(i).retired.load(std::sync::atomic::Ordering::Acquire) {
                continue;
            }
            let (route, shutdown) = (route.clone(), shard.shutdown.clone());
            prism_runtime::spawn(async move {
                crate::upstream::prober::probe_loop(&route, i, interval, &shutdown).await;
            });
        }
    }
}

fn build_shard(id: ShardId, shutdown: Shutdown, open_global: Arc<AtomicUsize>, shared: &CrossShard) -> Shard {
    let world = shared.world.load_full();
    // The recorder grows when a reload adds providers (`Recorder::record`).
    let shape: Vec<usize> = world.config.networks.iter().map(|n| n.providers.len()).collect();
    let recorder = Rc::new(Recorder::new(
        &shape,
        shared.to_aggregator.clone(),
        shared.metrics.clone(),
    ));
    let gen = build_gen(&world, None, &recorder, &shared.lives, &shared.solana, &shutdown);
    Shard::new(id, shared.tls.clone(), gen, shutdown, open_global, recorder)
}

/// One shard's view of a config generation. With `previous`, what a reload must not lose is carried over:
/// each unchanged provider's `Upstream` (its pool, connections and in-flight counts), the caches, in-flight
/// reads and blame memory, and a solana-magic network's whole routes (their delegation tables and links).
#[expect(clippy::too_many_lines, reason = "listed in scripts/targets.allow until it is split")]
fn build_gen(
    world: &World,
    previous: Option<&Gen>,
    recorder: &Rc<Recorder>,
    lives: &[Arc<NetworkLive>],
    solana: &[Option<Arc<SolanaNet>>],
    shutdown: &Shutdown,
) -> Gen {
    let config = &world.config;
    let registry = &world.registry;
    let limits = config.limits.clone();
    let settings = PoolSettings {
        max_idle: limits.upstream_max_idle,
        idle_timeout: Duration::from_millis(limits.upstream_idle_timeout_ms),
        connect_timeout: Duration::from_millis(limits.upstream_connect_timeout_ms),
        max_response_bytes: limits.max_response_bytes,
        max_connections: limits.upstream_max_connections,
    };
    // One TLS config per shard: a shared one would share a mutex-guarded session cache.
    let tls_config = previous
        .and_then(|p| p.networks.iter().find_map(|n| n.route.ws_tls.clone()))
        .or_else(|| {
            registry
                .networks
                .iter()
                .flat_map(|n| &n.providers)
                .any(|p| p.endpoint.scheme.is_tls() || p.ws_endpoint.as_ref().is_some_and(|w| w.scheme.is_tls()))
                .then(tls::client_config)
        });
    let mut networks = Vec::new();
    for (index, n) in registry.networks.iter().enumerate() {
        let before = previous.and_then(|p| p.networks.get(index));
        if let (Some(before), NetworkKind::SolanaMagic) = (before, config.networks[index].kind) {
            // Kept whole; only rotated credentials reach its pools.
            for (up, p) in before.route.upstreams.iter().zip(&n.providers) {
                up.pool.set_headers(p.headers.clone());
            }
            networks.push(before.clone());
            continue;
        }
        let mut upstreams = Vec::new();
        let mut statics = Vec::new();
        for (slot, (p, c)) in n.providers.iter().zip(&config.networks[index].providers).enumerate() {
            // A slot keeps its provider (name and URLs) for the life of the process: reuse it as it is.
            let kept = before.and_then(|b| b.route.upstreams.get(slot)).cloned();
            // A kept slot takes the generation's credentials (a rotated secret), keeping its connections.
            if let Some(k) = &kept {
                k.pool.set_headers(p.headers.clone());
            }
            upstreams.push(kept.unwrap_or_else(|| {
                // An https provider without a usable TLS name still gets a pool slot: its calls fail (and
                // count) instead of shifting every later provider's index.
                let pool = UpstreamPool::new(p.endpoint.clone(), p.addrs.clone(), tls_config.clone(), settings)
                    .unwrap_or_else(|e| {
                        tracing::warn!(network = %n.name, provider = %p.name, error = %e, "provider unusable");
                        UpstreamPool::new(p.endpoint.clone(), Arc::from(Vec::new()), None, settings)
                            .expect("a pool without addresses cannot fail")
                    });
                let ws = p.ws_endpoint.clone().map(|url| WsTarget {
                    url,
                    addrs: p.ws_addrs.clone(),
                });
                pool.set_headers(p.headers.clone());
                Rc::new(Upstream::new(p.name.clone(), pool, ws))
            }));
            statics.push(ProviderStatic {
                weight: p.weight,
                overflow: p.overflow,
                region_distance: region_distance(config.server.region.as_deref(), p.region.as_deref()),
                quota_rps: p.quota_rps.map(f64::from),
                credits: c
                    .credits
                    .as_ref()
                    .map(|c| Arc::new(prism_core::live::quota::CreditTable::new(c))),
            });
            debug_assert_eq!(p.name, c.name);
        }
        let before = before.map(|b| &b.route);
        let route = Rc::new(NetworkRoute {
            index,
            name: n.name.clone(),
            upstreams,
            statics,
            live: lives[index].clone(),
            retry: config.policy.retry.clone(),
            hedge: prism_core::routing::hedge::Hedging::new(&config.policy.hedge),
            hedge_budget: Default::default(),
            operators: operators(&config.networks[index]),
            recorder: recorder.clone(),
            rotation: Cell::new(0),
            round_robin: Cell::new(0),
            pressure: Default::default(),
            cache: match before {
                Some(b) => b.cache.clone(),
                None => config
                    .cache
                    .enabled
                    .then(|| Rc::new(ResultCache::new(config.cache.max_bytes, config.cache.max_entry_bytes))),
            },
            cache_depth: config.networks[index].cache_depth_blocks,
            inflight: match before {
                Some(b) => b.inflight.clone(),
                None => config.cache.dedupe.then(|| Rc::new(InFlight::default())),
            },
            subs: before.map(|b| b.subs.clone()).unwrap_or_default(),
            newest: before.map(|b| b.newest.clone()).unwrap_or_default(),
            blame: before.map(|b| b.blame.clone()).unwrap_or_default(),
            ws_tls: tls_config.clone(),
            connect_timeout_ms: config.limits.upstream_connect_timeout_ms,
            ws_ping: (config.limits.upstream_ws_ping_ms > 0)
                .then(|| Duration::from_millis(config.limits.upstream_ws_ping_ms)),
            shutdown: shutdown.clone(),
            solana: n.kind == NetworkKind::SolanaMagic,
            declared: world.declared[index].clone(),
            submit: SubmitLimits {
                lookup: Duration::from_millis(config.limits.write_lookup_ms),
                sync_default: Duration::from_millis(config.limits.sync_submit_timeout_ms),
                sync_max: Duration::from_millis(config.limits.sync_submit_max_ms),
            },
            sync: prism_core::call::sync_submit::SyncSupport::new(
                config.networks[index].providers.iter().map(|c| c.sync_submit).collect(),
            ),
            superseded: Cell::new(false),
            logs: LogsSettings {
                concurrency: config.limits.logs_split_concurrency,
                // One limit, one error: past this the call is refused with max_response_bytes' -32005;
                // a merged answer under it but over limits.max_answer_bytes gets the edge's -32003.
                max_bytes: config.limits.max_response_bytes,
                declared: config.networks[index]
                    .providers
                    .iter()
                    .map(|c| DeclaredLimits {
                        range: c.max_logs_range,
                        results: c.max_logs_results,
                    })
                    .collect(),
            },
            bodies: prism_wire::http1::SpareBufs::small(),
        });
        route.newest.set(&route);
        // The EVM/Solana choice, made once per network: a solana-magic network gets its magic router.
        let magic = solana[index]
            .as_ref()
            .map(|net| SolanaRoute::new(route.clone(), net.clone(), &config.limits));
        networks.push(Network::new(route, magic));
    }
    Gen {
        number: world.generation,
        limits,
        networks,
        keys: world.keys.clone(),
        probe_interval_ms: config.networks.iter().map(|n| n.probe_interval_ms).collect(),
        diagnostic_headers: config.server.diagnostic_headers,
    }
}

/// Each provider's operator as a small index: the same `operator` name (or, without one, the provider's
/// own name) is the same index.
fn operators(network: &prism_config::Network) -> Vec<u16> {
    let mut names: Vec<&str> = Vec::new();
    network
        .providers
        .iter()
        .map(|p| {
            let name = p.operator.as_deref().unwrap_or(&p.name);
            let at = names.iter().position(|n| *n == name).unwrap_or_else(|| {
                names.push(name);
                names.len() - 1
            });
            at as u16
        })
        .collect()
}

/// 0 when the provider is in this node's region (or either is unknown), 0.5 on the same continent
/// (`us-east` / `us-west`), 1 elsewhere.
fn region_distance(node: Option<&str>, provider: Option<&str>) -> f64 {
    match (node, provider) {
        (Some(a), Some(b)) if a != b => {
            let continent = |r: &str| r.split('-').next().unwrap_or(r).to_string();
            if continent(a) == continent(b) {
                0.5
            } else {
                1.0
            }
        }
        _ => 0.0,
    }
}
