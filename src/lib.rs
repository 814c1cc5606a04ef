//! Prism: a thread-per-core JSON-RPC proxy in front of many blockchain RPC providers.
//!
//! Layers (see docs/ARCHITECTURE.md): `edge` → `core` → `transport` → `upstream`; `runtime` is the glommio boundary,
//! `config` the typed configuration, `telemetry` logs and counters, `http1` the wire codec both sides share.

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
