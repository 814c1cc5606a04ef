//! One network as a shard serves it: its route (pools, cache, dedupe, blame memory, subscriptions hub)
//! and, for a solana-magic network, the magic router. Whether a network speaks EVM or Solana is decided
//! here, once, and the HTTP path and WebSocket sessions ask this type instead of branching themselves.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use prism_core::{forward, CallOutcome, Caller, NetworkRoute};
use prism_solana::SolanaRoute;
use prism_wire::rpc::Call;

/// What the edge serves under one network's path. Cloning shares it (a reload keeps a solana-magic network's
/// routes as they are).
#[derive(Clone)]
pub struct Network {
    pub route: Rc<NetworkRoute>,
    /// The magic router (base layer and ephemeral rollups), for a solana-magic network.
    magic: Option<Rc<SolanaRoute>>,
}

impl Network {
    pub fn new(route: Rc<NetworkRoute>, magic: Option<Rc<SolanaRoute>>) -> Self {
        Network { route, magic }
    }

    pub fn name(&self) -> &str {
        &self.route.name
    }

    /// The magic router, when this is a solana-magic network.
    pub fn magic(&self) -> Option<&Rc<SolanaRoute>> {
        self.magic.as_ref()
    }

    /// One call, answered by the network's own path: the EVM pipeline (local answers, cache, dedupe,
    /// submissions, retries) or the magic router (by account delegation).
    pub async fn forward(&self, call: &Call<'_>, caller: &Caller, deadline: Instant, ids: &Cell<u64>) -> CallOutcome {
        match &self.magic {
            Some(sol) => prism_solana::router::handle(sol, call, caller, deadline).await,
            None => forward(&self.route, call, caller, deadline, ids).await,
        }
    }

    /// Whether `method` opens or closes a subscription on this network's WebSocket.
    pub fn is_subscription_method(&self, method: &str) -> bool {
        match self.magic {
            Some(_) => prism_solana::ws::is_subscription_method(method),
            None => matches!(method, "eth_subscribe" | "eth_unsubscribe"),
        }
    }

    /// Whether `method` (a subscription method) opens one rather than closing it.
    pub fn opens_subscription(&self, method: &str) -> bool {
        match self.magic {
            Some(_) => !method.ends_with("Unsubscribe"),
            None => method == "eth_subscribe",
        }
    }

    /// Solana SDKs append their own path suffixes: on such a network the key (if any) follows the network
    /// name and anything after it is ignored.
    pub fn takes_sdk_suffixes(&self) -> bool {
        self.magic.is_some()
    }
}
