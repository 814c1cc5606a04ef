//! Method routing for the magic router: every call goes to the side its accounts live on. Calls about one
//! account follow that account; `getMultipleAccounts` is split by side and merged in the original order;
//! transactions follow their delegated writable accounts; signatures and blockhashes go back to the chain
//! that issued them. Answers are the upstream's bytes; only merged answers are assembled here.
//!
//! Merging rule for `context`: an answer served by one side passes through unchanged. A merged answer
//! carries the base layer's `context` (the slot clock the client's `getSlot` reads), or the first ER's
//! when the base layer took no part.
//!
//! Blockhash expiry rule: `getBlockHeight` and `getEpochInfo` are answered by the chain that issued the
//! caller's latest blockhash (`getLatestBlockhash` → base layer, `getBlockhashForAccounts` → the accounts'
//! side), so a client comparing `lastValidBlockHeight` with the current height compares one chain's
//! numbers. The caller is the API key, or the `x-prism-session` header when sent.

//! The router's files, by concern: `accounts` (reads that follow their accounts, `getMultipleAccounts`'
//! split, fees), `transaction` (transactions and their lost answers), `signatures` (signature lookups),
//! `blockhash` (the expiry rule), `magic` (magic-router's own methods and errors), `side` (delegation
//! lookups); `split`, `reply` and `params` are the pure pieces they share.

use std::rc::Rc;
use std::time::Instant;

use prism_core::call::outcome::{CallOutcome, Caller, ProxyError};
use prism_wire::rpc::Call;

use super::net::Dest;
use super::SolanaRoute;

mod accounts;
mod blockhash;
mod magic;
mod params;
mod reply;
mod side;
mod signatures;
mod split;
mod transaction;

pub use accounts::MAX_MULTIPLE_ACCOUNTS;
pub use blockhash::caller_chain;
pub use magic::{unknown_er, ROUTER_ERROR};

/// Methods that would mix base-layer and ER state in one answer.
const UNSUPPORTED: &[&str] = &[
    "getProgramAccounts",
    "getTokenAccountsByOwner",
    "getTokenAccountsByDelegate",
    "getLargestAccounts",
    "getTokenLargestAccounts",
];

/// Answers one call on a solana-magic network.
pub async fn handle(sol: &Rc<SolanaRoute>, call: &Call<'_>, caller: &Caller, deadline: Instant) -> CallOutcome {
    let params = call.params;
    let method = &*call.method;
    match method {
        "getAccountInfo" | "getBalance" | "getTokenAccountBalance" | "getSignaturesForAddress" => {
            accounts::by_account(sol, method, params, caller, deadline).await
        }
        "getMultipleAccounts" => accounts::multiple_accounts(sol, params, caller, deadline).await,
        "sendTransaction" | "simulateTransaction" => {
            transaction::transaction(sol, method, params, caller, deadline).await
        }
        "getSignatureStatuses" => signatures::signature_statuses(sol, params, caller, deadline).await,
        "getTransaction" => signatures::transaction_lookup(sol, params, caller, deadline).await,
        "getLatestBlockhash" => blockhash::latest_blockhash(sol, params, caller, deadline).await,
        "getBlockhashForAccounts" => blockhash::blockhash_for_accounts(sol, params, caller, deadline).await,
        "isBlockhashValid" => blockhash::blockhash_valid(sol, params, caller, deadline).await,
        "getBlockHeight" | "getEpochInfo" => blockhash::on_callers_chain(sol, method, params, caller, deadline).await,
        "getDelegationStatus" => magic::delegation_status(sol, params, deadline).await,
        // Fees follow the accounts they are asked about: an ER's accounts are written on the ER.
        "getRecentPrioritizationFees" | "getPriorityFeeEstimate" => {
            accounts::fees(sol, method, params, caller, deadline).await
        }
        "getRoutes" => magic::routes(sol),
        // MagicBlock's SDK takes the router's identity as the validator to delegate to
        // (`getClosestValidator`): the ER, not the base layer's identity.
        "getIdentity" if !sol.net.ers.is_empty() => magic::closest_er(sol),
        m if UNSUPPORTED.contains(&m) => reply::rejected(
            -32601,
            format!(
                "{m} is not supported by the magic router: it would mix base-layer and ephemeral-rollup state in one answer"
            ),
        ),
        m if m.ends_with("Subscribe") || m.ends_with("Unsubscribe") => CallOutcome::Failed(ProxyError::Unsupported(
            "Subscriptions need a WebSocket connection",
        )),
        // getSlot, getSupply, getLeaderSchedule, getVersion, getHealth, getIdentity, requestAirdrop,
        // sendBundle, and anything unlisted: the table (with the network's declarations) says how.
        _ => {
            let info = sol.route.policy.declared.apply(method, super::methods::lookup(method));
            if info.kind == prism_wire::rpc::methods::Kind::Unknown {
                sol.route.shard.recorder.metrics().unknown_method();
            }
            sol.call_on(Dest::Base, info, method, params, caller, deadline).await
        }
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
