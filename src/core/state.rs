//! What every shard must agree on about a network's providers, shared through atomics: breakers, heads,
//! drift, parking, chain-id checks, the per-key high-water marks, and the latest health snapshot.
//! Built once at start-up and shared behind an `Arc`; no lock on any path.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::breaker::{Breaker, BreakerState};
use super::marks::Marks;
use crate::config::{BreakerPolicy, Network};
use crate::telemetry::snapshot::NetworkHealth;

/// Result of the start-up `eth_chainId` check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ChainCheck {
    /// Not checked yet (or no `chain_id` configured).
    Unknown = 0,
    Ok = 1,
    /// Serves another chain: excluded until it reports the right id.
    Wrong = 2,
}

pub struct ProviderLive {
    pub breaker: Breaker,
    /// Latest head height seen from this provider (probes, responses, newHeads).
    pub head: AtomicU64,
    /// More than `max_drift_blocks` behind the pool's best head.
    pub drifted: AtomicBool,
    /// Throttled: not used until this time (ms on the process clock).
    pub parked_until_ms: AtomicU64,
    chain: AtomicU8,
    /// A peer node reported this provider's breaker open; advisory until this time.
    pub peer_open_until_ms: AtomicU64,
    /// With `[cluster]` and `quota_rps`: quota tokens leased for this node, spent one per attempt.
    pub quota_leased: AtomicBool,
    pub quota_stock: std::sync::atomic::AtomicI64,
}

impl ProviderLive {
    fn new(policy: &BreakerPolicy) -> Self {
        ProviderLive {
            breaker: Breaker::new(policy),
            head: AtomicU64::new(0),
            drifted: AtomicBool::new(false),
            parked_until_ms: AtomicU64::new(0),
            chain: AtomicU8::new(ChainCheck::Unknown as u8),
            peer_open_until_ms: AtomicU64::new(0),
            quota_leased: AtomicBool::new(false),
            quota_stock: std::sync::atomic::AtomicI64::new(0),
        }
    }

    pub fn chain(&self) -> ChainCheck {
        match self.chain.load(Ordering::Acquire) {
            1 => ChainCheck::Ok,
            2 => ChainCheck::Wrong,
            _ => ChainCheck::Unknown,
        }
    }

    pub fn set_chain(&self, c: ChainCheck) {
        self.chain.store(c as u8, Ordering::Release);
    }

    /// Peers see this provider failing (advisory: a node's own breaker decides exclusion).
    pub fn peer_open(&self, now_ms: u64) -> bool {
        self.peer_open_until_ms.load(Ordering::Relaxed) > now_ms
    }

    /// The node's leased quota for this provider is spent (only when quota is shared).
    pub fn quota_spent(&self) -> bool {
        self.quota_leased.load(Ordering::Relaxed) && self.quota_stock.load(Ordering::Relaxed) <= 0
    }

    pub fn is_parked(&self, now_ms: u64) -> bool {
        self.parked_until_ms.load(Ordering::Relaxed) > now_ms
    }

    pub fn park_until(&self, until_ms: u64) {
        self.parked_until_ms.fetch_max(until_ms, Ordering::Relaxed);
    }

    /// The state shown to operators: the breaker, or `open (drift)` / `wrong chain` when those exclude it.
    pub fn describe(&self, now_ms: u64) -> &'static str {
        if self.chain() == ChainCheck::Wrong {
            "wrong-chain"
        } else if self.drifted.load(Ordering::Relaxed) && self.breaker.is_closed() {
            "open-drift"
        } else {
            match self.breaker.state(now_ms) {
                BreakerState::Closed if self.is_parked(now_ms) => "parked",
                s => s.name(),
            }
        }
    }
}

pub struct NetworkLive {
    pub providers: Box<[ProviderLive]>,
    /// Best head across the pool.
    pub best_head: AtomicU64,
    /// Best head peer nodes report (advisory, `[cluster]`), valid until `peer_best_until_ms`.
    pub peer_best_head: AtomicU64,
    pub peer_best_until_ms: AtomicU64,
    pub max_drift: u64,
    pub hwm_tolerance: u64,
    /// Configured chain id: providers must match it before they serve.
    pub chain_id: Option<u64>,
    pub marks: Marks,
    pub health: ArcSwap<NetworkHealth>,
}

impl NetworkLive {
    pub fn new(network: &Network, policy: &BreakerPolicy, keys: usize) -> Arc<Self> {
        Arc::new(NetworkLive {
            providers: network.providers.iter().map(|_| ProviderLive::new(policy)).collect(),
            best_head: AtomicU64::new(0),
            peer_best_head: AtomicU64::new(0),
            peer_best_until_ms: AtomicU64::new(0),
            max_drift: network.max_drift_blocks,
            hwm_tolerance: network.hwm_tolerance_blocks,
            chain_id: network.chain_id,
            marks: Marks::new(keys),
            health: ArcSwap::from_pointee(NetworkHealth::empty(network.providers.len())),
        })
    }

    /// Records a head seen from `provider`; returns the pool's best head afterwards.
    pub fn observe_head(&self, provider: usize, height: u64) -> u64 {
        self.providers[provider].head.fetch_max(height, Ordering::AcqRel);
        self.best_head.fetch_max(height, Ordering::AcqRel).max(height)
    }

    /// A provider answered from below what it reported before (a load balancer behind it switched nodes, or
    /// it fell back): its head is what it just showed, so routing stops sending it clients who are ahead.
    pub fn lower_head(&self, provider: usize, height: u64) {
        self.providers[provider].head.fetch_min(height, Ordering::AcqRel);
    }

    /// Re-evaluates drift for every provider against the best head. Returns (provider, now drifted) for each
    /// change, so the caller can log it.
    pub fn update_drift(&self) -> Vec<(usize, bool)> {
        let best = self.best_head.load(Ordering::Acquire);
        let mut changes = Vec::new();
        for (i, p) in self.providers.iter().enumerate() {
            let head = p.head.load(Ordering::Acquire);
            let behind = head > 0 && best.saturating_sub(head) > self.max_drift;
            if p.drifted.swap(behind, Ordering::AcqRel) != behind {
                changes.push((i, behind));
            }
        }
        changes
    }

    /// The provider's state as operators see it: the breaker, or why it is excluded.
    pub fn describe(&self, provider: usize, now_ms: u64) -> &'static str {
        let p = &self.providers[provider];
        if p.chain() == ChainCheck::Unknown && self.chain_id.is_some() && p.breaker.is_closed() {
            "unverified"
        } else {
            p.describe(now_ms)
        }
    }

    /// The best head peers report, while their reports are fresh.
    pub fn peer_best(&self, now_ms: u64) -> u64 {
        if self.peer_best_until_ms.load(Ordering::Acquire) > now_ms {
            self.peer_best_head.load(Ordering::Acquire)
        } else {
            0
        }
    }

    /// Whether the provider may be routed to at all (breaker aside).
    pub fn admissible(&self, provider: usize) -> bool {
        let p = &self.providers[provider];
        !p.drifted.load(Ordering::Relaxed)
            && match p.chain() {
                ChainCheck::Ok => true,
                ChainCheck::Wrong => false,
                ChainCheck::Unknown => self.chain_id.is_none(),
            }
    }
}
