//! The subscriptions hub's state on one shard: topics (one upstream subscription shared by identical client
//! ones), their subscribers, and one upstream WebSocket link per provider. Data only: the network's route
//! owns a `SubHub`, and `core::subs` (which reaches the route and the pipeline) works on it.

use prism_wire::rpc::ProviderId;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use ahash::AHashMap;
use async_tungstenite::tungstenite::Message;

use crate::live::chain::{Hash, Named};
use crate::live::marks::MarkKey;
use prism_runtime::queue::LocalQueue;
use prism_wire::rpc::TopicKind;

/// What a client's writer sends, in order.
pub type Outbox = Rc<LocalQueue<Outgoing>>;

/// One message for a client's writer (`edge::ws` frames it).
#[derive(Debug)]
pub enum Outgoing {
    /// A whole text message: an answer, or a notification for this client alone.
    Text(Vec<u8>),
    /// A notification laid out once for every subscriber it goes to: the message is the note's head, this
    /// subscriber's id as JSON, then the note's tail. Handing it to 10 000 subscribers copies nothing.
    Note(Rc<Note>, Rc<[u8]>),
    Ping,
    Pong(Vec<u8>),
}

/// A notification's bytes on either side of the subscription id.
#[derive(Debug)]
pub struct Note {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
}

// === impl Note ===

impl Note {
    /// `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":ID,"result":RESULT}}`.
    pub fn eth_subscription(result: &[u8]) -> Rc<Note> {
        let mut tail = Vec::with_capacity(result.len() + 12);
        tail.extend_from_slice(br#","result":"#);
        tail.extend_from_slice(result);
        tail.extend_from_slice(b"}}");
        Rc::new(Note {
            head: br#"{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"#.to_vec(),
            tail,
        })
    }

    /// Bytes of the message for a subscriber whose id is `id` bytes of JSON.
    pub fn len_with(&self, id: &[u8]) -> usize {
        self.head.len() + id.len() + self.tail.len()
    }
}

pub(super) struct Subscriber {
    pub(super) id: String,
    /// `id` as a JSON string, spliced into each [`Note`].
    pub(super) id_json: Rc<[u8]>,
    pub(super) out: Outbox,
    pub(super) mark: MarkKey,
    /// Greatest head delivered to this subscriber (its key's mark when it subscribed, to begin with).
    pub(super) last_head: Cell<u64>,
    /// It was delivered a head: the heights a reorg replaces are news to it, delivered again.
    pub(super) got_heads: Cell<bool>,
}

pub(super) enum Inbound {
    /// A notification's raw `result` bytes.
    Item(Vec<u8>),
    /// A log for this logs topic, handed to the heads feed's delivery (same provider, same socket) so that
    /// logs and heads are taken in the order the node sent them (`logs::in_order`).
    Log(Rc<Topic>, Vec<u8>),
    /// The topic was (re)subscribed upstream: backfill what may have been missed.
    Resubscribed,
}

/// A log a logs topic delivered: its block's height and hash, and its bytes.
pub(super) type KeptLog = (u64, Hash, Rc<[u8]>);

pub(super) struct Topic {
    pub(super) kind: TopicKind,
    /// Raw params sent upstream (`["newHeads"]`, `["logs",{...}]`).
    pub(super) params: Vec<u8>,
    pub(super) upstream: Upstream,
    pub(super) subscribers: RefCell<Vec<Rc<Subscriber>>>,
    /// Replaced (with a fresh delivery task) when it overflows: see [`Topic::hand_over`].
    pub(super) inbox: RefCell<Rc<LocalQueue<Inbound>>>,
    /// Kept without subscribers: the shard's heads feed (`SubHub::heads`), which the cache's proofs and the
    /// logs topics' reorgs rest on.
    pub(super) internal: Cell<bool>,
    /// newHeads: last head delivered; logs: highest block a delivered log was in (or the head when subscribed).
    pub(super) watermark: Cell<u64>,
    /// newHeads only.
    pub(super) heads: HeadsState,
    /// logs only.
    pub(super) logs: LogsState,
}

/// A topic's upstream subscription: where it is, and where it may not go.
pub(super) struct Upstream {
    /// The provider whose link carries it.
    pub(super) provider: Cell<Option<ProviderId>>,
    /// The subscription id that provider gave it; `None` until it confirms (and again after its socket drops).
    pub(super) id: RefCell<Option<String>>,
    /// Providers that answered this subscription with an error (e.g. no pending-transaction feed).
    pub(super) refused: RefCell<Vec<ProviderId>>,
}

// === impl Upstream ===

impl Upstream {
    /// Not subscribed yet, on `provider`.
    pub(super) fn on(provider: ProviderId) -> Upstream {
        Upstream {
            provider: Cell::new(Some(provider)),
            id: RefCell::new(None),
            refused: RefCell::new(Vec::new()),
        }
    }
}

/// A newHeads topic's view of the chain: what it delivered, a reorg it holds or is linking, and what it
/// proves to the cache (`heads` works on it).
#[derive(Default)]
pub(super) struct HeadsState {
    /// The chain delivered so far (height, hash), oldest first, at most `MAX_BACKFILL_HEADS`; a head is
    /// linked to it by its parent before it is delivered.
    pub(super) delivered: RefCell<VecDeque<(u64, Hash)>>,
    /// A reorg's new blocks while they are still below the height delivered (a rollback the node has not
    /// built past yet): delivered together once they reach it.
    pub(super) pending: RefCell<Vec<(Named, Vec<u8>)>>,
    /// A reorg is being linked (blocks fetched by hash): the cache proves nothing meanwhile.
    pub(super) resolving: Cell<bool>,
    /// A head was linked since the topic was last (re)subscribed upstream: until then a reorg the node made
    /// while the socket was down may not have reached the chain record, so nothing is proven.
    pub(super) linked: Cell<bool>,
    /// Hashes of blocks delivered and then replaced by a reorg (the newest few): a log from one of them
    /// arriving late is not news.
    pub(super) replaced: RefCell<VecDeque<Hash>>,
}

/// A logs topic's memory of what it delivered and what waits (`logs` works on it).
#[derive(Default)]
pub(super) struct LogsState {
    /// Ids of the logs delivered lately (block hash, log index, removed): a backfill's duplicates are dropped.
    pub(super) recent: RefCell<VecDeque<Vec<u8>>>,
    /// The logs delivered from recent blocks (block height, block hash, the log's bytes), oldest first:
    /// sent again with `"removed": true` when a reorg replaces their block.
    pub(super) kept: RefCell<VecDeque<KeptLog>>,
    /// Logs whose block the heads feed has not delivered yet (a node may send a block's logs before its
    /// head), in order; released as the feed delivers heads.
    pub(super) waiting: RefCell<VecDeque<Vec<u8>>>,
    /// Resubscribed, and the backfill of what was missed meanwhile has not finished: live logs wait in
    /// `waiting` behind it.
    pub(super) backfilling: Cell<bool>,
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
    /// The `["newHeads"]` topic, when there is one: the heads feed.
    pub(super) heads: RefCell<Option<Rc<Topic>>>,
    /// The cache kept an answer that only a heads feed can prove: the shard's sweeper starts one
    /// (`SubHub::keep_heads`).
    pub(super) heads_wanted: Cell<bool>,
}

// === impl SubHub ===

impl SubHub {
    /// The cache wants a heads feed (it kept an answer about a block not yet final).
    pub fn want_heads(&self) {
        if !self.heads_wanted.get() {
            self.heads_wanted.set(true);
        }
    }

    /// Whether this shard follows the chain's heads right now: the heads feed is subscribed on a connected
    /// socket, has linked a head since it was (re)subscribed, is not in the middle of linking a reorg, and
    /// has delivered a head within `tolerance` of the pool's best head `best`. While it does, every reorg the node announces reaches
    /// the cache's chain record before a later read.
    pub fn heads_current(&self, best: u64, tolerance: u64) -> bool {
        let heads = self.heads.borrow();
        let Some(t) = heads.as_ref() else {
            return false;
        };
        let connected = || {
            t.upstream
                .provider
                .get()
                .and_then(|p| self.links.borrow().get(&p).map(|l| l.connected.get()))
                .unwrap_or(false)
        };
        t.upstream.id.borrow().is_some()
            && t.heads.linked.get()
            && !t.heads.resolving.get()
            && t.heads.pending.borrow().is_empty()
            && t.watermark.get().saturating_add(tolerance) >= best
            && connected()
    }
}
