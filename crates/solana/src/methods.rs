//! The Solana method table: which calls the magic router may retry and join (reads), which are submissions
//! (one upstream, once), and the rest. As on EVM networks, a method not listed here may change state (a
//! vendor's bundle or relay), so it is sent once unless the network declares it a read
//! (`[[networks]] methods.read`).

use prism_wire::rpc::methods::{Family, HeadHint, Kind, MethodId, MethodInfo, UNKNOWN};

pub use super::sync::READ;

/// A transaction (or bundle) submission: exactly one upstream, once.
pub const SUBMIT: MethodInfo = MethodInfo {
    id: MethodId::Other,
    kind: Kind::Write,
    family: Family::Submit,
    head: HeadHint::None,
    block_param: None,
    cacheable: false,
};

/// Execution-like reads (simulation, fee estimates).
pub const EXECUTE: MethodInfo = MethodInfo {
    family: Family::Execute,
    ..READ
};

/// Looks a Solana method up: the Agave RPC reads (current and deprecated), MagicBlock's and Jito's reads,
/// the submissions, and [`UNKNOWN`] for anything else.
pub fn lookup(method: &str) -> MethodInfo {
    match method {
        "sendTransaction" | "sendBundle" | "requestAirdrop" => SUBMIT,
        "simulateTransaction" | "getFeeForMessage" | "getRecentPrioritizationFees" | "getPriorityFeeEstimate" => {
            EXECUTE
        }
        "getAccountInfo"
        | "getBalance"
        | "getBlock"
        | "getBlockCommitment"
        | "getBlockHeight"
        | "getBlockProduction"
        | "getBlockTime"
        | "getBlocks"
        | "getBlocksWithLimit"
        | "getClusterNodes"
        | "getEpochInfo"
        | "getEpochSchedule"
        | "getFirstAvailableBlock"
        | "getGenesisHash"
        | "getHealth"
        | "getHighestSnapshotSlot"
        | "getIdentity"
        | "getInflationGovernor"
        | "getInflationRate"
        | "getInflationReward"
        | "getLargestAccounts"
        | "getLatestBlockhash"
        | "getLeaderSchedule"
        | "getMaxRetransmitSlot"
        | "getMaxShredInsertSlot"
        | "getMinimumBalanceForRentExemption"
        | "getMultipleAccounts"
        | "getProgramAccounts"
        | "getRecentPerformanceSamples"
        | "getSignatureStatuses"
        | "getSignaturesForAddress"
        | "getSlot"
        | "getSlotLeader"
        | "getSlotLeaders"
        | "getStakeActivation"
        | "getStakeMinimumDelegation"
        | "getSupply"
        | "getTokenAccountBalance"
        | "getTokenAccountsByDelegate"
        | "getTokenAccountsByOwner"
        | "getTokenLargestAccounts"
        | "getTokenSupply"
        | "getTransaction"
        | "getTransactionCount"
        | "getVersion"
        | "getVoteAccounts"
        | "isBlockhashValid"
        | "minimumLedgerSlot"
        // Deprecated names older clients still send.
        | "getConfirmedBlock"
        | "getConfirmedBlocks"
        | "getConfirmedBlocksWithLimit"
        | "getConfirmedSignaturesForAddress2"
        | "getConfirmedTransaction"
        | "getFeeCalculatorForBlockhash"
        | "getFeeRateGovernor"
        | "getFees"
        | "getRecentBlockhash"
        | "getSnapshotSlot"
        // MagicBlock's router and Jito's block engine.
        | "getDelegationStatus"
        | "getRoutes"
        | "getBlockhashForAccounts"
        | "getBundleStatuses"
        | "getInflightBundleStatuses"
        | "getTipAccounts" => READ,
        _ => UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submissions_reads_and_the_rest() {
        assert_eq!(lookup("sendTransaction").kind, Kind::Write);
        assert_eq!(lookup("sendBundle").kind, Kind::Write);
        assert_eq!(lookup("getSlot").kind, Kind::Read);
        assert_eq!(lookup("simulateTransaction").family, Family::Execute);
        assert_eq!(lookup("vendor_relayTransaction").kind, Kind::Unknown);
    }
}
