//! A bounded single-shard queue with an async receiver: how one task hands messages to another on the same
//! shard (subscription fan-out to a client's writer) without locks or cross-thread channels. One receiver
//! per queue: a push wakes it through a single waker slot, so handing one notification to each of 10 000
//! subscribers costs no allocation and no lock (an `Event` listener allocated per wait did).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Poll, Waker};

use event_listener::Event;

pub struct LocalQueue<T> {
    items: RefCell<VecDeque<T>>,
    capacity: usize,
    closed: Cell<bool>,
    overflowed: Cell<bool>,
    /// The receiver waiting in [`LocalQueue::pop`].
    receiver: RefCell<Option<Waker>>,
    closed_event: Event,
}

/// Why a push was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// The receiver cannot keep up.
    Full,
    Closed,
}

impl<T> LocalQueue<T> {
    pub fn new(capacity: usize) -> Rc<Self> {
        Rc::new(LocalQueue {
            items: RefCell::new(VecDeque::new()),
            capacity: capacity.max(1),
            closed: Cell::new(false),
            overflowed: Cell::new(false),
            receiver: RefCell::new(None),
            closed_event: Event::new(),
        })
    }

    pub fn push(&self, item: T) -> Result<(), PushError> {
        if self.closed.get() {
            return Err(PushError::Closed);
        }
        let mut items = self.items.borrow_mut();
        if items.len() >= self.capacity {
            // A receiver that cannot keep up is cut off rather than allowed to grow memory without bound.
            drop(items);
            self.overflowed.set(true);
            self.close();
            return Err(PushError::Full);
        }
        items.push_back(item);
        drop(items);
        self.wake_receiver();
        Ok(())
    }

    /// Drops every queued item (the receiver sees `None` next if the queue is closed).
    pub fn clear(&self) {
        self.items.borrow_mut().clear();
    }

    pub fn close(&self) {
        self.closed.set(true);
        self.wake_receiver();
        self.closed_event.notify(usize::MAX);
    }

    /// Resolves once the queue is closed (by either side, or by an overflow).
    pub async fn closed(&self) {
        loop {
            if self.closed.get() {
                return;
            }
            let listener = self.closed_event.listen();
            if self.closed.get() {
                return;
            }
            listener.await;
        }
    }

    /// Closed because a push found it full.
    pub fn overflowed(&self) -> bool {
        self.overflowed.get()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    pub fn len(&self) -> usize {
        self.items.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next item if one is queued now.
    pub fn try_pop(&self) -> Option<T> {
        self.items.borrow_mut().pop_front()
    }

    /// The next item; `None` once closed and drained. One receiver at a time.
    pub async fn pop(&self) -> Option<T> {
        std::future::poll_fn(|cx| {
            if let Some(item) = self.items.borrow_mut().pop_front() {
                return Poll::Ready(Some(item));
            }
            if self.closed.get() {
                return Poll::Ready(None);
            }
            let mut receiver = self.receiver.borrow_mut();
            if !receiver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *receiver = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    fn wake_receiver(&self) {
        let waker = self.receiver.borrow_mut().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn bounded_and_closable() {
        let q = LocalQueue::new(2);
        assert_eq!(q.push(1), Ok(()));
        assert_eq!(q.push(2), Ok(()));
        assert_eq!(q.push(3), Err(PushError::Full));
        assert!(q.overflowed() && q.is_closed(), "overflow closes the queue");
        assert_eq!(futures_lite::future::block_on(q.pop()), Some(1));
        assert_eq!(q.push(4), Err(PushError::Closed));
        assert_eq!(futures_lite::future::block_on(q.pop()), Some(2));
        assert_eq!(futures_lite::future::block_on(q.pop()), None);
    }

    /// A waker that counts its wakes.
    struct Count(std::sync::atomic::AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiting_receiver_is_woken_by_a_push_and_by_close() {
        let q: Rc<LocalQueue<u32>> = LocalQueue::new(4);
        let count = std::sync::Arc::new(Count(Default::default()));
        let waker = Waker::from(count.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let woken = || count.0.load(std::sync::atomic::Ordering::SeqCst);
        let mut pop = Box::pin(q.pop());
        assert!(pop.as_mut().poll(&mut cx).is_pending());
        q.push(7).unwrap();
        assert_eq!(woken(), 1);
        assert_eq!(pop.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
        let mut pop = Box::pin(q.pop());
        assert!(pop.as_mut().poll(&mut cx).is_pending());
        assert!(
            pop.as_mut().poll(&mut cx).is_pending(),
            "polled again: one waker kept, not two"
        );
        q.close();
        assert_eq!(woken(), 2);
        assert_eq!(pop.as_mut().poll(&mut cx), Poll::Ready(None));
        assert_eq!(q.try_pop(), None);
    }
}
