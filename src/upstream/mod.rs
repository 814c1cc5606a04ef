//! The upstream layer: the providers Prism knows (resolved at start-up), their health aggregator, and the
//! prober that checks each one independently of traffic.

pub mod health;
pub mod prober;
mod registry;

pub use registry::{NetworkSpec, ProviderSpec, Registry};
