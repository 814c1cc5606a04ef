//! Prism: a thread-per-core JSON-RPC proxy in front of many blockchain RPC providers.
//!
//! Requests flow `edge` → `core` → `transport`; `upstream` (health) sits beside core and reads its live
//! state; `rpc` is the vocabulary every layer speaks; `runtime` is the glommio boundary. The layers and the
//! order imports may go in are in docs/ARCHITECTURE.md and checked by `scripts/layers.py`.

pub mod access;
pub mod app;
pub mod cluster;
pub mod config;
pub mod core;
pub mod demo;
pub mod edge;
pub mod http1;
pub mod jsonscan;
pub mod rpc;
pub mod runtime;
pub mod solana;
pub mod telemetry;
pub mod transport;
pub mod upstream;
