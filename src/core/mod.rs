//! The balancer core: what a call means (method table), where it goes (router), and how its answer is
//! judged. For now routing is round robin; breakers, scoring and retries land on this seam.

pub mod forward;
pub mod methods;
pub mod route;

pub use forward::{forward, write_upstream_call, CallOutcome, ProxyError};
pub use route::{NetworkRoute, Upstream};
