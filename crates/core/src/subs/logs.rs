//! `logs` delivery: de-duplicated by (blockHash, logIndex, removed), backfilled with `eth_getLogs` after a
//! resubscription, and across reorgs as geth sends them: the logs of the blocks a reorg replaced are
//! delivered again with `"removed": true` (oldest first), then the new chain's logs.
//!
//! A node that sends removed logs itself (geth) has them passed on once; one that does not (anvil) has
//! Prism send them, from the logs it delivered, when the heads feed links a reorg (`heads`, [`on_reorg`]).
//! So that the removed logs come in their place, logs and heads are taken in the node's order: a logs
//! topic on the heads feed's socket hands its logs to the feed's delivery ([`in_order`]), where a log is
//! delivered once the feed holds its block (a node may send a block's logs just before its head), and
//! dropped if the feed replaced that block before it got there. A logs topic elsewhere waits for the feed
//! (at most [`WAIT_FOR_HEAD`]) the same way.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::fan_out::{fan_out, Frame};
use super::hub::Topic;
use super::read::fetch;
use super::{TopicKind, MAX_BACKFILL_HEADS};
use crate::live::chain::{parse_hash, Hash};
use crate::routing::route::NetworkRoute;
use prism_wire::jsonscan::{hex_quantity, nth_element, object_field, plain_str};

/// How many recent log ids are remembered to drop duplicates after a backfill.
const RECENT_LOGS: usize = 4096;
/// Logs kept to be sent again as removed (from at most `MAX_BACKFILL_HEADS` blocks below the newest).
const KEPT_LOGS: usize = 1024;
/// The longest a log waits for the heads feed to deliver its block.
const WAIT_FOR_HEAD: Duration = Duration::from_secs(1);

fn log_id(log: &[u8]) -> Option<Vec<u8>> {
    let mut id = object_field(log, "blockHash")?.to_vec();
    id.extend_from_slice(object_field(log, "logIndex")?);
    if let Some(removed) = object_field(log, "removed") {
        id.extend_from_slice(removed);
    }
    Some(id)
}

fn log_block(log: &[u8]) -> Option<(u64, Hash)> {
    let n = hex_quantity(object_field(log, "blockNumber")?)?;
    let h = parse_hash(plain_str(object_field(log, "blockHash")?)?)?;
    Some((n, h))
}

/// Remembers `id` as delivered; false when it was already.
fn first_time(topic: &Topic, id: Vec<u8>) -> bool {
    let mut recent = topic.logs.recent.borrow_mut();
    if recent.contains(&id) {
        return false;
    }
    recent.push_back(id);
    if recent.len() > RECENT_LOGS {
        recent.pop_front();
    }
    true
}

/// Where a log's block stands with the heads feed.
enum Standing {
    /// Deliverable: the feed holds its block (or there is no feed to ask, or it says it was removed).
    Held,
    /// Its block was replaced: not news any more (and, if it was delivered, its removal has been sent).
    Gone,
    /// The feed has not delivered its block yet.
    Unknown,
}

fn standing(route: &NetworkRoute, log: &[u8]) -> Standing {
    let heads = route.shard.subs.heads.borrow().clone();
    let (Some(t), Some((n, h))) = (heads, log_block(log)) else {
        return Standing::Held;
    };
    if object_field(log, "removed") == Some(b"true") {
        return Standing::Held;
    }
    let up = t.upstream.id.borrow().is_some()
        && t.upstream.provider.get().is_some_and(|p| {
            route
                .shard
                .subs
                .links
                .borrow()
                .get(&p)
                .is_some_and(|l| l.connected.get())
        });
    match t.heads.block_at(n) {
        _ if !up => Standing::Held,
        Some(x) if x == h => Standing::Held,
        _ if t.heads.replaced.borrow().contains(&h) => Standing::Gone,
        // The feed is past this height with another block there (at the top itself, the block the log is
        // from may be the one announced next).
        Some(_) if t.heads.top().is_some_and(|top| top > n) && t.heads.pending.borrow().is_empty() => Standing::Gone,
        _ => Standing::Unknown,
    }
}

/// A log the heads feed's delivery took in the node's order: delivered once the feed holds its block.
pub(super) fn in_order(route: &NetworkRoute, topic: &Topic, log: Vec<u8>) {
    topic.logs.waiting.borrow_mut().push_back(log);
    release(route, topic);
}

/// Every logs topic's waiting logs, after the heads feed delivered a head.
pub(super) fn release_all(route: &NetworkRoute) {
    let waiting: Vec<Rc<Topic>> = route
        .shard
        .subs
        .topics
        .borrow()
        .values()
        .filter(|t| t.kind == TopicKind::Logs && !t.logs.waiting.borrow().is_empty())
        .cloned()
        .collect();
    for t in waiting {
        release(route, &t);
    }
}

/// The backfill after a (re)subscription is over: the live logs that waited behind it go now.
pub(super) fn backfilled(route: &NetworkRoute, topic: &Topic) {
    topic.logs.backfilling.set(false);
    release(route, topic);
}

/// Delivers `topic`'s waiting logs in order while their blocks are held (dropping those of replaced blocks);
/// stops at the first whose block the feed has not delivered yet (past [`KEPT_LOGS`] waiting, the oldest
/// goes anyway), and waits for a backfill in progress.
fn release(route: &NetworkRoute, topic: &Topic) {
    if topic.logs.backfilling.get() && topic.logs.waiting.borrow().len() <= KEPT_LOGS {
        return;
    }
    loop {
        let state = match topic.logs.waiting.borrow().front() {
            None => return,
            Some(log) => standing(route, log),
        };
        let crowded = topic.logs.waiting.borrow().len() > KEPT_LOGS;
        if matches!(state, Standing::Unknown) && !crowded {
            return;
        }
        let Some(log) = topic.logs.waiting.borrow_mut().pop_front() else {
            return;
        };
        if !matches!(state, Standing::Gone) {
            deliver_now(route, topic, &log);
        }
    }
}

/// One log from the topic's own delivery (its provider's socket is not the heads feed's, or a backfill):
/// it waits (at most [`WAIT_FOR_HEAD`]) for the heads feed to deliver its block.
pub(super) async fn deliver(route: &NetworkRoute, topic: &Topic, log: &[u8]) {
    let until = Instant::now() + WAIT_FOR_HEAD;
    loop {
        match standing(route, log) {
            Standing::Gone => return,
            Standing::Unknown if Instant::now() < until => {
                prism_runtime::sleep(Duration::from_millis(5)).await;
            }
            _ => break,
        }
    }
    deliver_now(route, topic, log);
}

/// Delivers one log now: dropped if already delivered, kept (to send again removed after a reorg).
fn deliver_now(route: &NetworkRoute, topic: &Topic, log: &[u8]) {
    if let Some(id) = log_id(log) {
        if !first_time(topic, id) {
            return;
        }
    }
    if let Some((n, h)) = log_block(log) {
        let mut kept = topic.logs.kept.borrow_mut();
        if object_field(log, "removed") == Some(b"true") {
            // The node sent it removed itself: it is not Prism's to send again.
            let index = object_field(log, "logIndex");
            kept.retain(|(_, bh, l)| !(*bh == h && object_field(l, "logIndex") == index));
        } else {
            kept.push_back((n, h, Rc::from(log)));
            while kept.len() > KEPT_LOGS || kept.front().is_some_and(|(b, ..)| b + MAX_BACKFILL_HEADS < n) {
                kept.pop_front();
            }
            topic.watermark.set(topic.watermark.get().max(n));
        }
    }
    fan_out(route, topic, log, Frame::Plain);
}

/// The heads feed linked a reorg at `fork`: every logs topic sends the logs it delivered from blocks above
/// it again, flagged `"removed": true`, oldest first.
pub(super) fn on_reorg(route: &NetworkRoute, fork: u64) {
    let topics: Vec<Rc<Topic>> = route
        .shard
        .subs
        .topics
        .borrow()
        .values()
        .filter(|t| t.kind == TopicKind::Logs)
        .cloned()
        .collect();
    for t in topics {
        let gone: Vec<Rc<[u8]>> = {
            let mut kept = t.logs.kept.borrow_mut();
            let (stay, gone): (Vec<_>, Vec<_>) = kept.drain(..).partition(|(n, ..)| *n <= fork);
            kept.extend(stay);
            gone.into_iter().map(|(.., l)| l).collect()
        };
        for log in gone {
            let removed = with_removed(&log);
            if let Some(id) = log_id(&removed) {
                first_time(&t, id);
            }
            fan_out(route, &t, &removed, Frame::Plain);
        }
        // The new chain's logs are still to come: a backfill after a resubscription starts at the fork.
        t.watermark.set(t.watermark.get().min(fork + 1));
    }
}

/// The log with `"removed": true` (its `removed` member replaced, or added when it has none).
fn with_removed(log: &[u8]) -> Vec<u8> {
    if let Some(v) = object_field(log, "removed") {
        let start = v.as_ptr() as usize - log.as_ptr() as usize;
        let mut out = Vec::with_capacity(log.len() + 1);
        out.extend_from_slice(&log[..start]);
        out.extend_from_slice(b"true");
        out.extend_from_slice(&log[start + v.len()..]);
        return out;
    }
    let end = log.iter().rposition(|&b| b == b'}').unwrap_or(log.len());
    let mut out = log[..end].to_vec();
    out.extend_from_slice(br#","removed":true"#);
    out.extend_from_slice(&log[end..]);
    out
}

/// After a resubscription: fetch logs from the block of the last one delivered (a socket can die half-way
/// through a block) up to the provider's latest; the (blockHash, logIndex) window drops what was delivered.
pub(super) async fn backfill(route: &NetworkRoute, topic: &Topic) {
    let from = topic.watermark.get();
    let filter = nth_element(&topic.params, 1).unwrap_or(b"{}");
    let mut params = format!(r#"[{{"fromBlock":"0x{from:x}","toBlock":"latest""#).into_bytes();
    for field in ["address", "topics"] {
        if let Some(v) = object_field(filter, field) {
            params.extend_from_slice(format!(r#","{field}":"#).as_bytes());
            params.extend_from_slice(v);
        }
    }
    params.extend_from_slice(b"}]");
    let Some(logs) = fetch(route, "eth_getLogs", std::str::from_utf8(&params).unwrap_or("[]")).await else {
        return;
    };
    let mut i = 0;
    let mut delivered = 0;
    while let Some(log) = nth_element(&logs, i) {
        let before = topic.logs.recent.borrow().len();
        deliver(route, topic, log).await;
        if topic.logs.recent.borrow().len() != before {
            delivered += 1;
        }
        i += 1;
    }
    if delivered > 0 {
        route.shard.recorder.metrics().ws_backfilled(false, delivered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_log_is_the_log_flagged_removed() {
        assert_eq!(
            with_removed(br#"{"logIndex":"0x0","removed":false,"data":"0x"}"#),
            br#"{"logIndex":"0x0","removed":true,"data":"0x"}"#
        );
        assert_eq!(
            with_removed(br#"{"logIndex":"0x0"} "#),
            br#"{"logIndex":"0x0","removed":true} "#
        );
        let log = br#"{"blockHash":"0xab","logIndex":"0x1","removed":false}"#;
        assert_ne!(log_id(log), log_id(&with_removed(log)), "a removed log is news");
    }
}
