//! Solana's side of the chain seam (`prism_core::chain`): its error dialect, its probes (`getHealth`), and
//! heights read from every answer's `context.slot`, held per side (the base layer and each ephemeral rollup
//! run their own slots, so there is no one head, no finality tags and no `newHeads` feed). The slot rules
//! themselves (cadence, drift, stalls, "behind by N slots") are `prism_core::live::slots`, applied to the
//! network's live state.

use prism_core::chain::{Asked, ChainRules, Height};
use prism_core::judge::classify::Dialect;
use prism_core::live::state::NetworkLive;
use prism_wire::jsonscan::object_field;
use prism_wire::rpc::ProviderId;

/// Solana networks (`kind = "solana-magic"`).
pub struct Solana;

/// The rules of every Solana network.
pub static SOLANA: Solana = Solana;

impl ChainRules for Solana {
    fn dialect(&self) -> Dialect {
        Dialect::Solana
    }

    fn single_chain(&self) -> bool {
        false
    }

    fn every_answer_at_height(&self) -> bool {
        true
    }

    fn head_probe(&self) -> &'static str {
        "getHealth"
    }

    /// An answer's `context.slot` is the provider's slot (believed within its probe's bound) and must not
    /// take the caller's view of this side backwards: one below the caller's mark is lagging, and still the
    /// provider's slot now (it moves `slot_now`).
    fn heard_height(
        &self,
        live: &NetworkLive,
        i: ProviderId,
        _: Asked<'_>,
        result: &[u8],
        mark: u64,
        now_ms: u64,
    ) -> Height {
        let slot = object_field(result, "context")
            .and_then(|c| object_field(c, "slot"))
            .and_then(|s| std::str::from_utf8(s).ok()?.parse::<u64>().ok());
        match slot {
            None => Height::Unshown,
            Some(s) if s < mark => {
                live.observe_answer_slot(i, s, now_ms);
                Height::Lagging
            }
            Some(s) if live.observe_answer_slot(i, s, now_ms) => Height::Shown(s),
            Some(_) => Height::Unshown,
        }
    }

    /// "Node is behind by N slots": the provider told its slot (`prism_core::live::slots`).
    fn told_unavailable(&self, live: &NetworkLive, i: ProviderId, error: &[u8], now_ms: u64) -> bool {
        live.told_behind(i, error, now_ms);
        true
    }
}
