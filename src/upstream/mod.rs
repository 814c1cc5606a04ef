//! The upstream layer: the providers Prism knows, as resolved at start-up.

mod registry;

pub use registry::{NetworkSpec, ProviderSpec, Registry};
