//! What one shard's edge owns: its routes, limits, keys, counters, the JSON-RPC state. The HTTP server and
//! the WebSocket sessions both work on it.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::keys::KeyRing;
use super::rpc::RpcShard;
use crate::config::Limits;
use crate::core::NetworkRoute;
use crate::runtime::Shutdown;

/// Everything one shard's edge owns.
pub struct EdgeShard {
    pub id: usize,
    /// TLS termination, when `[server.tls]` is set.
    pub tls: Option<Arc<super::tls::EdgeTls>>,
    pub limits: Limits,
    pub routes: Vec<Rc<NetworkRoute>>,
    /// The Solana magic router of each solana-magic network, by route index.
    pub solana: Vec<Option<Rc<crate::solana::SolanaRoute>>>,
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
