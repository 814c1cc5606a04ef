//! The edge: what a client talks to. HTTP/1.1 server, JSON-RPC envelope, replies.

pub mod admin;
mod admin_metrics;
mod admin_status;
mod admission;
pub mod diagnosis;
pub mod envelope;
pub mod http;
pub mod network;
/// Keys and rate limits are their own module (`crate::access`): the cluster shares them too.
pub use crate::access::{keys, ratelimit};
pub mod reply;
pub mod rpc;
pub mod server;
pub mod shard;
mod status_board;
pub mod tls;
pub mod ws;

pub use network::Network;
pub use server::serve;
pub use shard::Shard;
