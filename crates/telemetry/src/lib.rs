//! Telemetry: the process clock, latency windows, health snapshots, logging; metrics and the status page
//! grow here.

pub mod badge;
pub mod build;
pub mod cause;
pub mod clock;
pub mod history;
pub mod logging;
pub mod metrics;
pub mod recorder;
pub mod snapshot;
pub mod status;
pub mod totals;
pub mod window;
