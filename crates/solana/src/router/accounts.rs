//! Reads about accounts follow the accounts: one account's calls go to its side (and to the other side when
//! the answer shows it came from the wrong one), `getMultipleAccounts` is split by side and merged in the
//! client's order, and fee estimates go to the side of the accounts they name.

use std::rc::Rc;
use std::time::Instant;

use futures_util::future::join_all;
use prism_core::call::outcome::{CallOutcome, Caller};
use prism_wire::jsonscan::{nth_element, object_field};

use super::params::{keys_in, keys_param, param_str};
use super::reply::{answer_slot, error_message, invalid, local};
use super::side::{dest_of, dest_of_accounts, owned_by_program, repaired_dest};
use super::split::{bad_part, context_and_values, group, merged, part_params};
use crate::net::Dest;
use crate::pubkey::Pubkey;
use crate::sync::READ;
use crate::SolanaRoute;

/// `getMultipleAccounts` accepts at most this many keys (as validators do).
pub const MAX_MULTIPLE_ACCOUNTS: usize = 100;

/// `getAccountInfo`, `getBalance`, `getTokenAccountBalance`, `getSignaturesForAddress`: the account's side.
pub(super) async fn by_account(
    sol: &Rc<SolanaRoute>,
    method: &str,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    // Not a key: the base layer answers with the node's own error.
    let Some(account) = param_str(params, 0).and_then(Pubkey::from_base58) else {
        return sol.call_on(Dest::Base, READ, method, params, caller, deadline).await;
    };
    let dest = match dest_of(sol, account, deadline).await {
        Ok(d) => d,
        Err(e) => return CallOutcome::Failed(e),
    };
    let out = sol.call_on(dest, READ, method, params, caller, deadline).await;
    match dest {
        Dest::Base => {
            let wrong_side = match method {
                "getAccountInfo" => CallOutcome::result_value(&out)
                    .and_then(|r| object_field(r, "value"))
                    .is_some_and(|v| owned_by_program(sol, v))
                    .then(|| Some(answer_slot(&out).unwrap_or(0))),
                // A delegated token account looks like "not a Token account" on the base layer.
                "getTokenAccountBalance" => error_message(&out)
                    .is_some_and(|m| memchr::memmem::find(m, b"not a Token account").is_some())
                    .then_some(None),
                _ => None,
            };
            if let Some(owned_at) = wrong_side {
                if let Some(er) = repaired_dest(sol, account, owned_at, deadline).await {
                    tracing::debug!(network = %sol.net.name, %account, "answer came from the wrong side; asking the ER");
                    return sol.call_on(er, READ, method, params, caller, deadline).await;
                }
            }
            out
        }
        Dest::Er(_) => {
            // Not on the ER (undelegated meanwhile): the base layer has it.
            let missing = method == "getAccountInfo"
                && CallOutcome::result_value(&out).and_then(|r| object_field(r, "value")) == Some(&b"null"[..]);
            if missing {
                let base = sol.call_on(Dest::Base, READ, method, params, caller, deadline).await;
                if CallOutcome::result_value(&base).is_some() {
                    return base;
                }
            }
            out
        }
    }
}

/// Sends each group its part of a `getMultipleAccounts` and merges the values back in request order. Any
/// part's error is the answer.
async fn split_and_merge(
    sol: &Rc<SolanaRoute>,
    items: &[&[u8]],
    config: Option<&[u8]>,
    groups: &[(Dest, Vec<usize>)],
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let parts = join_all(groups.iter().map(|(dest, idx)| {
        let p = part_params(items, idx, config);
        async move {
            sol.call_on(*dest, READ, "getMultipleAccounts", Some(&p), caller, deadline)
                .await
        }
    }))
    .await;
    let mut values: Vec<Option<Vec<u8>>> = vec![None; items.len()];
    let mut context: Option<Vec<u8>> = None;
    for ((dest, idx), out) in groups.iter().zip(&parts) {
        let Some(result) = CallOutcome::result_value(out) else {
            return parts
                .into_iter()
                .find(|o| CallOutcome::result_value(o).is_none())
                .expect("an unsuccessful part");
        };
        let Some((ctx, vals)) = context_and_values(result) else {
            return bad_part(sol, *dest);
        };
        if vals.len() != idx.len() {
            return bad_part(sol, *dest);
        }
        if context.is_none() {
            context = Some(ctx.to_vec());
        }
        for (v, &i) in vals.iter().zip(idx) {
            values[i] = Some(v.to_vec());
        }
    }
    local(merged(
        context.as_deref().unwrap_or(b"{}"),
        values.iter().map(|v| v.as_deref().unwrap_or(b"null")),
    ))
}

/// `getMultipleAccounts`: one side's keys go there whole; keys of several sides are split and merged.
pub(super) async fn multiple_accounts(
    sol: &Rc<SolanaRoute>,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    const METHOD: &str = "getMultipleAccounts";
    let Some((items, keys)) = keys_param(params) else {
        return sol.call_on(Dest::Base, READ, METHOD, params, caller, deadline).await;
    };
    if keys.len() > MAX_MULTIPLE_ACCOUNTS {
        return invalid(format!(
            "Too many inputs provided; max {MAX_MULTIPLE_ACCOUNTS} (getMultipleAccounts got {})",
            keys.len()
        ));
    }
    let config = params.and_then(|p| nth_element(p, 1));
    let dests = join_all(keys.iter().map(|k| dest_of(sol, *k, deadline))).await;
    let mut dests: Vec<Dest> = match dests.into_iter().collect() {
        Ok(d) => d,
        Err(e) => return CallOutcome::Failed(e),
    };
    let groups = group(&dests);
    // No keys (no group) goes to the base layer too: a merge of nothing would have no real context.
    let out = if groups.len() <= 1 {
        let dest = groups.first().map_or(Dest::Base, |g| g.0);
        sol.call_on(dest, READ, METHOD, params, caller, deadline).await
    } else {
        split_and_merge(sol, &items, config, &groups, caller, deadline).await
    };
    // Base-layer copies owned by the delegation program were served from the wrong side: reroute those.
    let wrong: Vec<usize> = match CallOutcome::result_value(&out).and_then(context_and_values) {
        Some((_, values)) if values.len() == keys.len() => (0..keys.len())
            .filter(|&i| dests[i] == Dest::Base && owned_by_program(sol, values[i]))
            .collect(),
        _ => Vec::new(),
    };
    if wrong.is_empty() {
        return out;
    }
    let owned_at = answer_slot(&out).unwrap_or(0);
    let mut moved = false;
    for i in wrong {
        if let Some(er) = repaired_dest(sol, keys[i], Some(owned_at), deadline).await {
            dests[i] = er;
            moved = true;
        }
    }
    if !moved {
        return out;
    }
    let groups = group(&dests);
    if groups.len() == 1 {
        return sol.call_on(groups[0].0, READ, METHOD, params, caller, deadline).await;
    }
    split_and_merge(sol, &items, config, &groups, caller, deadline).await
}

/// `getRecentPrioritizationFees([accounts])` and Helius' `getPriorityFeeEstimate([{accountKeys, ..}])` go to
/// the side the named accounts live on (the base layer when none is named or none is delegated).
pub(super) async fn fees(
    sol: &Rc<SolanaRoute>,
    method: &str,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let first = params.and_then(|p| nth_element(p, 0));
    let named = match method {
        "getPriorityFeeEstimate" => first.and_then(|o| object_field(o, "accountKeys")),
        _ => first,
    };
    let accounts = match named.map(keys_in) {
        None => Vec::new(),
        Some(Some((_, keys))) => keys,
        Some(None) => return invalid(format!("{method}: accounts must be base58 public keys")),
    };
    if accounts.len() > 128 {
        return invalid(format!("{method}: at most 128 accounts"));
    }
    let dest = match dest_of_accounts(sol, &accounts, "the request", deadline).await {
        Ok(d) => d,
        Err(e) => return e,
    };
    let info = sol.route.policy.declared.apply(method, crate::methods::lookup(method));
    sol.call_on(dest, info, method, params, caller, deadline).await
}
