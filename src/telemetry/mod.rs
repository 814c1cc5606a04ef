//! Telemetry: the process clock, latency windows, health snapshots, logging; metrics and the status page
//! grow here.

pub mod badge;
pub mod clock;
pub mod history;
pub mod logging;
pub mod metrics;
pub mod recorder;
pub mod snapshot;
pub mod totals;
pub mod window;
