//! The retry loop of one call (`forward_as`): pick a provider, call it within the deadline, validate and classify the answer,
//! record it, then answer, retry elsewhere, or fail. The upstream's `result`/`error` bytes are kept as they
//! came; only the id is Prism's on the way out and the client's on the way back (the edge splices it).
//!
//! Safety rules: reads may be retried on the next-best provider (backoff with full jitter, inside the
//! deadline); a write (and any method the table does not know) goes to exactly one upstream once. A
//! provider that answered (any HTTP status, 429 included, any JSON-RPC error) has seen it: it ends there and
//! that answer goes back. It moves to another provider only when not one byte of it can have been sent
//! (connect refused). Throttled providers are parked, and routing keeps writes away from them before they
//! are sent. A write whose answer is lost after sending returns a distinct error carrying the transaction
//! hash; `core::call::submit` first looks the hash up.
//!
//! Blame needs evidence: an error no classifier rule knows, in a well-formed answer to a read, is asked
//! once of another provider (a second opinion). A result there blames the first provider (its breaker
//! counts, the client gets the result); the same error, a user error, or nobody else to ask blames nobody
//! and the client gets the first node's bytes. `core::judge::blame` remembers the verdict for a while, so a
//! stream of the same bad call costs one second opinion.
//!
//! What comes before (local answers, the cache, dedupe, submissions) is `core::call::pipeline`. The loop is
//! written against [`Exchange`], so its unit tests (`forward_tests.rs`) drive it with a scripted exchange
//! and a clock that moves only when told; what an exchange says is `core::judge`'s.

use std::cell::Cell;
use std::ops::{ControlFlow, Range};
use std::time::Instant;

use prism_telemetry::cause::{Origin, Reason};
use prism_telemetry::metrics::Settled;
use prism_transport::{TransportError, UpstreamResponse};
use prism_wire::rpc::{Call, ProviderId};

use crate::call::attempts::Attempts;
use crate::call::ctx::CallCtx;
use crate::call::dispute::Dispute;
use crate::call::exchange::{Exchange, Live};
use crate::call::fault::{backoff, Next};
use crate::call::hedged::Exchanged;
use crate::call::txhash::raw_tx_hash;
use crate::call::verdict::Verdict;
use crate::judge::classify::Class;
use crate::judge::judge;
use crate::live::inflight::Pressure;
use crate::reuse::cache::named_block;
use crate::routing::route::{Heard, NetworkRoute};
use crate::routing::router::{choose, Ask, Choice, Draw};
use prism_wire::rpc::methods::{HeadHint, Kind, MethodInfo};

pub use crate::call::outcome::{CallOutcome, Caller, How, ProxyError, Source, TxRef, WRITE_OUTCOME_UNKNOWN};
pub use prism_wire::rpc::wire::{write_json_str, write_upstream_call};

/// Sends the call upstream (with retries), under a fresh Prism id, handled as `info` says. Networks whose
/// methods are not the EVM table's (the Solana router) call it directly: no table lookup, no reuse.
pub async fn forward_as(
    route: &NetworkRoute,
    call: &Call<'_>,
    info: MethodInfo,
    caller: &Caller,
    deadline: Instant,
    ids: &Cell<u64>,
) -> CallOutcome {
    forward_with(&Live, route, &CallCtx::new(route, call, info, caller, deadline, ids)).await
}

/// [`forward_as`] over any [`Exchange`] (`Live`, or the unit tests' scripted one), for a call whose facts
/// are already worked out (`core::call::pipeline` did, for the cache and dedupe).
pub async fn forward_with<E: Exchange>(ex: &E, route: &NetworkRoute, cx: &CallCtx<'_, '_>) -> CallOutcome {
    let call = cx.call;
    let id = cx.next_id();
    let mut body = route.shard.bodies.take_empty();
    body.reserve(64 + call.method.len() + call.params.map_or(0, <[u8]>::len));
    write_upstream_call(&mut body, id, &call.method, call.params);
    let outcome = Attempts::new(ex, route, cx).run(&body, id).await;
    route.shard.bodies.give(body);
    outcome
}

/// What the retry loop carries from one attempt to the next.
#[derive(Default)]
struct Carry {
    /// Attempts made (a hedge apart): `policy.retry.max_attempts` bounds them.
    made: u32,
    /// Upstream calls made, hedges included (the answer's `How::attempts`), and whether one was hedged.
    upstream: u32,
    hedged: bool,
    /// What the client gets if nothing better comes.
    last: Option<CallOutcome>,
    /// Backoffs slept so far (each one longer).
    backoffs: u32,
    /// The last answer came from a provider below the client's mark.
    lagging: bool,
    /// An unknown error waiting for a second opinion.
    dispute: Option<Dispute>,
}

impl<'r, 'c, E: Exchange> Attempts<'r, 'c, E> {
    /// What the client can poll if this write's answer is lost.
    fn tx_ref(&self) -> TxRef {
        if self.cx.info.kind == Kind::Unknown {
            return TxRef::Method;
        }
        raw_tx_hash(self.cx.call.params).map_or(TxRef::Unknown, TxRef::Hash)
    }

    fn max_attempts(&self) -> u32 {
        if self.write || self.never_retry {
            1
        } else {
            self.route.policy.retry.max_attempts.max(1)
        }
    }

    /// Every attempt until an answer (or none is left); the answer says how many were made, hedges included.
    async fn run(mut self, body: &[u8], id: u64) -> CallOutcome {
        let mut carry = Carry::default();
        let outcome = self.attempt_all(body, id, &mut carry).await;
        outcome.with_how(|how| {
            how.attempts = carry.upstream.min(u8::MAX as u32) as u8;
            how.hedged = carry.hedged;
        })
    }

    async fn attempt_all(&mut self, body: &[u8], id: u64, carry: &mut Carry) -> CallOutcome {
        loop {
            let now = self.ex.now_ms();
            let i = match self.pick(now, carry) {
                Ok(i) => i,
                Err(answer) => return answer,
            };
            if let ControlFlow::Break(answer) = self.attempt(i, body, id, now, carry).await {
                return answer;
            }
        }
    }

    /// The provider to ask next, or the call's answer when there is none: an error waiting for a second
    /// opinion is nobody's, a lagging answer is never handed over, else the last failure or "all down".
    fn pick(&mut self, now: u64, carry: &mut Carry) -> Result<ProviderId, CallOutcome> {
        let (cx, route) = (self.cx, self.route);
        let dice = fastrand::f64();
        let choice = if cx.info.kind == Kind::Filter {
            filter_home(route, &self.ask, now)
        } else {
            let mut pressure = route.turns.pressure.borrow_mut();
            self.ask.stalled = route.pressure(cx.info.family, now, &mut pressure);
            choose(
                &route.pool(&route.live.health.load(), &pressure, now),
                &self.ask,
                Draw {
                    rotation: route.next_rotation_for(cx.caller.strategy),
                    dice,
                },
            )
        };
        match choice {
            Choice::Provider(p) => Ok(p),
            // Nobody else to ask: nobody is blamed.
            _ if carry.dispute.is_some() => {
                Err(self.undisputed(carry.dispute.take().expect("checked"), Settled::Alone))
            }
            // Out of providers after a lagging answer: never hand a client a height below its mark.
            _ if carry.lagging => Err(self.synthesized_head().unwrap_or_else(|| self.behind_mark())),
            Choice::AllDown { open, retry_after_ms } => {
                Err(carry.last.take().unwrap_or(CallOutcome::Failed(ProxyError::AllDown {
                    providers_open: open,
                    retry_after_ms,
                })))
            }
            Choice::Exhausted => Err(carry.last.take().unwrap_or_else(|| self.all_down(now))),
        }
    }

    /// One attempt at provider `i` (hedged, maybe): sent unless this key's share of its quota is spent,
    /// judged and recorded. `Break` with the answer when the call ends there.
    async fn attempt(
        &mut self,
        i: ProviderId,
        body: &[u8],
        id: u64,
        now: u64,
        carry: &mut Carry,
    ) -> ControlFlow<CallOutcome> {
        let (cx, route) = (self.cx, self.route);
        self.ask.exclude |= i.bit();
        // Its fair share of this provider's quota spent: not sent there; another provider may take it.
        if let Err(over) = route.admit(i, &cx.call.method, cx.caller.key) {
            carry.last = Some(CallOutcome::Failed(ProxyError::OverShare {
                provider: i,
                retry_after_ms: over.retry_after_ms,
            }));
            return ControlFlow::Continue(());
        }
        carry.made += 1;
        carry.upstream += 1;
        let max = self.max_attempts();
        let started = self.ex.now();
        let deadline = if self.write || carry.made >= max {
            cx.deadline
        } else {
            // The time left, shared evenly among the attempts left.
            started + cx.deadline.saturating_duration_since(started) / (max - carry.made + 1)
        };
        let Exchanged {
            provider: i,
            started,
            result,
            hedge,
        } = self.exchange(i, body, deadline, started, now).await;
        if let Some(j) = hedge {
            self.ask.exclude |= j.bit();
            carry.upstream += 1;
            carry.hedged = true;
        }
        if let Err(e @ TransportError::ConnectionLimit { .. }) = &result {
            // Prism's own connection cap: nothing was sent and nothing is held against the provider (no
            // breaker, no latency); another provider may have room.
            let refused = CallOutcome::Failed(ProxyError::Rejected {
                code: -32603,
                message: e.to_string(),
            });
            if carry.made < max && self.ex.now() < cx.deadline {
                carry.last = Some(refused);
                return ControlFlow::Continue(());
            }
            return ControlFlow::Break(refused);
        }
        // One clock read serves the latency and the "time left for another attempt" check below.
        let done = self.ex.now();
        let latency_us = done.saturating_duration_since(started).as_micros() as u64;
        // The same instant on the millisecond clock breakers and heads keep.
        let verdict = self.judged(i, result, id, latency_us, now + latency_us / 1000);
        let more = carry.made < max && done < cx.deadline;
        if let Some(d) = carry.dispute.take() {
            // This answer was the second opinion on `d`.
            if let Some(answer) = self.second_opinion(d, i, &verdict, latency_us) {
                return ControlFlow::Break(answer);
            }
        }
        self.settle(i, verdict, more, latency_us, carry).await
    }

    /// What the exchange with `i` means for this call, recorded against `i` (its health, its latency).
    fn judged(
        &self,
        i: ProviderId,
        result: Result<UpstreamResponse, TransportError>,
        id: u64,
        latency_us: u64,
        done_ms: u64,
    ) -> Verdict {
        let route = self.route;
        let family = self.cx.info.family;
        let judged = judge(result, id, self.light(), self.write, route.dialect());
        let reason = judged.reason();
        let verdict = self.verdict(i, judged).check_head(self, i, done_ms);
        let class = verdict.class();
        // An unknown error is noted once it is settled; a failure the exchange did not name was the answer's
        // head.
        if class != Class::Unknown {
            let reason = reason.or((class == Class::ProviderFailure).then_some(Reason::BadHead));
            route.note_outcome(
                i,
                Heard {
                    family,
                    class,
                    reason,
                    latency_us,
                    by: Origin::Client,
                    now: done_ms,
                },
            );
        }
        if !matches!(class, Class::Throttled | Class::QuotaExhausted) {
            route.upstreams[i].observe_latency(family, latency_us, done_ms);
        }
        verdict
    }

    /// What follows `verdict` from provider `i`: the answer, another provider's turn at once, a second
    /// opinion, or what `Fault::next` (the one rule) says of a failure, a read's backoff slept here.
    async fn settle(
        &mut self,
        i: ProviderId,
        verdict: Verdict,
        more: bool,
        latency_us: u64,
        carry: &mut Carry,
    ) -> ControlFlow<CallOutcome> {
        let (cx, route) = (self.cx, self.route);
        match verdict {
            Verdict::Answer { body, value, is_error } => {
                return ControlFlow::Break(self.finish(i, body, value, is_error))
            }
            Verdict::Reroute { answer } => {
                // Unsupported here / data unavailable here: try elsewhere at once, no backoff.
                carry.lagging = false;
                if !more || self.write {
                    return ControlFlow::Break(answer);
                }
                carry.last = Some(answer);
            }
            Verdict::Lagging { answer } => {
                carry.lagging = true;
                if !more {
                    return ControlFlow::Break(self.synthesized_head().unwrap_or_else(|| self.behind_mark()));
                }
                carry.last = Some(answer);
            }
            Verdict::Disputed { answer, key } => {
                let d = Dispute {
                    provider: i,
                    latency_us,
                    key,
                    answer,
                };
                // Filters live on one provider: nobody else can say anything about them. A write is never
                // asked twice (the classifier gives writes no unknown errors; this is the backstop).
                if !more || self.write || cx.info.kind == Kind::Filter {
                    return ControlFlow::Break(self.undisputed(d, Settled::Alone));
                }
                route.shard.blame.begin(key, self.ex.now_ms());
                carry.dispute = Some(d);
                carry.lagging = false;
            }
            Verdict::Failed(fault) => match fault.next(self.write, more, &route.policy.retry, || self.tx_ref()) {
                Next::End(answer) => return ControlFlow::Break(answer),
                Next::Elsewhere(answer) => carry.last = Some(answer),
                Next::Retry(answer) => {
                    carry.backoffs += 1;
                    let delay = backoff(&route.policy.retry, carry.backoffs);
                    if self.ex.now() + delay >= cx.deadline {
                        return ControlFlow::Break(answer);
                    }
                    carry.last = Some(answer);
                    if !delay.is_zero() {
                        self.ex.sleep(delay).await;
                    }
                }
            },
        }
        ControlFlow::Continue(())
    }
    fn all_down(&self, now: u64) -> CallOutcome {
        match choose(
            &self.route.pool(&self.route.live.health.load(), &Pressure::NONE, now),
            &Ask {
                exclude: !self.cx.caller.providers,
                ..self.ask
            },
            Draw { rotation: 0, dice: 0.0 },
        ) {
            Choice::AllDown { open, retry_after_ms } => CallOutcome::Failed(ProxyError::AllDown {
                providers_open: open,
                retry_after_ms,
            }),
            _ => CallOutcome::Failed(ProxyError::AllDown {
                providers_open: 0,
                retry_after_ms: 1000,
            }),
        }
    }

    fn light(&self) -> bool {
        self.cx.info.family == prism_wire::rpc::methods::Family::Light
    }

    /// A successful answer: learn heads from it, keep the client's mark monotonic.
    fn finish(&self, p: ProviderId, body: Vec<u8>, value: Range<usize>, is_error: bool) -> CallOutcome {
        if let (Some(cache), false) = (&self.route.shard.cache, is_error) {
            if let Some(block) = named_block(self.cx.info.id, &body[value.clone()]) {
                let dropped = cache.observe(block, false);
                if dropped > 0 {
                    tracing::warn!(network = %self.route.name, height = block.number, dropped, "reorg: an answer names another block than the cache's; cached answers that depended on the replaced blocks dropped");
                }
            }
        }
        // `check_head` already observed the head and let only a plausible one through.
        if let (false, Some(h)) = (is_error, self.head.get()) {
            self.route.live.marks.raise(self.cx.mark_key, h);
        }
        CallOutcome::Answer {
            body,
            value,
            is_error,
            how: How::from(p),
        }
    }

    /// Every provider is below the client's mark and the answer is a block: an older block would take the
    /// client's chain backwards, so it gets an error it can retry instead.
    fn behind_mark(&self) -> CallOutcome {
        CallOutcome::Failed(ProxyError::NotServed(
            "Every provider is behind the newest block this client has already seen; retry shortly",
        ))
    }

    /// Last resort for `eth_blockNumber` when every provider is below the client's mark: the mark (or the
    /// head this node's providers showed lately, if higher) is a height the chain has reached, and answering
    /// it keeps the client's view monotonic. The client's mark rises to it.
    fn synthesized_head(&self) -> Option<CallOutcome> {
        if self.cx.info.head != HeadHint::ResultIsHead || self.synthesized == 0 {
            return None;
        }
        self.route.live.marks.raise(self.cx.mark_key, self.synthesized);
        Some(CallOutcome::result(
            format!("\"0x{:x}\"", self.synthesized).into_bytes(),
        ))
    }
}

/// Filters live on the provider that created them: every shard sends them to the same one, the first
/// usable provider in config order, so `eth_getFilterChanges` finds its filter.
fn filter_home(route: &NetworkRoute, ask: &Ask, now: u64) -> Choice {
    let live = &route.live;
    for i in ProviderId::all(route.upstreams.len()) {
        let p = &live.providers()[i];
        if live.admissible(i) && p.breaker.is_closed() && !p.is_parked(now) {
            return if i.is_in(ask.exclude) {
                Choice::Exhausted
            } else {
                Choice::Provider(i)
            };
        }
    }
    choose(
        &route.pool(&live.health.load(), &Pressure::NONE, now),
        ask,
        Draw { rotation: 0, dice: 0.0 },
    )
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;
