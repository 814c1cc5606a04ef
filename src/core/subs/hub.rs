//! The subscriptions hub's state on one shard: topics (one upstream subscription shared by identical client
//! ones), their subscribers, and one upstream WebSocket link per provider. Data only: the network's route
//! owns a `SubHub`, and `core::subs` (which reaches the route and the pipeline) works on it.

use crate::rpc::ProviderId;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use ahash::AHashMap;
use async_tungstenite::tungstenite::Message;

use crate::core::marks::MarkKey;
use crate::rpc::TopicKind;
use crate::runtime::queue::LocalQueue;

/// What a client's writer sends: text frames (and pongs).
pub type Outbox = Rc<LocalQueue<Message>>;

pub(super) struct Subscriber {
    pub(super) id: String,
    pub(super) out: Outbox,
    pub(super) mark: MarkKey,
    /// Greatest head delivered to this subscriber.
    pub(super) last_head: Cell<u64>,
}

pub(super) enum Inbound {
    /// A notification's raw `result` bytes.
    Item(Vec<u8>),
    /// The topic was (re)subscribed upstream: backfill what may have been missed.
    Resubscribed,
}

pub(super) struct Topic {
    pub(super) kind: TopicKind,
    /// Raw params sent upstream (`["newHeads"]`, `["logs",{...}]`).
    pub(super) params: Vec<u8>,
    pub(super) provider: Cell<Option<ProviderId>>,
    pub(super) upstream_id: RefCell<Option<String>>,
    pub(super) subscribers: RefCell<Vec<Rc<Subscriber>>>,
    /// Replaced (with a fresh delivery task) when it overflows: see [`Topic::hand_over`].
    pub(super) inbox: RefCell<Rc<LocalQueue<Inbound>>>,
    /// Providers that answered this subscription with an error (e.g. no pending-transaction feed).
    pub(super) refused: RefCell<Vec<ProviderId>>,
    /// newHeads: last head delivered; logs: highest block a delivered log was in (or the head when subscribed).
    pub(super) watermark: Cell<u64>,
    pub(super) recent_logs: RefCell<VecDeque<Vec<u8>>>,
}

/// One upstream WebSocket per provider per shard, carrying every topic assigned to that provider.
pub(super) struct Link {
    pub(super) provider: ProviderId,
    pub(super) out: RefCell<Option<Rc<LocalQueue<Message>>>>,
    /// Request id of a pending eth_subscribe → topic key.
    pub(super) pending: RefCell<AHashMap<u64, Vec<u8>>>,
    /// Upstream subscription id → topic key.
    pub(super) by_upstream: RefCell<AHashMap<String, Vec<u8>>>,
    pub(super) next_id: Cell<u64>,
    pub(super) connected: Cell<bool>,
    pub(super) failures: Cell<u32>,
}

#[derive(Default)]
pub struct SubHub {
    pub(super) topics: RefCell<AHashMap<Vec<u8>, Rc<Topic>>>,
    /// Client subscription id → topic key.
    pub(super) clients: RefCell<AHashMap<String, Vec<u8>>>,
    pub(super) links: RefCell<AHashMap<ProviderId, Rc<Link>>>,
    pub(super) supervisor: Cell<bool>,
}
