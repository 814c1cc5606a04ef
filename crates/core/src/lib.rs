//! The balancer core: what a call means (method table), where it goes (router), and how its answer is
//! judged: breakers, scoring router, retries, chain view and per-client high-water marks.

pub mod availability;
pub mod blame;
pub mod breaker;
pub mod cache;
pub mod call_ctx;
pub mod canon;
pub mod chain;
pub mod classify;
pub mod cordon;
pub mod dedupe;
pub mod exchange;
pub mod finality;
pub mod forward;
pub mod hedge;
pub mod inflight;
pub mod judge;
pub mod logs;
pub mod marks;
pub mod outcome;
pub mod pipeline;
pub mod quota;
/// The method table lives in the shared vocabulary (`prism_wire::rpc::methods`).
pub use prism_wire::rpc::methods;
pub mod route;
pub mod router;
pub mod sides;
pub mod slots;
pub mod state;
pub mod submit;
pub mod subs;
pub mod sync_submit;
pub mod txhash;
pub mod verify;
pub mod verify_rule;

pub use outcome::{CallOutcome, Caller, How, ProxyError, Source};
pub use pipeline::forward;
pub use prism_wire::rpc::wire::write_upstream_call;
pub use route::{NetworkRoute, Upstream};
