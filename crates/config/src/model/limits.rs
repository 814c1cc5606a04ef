//! `[limits]`: every bound the edge and transport enforce, with the defaults a node runs with when the
//! section is absent.

use serde::{Deserialize, Serialize};

/// Every limit the edge and transport enforce. All have sane defaults.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body accepted (413 beyond). geth's own limit is 5 MiB.
    pub max_body_bytes: usize,
    /// Largest request head (request line + headers), 431 beyond.
    pub max_header_bytes: usize,
    /// Most calls in one JSON-RPC batch.
    pub max_batch: usize,
    /// Deepest JSON nesting accepted in a request.
    pub max_depth: usize,
    /// Most client connections open at once across all shards (503 beyond).
    pub max_connections: usize,
    /// Overall deadline for one client request, upstream attempts included.
    pub request_deadline_ms: u64,
    /// How long a keep-alive client connection may sit idle between requests.
    pub idle_timeout_ms: u64,
    /// How long a started request may take to arrive in full (slow clients get 408).
    pub client_timeout_ms: u64,
    /// How long shutdown waits for in-flight requests.
    pub drain_timeout_ms: u64,
    /// TCP (and TLS) connect deadline towards an upstream.
    pub upstream_connect_timeout_ms: u64,
    /// Idle keep-alive connections kept per upstream per shard.
    pub upstream_max_idle: usize,
    /// An idle upstream connection older than this is closed rather than reused.
    pub upstream_idle_timeout_ms: u64,
    /// Largest upstream response accepted.
    pub max_response_bytes: usize,
    /// Messages queued for one WebSocket client before it is disconnected as too slow.
    pub ws_max_queue: usize,
    /// The kernel send buffer of a client WebSocket session, in bytes (0: the kernel's autotuned default, up
    /// to `net.ipv4.tcp_wmem`'s maximum). What a client that stopped reading can hold in the kernel before
    /// a write waits and `client_timeout_ms` starts.
    pub ws_send_buffer_bytes: usize,
    /// How long a client connection's last bytes may take to leave (a WebSocket close frame, the rest of an
    /// answer, then the FIN) before the connection is reset: a client that stopped reading is not waited
    /// for, and its socket is freed.
    pub close_timeout_ms: u64,
    /// An upstream WebSocket silent this long is pinged; silent for as long again (no pong), it is taken
    /// for dead (frozen peer, half-open TCP): reconnected and replayed. 0 turns the check off.
    pub upstream_ws_ping_ms: u64,
    /// Open connections (busy and idle) per upstream per shard; beyond it calls queue for a free one until
    /// their deadline, then fail with "Upstream connection limit" (never counted against the provider).
    pub upstream_max_connections: usize,
    /// Solana: delegation-record subscriptions a shard sends per second when its base-layer WebSocket comes
    /// back (accounts a request touches go first), so 200 000 tracked accounts are not one burst.
    pub record_resubscribe_per_sec: usize,
    /// Solana: client subscriptions (topics: identical ones are shared) one upstream WebSocket carries; a side
    /// opens another socket only when its sockets hold this many. Shared provider plans often allow 50-100
    /// per connection: lower it there.
    pub solana_subscriptions_per_socket: usize,
    /// Largest answer Prism builds for one request (a whole batch together); beyond it the request is
    /// answered with a -32003 "answer too large" error instead.
    pub max_answer_bytes: usize,
    /// Subscriptions one WebSocket connection may hold (EVM and Solana alike).
    pub max_subscriptions_per_connection: usize,
    /// Client subscriptions open on one shard across all its connections.
    pub max_subscriptions_per_shard: usize,
    /// Kept at the end of a transaction submission's deadline to look it up by its hash (or signature) when
    /// its answer is lost after sending; at most a third of the deadline.
    pub write_lookup_ms: u64,
    /// How long `eth_sendRawTransactionSync` waits for its receipt when the call names no timeout; a
    /// timeout it names is honoured up to `limits.sync_submit_max_ms`.
    pub sync_submit_timeout_ms: u64,
    /// The longest wait an `eth_sendRawTransactionSync` call may ask for.
    pub sync_submit_max_ms: u64,
    /// How many sub-ranges of one wide `eth_getLogs` (split to fit providers' limits) are in flight at once.
    pub logs_split_concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 5 * 1024 * 1024,
            max_header_bytes: 16 * 1024,
            max_batch: 100,
            max_depth: 64,
            max_connections: 20_000,
            request_deadline_ms: 10_000,
            idle_timeout_ms: 60_000,
            client_timeout_ms: 10_000,
            drain_timeout_ms: 10_000,
            upstream_connect_timeout_ms: 2_000,
            upstream_max_idle: 64,
            upstream_idle_timeout_ms: 30_000,
            max_response_bytes: 64 * 1024 * 1024,
            ws_max_queue: 1024,
            ws_send_buffer_bytes: 128 * 1024,
            close_timeout_ms: 1_000,
            upstream_ws_ping_ms: 15_000,
            upstream_max_connections: 256,
            record_resubscribe_per_sec: 2_000,
            solana_subscriptions_per_socket: 1_000,
            max_answer_bytes: 64 * 1024 * 1024,
            max_subscriptions_per_connection: 64,
            max_subscriptions_per_shard: 10_000,
            write_lookup_ms: 1_500,
            sync_submit_timeout_ms: 10_000,
            sync_submit_max_ms: 60_000,
            logs_split_concurrency: 4,
        }
    }
}
