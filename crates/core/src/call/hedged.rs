//! One attempt of the retry loop at one provider, hedged when the read qualifies and the provider is late
//! (`core::routing::hedge`): the second request goes to another operator's provider, the first good answer
//! wins and the loser is dropped.

use std::time::Instant;

use prism_transport::{TransportError, UpstreamResponse};
use prism_wire::rpc::ProviderId;

use crate::call::attempts::Attempts;
use crate::call::exchange::Exchange;
use crate::routing::router::{choose, Choice, Draw};
use prism_wire::rpc::methods::Kind;

/// One (possibly hedged) exchange.
pub(super) struct Exchanged {
    pub(super) provider: ProviderId,
    pub(super) started: Instant,
    pub(super) result: Result<UpstreamResponse, TransportError>,
    pub(super) hedge: Option<ProviderId>,
}

impl<E: Exchange> Attempts<'_, '_, E> {
    /// One attempt at provider `i`, hedged when the read qualifies and `i` is late (`core::routing::hedge`): the
    /// provider whose answer it is (`i`, or the hedge's), when that exchange started, its result, and the
    /// provider a hedge went to. The loser is dropped: a connection whose answer was not read in full is
    /// closed, never reused.
    pub(super) async fn exchange(
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
        route.shard.hedge_budget.earn(route.policy.hedge.per_attempt);
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
            .filter(|_| route.shard.hedge_budget.spend(late.degraded))
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
        route.shard.recorder.metrics().hedge(won);
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
    pub(super) fn hedge_delay(&self, i: ProviderId) -> Option<crate::routing::hedge::Lateness> {
        let hedging = &self.route.policy.hedge;
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
    pub(super) fn not_for_hedge(&self, i: ProviderId) -> u64 {
        self.ask.exclude | i.bit() | crate::routing::hedge::same_operator(&self.route.policy.operators, i)
    }

    /// Where a hedge of an attempt at `i` goes: the router's choice among the providers of other operators
    /// this call may still use.
    pub(super) fn hedge_target(&self, i: ProviderId) -> Option<ProviderId> {
        let route = self.route;
        let mut ask = self.ask;
        ask.exclude = self.not_for_hedge(i);
        let now = self.ex.now_ms();
        let mut pressure = route.turns.pressure.borrow_mut();
        ask.stalled = route.pressure(self.cx.info.family, now, &mut pressure);
        match choose(
            &route.pool(&route.live.health.load(), &pressure, now),
            &ask,
            Draw {
                rotation: route.next_rotation(),
                dice: fastrand::f64(),
            },
        ) {
            Choice::Provider(j) => Some(j),
            _ => None,
        }
    }
}
