//! Solana's own error rows, read before the shared table on solana-magic networks.
//!
//! Agave numbers its server errors `-32001..-32019` (`rpc-client-api`'s `custom_error.rs`), and several
//! collide with what the same codes mean on EVM nodes: `-32005` is "node is behind by N slots" (a lagging
//! provider: asked no more for this call, not blamed) or "node is unhealthy" (its failure) where EIP-1474
//! says "limit exceeded"; `-32016` is "minimum context slot has not been reached"
//! (this provider is behind the caller: another may not be) where proxyd says "over rate limit"; `-32007`
//! and `-32009` are skipped or missing slots, not QuickNode's throttles; `-32004` is a block not available
//! here, not "method not supported". MagicBlock's ER validator reuses `-32002`/`-32003`/`-32009`/`-32015`
//! with Agave's meaning.
//!
//! Order, first match wins:
//! 1. the caller's transaction errors whose text is the program's or the runtime's (a preflight failure's
//!    logs may say anything, "rate limit" included), by code;
//! 2. providers' throttles and quotas, by phrase (QuickNode answers `-32007 "15/second request limit
//!    reached"`: the phrase must beat Agave's `-32007`);
//! 3. Agave's codes;
//! 4. then the shared table (JSON-RPC's standard codes, unsupported methods, provider failures...).
//!
//! The corpus in `tests/fixtures/errors/solana.jsonl` holds the bodies each row must class.

use super::{c, cp, p, Class, Rule};
use Class::{
    DataUnavailable as Data, ProviderFailure as Fail, QuotaExhausted as Quota, Throttled as Throttle,
    TooLarge as Large, Unsupported as Unsup, UserError as User,
};

pub static SOLANA_RULES: &[Rule] = &[
    // 1. The caller's transaction.
    c(-32002, User), // sendTransaction preflight: "Transaction simulation failed: ..." with the logs as data
    c(-32003, User), // signature verification failure (ER: "transaction verification error: ...")
    c(-32006, User), // precompile verification failure
    c(-32013, User), // signature length mismatch
    c(-32015, User), // transaction version not supported: needs maxSupportedTransactionVersion
    // 2. Throttles and quotas (before the codes some providers reuse for them).
    p(&["request limit reached"], Throttle), // QuickNode -32007 "15/second request limit reached - ..."
    p(&["/second"], Throttle),
    p(&["per second"], Throttle),
    p(&["rate limit"], Throttle), // Helius -32429 "rate limited", Triton "rate limit exceeded"
    p(&["too many requests"], Throttle), // api.mainnet-beta 429 "Too many requests for a specific RPC call, ..."
    p(&["max usage reached"], Quota), // Helius -32429 once the plan's credits are spent
    p(&["credits"], Quota),
    p(&["monthly"], Quota),
    p(&["upgrade your plan"], Quota),
    // 3. Agave's server errors.
    c(-32001, Data), // "Block N cleaned up, does not exist on node. First available block: M"
    c(-32004, Data), // "Block not available for slot N"
    // "Node is behind by N slots": lagging, like data a node does not have yet; another provider may be
    // current, and the slot drift rule (`core::live::slots`) decides whether it is left out.
    cp(-32005, &["behind by"], Data),
    c(-32005, Fail),                            // "Node is unhealthy"
    c(-32007, Data),  // "Slot N was skipped, or missing due to ledger jump to recent snapshot"
    c(-32008, Data),  // "No snapshot"
    c(-32009, Data),  // "Slot N was skipped, or missing in long-term storage" (ER: block not found)
    c(-32010, Unsup), // "K excluded from account secondary indexes; this RPC method unavailable for key"
    c(-32011, Data),  // "Transaction history is not available from this node"
    cp(-32012, &["exceeded the limit"], Large), // scan aborted: accumulated results over the node's limit
    c(-32012, Fail),  // other scan errors
    c(-32014, Data),  // "Block status not yet available for slot N"
    c(-32016, Data),  // "Minimum context slot has not been reached": this provider is behind the caller
    c(-32017, User),  // "Epoch rewards period still active at slot N": the chain's, the same everywhere
    c(-32018, Data),  // rewards: "slot N is not the epoch boundary ... gap in the queried node's local ledger"
    c(-32019, Fail),  // "Failed to query long-term storage; please try again"
    c(-32429, Throttle), // Helius' throttle code
];
