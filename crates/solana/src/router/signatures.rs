//! Signatures go back to the chain that sent them: `getSignatureStatuses` and `getTransaction` are asked of
//! the side the signature was sent to when this node remembers it, and of every side (merged per index)
//! when it does not; a side that failed never turns into "unknown signature".

use std::rc::Rc;
use std::time::Instant;

use futures_util::future::join_all;
use prism_core::call::outcome::{CallOutcome, Caller};
use prism_wire::jsonscan::{elements, nth_element, plain_str};

use super::params::param_str;
use super::reply::local;
use super::split::{all_dests, bad_part, context_and_values, merged, part_params};
use crate::net::Dest;
use crate::sync::READ;
use crate::SolanaRoute;

pub(super) async fn signature_statuses(
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
        let Some((ctx, vals)) = CallOutcome::result_value(out).and_then(context_and_values) else {
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

pub(super) async fn transaction_lookup(
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
    if let Some(i) = answers
        .iter()
        .position(|o| CallOutcome::result_value(o).is_some_and(|r| r != b"null"))
    {
        return answers.into_iter().nth(i).expect("index in range");
    }
    // Nothing found: a side that failed must not turn into "not found".
    match answers.iter().position(|o| CallOutcome::result_value(o).is_none()) {
        Some(i) => answers.into_iter().nth(i).expect("index in range"),
        None => answers.into_iter().next().expect("the base layer is always asked"),
    }
}
