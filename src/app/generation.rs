//! One shard's view of a config generation ([`Gen`]): the networks' routes built from the published
//! [`World`], with what a reload must not lose carried over from the generation it replaces. Every shard
//! builds its own (its pools, caches and TLS session cache are its own), at start-up and after each reload.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::reload::World;
use crate::edge::shard::Gen;
use crate::edge::Network;
use crate::upstream::{NetworkSpec, ProviderSpec};
use prism_config::{Limits, NetworkKind};
use prism_core::call::logs::{DeclaredLimits, LogsSettings};
use prism_core::call::submit::SubmitLimits;
use prism_core::live::state::NetworkLive;
use prism_core::reuse::cache::ResultCache;
use prism_core::reuse::dedupe::InFlight;
use prism_core::routing::route::{Lifecycle, RoutePolicy, ShardServices, Turns, WsSettings, WsTarget};
use prism_core::routing::router::ProviderStatic;
use prism_core::{NetworkRoute, Upstream};
use prism_runtime::Shutdown;
use prism_solana::{SolanaNet, SolanaRoute};
use prism_telemetry::recorder::Recorder;
use prism_transport::{tls, PoolSettings, UpstreamPool};

/// One shard's view of a config generation. With `previous`, what a reload must not lose is carried over:
/// each unchanged provider's `Upstream` (its pool, connections and in-flight counts), the caches, in-flight
/// reads and blame memory, and a solana-magic network's whole routes (their delegation tables and links).
pub(super) fn build_gen(
    world: &World,
    previous: Option<&Gen>,
    recorder: &Rc<Recorder>,
    lives: &[Arc<NetworkLive>],
    solana: &[Option<Arc<SolanaNet>>],
    shutdown: &Shutdown,
) -> Gen {
    let config = &world.config;
    let limits = config.limits.clone();
    let build = GenBuild {
        world,
        previous,
        recorder,
        lives,
        solana,
        shutdown,
        settings: pool_settings(&limits),
        tls_config: client_tls(world, previous),
    };
    let networks = world
        .registry
        .networks
        .iter()
        .enumerate()
        .map(|(index, n)| build.network(index, n))
        .collect();
    Gen {
        number: world.generation,
        limits,
        networks,
        keys: world.keys.clone(),
        probe_interval_ms: config.networks.iter().map(|n| n.probe_interval_ms).collect(),
        diagnostic_headers: config.server.diagnostic_headers,
    }
}

/// The upstream pools' settings, from `[limits]`.
fn pool_settings(limits: &Limits) -> PoolSettings {
    PoolSettings {
        max_idle: limits.upstream_max_idle,
        idle_timeout: Duration::from_millis(limits.upstream_idle_timeout_ms),
        connect_timeout: Duration::from_millis(limits.upstream_connect_timeout_ms),
        max_response_bytes: limits.max_response_bytes,
        max_connections: limits.upstream_max_connections,
    }
}

/// The shard's upstream TLS config: the previous generation's when it had one, else a new one when any
/// provider speaks TLS. One per shard: a shared one would share a mutex-guarded session cache.
fn client_tls(world: &World, previous: Option<&Gen>) -> Option<Arc<rustls::ClientConfig>> {
    previous
        .and_then(|p| p.networks.iter().find_map(|n| n.route.ws.tls.clone()))
        .or_else(|| {
            world
                .registry
                .networks
                .iter()
                .flat_map(|n| &n.providers)
                .any(|p| p.endpoint.scheme.is_tls() || p.ws_endpoint.as_ref().is_some_and(|w| w.scheme.is_tls()))
                .then(tls::client_config)
        })
}

/// What building one generation reads, shared by each network's steps: the published world, the
/// generation it replaces (if any), and the shard's own recorder, shutdown, pool settings and TLS config.
struct GenBuild<'a> {
    world: &'a World,
    previous: Option<&'a Gen>,
    recorder: &'a Rc<Recorder>,
    lives: &'a [Arc<NetworkLive>],
    solana: &'a [Option<Arc<SolanaNet>>],
    shutdown: &'a Shutdown,
    settings: PoolSettings,
    tls_config: Option<Arc<rustls::ClientConfig>>,
}

// === impl GenBuild ===

impl GenBuild<'_> {
    /// Network `index` of the generation: kept whole when it is a solana-magic network the previous one
    /// had, else a new route over its providers (each kept one reused) and, for Solana, its magic router.
    fn network(&self, index: usize, n: &NetworkSpec) -> Network {
        let config = &self.world.config;
        let before = self.previous.and_then(|p| p.networks.get(index));
        if let (Some(before), NetworkKind::SolanaMagic) = (before, config.networks[index].kind) {
            // Kept whole; only rotated credentials reach its pools.
            for (up, p) in before.route.upstreams.iter().zip(&n.providers) {
                up.pool.set_headers(p.headers.clone());
            }
            return before.clone();
        }
        let before = before.map(|b| &b.route);
        let (upstreams, statics) = self.providers(index, n, before);
        let route = Rc::new(self.network_route(index, n, before, upstreams, statics));
        route.shard.newest.set(&route);
        // The EVM/Solana choice, made once per network: a solana-magic network gets its magic router.
        let magic = self.solana[index]
            .as_ref()
            .map(|net| SolanaRoute::new(route.clone(), net.clone(), &config.limits));
        Network::new(route, magic)
    }

    /// Each provider slot's `Upstream` (the previous route's, when it had the slot) and its routing statics.
    fn providers(
        &self,
        index: usize,
        n: &NetworkSpec,
        before: Option<&Rc<NetworkRoute>>,
    ) -> (Vec<Rc<Upstream>>, Vec<ProviderStatic>) {
        let config = &self.world.config;
        let mut upstreams = Vec::new();
        let mut statics = Vec::new();
        for (slot, (p, c)) in n.providers.iter().zip(&config.networks[index].providers).enumerate() {
            // A slot keeps its provider (name and URLs) for the life of the process: reuse it as it is.
            let kept = before.and_then(|b| b.upstreams.get(slot)).cloned();
            // A kept slot takes the generation's credentials (a rotated secret), keeping its connections.
            if let Some(k) = &kept {
                k.pool.set_headers(p.headers.clone());
            }
            upstreams.push(kept.unwrap_or_else(|| self.upstream(n, p)));
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
        (upstreams, statics)
    }

    /// A new `Upstream` for provider `p`: its pool (with its credentials) and WebSocket target.
    fn upstream(&self, n: &NetworkSpec, p: &ProviderSpec) -> Rc<Upstream> {
        let settings = self.settings;
        // An https provider without a usable TLS name still gets a pool slot: its calls fail (and
        // count) instead of shifting every later provider's index.
        let pool = UpstreamPool::new(p.endpoint.clone(), p.addrs.clone(), self.tls_config.clone(), settings)
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
    }

    /// Network `index`'s route over `upstreams`: its policies from the config, and its caches, in-flight
    /// reads, subscriptions and blame memory carried over from `before`.
    fn network_route(
        &self,
        index: usize,
        n: &NetworkSpec,
        before: Option<&Rc<NetworkRoute>>,
        upstreams: Vec<Rc<Upstream>>,
        statics: Vec<ProviderStatic>,
    ) -> NetworkRoute {
        let (world, recorder, lives, shutdown) = (self.world, self.recorder, self.lives, self.shutdown);
        let tls_config = &self.tls_config;
        let config = &world.config;
        NetworkRoute {
            index,
            name: n.name.clone(),
            upstreams,
            statics,
            live: lives[index].clone(),
            policy: RoutePolicy {
                retry: config.policy.retry.clone(),
                hedge: prism_core::routing::hedge::Hedging::new(&config.policy.hedge),
                operators: operators(&config.networks[index]),
                declared: world.declared[index].clone(),
                submit: SubmitLimits {
                    lookup: Duration::from_millis(config.limits.write_lookup_ms),
                    sync_default: Duration::from_millis(config.limits.sync_submit_timeout_ms),
                    sync_max: Duration::from_millis(config.limits.sync_submit_max_ms),
                },
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
                cache_depth: config.networks[index].cache_depth_blocks,
                chain: if n.kind == NetworkKind::SolanaMagic {
                    &prism_solana::chain::SOLANA
                } else {
                    &prism_core::chain::EVM
                },
            },
            ws: WsSettings {
                tls: tls_config.clone(),
                connect_timeout_ms: config.limits.upstream_connect_timeout_ms,
                ping: (config.limits.upstream_ws_ping_ms > 0)
                    .then(|| Duration::from_millis(config.limits.upstream_ws_ping_ms)),
            },
            shard: ShardServices {
                recorder: recorder.clone(),
                cache: match before {
                    Some(b) => b.shard.cache.clone(),
                    None => config
                        .cache
                        .enabled
                        .then(|| Rc::new(ResultCache::new(config.cache.max_bytes, config.cache.max_entry_bytes))),
                },
                inflight: match before {
                    Some(b) => b.shard.inflight.clone(),
                    None => config.cache.dedupe.then(|| Rc::new(InFlight::default())),
                },
                subs: before.map(|b| b.shard.subs.clone()).unwrap_or_default(),
                newest: before.map(|b| b.shard.newest.clone()).unwrap_or_default(),
                blame: before.map(|b| b.shard.blame.clone()).unwrap_or_default(),
                hedge_budget: Default::default(),
                sync: prism_core::call::sync_submit::SyncSupport::new(
                    config.networks[index].providers.iter().map(|c| c.sync_submit).collect(),
                ),
                bodies: prism_wire::http1::SpareBufs::small(),
            },
            turns: Turns::default(),
            life: Lifecycle::new(shutdown.clone()),
        }
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
