//! `newHeads` delivery: every head is linked to the chain delivered before it by its `parentHash`.
//!
//! - The next block (its parent is the last head delivered): delivered.
//! - A gap (the head is more than one above the last): the missing heights are fetched by number first
//!   (`eth_getBlockByNumber`, at most [`MAX_BACKFILL_HEADS`]) and each is linked the same way.
//! - A reorg (its parent is not the head delivered at the height below; geth and anvil announce the
//!   replaced heights again, some nodes only the new head): the new blocks are fetched by parent hash
//!   (`eth_getBlockByHash`) back to a block delivered before, the fork. Every block above the fork is then
//!   delivered again, once, in order, so each delivered head's parent is the head delivered before it at
//!   the height below. While the new chain is still below the height delivered (the node rolled back and
//!   has not built past it yet), its blocks are held and delivered together once it gets there: a client's
//!   head never goes down. Logs topics learn the fork at once (`logs::on_reorg`).
//! - A head already delivered (the same hash at that height), or one that links to nothing delivered and is
//!   not above it (a provider behind the others, on the old chain): dropped.
//!
//! Every head (delivered or held) goes into the cache's chain record as the heads feed's, so a reorg the
//! node announces drops the cached answers it made stale before the next read (`core::reuse::cache`).
//!
//! Providers disagreeing is not a reorg: a head is only ever linked to what *this topic's* provider
//! delivered, and a topic that moves to another provider starts from what was delivered (a provider behind
//! repeats heights already delivered with the same hashes: dropped).

use super::fan_out::{fan_out, Frame};
use super::hub::{HeadsState, Topic};
use super::read::fetch;
use super::{logs, MAX_BACKFILL_HEADS};
use crate::live::chain::{Hash, Named};
use crate::reuse::cache::named_block;
use crate::routing::route::NetworkRoute;
use prism_wire::rpc::methods::MethodId;

/// A head from the topic's provider (or rebuilt after an overflow): a gap is backfilled first.
pub(super) async fn deliver(route: &NetworkRoute, topic: &Topic, result: Vec<u8>) {
    let Some(head) = named(&result) else {
        return;
    };
    let last = topic.watermark.get();
    if last != 0 && head.number > last + 1 && !topic.heads.delivered.borrow().is_empty() {
        let from = (last + 1).max(head.number.saturating_sub(MAX_BACKFILL_HEADS));
        for h in from..head.number {
            match fetch(route, "eth_getBlockByNumber", &format!(r#"["0x{h:x}",false]"#)).await {
                Some(block) if block != b"null" => {
                    route.shard.recorder.metrics().ws_backfilled(true, 1);
                    accept(route, topic, block).await;
                    logs::release_all(route);
                }
                _ => break,
            }
        }
    }
    accept(route, topic, result).await;
    topic.heads.linked.set(true);
    logs::release_all(route);
}

/// A head's number, hash and parent (a block object's).
fn named(block: &[u8]) -> Option<Named> {
    named_block(MethodId::GetBlockByNumber, block).or_else(|| {
        // A node that sends no (or an odd) hash still gets its heads delivered in order, unlinked.
        let number =
            prism_wire::jsonscan::object_field(block, "number").and_then(prism_wire::jsonscan::hex_quantity)?;
        Some(Named {
            number,
            hash: [0; 32],
            parent: None,
        })
    })
}

fn hex(h: &Hash) -> String {
    let mut s = String::with_capacity(66);
    s.push_str("0x");
    for b in h {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

impl HeadsState {
    /// The hash delivered at `height`.
    fn delivered_at(&self, height: u64) -> Option<Hash> {
        let d = self.delivered.borrow();
        let first = d.front()?.0;
        let i = height.checked_sub(first)? as usize;
        d.get(i).filter(|(n, _)| *n == height).map(|(_, h)| *h)
    }

    /// The block the topic holds at `height`: a held reorg's first, else the delivered chain's.
    pub(super) fn block_at(&self, height: u64) -> Option<Hash> {
        let held = self
            .pending
            .borrow()
            .iter()
            .find(|(b, _)| b.number == height)
            .map(|(b, _)| b.hash);
        held.or_else(|| self.delivered_at(height))
    }

    /// The height delivered last.
    pub(super) fn top(&self) -> Option<u64> {
        self.delivered.borrow().back().map(|(n, _)| *n)
    }

    /// Appends `b` to the delivered chain, forgetting whatever was delivered at its height and above (as
    /// replaced, unless it is `b` itself).
    fn push_delivered(&self, b: &Named) {
        let mut d = self.delivered.borrow_mut();
        while let Some(&(n, h)) = d.back().filter(|(n, _)| *n >= b.number) {
            d.pop_back();
            if (n, h) != (b.number, b.hash) {
                let mut replaced = self.replaced.borrow_mut();
                replaced.push_back(h);
                if replaced.len() > MAX_BACKFILL_HEADS as usize {
                    replaced.pop_front();
                }
            }
        }
        if d.back().is_some_and(|(n, _)| *n + 1 != b.number) {
            d.clear(); // not contiguous: start over from this head
        }
        d.push_back((b.number, b.hash));
        while d.len() > MAX_BACKFILL_HEADS as usize {
            d.pop_front();
        }
    }
}

/// The heads feed's view of one block, into the cache's chain record.
fn record(route: &NetworkRoute, b: &Named) {
    if b.parent.is_none() {
        return;
    }
    if let Some(cache) = &route.shard.cache {
        let dropped = cache.observe(*b, true);
        if dropped > 0 {
            tracing::info!(network = %route.name, height = b.number, dropped, "reorg announced: cached answers about the replaced blocks dropped");
        }
    }
}

/// Blocks from a head back towards the delivered chain, oldest first, each with its bytes.
type Branch = Vec<(Named, Vec<u8>)>;

/// Links one head to the delivered chain and delivers what that makes deliverable.
async fn accept(route: &NetworkRoute, topic: &Topic, result: Vec<u8>) {
    let Some(head) = named(&result) else {
        return;
    };
    if topic.heads.delivered_at(head.number) == Some(head.hash) && head.parent.is_some() {
        return; // already delivered
    }
    // The next block of a held reorg.
    let extends_held = topic
        .heads
        .pending
        .borrow()
        .last()
        .is_some_and(|(b, _)| head.parent == Some(b.hash) && head.number == b.number + 1);
    if extends_held {
        record(route, &head);
        topic.heads.pending.borrow_mut().push((head, result));
        release_held(route, topic);
        return;
    }
    // Anything else abandons a held reorg (the node moved on to another chain; this head says which).
    topic.heads.pending.borrow_mut().clear();
    let Some(top) = topic.heads.top() else {
        start(route, topic, &head, &result);
        return;
    };
    if head.parent.is_none() {
        // Nothing to link by: in order, as heights only.
        if head.number > top {
            topic.heads.push_delivered(&head);
            deliver_block(route, topic, &head, &result, false);
        }
        return;
    }
    let (branch, linked) = walk_to_fork(route, &topic.heads, head, result).await;
    // Oldest first, so a reorg reaches the record at its fork, exactly.
    for (b, _) in &branch {
        record(route, b);
    }
    topic.heads.resolving.set(false);
    if linked {
        deliver_linked(route, topic, branch, top);
    } else {
        // No block delivered before is its ancestor within reach: heights above the delivered ones are
        // delivered in order (as before there were reorgs); anything else is a provider behind.
        for (b, bytes) in branch.iter().filter(|(b, _)| b.number > top) {
            topic.heads.push_delivered(b);
            deliver_block(route, topic, b, bytes, false);
        }
    }
}

/// The first head since nothing was delivered: one at or above where the topic started is delivered (at
/// it: the node replaced its head block since). Its parent is the head the topic started on: a reorg from
/// there links to it.
fn start(route: &NetworkRoute, topic: &Topic, head: &Named, result: &[u8]) {
    record(route, head);
    if let (Some(parent), Some(below)) = (head.parent, head.number.checked_sub(1)) {
        topic.heads.push_delivered(&Named {
            number: below,
            hash: parent,
            parent: None,
        });
    }
    topic.heads.push_delivered(head);
    if head.number >= topic.watermark.get() {
        deliver_block(route, topic, head, result, false);
    }
}

/// Walks back from `head` by parent hash to a block delivered before: the fork. The cache proves nothing
/// meanwhile (`resolving`, which the caller clears once the branch is recorded). Walking past the oldest
/// head remembered is a reorg deeper than that: all of it is replaced. Returns the branch, oldest first,
/// and whether it links to the delivered chain.
async fn walk_to_fork(route: &NetworkRoute, heads: &HeadsState, head: Named, result: Vec<u8>) -> (Branch, bool) {
    let mut branch = vec![(head, result)];
    let linked = loop {
        let b = branch[0].0;
        let (Some(parent), Some(below)) = (b.parent, b.number.checked_sub(1)) else {
            break false;
        };
        match heads.delivered_at(below) {
            Some(h) if h == parent => break true,
            None if heads.delivered.borrow().front().is_none_or(|(first, _)| below < *first) => {
                break heads
                    .delivered
                    .borrow()
                    .front()
                    .is_some_and(|(first, _)| b.number == *first);
            }
            _ => {}
        }
        if branch.len() as u64 >= MAX_BACKFILL_HEADS {
            break false;
        }
        heads.resolving.set(true);
        let block = fetch(route, "eth_getBlockByHash", &format!(r#"["{}",false]"#, hex(&parent))).await;
        match block.as_deref().and_then(named) {
            Some(p) if p.hash == parent && p.number == below && p.parent.is_some() => {
                branch.insert(0, (p, block.unwrap_or_default()));
            }
            _ => break false,
        }
    };
    (branch, linked)
}

/// A branch linked to the delivered chain (`top`: the height delivered): a reorg when its fork is below
/// `top` (logs topics learn it at once), delivered now when it reaches `top`, else held until it does.
fn deliver_linked(route: &NetworkRoute, topic: &Topic, branch: Branch, top: u64) {
    let fork = branch[0].0.number.saturating_sub(1);
    if fork < top {
        tracing::info!(network = %route.name, fork, replaced = top - fork, "reorg announced: replaced heights are delivered again");
        route.shard.recorder.metrics().ws_reorg();
        logs::on_reorg(route, fork);
    }
    if branch.last().is_some_and(|(b, _)| b.number < top) {
        // The new chain has not reached the height delivered yet: held until it does.
        *topic.heads.pending.borrow_mut() = branch;
        return;
    }
    for (b, bytes) in &branch {
        topic.heads.push_delivered(b);
        deliver_block(route, topic, b, bytes, b.number <= top);
    }
}

/// Delivers a held reorg once its chain reaches the height delivered before it.
fn release_held(route: &NetworkRoute, topic: &Topic) {
    let top = topic.heads.top().unwrap_or(0);
    let reached = topic
        .heads
        .pending
        .borrow()
        .last()
        .is_some_and(|(b, _)| b.number >= top);
    if !reached {
        return;
    }
    let held = std::mem::take(&mut *topic.heads.pending.borrow_mut());
    for (b, bytes) in &held {
        topic.heads.push_delivered(b);
        deliver_block(route, topic, b, bytes, b.number <= top);
    }
}

fn deliver_block(route: &NetworkRoute, topic: &Topic, b: &Named, bytes: &[u8], replacing: bool) {
    let frame = if replacing {
        Frame::Replacing(b.number)
    } else {
        Frame::Head(b.number)
    };
    fan_out(route, topic, bytes, frame);
    topic.watermark.set(topic.watermark.get().max(b.number));
}
