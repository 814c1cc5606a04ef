//! Process-wide shutdown: SIGINT/SIGTERM (or `trigger`) set one flag and wake every waiter on every shard.
//! Idle connections wait on it without timers, so 10 000 idle sockets cost no wakeups.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
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
    fired: Cell<bool>,
    relaying: Cell<bool>,
    slots: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl Waiters {
    fn wake_all(&self) {
        self.fired.set(true);
        let wakers: Vec<Waker> = self.slots.borrow_mut().iter_mut().filter_map(Option::take).collect();
        for w in wakers {
            w.wake();
        }
    }
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
        let local = &self.of.local;
        if local.fired.get() || self.of.global.is_triggered() {
            return Poll::Ready(());
        }
        match self.slot {
            Some(i) => {
                let mut slots = local.slots.borrow_mut();
                match &mut slots[i] {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
            }
            None => {
                let i = match local.free.borrow_mut().pop() {
                    Some(i) => {
                        local.slots.borrow_mut()[i] = Some(cx.waker().clone());
                        i
                    }
                    None => {
                        let mut slots = local.slots.borrow_mut();
                        slots.push(Some(cx.waker().clone()));
                        slots.len() - 1
                    }
                };
                self.slot = Some(i);
                if !local.relaying.replace(true) {
                    let (global, local) = (self.of.global.clone(), local.clone());
                    crate::runtime::spawn(async move {
                        global.triggered().await;
                        local.wake_all();
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
            self.of.local.slots.borrow_mut()[i] = None;
            self.of.local.free.borrow_mut().push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn every_waiter_of_a_shard_wakes_when_another_thread_triggers() {
        let global = Shutdown::new();
        let trigger = global.clone();
        let (woke, slots) = crate::runtime::test_shard(async move {
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
                std::thread::sleep(Duration::from_millis(20));
                trigger.trigger();
            });
            let t0 = Instant::now();
            for w in waiters {
                crate::runtime::timeout_at(t0 + Duration::from_secs(10), w)
                    .await
                    .expect("a waiter never woke");
            }
            // Triggered already: a new wait ends at once.
            local.triggered().await;
            let slots = local.local.slots.borrow().len();
            (woke.get(), slots)
        });
        assert_eq!(woke, 100);
        assert!(slots <= 101, "dropped waiters' slots were not reused: {slots}");
    }
}
