//! The Solana magic router: one endpoint in front of a base layer and MagicBlock ephemeral rollups (ERs).
//! Each call goes where its accounts live: an account whose delegation record exists on the base layer is
//! served by the ER the record names, any other by the base layer.
//!
//! - `pubkey`, `tx`, `record`: the wire formats (keys and PDAs, transactions, delegation records).
//! - `base_only`: accounts that live on the base layer whatever any record says (sysvars, programs, the
//!   delegation program's own accounts such as the records themselves).
//! - `net`: what all shards share (which providers are which side; signature and blockhash memories).
//! - `table` + `sync`: this shard's delegation table, fetched over HTTP and kept fresh by base-layer
//!   `accountSubscribe`; a lost subscription puts its accounts in limbo until refetched.
//! - `methods`: which calls are reads, submissions, or unknown (sent once).
//! - `router`: method routing, request splitting and answer merging (a file per concern in `router/`).
//! - `ws` + `subs` + `subs_link`: client WebSocket subscriptions (`ws`: one session per client) shared as
//!   topics over a few upstream sockets per side (`subs`: the hub, `subs_link`: one socket), following an
//!   account across delegation changes.
//!
//! Each shard keeps its own table, its own base-layer WebSocket for records and its own subscription hub:
//! nothing on the routing path is shared but the lock-free memories in `net`.

/// Base58 and keys are shared vocabulary (config validates them too).
pub use prism_wire::rpc::{base58, pubkey};
pub mod base_only;
pub mod chain;
pub mod memo;
pub mod methods;
pub mod net;
pub mod record;
pub mod router;
pub mod subs;
pub mod subs_hub;
pub mod subs_link;
pub mod subs_read;
pub mod sync;
pub mod table;
pub mod tx;
pub mod ws;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use ahash::AHashMap;

pub use net::{Dest, SolanaNet};
pub use pubkey::Pubkey;

use prism_core::NetworkRoute;

/// One shard's Solana router for one network.
pub struct SolanaRoute {
    pub route: Rc<NetworkRoute>,
    pub net: Arc<SolanaNet>,
    pub table: table::DelegationTable,
    pub link: sync::BaseLink,
    /// Address lookup tables read from the base layer: table address → its addresses.
    pub lookup_tables: RefCell<AHashMap<Pubkey, Rc<[Pubkey]>>>,
    /// Upstream ids for Prism's own calls (delegation fetches, table reads, split requests).
    pub ids: Cell<u64>,
    /// `limits.record_resubscribe_per_sec`.
    pub resubscribe_per_sec: usize,
    /// Every client's subscriptions, over shared upstream sockets.
    pub subs: subs_hub::SolHub,
}

impl SolanaRoute {
    pub fn new(route: Rc<NetworkRoute>, net: Arc<SolanaNet>, limits: &prism_config::Limits) -> Rc<SolanaRoute> {
        Rc::new(SolanaRoute {
            route,
            net,
            table: Default::default(),
            link: Default::default(),
            lookup_tables: RefCell::new(AHashMap::new()),
            ids: Cell::new(prism_wire::rpc::ids::SOLANA_ROUTER),
            resubscribe_per_sec: limits.record_resubscribe_per_sec,
            subs: subs_hub::SolHub::new(limits.solana_subscriptions_per_socket),
        })
    }

    /// Whether ER `k` has a provider routing would use now (admissible, breaker closed).
    pub fn er_live(&self, k: usize) -> bool {
        let Some(er) = self.net.ers.get(k) else { return false };
        let live = &self.route.live;
        prism_wire::rpc::ProviderId::in_set(er.providers, self.route.upstreams.len())
            .any(|p| live.admissible(p) && live.providers()[p].breaker.is_closed())
    }

    /// ER `k`'s latency: the p50 of light calls at its fastest provider (0 before any is measured).
    pub fn er_latency_us(&self, k: usize) -> u64 {
        let Some(er) = self.net.ers.get(k) else { return u64::MAX };
        let health = self.route.live.health.load();
        prism_wire::rpc::ProviderId::in_set(er.providers, self.route.upstreams.len())
            .filter_map(|p| health.providers.get(p.index()))
            .map(|h| h.figures(prism_wire::rpc::methods::Family::Light).p50_us)
            .min()
            .unwrap_or(u64::MAX)
    }
}
