//! The methods and errors MagicBlock's magic-router defines beyond a validator's (`getDelegationStatus`,
//! `getRoutes`, its `getIdentity`), answered locally in magic-router's shapes so MagicBlock's SDKs work
//! unchanged. (`getBlockhashForAccounts` follows the blockhash rule: `blockhash.rs`.)

use std::rc::Rc;
use std::time::Instant;

use prism_core::call::outcome::{CallOutcome, ProxyError};
use prism_wire::rpc::wire::write_json_str;

use super::params::param_str;
use super::reply::{invalid, local};
use crate::net::Er;
use crate::pubkey::Pubkey;
use crate::table::Status;
use crate::SolanaRoute;

/// The code of MagicBlock's magic-router for its own errors (`src/error.rs`: every `RouterError`).
pub const ROUTER_ERROR: i32 = -32604;

/// magic-router's `UnknownErNode`: the account's record names an ER this router does not serve.
pub fn unknown_er(authority: &Pubkey) -> ProxyError {
    ProxyError::Rejected {
        code: ROUTER_ERROR,
        message: format!("account has been delegated to unknown ER node: {authority}"),
    }
}

/// `getDelegationStatus([account])`: whether the account is delegated, and its record when it is.
pub(super) async fn delegation_status(sol: &Rc<SolanaRoute>, params: Option<&[u8]>, deadline: Instant) -> CallOutcome {
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

/// An ER's `fqdn`: its `public_url`, or `null`.
fn write_fqdn(out: &mut Vec<u8>, er: Option<&Er>) {
    match er.and_then(|e| e.public_url.as_deref()) {
        Some(url) => write_json_str(out, url),
        None => out.extend_from_slice(b"null"),
    }
}

/// `{"identity":..,"fqdn":..}` of one ER.
fn write_er(out: &mut Vec<u8>, er: &Er) {
    out.extend_from_slice(br#"{"identity":"#);
    write_json_str(out, &er.identity.to_base58());
    out.extend_from_slice(br#","fqdn":"#);
    write_fqdn(out, Some(er));
    out.push(b'}');
}

/// The ERs a client can be sent to now (those with a provider Prism would route to), with the fields
/// magic-router's `getRoutes` answers (`RouteInfo`: identity, fqdn, baseFee, blockTimeMs, countryCode).
pub(super) fn routes(sol: &SolanaRoute) -> CallOutcome {
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
pub(super) fn closest_er(sol: &SolanaRoute) -> CallOutcome {
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
