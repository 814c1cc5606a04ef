//! Process-wide shutdown: SIGINT/SIGTERM set one flag; shards notice it within a tick and drain.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Cheap to clone; shared by the signal handler and every shard.
#[derive(Clone, Default)]
pub struct Shutdown {
    flag: Arc<AtomicBool>,
}

/// How often a shard looks at the flag while it waits. Shutdown latency, not a hot path.
const TICK: Duration = Duration::from_millis(25);

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Installs handlers so SIGINT and SIGTERM trigger this shutdown.
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, self.flag.clone())?;
        }
        Ok(())
    }

    pub fn trigger(&self) {
        self.flag.store(true, Ordering::Release);
    }

    pub fn is_triggered(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Resolves once shutdown has been triggered. Meant to be raced against accepts and idle reads.
    pub async fn triggered(&self) {
        while !self.is_triggered() {
            glommio::timer::sleep(TICK).await;
        }
    }

    /// Blocks a plain (non-shard) thread until shutdown is triggered.
    pub fn wait_blocking(&self) {
        while !self.is_triggered() {
            std::thread::sleep(TICK);
        }
    }
}
