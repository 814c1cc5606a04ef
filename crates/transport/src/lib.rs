//! Transport: how bytes reach an upstream and come back. HTTP/1.1 client on httparse with per-shard
//! keep-alive pools, upstream TLS, and validation of every JSON-RPC response before it is trusted.

pub mod auth;
mod conn;
pub mod dial;
mod pool;
mod request;
mod response;
pub mod tls;
pub mod validate;
pub mod ws;

pub use auth::ExtraHeaders;
pub use conn::Stream;
pub use pool::{PoolSettings, UpstreamPool};
pub use request::write_post;
pub use response::{parse_head, Framing, ResponseHead, UpstreamResponse, MAX_HEAD};

use std::fmt;

use prism_telemetry::cause::Reason;

/// Why an upstream exchange failed. `sent` says whether the request may have reached the upstream, which is
/// what decides if a write may ever be tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// The host name did not resolve at start-up.
    Unresolved,
    /// Nothing listens at the address (ECONNREFUSED).
    Refused,
    Connect(String),
    Tls(String),
    Timeout {
        sent: bool,
    },
    /// Reset or closed before a complete response arrived.
    Reset {
        sent: bool,
    },
    /// The response is not HTTP/1.1 we can read, or its framing is broken.
    Malformed(&'static str),
    /// The response exceeds `limits.max_response_bytes` (`max`): it was not read further.
    TooLarge {
        max: usize,
    },
    /// All `limits.upstream_max_connections` connections to this upstream on this shard stayed busy until
    /// the deadline. Prism's own limit: nothing was sent, and it is never the provider's failure.
    ConnectionLimit {
        max: usize,
    },
}

impl TransportError {
    /// Whether any byte of the request may have reached the upstream.
    pub fn maybe_sent(&self) -> bool {
        match self {
            TransportError::Timeout { sent } | TransportError::Reset { sent } => *sent,
            TransportError::Malformed(_) | TransportError::TooLarge { .. } => true,
            TransportError::Unresolved
            | TransportError::Refused
            | TransportError::Connect(_)
            | TransportError::Tls(_)
            | TransportError::ConnectionLimit { .. } => false,
        }
    }

    /// Why it failed, as metrics and `/status` name it (`None` for Prism's own connection cap).
    pub fn reason(&self) -> Option<Reason> {
        Some(match self {
            TransportError::Unresolved => Reason::Dns,
            TransportError::Refused => Reason::Refused,
            TransportError::Connect(_) => Reason::Connect,
            TransportError::Tls(_) => Reason::Tls,
            TransportError::Timeout { .. } => Reason::Timeout,
            TransportError::Reset { .. } => Reason::Reset,
            TransportError::Malformed(_) => Reason::Malformed,
            TransportError::TooLarge { .. } => Reason::TooLarge,
            TransportError::ConnectionLimit { .. } => return None,
        })
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Unresolved => f.write_str("host did not resolve"),
            TransportError::Refused => f.write_str("connection refused"),
            TransportError::Connect(e) => write!(f, "connect failed: {e}"),
            TransportError::Tls(e) => write!(f, "TLS failed: {e}"),
            TransportError::Timeout { .. } => f.write_str("timed out"),
            TransportError::Reset { .. } => f.write_str("connection reset"),
            TransportError::Malformed(why) => write!(f, "malformed response: {why}"),
            TransportError::TooLarge { max } => {
                write!(f, "response over limits.max_response_bytes ({max} bytes)")
            }
            TransportError::ConnectionLimit { max } => write!(
                f,
                "Upstream connection limit: all {max} connections to this provider are busy (limits.upstream_max_connections)"
            ),
        }
    }
}
