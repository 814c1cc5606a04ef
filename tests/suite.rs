//! Prism's integration tests, one test binary (it links the crates once, not once per file): each file
//! beside this one is a module, so `cargo test --test suite reorgs::` runs one file's tests. Real sockets
//! on loopback against the release-built binary, real nodes and SDKs where they exist (docs/TESTING.md).
//! cluster.rs, chaos.rs, fair_share.rs and in_flight.rs stay binaries of their own: they measure rates and
//! latencies and run their tests one at a time, so they run without the rest of the suite beside them.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "tests and their fakes run on plain threads, not shards; the size targets are for the product"
)]

mod support;

mod anvil_writes;
mod block_availability;
mod config_cli;
mod config_reference;
mod conformance;
mod day_one;
mod deploy_kit;
mod diagnostic_headers;
mod edge_admin;
mod edge_complexity;
mod edge_http;
mod edge_keys;
mod edge_metrics;
mod edge_privacy;
mod edge_ratelimit;
mod edge_status_page;
mod edge_tls;
mod fake_provider;
mod finality;
mod fuzz_replay;
mod hedging;
mod hostile_provider;
mod jsonrpc_envelope;
mod logs_split;
mod poisoned_heads;
mod real_clients;
mod reload;
mod reorgs;
mod reuse;
mod routing_blame;
mod routing_breaker;
mod routing_chain_view;
mod routing_failover;
mod routing_strategies;
mod routing_writes;
mod seccomp;
mod shutdown;
mod solana_client;
mod solana_errors;
mod solana_fixtures;
mod solana_resubscribe;
mod solana_routing;
mod solana_sdk;
mod solana_slots;
mod solana_subs;
mod solana_ws;
mod sync_submit;
mod upstream_client;
mod verified_reads;
mod websocket;
