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

use std::rc::Rc;
use std::time::Instant;

use futures_util::future::join_all;

use super::base_only::ProgramOwned;
use super::net::Dest;
use super::pubkey::Pubkey;
use super::sync::READ;
use super::table::Status;
use super::tx::{decode_payload, lookup_table_addresses, Encoding, Transaction};
use super::SolanaRoute;
use prism_core::call::outcome::{CallOutcome, Caller, ProxyError, TxRef};
use prism_core::call::submit::send_deadline;
use prism_core::judge::classify::{submission_says, SubmissionSays};
use prism_core::live::marks::MarkKey;
use prism_telemetry::metrics::Submitted;
use prism_wire::jsonscan::{elements, nth_element, object_field, plain_str, plain_u64};
use prism_wire::rpc::wire::write_json_str;
use prism_wire::rpc::Call;

/// `getMultipleAccounts` accepts at most this many keys (as validators do).
pub const MAX_MULTIPLE_ACCOUNTS: usize = 100;

/// Methods that would mix base-layer and ER state in one answer.
const UNSUPPORTED: &[&str] = &[
    "getProgramAccounts",
    "getTokenAccountsByOwner",
    "getTokenAccountsByDelegate",
    "getLargestAccounts",
    "getTokenLargestAccounts",
];

use super::methods::{EXECUTE as SIMULATE, SUBMIT};

/// Answers one call on a solana-magic network.
pub async fn handle(sol: &Rc<SolanaRoute>, call: &Call<'_>, caller: &Caller, deadline: Instant) -> CallOutcome {
    let params = call.params;
    let method = &*call.method;
    match method {
        "getAccountInfo" | "getBalance" | "getTokenAccountBalance" | "getSignaturesForAddress" => {
            by_account(sol, method, params, caller, deadline).await
        }
        "getMultipleAccounts" => multiple_accounts(sol, params, caller, deadline).await,
        "sendTransaction" | "simulateTransaction" => transaction(sol, method, params, caller, deadline).await,
        "getSignatureStatuses" => signature_statuses(sol, params, caller, deadline).await,
        "getTransaction" => transaction_lookup(sol, params, caller, deadline).await,
        "getLatestBlockhash" => {
            let out = sol.call_on(Dest::Base, READ, method, params, caller, deadline).await;
            remember_blockhash(sol, caller, Dest::Base, &out);
            out
        }
        "getBlockhashForAccounts" => blockhash_for_accounts(sol, params, caller, deadline).await,
        "isBlockhashValid" => {
            let dest = param_str(params, 0)
                .and_then(|h| sol.net.blockhashes.get(h))
                .map_or(Dest::Base, Dest::from_code);
            sol.call_on(dest, READ, method, params, caller, deadline).await
        }
        "getBlockHeight" | "getEpochInfo" => {
            let dest = caller_chain(sol, caller);
            sol.call_on(dest, READ, method, params, caller, deadline).await
        }
        "getDelegationStatus" => delegation_status(sol, params, deadline).await,
        // Fees follow the accounts they are asked about: an ER's accounts are written on the ER.
        "getRecentPrioritizationFees" | "getPriorityFeeEstimate" => fees(sol, method, params, caller, deadline).await,
        "getRoutes" => routes(sol),
        // MagicBlock's SDK takes the router's identity as the validator to delegate to
        // (`getClosestValidator`): the ER, not the base layer's identity.
        "getIdentity" if !sol.net.ers.is_empty() => closest_er(sol),
        m if UNSUPPORTED.contains(&m) => rejected(
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
            let info = sol.route.declared.apply(method, super::methods::lookup(method));
            if info.kind == prism_wire::rpc::methods::Kind::Unknown {
                sol.route.recorder.metrics().unknown_method();
            }
            sol.call_on(Dest::Base, info, method, params, caller, deadline).await
        }
    }
}

fn rejected(code: i32, message: String) -> CallOutcome {
    CallOutcome::Failed(ProxyError::Rejected { code, message })
}

fn invalid(message: String) -> CallOutcome {
    rejected(-32602, message)
}

/// The code of MagicBlock's magic-router for its own errors (`src/error.rs`: every `RouterError`).
pub const ROUTER_ERROR: i32 = -32604;

/// magic-router's `UnknownErNode`: the account's record names an ER this router does not serve.
pub fn unknown_er(authority: &Pubkey) -> ProxyError {
    ProxyError::Rejected {
        code: ROUTER_ERROR,
        message: format!("account has been delegated to unknown ER node: {authority}"),
    }
}

fn local(result: Vec<u8>) -> CallOutcome {
    CallOutcome::result(result)
}

fn param_str(params: Option<&[u8]>, n: usize) -> Option<&str> {
    nth_element(params?, n).and_then(plain_str)
}

/// `params[0]` as an array of account keys: the raw elements and the keys; `None` unless every element is
/// a base58 key.
fn keys_param(params: Option<&[u8]>) -> Option<(Vec<&[u8]>, Vec<Pubkey>)> {
    keys_in(nth_element(params?, 0)?)
}

/// A JSON array of account keys: the raw elements and the keys; `None` unless every element is one.
fn keys_in(array: &[u8]) -> Option<(Vec<&[u8]>, Vec<Pubkey>)> {
    let items = elements(array)?;
    let keys = items
        .iter()
        .map(|i| plain_str(i).and_then(Pubkey::from_base58))
        .collect::<Option<Vec<_>>>()?;
    Some((items, keys))
}

fn result_of(out: &CallOutcome) -> Option<&[u8]> {
    match out {
        CallOutcome::Answer {
            body,
            value,
            is_error: false,
            ..
        } => Some(&body[value.clone()]),
        _ => None,
    }
}

fn error_message(out: &CallOutcome) -> Option<&[u8]> {
    match out {
        CallOutcome::Answer {
            body,
            value,
            is_error: true,
            ..
        } => object_field(&body[value.clone()], "message"),
        _ => None,
    }
}

/// Where an account's calls go.
async fn dest_of(sol: &Rc<SolanaRoute>, account: Pubkey, deadline: Instant) -> Result<Dest, ProxyError> {
    match sol.status(account, deadline).await? {
        Status::Delegated { er: Some(k), .. } => Ok(Dest::Er(k)),
        Status::Delegated { er: None, record } => Err(unknown_er(&record.authority)),
        Status::Undelegated | Status::Unknown => Ok(Dest::Base),
    }
}

/// Whether a JSON account object is owned by the delegation program: the base layer's copy of a delegated
/// account, i.e. the answer came from the wrong side.
fn owned_by_program(sol: &SolanaRoute, account: &[u8]) -> bool {
    object_field(account, "owner").and_then(plain_str) == Some(sol.net.program.to_base58().as_str())
}

/// After the base layer's answer suggested `account` is delegated after all: its ER, or `None` when the base
/// layer's answer stands. `owned_at`: the slot of an answer showing the account owned by the delegation
/// program, which is either the base layer's copy of a delegated account or one of the program's own
/// accounts such as a delegation record (`base_only`); without it (a token balance that says "not a Token
/// account") only a record read now tells.
async fn repaired_dest(
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
    let metrics = sol.route.recorder.metrics();
    metrics.solana(prism_telemetry::metrics::SolanaMetric::Rerouted, 1);
    Some(Dest::Er(k))
}

/// The `context.slot` of a successful answer.
fn answer_slot(out: &CallOutcome) -> Option<u64> {
    result_of(out)
        .and_then(|r| object_field(r, "context"))
        .and_then(|c| object_field(c, "slot"))
        .and_then(plain_u64)
}

async fn by_account(
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
                "getAccountInfo" => result_of(&out)
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
                && result_of(&out).and_then(|r| object_field(r, "value")) == Some(&b"null"[..]);
            if missing {
                let base = sol.call_on(Dest::Base, READ, method, params, caller, deadline).await;
                if result_of(&base).is_some() {
                    return base;
                }
            }
            out
        }
    }
}

/// Groups indexes by destination, base layer first, ERs in order of first appearance.
fn group(dests: &[Dest]) -> Vec<(Dest, Vec<usize>)> {
    let mut groups: Vec<(Dest, Vec<usize>)> = Vec::new();
    if dests.contains(&Dest::Base) {
        groups.push((Dest::Base, Vec::new()));
    }
    for (i, d) in dests.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| g == d) {
            Some((_, v)) => v.push(i),
            None => groups.push((*d, vec![i])),
        }
    }
    groups
}

/// `[[item, ...], config]` for one part of a split request.
fn part_params(items: &[&[u8]], indexes: &[usize], config: Option<&[u8]>) -> Vec<u8> {
    let mut p = Vec::with_capacity(16 + indexes.len() * 48);
    p.extend_from_slice(b"[[");
    for (n, &i) in indexes.iter().enumerate() {
        if n > 0 {
            p.push(b',');
        }
        p.extend_from_slice(items[i]);
    }
    p.push(b']');
    if let Some(c) = config {
        p.push(b',');
        p.extend_from_slice(c);
    }
    p.push(b']');
    p
}

/// A `{"context":..,"value":[..]}` answer's parts.
fn context_and_values(result: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    Some((
        object_field(result, "context")?,
        elements(object_field(result, "value")?)?,
    ))
}

fn bad_part(sol: &SolanaRoute, dest: Dest) -> CallOutcome {
    CallOutcome::Failed(ProxyError::Rejected {
        code: -32603,
        message: format!(
            "Upstream error: {} answered a split request with a malformed or short value list",
            sol.net.dest_name(dest)
        ),
    })
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
        let Some(result) = result_of(out) else {
            return parts
                .into_iter()
                .find(|o| result_of(o).is_none())
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

fn merged<'a>(context: &[u8], values: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(br#"{"context":"#);
    out.extend_from_slice(context);
    out.extend_from_slice(br#","value":["#);
    for (n, v) in values.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(v);
    }
    out.extend_from_slice(b"]}");
    out
}

async fn multiple_accounts(
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
    let wrong: Vec<usize> = match result_of(&out).and_then(context_and_values) {
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

/// The destination of a set of accounts that a transaction writes (or a client will write): the ER their
/// delegated ones live on, the base layer when none is delegated; two different ERs is an error.
async fn dest_of_writes(sol: &Rc<SolanaRoute>, accounts: &[Pubkey], deadline: Instant) -> Result<Dest, CallOutcome> {
    dest_of_accounts(sol, accounts, "transaction", deadline).await
}

/// The side a set of accounts lives on (`what` names them in the error when two ERs hold some).
async fn dest_of_accounts(
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
    let params = format!(r#"["{table}",{{"encoding":"base64","commitment":"confirmed"}}]"#);
    let out = sol
        .call_on(
            Dest::Base,
            READ,
            "getAccountInfo",
            Some(params.as_bytes()),
            &Caller::default(),
            deadline,
        )
        .await;
    let Some(result) = result_of(&out) else {
        return Err(match out {
            CallOutcome::Failed(e) => CallOutcome::Failed(e),
            other => other,
        });
    };
    let addresses = object_field(result, "value")
        .and_then(|v| object_field(v, "data"))
        .and_then(super::table::account_data)
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

async fn transaction(
    sol: &Rc<SolanaRoute>,
    method: &str,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let send = method == "sendTransaction";
    let info = if send { SUBMIT } else { SIMULATE };
    let Some(text) = param_str(params, 0) else {
        return invalid(format!(
            "{method}: params[0] must be the encoded transaction (a string)"
        ));
    };
    let encoding = match params
        .and_then(|p| nth_element(p, 1))
        .and_then(|c| object_field(c, "encoding"))
        .map(plain_str)
    {
        None | Some(Some("base58")) => Encoding::Base58,
        Some(Some("base64")) => Encoding::Base64,
        Some(other) => {
            return invalid(format!(
                "{method}: unsupported encoding {:?}; use base58 or base64",
                other.unwrap_or("?")
            ))
        }
    };
    let parsed = decode_payload(text.as_bytes(), encoding).and_then(|w| Transaction::parse(&w));
    let tx = match parsed {
        Ok(tx) => tx,
        Err(e) => return invalid(format!("{method}: {e}")),
    };
    // Resolve address lookup tables on the base layer.
    let mut tables: Vec<Rc<[Pubkey]>> = Vec::with_capacity(tx.lookups.len());
    for l in &tx.lookups {
        let need = l
            .writable
            .iter()
            .chain(&l.readonly)
            .map(|&i| i as usize + 1)
            .max()
            .unwrap_or(0);
        match lookup_table(sol, l.table, need, deadline).await {
            Ok(t) => tables.push(t),
            Err(out) => return out,
        }
    }
    let table_refs: Vec<&[Pubkey]> = tables.iter().map(|t| &t[..]).collect();
    let Some(accounts) = tx.accounts(&table_refs) else {
        return invalid(format!("{method}: a lookup index is beyond its address lookup table"));
    };
    let writable: Vec<Pubkey> = accounts.iter().filter(|(_, w)| *w).map(|(k, _)| *k).collect();
    let dest = match dest_of_writes(sol, &writable, deadline).await {
        Ok(d) => d,
        Err(out) => return out,
    };
    // Accounts this transaction delegates: watched (subscription confirmed) before the answer goes back,
    // so a read right after it cannot miss the delegation.
    let delegating: Vec<Pubkey> = tx
        .instructions
        .iter()
        .filter(|ix| accounts.get(ix.program as usize).map(|a| a.0) == Some(sol.net.program))
        .flat_map(|ix| ix.accounts.iter().filter_map(|&a| accounts.get(a as usize)))
        .filter(|(k, w)| *w && *k != sol.net.program)
        .map(|(k, _)| *k)
        .collect();
    let watch = join_all(delegating.iter().map(|k| sol.watch_confirmed(*k, deadline)));
    let signature = tx.signature();
    // A submission keeps time to look its signature up if the answer is lost.
    let send_by = match (send, &signature) {
        (true, Some(_)) => send_deadline(deadline, sol.route.submit.lookup),
        _ => deadline,
    };
    let forward = sol.call_on(dest, info, method, params, caller, send_by);
    let (mut out, _) = futures_lite::future::zip(forward, watch).await;
    if !send {
        return out;
    }
    let Some(sig) = signature else { return out };
    let remember = |out: &CallOutcome| {
        if result_of(out).is_some() || matches!(out, CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { .. })) {
            sol.net.signatures.put(sig.as_str(), dest.code());
        }
    };
    match &mut out {
        // Lost after sending: the side it went to is asked for its status (reads only, never a resend).
        CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { tx, .. }) => {
            if signature_landed(sol, dest, &sig, caller, deadline).await {
                sol.route.recorder.metrics().submitted(Submitted::LostFound);
                out = signature_answer(&sig);
            } else {
                sol.route.recorder.metrics().submitted(Submitted::LostUnresolved);
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
            sol.route.recorder.metrics().submitted(Submitted::AlreadyKnown);
            out = signature_answer(&sig);
        }
        _ => {}
    }
    remember(&out);
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
        let status = result_of(&out)
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

/// Every side, base layer first.
fn all_dests(sol: &SolanaRoute) -> Vec<Dest> {
    std::iter::once(Dest::Base)
        .chain((0..sol.net.ers.len()).map(Dest::Er))
        .collect()
}

async fn signature_statuses(
    sol: &Rc<SolanaRoute>,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    const METHOD: &str = "getSignatureStatuses";
    let Some(items) = params.and_then(|p| nth_element(p, 0)).and_then(elements) else {
        return sol.call_on(Dest::Base, READ, METHOD, params, caller, deadline).await;
    };
    let known: Vec<Option<Dest>> = items
        .iter()
        .map(|i| {
            plain_str(i)
                .and_then(|s| sol.net.signatures.get(s))
                .map(Dest::from_code)
        })
        .collect();
    if let Some(Some(first)) = known.first() {
        if known.iter().all(|k| *k == Some(*first)) {
            return sol.call_on(*first, READ, METHOD, params, caller, deadline).await;
        }
    }
    if items.is_empty() {
        return sol.call_on(Dest::Base, READ, METHOD, params, caller, deadline).await;
    }
    let config = params.and_then(|p| nth_element(p, 1));
    // Each side is asked for the signatures it sent and every unknown one.
    let sides: Vec<(Dest, Vec<usize>)> = all_dests(sol)
        .into_iter()
        .map(|d| {
            (
                d,
                (0..items.len())
                    .filter(|&i| known[i].is_none() || known[i] == Some(d))
                    .collect(),
            )
        })
        .filter(|(_, idx): &(Dest, Vec<usize>)| !idx.is_empty())
        .collect();
    let parts = join_all(sides.iter().map(|(dest, idx)| {
        let p = part_params(&items, idx, config);
        async move { sol.call_on(*dest, READ, METHOD, Some(&p), caller, deadline).await }
    }))
    .await;
    let mut values: Vec<Option<Vec<u8>>> = vec![None; items.len()];
    let mut context: Option<Vec<u8>> = None;
    let mut failed: Option<usize> = None;
    for (n, ((dest, idx), out)) in sides.iter().zip(&parts).enumerate() {
        let Some((ctx, vals)) = result_of(out).and_then(context_and_values) else {
            failed.get_or_insert(n);
            continue;
        };
        if vals.len() != idx.len() {
            return bad_part(sol, *dest);
        }
        if context.is_none() {
            context = Some(ctx.to_vec());
        }
        for (v, &i) in vals.iter().zip(idx) {
            if values[i].is_none() && *v != b"null" {
                values[i] = Some(v.to_vec());
            }
        }
    }
    // An unanswered index whose side failed must not read as "unknown signature": return the failure.
    if let Some(n) = failed {
        let (_, idx) = &sides[n];
        if idx.iter().any(|&i| values[i].is_none()) {
            return parts.into_iter().nth(n).expect("index in range");
        }
    }
    local(merged(
        context.as_deref().unwrap_or(b"{}"),
        values.iter().map(|v| v.as_deref().unwrap_or(b"null")),
    ))
}

async fn transaction_lookup(
    sol: &Rc<SolanaRoute>,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    const METHOD: &str = "getTransaction";
    let known = param_str(params, 0).and_then(|s| sol.net.signatures.get(s));
    if let Some(code) = known {
        return sol
            .call_on(Dest::from_code(code), READ, METHOD, params, caller, deadline)
            .await;
    }
    let answers = join_all(
        all_dests(sol)
            .into_iter()
            .map(|d| async move { sol.call_on(d, READ, METHOD, params, caller, deadline).await }),
    )
    .await;
    if let Some(i) = answers.iter().position(|o| result_of(o).is_some_and(|r| r != b"null")) {
        return answers.into_iter().nth(i).expect("index in range");
    }
    // Nothing found: a side that failed must not turn into "not found".
    match answers.iter().position(|o| result_of(o).is_none()) {
        Some(i) => answers.into_iter().nth(i).expect("index in range"),
        None => answers.into_iter().next().expect("the base layer is always asked"),
    }
}

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
    let Some(result) = result_of(out) else { return };
    let hash = object_field(result, "value")
        .and_then(|v| object_field(v, "blockhash"))
        .and_then(plain_str);
    if let Some(h) = hash {
        sol.net.blockhashes.put(h, dest.code());
        sol.net.callers.put(&caller_hash(caller), dest.code());
    }
}

/// MagicBlock's `getBlockhashForAccounts([accounts])`: the latest blockhash (`confirmed`, as magic-router
/// asks for it) of the side those accounts' writes go to (`[[]]`: the base layer), answered bare as
/// `{"blockhash":..,"lastValidBlockHeight":..}` (the node's `value`, byte for byte) like magic-router does;
/// both SDKs read `result.blockhash`. The blockhash is remembered with its chain.
async fn blockhash_for_accounts(
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
    match result_of(&out).and_then(|r| object_field(r, "value")) {
        Some(value) if value.first() == Some(&b'{') => local(value.to_vec()),
        // An error, or an answer without a value object: as the node sent it.
        _ => out,
    }
}

async fn delegation_status(sol: &Rc<SolanaRoute>, params: Option<&[u8]>, deadline: Instant) -> CallOutcome {
    let Some(account) = param_str(params, 0).and_then(Pubkey::from_base58) else {
        return invalid("getDelegationStatus: params[0] must be a base58 account key".into());
    };
    let status = match sol.status(account, deadline).await {
        Ok(s) => s,
        Err(e) => return CallOutcome::Failed(e),
    };
    let mut out = Vec::with_capacity(256);
    match status {
        Status::Delegated { er: None, record } => return CallOutcome::Failed(unknown_er(&record.authority)),
        Status::Delegated { er: Some(k), record } => {
            out.extend_from_slice(br#"{"isDelegated":true,"#);
            // magic-router always knows the ER's address; Prism omits `fqdn` when no public_url is set.
            if let Some(url) = sol.net.ers.get(k).and_then(|e| e.public_url.as_deref()) {
                out.extend_from_slice(br#""fqdn":"#);
                write_json_str(&mut out, url);
                out.push(b',');
            }
            out.extend_from_slice(br#""delegationRecord":{"authority":"#);
            write_json_str(&mut out, &record.authority.to_base58());
            out.extend_from_slice(br#","owner":"#);
            write_json_str(&mut out, &record.owner.to_base58());
            out.extend_from_slice(br#","delegationSlot":"#);
            out.extend_from_slice(itoa::Buffer::new().format(record.delegation_slot).as_bytes());
            out.extend_from_slice(br#","lamports":"#);
            out.extend_from_slice(itoa::Buffer::new().format(record.lamports).as_bytes());
            out.extend_from_slice(b"}}");
        }
        // As magic-router serialises it: absent fields, not nulls.
        _ => out.extend_from_slice(br#"{"isDelegated":false}"#),
    }
    local(out)
}

/// `getRecentPrioritizationFees([accounts])` and Helius' `getPriorityFeeEstimate([{accountKeys, ..}])` go to
/// the side the named accounts live on (the base layer when none is named or none is delegated).
async fn fees(
    sol: &Rc<SolanaRoute>,
    method: &str,
    params: Option<&[u8]>,
    caller: &Caller,
    deadline: Instant,
) -> CallOutcome {
    let first = params.and_then(|p| nth_element(p, 0));
    let named = match method {
        "getPriorityFeeEstimate" => first.and_then(|o| prism_wire::jsonscan::object_field(o, "accountKeys")),
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
    let info = sol.route.declared.apply(method, super::methods::lookup(method));
    sol.call_on(dest, info, method, params, caller, deadline).await
}

/// An ER's `fqdn`: its `public_url`, or `null`.
fn write_fqdn(out: &mut Vec<u8>, er: Option<&super::net::Er>) {
    match er.and_then(|e| e.public_url.as_deref()) {
        Some(url) => write_json_str(out, url),
        None => out.extend_from_slice(b"null"),
    }
}

/// `{"identity":..,"fqdn":..}` of one ER.
fn write_er(out: &mut Vec<u8>, er: &super::net::Er) {
    out.extend_from_slice(br#"{"identity":"#);
    write_json_str(out, &er.identity.to_base58());
    out.extend_from_slice(br#","fqdn":"#);
    write_fqdn(out, Some(er));
    out.push(b'}');
}

/// The ERs a client can be sent to now (those with a provider Prism would route to), with the fields
/// magic-router's `getRoutes` answers (`RouteInfo`: identity, fqdn, baseFee, blockTimeMs, countryCode).
fn routes(sol: &SolanaRoute) -> CallOutcome {
    let mut out = b"[".to_vec();
    for k in (0..sol.net.ers.len()).filter(|&k| sol.er_live(k)) {
        if out.len() > 1 {
            out.push(b',');
        }
        let er = &sol.net.ers[k];
        write_er(&mut out, er);
        out.pop();
        out.extend_from_slice(br#","baseFee":"#);
        out.extend_from_slice(itoa::Buffer::new().format(er.base_fee).as_bytes());
        out.extend_from_slice(br#","blockTimeMs":"#);
        out.extend_from_slice(itoa::Buffer::new().format(er.block_time_ms).as_bytes());
        out.extend_from_slice(br#","countryCode":"#);
        write_json_str(&mut out, &er.country_code);
        out.push(b'}');
    }
    out.push(b']');
    local(out)
}

/// The ER a client should delegate to: `default_er` while it is live, else the live ER with the lowest
/// latency, else `default_er` (or the first ER) even if down: its identity is still where delegations go.
fn closest_er(sol: &SolanaRoute) -> CallOutcome {
    let net = &sol.net;
    let live = |k: &usize| sol.er_live(*k);
    let k = net
        .default_er
        .filter(live)
        .or_else(|| (0..net.ers.len()).filter(live).min_by_key(|&k| sol.er_latency_us(k)))
        .or(net.default_er)
        .unwrap_or(0);
    let mut out = Vec::with_capacity(128);
    write_er(&mut out, &net.ers[k]);
    local(out)
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
