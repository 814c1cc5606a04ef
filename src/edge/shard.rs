//! What one shard owns: the networks it serves (each network's route and, for Solana, its magic router),
//! its limits, keys, counters, the JSON-RPC state and its upstream ids. The HTTP server, the WebSocket
//! sessions and the shard's background tasks all work on it.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::keys::KeyRing;
use super::network::Network;
use super::rpc::RpcShard;
use crate::config::Limits;
use crate::runtime::Shutdown;

/// Everything one shard owns.
pub struct Shard {
    pub id: usize,
    /// TLS termination, when `[server.tls]` is set.
    pub tls: Option<Arc<super::tls::EdgeTls>>,
    pub limits: Limits,
    /// The networks, in config order (the route's `index`).
    pub networks: Vec<Network>,
    pub rpc: RpcShard,
    pub shutdown: Shutdown,
    /// Open client connections across all shards, for `limits.max_connections`.
    pub open_global: Arc<AtomicUsize>,
    /// Open client connections on this shard, for draining.
    pub open_local: Cell<usize>,
    /// Client subscriptions open on this shard (EVM and Solana), for `limits.max_subscriptions_per_shard`.
    pub subscriptions: Cell<usize>,
    /// API keys, shared by all shards (their rate-limit state is atomic).
    pub keys: Arc<KeyRing>,
    /// This shard's health samples, shipped to the aggregator.
    pub recorder: Rc<crate::telemetry::recorder::Recorder>,
}
