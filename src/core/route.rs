//! Per-shard routing state for one network: this shard's pools to each provider, the static facts routing
//! needs, and a handle to the network's shared live state.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::Ordering;

use super::blame::BlameMemory;
use super::breaker::Transition;
use super::cache::ResultCache;
use super::classify::Class;
use super::dedupe::InFlight;
use super::router::ProviderStatic;
use super::state::NetworkLive;
use super::subs::hub::SubHub;
use crate::config::Endpoint;
use crate::config::RetryPolicy;
use crate::rpc::methods::{Declared, Family};
use crate::rpc::ProviderId;
use crate::runtime::Shutdown;
use crate::telemetry::cause::{warn_change, Origin, Reason};
use crate::telemetry::metrics::AttemptResult;
use crate::telemetry::recorder::Recorder;
use crate::transport::UpstreamPool;
use std::net::SocketAddr;

/// One provider as seen by one shard: its name, this shard's pool to it, and this shard's requests in flight
/// there (count and the sum of their start times, so their mean age is known without a list).
pub struct Upstream {
    pub name: String,
    pub pool: UpstreamPool,
    /// Its WebSocket endpoint, when it has one (subscriptions, Solana's delegation feed).
    pub ws: Option<WsTarget>,
    pub in_flight: Cell<u32>,
    pub in_flight_started_ms: Cell<u64>,
    /// This shard's peak-EWMA latency per family (µs) and when it was last updated: a slow answer raises it
    /// at once, and it decays with time, so a provider that just turned slow is avoided before its slow
    /// answers move the 5-minute p50.
    pub recent_us: [Cell<f64>; 5],
    pub recent_at_ms: [Cell<u64>; 5],
}

/// A provider's WebSocket endpoint and its addresses, resolved at start-up.
#[derive(Debug, Clone)]
pub struct WsTarget {
    pub url: Endpoint,
    pub addrs: Arc<[SocketAddr]>,
}

impl Upstream {
    pub fn new(name: String, pool: UpstreamPool, ws: Option<WsTarget>) -> Upstream {
        Upstream {
            name,
            pool,
            ws,
            in_flight: Cell::new(0),
            in_flight_started_ms: Cell::new(0),
            recent_us: Default::default(),
            recent_at_ms: Default::default(),
        }
    }

    /// The peak-EWMA latency for `family` as of `now_ms`.
    fn recent_ms(&self, family: Family, now_ms: u64) -> f64 {
        let f = family as usize;
        let raw = self.recent_us[f].get();
        if raw == 0.0 {
            return 0.0;
        }
        // Hyperbolic decay: close enough to exponential here, and no exp() on the request path.
        let age = now_ms.saturating_sub(self.recent_at_ms[f].get()) as f64;
        raw / (1.0 + age / RECENT_DECAY_MS) / 1000.0
    }

    /// Feeds one client call's latency (probes stay out: one slow health method must not push a provider's
    /// client traffic away).
    pub fn observe_latency(&self, family: Family, latency_us: u64, now_ms: u64) {
        let f = family as usize;
        let decayed = self.recent_ms(family, now_ms) * 1000.0;
        let x = latency_us as f64;
        // Peak: a slower answer takes over at once; faster ones pull it down gradually.
        let next = if x >= decayed { x } else { decayed * 0.7 + x * 0.3 };
        self.recent_us[f].set(next);
        self.recent_at_ms[f].set(now_ms);
    }
}

/// Time constant of the recent-latency decay.
const RECENT_DECAY_MS: f64 = 2_000.0;
/// A recent latency this many times the family's p50, and at least `RECENT_FLOOR_MS`, marks a provider
/// stalled.
const RECENT_FLOOR_MS: f64 = 50.0;

/// In-flight requests this much older than a provider's p50 (and at least `STALL_FLOOR_MS` old) mark it
/// stalled for routing.
pub const STALL_FACTOR: f64 = 4.0;
pub const STALL_FLOOR_MS: f64 = 250.0;

/// Counts one request in flight at an upstream for as long as it lives (also when the client goes away and
/// the request future is dropped).
pub struct InFlightGuard<'a> {
    up: &'a Upstream,
    started_ms: u64,
}

impl<'a> InFlightGuard<'a> {
    pub fn new(up: &'a Upstream, now_ms: u64) -> Self {
        up.in_flight.set(up.in_flight.get() + 1);
        up.in_flight_started_ms.set(up.in_flight_started_ms.get() + now_ms);
        InFlightGuard { up, started_ms: now_ms }
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.up.in_flight.set(self.up.in_flight.get() - 1);
        self.up
            .in_flight_started_ms
            .set(self.up.in_flight_started_ms.get() - self.started_ms);
    }
}

/// The time limits of submissions (from `[limits]`).
#[derive(Debug, Clone, Copy)]
pub struct SubmitLimits {
    /// Kept at the end of a submission's deadline to look it up (at most a third of the deadline).
    pub lookup: Duration,
    /// `eth_sendRawTransactionSync`'s wait when the call names none, and the longest one it may name.
    pub sync_default: Duration,
    pub sync_max: Duration,
}

impl Default for SubmitLimits {
    fn default() -> Self {
        SubmitLimits {
            lookup: Duration::from_millis(1_500),
            sync_default: Duration::from_millis(10_000),
            sync_max: Duration::from_millis(60_000),
        }
    }
}

/// What the limits of `eth_getLogs` splitting are on one network (from config, per generation).
#[derive(Debug, Clone)]
pub struct LogsSettings {
    /// Sub-ranges in flight at once for one call.
    pub concurrency: usize,
    /// The largest merged answer held (`limits.max_response_bytes`).
    pub max_bytes: usize,
    /// Each provider's declared limits, by slot.
    pub declared: Vec<DeclaredLimits>,
}

impl Default for LogsSettings {
    fn default() -> Self {
        LogsSettings {
            concurrency: 4,
            max_bytes: 64 * 1024 * 1024,
            declared: Vec::new(),
        }
    }
}

/// A provider's `max_logs_range` and `max_logs_results`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeclaredLimits {
    pub range: Option<u64>,
    pub results: Option<u64>,
}

pub struct NetworkRoute {
    /// Index of the network in the config (and in the recorder).
    pub index: usize,
    pub name: String,
    /// By provider slot. Shared with the route of the generation before when the provider is unchanged, so
    /// its connections and in-flight counts carry over a reload.
    pub upstreams: Vec<Rc<Upstream>>,
    pub statics: Vec<ProviderStatic>,
    pub live: Arc<NetworkLive>,
    pub retry: RetryPolicy,
    /// Hedged reads (`[policy.hedge]`) and this shard's budget for them; each provider's operator index.
    pub hedge: super::hedge::Hedging,
    pub hedge_budget: super::hedge::HedgeBudget,
    pub operators: Vec<u16>,
    pub recorder: Rc<Recorder>,
    /// Rotation counter for ties (and for round robin, `round_robin`).
    pub rotation: Cell<usize>,
    /// Round robin's own rotation, advanced only by round-robin callers' attempts. With one counter, every
    /// other choice in between (Prism's own calls: a Solana delegation record read before each new account's
    /// read; other strategies' ties) moved the sequence a round-robin key saw, and a key whose every read
    /// was preceded by one such call got the same provider every time.
    pub round_robin: Cell<usize>,
    /// This shard's deterministic-result cache for the network (`None` when disabled).
    pub cache: Option<Rc<ResultCache>>,
    pub cache_depth: u64,
    /// This shard's in-flight reads (`None` when deduplication is disabled).
    pub inflight: Option<Rc<InFlight>>,
    /// This shard's client subscriptions and upstream WebSocket links, shared by every generation's route
    /// of the network: a subscription outlives a reload.
    pub subs: Rc<SubHub>,
    /// The network's newest route on this shard, which the hub's tasks follow (see [`Newest`]).
    pub newest: Newest,
    /// This shard's verdicts on errors the classifier does not know (see `core::blame`).
    pub blame: Rc<BlameMemory>,
    pub ws_tls: Option<Arc<rustls::ClientConfig>>,
    pub connect_timeout_ms: u64,
    /// Upstream WebSocket liveness (`limits.upstream_ws_ping_ms`; `None` = off).
    pub ws_ping: Option<std::time::Duration>,
    pub shutdown: Shutdown,
    /// A Solana network: probed with `getHealth`, and its slots are not one chain's heads (the base layer and
    /// each ER run their own clocks), so they feed no drift.
    pub solana: bool,
    /// The methods this network's config declares reads or writes, applied over the method table.
    pub declared: Declared,
    /// Deadlines of transaction submissions and their lookups.
    pub submit: SubmitLimits,
    /// A reload replaced this route: its probers stop (the new route's probe instead); calls and WebSocket
    /// sessions that hold it finish on it.
    pub superseded: Cell<bool>,
    /// How wide `eth_getLogs` calls are split (`core::logs`): concurrency, byte cap, declared limits.
    pub logs: LogsSettings,
    /// Upstream call bodies between calls (`core::forward` builds each call's in one and gives it back);
    /// `SpareBufs::small` bounds it.
    pub bodies: crate::http1::SpareBufs,
}

/// The newest route of one network on one shard, shared by all its generations. The subscription hub's
/// tasks (links, their supervisor, deliveries) look it up each time they need a route, so after a reload
/// they move topics to providers the reload added, and they keep running when the route they started on
/// is dropped.
#[derive(Clone, Default)]
pub struct Newest(Rc<std::cell::RefCell<std::rc::Weak<NetworkRoute>>>);

impl Newest {
    pub fn get(&self) -> Option<Rc<NetworkRoute>> {
        self.0.borrow().upgrade()
    }

    pub fn set(&self, route: &Rc<NetworkRoute>) {
        *self.0.borrow_mut() = Rc::downgrade(route);
    }
}

impl NetworkRoute {
    /// Providers whose requests from this shard have been in flight, on average, far longer than their
    /// usual latency for `family`.
    pub fn stalled(&self, family: Family, now_ms: u64) -> u64 {
        let mut mask = 0u64;
        let mut health = None;
        for (i, up) in self.upstreams.iter().enumerate().take(64) {
            // How slow the provider looks right now: the mean age of this shard's requests in flight there
            // (from `STALL_FLOOR_MS`), or its recent peak latency (from `RECENT_FLOOR_MS`). Most providers
            // have neither and stop here, without reading the health snapshot.
            let n = up.in_flight.get() as u64;
            let mean_age = up
                .in_flight_started_ms
                .get()
                .checked_div(n)
                .map_or(0.0, |started| now_ms.saturating_sub(started) as f64);
            let aged = if mean_age >= STALL_FLOOR_MS { mean_age } else { 0.0 };
            // The undecayed value bounds the decayed one.
            let recent = if up.recent_us[family as usize].get() >= RECENT_FLOOR_MS * 1000.0 {
                up.recent_ms(family, now_ms)
            } else {
                0.0
            };
            let slow_ms = aged.max(if recent >= RECENT_FLOOR_MS { recent } else { 0.0 });
            if slow_ms == 0.0 {
                continue;
            }
            let h = health.get_or_insert_with(|| self.live.health.load());
            let p50_ms = h
                .providers
                .get(i)
                .map_or(0.0, |p| p.figures(family).p50_us as f64 / 1000.0);
            if slow_ms > STALL_FACTOR * p50_ms {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// Whose error codes this network's providers speak.
    pub fn dialect(&self) -> crate::core::classify::Dialect {
        if self.solana {
            crate::core::classify::Dialect::Solana
        } else {
            crate::core::classify::Dialect::Evm
        }
    }

    pub fn next_rotation(&self) -> usize {
        let r = self.rotation.get();
        self.rotation.set(r.wrapping_add(1));
        r
    }

    /// Provider `i` answered `error`: when it is "Node is behind by N slots", it leaves rotation
    /// (`NetworkLive::told_behind`, `core::slots`), said once in the log.
    pub fn note_behind(&self, i: ProviderId, error: &[u8], now_ms: u64) {
        if let Some(told) = self.live.told_behind(i, error, now_ms) {
            if told.newly {
                tracing::warn!(network = %self.name, provider = %self.upstreams[i].name, behind = told.behind,
                    "provider says it is behind; excluded until its next probe says otherwise");
            }
        }
    }

    /// The next rotation for a call with `strategy` (see `round_robin`).
    pub fn next_rotation_for(&self, strategy: crate::config::Strategy) -> usize {
        if strategy != crate::config::Strategy::RoundRobin {
            return self.next_rotation();
        }
        let r = self.round_robin.get();
        self.round_robin.set(r.wrapping_add(1));
        r
    }
}

/// How long a throttled provider is left alone, and one out of quota.
pub const THROTTLE_PARK_MS: u64 = 1_000;
pub const QUOTA_PARK_MS: u64 = 60_000;

impl NetworkRoute {
    /// Feeds what one exchange with provider `i` meant into health: the latency window and metrics, the
    /// provider's leased quota, its breaker and parking, and the reason it failed (`telemetry::cause`).
    /// Client attempts and probes both come through here, so a 429 means the same to both; `by` says which
    /// (probes are counted apart) and whether it is the single half-open probe, for which an answer that is
    /// neither success nor failure ends the probe without a verdict. `now` is the exchange's end on
    /// `telemetry::clock` (the caller read the clock for the latency already).
    #[allow(clippy::too_many_arguments)]
    pub fn note_outcome(
        &self,
        i: ProviderId,
        family: Family,
        class: Class,
        reason: Option<Reason>,
        latency_us: u64,
        by: Origin,
        now: u64,
    ) {
        let p = &self.live.providers()[i];
        let result = class.attempt_result();
        let reason = reason.filter(|_| matches!(result, AttemptResult::Failed | AttemptResult::Throttled));
        self.recorder
            .record(self.index, i, family, latency_us, result, reason, by.is_probe());
        if p.quota_leased.load(Ordering::Relaxed) {
            p.quota_stock.fetch_sub(1, Ordering::Relaxed);
        }
        let name = &self.upstreams[i].name;
        let news = reason.is_some_and(|r| p.causes.record(r, by, now));
        let probe = by.half_open();
        match class {
            Class::ProviderFailure => match p.breaker.on_failure(now) {
                Transition::Opened => warn_change(&p.causes, &self.name, name, "breaker opened", reason, now),
                Transition::Reopened { cooldown_ms } => warn_change(
                    &p.causes,
                    &self.name,
                    name,
                    &format!("breaker reopened for {cooldown_ms} ms"),
                    reason,
                    now,
                ),
                _ if probe => p.breaker.on_inconclusive(now),
                _ if news => warn_change(&p.causes, &self.name, name, "provider failing", reason, now),
                _ => {}
            },
            Class::Throttled | Class::QuotaExhausted => {
                let park = if class == Class::Throttled {
                    THROTTLE_PARK_MS
                } else {
                    QUOTA_PARK_MS
                };
                p.park_until(now + park);
                if class == Class::QuotaExhausted || news {
                    let what = if class == Class::QuotaExhausted {
                        "provider out of quota; parked for 60 s"
                    } else {
                        "provider rate limiting; parked for 1 s"
                    };
                    warn_change(&p.causes, &self.name, name, what, reason, now);
                }
                if probe {
                    p.breaker.on_inconclusive(now);
                }
            }
            Class::Unsupported | Class::DataUnavailable | Class::Unknown if probe => p.breaker.on_inconclusive(now),
            Class::Unsupported | Class::DataUnavailable | Class::Unknown => {}
            Class::Success | Class::UserError | Class::TooLarge => {
                if p.breaker.on_success(now) == Transition::Closed {
                    warn_change(&p.causes, &self.name, name, "breaker closed", None, now);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream() -> Upstream {
        let endpoint = crate::config::Endpoint::parse("http://127.0.0.1:1").unwrap();
        let settings = crate::transport::PoolSettings {
            max_idle: 1,
            idle_timeout: std::time::Duration::from_secs(1),
            connect_timeout: std::time::Duration::from_secs(1),
            max_response_bytes: 1 << 20,
            max_connections: 4,
        };
        Upstream::new(
            "p".into(),
            UpstreamPool::new(endpoint, Vec::new().into(), None, settings).unwrap(),
            None,
        )
    }

    #[test]
    fn recent_latency_jumps_on_a_slow_answer_and_decays_with_time() {
        let up = upstream();
        for t in 0..50 {
            up.observe_latency(Family::Submit, 2_000, t * 100);
        }
        assert!(up.recent_ms(Family::Submit, 5_000) < 3.0);
        up.observe_latency(Family::Submit, 1_200_000, 5_000);
        assert!(up.recent_ms(Family::Submit, 5_000) >= 1_199.0);
        assert!(up.recent_ms(Family::Submit, 7_000) < 700.0, "decays with time");
        assert!(up.recent_ms(Family::Light, 5_000) < 1.0, "per family");
        // Fast answers pull it down.
        for t in 0..20 {
            up.observe_latency(Family::Submit, 2_000, 5_000 + t);
        }
        assert!(up.recent_ms(Family::Submit, 5_020) < RECENT_FLOOR_MS);
    }
}
