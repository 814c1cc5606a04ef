//! Logs through `tracing` to stderr via a non-blocking writer: a shard must never block on a slow terminal.
//! Debug and trace are compiled out of release builds (`release_max_level_info`).

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// Keeps the background log writer alive; drop it last so buffered lines are flushed.
pub struct LogGuard(#[allow(dead_code)] tracing_appender::non_blocking::WorkerGuard);

/// Installs the global subscriber. `filter` is an EnvFilter directive (`info`, `prism=debug`, ...);
/// `RUST_LOG` overrides it. `log` records (glommio's warnings) are bridged in.
pub fn init(format: LogFormat, filter: &str) -> LogGuard {
    let (writer, guard) = tracing_appender::non_blocking(std::io::stderr());
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(filter));
    use std::io::IsTerminal;
    // Colours only for a person at a terminal; files and log shippers get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    LogGuard(guard)
}
