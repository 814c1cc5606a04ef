//! The composition root: turns a validated config into running shards. Each shard gets its own listener
//! (SO_REUSEPORT), its own upstream pools and parser; they share only the immutable registry and the
//! connection counter.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::config::{Config, NetworkKind};
use crate::core::{NetworkRoute, Upstream};
use crate::edge::envelope::{EnvelopeLimits, EnvelopeParser};
use crate::edge::rpc::RpcShard;
use crate::edge::{serve as serve_edge, EdgeShard};
use crate::runtime::net::TcpListener;
use crate::runtime::{run_shards, ShardId, ShardPlacement, Shutdown};
use crate::transport::{tls, PoolSettings, UpstreamPool};
use crate::upstream::Registry;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: SocketAddr, error: String },
    #[error(transparent)]
    Shards(#[from] crate::runtime::shards::ShardError),
    #[error("a shard stopped before it was ready")]
    ShardLost,
}

/// What a shard reports once it is listening (or why it cannot).
type Ready = Result<(), AppError>;

/// Runs Prism until `shutdown` triggers and in-flight requests drain. Returns once every shard has stopped.
/// `on_ready` runs once every shard listens.
pub fn serve(
    config: Config,
    shutdown: Shutdown,
    on_ready: impl FnOnce(usize) + Send + 'static,
) -> Result<(), AppError> {
    let config = Arc::new(config);
    let registry = Arc::new(Registry::resolve(&config));
    let listen: SocketAddr = config.server.listen.parse().expect("validated at load");
    for n in &registry.networks {
        if n.kind == NetworkKind::SolanaMagic {
            tracing::warn!(network = %n.name, "solana-magic routing is not served by this build yet; its calls get a clear error");
        }
    }
    if config.keys.is_empty() {
        tracing::warn!("no [[keys]] configured: the endpoint is open to anyone who can reach it");
    }
    let placement = ShardPlacement {
        shards: config.server.shards,
        pin: config.server.pin_cores,
        io_memory: config.server.io_memory_kib * 1024,
    };
    let shards = placement.resolved_shards();
    let open_global = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = mpsc::channel::<Ready>();

    let shard_shutdown = shutdown.clone();
    let runner = std::thread::Builder::new()
        .name("prism-shards".into())
        .spawn(move || {
            run_shards(placement, move |id| {
                let config = config.clone();
                let registry = registry.clone();
                let shutdown = shard_shutdown.clone();
                let open_global = open_global.clone();
                let ready_tx = ready_tx.clone();
                async move {
                    shard_main(
                        id,
                        listen,
                        &config,
                        &registry,
                        shutdown,
                        open_global,
                        ready_tx,
                    )
                    .await
                }
            })
        })
        .expect("spawn shard runner thread");

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
    on_ready(shards);
    match runner.join() {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(AppError::ShardLost),
    }
}

async fn shard_main(
    id: ShardId,
    listen: SocketAddr,
    config: &Config,
    registry: &Registry,
    shutdown: Shutdown,
    open_global: Arc<AtomicUsize>,
    ready: mpsc::Sender<Ready>,
) {
    // The first timer on a shard is slow; pay for it before traffic arrives.
    crate::runtime::sleep(Duration::from_millis(1)).await;
    let shard = Rc::new(build_shard(config, registry, shutdown, open_global));
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
    tracing::debug!(shard = id, "listening");
    let _ = ready.send(Ok(()));
    drop(ready);
    let sweeper = shard.clone();
    crate::runtime::spawn(async move {
        while !sweeper.shutdown.is_triggered() {
            crate::runtime::sleep(Duration::from_secs(1)).await;
            let now = Instant::now();
            for route in &sweeper.routes {
                for up in &route.upstreams {
                    up.pool.sweep(now);
                }
            }
        }
    });
    serve_edge(listener, shard).await;
    tracing::debug!(shard = id, "stopped");
}

fn build_shard(
    config: &Config,
    registry: &Registry,
    shutdown: Shutdown,
    open_global: Arc<AtomicUsize>,
) -> EdgeShard {
    let limits = config.limits.clone();
    let settings = PoolSettings {
        max_idle: limits.upstream_max_idle,
        idle_timeout: Duration::from_millis(limits.upstream_idle_timeout_ms),
        connect_timeout: Duration::from_millis(limits.upstream_connect_timeout_ms),
        max_response_bytes: limits.max_response_bytes,
    };
    // One TLS config per shard: a shared one would share a mutex-guarded session cache.
    let tls_config = registry
        .networks
        .iter()
        .flat_map(|n| &n.providers)
        .any(|p| p.endpoint.scheme.is_tls())
        .then(tls::client_config);
    let mut routes = Vec::new();
    let mut not_served = Vec::new();
    for n in &registry.networks {
        let upstreams = n
            .providers
            .iter()
            .filter_map(|p| {
                match UpstreamPool::new(p.endpoint.clone(), p.addrs.clone(), tls_config.clone(), settings) {
                    Ok(pool) => Some((Upstream { name: p.name.clone(), pool }, p.overflow)),
                    Err(e) => {
                        tracing::warn!(network = %n.name, provider = %p.name, error = %e, "provider unusable");
                        None
                    }
                }
            })
            .collect();
        routes.push(NetworkRoute::new(n.name.clone(), upstreams));
        not_served.push(match n.kind {
            NetworkKind::Evm => None,
            NetworkKind::SolanaMagic => {
                Some("solana-magic routing is not served by this build yet")
            }
        });
    }
    EdgeShard {
        rpc: RpcShard {
            parser: RefCell::new(EnvelopeParser::new(EnvelopeLimits {
                max_batch: limits.max_batch,
                max_depth: limits.max_depth,
            })),
            ids: Cell::new(1),
        },
        limits,
        routes,
        not_served,
        shutdown,
        open_global,
        open_local: Cell::new(0),
    }
}
