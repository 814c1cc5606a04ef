//! The state of one call's retry loop ([`Attempts`]), worked out once from the call's facts before the first
//! attempt: whether it is a write, the mark its answer is held to, what routing is asked. The loop itself is
//! `forward`'s; one attempt's exchange is `hedged`'s, its verdict `verdict`'s, a dispute `dispute`'s.

use std::cell::Cell;

use prism_wire::rpc::methods::BlockRef;

use crate::call::ctx::CallCtx;
use crate::call::exchange::Exchange;
use crate::live::availability;
use crate::routing::route::NetworkRoute;
use crate::routing::router::Ask;

/// The retry loop of one call.
pub(super) struct Attempts<'r, 'c, E> {
    pub(super) ex: &'r E,
    pub(super) route: &'r NetworkRoute,
    /// The call, its block, head, tag and mark key (`core::call::ctx`).
    pub(super) cx: &'r CallCtx<'r, 'c>,
    pub(super) write: bool,
    pub(super) never_retry: bool,
    /// The least height this call may answer: the client's high-water mark when the call arrived (for a
    /// `safe` / `finalized` read, its mark for that tag), for a `latest` read raised to what this node's
    /// providers have shown lately less the tolerance; and which mark that is.
    pub(super) mark: u64,
    /// What `eth_blockNumber` answers when every provider is below `mark`: the highest of the client's mark
    /// and the head this node's providers showed lately (both heights the chain has reached).
    pub(super) synthesized: u64,
    pub(super) ask: Ask,
    /// The plausible head the last answer revealed (set by `check_head`, read by `finish`: scanned once).
    pub(super) head: Cell<Option<u64>>,
}

impl<'r, 'c, E: Exchange> Attempts<'r, 'c, E> {
    pub(super) fn new(ex: &'r E, route: &'r NetworkRoute, cx: &'r CallCtx<'r, 'c>) -> Self {
        let (call, info, block, caller) = (cx.call, cx.info, cx.block, cx.caller);
        let (latest, tag) = (cx.latest, cx.tag);
        let write = info.kind.sent_once();
        let own = route.live.marks.get(cx.mark_key);
        let tolerance = route.live.settings.hwm_tolerance;
        // A `latest` read is also held to what this node's providers have shown lately (less the tolerance):
        // the caller's mark reaches other nodes only through Redis, and it may have been answered that
        // height by one of them a moment ago.
        let held = if latest && tag.is_none() && route.policy.chain.single_chain() {
            route.live.held_head(|| ex.now_ms())
        } else {
            0
        };
        let mark = own.max(held.saturating_sub(tolerance));
        // eth_blockNumber and latest-tagged reads must come from a provider at or above the mark; other reads
        // may come from one within the tolerance. A read at block N prefers providers that have N.
        let mut min_head = if latest || route.policy.chain.every_answer_at_height() {
            mark
        } else {
            mark.saturating_sub(tolerance)
        };
        if let BlockRef::Number(n) = block {
            min_head = min_head.max(n);
        }
        // Solana's `minContextSlot` (the router's `floor`): prefer a provider that has reached it.
        min_head = min_head.max(caller.floor);
        let never_retry = route.policy.retry.never_retry.iter().any(|m| m == &*call.method);
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
}
