//! The health prober: independent of traffic, every provider is asked `eth_blockNumber` (`getHealth` on
//! Solana) every `probe_interval_ms` (and `eth_chainId` until it matches the configured chain). Each provider is probed
//! by exactly one shard, so probe load does not grow with cores. Probes feed latency, breakers (the single
//! half-open probe is one of these) and heads, then re-evaluate drift for the pool. On EVM every
//! [`TAG_EVERY`]th probe also asks for the `safe` and `finalized` blocks (not of a provider that answered them
//! with an error: it does not serve them), and a floor learned from a "missing trie node" answer is re-asked
//! every [`FLOOR_RECHECK_PROBES`] probe intervals (`core::live::availability`). Neither feeds breakers or latency:
//! `eth_blockNumber` is the health probe.

use std::time::{Duration, Instant};

use prism_core::judge::classify::Class;
use prism_core::judge::{judge, Judged};
use prism_core::live::breaker::BreakerState;
use prism_core::live::slots::SlotChange;
use prism_core::live::state::{ChainCheck, HeadVerdict, MAX_HEIGHT};
use prism_core::routing::route::{Heard, NetworkRoute};
use prism_runtime::Shutdown;
use prism_telemetry::cause::{warn_change, Origin, Reason};
use prism_telemetry::clock::now_ms;
use prism_wire::jsonscan::{hex_quantity, object_field};
use prism_wire::rpc::methods::{Family, Finality};
use prism_wire::rpc::wire::write_upstream_call;
use prism_wire::rpc::ProviderId;

/// Longest a probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Tags are asked on one probe in this many: they move slower than the head and cost two calls.
pub const TAG_EVERY: u64 = 4;

/// A learned floor is re-checked after this many probe intervals (5 minutes at the default 2 s).
pub const FLOOR_RECHECK_PROBES: u64 = 150;

/// Runs the probe loop for provider `i` of `route` on the current shard until shutdown.
pub async fn probe_loop(route: &NetworkRoute, i: ProviderId, interval: Duration, shutdown: &Shutdown) {
    let mut id = prism_wire::rpc::ids::PROBES;
    let mut round = 0u64;
    let recheck_ms = (interval.as_millis() as u64).saturating_mul(FLOOR_RECHECK_PROBES);
    // A reload that replaced the route starts its own probers: this one ends at its next tick.
    while !shutdown.is_triggered() && !route.life.superseded.get() {
        let started = Instant::now();
        if route.live.settings.chain_id.is_some() && route.live.providers()[i].chain() != ChainCheck::Ok {
            id += 1;
            check_chain(route, i, id).await;
        }
        // Tags before the head, so an honest provider's tags are never above the head it reports next.
        if route.policy.chain.single_chain() && round.is_multiple_of(TAG_EVERY) {
            id += 2;
            probe_tags(route, i, id).await;
        }
        round += 1;
        id += 1;
        probe_head(route, i, id).await;
        if route.policy.chain.single_chain() {
            route.live.recompute_tags();
            if let Some(block) = route.live.providers()[i].floor.recheck_due(now_ms(), recheck_ms) {
                id += 1;
                recheck_floor(route, i, id, block).await;
            }
        }
        let next = started + interval;
        until_tick_or_probe_due(route, i, next, shutdown).await;
    }
}

/// How often a sleeping prober looks whether its provider's breaker opened (and when its cooldown ends).
const BREAKER_LOOK_MS: u64 = 250;

/// Sleeps until `next`, or until this provider's breaker cooldown ends: its one half-open probe goes then,
/// not at the next tick (with `probe_interval_ms = 60000` and a 3 s cooldown a pool would otherwise wait a
/// minute for a provider that is back). A breaker may open while the prober sleeps, so it looks every
/// [`BREAKER_LOOK_MS`] (one atomic load): the probe is at most that late.
async fn until_tick_or_probe_due(route: &NetworkRoute, i: ProviderId, next: Instant, shutdown: &Shutdown) {
    loop {
        let now = Instant::now();
        if now >= next || shutdown.is_triggered() || route.life.superseded.get() {
            return;
        }
        let mut wake = next.min(now + Duration::from_millis(BREAKER_LOOK_MS));
        match route.live.providers()[i].breaker.state(now_ms()) {
            BreakerState::ProbeDue => return,
            BreakerState::Open { retry_in_ms } => wake = wake.min(now + Duration::from_millis(retry_in_ms)),
            _ => {}
        }
        futures_lite::future::or(
            async { prism_runtime::sleep(wake.saturating_duration_since(Instant::now())).await },
            shutdown.triggered(),
        )
        .await;
    }
}

/// Why a probe call gave no result: the class (a throttled provider is parked rather than counted, exactly
/// as for client traffic) and the reason it names.
#[derive(Debug, Clone, Copy)]
struct Miss {
    class: Class,
    reason: Option<Reason>,
}

impl Miss {
    const fn bad(reason: Reason) -> Miss {
        Miss {
            class: Class::ProviderFailure,
            reason: Some(reason),
        }
    }
}

/// One probe call, judged as client traffic is (`core::judge`).
async fn call(route: &NetworkRoute, i: ProviderId, id: u64, method: &str) -> Result<Vec<u8>, Miss> {
    call_with(route, i, id, method, b"[]").await
}

async fn call_with(route: &NetworkRoute, i: ProviderId, id: u64, method: &str, params: &[u8]) -> Result<Vec<u8>, Miss> {
    let mut body = Vec::with_capacity(64 + params.len());
    write_upstream_call(&mut body, id, method, Some(params));
    let result = route.upstreams[i]
        .pool
        .post(&body, Instant::now() + PROBE_TIMEOUT, true)
        .await;
    // A probe's answer is a few bytes: `light`, so one over the response limit is the provider's flood.
    let judged = judge(result, id, true, false, route.dialect());
    let causes = &route.live.providers()[i].causes;
    judged.log_broken(causes, now_ms, &route.name, &route.upstreams[i].name, method);
    let reason = judged.reason();
    match judged {
        Judged::Answer {
            body,
            value,
            is_error: false,
            ..
        } => Ok(body[value].to_vec()),
        // A chain whose nodes say what "unavailable" means for them is taken at its word, with or without
        // client traffic to hear it from (Solana's `getHealth`: "Node is behind by N slots", `core::live::slots`).
        Judged::Answer {
            body,
            value,
            is_error: true,
            class: Class::DataUnavailable,
            ..
        } if route
            .policy
            .chain
            .told_unavailable(&route.live, i, &body[value.clone()], now_ms()) =>
        {
            Err(Miss {
                class: Class::DataUnavailable,
                reason,
            })
        }
        // Prism's own call, without params: an error no rule knows is the provider's.
        Judged::Answer {
            class: Class::Unknown, ..
        } => Err(Miss::bad(Reason::RpcError)),
        judged => Err(Miss {
            class: judged.class(),
            reason,
        }),
    }
}

/// Solana: the provider's slot (`getSlot`, processed: the newest it has), then every provider's drift and
/// stall re-evaluated (`core::live::slots`). A failed `getSlot` says nothing new: `getHealth` already judged it.
async fn probe_slot(route: &NetworkRoute, i: ProviderId, id: u64) {
    let Ok(result) = call_with(route, i, id, "getSlot", br#"[{"commitment":"processed"}]"#).await else {
        return;
    };
    let Some(slot) = std::str::from_utf8(&result)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
    else {
        tracing::warn!(network = %route.name, provider = %route.upstreams[i].name, "getSlot answered no slot");
        return;
    };
    let now = now_ms();
    route.live.observe_probed_slot(i, slot, now);
    for (p, change) in route.live.update_slots(now) {
        let who = &route.upstreams[p].name;
        let (slot, _) = route.live.slot_of(p);
        match change {
            SlotChange::Drifted(true) => {
                tracing::warn!(network = %route.name, provider = %who, slot, "base-layer provider behind the others by more than max_slot_drift; excluded")
            }
            SlotChange::Drifted(false) => {
                tracing::warn!(network = %route.name, provider = %who, slot, "base-layer provider caught up; back in the pool")
            }
            SlotChange::Stalled(true) => {
                let stood_ms = route.live.stall_after_ms(p);
                let slot_ms = route.live.providers()[p].slots.clock.per_slot_us() as f64 / 1000.0;
                tracing::warn!(network = %route.name, provider = %who, slot, stood_ms, slot_ms, "slot stopped advancing; excluded")
            }
            SlotChange::Stalled(false) => {
                tracing::warn!(network = %route.name, provider = %who, slot, "slot advancing again; back in the pool")
            }
        }
    }
}

/// Asks provider `i` for its `safe` and `finalized` blocks (`eth_getBlockByNumber(tag, false)`): a number is
/// its tag now; an error answer (or no block) means it does not serve the tag, remembered so it is not asked
/// again; a failed call says nothing. Only while its breaker is closed: the head probe judges health.
async fn probe_tags(route: &NetworkRoute, i: ProviderId, id: u64) {
    let p = &route.live.providers()[i];
    if !p.breaker.is_closed() {
        return;
    }
    for (k, t) in Finality::ALL.into_iter().enumerate() {
        if p.tags.unsupported(t) {
            continue;
        }
        let params = if t == Finality::Safe {
            &br#"["safe",false]"#[..]
        } else {
            &br#"["finalized",false]"#[..]
        };
        match call_with(route, i, id + k as u64, "eth_getBlockByNumber", params).await {
            Ok(block) => match object_field(&block, "number").and_then(hex_quantity) {
                Some(n) if n <= MAX_HEIGHT => p.tags.set(t, n),
                _ => unsupported(route, i, t),
            },
            Err(Miss {
                class: Class::Unsupported | Class::UserError | Class::DataUnavailable,
                ..
            }) => unsupported(route, i, t),
            Err(_) => {}
        }
    }
}

fn unsupported(route: &NetworkRoute, i: ProviderId, t: Finality) {
    if route.live.providers()[i].tags.set_unsupported(t) {
        tracing::info!(network = %route.name, provider = %route.upstreams[i].name, tag = t.tag(),
            "provider does not serve this block tag; not asked again, its reads go to providers that do");
    }
}

/// Re-asks provider `i` for state at `block`, the highest block it was found to lack: an answer means it has
/// history there now, and its learned floor is forgotten; "missing trie node" again keeps it. Any other
/// outcome says nothing (the next check is another interval away).
async fn recheck_floor(route: &NetworkRoute, i: ProviderId, id: u64, block: u64) {
    let params = format!(r#"["0x0000000000000000000000000000000000000000","0x{block:x}"]"#);
    if let Ok(value) = call_with(route, i, id, "eth_getBalance", params.as_bytes()).await {
        if value.as_slice() != b"null" {
            route.live.providers()[i].floor.forget(block);
            tracing::info!(network = %route.name, provider = %route.upstreams[i].name, block,
                "provider has history again below its learned floor; older reads may go to it");
        }
    }
}

async fn check_chain(route: &NetworkRoute, i: ProviderId, id: u64) {
    let Some(expected) = route.live.settings.chain_id else {
        return;
    };
    let p = &route.live.providers()[i];
    let name = &route.upstreams[i].name;
    let result = match call(route, i, id, "eth_chainId").await {
        Ok(result) => result,
        // The head probe that follows judges health (breaker, metrics); the cause is said here, where
        // the provider is held back as unverified.
        Err(miss) => {
            if let Some(r) = miss.reason {
                let now = now_ms();
                if p.causes.record(r, Origin::Probe { half_open: false }, now) {
                    warn_change(&p.causes, &route.name, name, "chain id not confirmed", Some(r), now);
                }
            }
            return;
        }
    };
    match hex_quantity(&result) {
        Some(got) if got == expected => {
            p.set_chain(ChainCheck::Ok);
            tracing::info!(network = %route.name, provider = %name, chain_id = got, "chain id verified");
        }
        got => {
            if p.chain() != ChainCheck::Wrong {
                tracing::error!(network = %route.name, provider = %name, expected, got = ?got, reason = Reason::WrongChain.as_str(), "provider serves another chain; excluded");
            }
            p.causes
                .record(Reason::WrongChain, Origin::Probe { half_open: false }, now_ms());
            p.set_chain(ChainCheck::Wrong);
        }
    }
}

async fn probe_head(route: &NetworkRoute, i: ProviderId, id: u64) {
    let p = &route.live.providers()[i];
    let now = now_ms();
    let half_open = match p.breaker.state(now) {
        BreakerState::Closed => false,
        BreakerState::ProbeDue if p.breaker.try_probe(now) => true,
        _ => return, // cooling down, or another shard holds the half-open probe
    };
    let started = Instant::now();
    let result = call(route, i, id, route.policy.chain.head_probe()).await;
    let latency_us = started.elapsed().as_micros() as u64;
    let by = Origin::Probe { half_open };
    if !route.policy.chain.single_chain() {
        // Slots per side (Solana): `getHealth` answers "ok"; an unhealthy node answers an error (classified like client traffic).
        let miss = match &result {
            Ok(v) if v.as_slice() == b"\"ok\"" => Miss {
                class: Class::Success,
                reason: None,
            },
            Ok(_) => Miss::bad(Reason::RpcError),
            Err(miss) => *miss,
        };
        let class = miss.class;
        route.note_outcome(
            i,
            Heard {
                family: Family::Light,
                class,
                reason: miss.reason,
                latency_us,
                by,
                now: now_ms(),
            },
        );
        if class == Class::Success {
            probe_slot(route, i, id + (1 << 40)).await;
        }
        return;
    }
    // A height beyond 2^53 is no block height: a malformed answer, the provider's failure.
    let head = match &result {
        Ok(value) => hex_quantity(value).ok_or(Miss::bad(Reason::BadHead)),
        Err(miss) => Err(*miss),
    }
    .and_then(|head| match route.live.observe_probe(i, head) {
        HeadVerdict::Malformed => Err(Miss::bad(Reason::BadHead)),
        verdict => Ok(verdict),
    });
    match head {
        Ok(verdict) => {
            // An implausible head is an answer (the breaker is not the place for it): the provider is an
            // outlier until its heads are plausible again, and its head and the pool's stay as they were.
            route.note_outcome(
                i,
                Heard {
                    family: Family::Light,
                    class: Class::Success,
                    reason: None,
                    latency_us,
                    by,
                    now: now_ms(),
                },
            );
            if verdict == HeadVerdict::Implausible {
                return;
            }
            for (k, drifted) in route.live.update_drift() {
                let who = &route.upstreams[k].name;
                if drifted {
                    tracing::warn!(network = %route.name, provider = %who, best = route.live.heads.best_head.load(std::sync::atomic::Ordering::Relaxed), "provider drifted behind the pool; excluded");
                } else {
                    tracing::warn!(network = %route.name, provider = %who, "provider caught up; back in the pool");
                }
            }
        }
        // Throttled parks without counting, failures count, anything else ends a half-open probe undecided:
        // the same rules as for client traffic.
        Err(miss) => route.note_outcome(
            i,
            Heard {
                family: Family::Light,
                class: miss.class,
                reason: miss.reason,
                latency_us,
                by,
                now: now_ms(),
            },
        ),
    }
}
