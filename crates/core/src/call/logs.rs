//! `eth_getLogs` that fits every provider. Providers cap a call's block range or result count (Infura,
//! QuickNode, Alchemy, Ankr ...) and answer a wider filter with "range too large". A filter wider than
//! what the pool accepts is split here into contiguous sub-ranges that fit, fetched in parallel
//! (`limits.logs_split_concurrency` at a time) within the call's deadline, each through the retry loop
//! (routing, retries, judging), and merged into the one answer a node without limits gives: each part's
//! log objects as they came, joined in block order. A part that fails after its retries fails the call; a
//! partial answer is never presented as whole.
//!
//! Limits are learned per provider and shared by every shard (atomics in `ProviderLive`): a "too large"
//! answer halves the part (or jumps to the limit its message states) and remembers it for that provider,
//! so later calls are split right away. `max_logs_range` / `max_logs_results` in a provider's config
//! declare them up front. Parts are sized to the smallest limit among the providers the call may use, so
//! any of them can serve (and retry) any part.
//!
//! A filter that fits goes out as the client sent it; only a split filter has its tags resolved (see
//! [`Span::of`]). `blockHash` filters are never split.

pub(crate) mod range;

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use futures_util::stream::{FuturesUnordered, StreamExt};

use prism_transport::TransportError;
use prism_wire::rpc::{Call, ProviderId};

use crate::call::ctx::CallCtx;
use crate::call::exchange::Live;
use crate::call::forward::{forward_as, forward_with};
use crate::call::outcome::{CallOutcome, ProxyError};
use crate::judge::classify::{classify_rpc_error, Class};
use crate::routing::route::NetworkRoute;
pub use crate::routing::route::{DeclaredLimits, LogsSettings};
use range::{stated_limit, sub_params, Merged, Span, Stated};

/// Upstream calls one client `eth_getLogs` may cost (sub-ranges and rejected attempts together): past it
/// the filter is refused as too wide for the pool, instead of spending the deadline on thousands of parts.
pub const MAX_PARTS: u32 = 4096;

/// The JSON-RPC code of a filter Prism will not answer whole (Infura's "more than N results" code).
const TOO_LARGE: i32 = -32005;

/// Answers an `eth_getLogs`, split to fit the providers' limits when it must be.
pub async fn get_logs(route: &NetworkRoute, cx: &CallCtx<'_, '_>) -> CallOutcome {
    let (call, caller) = (cx.call, cx.caller);
    let head = route
        .live
        .heads
        .best_head
        .load(Ordering::Relaxed)
        .max(route.live.marks.get(caller.mark));
    let (Some(span), Some(params)) = (Span::of(call.params, head), call.params) else {
        return forward_with(&Live, route, cx).await;
    };
    let split = Split {
        route,
        cx,
        params,
        sent: Cell::new(0),
    };
    let mut cap = u64::MAX;
    if span.width() <= split.width(&Merged::default()) {
        // It fits as far as anyone knows: the client's own params, once.
        match split.part(None).await {
            // One block has nothing to split: the node's answer as it came.
            Part::TooLarge { answer, .. } | Part::Oversized(answer) if span.width() == 1 => return answer,
            Part::TooLarge { provider, stated, .. } => cap = split.learn(provider, stated, span.width()),
            Part::Oversized(_) => cap = span.width() / 2,
            Part::Logs { body, value, how } => {
                return CallOutcome::Answer {
                    body,
                    value,
                    is_error: false,
                    how,
                }
            }
            Part::Failed(outcome) => return outcome,
        }
    }
    split.run(span, cap).await
}

/// One client call being split.
struct Split<'a, 'c> {
    route: &'a NetworkRoute,
    /// The client's call (its facts: `core::call::ctx`).
    cx: &'a CallCtx<'a, 'c>,
    params: &'a [u8],
    /// Upstream calls made so far (see [`MAX_PARTS`]).
    sent: Cell<u32>,
}

/// What one sub-range came to.
enum Part {
    /// A result: `body[value]` should be an array of logs.
    Logs {
        body: Vec<u8>,
        value: std::ops::Range<usize>,
        how: crate::How,
    },
    /// A provider said the range is too large for it.
    TooLarge {
        provider: Option<ProviderId>,
        stated: Option<Stated>,
        answer: CallOutcome,
    },
    /// The answer was over `limits.max_response_bytes`: no provider's limit, ours.
    Oversized(CallOutcome),
    /// Anything else: the part's answer after its retries.
    Failed(CallOutcome),
}

impl Split<'_, '_> {
    /// The widest part any provider this call may use accepts now, and that keeps the logs of the
    /// densest known results limit under it (from the density `merged` has seen).
    fn width(&self, merged: &Merged) -> u64 {
        let route = self.route;
        let mut range = u64::MAX;
        let mut results = u64::MAX;
        for i in ProviderId::all(route.upstreams.len()) {
            let live = &route.live.providers()[i];
            if !i.is_in(self.cx.caller.providers) || live.retired.load(Ordering::Relaxed) {
                continue;
            }
            let declared = route.policy.logs.declared.get(i.index()).copied().unwrap_or_default();
            let learned = |a: &std::sync::atomic::AtomicU64| Some(a.load(Ordering::Relaxed)).filter(|&n| n > 0);
            for n in [declared.range, learned(&live.logs.range)].into_iter().flatten() {
                range = range.min(n);
            }
            for n in [declared.results, learned(&live.logs.results)].into_iter().flatten() {
                results = results.min(n);
            }
        }
        if results < u64::MAX && merged.logs > 0 {
            // Aim at three quarters of the limit at the density seen so far.
            let dense = (results.saturating_mul(3) / 4).saturating_mul(merged.blocks) / merged.logs;
            range = range.min(dense.max(1));
        }
        range.max(1)
    }

    /// Remembers what provider `p` refused, a range `width` wide, and returns the width to ask that range
    /// in next. A range limit (the one stated when below `width`, else half of it) is the provider's for
    /// every later call. A results limit it states is kept as such: how many logs a range holds depends on
    /// the range, so only this part is halved (later parts are sized by the density seen).
    fn learn(&self, p: Option<ProviderId>, stated: Option<Stated>, width: u64) -> u64 {
        let next = match stated {
            Some(Stated::Range(n)) if n < width => n,
            _ => width / 2,
        }
        .max(1);
        let Some(p) = p else { return next };
        let live = &self.route.live.providers()[p];
        match stated {
            Some(Stated::Results(n)) => lower(&live.logs.results, n.max(1)),
            _ => lower(&live.logs.range, next),
        }
        tracing::debug!(network = %self.route.name, provider = %self.route.upstreams[p].name, width = next, "eth_getLogs limit learned");
        next
    }

    /// Fetches `span` in parts of at most `cap` blocks and merges them.
    async fn run(&self, span: Span, cap: u64) -> CallOutcome {
        // Ranges still to fetch: first block -> (last block, the widest part a refusal left it).
        let mut pending = BTreeMap::from([(span.from, (span.to, cap))]);
        let mut merged = Merged::default();
        let mut flying = FuturesUnordered::new();
        let concurrency = self.route.policy.logs.concurrency.max(1);
        loop {
            while flying.len() < concurrency {
                let Some((from, (to, cap))) = pending.pop_first() else {
                    break;
                };
                if self.sent.get() >= MAX_PARTS {
                    return self.refuse(span, format!("it needs more than {MAX_PARTS} upstream calls at the providers' limits; ask for a narrower range"));
                }
                let w = self.width(&merged).min(cap).max(1);
                let part = Span {
                    from,
                    to: to.min(from.saturating_add(w - 1)),
                };
                if part.to < to {
                    pending.insert(part.to + 1, (to, cap));
                }
                flying.push(async move { (part, self.part(Some(part)).await) });
            }
            let Some((part, result)) = flying.next().await else {
                // Parts come from several providers: the answer names none, and counts every sub-call.
                let attempts = self.sent.get().min(u32::from(u8::MAX)) as u8;
                return CallOutcome::result(merged.finish()).with_how(|how| how.attempts = attempts);
            };
            match result {
                Part::Logs { body, value, .. } => {
                    if merged.add(part.from, &body[value]).is_none() {
                        return CallOutcome::Failed(ProxyError::Rejected {
                            code: -32603,
                            message: format!("eth_getLogs split into block ranges: blocks {}..={} were answered with something other than an array of logs", part.from, part.to),
                        });
                    }
                    merged.blocks += part.width();
                    if merged.bytes() > self.route.policy.logs.max_bytes {
                        return self.too_large(span, "");
                    }
                }
                Part::TooLarge { provider, stated, .. } if part.width() > 1 => {
                    let next = self.learn(provider, stated, part.width());
                    pending.insert(part.from, (part.to, next));
                }
                // Over our own response limit: this part's logs are many, not the provider's limit.
                Part::Oversized(_) if part.width() > 1 => {
                    pending.insert(part.from, (part.to, part.width() / 2));
                }
                Part::TooLarge { provider, .. } => {
                    // Refusing one block says nothing about ranges: forget, so later calls are not cut
                    // to single blocks by it.
                    if let Some(p) = provider {
                        self.route.live.providers()[p].logs.range.store(0, Ordering::Relaxed);
                    }
                    return self.refuse(span, format!("the providers refuse even block {} alone", part.from));
                }
                Part::Oversized(_) => {
                    return self.too_large(span, &format!(" (block {} alone)", part.from));
                }
                Part::Failed(outcome) => return self.part_failed(part, outcome),
            }
        }
    }

    /// One upstream call through the retry loop: the client's own params (`None`) or the filter over `span`.
    async fn part(&self, span: Option<Span>) -> Part {
        self.sent.set(self.sent.get() + 1);
        let params = match span {
            Some(s) => sub_params(self.params, s).map(Cow::Owned),
            None => Some(Cow::Borrowed(self.params)),
        };
        let sub = Call {
            id: self.cx.call.id,
            method: Cow::Borrowed("eth_getLogs"),
            params: params.as_deref(),
        };
        let outcome = forward_as(
            self.route,
            &sub,
            self.cx.info,
            self.cx.caller,
            self.cx.deadline,
            self.cx.ids,
        )
        .await;
        match outcome {
            CallOutcome::Answer {
                body,
                value,
                is_error: true,
                how,
            } if classify_rpc_error(&body[value.clone()], false) == Class::TooLarge => {
                let stated = stated_limit(&body[value.clone()]);
                Part::TooLarge {
                    // The answer says who gave it: its limit is learned for that provider alone.
                    provider: how.provider,
                    stated,
                    answer: CallOutcome::Answer {
                        body,
                        value,
                        is_error: true,
                        how,
                    },
                }
            }
            outcome @ CallOutcome::Failed(ProxyError::Transport {
                error: TransportError::TooLarge { .. },
                ..
            }) => Part::Oversized(outcome),
            CallOutcome::Answer {
                body,
                value,
                is_error: false,
                how,
            } => Part::Logs { body, value, how },
            outcome => Part::Failed(outcome),
        }
    }

    /// A part failed after its own retries: the node's error as it came (the same filter would get it
    /// whole), or Prism's, saying which blocks.
    fn part_failed(&self, part: Span, outcome: CallOutcome) -> CallOutcome {
        match outcome {
            CallOutcome::Failed(e @ ProxyError::AllDown { .. }) => CallOutcome::Failed(e),
            CallOutcome::Failed(e) => CallOutcome::Failed(ProxyError::Rejected {
                code: e.code(),
                message: format!(
                    "eth_getLogs split into block ranges to fit providers' limits: blocks {}..={} failed: {}",
                    part.from,
                    part.to,
                    e.shown(self.route)
                ),
            }),
            answer => answer,
        }
    }

    /// The logs of `span` (`detail`: which part) are over `limits.max_response_bytes`: the same code and
    /// message as one upstream answer over it.
    fn too_large(&self, span: Span, detail: &str) -> CallOutcome {
        tracing::info!(network = %self.route.name, from = span.from, to = span.to, "eth_getLogs over max_response_bytes");
        let what = format!("eth_getLogs over blocks {}..={}{detail}", span.from, span.to);
        CallOutcome::Failed(ProxyError::response_too_large(self.route.policy.logs.max_bytes, &what))
    }

    fn refuse(&self, span: Span, why: String) -> CallOutcome {
        tracing::info!(network = %self.route.name, from = span.from, to = span.to, "eth_getLogs refused after splitting");
        CallOutcome::Failed(ProxyError::Rejected {
            code: TOO_LARGE,
            message: format!(
                "eth_getLogs over blocks {}..={} cannot be answered whole: {why}",
                span.from, span.to
            ),
        })
    }
}

/// Lowers a learned limit (0 = none yet) to `n`.
fn lower(limit: &std::sync::atomic::AtomicU64, n: u64) {
    let _ = limit.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
        (old == 0 || n < old).then_some(n)
    });
}
