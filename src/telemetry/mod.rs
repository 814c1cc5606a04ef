//! Telemetry: the process clock, latency windows, health snapshots, logging; metrics and the status page
//! grow here.

pub mod clock;
pub mod logging;
pub mod metrics;
pub mod recorder;
pub mod snapshot;
pub mod window;
