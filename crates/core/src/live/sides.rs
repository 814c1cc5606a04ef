//! Which side of a Solana network each provider is on (the base layer, or one ephemeral rollup) and the
//! slot rules of that network, read from config: data `core::live::state` holds and `core::live::slots` applies.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

use prism_config::{Network, NetworkKind, ProviderRole};

/// Commitment levels (`processed`, `confirmed`, `finalized`), each with its own mark per side.
pub const COMMITMENTS: usize = 3;

/// Mark lanes per caller on an EVM network: latest, `safe`, `finalized`.
pub const EVM_LANES: usize = 1 + prism_wire::rpc::methods::Finality::ALL.len();

/// Each provider's side (0 = base layer, k + 1 = ER k in order of first appearance, as `SolanaNet` counts
/// them) and the slot rules of one solana-magic network.
#[derive(Debug)]
pub struct SlotRule {
    pub(super) side: Box<[u8]>,
    pub(super) sides: usize,
    pub(super) max_drift: u64,
    pub(super) stall_ms: u64,
    pub(super) stall_slots: u64,
}

impl SlotRule {
    pub fn for_network(n: &Network) -> Option<SlotRule> {
        if n.kind != NetworkKind::SolanaMagic {
            return None;
        }
        let mut identities: Vec<&str> = Vec::new();
        let side = n
            .providers
            .iter()
            .map(|p| match (p.role, p.identity.as_deref()) {
                (Some(ProviderRole::Ephemeral), Some(id)) => {
                    let k = identities.iter().position(|x| *x == id).unwrap_or_else(|| {
                        identities.push(id);
                        identities.len() - 1
                    });
                    (k + 1).min(u8::MAX as usize) as u8
                }
                _ => 0,
            })
            .collect();
        Some(SlotRule {
            side,
            sides: identities.len() + 1,
            max_drift: n.max_slot_drift,
            stall_ms: n.slot_stall_ms,
            stall_slots: n.slot_stall_slots,
        })
    }

    /// How many marks each caller has: one per side and commitment level on Solana (a `finalized` answer
    /// is ~32 slots behind a `processed` one by design, so each level keeps its own); on EVM one for latest
    /// and one per finality tag (`MarkKey::in_lane`).
    pub fn mark_lanes(n: &Network) -> usize {
        SlotRule::for_network(n).map_or(EVM_LANES, |r| r.sides * COMMITMENTS)
    }
}

/// Advancing probe intervals a cadence is the median of: one odd interval (a freeze half-way through one,
/// a node catching up) does not move it.
pub const CADENCE_SAMPLES: usize = 8;

/// Solana: what a provider's probes and answers show of its slot.
#[derive(Debug, Default)]
pub struct SlotEvidence {
    /// Its slot has stood still for `slot_stall_slots` of its slot times, or `slot_stall_ms`
    /// (see `core::live::slots`).
    pub stalled: AtomicBool,
    /// Its cadence and when its newest slot was made, as its probes show them (`core::live::slots`).
    pub clock: SlotClock,
    /// The slot its last probe answered, and when: what bounds the slots its answers may claim.
    pub probed_slot: AtomicU64,
    pub probed_at_ms: AtomicU64,
}

/// One provider's slot clock as its probes show it. Written only by the shard that probes the provider;
/// read by every shard.
#[derive(Debug, Default)]
pub struct SlotClock {
    /// Microseconds per slot over recent advancing probe intervals (0 = empty), a ring.
    pub(super) samples: [AtomicU32; CADENCE_SAMPLES],
    pub(super) next: AtomicUsize,
    /// A sample far from the cadence, held back until the next one says whether the clock really changed
    /// (0 = none): the interval in which a clock stopped, or a node's catch-up burst, is one such.
    pub(super) odd: AtomicU32,
    /// The median of `samples`, µs per slot; 0 until the first sample.
    pub(super) per_slot_us: AtomicU64,
    /// The last probe that saw the slot advance: its slot and time (a cadence sample runs from there).
    pub(super) moved_slot: AtomicU64,
    pub(super) moved_at_ms: AtomicU64,
    /// When the provider's newest slot was made, as far as its probes tell (0 before the first probe).
    pub(super) made_at_ms: AtomicU64,
    /// The provider answered "Node is behind by N slots": out of rotation until its next probe.
    pub(super) told_behind: AtomicBool,
}
