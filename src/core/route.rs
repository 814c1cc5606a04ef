//! Per-shard routing state for one network: this shard's pools to each provider, the static facts routing
//! needs, and a handle to the network's shared live state.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use std::sync::atomic::Ordering;

use super::breaker::Transition;
use super::cache::ResultCache;
use super::classify::Class;
use super::dedupe::InFlight;
use super::methods::Family;
use super::router::ProviderStatic;
use super::state::NetworkLive;
use super::subs::SubHub;
use crate::config::Endpoint;
use crate::config::RetryPolicy;
use crate::runtime::Shutdown;
use crate::telemetry::clock::now_ms;
use crate::telemetry::recorder::Outcome;
use crate::telemetry::recorder::Recorder;
use crate::transport::UpstreamPool;
use std::net::SocketAddr;

/// One provider as seen by one shard: its name and this shard's pool to it.
pub struct Upstream {
    pub name: String,
    pub pool: UpstreamPool,
}

pub struct NetworkRoute {
    /// Index of the network in the config (and in the recorder).
    pub index: usize,
    pub name: String,
    pub upstreams: Vec<Upstream>,
    pub statics: Vec<ProviderStatic>,
    pub live: Arc<NetworkLive>,
    pub retry: RetryPolicy,
    pub recorder: Rc<Recorder>,
    /// Rotation counter for ties and round robin.
    pub rotation: Cell<usize>,
    /// This shard's deterministic-result cache for the network (`None` when disabled).
    pub cache: Option<ResultCache>,
    pub cache_depth: u64,
    /// This shard's in-flight reads (`None` when deduplication is disabled).
    pub inflight: Option<InFlight>,
    /// This shard's client subscriptions and upstream WebSocket links.
    pub subs: SubHub,
    /// Each provider's WebSocket endpoint and resolved addresses, if it has one.
    pub ws_urls: Vec<Option<Endpoint>>,
    pub ws_addrs: Vec<Arc<[SocketAddr]>>,
    pub ws_tls: Option<Arc<rustls::ClientConfig>>,
    pub connect_timeout_ms: u64,
    pub shutdown: Shutdown,
    /// A Solana network: probed with `getHealth`, and its slots are not one chain's heads (the base layer and
    /// each ER run their own clocks), so they feed no drift.
    pub solana: bool,
}

impl NetworkRoute {
    pub fn next_rotation(&self) -> usize {
        let r = self.rotation.get();
        self.rotation.set(r.wrapping_add(1));
        r
    }
}

/// How long a throttled provider is left alone, and one out of quota.
pub const THROTTLE_PARK_MS: u64 = 1_000;
pub const QUOTA_PARK_MS: u64 = 60_000;

impl NetworkRoute {
    /// Feeds what one exchange with provider `i` meant into health: the latency window and metrics, the
    /// provider's leased quota, its breaker and parking. Client attempts and probes both come through here,
    /// so a 429 means the same to both. `probe` marks the single half-open probe: an answer that is neither
    /// success nor failure ends it without a verdict.
    pub fn note_outcome(&self, i: usize, family: Family, class: Class, latency_us: u64, probe: bool) {
        let p = &self.live.providers[i];
        let now = now_ms();
        let outcome = match class {
            Class::ProviderFailure => Outcome::Failed,
            Class::Throttled | Class::QuotaExhausted => Outcome::Throttled,
            Class::Unsupported | Class::DataUnavailable => Outcome::Rerouted,
            Class::Success | Class::UserError | Class::TooLarge => Outcome::Ok,
        };
        self.recorder.record(self.index, i, family, latency_us, outcome);
        if p.quota_leased.load(Ordering::Relaxed) {
            p.quota_stock.fetch_sub(1, Ordering::Relaxed);
        }
        let name = &self.upstreams[i].name;
        match class {
            Class::ProviderFailure => match p.breaker.on_failure(now) {
                Transition::Opened => tracing::warn!(network = %self.name, provider = %name, probe, "breaker opened"),
                Transition::Reopened { cooldown_ms } => {
                    tracing::warn!(network = %self.name, provider = %name, cooldown_ms, "breaker reopened")
                }
                _ if probe => p.breaker.on_inconclusive(now),
                _ => {}
            },
            Class::Throttled | Class::QuotaExhausted => {
                let park = if class == Class::Throttled {
                    THROTTLE_PARK_MS
                } else {
                    QUOTA_PARK_MS
                };
                p.park_until(now + park);
                if class == Class::QuotaExhausted {
                    tracing::warn!(network = %self.name, provider = %name, park_ms = park, "provider out of quota; parked");
                }
                if probe {
                    p.breaker.on_inconclusive(now);
                }
            }
            Class::Unsupported | Class::DataUnavailable if probe => p.breaker.on_inconclusive(now),
            Class::Unsupported | Class::DataUnavailable => {}
            Class::Success | Class::UserError | Class::TooLarge => {
                if p.breaker.on_success(now) == Transition::Closed {
                    tracing::warn!(network = %self.name, provider = %name, "breaker closed");
                }
            }
        }
    }
}
