//! Splitting one request by side and merging the parts' answers back: a `getMultipleAccounts` or
//! `getSignatureStatuses` whose items live on several sides is sent to each side with its own items, and
//! the values come back in the client's order under one `context` (the router's module doc has the rule).

use prism_core::call::outcome::{CallOutcome, ProxyError};
use prism_wire::jsonscan::{elements, object_field};

use crate::net::Dest;
use crate::SolanaRoute;

/// Every side, base layer first.
pub(super) fn all_dests(sol: &SolanaRoute) -> Vec<Dest> {
    std::iter::once(Dest::Base)
        .chain((0..sol.net.ers.len()).map(Dest::Er))
        .collect()
}

/// Groups indexes by destination, base layer first, ERs in order of first appearance.
pub(super) fn group(dests: &[Dest]) -> Vec<(Dest, Vec<usize>)> {
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
pub(super) fn part_params(items: &[&[u8]], indexes: &[usize], config: Option<&[u8]>) -> Vec<u8> {
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
pub(super) fn context_and_values(result: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    Some((
        object_field(result, "context")?,
        elements(object_field(result, "value")?)?,
    ))
}

/// A side answered its part with something the merge cannot use.
pub(super) fn bad_part(sol: &SolanaRoute, dest: Dest) -> CallOutcome {
    CallOutcome::Failed(ProxyError::Rejected {
        code: -32603,
        message: format!(
            "Upstream error: {} answered a split request with a malformed or short value list",
            sol.net.dest_name(dest)
        ),
    })
}

/// `{"context":<context>,"value":[<values>]}`.
pub(super) fn merged<'a>(context: &[u8], values: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
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
