//! The blockhash expiry rule (the router's module doc): each blockhash is remembered with the chain that
//! issued it, and each caller with the chain of its latest one, so `isBlockhashValid`, `getBlockHeight` and
//! `getEpochInfo` are answered by the chain whose numbers the client compares.

use std::rc::Rc;
use std::time::Instant;

use prism_core::call::outcome::{CallOutcome, Caller};
use prism_core::live::marks::MarkKey;
use prism_wire::jsonscan::{nth_element, object_field, plain_str};

use super::params::{keys_param, param_str};
use super::reply::{invalid, local};
use super::side::dest_of_writes;
use crate::net::Dest;
use crate::sync::READ;
use crate::SolanaRoute;

fn caller_hash(caller: &Caller) -> u64 {
    match caller.mark {
        MarkKey::Key(k) => k as u64,
        MarkKey::Session(h) => h | 1 << 63,
    }
}

/// The chain that issued the caller's latest blockhash (the base layer if none).
pub fn caller_chain(sol: &SolanaRoute, caller: &Caller) -> Dest {
    sol.net
        .callers
        .get(&caller_hash(caller))
        .map_or(Dest::Base, Dest::from_code)
}

fn remember_blockhash(sol: &SolanaRoute, caller: &Caller, dest: Dest, out: &CallOutcome) {
    let Some(result) = CallOutcome::result_value(out) else {
        return;
    };
    let hash = object_field(result, "value")
        .and_then(|v| object_field(v, "blockhash"))
        .and_then(plain_str);
    if let Some(h) = hash {
        sol.net.blockhashes.put(h, dest.code());
        sol.net.callers.put(&caller_hash(caller), dest.code());
    }
}

/// `getLatestBlockhash`: the base layer's, remembered as the base layer's.
pub(super) async fn latest_blockhash(
    sol: &Rc<SolanaRoute>,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let out = sol
        .call_on(Dest::Base, READ, "getLatestBlockhash", params, caller, deadline)
        .await;
    remember_blockhash(sol, caller, Dest::Base, &out);
    out
}

/// `isBlockhashValid`: asked of the chain that issued the blockhash (the base layer for one not seen).
pub(super) async fn blockhash_valid(
    sol: &Rc<SolanaRoute>,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let dest = param_str(params, 0)
        .and_then(|h| sol.net.blockhashes.get(h))
        .map_or(Dest::Base, Dest::from_code);
    sol.call_on(dest, READ, "isBlockhashValid", params, caller, deadline)
        .await
}

/// `getBlockHeight` and `getEpochInfo`: asked of the chain that issued the caller's latest blockhash.
pub(super) async fn on_callers_chain(
    sol: &Rc<SolanaRoute>,
    method: &str,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let dest = caller_chain(sol, caller);
    sol.call_on(dest, READ, method, params, caller, deadline).await
}

/// MagicBlock's `getBlockhashForAccounts([accounts])`: the latest blockhash (`confirmed`, as magic-router
/// asks for it) of the side those accounts' writes go to (`[[]]`: the base layer), answered bare as
/// `{"blockhash":..,"lastValidBlockHeight":..}` (the node's `value`, byte for byte) like magic-router does;
/// both SDKs read `result.blockhash`. The blockhash is remembered with its chain.
pub(super) async fn blockhash_for_accounts(
    sol: &Rc<SolanaRoute>,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let Some((_, keys)) = keys_param(params) else {
        return invalid("getBlockhashForAccounts: params[0] must be an array of base58 account keys".into());
    };
    let dest = match dest_of_writes(sol, &keys, deadline).await {
        Ok(d) => d,
        Err(out) => return out,
    };
    let mut inner = b"[".to_vec();
    match params.and_then(|p| nth_element(p, 1)) {
        Some(config) => inner.extend_from_slice(config),
        None => inner.extend_from_slice(br#"{"commitment":"confirmed"}"#),
    }
    inner.push(b']');
    let out = sol
        .call_on(dest, READ, "getLatestBlockhash", Some(&inner), caller, deadline)
        .await;
    remember_blockhash(sol, caller, dest, &out);
    match CallOutcome::result_value(&out).and_then(|r| object_field(r, "value")) {
        Some(value) if value.first() == Some(&b'{') => local(value.to_vec()),
        // An error, or an answer without a value object: as the node sent it.
        _ => out,
    }
}
