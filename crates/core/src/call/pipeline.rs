//! One call's way through the core: answered locally (`eth_chainId`), from the cache, by joining an
//! identical read in flight, as a submission (`core::call::submit`), or by the retry loop (`core::call::forward`).
//! The edge and the subscriptions hub call [`forward`]; the Solana router calls the retry loop directly.

use std::cell::Cell;
use std::time::Instant;

use prism_telemetry::metrics::Reuse;
use prism_wire::rpc::methods::{Finality, Kind, MethodId};
use prism_wire::rpc::Call;

use crate::call::ctx::CallCtx;
use crate::call::exchange::Live;
use crate::call::forward::forward_with;
use crate::call::outcome::{CallOutcome, Caller, ProxyError, Source};
use crate::call::submit::{submit, Submission};
use crate::chain::revealed_head;
use crate::live::marks::MarkKey;
use crate::reuse::cache::{answer_cacheable, request_pin, Anchor, Proof};
use crate::reuse::canon::canonical_key;
use crate::reuse::dedupe::Role;
use crate::routing::route::NetworkRoute;

/// Forwards `call` on `route` and returns the answer the client should see.
pub async fn forward(
    route: &NetworkRoute,
    call: &Call<'_>,
    caller: &Caller,
    deadline: Instant,
    ids: &Cell<u64>,
) -> CallOutcome {
    let info = route.policy.declared.lookup(&call.method);
    // The call's block, head, tag and mark are worked out once here, for every stage after.
    let cx = CallCtx::new(route, call, info, caller, deadline, ids);
    match info.kind {
        Kind::Local => {
            if let Some(answer) = local_answer(route, info.id) {
                return answer;
            }
        }
        Kind::Subscription => {
            return CallOutcome::Failed(ProxyError::Unsupported(
                "Subscriptions need a WebSocket connection (eth_subscribe over HTTP is not possible)",
            ))
        }
        Kind::Write => {
            if let Some(kind) = Submission::of(info.id) {
                return submit(route, &cx, kind).await;
            }
        }
        Kind::Unknown => route.shard.recorder.metrics().unknown_method(),
        // A key's verified reads: several providers, one pinned block, no cache or dedupe.
        // Boxed: rare, and inline its state would enlarge every call's future.
        Kind::Read if caller.verify.covers(&call.method) => {
            return Box::pin(crate::call::verify::verified(route, &cx)).await;
        }
        _ => {}
    }
    if info.kind == Kind::Read && (route.shard.cache.is_some() || route.shard.inflight.is_some()) {
        if let Some(key) = canonical_key(&call.method, &info, call.params) {
            return reuse_or_forward(route, &cx, key).await;
        }
    }
    send(route, &cx).await
}

/// The retry loop, or for `eth_getLogs` `core::call::logs` (split to fit providers' limits, through the same loop).
async fn send(route: &NetworkRoute, cx: &CallCtx<'_, '_>) -> CallOutcome {
    if cx.info.id == MethodId::GetLogs {
        return crate::call::logs::get_logs(route, cx).await;
    }
    forward_with(&Live, route, cx).await
}

/// A read: answered from the cache when its answer can never change, joined to an identical read already
/// in flight, or sent upstream as the leader of any that arrive meanwhile.
async fn reuse_or_forward(route: &NetworkRoute, cx: &CallCtx<'_, '_>, key: Vec<u8>) -> CallOutcome {
    let metrics = route.shard.recorder.metrics();
    let (call, info, block, caller) = (cx.call, &cx.info, cx.block, cx.caller);
    let head = route.live.heads.best_head.load(std::sync::atomic::Ordering::Relaxed);
    let finalized = route.live.tags.agreed(Finality::Finalized);
    let pin = route
        .shard
        .cache
        .as_ref()
        .and_then(|_| request_pin(info, block, call.params, head, route.policy.cache_depth, finalized));
    if let (Some(cache), Some(_)) = (&route.shard.cache, pin) {
        // An answer about a block not yet final is proven by this shard's heads feed (`core::reuse::cache`).
        let proof = Proof {
            finalized,
            heads: route.shard.subs.heads_current(head, route.live.settings.hwm_tolerance),
        };
        if let Some(value) = cache.get(&key, proof) {
            metrics.reuse(Reuse::CacheHit);
            return CallOutcome::result(value.to_vec()).with_how(|how| how.source = Source::Hit);
        }
        metrics.reuse(Reuse::CacheMiss);
    }
    let store = |outcome: &CallOutcome, key: Vec<u8>| {
        if let (
            Some(cache),
            Some(pin),
            CallOutcome::Answer {
                body, value, is_error, ..
            },
        ) = (&route.shard.cache, pin, outcome)
        {
            let value = &body[value.clone()];
            if answer_cacheable(info.id, value, *is_error) {
                let anchor = cache.anchor(pin, info.id, value, finalized);
                if !matches!(anchor, Some(Anchor::Forever)) {
                    // Only a heads feed can prove it (`core::reuse::cache`): the shard's sweeper starts one.
                    route.shard.subs.want_heads();
                }
                if let Some(anchor) = anchor {
                    cache.insert(key, value, anchor);
                }
            }
        }
    };
    let Some(inflight) = &route.shard.inflight else {
        let outcome = send(route, cx).await;
        store(&outcome, key);
        return outcome;
    };
    // Head-sensitive reads only join callers held to the same high-water mark. The cache key is only kept
    // (cloned) when the answer may be cached; otherwise it becomes the join key as it is.
    let (mut join_key, cache_key) = if pin.is_some() {
        (key.clone(), Some(key))
    } else {
        (key, None)
    };
    if cx.latest || cx.tag.is_some() {
        match caller.mark {
            MarkKey::Key(k) => join_key.extend_from_slice(&(k as u64).to_le_bytes()),
            MarkKey::Session(h) => join_key.extend_from_slice(&h.to_le_bytes()),
        }
        join_key.push(u8::from(matches!(caller.mark, MarkKey::Session(_))));
    }
    match inflight.join_or_lead(join_key) {
        Role::Follower(slot) => {
            metrics.reuse(Reuse::Joined);
            match slot.wait().await {
                // The mark may have risen while the shared call was in flight: a head below it is not ours.
                Some(outcome) if !below_mark(route, cx, &outcome) => outcome,
                // Below the mark, or the leader's client went away before it finished: ask ourselves.
                _ => send(route, cx).await,
            }
        }
        Role::Leader(leader) => {
            let outcome = send(route, cx).await;
            if let Some(key) = cache_key {
                store(&outcome, key);
            }
            leader.finish(&outcome);
            outcome
        }
    }
}

/// Whether a shared answer reveals a head below the caller's current high-water mark (for a `safe` /
/// `finalized` read, its mark for that tag; for a `latest` read, also what this node's providers showed
/// lately less the tolerance, as the retry loop holds it).
fn below_mark(route: &NetworkRoute, cx: &CallCtx<'_, '_>, outcome: &CallOutcome) -> bool {
    let (latest, tag) = (cx.latest, cx.tag);
    match outcome {
        CallOutcome::Answer {
            body,
            value,
            is_error: false,
            ..
        } => revealed_head(&cx.info, latest || tag.is_some(), &body[value.clone()]).is_some_and(|h| {
            let held = match (latest, tag) {
                (true, None) => route
                    .live
                    .held_head(prism_telemetry::clock::now_ms)
                    .saturating_sub(route.live.settings.hwm_tolerance),
                _ => 0,
            };
            h < route.live.marks.get(cx.mark_key).max(held)
        }),
        _ => false,
    }
}

/// `eth_chainId` / `net_version` from config: every serving provider was checked to match it.
fn local_answer(route: &NetworkRoute, id: MethodId) -> Option<CallOutcome> {
    let chain = route.live.settings.chain_id?;
    let value = match id {
        MethodId::ChainId => format!("\"0x{chain:x}\""),
        MethodId::NetVersion => format!("\"{chain}\""),
        _ => return None,
    };
    Some(CallOutcome::result(value.into_bytes()).with_how(|how| how.source = Source::Hit))
}
