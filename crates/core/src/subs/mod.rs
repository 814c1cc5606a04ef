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
//!
//! The hub's data is `hub.rs`; the work on it, by concern: `subscribe.rs` (clients join and leave topics;
//! the heads feed kept), `supervisor.rs` (which provider carries a topic), `link.rs` (one provider's
//! upstream socket), `frame.rs` (what that socket says, and where each message goes), `delivery.rs` (each
//! topic's delivery task), `heads.rs` and `logs.rs` (the delivery rules of each kind), `fan_out.rs` (one
//! notification to every subscriber), `read.rs` (the reads backfills make).

pub use prism_wire::rpc::TopicKind;

/// Most heads backfilled across one gap (a longer outage resumes from the newest head), most blocks walked
/// back to find a reorg's fork, how many delivered heads a topic remembers to link new ones to, and how
/// many blocks back a logs topic keeps what it delivered (to send it again removed).
const MAX_BACKFILL_HEADS: u64 = 128;

mod delivery;
mod fan_out;
mod frame;
mod heads;
pub mod hub;
mod link;
mod logs;
mod read;
mod subscribe;
mod supervisor;

#[doc(hidden)]
pub use frame::{parse_upstream_frame, UpstreamFrame};
pub use hub::{Note, Outbox, Outgoing, SubHub};

/// Why a subscription was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscribeError {
    Unsupported(String),
    NoProvider,
}
