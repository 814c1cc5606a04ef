//! A bounded single-shard queue with an async receiver: how one task hands messages to another on the same
//! shard (subscription fan-out to a client's writer) without locks or cross-thread channels.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use event_listener::Event;

pub struct LocalQueue<T> {
    items: RefCell<VecDeque<T>>,
    capacity: usize,
    closed: Cell<bool>,
    overflowed: Cell<bool>,
    event: Event,
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
            event: Event::new(),
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
        self.event.notify(1);
        Ok(())
    }

    /// Drops every queued item (the receiver sees `None` next if the queue is closed).
    pub fn clear(&self) {
        self.items.borrow_mut().clear();
    }

    pub fn close(&self) {
        self.closed.set(true);
        self.event.notify(usize::MAX);
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

    /// The next item; `None` once closed and drained.
    pub async fn pop(&self) -> Option<T> {
        loop {
            if let Some(item) = self.items.borrow_mut().pop_front() {
                return Some(item);
            }
            if self.closed.get() {
                return None;
            }
            let listener = self.event.listen();
            if !self.items.borrow().is_empty() || self.closed.get() {
                continue;
            }
            listener.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
