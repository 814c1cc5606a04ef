//! Delegation lookups: which side an account (or the set of accounts a transaction writes) lives on, from
//! this shard's delegation table, and the second look taken when the base layer's answer shows an account
//! that is delegated after all.

use std::rc::Rc;
use std::time::Instant;

use futures_util::future::join_all;
use prism_core::call::outcome::{CallOutcome, ProxyError};
use prism_telemetry::metrics::SolanaMetric;
use prism_wire::jsonscan::{object_field, plain_str};

use super::magic::{unknown_er, ROUTER_ERROR};
use super::reply::rejected;
use crate::base_only::ProgramOwned;
use crate::net::Dest;
use crate::pubkey::Pubkey;
use crate::table::Status;
use crate::SolanaRoute;

/// Where an account's calls go.
pub(super) async fn dest_of(sol: &Rc<SolanaRoute>, account: Pubkey, deadline: Instant) -> Result<Dest, ProxyError> {
    match sol.status(account, deadline).await? {
        Status::Delegated { er: Some(k), .. } => Ok(Dest::Er(k)),
        Status::Delegated { er: None, record } => Err(unknown_er(&record.authority)),
        Status::Undelegated | Status::Unknown => Ok(Dest::Base),
    }
}

/// Whether a JSON account object is owned by the delegation program: the base layer's copy of a delegated
/// account, i.e. the answer came from the wrong side.
pub(super) fn owned_by_program(sol: &SolanaRoute, account: &[u8]) -> bool {
    object_field(account, "owner").and_then(plain_str) == Some(sol.net.program.to_base58().as_str())
}

/// After the base layer's answer suggested `account` is delegated after all: its ER, or `None` when the base
/// layer's answer stands. `owned_at`: the slot of an answer showing the account owned by the delegation
/// program, which is either the base layer's copy of a delegated account or one of the program's own
/// accounts such as a delegation record (`base_only`); without it (a token balance that says "not a Token
/// account") only a record read now tells.
pub(super) async fn repaired_dest(
    sol: &Rc<SolanaRoute>,
    account: Pubkey,
    owned_at: Option<u64>,
    deadline: Instant,
) -> Option<Dest> {
    let status = match owned_at {
        Some(slot) => match sol.program_owned(account, slot, deadline).await {
            ProgramOwned::DelegatedCopy(s) => s,
            ProgramOwned::Own => return None,
        },
        None => {
            let entry = sol.watch(account);
            let _ = sol.refresh(&entry, deadline).await;
            entry.status.get()
        }
    };
    let Status::Delegated { er: Some(k), .. } = status else {
        return None;
    };
    let metrics = sol.route.shard.recorder.metrics();
    metrics.solana(SolanaMetric::Rerouted, 1);
    Some(Dest::Er(k))
}

/// The destination of a set of accounts that a transaction writes (or a client will write): the ER their
/// delegated ones live on, the base layer when none is delegated; two different ERs is an error.
pub(super) async fn dest_of_writes(
    sol: &Rc<SolanaRoute>,
    accounts: &[Pubkey],
    deadline: Instant,
) -> Result<Dest, CallOutcome> {
    dest_of_accounts(sol, accounts, "transaction", deadline).await
}

/// The side a set of accounts lives on (`what` names them in the error when two ERs hold some).
pub(super) async fn dest_of_accounts(
    sol: &Rc<SolanaRoute>,
    accounts: &[Pubkey],
    what: &str,
    deadline: Instant,
) -> Result<Dest, CallOutcome> {
    let dests = join_all(accounts.iter().map(|k| dest_of(sol, *k, deadline))).await;
    let mut target: Option<(Dest, Pubkey)> = None;
    for (d, k) in dests.into_iter().zip(accounts) {
        match d {
            Err(e) => return Err(CallOutcome::Failed(e)),
            Ok(Dest::Base) => {}
            Ok(er) => match target {
                // magic-router's `ConflictingDelegations`, with the two accounts named.
                Some((t, other)) if t != er => {
                    return Err(rejected(
                        ROUTER_ERROR,
                        format!(
                        "{what} contains accounts that were delegated to different ER nodes: {other} ({}) and {k} ({})",
                        sol.net.dest_name(t),
                        sol.net.dest_name(er)
                    ),
                    ))
                }
                _ => target = Some((er, *k)),
            },
        }
    }
    Ok(target.map_or(Dest::Base, |(d, _)| d))
}
