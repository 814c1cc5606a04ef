//! Who may call: API keys (resolution, method allowlists, origins, per-key strategy and marks) and their
//! token buckets. The edge enforces them per request; the cluster shares the buckets between nodes. Neither
//! imports the other: both import this.

pub mod keys;
pub mod ratelimit;
