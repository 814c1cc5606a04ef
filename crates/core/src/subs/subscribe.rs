//! Clients joining and leaving topics: identical subscriptions share one topic, a topic is opened on the best
//! provider with a WebSocket and closed with its last client, and the `["newHeads"]` topic is kept without
//! clients while the cache or a logs topic needs it (the heads feed).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;

use super::delivery::{spawn_delivery, TOPIC_INBOX};
use super::hub::{HeadsState, LogsState, SubHub, Subscriber, Topic, Upstream};
use super::supervisor::pick_ws_provider;
use super::{Outbox, SubscribeError, TopicKind};
use crate::live::marks::MarkKey;
use crate::routing::route::NetworkRoute;
use prism_runtime::queue::LocalQueue;
use prism_wire::jsonscan::{nth_element, plain_str};
use prism_wire::rpc::wire::write_json_str;

impl SubHub {
    /// Subscribes a client. Returns Prism's subscription id.
    pub fn subscribe(
        route: &Rc<NetworkRoute>,
        params: &[u8],
        out: &Outbox,
        mark: MarkKey,
    ) -> Result<String, SubscribeError> {
        // A session opened before a reload holds an older route; new topics go by the newest one.
        let newest = route.shard.newest.get();
        let route = newest.as_ref().unwrap_or(route);
        let kind = match nth_element(params, 0).and_then(plain_str) {
            Some("newHeads") => TopicKind::NewHeads,
            Some("logs") => TopicKind::Logs,
            Some("newPendingTransactions") => TopicKind::PendingTransactions,
            Some(other) => {
                return Err(SubscribeError::Unsupported(format!(
                    "subscription {other:?} is not supported"
                )))
            }
            None => {
                return Err(SubscribeError::Unsupported(
                    "eth_subscribe needs a subscription name".into(),
                ))
            }
        };
        let hub = &route.shard.subs;
        let key = topic_key(params).ok_or_else(|| SubscribeError::Unsupported("invalid subscription params".into()))?;
        let id = new_subscription_id();
        let existing = hub.topics.borrow().get(&key).cloned();
        let topic = match existing {
            Some(t) => t,
            None => open_topic(route, key.clone(), kind, params)?,
        };
        if kind == TopicKind::Logs {
            // A logs topic learns of reorgs from the heads feed.
            SubHub::keep_heads_for(route);
        }
        let mut id_json = Vec::with_capacity(id.len() + 2);
        write_json_str(&mut id_json, &id);
        topic.subscribers.borrow_mut().push(Rc::new(Subscriber {
            id: id.clone(),
            id_json: id_json.into(),
            out: out.clone(),
            mark,
            last_head: Cell::new(route.live.marks.get(mark)),
            got_heads: Cell::new(false),
        }));
        hub.clients.borrow_mut().insert(id.clone(), key);
        Ok(id)
    }

    /// Removes a client subscription; the upstream one goes when its last client leaves.
    pub fn unsubscribe(route: &NetworkRoute, id: &str) -> bool {
        let hub = &route.shard.subs;
        let Some(key) = hub.clients.borrow_mut().remove(id) else {
            return false;
        };
        let topic = hub.topics.borrow().get(&key).cloned();
        if let Some(topic) = topic {
            topic.subscribers.borrow_mut().retain(|s| s.id != id);
            // The heads feed stays while the cache or a logs topic needs it.
            if topic.subscribers.borrow().is_empty() && !topic.internal.get() {
                hub.topics.borrow_mut().remove(&key);
                if hub.heads.borrow().as_ref().is_some_and(|h| Rc::ptr_eq(h, &topic)) {
                    *hub.heads.borrow_mut() = None;
                }
                topic.inbox.borrow().close();
                route.shard.recorder.metrics().subscription(topic.kind, -1);
                if let (Some(p), Some(upstream)) =
                    (topic.upstream.provider.get(), topic.upstream.id.borrow_mut().take())
                {
                    if let Some(link) = hub.links.borrow().get(&p) {
                        link.by_upstream.borrow_mut().remove(&upstream);
                        link.send_unsubscribe(&upstream);
                    }
                }
            }
        }
        true
    }

    /// Starts the heads feed if the cache asked for one (called by the shard's sweeper, every 100 ms) and a
    /// provider has a WebSocket.
    pub fn keep_heads(route: &Rc<NetworkRoute>) {
        if route.shard.subs.heads_wanted.get()
            && route.shard.subs.heads.borrow().is_none()
            && route.upstreams.iter().any(|u| u.ws.is_some())
        {
            SubHub::keep_heads_for(route);
        }
    }

    /// Makes sure the `["newHeads"]` topic exists, and keeps it without subscribers: the heads feed.
    fn keep_heads_for(route: &Rc<NetworkRoute>) {
        if !route.policy.chain.single_chain() {
            return;
        }
        let existing = route.shard.subs.heads.borrow().clone();
        let topic = match existing {
            Some(t) => t,
            None => {
                let params = br#"["newHeads"]"#;
                let Some(key) = topic_key(params) else { return };
                match open_topic(route, key, TopicKind::NewHeads, params) {
                    Ok(t) => t,
                    Err(_) => return, // no provider with a WebSocket: only final answers are served
                }
            }
        };
        topic.internal.set(true);
    }
}

/// The canonical key of a subscription's params: identical subscriptions share a topic.
fn topic_key(params: &[u8]) -> Option<Vec<u8>> {
    crate::reuse::canon::canonical_key(
        "eth_subscribe",
        &prism_wire::rpc::methods::lookup("eth_subscribe"),
        Some(params),
    )
}

/// A new topic, subscribed upstream on the best provider with a WebSocket; the `["newHeads"]` one becomes
/// the hub's heads feed.
fn open_topic(
    route: &Rc<NetworkRoute>,
    key: Vec<u8>,
    kind: TopicKind,
    params: &[u8],
) -> Result<Rc<Topic>, SubscribeError> {
    let hub = &route.shard.subs;
    let provider = pick_ws_provider(route, &[]).ok_or(SubscribeError::NoProvider)?;
    let topic = Rc::new(Topic {
        kind,
        params: params.to_vec(),
        upstream: Upstream::on(provider),
        subscribers: RefCell::new(Vec::new()),
        inbox: RefCell::new(LocalQueue::new(TOPIC_INBOX)),
        internal: Cell::new(false),
        watermark: Cell::new(route.live.heads.best_head.load(Ordering::Relaxed)),
        heads: HeadsState::default(),
        logs: LogsState::default(),
    });
    hub.topics.borrow_mut().insert(key.clone(), topic.clone());
    if Some(key.as_slice()) == topic_key(br#"["newHeads"]"#).as_deref() {
        *hub.heads.borrow_mut() = Some(topic.clone());
    }
    spawn_delivery(route, &topic, true);
    hub.ensure_supervisor(route);
    let link = hub.link(route, provider);
    link.subscribe(&key, &topic);
    route.shard.recorder.metrics().subscription(kind, 1);
    Ok(topic)
}

fn new_subscription_id() -> String {
    format!("0x{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}
