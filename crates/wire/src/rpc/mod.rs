//! The shared vocabulary every layer speaks: one call, the method table, provider ids, subscription topic kinds, Solana
//! keys (base58), the JSON writers. It
//! imports nothing of the layers above it (only the byte codecs), so edge, core, solana and telemetry all
//! import down into it.

pub mod base58;
pub mod call;
pub mod ids;
pub mod methods;
pub mod provider;
pub mod pubkey;
pub mod topic;
pub mod wire;

pub use call::Call;
pub use provider::ProviderId;
pub use topic::TopicKind;
