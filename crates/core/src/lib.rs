//! The balancer: what a call means and where it goes, grouped by concern. `call` is one call's path (its
//! context, the pipeline, the retry loop, submissions, verified reads, split `eth_getLogs`); `judge` decides
//! what an exchange with a provider meant (classifier, blame memory); `live` is the providers' shared live
//! state (heads, breakers, floors, tags, marks, in-flight pressure, quota); `routing` picks the provider;
//! `reuse` answers a call from the cache or by joining one in flight; `subs` is the shard's subscriptions
//! hub. The method table is the shared vocabulary's (`prism_wire::rpc::methods`).

pub mod call;
pub mod chain;
pub mod judge;
pub mod live;
pub mod reuse;
pub mod routing;
pub mod subs;

/// The method table lives in the shared vocabulary (`prism_wire::rpc::methods`).
pub use prism_wire::rpc::methods;

pub use call::outcome::{CallOutcome, Caller, How, ProxyError, Source};
pub use call::pipeline::forward;
pub use prism_wire::rpc::wire::write_upstream_call;
pub use routing::route::{NetworkRoute, Upstream};
