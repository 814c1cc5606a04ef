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
use std::ops::Range;
use std::time::{Duration, Instant};

use prism_config::Jitter;
use prism_telemetry::cause::{Origin, Reason};
use prism_telemetry::metrics::Settled;
use prism_transport::{TransportError, UpstreamResponse};
use prism_wire::jsonscan::{hex_quantity, object_field};
use prism_wire::rpc::{Call, ProviderId};

use crate::call::ctx::CallCtx;
use crate::call::exchange::{Exchange, Live};
use crate::call::fault::{Fault, Next};
use crate::call::txhash::raw_tx_hash;
use crate::judge::blame::{Blame, BlameKey};
use crate::judge::classify::Class;
use crate::judge::{error_retry_on, judge, Judged};
use crate::live::availability;
use crate::live::finality::{self, TagCheck};
use crate::live::inflight::Pressure;
use crate::live::state::HeadVerdict;
use crate::reuse::cache::named_block;
use crate::routing::route::NetworkRoute;
use crate::routing::router::{choose, Ask, Choice};
use prism_wire::rpc::methods::{BlockRef, HeadHint, Kind, MethodInfo};

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
    let mut body = route.bodies.take_empty();
    body.reserve(64 + call.method.len() + call.params.map_or(0, <[u8]>::len));
    write_upstream_call(&mut body, id, &call.method, call.params);
    let outcome = Attempts::new(ex, route, cx).run(&body, id).await;
    route.bodies.give(body);
    outcome
}

/// What one call's attempts came to, beyond the answer: upstream calls made (hedges included), hedged.
#[derive(Default)]
struct Tally {
    made: Cell<u32>,
    hedged: Cell<bool>,
}

/// One (possibly hedged) exchange.
struct Exchanged {
    provider: ProviderId,
    started: Instant,
    result: Result<UpstreamResponse, TransportError>,
    hedge: Option<ProviderId>,
}

/// The retry loop of one call.
struct Attempts<'r, 'c, E> {
    ex: &'r E,
    route: &'r NetworkRoute,
    /// The call, its block, head, tag and mark key (`core::call::ctx`).
    cx: &'r CallCtx<'r, 'c>,
    write: bool,
    never_retry: bool,
    /// The least height this call may answer: the client's high-water mark when the call arrived (for a
    /// `safe` / `finalized` read, its mark for that tag), for a `latest` read raised to what this node's
    /// providers have shown lately less the tolerance; and which mark that is.
    mark: u64,
    /// What `eth_blockNumber` answers when every provider is below `mark`: the highest of the client's mark
    /// and the head this node's providers showed lately (both heights the chain has reached).
    synthesized: u64,
    ask: Ask,
    /// The plausible head the last answer revealed (set by `check_head`, read by `finish`: scanned once).
    head: Cell<Option<u64>>,
}

impl<'r, 'c, E: Exchange> Attempts<'r, 'c, E> {
    fn new(ex: &'r E, route: &'r NetworkRoute, cx: &'r CallCtx<'r, 'c>) -> Self {
        let (call, info, block, caller) = (cx.call, cx.info, cx.block, cx.caller);
        let (latest, tag) = (cx.latest, cx.tag);
        let write = info.kind.sent_once();
        let own = route.live.marks.get(cx.mark_key);
        let tolerance = route.live.hwm_tolerance;
        // A `latest` read is also held to what this node's providers have shown lately (less the tolerance):
        // the caller's mark reaches other nodes only through Redis, and it may have been answered that
        // height by one of them a moment ago.
        let held = if latest && tag.is_none() && !route.solana {
            route.live.held_head(|| ex.now_ms())
        } else {
            0
        };
        let mark = own.max(held.saturating_sub(tolerance));
        // eth_blockNumber and latest-tagged reads must come from a provider at or above the mark; other reads
        // may come from one within the tolerance. A read at block N prefers providers that have N.
        let mut min_head = if latest || route.solana {
            mark
        } else {
            mark.saturating_sub(tolerance)
        };
        if let BlockRef::Number(n) = block {
            min_head = min_head.max(n);
        }
        // Solana's `minContextSlot` (the router's `floor`): prefer a provider that has reached it.
        min_head = min_head.max(caller.floor);
        let never_retry = route.retry.never_retry.iter().any(|m| m == &*call.method);
        Attempts {
            ex,
            route,
            cx,
            write,
            never_retry,
            mark,
            synthesized: own.max(held),
            head: Cell::new(None),
            ask: Ask {
                family: info.family,
                strategy: caller.strategy,
                weights: caller.weights,
                min_head,
                prefer_deeper: false,
                exclude: !caller.providers,
                stalled: 0,
                at_block: availability::lowest_block(info.id, block, call.params),
                tag: tag.map(|t| (t, route.live.tags.agreed(t).max(mark))),
                key: caller.key,
            },
        }
    }

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
            self.route.retry.max_attempts.max(1)
        }
    }

    /// Every attempt until an answer (or none is left); the answer says how many were made, hedges included.
    async fn run(self, body: &[u8], id: u64) -> CallOutcome {
        let tally = Tally::default();
        let outcome = self.attempt_all(body, id, &tally).await;
        outcome.with_how(|how| {
            how.attempts = tally.made.get().min(u8::MAX as u32) as u8;
            how.hedged = tally.hedged.get();
        })
    }

    #[expect(clippy::too_many_lines, reason = "listed in scripts/targets.allow until it is split")]
    async fn attempt_all(mut self, body: &[u8], id: u64, tally: &Tally) -> CallOutcome {
        let (cx, route) = (self.cx, self.route);
        let max = self.max_attempts();
        let mut attempt = 0u32;
        let mut last: Option<CallOutcome> = None;
        let mut backoffs = 0u32;
        // The last answer came from a provider below the client's mark.
        let mut lagging = false;
        // An unknown error waiting for a second opinion.
        let mut dispute: Option<Dispute> = None;
        loop {
            let now = self.ex.now_ms();
            let dice = fastrand::f64();
            let choice = if cx.info.kind == Kind::Filter {
                filter_home(route, &self.ask, now)
            } else {
                let mut pressure = route.pressure.borrow_mut();
                self.ask.stalled = route.pressure(cx.info.family, now, &mut pressure);
                choose(
                    &route.statics,
                    &route.live,
                    &route.live.health.load(),
                    &self.ask,
                    &pressure,
                    now,
                    route.next_rotation_for(cx.caller.strategy),
                    dice,
                )
            };
            let i = match choice {
                Choice::Provider(p) => p,
                // Nobody else to ask: nobody is blamed.
                _ if dispute.is_some() => return self.undisputed(dispute.take().unwrap(), Settled::Alone),
                // Out of providers after a lagging answer: never hand a client a height below its mark.
                _ if lagging => return self.synthesized_head().unwrap_or_else(|| self.behind_mark()),
                Choice::AllDown { open, retry_after_ms } => {
                    return last.unwrap_or(CallOutcome::Failed(ProxyError::AllDown {
                        providers_open: open,
                        retry_after_ms,
                    }))
                }
                Choice::Exhausted => return last.unwrap_or_else(|| self.all_down(now)),
            };
            self.ask.exclude |= i.bit();
            // Its fair share of this provider's quota spent: not sent there; another provider may take it.
            if let Err(over) = route.admit(i, &cx.call.method, cx.caller.key) {
                last = Some(CallOutcome::Failed(ProxyError::OverShare {
                    provider: route.upstreams[i].name.clone(),
                    retry_after_ms: over.retry_after_ms,
                }));
                continue;
            }
            attempt += 1;
            tally.made.set(tally.made.get() + 1);
            let attempts_left = max.saturating_sub(attempt) + 1;
            let started = self.ex.now();
            let remaining = cx.deadline.saturating_duration_since(started);
            let attempt_deadline = if self.write || attempts_left <= 1 {
                cx.deadline
            } else {
                started + remaining / attempts_left
            };
            let Exchanged {
                provider: i,
                started,
                result,
                hedge,
            } = self.exchange(i, body, attempt_deadline, started, now).await;
            if let Some(j) = hedge {
                self.ask.exclude |= j.bit();
                tally.made.set(tally.made.get() + 1);
                tally.hedged.set(true);
            }
            let upstream = &route.upstreams[i];
            if let Err(e @ TransportError::ConnectionLimit { .. }) = &result {
                // Prism's own connection cap: nothing was sent and nothing is held against the provider
                // (no breaker, no latency); another provider may have room.
                last = Some(CallOutcome::Failed(ProxyError::Rejected {
                    code: -32603,
                    message: e.to_string(),
                }));
                if attempt < max && self.ex.now() < cx.deadline {
                    continue;
                }
                return last.unwrap();
            }
            // One clock read serves the latency and the "time left for another attempt" check below.
            let done = self.ex.now();
            let latency_us = done.saturating_duration_since(started).as_micros() as u64;
            // The same instant on the millisecond clock breakers and heads keep.
            let done_ms = now + latency_us / 1000;
            let judged = judge(result, id, self.light(), self.write, route.dialect());
            let reason = judged.reason();
            let verdict = self.verdict(i, judged).check_head(&self, i, done_ms);
            let class = verdict.class();
            // An unknown error is noted once it is settled; a failure the exchange did not name was the
            // answer's head.
            if class != Class::Unknown {
                let reason = reason.or((class == Class::ProviderFailure).then_some(Reason::BadHead));
                route.note_outcome(i, cx.info.family, class, reason, latency_us, Origin::Client, done_ms);
            }
            if !matches!(class, Class::Throttled | Class::QuotaExhausted) {
                upstream.observe_latency(cx.info.family, latency_us, done_ms);
            }
            let more = attempt < max && done < cx.deadline;
            if let Some(d) = dispute.take() {
                // This answer was the second opinion on `d`.
                if let Some(answer) = self.second_opinion(d, i, &verdict, latency_us) {
                    return answer;
                }
            }
            match verdict {
                Verdict::Answer { body, value, is_error } => {
                    return self.finish(i, body, value, is_error);
                }
                Verdict::Reroute { answer } => {
                    // Unsupported here / data unavailable here: try elsewhere at once, no backoff.
                    last = Some(answer);
                    lagging = false;
                    if !more || self.write {
                        return last.unwrap();
                    }
                }
                Verdict::Lagging { answer } => {
                    last = Some(answer);
                    lagging = true;
                    if !more {
                        return self.synthesized_head().unwrap_or_else(|| self.behind_mark());
                    }
                }
                Verdict::Disputed { answer, key } => {
                    let d = Dispute {
                        provider: i,
                        latency_us,
                        key,
                        answer,
                    };
                    // Filters live on one provider: nobody else can say anything about them. A write is
                    // never asked twice (the classifier gives writes no unknown errors; this is the backstop).
                    if !more || self.write || cx.info.kind == Kind::Filter {
                        return self.undisputed(d, Settled::Alone);
                    }
                    route.blame.begin(key, self.ex.now_ms());
                    dispute = Some(d);
                    lagging = false;
                }
                // Whether the call ends, goes elsewhere or is tried again: `Fault::next`, the one rule.
                Verdict::Failed { fault, class: _ } => {
                    match fault.next(self.write, more, &route.retry, || self.tx_ref()) {
                        Next::End(answer) => return answer,
                        Next::Elsewhere(answer) => {
                            last = Some(answer);
                            continue;
                        }
                        Next::Retry(answer) => {
                            last = Some(answer);
                            backoffs += 1;
                            let delay = backoff(&route.retry, backoffs);
                            if self.ex.now() + delay >= cx.deadline {
                                return last.unwrap();
                            }
                            if !delay.is_zero() {
                                self.ex.sleep(delay).await;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Settles `d` with the answer provider `j` gave to the same call: a result blames `d`'s provider (and
    /// returns `None`: the result is the client's answer, handled as any other), anything else blames
    /// nobody and returns `d`'s answer, the first node's bytes.
    fn second_opinion(&self, d: Dispute, j: ProviderId, verdict: &Verdict, latency_us: u64) -> Option<CallOutcome> {
        let route = self.route;
        let (blame, how) = match verdict {
            Verdict::Answer { is_error: false, .. } => {
                (Some(Blame::Provider(d.provider)), Settled::SecondOpinionProvider)
            }
            // The same error, or one the rules know as the caller's (a user error, too large).
            Verdict::Answer { is_error: true, .. } => (Some(Blame::Client), Settled::SecondOpinionClient),
            Verdict::Disputed { key, .. } if *key == d.key => (Some(Blame::Client), Settled::SecondOpinionClient),
            _ => (None, Settled::SecondOpinionInconclusive),
        };
        if let Verdict::Disputed { .. } = verdict {
            // The second provider's unknown error is not asked of a third: nobody's.
            route.note_outcome(
                j,
                self.cx.info.family,
                Class::UserError,
                None,
                latency_us,
                Origin::Client,
                self.ex.now_ms(),
            );
        }
        let blamed = matches!(blame, Some(Blame::Provider(_)));
        let first = if blamed {
            Class::ProviderFailure
        } else {
            Class::UserError
        };
        let now = self.ex.now_ms();
        let reason = blamed.then_some(Reason::RpcError);
        route.note_outcome(
            d.provider,
            self.cx.info.family,
            first,
            reason,
            d.latency_us,
            Origin::Client,
            now,
        );
        route.blame.settle(d.key, blame, now);
        route.recorder.metrics().settled(how);
        if blamed {
            tracing::info!(network = %route.name, provider = %route.upstreams[d.provider].name, method = %self.cx.call.method, blamed_by = %route.upstreams[j].name, "an error another provider answered with a result: blamed");
            None
        } else {
            Some(d.answer)
        }
    }

    /// `d` is settled without a second opinion: nobody is blamed, the client gets the node's bytes.
    fn undisputed(&self, d: Dispute, how: Settled) -> CallOutcome {
        let now = self.ex.now_ms();
        self.route.note_outcome(
            d.provider,
            self.cx.info.family,
            Class::UserError,
            None,
            d.latency_us,
            Origin::Client,
            now,
        );
        self.route.blame.settle(d.key, None, now);
        self.route.recorder.metrics().settled(how);
        d.answer
    }

    fn all_down(&self, now: u64) -> CallOutcome {
        match crate::routing::router::choose(
            &self.route.statics,
            &self.route.live,
            &self.route.live.health.load(),
            &Ask {
                exclude: !self.cx.caller.providers,
                ..self.ask
            },
            &Pressure::NONE,
            now,
            0,
            0.0,
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

    /// Whether this call's answers are small on any honest node (over the response limit is a flood).
    /// One attempt at provider `i`, hedged when the read qualifies and `i` is late (`core::routing::hedge`): the
    /// provider whose answer it is (`i`, or the hedge's), when that exchange started, its result, and the
    /// provider a hedge went to. The loser is dropped: a connection whose answer was not read in full is
    /// closed, never reused.
    async fn exchange(
        &self,
        i: ProviderId,
        body: &[u8],
        deadline: Instant,
        started: Instant,
        now_ms: u64,
    ) -> Exchanged {
        let route = self.route;
        let done = |provider, started, result, hedge| Exchanged {
            provider,
            started,
            result,
            hedge,
        };
        let family = self.cx.info.family;
        let _guard = route.upstreams[i].in_flight(family, now_ms);
        // Pinned once, so every path awaits the same slot of this future's state (moving it into a pin
        // later gave it two), and the hedge is boxed: it is rare, and inline it would add a whole post's
        // state to every call's future and so to every connection's answer (server.rs boxes that per
        // request, a copy as large as the future).
        let mut primary = std::pin::pin!(self.ex.post(route, i, body, deadline, !self.write));
        let Some(late) = self.hedge_delay(i) else {
            return done(i, started, primary.await, None);
        };
        route.hedge_budget.earn(route.hedge.per_attempt);
        let early = futures_lite::future::or(async { Some(primary.as_mut().await) }, async {
            self.ex.sleep(late.after).await;
            None
        })
        .await;
        if let Some(result) = early {
            return done(i, started, result, None);
        }
        // Late. The next-best provider of another operator, if the budget has a hedge.
        let Some(j) = self
            .hedge_target(i)
            .filter(|_| route.hedge_budget.spend(late.degraded))
            .filter(|&j| route.admit(j, &self.cx.call.method, self.cx.caller.key).is_ok())
        else {
            return done(i, started, primary.await, None);
        };
        let hedge_started = self.ex.now();
        let _hedge_guard = route.upstreams[j].in_flight(family, self.ex.now_ms());
        let mut hedge = Box::pin(self.ex.post(route, j, body, deadline, true));
        let first = futures_lite::future::or(async { (false, primary.as_mut().await) }, async {
            (true, hedge.as_mut().await)
        })
        .await;
        let good = |r: &Result<UpstreamResponse, TransportError>| matches!(r, Ok(a) if (200..300).contains(&a.status));
        // The first good answer wins; if the first to finish failed, the other one is waited for.
        let (won, result) = match first {
            (hedge_first, r) if good(&r) => (hedge_first, r),
            (false, _) => (true, hedge.as_mut().await),
            (true, _) => (false, primary.as_mut().await),
        };
        route.recorder.metrics().hedge(won);
        if won {
            // The loser was late by at least this much: routing hears of it now (its recent latency), so
            // the next reads avoid it rather than each wait for a hedge.
            let late_us = self.ex.now().saturating_duration_since(started).as_micros() as u64;
            route.upstreams[i].observe_latency(self.cx.info.family, late_us, self.ex.now_ms());
            done(j, hedge_started, result, Some(j))
        } else {
            done(i, started, result, Some(j))
        }
    }

    /// How long `i`'s answer may take before this call is hedged; `None` when it is not hedged at all.
    fn hedge_delay(&self, i: ProviderId) -> Option<crate::routing::hedge::Lateness> {
        let hedging = &self.route.hedge;
        if self.write || self.never_retry || self.cx.info.kind != Kind::Read || !hedging.covers(self.cx.info.family) {
            return None;
        }
        // No provider of another operator that this call may still use: a hedge has nowhere to go, so the
        // timer that would wait for it is not armed (one network with one provider pays nothing for hedging).
        let out = self.not_for_hedge(i);
        if ProviderId::all(self.route.upstreams.len()).all(|p| p.is_in(out)) {
            return None;
        }
        hedging.delay(&self.route.live.health.load(), i, self.cx.info.family)
    }

    /// Providers a hedge of an attempt at `i` may not go to: those tried already, and `i`'s operator's.
    fn not_for_hedge(&self, i: ProviderId) -> u64 {
        self.ask.exclude | i.bit() | crate::routing::hedge::same_operator(&self.route.operators, i)
    }

    /// Where a hedge of an attempt at `i` goes: the router's choice among the providers of other operators
    /// this call may still use.
    fn hedge_target(&self, i: ProviderId) -> Option<ProviderId> {
        let route = self.route;
        let mut ask = self.ask;
        ask.exclude = self.not_for_hedge(i);
        let now = self.ex.now_ms();
        let mut pressure = route.pressure.borrow_mut();
        ask.stalled = route.pressure(self.cx.info.family, now, &mut pressure);
        match choose(
            &route.statics,
            &route.live,
            &route.live.health.load(),
            &ask,
            &pressure,
            now,
            route.next_rotation(),
            fastrand::f64(),
        ) {
            Choice::Provider(j) => Some(j),
            _ => None,
        }
    }

    fn light(&self) -> bool {
        self.cx.info.family == prism_wire::rpc::methods::Family::Light
    }

    /// What a judged exchange with provider `p` means for this call: blame memory settles an error no rule
    /// knows, the class decides whether it is the answer, another provider's turn, or a failure.
    fn verdict(&self, p: ProviderId, judged: Judged) -> Verdict {
        let route = self.route;
        let name = || route.upstreams[p].name.clone();
        let causes = &route.live.providers()[p].causes;
        judged.log_broken(
            causes,
            || self.ex.now_ms(),
            &route.name,
            &route.upstreams[p].name,
            &self.cx.call.method,
        );
        let sent = judged.maybe_sent();
        let retry_on = judged.retry_on();
        match judged {
            Judged::Answer {
                body,
                value,
                is_error,
                status,
                class,
            } => {
                let mut class = class;
                let mut key = None;
                if class == Class::Unknown {
                    let k = BlameKey::of(&self.cx.call.method, &body[value.clone()]);
                    let (settled, how) = match route.blame.recall(k, self.ex.now_ms()) {
                        None => (Class::Unknown, None),
                        Some(Blame::Client) => (Class::UserError, Some(Settled::RememberedClient)),
                        Some(Blame::Pending) => (Class::UserError, Some(Settled::Pending)),
                        // The verdict was on that provider: another one answering the same is asked again.
                        Some(Blame::Provider(q)) if q == p => {
                            (Class::ProviderFailure, Some(Settled::RememberedProvider))
                        }
                        Some(Blame::Provider(_)) => (Class::Unknown, None),
                    };
                    if let Some(how) = how {
                        route.recorder.metrics().settled(how);
                    }
                    class = settled;
                    key = Some(k);
                }
                match class {
                    Class::Success | Class::UserError | Class::TooLarge => Verdict::Answer { body, value, is_error },
                    Class::Unknown => Verdict::Disputed {
                        answer: CallOutcome::Answer {
                            body,
                            value,
                            is_error,
                            how: How::from(p),
                        },
                        key: key.expect("set for Unknown"),
                    },
                    Class::Unsupported | Class::DataUnavailable => {
                        // No data at the block this read needs: the provider's floor is above it.
                        if let (Class::DataUnavailable, Some(b)) = (class, self.ask.at_block) {
                            route.live.learn_floor(p, b);
                        }
                        // Solana's "Node is behind by N slots": the provider told its slot (`core::live::slots`).
                        if class == Class::DataUnavailable && route.solana {
                            route.note_behind(p, &body[value.clone()], self.ex.now_ms());
                        }
                        Verdict::Reroute {
                            answer: CallOutcome::Answer {
                                body,
                                value,
                                is_error,
                                how: How::from(p),
                            },
                        }
                    }
                    Class::Throttled | Class::QuotaExhausted | Class::ProviderFailure => Verdict::Failed {
                        fault: Fault {
                            error: ProxyError::Status {
                                provider: name(),
                                status,
                            },
                            sent: true,
                            // The class blame memory settled, not the judge's: `error_retry_on` of it.
                            retry_on: Some(error_retry_on(class)),
                            node_answer: Some(CallOutcome::Answer {
                                body,
                                value,
                                is_error,
                                how: How::from(p),
                            }),
                        },
                        class,
                    },
                }
            }
            Judged::Failed { failure, class } => Verdict::Failed {
                fault: Fault::judged(failure, name(), sent, retry_on),
                class,
            },
        }
    }

    /// A successful answer: learn heads from it, keep the client's mark monotonic.
    fn finish(&self, p: ProviderId, body: Vec<u8>, value: Range<usize>, is_error: bool) -> CallOutcome {
        if let (Some(cache), false) = (&self.route.cache, is_error) {
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

impl<E: Exchange> Attempts<'_, '_, E> {
    /// A `safe` / `finalized` read's answer (`core::live::finality::check_answer` on the block `number` it shows):
    /// below the caller's mark for the tag it is lagging (the provider's tag is lowered, another is asked);
    /// above any block the pool believes exists it is never answered; otherwise it raises the provider's tag
    /// and, in `finish`, the caller's mark for the tag.
    fn check_tag(&self, i: ProviderId, body: Vec<u8>, value: Range<usize>) -> Verdict {
        let (Some(t), live) = (self.cx.tag, &self.route.live) else {
            return Verdict::Answer {
                body,
                value,
                is_error: false,
            };
        };
        let best = live.best_head.load(std::sync::atomic::Ordering::Relaxed);
        let ceiling = if best == 0 {
            0
        } else {
            best.saturating_add(live.rule.margin())
        };
        let shown = revealed_head(&self.cx.info, true, &body[value.clone()]);
        match shown.map(|n| (n, finality::check_answer(n, self.mark, ceiling))) {
            Some((n, TagCheck::Lagging)) => {
                live.slot(i).tags.lower(t, n);
                Verdict::Lagging {
                    answer: CallOutcome::Answer {
                        body,
                        value,
                        is_error: false,
                        how: How::from(i),
                    },
                }
            }
            Some((_, TagCheck::Implausible)) => Verdict::Reroute {
                answer: CallOutcome::Failed(ProxyError::NotServed(
                    "The provider answered a block the chain cannot be at; retry shortly",
                )),
            },
            found => {
                if let Some((n, _)) = found {
                    live.slot(i).tags.raise(t, n);
                    self.head.set(Some(n));
                }
                Verdict::Answer {
                    body,
                    value,
                    is_error: false,
                }
            }
        }
    }
}

/// An unknown error waiting for a second opinion: who answered it, how fast, and the answer itself.
struct Dispute {
    provider: ProviderId,
    latency_us: u64,
    key: BlameKey,
    answer: CallOutcome,
}

enum Verdict {
    Answer {
        body: Vec<u8>,
        value: Range<usize>,
        is_error: bool,
    },
    /// Not this provider's to answer (unsupported here, data unavailable here): another may.
    Reroute { answer: CallOutcome },
    /// The provider answered from below the client's mark.
    Lagging { answer: CallOutcome },
    /// An error no rule knows, on a read: whose fault it is takes a second opinion.
    Disputed { answer: CallOutcome, key: BlameKey },
    /// The attempt failed (`core::call::fault`: what may follow is decided there).
    Failed { fault: Fault, class: Class },
}

impl Verdict {
    fn class(&self) -> Class {
        match self {
            Verdict::Answer { .. } | Verdict::Lagging { .. } => Class::Success,
            Verdict::Reroute { .. } => Class::Unsupported,
            Verdict::Disputed { .. } => Class::Unknown,
            Verdict::Failed { class, .. } => *class,
        }
    }

    /// An answer revealing a head: learn it if plausible. One beyond 2^53 is malformed (the provider's
    /// failure); one the chain cannot be at is never answered (try another). `eth_blockNumber` or a "latest"
    /// block answered below the client's mark is lagging: learn the provider's real head, try another.
    fn check_head<E: Exchange>(self, a: &Attempts<'_, '_, E>, i: ProviderId, now_ms: u64) -> Verdict {
        a.head.set(None);
        if a.route.solana {
            return self.check_context_slot(a, i);
        }
        match self {
            Verdict::Answer {
                body,
                value,
                is_error: false,
            } if a.cx.latest => match revealed_head(&a.cx.info, a.cx.latest, &body[value.clone()])
                .map(|h| (h, a.route.live.observe_head_at(i, h, now_ms)))
            {
                Some((_, HeadVerdict::Malformed)) => Verdict::Failed {
                    fault: Fault {
                        error: ProxyError::NotServed(
                            "The provider answered a block height beyond 2^53: a malformed answer",
                        ),
                        sent: true,
                        retry_on: None,
                        node_answer: None,
                    },
                    class: Class::ProviderFailure,
                },
                Some((_, HeadVerdict::Implausible)) => Verdict::Reroute {
                    answer: CallOutcome::Failed(ProxyError::NotServed(
                        "The provider reported a block height the chain cannot be at; retry shortly",
                    )),
                },
                // `eth_blockNumber`, or a "latest" block whose number is below what this client has seen.
                Some((h, _)) if h < a.mark => {
                    a.route.live.lower_head(i, h);
                    Verdict::Lagging {
                        answer: CallOutcome::Answer {
                            body,
                            value,
                            is_error: false,
                            how: How::from(i),
                        },
                    }
                }
                found => {
                    a.head.set(found.map(|(h, _)| h));
                    Verdict::Answer {
                        body,
                        value,
                        is_error: false,
                    }
                }
            },
            Verdict::Answer {
                body,
                value,
                is_error: false,
            } if a.cx.tag.is_some() => a.check_tag(i, body, value),
            v => v,
        }
    }
}

impl Verdict {
    /// Solana: an answer's `context.slot` is the provider's slot (believed within its probe's bound) and must
    /// not take the caller's view of this side backwards: one below the caller's mark is lagging (try
    /// another provider); a believable one raises the mark in `finish`.
    fn check_context_slot<E: Exchange>(self, a: &Attempts<'_, '_, E>, i: ProviderId) -> Verdict {
        match self {
            Verdict::Answer {
                body,
                value,
                is_error: false,
            } => {
                let slot = object_field(&body[value.clone()], "context")
                    .and_then(|c| object_field(c, "slot"))
                    .and_then(|s| std::str::from_utf8(s).ok()?.parse::<u64>().ok());
                let answer = |body, value| Verdict::Answer {
                    body,
                    value,
                    is_error: false,
                };
                match slot {
                    // Lagging for this caller; still the provider's slot now (it moves `slot_now`).
                    Some(s) if s < a.mark => {
                        a.route.live.observe_answer_slot(i, s, a.ex.now_ms());
                        Verdict::Lagging {
                            answer: CallOutcome::Answer {
                                body,
                                value,
                                is_error: false,
                                how: How::from(i),
                            },
                        }
                    }
                    Some(s) => {
                        if a.route.live.observe_answer_slot(i, s, a.ex.now_ms()) {
                            a.head.set(Some(s));
                        }
                        answer(body, value)
                    }
                    None => answer(body, value),
                }
            }
            v => v,
        }
    }
}

/// The head height an answer reveals, if any.
pub(super) fn revealed_head(info: &MethodInfo, latest: bool, result: &[u8]) -> Option<u64> {
    match info.head {
        HeadHint::ResultIsHead => hex_quantity(result),
        HeadHint::BlockNumberField if latest => object_field(result, "number").and_then(hex_quantity),
        _ => None,
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
        &route.statics,
        live,
        &live.health.load(),
        ask,
        &Pressure::NONE,
        now,
        0,
        0.0,
    )
}

/// Exponential backoff for the `n`-th retry (1-based): full jitter draws from [0, cap].
fn backoff(policy: &prism_config::RetryPolicy, n: u32) -> Duration {
    let cap = policy
        .base_delay_ms
        .saturating_mul(1u64 << (n - 1).min(20))
        .min(policy.max_delay_ms);
    let ms = match policy.jitter {
        Jitter::Full => fastrand::u64(0..=cap),
        Jitter::Equal => cap / 2 + fastrand::u64(0..=cap / 2),
        Jitter::None => cap,
    };
    Duration::from_millis(ms)
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;

#[cfg(test)]
mod backoff_tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_jittered() {
        let policy = prism_config::RetryPolicy::default();
        for n in 1..10 {
            let cap = (120u64 << (n - 1)).min(2000);
            for _ in 0..50 {
                assert!(backoff(&policy, n).as_millis() as u64 <= cap);
            }
        }
        let none = prism_config::RetryPolicy {
            jitter: Jitter::None,
            ..Default::default()
        };
        assert_eq!(backoff(&none, 1), Duration::from_millis(120));
        assert_eq!(backoff(&none, 6), Duration::from_millis(2000));
    }
}
