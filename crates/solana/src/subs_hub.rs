//! The Solana subscription hub's state on one shard (data only; `subs` works on it, `subs_link` runs its
//! sockets, `subs_read` batches its account reads, `ws` holds each client's ids): topics (one upstream
//! subscription shared by identical client ones), their clients, the shared upstream sockets (links) and the
//! queue of account reads.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use ahash::AHashMap;
use async_tungstenite::tungstenite::Message;

use super::net::Dest;
use super::pubkey::Pubkey;
use prism_core::call::outcome::ProxyError;
use prism_core::subs::{Note, Outbox, Outgoing};
use prism_runtime::queue::LocalQueue;
use prism_wire::jsonscan::{object_field, plain_u64};
use prism_wire::rpc::wire::write_upstream_call;

/// How long a new subscription waits for its upstream confirmation before the client is told it failed.
const CONFIRM_WITHIN: Duration = Duration::from_secs(5);

/// One shard's Solana subscription hub (in `SolanaRoute`).
pub struct SolHub {
    pub(super) topics: RefCell<AHashMap<Vec<u8>, Rc<Topic>>>,
    pub(super) links: RefCell<Vec<Rc<Link>>>,
    /// `limits.solana_subscriptions_per_socket`.
    pub(super) per_socket: usize,
    /// Account reads waiting to be batched (`subs_read`).
    pub(super) reads: Reads,
    next_session: Cell<u64>,
    pub(super) next_link: Cell<u64>,
}

// === impl SolHub ===

impl SolHub {
    pub fn new(per_socket: usize) -> SolHub {
        SolHub {
            topics: RefCell::new(AHashMap::new()),
            links: RefCell::new(Vec::new()),
            per_socket: per_socket.max(1),
            reads: Default::default(),
            next_session: Cell::new(0),
            next_link: Cell::new(0),
        }
    }

    /// A number no other client session of this shard has.
    pub fn session_id(&self) -> u64 {
        let id = self.next_session.get() + 1;
        self.next_session.set(id);
        id
    }

    /// Upstream sockets open or opening for client subscriptions, and the topics they carry.
    pub fn counts(&self) -> (usize, usize) {
        (self.links.borrow().len(), self.topics.borrow().len())
    }

    /// The topics `link` carries now (a copy: settling or replaying them changes the map).
    pub(super) fn carried_by(&self, link: &Rc<Link>) -> Vec<Rc<Topic>> {
        self.topics
            .borrow()
            .values()
            .filter(|t| link.carries(t))
            .cloned()
            .collect()
    }
}

/// A client's subscription to a topic.
pub struct Subscriber {
    /// The session (unique per shard) and the id it gave the client.
    pub session: u64,
    pub id: u64,
    /// `id` as JSON, spliced into each [`Note`].
    pub id_json: Rc<[u8]>,
    pub out: Outbox,
    /// The session's subscriptions, so a topic that ends by itself (a signature's) removes the client's id.
    pub owner: Weak<RefCell<AHashMap<u64, Rc<Topic>>>>,
    /// Notifications that came before the client was given its subscription id, kept to follow that
    /// answer as a node's would (`Some` until the session has answered).
    pub early: Early,
}

/// A client's notifications held until the answer that gives it its subscription id has been sent.
pub type Early = Rc<RefCell<Option<Vec<Outgoing>>>>;

/// A notification held while Prism tells whether a base-layer value owned by the delegation program is the
/// account's state: its method and result, and whether it is such a value.
pub(super) struct Held {
    pub(super) method: Vec<u8>,
    pub(super) result: Vec<u8>,
    pub(super) owned: bool,
}

/// One upstream subscription and the clients that share it.
pub struct Topic {
    /// What it subscribes to; fixed for its life.
    pub subject: Subject,
    pub(super) dest: Cell<Dest>,
    pub(super) upstream: Upstream,
    pub(super) subscribers: RefCell<Vec<Subscriber>>,
    pub(super) alive: Cell<bool>,
    /// While Prism tells whether a base-layer value owned by the delegation program is the account's state:
    /// the notifications held, in order (method, result, whether it is such a value).
    pub(super) held: RefCell<Option<Vec<Held>>>,
    pub(super) gap: Gap,
}

/// What a topic subscribes to: the upstream call, and the account it follows.
pub struct Subject {
    /// Its key in the hub (`topic_key`).
    pub(super) key: Vec<u8>,
    /// e.g. `accountSubscribe`; its notifications are `accountNotification`.
    pub method: String,
    pub params: Vec<u8>,
    /// `accountSubscribe`'s account.
    pub account: Option<Pubkey>,
    /// The account follows its delegation (not a base-only account).
    pub(super) follows: bool,
}

/// A topic's upstream subscription: the socket carrying it and what the upstream said.
pub(super) struct Upstream {
    pub(super) link: RefCell<Option<Rc<Link>>>,
    /// The upstream's subscription id, once it confirmed (none again after the socket drops or the topic
    /// moves).
    pub(super) id: Cell<Option<u64>>,
    /// Confirmed upstream at least once: a refusal after a move does not end it.
    pub(super) confirmed_once: Cell<bool>,
    /// The upstream refused its first subscription (the reason's text).
    pub(super) refused: RefCell<Option<String>>,
    /// Fired when the upstream confirms or refuses.
    pub(super) settled: event_listener::Event,
}

// === impl Upstream ===

impl Upstream {
    /// Not placed on a socket yet.
    pub(super) fn new() -> Upstream {
        Upstream {
            link: RefCell::new(None),
            id: Cell::new(None),
            confirmed_once: Cell::new(false),
            refused: RefCell::new(None),
            settled: event_listener::Event::new(),
        }
    }
}

/// What tells an account change missed while the topic's socket was down.
#[derive(Default)]
pub(super) struct Gap {
    /// Its socket was lost: once subscribed again, read what may have been missed (`observed`,
    /// `signature_caught_up`).
    pub(super) limbo: Cell<bool>,
    /// The slot and a hash of the last account value delivered or read (accounts only): what a read after
    /// a lost socket is compared with (`observed`).
    pub(super) last: Cell<Option<(u64, u64)>>,
}

// === impl Topic ===

impl Topic {
    /// Confirmed upstream (now, or before it ended: a signature's may end with its notification before a
    /// client that joined it is answered).
    pub fn is_confirmed(&self) -> bool {
        self.upstream.id.get().is_some() || (self.upstream.confirmed_once.get() && !self.alive.get())
    }

    /// Waits (bounded) until the upstream confirmed or refused the topic. Like a validator, a client's
    /// subscribe is answered only once the subscription is live upstream: a change right after the client
    /// has its id must reach it.
    pub async fn confirmed(&self) -> Result<(), ProxyError> {
        let deadline = Instant::now() + CONFIRM_WITHIN;
        loop {
            if let Some(why) = self.upstream.refused.borrow().clone() {
                return Err(ProxyError::Rejected {
                    code: -32602,
                    message: why,
                });
            }
            if self.is_confirmed() {
                return Ok(());
            }
            let settled = self.upstream.settled.listen();
            if self.is_confirmed() || self.upstream.refused.borrow().is_some() {
                continue;
            }
            if prism_runtime::timeout_at(deadline, settled).await.is_err() {
                return Err(ProxyError::NotServed(
                    "the upstream did not confirm the subscription in time",
                ));
            }
        }
    }

    pub fn add(&self, sub: Subscriber) {
        self.subscribers.borrow_mut().push(sub);
    }

    /// Sends `result` (a notification's raw `result`) of `method` to every client of the topic: laid out
    /// once, each client handed it with its own subscription id.
    pub(super) fn fan_out(&self, method: &[u8], result: &[u8]) {
        let mut head = Vec::with_capacity(64 + method.len() + result.len());
        head.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
        head.extend_from_slice(method);
        head.extend_from_slice(br#","params":{"result":"#);
        head.extend_from_slice(result);
        head.extend_from_slice(br#","subscription":"#);
        let note = Rc::new(Note {
            head,
            tail: b"}}".to_vec(),
        });
        for s in self.subscribers.borrow().iter() {
            let msg = Outgoing::Note(note.clone(), s.id_json.clone());
            if let Some(early) = s.early.borrow_mut().as_mut() {
                early.push(msg);
                continue;
            }
            // A full queue closes itself: that client is disconnected, the others are unaffected.
            let _ = s.out.push(msg);
        }
    }

    /// Remembers the account value delivered (its slot, a hash of its bytes) for `observed`.
    pub(super) fn note_value(&self, result: &[u8]) {
        if self.subject.account.is_none() {
            return;
        }
        let slot = object_field(result, "context")
            .and_then(|c| object_field(c, "slot"))
            .and_then(plain_u64)
            .unwrap_or(0);
        let hash = object_field(result, "value").map_or(0, value_hash);
        self.gap.last.set(Some((slot, hash)));
    }
}

pub(super) fn value_hash(v: &[u8]) -> u64 {
    ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(v)
}

/// The topic key: the side for topics whose side is fixed by the call (slots, signatures, others), none for
/// accounts (their side follows the account), then the method and params as the client sent them.
pub(super) fn topic_key(method: &str, params: &[u8], dest: Dest, follows_account: bool) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + method.len() + params.len());
    key.push(if follows_account { u8::MAX } else { dest.code() });
    key.extend_from_slice(method.as_bytes());
    key.push(0);
    key.extend_from_slice(params);
    key
}

/// Frames one socket may have waiting to be sent (a replay sends one per topic it carries).
pub(super) const OUT_QUEUE: usize = 1 << 16;

/// What a request on the socket was for.
pub(super) enum Pending {
    /// The topic, and its method (to release the subscription if the topic is gone when it is confirmed).
    Subscribe(Weak<Topic>, String),
    Unsubscribe,
}

pub struct Link {
    pub(super) id: u64,
    pub(super) dest: Dest,
    pub(super) out: RefCell<Option<Rc<LocalQueue<Message>>>>,
    pub(super) pending: RefCell<AHashMap<u64, Pending>>,
    /// Upstream subscription id → topic.
    pub(super) by_upstream: RefCell<AHashMap<u64, Weak<Topic>>>,
    next_id: Cell<u64>,
    /// Topics placed on it (the per-socket cap counts these).
    pub(super) carried: Cell<usize>,
    /// Nothing left to carry: it takes no new topic and its task ends.
    pub(super) closing: Cell<bool>,
}

// === impl Link ===

impl Link {
    pub(super) fn new(id: u64, dest: Dest) -> Rc<Link> {
        Rc::new(Link {
            id,
            dest,
            out: RefCell::new(None),
            pending: RefCell::new(AHashMap::new()),
            by_upstream: RefCell::new(AHashMap::new()),
            next_id: Cell::new(0),
            carried: Cell::new(0),
            closing: Cell::new(false),
        })
    }

    fn send(&self, method: &str, params: &[u8], why: Pending) {
        let Some(out) = self.out.borrow().clone() else {
            return; // sent (replayed) when the socket is up
        };
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        // The method is the client's text: written as a JSON string, so a name such as
        // `getX","method":"requestAirdrop","id":"zSubscribe` stays one (unknown) method.
        let mut msg = Vec::with_capacity(48 + method.len() + params.len());
        write_upstream_call(&mut msg, id, method, Some(params));
        if out
            .push(Message::Text(String::from_utf8_lossy(&msg).into_owned()))
            .is_ok()
        {
            self.pending.borrow_mut().insert(id, why);
        }
    }

    pub(super) fn subscribe(&self, topic: &Rc<Topic>) {
        let why = Pending::Subscribe(Rc::downgrade(topic), topic.subject.method.clone());
        self.send(&topic.subject.method, &topic.subject.params, why);
    }

    pub(super) fn unsubscribe(&self, subscribe_method: &str, upstream: u64) {
        let method = subscribe_method.replace("Subscribe", "Unsubscribe");
        self.send(&method, format!("[{upstream}]").as_bytes(), Pending::Unsubscribe);
    }

    /// Whether `topic` is carried by this socket now.
    pub(super) fn carries(self: &Rc<Self>, topic: &Topic) -> bool {
        topic
            .upstream
            .link
            .borrow()
            .as_ref()
            .is_some_and(|l| Rc::ptr_eq(l, self))
    }
}

/// What is queued: each topic, and whether the read is a catch-up (a missed change is delivered) or a
/// baseline (remembered only).
#[derive(Default)]
pub struct Reads {
    pub(super) queue: RefCell<Vec<(Rc<Topic>, bool)>>,
    pub(super) running: Cell<bool>,
}
