//! What an upstream subscription socket says, and where each message goes: a notification to its topic's
//! delivery task (a log through the heads feed's when both share the socket), a reply to our
//! `eth_subscribe` to the topic it confirms or refuses.

use std::rc::Rc;

use super::hub::{Inbound, Link};
use super::supervisor::pick_ws_provider;
use super::TopicKind;
use crate::routing::route::NetworkRoute;
use prism_wire::jsonscan::{hex_quantity, object_field, plain_str};

/// What the hub reads in one message from an upstream subscription socket. Pure (no state), so fuzzing
/// reaches every byte an upstream can send here; never panics.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFrame<'a> {
    /// `{"method":"eth_subscription","params":{"subscription":ID,"result":...}}`: the raw `result`.
    Notification { subscription: &'a str, result: &'a [u8] },
    /// A reply to our `eth_subscribe` `id`: the upstream subscription id, `None` when it refused.
    Reply { id: u64, subscription: Option<&'a str> },
    /// Anything else (a notification without subscription or result, a reply without a numeric id).
    Ignored,
}

#[doc(hidden)]
pub fn parse_upstream_frame(text: &[u8]) -> UpstreamFrame<'_> {
    if let Some(params) = object_field(text, "params") {
        return match (
            object_field(params, "subscription").and_then(plain_str),
            object_field(params, "result"),
        ) {
            (Some(subscription), Some(result)) => UpstreamFrame::Notification { subscription, result },
            _ => UpstreamFrame::Ignored,
        };
    }
    match object_field(text, "id").and_then(prism_wire::jsonscan::plain_u64) {
        Some(id) => UpstreamFrame::Reply {
            id,
            subscription: object_field(text, "result").and_then(plain_str),
        },
        None => UpstreamFrame::Ignored,
    }
}

pub(super) fn on_upstream_message(route: &Rc<NetworkRoute>, link: &Link, text: &[u8]) {
    let (id, upstream) = match parse_upstream_frame(text) {
        UpstreamFrame::Notification { subscription, result } => {
            let key = link.by_upstream.borrow().get(subscription).cloned();
            if let Some(topic) = key.and_then(|k| route.shard.subs.topics.borrow().get(&k).cloned()) {
                if topic.kind == TopicKind::NewHeads {
                    if let Some(n) = object_field(result, "number").and_then(hex_quantity) {
                        // A head the chain cannot be at is never delivered (nor raises a mark or the watermark).
                        if !route.live.observe_head(link.provider, n).accepted() {
                            return;
                        }
                    }
                }
                // A log goes through the heads feed's delivery when the feed reads the same socket: the order
                // of heads and logs is then the node's (`logs::in_order`).
                let feed = match topic.kind {
                    TopicKind::Logs => route.shard.subs.heads.borrow().clone().filter(|h| {
                        h.upstream.provider.get() == Some(link.provider) && h.upstream.id.borrow().is_some()
                    }),
                    _ => None,
                };
                match feed {
                    Some(heads) => heads.hand_over(route, Inbound::Log(topic, result.to_vec())),
                    None => topic.hand_over(route, Inbound::Item(result.to_vec())),
                }
            }
            return;
        }
        UpstreamFrame::Reply { id, subscription } => (id, subscription),
        UpstreamFrame::Ignored => return,
    };
    let Some(key) = link.pending.borrow_mut().remove(&id) else {
        return;
    };
    let Some(upstream) = upstream else {
        tracing::warn!(network = %route.name, provider = %route.upstreams[link.provider].name, "upstream refused a subscription; trying another provider");
        let topic = route.shard.subs.topics.borrow().get(&key).cloned();
        if let Some(topic) = topic.filter(|t| t.upstream.provider.get() == Some(link.provider)) {
            topic.upstream.refused.borrow_mut().push(link.provider);
            let refused = topic.upstream.refused.borrow().clone();
            if let Some(next) = pick_ws_provider(route, &refused) {
                topic.upstream.provider.set(Some(next));
                route.shard.subs.link(route, next).subscribe(&key, &topic);
            }
        }
        return;
    };
    let topic = route.shard.subs.topics.borrow().get(&key).cloned();
    match topic {
        Some(topic) if topic.upstream.provider.get() == Some(link.provider) => {
            *topic.upstream.id.borrow_mut() = Some(upstream.to_string());
            link.by_upstream.borrow_mut().insert(upstream.to_string(), key);
            // Live logs from here on wait behind the backfill of what was missed (`logs::release`); heads
            // prove nothing to the cache until the next one is linked to what was delivered.
            topic.logs.backfilling.set(topic.kind == TopicKind::Logs);
            topic.heads.linked.set(false);
            topic.hand_over(route, Inbound::Resubscribed);
        }
        // The topic went away (or moved) while subscribing: release the upstream subscription.
        _ => link.send_unsubscribe(upstream),
    }
}
