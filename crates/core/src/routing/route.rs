//! Per-shard routing state for one network: this shard's pools to each provider, the static facts routing
//! needs, and a handle to the network's shared live state.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::Ordering;

use crate::judge::blame::BlameMemory;
use crate::judge::classify::Class;
use crate::live::breaker::Transition;
use crate::live::inflight::{Flight, FlightGuard, Pressure};
use crate::live::state::NetworkLive;
use crate::reuse::cache::ResultCache;
use crate::reuse::dedupe::InFlight;
use crate::routing::router::{Pool, ProviderStatic};
use crate::subs::hub::SubHub;
use prism_config::Endpoint;
use prism_config::RetryPolicy;
use prism_runtime::Shutdown;
use prism_telemetry::cause::{warn_change, Origin, Reason};
use prism_telemetry::metrics::AttemptResult;
use prism_telemetry::recorder::{Attempt, Recorder};
use prism_telemetry::snapshot::NetworkHealth;
use prism_transport::UpstreamPool;
use prism_wire::rpc::methods::{Declared, Family};
use prism_wire::rpc::ProviderId;
use std::net::SocketAddr;

/// One provider as seen by one shard: its name, this shard's pool to it, and this shard's calls there per
/// latency family (in flight, and their recent peak latency: `core::live::inflight`).
pub struct Upstream {
    pub name: String,
    pub pool: UpstreamPool,
    /// Its WebSocket endpoint, when it has one (subscriptions, Solana's delegation feed).
    pub ws: Option<WsTarget>,
    pub flights: [Flight; 5],
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
            flights: Default::default(),
        }
    }

    pub fn flight(&self, family: Family) -> &Flight {
        &self.flights[family as usize]
    }

    /// Feeds one client call's latency into the family's recent peak.
    pub fn observe_latency(&self, family: Family, latency_us: u64, now_ms: u64) {
        self.flight(family).observe(latency_us, now_ms);
    }

    /// Counts a call of `family` in flight here until the guard drops.
    pub fn in_flight(&self, family: Family, now_ms: u64) -> FlightGuard<'_> {
        FlightGuard::new(self.flight(family), now_ms)
    }
}

/// A recent peak latency this many times the family's p50, and at least `RECENT_FLOOR_MS`, marks a provider
/// stalled.
const RECENT_FLOOR_MS: f64 = 50.0;

/// In-flight requests this much older than a provider's p50 (and at least `STALL_FLOOR_MS` old) mark it
/// stalled for routing.
pub const STALL_FACTOR: f64 = 4.0;
pub const STALL_FLOOR_MS: f64 = 250.0;

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
    /// What the generation's config fixes for its calls (immutable while the route lives).
    pub policy: RoutePolicy,
    /// How this network's upstream WebSockets are reached.
    pub ws: WsSettings,
    /// What this shard owns for the network: its recorder, cache, dedupe, subscriptions, blame memory,
    /// hedge budget, learned sync support and spare bodies.
    pub shard: ShardServices,
    /// This shard's rotations and routing scratch.
    pub turns: Turns,
    /// Shutdown, and whether a reload replaced this route.
    pub life: Lifecycle,
}

/// What a generation's config fixes for one network's calls.
pub struct RoutePolicy {
    pub retry: RetryPolicy,
    /// Hedged reads (`[policy.hedge]`); each provider's operator index (a hedge goes to another operator).
    pub hedge: crate::routing::hedge::Hedging,
    pub operators: Vec<u16>,
    /// The methods this network's config declares reads or writes, applied over the method table.
    pub declared: Declared,
    /// Deadlines of transaction submissions and their lookups.
    pub submit: SubmitLimits,
    /// How wide `eth_getLogs` calls are split (`core::call::logs`): concurrency, byte cap, declared limits.
    pub logs: LogsSettings,
    /// Blocks below the head a cached answer must be to be kept (`cache_depth_blocks`).
    pub cache_depth: u64,
    /// The chain's rules (`core::chain`): how answers show heights, which errors mean what.
    pub chain: &'static dyn crate::chain::ChainRules,
}

/// How a network's upstream WebSockets are reached.
pub struct WsSettings {
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub connect_timeout_ms: u64,
    /// Upstream WebSocket liveness (`limits.upstream_ws_ping_ms`; `None` = off).
    pub ping: Option<std::time::Duration>,
}

/// What one shard owns for one network; carried over from the route before on a reload where it must
/// outlive it (cache, dedupe, subscriptions, blame memory).
pub struct ShardServices {
    pub recorder: Rc<Recorder>,
    /// This shard's deterministic-result cache for the network (`None` when disabled).
    pub cache: Option<Rc<ResultCache>>,
    /// This shard's in-flight reads (`None` when deduplication is disabled).
    pub inflight: Option<Rc<InFlight>>,
    /// This shard's client subscriptions and upstream WebSocket links, shared by every generation's route
    /// of the network: a subscription outlives a reload.
    pub subs: Rc<SubHub>,
    /// The network's newest route on this shard, which the hub's tasks follow (see [`Newest`]).
    pub newest: Newest,
    /// This shard's verdicts on errors the classifier does not know (see `core::judge::blame`).
    pub blame: Rc<BlameMemory>,
    /// This shard's budget for hedges (`core::routing::hedge`).
    pub hedge_budget: crate::routing::hedge::HedgeBudget,
    /// Which providers serve `eth_sendRawTransactionSync` themselves (declared, or learned on this shard).
    pub sync: crate::call::sync_submit::SyncSupport,
    /// Upstream call bodies between calls (`core::call::forward` builds each call's in one and gives it back);
    /// `SpareBufs::small` bounds it.
    pub bodies: prism_wire::http1::SpareBufs,
}

/// This shard's rotations and routing scratch for one network.
#[derive(Default)]
pub struct Turns {
    /// Rotation counter for ties (and for round robin, `round_robin`).
    pub rotation: Cell<usize>,
    /// Round robin's own rotation, advanced only by round-robin callers' attempts. With one counter, every
    /// other choice in between (Prism's own calls: a Solana delegation record read before each new account's
    /// read; other strategies' ties) moved the sequence a round-robin key saw, and a key whose every read
    /// was preceded by one such call got the same provider every time.
    pub round_robin: Cell<usize>,
    /// Where a routing decision reads this shard's calls in flight into (`NetworkRoute::pressure`), kept
    /// between decisions so a call's future does not carry it; borrowed only between two awaits.
    pub pressure: std::cell::RefCell<Pressure>,
}

/// A route's life on its shard.
pub struct Lifecycle {
    pub shutdown: Shutdown,
    /// A reload replaced this route: its probers stop (the new route's probe instead); calls and WebSocket
    /// sessions that hold it finish on it.
    pub superseded: Cell<bool>,
}

impl Lifecycle {
    pub fn new(shutdown: Shutdown) -> Lifecycle {
        Lifecycle {
            shutdown,
            superseded: Cell::new(false),
        }
    }
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

/// What one exchange with a provider came to, as its health hears of it ([`NetworkRoute::note_outcome`]).
#[derive(Debug, Clone, Copy)]
pub struct Heard {
    /// The latency family of the call (its window).
    pub family: Family,
    /// What the judge made of it: success, the provider's failure, throttled, the caller's error...
    pub class: Class,
    /// Why it failed or was throttled (`telemetry::cause`), when known.
    pub reason: Option<Reason>,
    pub latency_us: u64,
    /// Client traffic or a probe (and whether the single half-open probe).
    pub by: Origin,
    /// The exchange's end on `telemetry::clock` (ms).
    pub now: u64,
}

impl crate::call::outcome::ProviderNames for NetworkRoute {
    fn provider_name(&self, p: ProviderId) -> &str {
        self.upstreams.get(p.index()).map_or("?", |u| u.name.as_str())
    }
}

impl NetworkRoute {
    /// What this shard's calls of `family` in flight, and their recent answers, say about each provider
    /// now (`core::live::inflight`): fills `out` in place. A provider is stalled (the last tier, whatever the
    /// strategy) when the mean age of its calls in flight (from `STALL_FLOOR_MS`) or its recent peak (from
    /// `RECENT_FLOOR_MS`) is `STALL_FACTOR` times its p50; it is busy (ranked by cost) when it has calls in
    /// flight or a recent peak above `inflight::SLOW_FLOOR_US`. Most providers of a fast pool have neither
    /// and cost a few loads, without the health snapshot being read. Returns the stalled providers.
    pub fn pressure(&self, family: Family, now_ms: u64, out: &mut Pressure) -> u64 {
        out.clear();
        let mut stalled = 0u64;
        let mut health = None;
        for (i, up) in ProviderId::all(self.upstreams.len().min(ProviderId::MAX)).zip(&self.upstreams) {
            let f = up.flight(family);
            let pending = f.count();
            if pending == 0 && f.peak_bound_us() < crate::live::inflight::SLOW_FLOOR_US {
                continue;
            }
            // How slow it looks: the mean age of its calls in flight, or its recent peak.
            let age_ms = f.mean_age_ms(now_ms);
            let peak_ms = if f.peak_bound_us() >= crate::live::inflight::SLOW_FLOOR_US {
                f.peak_us(now_ms) / 1000.0
            } else {
                0.0
            };
            out.set(i, pending, age_ms.max(peak_ms) * 1000.0);
            let aged = if age_ms >= STALL_FLOOR_MS { age_ms } else { 0.0 };
            let recent = if peak_ms >= RECENT_FLOOR_MS { peak_ms } else { 0.0 };
            let slow_ms = aged.max(recent);
            if slow_ms == 0.0 {
                continue;
            }
            let h = health.get_or_insert_with(|| self.live.health.load());
            let p50_ms = h
                .providers
                .get(i.index())
                .map_or(0.0, |p| p.figures(family).p50_us as f64 / 1000.0);
            if slow_ms > STALL_FACTOR * p50_ms {
                stalled |= i.bit();
            }
        }
        stalled
    }

    /// Lets a call of `method` for key slot `key` go to provider `i`, counting what it costs there: its
    /// credits (the provider's price table, else one call) against the key's fair share of the provider's
    /// quota (`core::live::quota`), the provider's measured rate and leased quota, and the key's credits metric.
    /// `Err` when the key is over its share: the call must not be sent there. Nothing to do (two loads)
    /// when the provider has no price table and fair shares are off.
    pub fn admit(&self, i: ProviderId, method: &str, key: u32) -> Result<(), crate::live::quota::OverShare> {
        let table = self.statics.get(i.index()).and_then(|s| s.credits.as_deref());
        let quota = &self.live.quota;
        if table.is_none() && !quota.fair_on() {
            return Ok(());
        }
        let cost = table.map_or(1, |t| t.cost(method));
        if let Some(shares) = quota.shares(i) {
            if let Err(over) = shares.take(key as usize, cost) {
                self.shard.recorder.metrics().over_share(key as usize);
                return Err(over);
            }
        }
        if table.is_some() {
            quota.spent(i, cost);
            let p = &self.live.providers()[i];
            if p.peer.quota_leased.load(Ordering::Relaxed) {
                p.peer.quota_stock.fetch_sub(i64::from(cost), Ordering::Relaxed);
            }
            self.shard
                .recorder
                .metrics()
                .credits(self.index, key as usize, i, self.upstreams.len(), u64::from(cost));
        }
        Ok(())
    }

    /// The pool as this shard sees it now, for `choose` (`health`: the snapshot the caller loaded).
    pub fn pool<'a>(&'a self, health: &'a NetworkHealth, pressure: &'a Pressure, now_ms: u64) -> Pool<'a> {
        Pool {
            statics: &self.statics,
            live: &self.live,
            health,
            pressure,
            now_ms,
        }
    }

    /// Whose error codes this network's providers speak.
    pub fn dialect(&self) -> crate::judge::classify::Dialect {
        self.policy.chain.dialect()
    }

    pub fn next_rotation(&self) -> usize {
        let r = self.turns.rotation.get();
        self.turns.rotation.set(r.wrapping_add(1));
        r
    }

    /// The next rotation for a call with `strategy` (see `round_robin`).
    pub fn next_rotation_for(&self, strategy: prism_config::Strategy) -> usize {
        if strategy != prism_config::Strategy::RoundRobin {
            return self.next_rotation();
        }
        let r = self.turns.round_robin.get();
        self.turns.round_robin.set(r.wrapping_add(1));
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
    pub fn note_outcome(&self, i: ProviderId, heard: Heard) {
        let Heard {
            family,
            class,
            reason,
            latency_us,
            by,
            now,
        } = heard;
        let p = &self.live.providers()[i];
        let result = class.attempt_result();
        let reason = reason.filter(|_| matches!(result, AttemptResult::Failed | AttemptResult::Throttled));
        self.shard.recorder.record(
            self.index,
            i,
            Attempt {
                family,
                latency_us,
                result,
                reason,
                probe: by.is_probe(),
            },
        );
        if p.peer.quota_leased.load(Ordering::Relaxed) && self.statics[i].credits.is_none() {
            p.peer.quota_stock.fetch_sub(1, Ordering::Relaxed);
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
