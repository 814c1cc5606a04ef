//! Per-shard routing state for one network: this shard's pools to each provider, the static facts routing
//! needs, and a handle to the network's shared live state.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use super::cache::ResultCache;
use super::dedupe::InFlight;
use super::router::ProviderStatic;
use super::state::NetworkLive;
use super::subs::SubHub;
use crate::config::Endpoint;
use crate::config::RetryPolicy;
use crate::runtime::Shutdown;
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
}

impl NetworkRoute {
    pub fn next_rotation(&self) -> usize {
        let r = self.rotation.get();
        self.rotation.set(r.wrapping_add(1));
        r
    }
}
