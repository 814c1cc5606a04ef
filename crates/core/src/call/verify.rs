//! Verified reads, opt-in per key (`[[keys]] verify = { methods = [...], quorum = 2 }`): the read goes to
//! `quorum` healthy providers at one block, and the client gets the answer only when that many answered the
//! same bytes after the id (a result, or the same error), compared in canonical JSON
//! (`core::reuse::canon::canonical_answer`: members sorted, no whitespace, hex lower-cased), since nodes of
//! different makes write one block with their members in different orders. The client gets one provider's
//! bytes as they came.
//!
//! - **Pinned, so lagging is not disagreement.** `latest` (or no block) is pinned to the lowest head of the
//!   providers asked, `safe`/`finalized` to the pool's agreed value, an `eth_getLogs` range's `latest` bound
//!   to the same number; a read by number or hash already is. `pending` cannot be pinned (pools differ): it
//!   is refused. A provider that does not have the block yet ("header not found", or a `null` for a
//!   transaction mined above its head) has no vote and is replaced by the next provider.
//! - **Disagreement is never a silent pick.** Two answers that differ ask one more provider (two, if one of
//!   them fails). If it agrees with one side and that side reaches the quorum, that is the verified answer,
//!   and only then does the provider that disagreed lose standing (a counted failure: its error rate, its
//!   breaker). Otherwise the client gets `-32097` naming the providers and the block.
//! - **Short of a quorum** (providers down, lagging, excluded): `-32096` saying how many answered, or with
//!   `when_short = "unverified"` the answer there is, without the header.
//! - Verified answers carry `x-prism-verified: N`. They bypass the cache and dedupe (a cached or shared
//!   answer came from one provider). Writes are never verified (`prism check` refuses them).
//! - `prism_verified_reads_total{outcome}`.

use std::ops::Range;
use std::time::Instant;

use futures_util::future::join_all;

use prism_telemetry::metrics::Verified;
use prism_wire::jsonscan::{elements, hex_quantity, object_field, skip_ws};
use prism_wire::rpc::methods::{BlockRef, Family, MethodId, BY_HASH};
use prism_wire::rpc::{Call, ProviderId};

use crate::call::ctx::CallCtx;
use crate::call::exchange::Live;
use crate::call::forward::forward_with;
use crate::call::logs::range::{sub_params, Span};
use crate::call::outcome::{CallOutcome, Caller, ProxyError};
use crate::judge::classify::{classify_rpc_error_in, Class};
use crate::routing::route::{Heard, NetworkRoute};
use crate::routing::router::{choose, Ask, Choice, Draw};

pub use crate::call::outcome::{DISAGREEMENT, SHORT_OF_QUORUM};
pub use crate::call::verify_rule::{VerifyRule, MAX_QUORUM};

/// Providers asked beyond the quorum to settle one disagreement.
const SETTLERS: usize = 2;

/// What one provider's answer counts for.
enum Vote {
    /// An answer: `body[value]` is its result or error.
    Answer {
        p: ProviderId,
        body: Vec<u8>,
        value: Range<usize>,
        is_error: bool,
        latency_us: u64,
        /// The value in canonical JSON (the raw bytes when it cannot be put in that form).
        canonical: Vec<u8>,
    },
    /// It does not have the block yet, or it failed: no vote.
    None,
}

impl Vote {
    /// What is compared: error or result, and the canonical value.
    fn bytes(&self) -> Option<(bool, &[u8])> {
        match self {
            Vote::Answer {
                is_error, canonical, ..
            } => Some((*is_error, canonical)),
            Vote::None => None,
        }
    }
}

/// Answers a verified read (see the module doc).
pub async fn verified(route: &NetworkRoute, cx: &CallCtx<'_, '_>) -> CallOutcome {
    let quorum = usize::from(cx.caller.verify.quorum.max(2));
    let now = prism_telemetry::clock::now_ms();
    let ranked = ranked(route, cx.caller, cx.info.family, now);
    let (params, block) = match pin(route, cx, &ranked, quorum) {
        Ok(pinned) => pinned,
        Err(refused) => return refused,
    };
    let pinned = Call {
        id: cx.call.id,
        method: cx.call.method.clone(),
        params: params.as_deref().or(cx.call.params),
    };
    let (votes, asked) = match poll(route, cx, &pinned, &ranked, quorum, now).await {
        Ok(answer) => return answer,
        Err(short) => short,
    };
    short_of_quorum(route, cx, votes, asked, quorum, block)
}

/// The params every provider is asked with, pinned to one block (`None`: the client's own, which name
/// one already), and the block shown in a disagreement; or why the read cannot be verified now.
fn pin(
    route: &NetworkRoute,
    cx: &CallCtx<'_, '_>,
    ranked: &[ProviderId],
    quorum: usize,
) -> Result<(Option<Vec<u8>>, Option<u64>), CallOutcome> {
    let (call, info, block) = (cx.call, cx.info, cx.block);
    let pending = info
        .block_param
        .and_then(|i| call.params.and_then(|p| prism_wire::jsonscan::nth_element(p, i)))
        == Some(&b"\"pending\""[..]);
    if pending {
        return Err(CallOutcome::Failed(ProxyError::Rejected {
            code: -32602,
            message: "A verified read cannot read the pending state (each provider's pool differs): read at latest or a block number".into(),
        }));
    }
    let heads = ranked.iter().take(quorum).map(|&p| {
        route.live.providers()[p]
            .heads
            .head
            .load(std::sync::atomic::Ordering::Relaxed)
    });
    let lowest_head = heads.min().unwrap_or(0);
    let logs = info.id == MethodId::GetLogs;
    let pin = match block {
        BlockRef::Latest => Some(lowest_head),
        BlockRef::Final(t) => Some(route.live.tags.agreed(t)),
        _ if logs => Some(lowest_head),
        _ => None,
    };
    let params = match pin {
        Some(0) if !logs => {
            return Err(CallOutcome::Failed(ProxyError::NotServed(
                "A verified read needs a block every provider has, and no head is known yet; retry shortly",
            )))
        }
        Some(n) if matches!(block, BlockRef::Latest) && n < route.live.marks.get(cx.caller.mark) => {
            return Err(CallOutcome::Failed(ProxyError::NotServed(
                "Every provider is behind the newest block this client has already seen; retry shortly",
            )))
        }
        Some(n) if logs => call
            .params
            .and_then(|p| Span::of(Some(p), n).and_then(|s| sub_params(p, s))),
        Some(n) => match pin_param(call.params, info.block_param, n) {
            Some(p) => Some(p),
            None => {
                return Err(CallOutcome::Failed(ProxyError::Rejected {
                    code: -32602,
                    message: "Invalid params: the block parameter of a verified read could not be pinned".into(),
                }))
            }
        },
        None => None,
    };
    Ok((params, pin.filter(|&n| n > 0)))
}

/// Asks `quorum` providers of `ranked` the `pinned` call, more while answers are missing (a provider without
/// the block, or failing) and up to [`SETTLERS`] more to settle a disagreement. `Ok`: the quorum agreed;
/// `Err`: the votes it came to short of that, and how many providers were asked.
async fn poll(
    route: &NetworkRoute,
    cx: &CallCtx<'_, '_>,
    pinned: &Call<'_>,
    ranked: &[ProviderId],
    quorum: usize,
    now: u64,
) -> Result<CallOutcome, (Vec<Vote>, u32)> {
    let one = |p: ProviderId| async move {
        let started = Instant::now();
        let at = Caller {
            providers: p.bit(),
            verify: VerifyRule::OFF,
            ..*cx.caller
        };
        let asked = CallCtx::new(route, pinned, cx.info, &at, cx.deadline, cx.ids);
        let out = forward_with(&Live, route, &asked).await;
        (p, out, started.elapsed().as_micros() as u64)
    };
    let mut votes: Vec<Vote> = Vec::new();
    let mut next = ranked.iter().copied();
    let mut want = quorum;
    let mut settlers = SETTLERS;
    let mut asked = 0u32;
    loop {
        let batch: Vec<ProviderId> = next.by_ref().take(want).collect();
        if batch.is_empty() {
            break;
        }
        asked += batch.len() as u32;
        for (p, out, latency_us) in join_all(batch.into_iter().map(one)).await {
            votes.push(vote(route, pinned, p, out, latency_us, &votes));
        }
        let tally = Tally::of(&votes);
        if tally.best >= quorum {
            let settled = tally.groups > 1;
            return Ok(agreed(route, cx.info.family, votes, tally, settled, asked, now));
        }
        if Instant::now() >= cx.deadline {
            break;
        }
        want = if tally.groups > 1 {
            if settlers == 0 {
                break;
            }
            settlers -= 1;
            1
        } else {
            quorum - tally.best
        };
    }
    Err((votes, asked))
}

/// No quorum: the providers disagreed (`-32097`, naming them and the `block`), or too few answered
/// (`-32096`, or with `when_short = "unverified"` the first answer there is).
fn short_of_quorum(
    route: &NetworkRoute,
    cx: &CallCtx<'_, '_>,
    votes: Vec<Vote>,
    asked: u32,
    quorum: usize,
    block: Option<u64>,
) -> CallOutcome {
    let metrics = route.shard.recorder.metrics();
    let tally = Tally::of(&votes);
    if tally.groups > 1 {
        metrics.verified(Verified::Disagreed);
        let providers: Vec<ProviderId> = votes
            .iter()
            .filter_map(|v| match v {
                Vote::Answer { p, .. } => Some(*p),
                Vote::None => None,
            })
            .collect();
        let names: Vec<&str> = providers.iter().map(|&p| route.upstreams[p].name.as_str()).collect();
        tracing::warn!(network = %route.name, method = %cx.call.method, providers = ?names, block = ?block, "verified read: providers disagree");
        return CallOutcome::Failed(ProxyError::Disagreement { providers, block });
    }
    if tally.best > 0 && cx.caller.verify.unverified_when_short {
        metrics.verified(Verified::Unverified);
        let first = votes.into_iter().find(|v| v.bytes().is_some());
        if let Some(Vote::Answer {
            p,
            body,
            value,
            is_error,
            ..
        }) = first
        {
            return CallOutcome::Answer {
                body,
                value,
                is_error,
                how: crate::How {
                    provider: Some(p),
                    attempts: asked.min(255) as u8,
                    ..Default::default()
                },
            };
        }
    }
    metrics.verified(Verified::Short);
    CallOutcome::Failed(ProxyError::ShortOfQuorum {
        answered: tally.best,
        quorum,
    })
}

/// How the votes group: the size of the largest group of identical answers, and how many groups.
struct Tally {
    best: usize,
    /// Index in the votes of one answer of the largest group.
    at: usize,
    groups: usize,
}

impl Tally {
    fn of(votes: &[Vote]) -> Tally {
        let mut t = Tally {
            best: 0,
            at: 0,
            groups: 0,
        };
        for (i, v) in votes.iter().enumerate() {
            let Some(mine) = v.bytes() else { continue };
            if votes[..i].iter().any(|w| w.bytes() == Some(mine)) {
                continue;
            }
            t.groups += 1;
            let n = votes.iter().filter(|w| w.bytes() == Some(mine)).count();
            if n > t.best {
                t.best = n;
                t.at = i;
            }
        }
        t
    }
}

/// The quorum agreed: its answer, marked verified; a provider that answered otherwise (the others settled
/// it) loses standing.
fn agreed(
    route: &NetworkRoute,
    family: Family,
    mut votes: Vec<Vote>,
    tally: Tally,
    settled: bool,
    asked: u32,
    now: u64,
) -> CallOutcome {
    let metrics = route.shard.recorder.metrics();
    let winner = votes[tally.at].bytes().map(|(e, b)| (e, b.to_vec()));
    if settled {
        for v in &votes {
            if let Vote::Answer { p, latency_us, .. } = v {
                if v.bytes().map(|(e, b)| (e, b.to_vec())) != winner {
                    tracing::warn!(network = %route.name, provider = %route.upstreams[*p].name, "verified read: provider outvoted by the others; counted as a failure");
                    route.note_outcome(
                        *p,
                        Heard {
                            family,
                            class: Class::ProviderFailure,
                            reason: Some(prism_telemetry::cause::Reason::Outvoted),
                            latency_us: *latency_us,
                            by: prism_telemetry::cause::Origin::Client,
                            now,
                        },
                    );
                }
            }
        }
    }
    metrics.verified(if settled { Verified::Settled } else { Verified::Agreed });
    let Vote::Answer {
        p,
        body,
        value,
        is_error,
        ..
    } = votes.swap_remove(tally.at)
    else {
        unreachable!("the tally points at an answer")
    };
    CallOutcome::Answer {
        body,
        value,
        is_error,
        how: crate::How {
            provider: Some(p),
            attempts: asked.min(255) as u8,
            verified: tally.best.min(255) as u8,
            ..Default::default()
        },
    }
}

/// What provider `p`'s outcome counts for: an answer, or nothing when it failed or lacks the block (an
/// error saying so, or a `null` for something another provider shows mined above `p`'s head).
fn vote(
    route: &NetworkRoute,
    call: &Call<'_>,
    p: ProviderId,
    out: CallOutcome,
    latency_us: u64,
    others: &[Vote],
) -> Vote {
    let CallOutcome::Answer {
        body, value, is_error, ..
    } = out
    else {
        return Vote::None;
    };
    let v = &body[value.clone()];
    if is_error && classify_rpc_error_in(route.dialect(), 200, v, false) == Class::DataUnavailable {
        return Vote::None;
    }
    if !is_error && v == b"null" && BY_HASH.contains(&&*call.method) {
        let head = route.live.providers()[p]
            .heads
            .head
            .load(std::sync::atomic::Ordering::Relaxed);
        let mined_above = others.iter().filter_map(Vote::bytes).any(|(e, b)| {
            !e && object_field(b, "blockNumber")
                .or_else(|| object_field(b, "number"))
                .and_then(hex_quantity)
                .is_some_and(|n| n > head)
        });
        if mined_above {
            return Vote::None;
        }
    }
    let canonical = crate::reuse::canon::canonical_answer(v).unwrap_or_else(|| v.to_vec());
    Vote::Answer {
        p,
        body,
        value,
        is_error,
        latency_us,
        canonical,
    }
}

/// Every provider the caller may use now, in the order routing ranks them, providers of operators not yet
/// listed first (two endpoints of one operator may share one backend, so their agreement proves less).
fn ranked(route: &NetworkRoute, caller: &Caller, family: Family, now: u64) -> Vec<ProviderId> {
    let live = &route.live;
    let health = live.health.load();
    let mut ask = Ask {
        family,
        strategy: caller.strategy,
        weights: caller.weights,
        min_head: live.marks.get(caller.mark),
        prefer_deeper: false,
        exclude: !caller.providers,
        stalled: 0,
        at_block: None,
        tag: None,
        key: caller.key,
    };
    let mut pressure = route.turns.pressure.borrow_mut();
    ask.stalled = route.pressure(family, now, &mut pressure);
    let mut order = Vec::new();
    while let Choice::Provider(p) = choose(
        &route.pool(&health, &pressure, now),
        &ask,
        Draw {
            rotation: route.next_rotation(),
            dice: fastrand::f64(),
        },
    ) {
        // Only providers that are usable now: `choose` falls back to open or parked ones never, but
        // to stalled and over-quota ones last, which is the order wanted here.
        order.push(p);
        ask.exclude |= p.bit();
    }
    drop(pressure);
    let mut seen = Vec::new();
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for p in order {
        let op = route.policy.operators.get(p.index()).copied();
        if seen.contains(&op) {
            rest.push(p);
        } else {
            seen.push(op);
            first.push(p);
        }
    }
    first.extend(rest);
    first
}

/// `params` with the block parameter at `index` replaced (or appended, when it is the next one) by `n`.
fn pin_param(params: Option<&[u8]>, index: Option<usize>, n: u64) -> Option<Vec<u8>> {
    let index = index?;
    let empty: &[u8] = b"[]";
    let params = params.unwrap_or(empty);
    if params.get(skip_ws(params, 0)) != Some(&b'[') {
        return None;
    }
    let items = elements(params)?;
    if items.len() < index {
        return None;
    }
    let number = format!("\"0x{n:x}\"");
    let mut out = Vec::with_capacity(params.len() + number.len());
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(if i == index { number.as_bytes() } else { item });
    }
    if items.len() == index {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(number.as_bytes());
    }
    out.push(b']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_parameter_is_pinned_in_place_or_appended() {
        let pin = |p: &str, i| pin_param(Some(p.as_bytes()), Some(i), 0x1a).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(pin(r#"["0xab", "latest"]"#, 1).as_deref(), Some(r#"["0xab","0x1a"]"#));
        assert_eq!(pin(r#"["0xab"]"#, 1).as_deref(), Some(r#"["0xab","0x1a"]"#));
        assert_eq!(pin(r#"[]"#, 0).as_deref(), Some(r#"["0x1a"]"#));
        assert_eq!(pin(r#"["latest", false]"#, 0).as_deref(), Some(r#"["0x1a",false]"#));
        assert_eq!(pin(r#"["0xab"]"#, 2), None, "a missing parameter before the block");
        assert_eq!(pin(r#"{"a":1}"#, 0), None);
        assert_eq!(
            pin_param(None, Some(0), 1)
                .map(|v| String::from_utf8(v).unwrap())
                .as_deref(),
            Some(r#"["0x1"]"#)
        );
    }
}
