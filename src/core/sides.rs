//! Which side of a Solana network each provider is on (the base layer, or one ephemeral rollup) and the
//! slot rules of that network, read from config: data `core::state` holds and `core::slots` applies.

use crate::config::{Network, NetworkKind, ProviderRole};

/// Commitment levels (`processed`, `confirmed`, `finalized`), each with its own mark per side.
pub const COMMITMENTS: usize = 3;

/// Mark lanes per caller on an EVM network: latest, `safe`, `finalized`.
pub const EVM_LANES: usize = 1 + crate::rpc::methods::Finality::ALL.len();

/// Each provider's side (0 = base layer, k + 1 = ER k in order of first appearance, as `SolanaNet` counts
/// them) and the slot rules of one solana-magic network.
#[derive(Debug)]
pub struct SlotRule {
    pub(super) side: Box<[u8]>,
    pub(super) sides: usize,
    pub(super) max_drift: u64,
    pub(super) stall_ms: u64,
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
        })
    }

    /// How many marks each caller has: one per side and commitment level on Solana (a `finalized` answer
    /// is ~32 slots behind a `processed` one by design, so each level keeps its own); on EVM one for latest
    /// and one per finality tag (`MarkKey::in_lane`).
    pub fn mark_lanes(n: &Network) -> usize {
        SlotRule::for_network(n).map_or(EVM_LANES, |r| r.sides * COMMITMENTS)
    }
}
