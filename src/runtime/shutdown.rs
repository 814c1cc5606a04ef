//! Process-wide shutdown: SIGINT/SIGTERM (or `trigger`) set one flag and wake every waiter on every shard.
//! Idle connections wait on it without timers, so 10 000 idle sockets cost no wakeups.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use event_listener::Event;

/// Cheap to clone; shared by the signal watcher and every shard.
#[derive(Clone, Default)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    flag: AtomicBool,
    event: Event,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes SIGINT and SIGTERM trigger this shutdown. Signal handlers may only set a flag, so a small
    /// watcher thread turns the flag into a wakeup.
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        let raised = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, raised.clone())?;
        }
        let this = self.clone();
        std::thread::Builder::new()
            .name("prism-signals".into())
            .spawn(move || {
                while !raised.load(Ordering::Acquire) && !this.is_triggered() {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if raised.load(Ordering::Acquire) {
                    tracing::info!("shutdown signal received; draining");
                }
                this.trigger();
            })?;
        Ok(())
    }

    pub fn trigger(&self) {
        self.inner.flag.store(true, Ordering::Release);
        self.inner.event.notify(usize::MAX);
    }

    pub fn is_triggered(&self) -> bool {
        self.inner.flag.load(Ordering::Acquire)
    }

    /// Resolves once shutdown has been triggered. Meant to be raced against accepts and idle reads.
    pub async fn triggered(&self) {
        loop {
            if self.is_triggered() {
                return;
            }
            let listener = self.inner.event.listen();
            if self.is_triggered() {
                return;
            }
            listener.await;
        }
    }
}
