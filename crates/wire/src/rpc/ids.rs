//! Where Prism's upstream JSON-RPC ids start, in one place. An HTTP answer is matched to its call by id
//! (`transport::validate::check_response`), so each kind of caller counts in its own range; every id
//! stays below 2^53, exact as a JavaScript number (some nodes are JavaScript).

/// A shard's client calls and the reads it makes for them (submission lookups), over its HTTP pools.
pub const CLIENT_CALLS: u64 = 1;
/// Health probes (`upstream::prober`), one counter per probed provider.
pub const PROBES: u64 = 1 << 50;
/// The Solana magic router's own reads (delegation records, signature statuses), per shard.
pub const SOLANA_ROUTER: u64 = 1 << 52;
/// Requests on an upstream WebSocket link (subscribe, unsubscribe): each socket is its own id space.
pub const WS_LINK: u64 = 1;
