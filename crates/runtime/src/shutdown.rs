//! Process-wide shutdown: SIGINT/SIGTERM (or `trigger`) set one flag and wake every waiter on every shard.
//! Idle connections wait on it without timers, so 10 000 idle sockets cost no wakeups.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use event_listener::Event;
use slab::Slab;

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

    /// Makes SIGINT and SIGTERM trigger this shutdown. Signal handlers may only write to a pipe, so a small
    /// watcher thread blocks on it (`signal_hook::iterator`): it wakes when a signal arrives, never to poll.
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        let mut signals =
            signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])?;
        let this = self.clone();
        std::thread::Builder::new()
            .name("prism-signals".into())
            .spawn(move || {
                for (n, _) in signals.forever().enumerate() {
                    if n == 0 {
                        tracing::info!("shutdown signal received; draining");
                        this.trigger();
                    } else {
                        tracing::info!("shutdown signal received again; already draining");
                    }
                }
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

/// One shard's view of a [`Shutdown`], for what waits on it between every request (each idle keep-alive
/// read). Its waiters register with this shard alone: the process-wide `Event` is a locked list every
/// shard touched twice a request, and each wait allocated a listener. One task on the shard waits on the
/// process-wide signal and wakes them. Made on the shard, shared by its connections.
pub struct LocalShutdown {
    global: Shutdown,
    local: Rc<Waiters>,
}

#[derive(Default)]
struct Waiters {
    relaying: Cell<bool>,
    wakers: RefCell<Slab<Waker>>,
}

impl LocalShutdown {
    pub fn new(global: Shutdown) -> Self {
        LocalShutdown {
            global,
            local: Rc::default(),
        }
    }

    pub fn is_triggered(&self) -> bool {
        self.global.is_triggered()
    }

    /// Resolves once shutdown has been triggered, like [`Shutdown::triggered`].
    pub fn triggered(&self) -> Triggered<'_> {
        Triggered { of: self, slot: None }
    }
}

/// [`LocalShutdown::triggered`]'s future: a slot in the shard's waiter list while it waits.
pub struct Triggered<'a> {
    of: &'a LocalShutdown,
    slot: Option<usize>,
}

impl Future for Triggered<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The flag is set before the relay wakes anyone, so it alone says whether this is over.
        if self.of.global.is_triggered() {
            return Poll::Ready(());
        }
        let local = &self.of.local;
        match self.slot {
            Some(i) => {
                let mut wakers = local.wakers.borrow_mut();
                if !wakers[i].will_wake(cx.waker()) {
                    wakers[i] = cx.waker().clone();
                }
            }
            None => {
                self.slot = Some(local.wakers.borrow_mut().insert(cx.waker().clone()));
                if !local.relaying.replace(true) {
                    let (global, local) = (self.of.global.clone(), local.clone());
                    // Wakes each waiter once; each one's next poll sees the flag and ends.
                    crate::spawn(async move {
                        global.triggered().await;
                        let wakers: Vec<Waker> = local.wakers.borrow().iter().map(|(_, w)| w.clone()).collect();
                        for w in wakers {
                            w.wake();
                        }
                    });
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for Triggered<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.slot.take() {
            self.of.local.wakers.borrow_mut().remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn every_waiter_of_a_shard_wakes_when_another_thread_triggers() {
        let global = Shutdown::new();
        let trigger = global.clone();
        let (woke, slots) = crate::test_shard(async move {
            let local = Rc::new(LocalShutdown::new(global));
            // Waiters that come and go, like idle reads between requests: their slots are reused.
            for _ in 0..1000 {
                let mut w = Box::pin(local.triggered());
                assert!(futures_lite::future::poll_once(&mut w).await.is_none());
            }
            let woke = Rc::new(Cell::new(0));
            let waiters: Vec<_> = (0..100)
                .map(|_| {
                    let (local, woke) = (local.clone(), woke.clone());
                    glommio::spawn_local(async move {
                        local.triggered().await;
                        woke.set(woke.get() + 1);
                    })
                })
                .collect();
            futures_lite::future::yield_now().await;
            std::thread::spawn(move || {
                #[allow(clippy::disallowed_methods, reason = "a plain thread outside the shard, by design")]
                std::thread::sleep(Duration::from_millis(20));
                trigger.trigger();
            });
            let t0 = Instant::now();
            for w in waiters {
                crate::timeout_at(t0 + Duration::from_secs(10), w)
                    .await
                    .expect("a waiter never woke");
            }
            // Triggered already: a new wait ends at once.
            local.triggered().await;
            let slots = local.local.wakers.borrow().capacity();
            (woke.get(), slots)
        });
        assert_eq!(woke, 100);
        // 100 waiters at once need at most 128 slots (the slab grows by doubling); 1 100 would mean none was reused.
        assert!(slots <= 128, "dropped waiters' slots were not reused: {slots}");
    }
}
