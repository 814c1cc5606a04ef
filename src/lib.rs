//! Prism: a thread-per-core JSON-RPC proxy in front of many blockchain RPC providers.
//!
//! This crate is the application layer: the client edge (`edge`), API keys (`access`), state shared between
//! nodes (`cluster`), upstream health (`upstream`) and the composition root (`app`). The layers below it are
//! crates of their own, so the compiler holds the order imports go in (docs/ARCHITECTURE.md):
//! `prism-wire` (jsonscan, http1, rpc) < `prism-runtime` < `prism-config`, `prism-telemetry` <
//! `prism-transport` < `prism-core` (the balancer) < `prism-solana` < this crate. They are re-exported here
//! under their module names so tests, benches and fuzz targets name one crate.

pub use prism_config as config;
pub use prism_core as core;
pub use prism_runtime as runtime;
pub use prism_solana as solana;
pub use prism_telemetry as telemetry;
pub use prism_transport as transport;
pub use prism_wire::{http1, jsonscan, rpc};

pub mod access;
pub mod app;
pub mod cluster;
pub mod demo;
pub mod edge;
pub mod upstream;
