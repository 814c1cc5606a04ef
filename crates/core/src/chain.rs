//! The chain seam: what the balancer asks of the chain a network serves, so the call path, the router, the
//! hubs and the prober never name a chain. A network's route holds its rules (`RoutePolicy::chain`); EVM's
//! are [`EVM`], Solana's are `prism_solana::chain::SOLANA` (built on the slot rules `core::live::slots`
//! applies to a network's live state, which stays the live layer's: the router reads slots and heads alike).

use prism_wire::jsonscan::{hex_quantity, object_field};
use prism_wire::rpc::methods::{HeadHint, MethodInfo};
use prism_wire::rpc::ProviderId;

use crate::judge::classify::Dialect;
use crate::live::state::{HeadVerdict, NetworkLive};

/// What one chain's networks need of the balancer beyond JSON-RPC.
pub trait ChainRules: Sync {
    /// Whose error codes its providers speak.
    fn dialect(&self) -> Dialect;

    /// The network is one chain of blocks with one head: `latest` reads are held to the head shown lately,
    /// `safe` / `finalized` tags and block floors apply, and the `newHeads` feed runs. (Solana's base layer
    /// and each ephemeral rollup run their own slots.)
    fn single_chain(&self) -> bool;

    /// Every answer says the height it was read at (Solana's `context.slot`): every read, not only a
    /// `latest` one, must come from a provider at or above the caller's mark.
    fn every_answer_at_height(&self) -> bool;

    /// The method a probe asks for a provider's head (or health).
    fn head_probe(&self) -> &'static str;

    /// What `result`, provider `i`'s successful answer to a call (`info`; `latest`: it reads the head),
    /// shows of its height, judged against the caller's `mark` and learned into `live` when believable.
    fn heard_height(
        &self,
        live: &NetworkLive,
        i: ProviderId,
        asked: Asked<'_>,
        result: &[u8],
        mark: u64,
        now_ms: u64,
    ) -> Height;

    /// Provider `i` said it has no data for a call (`DataUnavailable`) with `error`: learns what that tells
    /// of it, if anything (Solana: "behind by N slots"). Returns whether it told something.
    fn told_unavailable(&self, _live: &NetworkLive, _i: ProviderId, _error: &[u8], _now_ms: u64) -> bool {
        false
    }
}

/// The call an answer was to, as far as its height goes: its method's row, and whether it reads the head.
#[derive(Clone, Copy)]
pub struct Asked<'a> {
    pub info: &'a MethodInfo,
    pub latest: bool,
}

/// What an answer shows of the height it was read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Height {
    /// Not a height this call's answer shows (or one not believed): nothing to hold it to.
    Unshown,
    /// Not a height at all (beyond 2^53): a malformed answer, the provider's failure.
    Malformed,
    /// A height the chain cannot be at: never answered; another provider is asked.
    Implausible,
    /// Below the caller's mark: lagging for this caller; another provider is asked.
    Lagging,
    /// A believed height at or above the mark: the caller's mark rises to it once answered.
    Shown(u64),
}

/// EVM chains: one chain of blocks; the head is what `eth_blockNumber` answers or a `latest` block's number.
pub struct Evm;

/// The rules of every EVM network.
pub static EVM: Evm = Evm;

impl ChainRules for Evm {
    fn dialect(&self) -> Dialect {
        Dialect::Evm
    }

    fn single_chain(&self) -> bool {
        true
    }

    fn every_answer_at_height(&self) -> bool {
        false
    }

    fn head_probe(&self) -> &'static str {
        "eth_blockNumber"
    }

    fn heard_height(
        &self,
        live: &NetworkLive,
        i: ProviderId,
        asked: Asked<'_>,
        result: &[u8],
        mark: u64,
        now_ms: u64,
    ) -> Height {
        if !asked.latest {
            return Height::Unshown;
        }
        match revealed_head(asked.info, true, result).map(|h| (h, live.observe_head_at(i, h, now_ms))) {
            None => Height::Unshown,
            Some((_, HeadVerdict::Malformed)) => Height::Malformed,
            Some((_, HeadVerdict::Implausible)) => Height::Implausible,
            // `eth_blockNumber`, or a "latest" block whose number is below what this client has seen: the
            // provider's real head is learned.
            Some((h, _)) if h < mark => {
                live.lower_head(i, h);
                Height::Lagging
            }
            Some((h, _)) => Height::Shown(h),
        }
    }
}

/// The head height an answer reveals, if any.
pub fn revealed_head(info: &MethodInfo, latest: bool, result: &[u8]) -> Option<u64> {
    match info.head {
        HeadHint::ResultIsHead => hex_quantity(result),
        HeadHint::BlockNumberField if latest => object_field(result, "number").and_then(hex_quantity),
        _ => None,
    }
}
