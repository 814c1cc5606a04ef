//! Subscriptions that survive providers, one hub per shard per network.
//!
//! Clients subscribe to *topics* (`newHeads`, `logs` with a filter, `newPendingTransactions`); identical
//! subscriptions on a shard share one upstream subscription. Each topic lives on one provider's WebSocket
//! link at a time. A link that drops reconnects with backoff and replays every topic it carries; a topic
//! whose provider's breaker opens, or that falls behind, moves to another provider. Client subscription ids
//! are Prism's own, so they never change when the socket or provider behind them does.
//!
//! Every topic has one delivery task, so ordering is decided in one place. Heads (`heads`): each is linked
//! to the chain delivered before it by its parent; a gap is backfilled with `eth_getBlockByNumber` first, and
//! a reorg the node announces (a head whose parent is not the last one delivered) is delivered as the node
//! shows it: the replaced heights again, with their new blocks, once each and in order, so every delivered
//! head's parent is the head delivered before it at the height below. Logs (`logs`): missed ones are
//! backfilled with `eth_getLogs` and de-duplicated by (blockHash, logIndex); the logs of blocks a reorg
//! replaced are delivered again with `"removed": true` before the new ones, as geth sends them.
//!
//! The `["newHeads"]` topic is also the shard's *heads feed*: kept without subscribers while logs topics or
//! the cache need it (`SubHub::keep_heads`), it records every delivered head in the cache's chain record,
//! which is how a reorg reaches cached answers (`core::reuse::cache`) and logs topics.

use prism_wire::rpc::ProviderId;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ahash::AHashMap;

use crate::call::outcome::{CallOutcome, Caller};
use crate::call::pipeline::forward;
use crate::live::marks::MarkKey;
use crate::routing::route::{NetworkRoute, Newest};
use prism_runtime::queue::{LocalQueue, PushError};
use prism_runtime::{sleep, spawn};
use prism_transport::ws::{connect_ws, pump, PumpEnd, Reconnect};
use prism_wire::jsonscan::{hex_quantity, nth_element, object_field, plain_str};
use prism_wire::rpc::wire::write_json_str;
use prism_wire::rpc::Call;

use async_tungstenite::tungstenite::Message;

pub use prism_wire::rpc::TopicKind;

/// Most heads backfilled across one gap (a longer outage resumes from the newest head), most blocks walked
/// back to find a reorg's fork, how many delivered heads a topic remembers to link new ones to, and how
/// many blocks back a logs topic keeps what it delivered (to send it again removed).
const MAX_BACKFILL_HEADS: u64 = 128;

mod heads;
pub mod hub;
mod logs;

use hub::{Inbound, Link, Subscriber, Topic};
pub use hub::{Note, Outbox, Outgoing, SubHub};

/// Why a subscription was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscribeError {
    Unsupported(String),
    NoProvider,
}

impl SubHub {
    /// Subscribes a client. Returns Prism's subscription id.
    pub fn subscribe(
        route: &Rc<NetworkRoute>,
        params: &[u8],
        out: &Outbox,
        mark: MarkKey,
    ) -> Result<String, SubscribeError> {
        // A session opened before a reload holds an older route; new topics go by the newest one.
        let newest = route.newest.get();
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
        let hub = &route.subs;
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
        let hub = &route.subs;
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
                route.recorder.metrics().subscription(topic.kind, -1);
                if let (Some(p), Some(upstream)) = (topic.provider.get(), topic.upstream_id.borrow_mut().take()) {
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
        if route.subs.heads_wanted.get()
            && route.subs.heads.borrow().is_none()
            && route.upstreams.iter().any(|u| u.ws.is_some())
        {
            SubHub::keep_heads_for(route);
        }
    }

    /// Makes sure the `["newHeads"]` topic exists, and keeps it without subscribers: the heads feed.
    fn keep_heads_for(route: &Rc<NetworkRoute>) {
        if route.solana {
            return;
        }
        let existing = route.subs.heads.borrow().clone();
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

    fn link(&self, route: &Rc<NetworkRoute>, provider: ProviderId) -> Rc<Link> {
        if let Some(l) = self.links.borrow().get(&provider) {
            return l.clone();
        }
        let link = Rc::new(Link {
            provider,
            out: RefCell::new(None),
            pending: RefCell::new(AHashMap::new()),
            by_upstream: RefCell::new(AHashMap::new()),
            next_id: Cell::new(prism_wire::rpc::ids::WS_LINK),
            connected: Cell::new(false),
            failures: Cell::new(0),
        });
        self.links.borrow_mut().insert(provider, link.clone());
        let newest = route.newest.clone();
        let l = link.clone();
        spawn(async move { run_link(newest, l).await });
        link
    }

    /// Moves topics off providers that became unusable, every 250 ms while any topic exists.
    fn ensure_supervisor(&self, route: &Rc<NetworkRoute>) {
        if self.supervisor.replace(true) {
            return;
        }
        let newest = route.newest.clone();
        spawn(async move {
            loop {
                sleep(Duration::from_millis(250)).await;
                let Some(route) = newest.get() else { return };
                if route.shutdown.is_triggered() {
                    return;
                }
                let topics: Vec<(Vec<u8>, Rc<Topic>)> = route
                    .subs
                    .topics
                    .borrow()
                    .iter()
                    .map(|(k, t)| (k.clone(), t.clone()))
                    .collect();
                for (key, topic) in topics {
                    let Some(p) = topic.provider.get() else { continue };
                    let link_down = route.subs.links.borrow().get(&p).is_some_and(|l| l.failures.get() >= 3);
                    if usable(&route, p) && !link_down {
                        continue;
                    }
                    let mut avoid = topic.refused.borrow().clone();
                    avoid.push(p);
                    let Some(next) = pick_ws_provider(&route, &avoid).filter(|&n| usable(&route, n)) else {
                        continue;
                    };
                    tracing::warn!(network = %route.name, from = %route.upstreams[p].name, to = %route.upstreams[next].name,
                        topic = topic.kind.name(), "moving subscription to a healthy provider");
                    if let Some(upstream) = topic.upstream_id.borrow_mut().take() {
                        if let Some(link) = route.subs.links.borrow().get(&p) {
                            link.by_upstream.borrow_mut().remove(&upstream);
                            link.send_unsubscribe(&upstream);
                        }
                    }
                    topic.provider.set(Some(next));
                    route.subs.link(&route, next).subscribe(&key, &topic);
                }
            }
        });
    }
}

fn usable(route: &NetworkRoute, p: ProviderId) -> bool {
    let live = &route.live.providers()[p];
    route.live.admissible(p) && live.breaker.is_closed()
}

/// A provider with a WebSocket URL that has not refused the topic, preferring healthy and deep ones.
fn pick_ws_provider(route: &NetworkRoute, refused: &[ProviderId]) -> Option<ProviderId> {
    ProviderId::all(route.upstreams.len())
        .filter(|&i| route.upstreams[i].ws.is_some() && !refused.contains(&i))
        .max_by_key(|&i| {
            (
                usable(route, i),
                route.live.providers()[i].head.load(Ordering::Relaxed),
                std::cmp::Reverse(i),
            )
        })
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
    let hub = &route.subs;
    let provider = pick_ws_provider(route, &[]).ok_or(SubscribeError::NoProvider)?;
    let topic = Rc::new(Topic {
        kind,
        params: params.to_vec(),
        provider: Cell::new(Some(provider)),
        upstream_id: RefCell::new(None),
        subscribers: RefCell::new(Vec::new()),
        inbox: RefCell::new(LocalQueue::new(TOPIC_INBOX)),
        refused: RefCell::new(Vec::new()),
        watermark: Cell::new(route.live.best_head.load(Ordering::Relaxed)),
        recent_logs: RefCell::new(VecDeque::new()),
        internal: Cell::new(false),
        delivered: RefCell::new(VecDeque::new()),
        pending: RefCell::new(Vec::new()),
        resolving: Cell::new(false),
        linked: Cell::new(false),
        logs: RefCell::new(VecDeque::new()),
        waiting: RefCell::new(VecDeque::new()),
        backfilling: Cell::new(false),
        replaced: RefCell::new(VecDeque::new()),
    });
    hub.topics.borrow_mut().insert(key.clone(), topic.clone());
    if Some(key.as_slice()) == topic_key(br#"["newHeads"]"#).as_deref() {
        *hub.heads.borrow_mut() = Some(topic.clone());
    }
    spawn_delivery(route, &topic, true);
    hub.ensure_supervisor(route);
    let link = hub.link(route, provider);
    link.subscribe(&key, &topic);
    route.recorder.metrics().subscription(kind, 1);
    Ok(topic)
}

fn new_subscription_id() -> String {
    format!("0x{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

impl Link {
    fn subscribe(&self, key: &[u8], topic: &Topic) {
        let Some(out) = self.out.borrow().clone() else { return }; // replayed on connect
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.pending.borrow_mut().insert(id, key.to_vec());
        let mut msg = Vec::with_capacity(64 + topic.params.len());
        msg.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        msg.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        msg.extend_from_slice(br#","method":"eth_subscribe","params":"#);
        msg.extend_from_slice(&topic.params);
        msg.push(b'}');
        let _ = out.push(Message::Text(String::from_utf8_lossy(&msg).into_owned()));
    }

    fn send_unsubscribe(&self, upstream_id: &str) {
        let Some(out) = self.out.borrow().clone() else { return };
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let mut msg = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"eth_unsubscribe","params":["#).into_bytes();
        write_json_str(&mut msg, upstream_id);
        msg.extend_from_slice(b"]}");
        let _ = out.push(Message::Text(String::from_utf8_lossy(&msg).into_owned()));
    }
}

/// Keeps one provider's link up while any topic uses it: connect, replay, read; on loss, back off and retry.
async fn run_link(route: Newest, link: Rc<Link>) {
    let mut backoff = Reconnect::default();
    loop {
        let Some(r) = route.get() else { return };
        if r.shutdown.is_triggered() {
            return;
        }
        let assigned: Vec<(Vec<u8>, Rc<Topic>)> = r
            .subs
            .topics
            .borrow()
            .iter()
            .filter(|(_, t)| t.provider.get() == Some(link.provider))
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        if assigned.is_empty() && link.failures.get() > 0 {
            // Nothing to carry any more: let the link go.
            r.subs.links.borrow_mut().remove(&link.provider);
            return;
        }
        let Some(ws) = r.upstreams[link.provider].ws.clone() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_millis(r.connect_timeout_ms);
        let tls = r.ws_tls.clone();
        let connected = connect_ws(
            &ws.url,
            &ws.addrs,
            tls,
            &r.upstreams[link.provider].pool.headers(),
            deadline,
        )
        .await;
        let socket = match connected {
            Ok(s) => s,
            Err(e) => {
                link.failures.set(link.failures.get() + 1);
                tracing::debug!(network = %r.name, provider = %r.upstreams[link.provider].name, error = %e, "WebSocket connect failed");
                drop(r);
                sleep(backoff.after_failure()).await;
                continue;
            }
        };
        tracing::debug!(network = %r.name, provider = %r.upstreams[link.provider].name, "upstream WebSocket connected");
        backoff.connected();
        link.failures.set(0);
        let out: Rc<LocalQueue<Message>> = LocalQueue::new(65_536);
        *link.out.borrow_mut() = Some(out.clone());
        link.connected.set(true);
        link.pending.borrow_mut().clear();
        link.by_upstream.borrow_mut().clear();
        // Replay every topic this provider carries.
        for (key, topic) in r.subs.topics.borrow().iter() {
            if topic.provider.get() == Some(link.provider) {
                topic.upstream_id.borrow_mut().take();
                link.subscribe(key, topic);
            }
        }
        let end = pump(socket, out, r.ws_ping, |text| {
            let Some(route) = route.get() else { return false };
            on_upstream_message(&route, &link, text);
            true
        })
        .await;
        *link.out.borrow_mut() = None;
        link.connected.set(false);
        link.failures.set(link.failures.get() + 1);
        r.recorder.metrics().ws_reconnect();
        match end {
            PumpEnd::Unresponsive => {
                r.recorder.metrics().ws_unresponsive();
                tracing::warn!(network = %r.name, provider = %r.upstreams[link.provider].name, "upstream WebSocket stopped answering pings; reconnecting")
            }
            PumpEnd::Closed => {
                tracing::warn!(network = %r.name, provider = %r.upstreams[link.provider].name, "upstream WebSocket lost; reconnecting")
            }
        }
        for topic in r.subs.topics.borrow().values() {
            if topic.provider.get() == Some(link.provider) {
                topic.upstream_id.borrow_mut().take();
            }
        }
        drop(r);
        sleep(backoff.current()).await;
    }
}

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

fn on_upstream_message(route: &Rc<NetworkRoute>, link: &Link, text: &[u8]) {
    let (id, upstream) =
        match parse_upstream_frame(text) {
            UpstreamFrame::Notification { subscription, result } => {
                let key = link.by_upstream.borrow().get(subscription).cloned();
                if let Some(topic) = key.and_then(|k| route.subs.topics.borrow().get(&k).cloned()) {
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
                    let feed =
                        match topic.kind {
                            TopicKind::Logs => route.subs.heads.borrow().clone().filter(|h| {
                                h.provider.get() == Some(link.provider) && h.upstream_id.borrow().is_some()
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
        let topic = route.subs.topics.borrow().get(&key).cloned();
        if let Some(topic) = topic.filter(|t| t.provider.get() == Some(link.provider)) {
            topic.refused.borrow_mut().push(link.provider);
            let refused = topic.refused.borrow().clone();
            if let Some(next) = pick_ws_provider(route, &refused) {
                topic.provider.set(Some(next));
                route.subs.link(route, next).subscribe(&key, &topic);
            }
        }
        return;
    };
    let topic = route.subs.topics.borrow().get(&key).cloned();
    match topic {
        Some(topic) if topic.provider.get() == Some(link.provider) => {
            *topic.upstream_id.borrow_mut() = Some(upstream.to_string());
            link.by_upstream.borrow_mut().insert(upstream.to_string(), key);
            // Live logs from here on wait behind the backfill of what was missed (`logs::release`); heads
            // prove nothing to the cache until the next one is linked to what was delivered.
            topic.backfilling.set(topic.kind == TopicKind::Logs);
            topic.linked.set(false);
            topic.hand_over(route, Inbound::Resubscribed);
        }
        // The topic went away (or moved) while subscribing: release the upstream subscription.
        _ => link.send_unsubscribe(upstream),
    }
}

impl Topic {
    /// Hands a notification to the topic's delivery task. A full inbox means delivery fell behind its
    /// upstream (a flood, or a slow backfill): what it held is dropped and the topic gets a fresh inbox
    /// and delivery task that starts with a backfill (heads by the watermark, logs by block range), so the
    /// topic is rebuilt instead of staying registered and silent.
    fn hand_over(self: &Rc<Self>, route: &Rc<NetworkRoute>, item: Inbound) {
        let inbox = self.inbox.borrow().clone();
        if inbox.push(item) != Err(PushError::Full) {
            return;
        }
        inbox.clear();
        if route
            .subs
            .heads
            .borrow()
            .as_ref()
            .is_some_and(|h| std::ptr::eq(Rc::as_ptr(h), Rc::as_ptr(self)))
        {
            // Logs were handed to this inbox too: each logs topic backfills what it may have lost.
            for t in route
                .subs
                .topics
                .borrow()
                .values()
                .filter(|t| t.kind == TopicKind::Logs)
            {
                t.backfilling.set(true);
                let _ = t.inbox.borrow().push(Inbound::Resubscribed);
            }
        }
        tracing::warn!(network = %route.name, topic = self.kind.name(), "subscription delivery fell behind its upstream; rebuilt with a backfill");
        route.recorder.metrics().ws_topic_rebuilt();
        let fresh = LocalQueue::new(TOPIC_INBOX);
        *self.inbox.borrow_mut() = fresh.clone();
        self.backfilling.set(self.kind == TopicKind::Logs);
        self.linked.set(false);
        spawn_delivery(route, self, false);
        let _ = fresh.push(Inbound::Resubscribed);
    }
}

/// Notifications one topic may have waiting for delivery before it is rebuilt.
const TOPIC_INBOX: usize = 4096;

/// Runs a topic's deliveries from its current inbox. `first`: the first `Resubscribed` is the initial
/// subscription (nothing to backfill); a rebuilt topic backfills on its first one.
fn spawn_delivery(route: &Rc<NetworkRoute>, topic: &Rc<Topic>, first: bool) {
    let newest = route.newest.clone();
    let topic = topic.clone();
    let inbox = topic.inbox.borrow().clone();
    spawn(async move {
        let mut first = first;
        while let Some(inbound) = inbox.pop().await {
            let Some(route) = newest.get() else { return };
            match inbound {
                Inbound::Resubscribed if first => {
                    first = false;
                    logs::backfilled(&route, &topic);
                }
                Inbound::Resubscribed => {
                    if topic.kind == TopicKind::Logs {
                        logs::backfill(&route, &topic).await;
                        logs::backfilled(&route, &topic);
                    }
                }
                Inbound::Log(logs_topic, log) => logs::in_order(&route, &logs_topic, log),
                Inbound::Item(result) => match topic.kind {
                    TopicKind::NewHeads => heads::deliver(&route, &topic, result).await,
                    TopicKind::Logs => logs::deliver(&route, &topic, &result).await,
                    TopicKind::PendingTransactions => fan_out(&route, &topic, &result, Frame::Plain),
                },
            }
        }
    });
}

/// One read through the normal routing path (breakers, retries).
async fn fetch(route: &NetworkRoute, method: &str, params: &str) -> Option<Vec<u8>> {
    let call = Call {
        id: Some(b"1"),
        method: method.into(),
        params: Some(params.as_bytes()),
    };
    let ids = Cell::new(1 << 51); // exact as a JavaScript number (< 2^53): JS nodes parse ids as doubles
    let deadline = Instant::now() + Duration::from_secs(5);
    match forward(route, &call, &Caller::default(), deadline, &ids).await {
        CallOutcome::Answer {
            body,
            value,
            is_error: false,
            ..
        } => Some(body[value].to_vec()),
        _ => None,
    }
}

/// What a frame is to the subscribers of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// A log or a pending transaction: to everyone.
    Plain,
    /// A head at this height: to each subscriber only above the greatest it was given.
    Head(u64),
    /// A head at this height that replaces one already delivered (a reorg): to each subscriber that was
    /// given heads, whatever it was given.
    Replacing(u64),
}

/// Sends `result` to every subscriber of the topic, as `frame` says: the notification is laid out once and
/// each subscriber is handed it with its own id. A subscriber that cannot keep up is disconnected.
fn fan_out(route: &NetworkRoute, topic: &Topic, result: &[u8], frame: Frame) {
    let subscribers = topic.subscribers.borrow().clone();
    let note = Note::eth_subscription(result);
    for s in subscribers {
        match frame {
            Frame::Plain => {}
            // Never twice, never backwards, per subscriber.
            Frame::Head(h) if h <= s.last_head.get() => continue,
            Frame::Replacing(_) if !s.got_heads.get() => continue,
            Frame::Head(h) | Frame::Replacing(h) => {
                s.last_head.set(s.last_head.get().max(h));
                s.got_heads.set(true);
                route.live.marks.raise(s.mark, h);
            }
        }
        // A full queue closes itself: the client is disconnected with a reason, others are unaffected.
        let _ = s.out.push(Outgoing::Note(note.clone(), s.id_json.clone()));
    }
}
