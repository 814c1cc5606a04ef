//! The composition root: turns a validated config into running shards. Each shard gets its own listener
//! (SO_REUSEPORT), its own upstream pools and parser; they share only the immutable registry and the
//! connection counter. This file is the process's life (build what the shards share, start them, wait until
//! they listen, then until they stop); `shards.rs` is each shard's, `generation.rs` what a shard serves.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::access::keys::KeyRing;
use crate::edge::admin::AdminView;
use crate::edge::tls::EdgeTls;
use crate::upstream::Registry;
use prism_config::{Config, NetworkKind};
use prism_core::live::state::{ChainCheck, NetworkLive};
use prism_runtime::{run_shards, ShardPlacement, Shutdown};
use prism_solana::SolanaNet;
use prism_telemetry::metrics::ShardMetrics;
use prism_wire::rpc::methods::{self, Declared, DeclaredError};
use prism_wire::rpc::ProviderId;

mod generation;
pub mod lint;
mod reload;
mod shards;
pub use reload::World;
use reload::{Reloader, WorldCell};
use shards::{shard_main, CrossShard, Generations, Listeners};

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
pub fn serve(
    config: Config,
    config_path: Option<std::path::PathBuf>,
    shutdown: Shutdown,
    on_ready: impl FnOnce(Arc<AdminView>),
) -> Result<(), AppError> {
    let config = Arc::new(config);
    let registry = Arc::new(Registry::resolve(&config));
    let listen = Listeners::from_config(&config);
    let solana = solana_nets(&config)?;
    let declared = Arc::new(declared_methods(&config)?);
    if config.keys.is_empty() {
        tracing::warn!("no [[keys]] configured: the endpoint is open to anyone who can reach it");
    }
    let placement = placement(&config.server);
    let shards = placement.resolved_shards();
    let open_global = Arc::new(AtomicUsize::new(0));
    let keys = Arc::new(KeyRing::from_config(&config));
    let lives = network_lives(&config, &keys);
    // Every network has room for every provider slot a reload may fill (see `config::changes`).
    let slots: Vec<usize> = config.networks.iter().map(|_| ProviderId::MAX).collect();
    let metrics: Vec<Arc<ShardMetrics>> = (0..shards)
        .map(|_| Arc::new(ShardMetrics::new(&slots, keys.capacity())))
        .collect();
    let totals = Arc::new(ArcSwap::from_pointee(Default::default()));
    let to_aggregator = crate::upstream::health::spawn_aggregator(
        crate::upstream::health::Inputs {
            networks: lives.clone(),
            metrics: metrics.clone(),
            totals: totals.clone(),
        },
        shutdown.clone(),
    );
    // SIGHUP's default action ends the process: catch it whatever is configured.
    if let Err(e) = prism_runtime::hangup::install() {
        tracing::warn!(error = %e, "cannot catch SIGHUP; `kill -HUP` would end the process");
    }
    let tls = edge_tls(&config, shards)?;
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
    reload_on_hangup(&reloader);
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
    let gate = Arc::new(AtomicBool::new(false));
    let shared = CrossShard {
        lives: lives.clone(),
        to_aggregator,
        gate: gate.clone(),
        shards,
        tls,
        metrics: metrics[0].clone(),
        admin: None,
        solana,
        generations: Generations { world, reloader },
        shutdown: shutdown.clone(),
        open_global,
        listen,
    };
    let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
    let runner = spawn_shards(placement, shared, metrics, view.clone(), ready_tx);

    wait_for_chain_checks(&lives, Duration::from_secs(3));
    gate.store(true, Ordering::Release);
    let runner = wait_until_listening(&ready_rx, shards, &shutdown, runner)?;
    tracing::info!(listen = %listen.client, shards, "prism is serving");
    on_ready(view);
    match runner.join() {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(AppError::ShardLost),
    }
}

/// The shard runner thread's result: the runtime's, once every shard has stopped.
type Runner = std::thread::JoinHandle<Result<(), prism_runtime::shards::ShardError>>;

/// What every solana-magic network's shards share (its delegation table, base-layer link), by network
/// index; `None` for EVM networks.
fn solana_nets(config: &Config) -> Result<Vec<Option<Arc<SolanaNet>>>, AppError> {
    let nets = config
        .networks
        .iter()
        .map(|n| {
            (n.kind == NetworkKind::SolanaMagic)
                .then(|| SolanaNet::new(n))
                .transpose()
        })
        .collect::<Result<_, _>>()?;
    Ok(nets)
}

/// How many shards, on which cores, with what io_uring memory and spin: `[server]`'s settings.
fn placement(server: &prism_config::Server) -> ShardPlacement {
    ShardPlacement {
        shards: server.shards,
        pin: server.pin_cores,
        io_memory: server.io_memory_kib * 1024,
        spin_before_park: Duration::from_micros(server.spin_before_park_us),
    }
}

/// Each network's live state, shared by every shard, the prober and the aggregator. Marks and per-key
/// metrics are sized for the keys a reload may add.
fn network_lives(config: &Config, keys: &KeyRing) -> Vec<Arc<NetworkLive>> {
    let lives: Vec<Arc<NetworkLive>> = config
        .networks
        .iter()
        .map(|n| NetworkLive::new(n, &config.policy.breaker, keys.capacity()))
        .collect();
    for (n, live) in lives.iter().enumerate() {
        live.quota.configure(config, n, &keys.quota_weights());
    }
    lives
}

/// TLS termination when `[server.tls]` is set, its certificates re-read on SIGHUP.
fn edge_tls(config: &Config, shards: usize) -> Result<Option<Arc<EdgeTls>>, AppError> {
    let Some(files) = &config.server.tls else {
        return Ok(None);
    };
    let tls = EdgeTls::load(files, shards)?;
    if let Err(e) = tls.reload_on_sighup() {
        tracing::warn!(error = %e, "cannot watch SIGHUP for certificate reloads");
    }
    Ok(Some(tls))
}

/// With a config file, SIGHUP reloads it.
fn reload_on_hangup(reloader: &Arc<Reloader>) {
    if reloader.has_file() {
        let on_hup = reloader.clone();
        prism_runtime::hangup::on_hangup(move || {
            use crate::edge::admin::Reload;
            on_hup.reload();
        });
    }
}

/// Starts the shards on a thread of their own, each with `shared`, its own metrics and (shard 0) the admin
/// view; each says on `ready` whether it listens.
fn spawn_shards(
    placement: ShardPlacement,
    shared: CrossShard,
    metrics: Vec<Arc<ShardMetrics>>,
    view: Arc<AdminView>,
    ready: mpsc::Sender<Ready>,
) -> Runner {
    std::thread::Builder::new()
        .name("prism-shards".into())
        .spawn(move || {
            run_shards(placement, move |id| {
                let ready = ready.clone();
                let shared = CrossShard {
                    metrics: metrics[id.min(metrics.len() - 1)].clone(),
                    admin: (id == 0).then(|| view.clone()),
                    ..shared.clone()
                };
                async move { shard_main(id, shared, ready).await }
            })
        })
        .expect("spawn shard runner thread")
}

/// Waits until every shard listens and hands the runner back. When one cannot, or a shard stops first,
/// the others are stopped and the error returned.
fn wait_until_listening(
    ready: &mpsc::Receiver<Ready>,
    shards: usize,
    shutdown: &Shutdown,
    runner: Runner,
) -> Result<Runner, AppError> {
    let mut listening = 0;
    while listening < shards {
        match ready.recv() {
            Ok(Ok(())) => listening += 1,
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
    Ok(runner)
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
