//! Two futures run together in one task, each polled only when its own waker fired. `futures_lite::zip`
//! polls both whenever either is woken: a WebSocket session's writer is woken once per notification, and
//! its reader (waiting on the socket, a timer and two shutdown signals) was polled every time too.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Runs `a` and `b` to completion in the calling task; each is polled only after its own wake.
pub async fn zip_apart<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (left, right) = (Side::new(), Side::new());
    let (left_waker, right_waker) = (Waker::from(left.clone()), Waker::from(right.clone()));
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut out_a, mut out_b) = (None, None);
    std::future::poll_fn(|cx| {
        left.task.register(cx.waker());
        right.task.register(cx.waker());
        if out_a.is_none() && left.woken.swap(false, Ordering::AcqRel) {
            if let Poll::Ready(v) = a.as_mut().poll(&mut Context::from_waker(&left_waker)) {
                out_a = Some(v);
            }
        }
        if out_b.is_none() && right.woken.swap(false, Ordering::AcqRel) {
            if let Poll::Ready(v) = b.as_mut().poll(&mut Context::from_waker(&right_waker)) {
                out_b = Some(v);
            }
        }
        if out_a.is_some() && out_b.is_some() {
            Poll::Ready((out_a.take().expect("a is done"), out_b.take().expect("b is done")))
        } else {
            Poll::Pending
        }
    })
    .await
}

/// One side's wake: marks it to be polled and wakes the task.
struct Side {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Side {
    fn new() -> Arc<Side> {
        Arc::new(Side {
            // Polled once to begin with.
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        })
    }
}

impl Wake for Side {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::pin::Pin;

    /// Pending until `ready` is set; counts its polls; wakes itself through the waker it was last given
    /// when `kick` is called.
    struct Probe<'a> {
        polls: &'a Cell<u32>,
        ready: &'a Cell<bool>,
        waker: &'a std::cell::RefCell<Option<Waker>>,
    }

    impl Future for Probe<'_> {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            self.polls.set(self.polls.get() + 1);
            if self.ready.get() {
                return Poll::Ready(self.polls.get());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[test]
    fn each_side_is_polled_only_after_its_own_wake() {
        let (pa, pb) = (Cell::new(0), Cell::new(0));
        let (ra, rb) = (Cell::new(false), Cell::new(false));
        let (wa, wb) = (std::cell::RefCell::new(None), std::cell::RefCell::new(None));
        let a = Probe {
            polls: &pa,
            ready: &ra,
            waker: &wa,
        };
        let b = Probe {
            polls: &pb,
            ready: &rb,
            waker: &wb,
        };
        let mut both = Box::pin(zip_apart(a, b));
        let task = Waker::noop();
        let mut cx = Context::from_waker(task);
        assert!(both.as_mut().poll(&mut cx).is_pending());
        assert_eq!((pa.get(), pb.get()), (1, 1), "each polled once to begin with");
        for _ in 0..5 {
            wb.borrow().as_ref().unwrap().wake_by_ref();
            assert!(both.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!((pa.get(), pb.get()), (1, 6), "b's wakes poll b alone");
        ra.set(true);
        assert!(both.as_mut().poll(&mut cx).is_pending());
        assert_eq!(pa.get(), 1, "a not woken: not polled even though it would finish");
        wa.borrow().as_ref().unwrap().wake_by_ref();
        rb.set(true);
        wb.borrow().as_ref().unwrap().wake_by_ref();
        assert_eq!(both.as_mut().poll(&mut cx), Poll::Ready((2, 7)));
    }
}
