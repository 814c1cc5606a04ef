//! Transactions follow their writable accounts: a `sendTransaction` or `simulateTransaction` is decoded,
//! its address lookup tables resolved on the base layer, and it goes once to the side its delegated
//! writable accounts live on. A sent transaction's signature is remembered with that side; an answer lost
//! after sending is looked up there (reads only, never a resend).

use std::rc::Rc;
use std::time::Instant;

use futures_util::future::join_all;
use prism_core::call::outcome::{CallOutcome, Caller, ProxyError, TxRef};
use prism_core::call::submit::send_deadline;
use prism_core::judge::classify::{submission_says, SubmissionSays};
use prism_telemetry::metrics::Submitted;
use prism_wire::jsonscan::{nth_element, object_field, plain_str};

use super::params::param_str;
use super::reply::{invalid, local};
use super::side::dest_of_writes;
use crate::methods::{EXECUTE as SIMULATE, SUBMIT};
use crate::net::Dest;
use crate::pubkey::Pubkey;
use crate::sync::READ;
use crate::tx::{decode_payload, lookup_table_addresses, Encoding, Transaction};
use crate::SolanaRoute;

/// `sendTransaction` / `simulateTransaction`: to the side of the accounts the transaction writes.
pub(super) async fn transaction(
    sol: &Rc<SolanaRoute>,
    method: &str,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let send = method == "sendTransaction";
    let info = if send { SUBMIT } else { SIMULATE };
    let tx = match decoded(method, params) {
        Ok(tx) => tx,
        Err(out) => return out,
    };
    let accounts = match resolved_accounts(sol, method, &tx, deadline).await {
        Ok(a) => a,
        Err(out) => return out,
    };
    let writable: Vec<Pubkey> = accounts.iter().filter(|(_, w)| *w).map(|(k, _)| *k).collect();
    let dest = match dest_of_writes(sol, &writable, deadline).await {
        Ok(d) => d,
        Err(out) => return out,
    };
    // Accounts this transaction delegates: watched (subscription confirmed) before the answer goes back,
    // so a read right after it cannot miss the delegation.
    let delegating = delegating(sol, &tx, &accounts);
    let watch = join_all(delegating.iter().map(|k| sol.watch_confirmed(*k, deadline)));
    let signature = tx.signature();
    // A submission keeps time to look its signature up if the answer is lost.
    let send_by = match (send, &signature) {
        (true, Some(_)) => send_deadline(deadline, sol.route.policy.submit.lookup),
        _ => deadline,
    };
    let forward = sol.call_on(dest, info, method, params, caller, send_by);
    let (out, _) = futures_lite::future::zip(forward, watch).await;
    if !send {
        return out;
    }
    let Some(sig) = signature else { return out };
    settled(sol, dest, sig, out, caller, deadline).await
}

/// `params[0]` decoded in the encoding `params[1].encoding` names (base58 when none) and parsed.
fn decoded(method: &str, params: Option<&[u8]>) -> Result<Transaction, CallOutcome> {
    let Some(text) = param_str(params, 0) else {
        return Err(invalid(format!(
            "{method}: params[0] must be the encoded transaction (a string)"
        )));
    };
    let encoding = match params
        .and_then(|p| nth_element(p, 1))
        .and_then(|c| object_field(c, "encoding"))
        .map(plain_str)
    {
        None | Some(Some("base58")) => Encoding::Base58,
        Some(Some("base64")) => Encoding::Base64,
        Some(other) => {
            return Err(invalid(format!(
                "{method}: unsupported encoding {:?}; use base58 or base64",
                other.unwrap_or("?")
            )))
        }
    };
    decode_payload(text.as_bytes(), encoding)
        .and_then(|w| Transaction::parse(&w))
        .map_err(|e| invalid(format!("{method}: {e}")))
}

/// Every account the transaction names, with whether it writes it: its static keys and those its address
/// lookup tables (resolved on the base layer) add.
async fn resolved_accounts(
    sol: &Rc<SolanaRoute>,
    method: &str,
    tx: &Transaction,
    deadline: Instant,
) -> Result<Vec<(Pubkey, bool)>, CallOutcome> {
    let mut tables: Vec<Rc<[Pubkey]>> = Vec::with_capacity(tx.lookups.len());
    for l in &tx.lookups {
        let need = l
            .writable
            .iter()
            .chain(&l.readonly)
            .map(|&i| i as usize + 1)
            .max()
            .unwrap_or(0);
        tables.push(lookup_table(sol, l.table, need, deadline).await?);
    }
    let table_refs: Vec<&[Pubkey]> = tables.iter().map(|t| &t[..]).collect();
    tx.accounts(&table_refs)
        .ok_or_else(|| invalid(format!("{method}: a lookup index is beyond its address lookup table")))
}

/// The writable accounts the transaction hands to the delegation program (other than the program itself).
fn delegating(sol: &SolanaRoute, tx: &Transaction, accounts: &[(Pubkey, bool)]) -> Vec<Pubkey> {
    tx.instructions
        .iter()
        .filter(|ix| accounts.get(ix.program as usize).map(|a| a.0) == Some(sol.net.program))
        .flat_map(|ix| ix.accounts.iter().filter_map(|&a| accounts.get(a as usize)))
        .filter(|(k, w)| *w && *k != sol.net.program)
        .map(|(k, _)| *k)
        .collect()
}

/// A `sendTransaction`'s answer from `dest`, settled: a lost answer is looked up on `dest`, "already known"
/// is the client's intent holding, and a signature that reached `dest` is remembered with it.
async fn settled(
    sol: &Rc<SolanaRoute>,
    dest: Dest,
    sig: String,
    mut out: CallOutcome,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    match &mut out {
        // Lost after sending: the side it went to is asked for its status (reads only, never a resend).
        CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { tx, .. }) => {
            if signature_landed(sol, dest, &sig, caller, deadline).await {
                sol.route.shard.recorder.metrics().submitted(Submitted::LostFound);
                out = signature_answer(&sig);
            } else {
                sol.route.shard.recorder.metrics().submitted(Submitted::LostUnresolved);
                *tx = TxRef::Signature(sig.clone());
            }
        }
        // The node already has it: the client's intent holds.
        CallOutcome::Answer {
            body,
            value,
            is_error: true,
            ..
        } if submission_says(&body[value.clone()]) == SubmissionSays::AlreadyKnown => {
            sol.route.shard.recorder.metrics().submitted(Submitted::AlreadyKnown);
            out = signature_answer(&sig);
        }
        _ => {}
    }
    if CallOutcome::result_value(&out).is_some()
        || matches!(out, CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { .. }))
    {
        sol.net.signatures.put(sig.as_str(), dest.code());
    }
    out
}

/// `"<signature>"`: what `sendTransaction` answers.
fn signature_answer(sig: &str) -> CallOutcome {
    local(format!("\"{sig}\"").into_bytes())
}

/// Polls `getSignatureStatuses` on `dest` until `deadline`: whether the side knows the signature.
async fn signature_landed(sol: &Rc<SolanaRoute>, dest: Dest, sig: &str, caller: &Caller, deadline: Instant) -> bool {
    const GAP: std::time::Duration = std::time::Duration::from_millis(100);
    let params = format!("[[\"{sig}\"],{{\"searchTransactionHistory\":false}}]");
    loop {
        let out = sol
            .call_on(
                dest,
                READ,
                "getSignatureStatuses",
                Some(params.as_bytes()),
                caller,
                deadline,
            )
            .await;
        let status = CallOutcome::result_value(&out)
            .and_then(|r| object_field(r, "value"))
            .and_then(|v| nth_element(v, 0));
        if status.is_some_and(|s| s.first() == Some(&b'{')) {
            return true;
        }
        if Instant::now() + GAP >= deadline {
            return false;
        }
        prism_runtime::sleep(GAP).await;
    }
}

/// The addresses of lookup table `table`, from the cache or the base layer. `min_len`: a cached table
/// shorter than this was extended since, so it is read again.
async fn lookup_table(
    sol: &Rc<SolanaRoute>,
    table: Pubkey,
    min_len: usize,
    deadline: Instant,
) -> Result<Rc<[Pubkey]>, CallOutcome> {
    if let Some(t) = sol.lookup_tables.borrow().get(&table) {
        if t.len() >= min_len {
            return Ok(t.clone());
        }
    }
    let out = sol.read_base_account(&table, deadline).await;
    let Some(result) = CallOutcome::result_value(&out) else {
        return Err(match out {
            CallOutcome::Failed(e) => CallOutcome::Failed(e),
            other => other,
        });
    };
    let addresses = object_field(result, "value")
        .and_then(|v| object_field(v, "data"))
        .and_then(crate::table::account_data)
        .and_then(|d| lookup_table_addresses(&d));
    match addresses {
        Some(a) => {
            let a: Rc<[Pubkey]> = a.into();
            sol.lookup_tables.borrow_mut().insert(table, a.clone());
            Ok(a)
        }
        None => Err(invalid(format!(
            "address lookup table {table} not found on the base layer (or not a lookup table)"
        ))),
    }
}
