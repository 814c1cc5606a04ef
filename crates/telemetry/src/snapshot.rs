//! The immutable health snapshot the aggregator publishes and every shard reads without locks.

use std::sync::Arc;

use super::history::NetworkHistory;
use prism_wire::rpc::methods::Family;

/// Rolling figures for one provider in one latency family (or overall).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Rolling p50 / p99 over the window, microseconds (0 = no samples).
    pub p50_us: u64,
    pub p99_us: u64,
    /// Rolling p95: how late an answer may be before a hedge goes (`core::routing::hedge`).
    pub p95_us: u64,
    /// Calls in the window and those that failed (provider's fault).
    pub calls: u64,
    pub failures: u64,
    /// Of `calls`, Prism's own health probes.
    pub probes: u64,
}

impl Figures {
    pub fn error_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.failures as f64 / self.calls as f64
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ProviderHealth {
    pub overall: Figures,
    pub by_family: [Figures; Family::ALL.len()],
    /// Recent request rate (calls per second over the last few seconds), for quota burn.
    pub recent_rps: f64,
    /// Throttled answers in the window (not failures).
    pub throttled: u64,
    /// Share of this network's client calls in the window, 0..1 (probes are not traffic).
    pub share: f64,
    /// The last minute only, for the status page's badge.
    pub minute: Figures,
}

impl ProviderHealth {
    /// Figures for a family, falling back to overall when the family has no samples yet.
    pub fn figures(&self, family: Family) -> &Figures {
        let f = &self.by_family[family as usize];
        if f.calls == 0 {
            &self.overall
        } else {
            f
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct NetworkHealth {
    pub providers: Vec<ProviderHealth>,
    /// When the aggregator built this, ms on the process clock.
    pub built_at_ms: u64,
    /// Points and state changes for the status page (shared with the aggregator until it changes).
    pub history: Arc<NetworkHistory>,
}

impl NetworkHealth {
    pub fn empty(providers: usize) -> Self {
        NetworkHealth {
            providers: vec![ProviderHealth::default(); providers],
            built_at_ms: 0,
            history: Arc::new(NetworkHistory::new(providers)),
        }
    }
}
