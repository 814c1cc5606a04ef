//! Telemetry: logging setup now; latency windows, metrics and the status page grow here.

pub mod logging;
