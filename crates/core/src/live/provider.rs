//! One provider's live state, shared by every shard through atomics ([`ProviderLive`]), in records with one
//! purpose each: its breaker, the evidence for its head ([`HeadEvidence`]), Solana's slot evidence
//! (`core::live::sides::SlotEvidence`), whether it may serve at all (parked, chain, retired, cordoned, its
//! block floor and tags), what peer nodes say of it ([`PeerView`]) and the `eth_getLogs` limits learned of it
//! ([`LogsLimits`]).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};

use crate::live::availability::Floor;
use crate::live::breaker::{Breaker, BreakerState};
use crate::live::finality::TagHeads;
use crate::live::sides::SlotEvidence;
use prism_config::BreakerPolicy;

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

/// One provider, as every shard sees it.
pub struct ProviderLive {
    pub breaker: Breaker,
    /// Its head and the evidence for it (`core::live::state::HeadRule`).
    pub heads: HeadEvidence,
    /// Solana: its slot clock and last probed slot (`core::live::slots`).
    pub slots: SlotEvidence,
    /// Throttled: not used until this time (ms on the process clock).
    pub parked_until_ms: AtomicU64,
    chain: AtomicU8,
    /// What peer nodes say of it and lease for it (`[cluster]`).
    pub peer: PeerView,
    /// Removed from the config by a reload: never routed to again, its in-flight calls finish.
    pub retired: AtomicBool,
    /// The lowest block it has state and logs for, declared or learned (`core::live::availability`).
    pub floor: Floor,
    /// Its `safe` / `finalized` blocks as last probed or answered (`core::live::finality`).
    pub tags: TagHeads,
    /// `eth_getLogs` limits learned from its answers (`core::call::logs`).
    pub logs: LogsLimits,
    /// Its last failures and their reasons (`telemetry::cause`), for `/status`, the page and the log.
    pub causes: prism_telemetry::cause::CauseLog,
    /// Taken out of routing by an operator (`core::live::cordon`).
    pub cordon: crate::live::cordon::Cordon,
}

/// What is believed of a provider's head, and the evidence against the heads it claimed and was not believed
/// (`core::live::state::HeadRule`).
#[derive(Default)]
pub struct HeadEvidence {
    /// Latest believed head height of this provider (probes, responses, newHeads).
    pub head: AtomicU64,
    /// When `head` was first reported at its height (process-clock ms).
    pub head_at_ms: AtomicU64,
    /// When this provider last reported a believed head.
    pub seen_ms: AtomicU64,
    /// Reported a head that cannot be: left out of routing and of the pool's heads.
    pub outlier: AtomicBool,
    /// Implausible heads reported so far (metric), and the last one.
    pub outlier_heads: AtomicU64,
    pub claimed_head: AtomicU64,
    /// The first claim of the current run of consistent implausible claims, and when it was made (see
    /// `HeadRule::confirms`); 0 when there is no run.
    pub claim_run: AtomicU64,
    pub claimed_at_ms: AtomicU64,
    /// More than `max_drift_blocks` behind the pool's best head (Solana: `max_slot_drift` behind the best
    /// base-layer provider).
    pub drifted: AtomicBool,
}

/// What peer nodes (`[cluster]`) say of a provider and lease for it. Advisory: a node's own breaker decides.
#[derive(Default)]
pub struct PeerView {
    /// A peer node reported this provider's breaker open; advisory until this time.
    pub open_until_ms: AtomicU64,
    /// With `quota_rps`: quota tokens leased for this node, spent one per attempt.
    pub quota_leased: AtomicBool,
    pub quota_stock: AtomicI64,
}

/// `eth_getLogs`: the widest block range (and the most results) a provider is known to refuse beyond,
/// learned from its "too large" answers on any shard (`core::call::logs`); 0 = none learned yet.
#[derive(Default)]
pub struct LogsLimits {
    pub range: AtomicU64,
    pub results: AtomicU64,
}

impl ProviderLive {
    pub(crate) fn new(policy: &BreakerPolicy) -> Self {
        ProviderLive {
            breaker: Breaker::new(policy),
            heads: HeadEvidence::default(),
            slots: SlotEvidence::default(),
            parked_until_ms: AtomicU64::new(0),
            chain: AtomicU8::new(ChainCheck::Unknown as u8),
            peer: PeerView::default(),
            retired: AtomicBool::new(false),
            floor: Floor::default(),
            tags: TagHeads::default(),
            logs: LogsLimits::default(),
            causes: Default::default(),
            cordon: Default::default(),
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
        self.peer.open_until_ms.load(Ordering::Relaxed) > now_ms
    }

    /// The node's leased quota for this provider is spent (only when quota is shared).
    pub fn quota_spent(&self) -> bool {
        self.peer.quota_leased.load(Ordering::Relaxed) && self.peer.quota_stock.load(Ordering::Relaxed) <= 0
    }

    pub fn is_parked(&self, now_ms: u64) -> bool {
        self.parked_until_ms.load(Ordering::Relaxed) > now_ms
    }

    pub fn park_until(&self, until_ms: u64) {
        self.parked_until_ms.fetch_max(until_ms, Ordering::Relaxed);
    }

    /// The state shown to operators: the breaker, or `open-drift` / `outlier` / `wrong-chain` when those
    /// exclude it.
    pub fn describe(&self, now_ms: u64) -> &'static str {
        if self.retired.load(Ordering::Relaxed) {
            "retired"
        } else if self.cordon.is_on() {
            "cordoned"
        } else if self.chain() == ChainCheck::Wrong {
            "wrong-chain"
        } else if self.heads.outlier.load(Ordering::Relaxed) && self.breaker.is_closed() {
            "outlier"
        } else if self.heads.drifted.load(Ordering::Relaxed) && self.breaker.is_closed() {
            "open-drift"
        } else if self.slots.stalled.load(Ordering::Relaxed) && self.breaker.is_closed() {
            "stalled"
        } else {
            match self.breaker.state(now_ms) {
                BreakerState::Closed if self.is_parked(now_ms) => "parked",
                s => s.name(),
            }
        }
    }
}
