//! Heap homes for one large per-request future, kept by the shard between requests.
//!
//! A connection answers each request in a boxed future (about 5 KB: inline it would sit in every idle
//! connection's task). That size is past malloc's per-thread cache, so each box took malloc's slow path
//! and its free the consolidating one: ~500 instructions a request. A shard keeps a few such allocations
//! and builds each request's future in one of them; a connection holds one only while it answers.

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// At most this many are kept: a shard's connections answering at once, beyond that malloc's again.
const KEEP_COUNT: usize = 64;

/// Allocations of one layout (the first one boxed here); other layouts are plain boxes.
#[derive(Default)]
pub struct SpareBoxes {
    layout: Cell<Option<Layout>>,
    spare: RefCell<Vec<NonNull<u8>>>,
}

impl SpareBoxes {
    /// The future `make` returns, pinned on the heap in a kept allocation when one fits. Made by a closure
    /// so it is built in its home, not on the stack and copied there (~500 instructions for 5 KB).
    pub fn pin_with<F: Future>(&self, make: impl FnOnce() -> F) -> Recycled<'_, F> {
        let layout = Layout::new::<F>();
        let home = if layout.size() == 0 {
            NonNull::<F>::dangling()
        } else {
            let kept = match self.layout.get() {
                Some(l) if l == layout => self.spare.borrow_mut().pop(),
                Some(_) => None,
                None => {
                    self.layout.set(Some(layout));
                    None
                }
            };
            let raw = kept.unwrap_or_else(|| {
                // SAFETY: the layout's size is not zero.
                let p = unsafe { std::alloc::alloc(layout) };
                NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
            });
            raw.cast::<F>()
        };
        // SAFETY: `home` is valid for writes of one `F` (allocated with its layout, or dangling for a
        // zero-sized `F`) and holds no live value.
        unsafe { home.as_ptr().write(make()) };
        Recycled {
            home,
            boxes: self,
            _owns: PhantomData,
        }
    }

    fn give_back(&self, raw: NonNull<u8>, layout: Layout) {
        if self.layout.get() == Some(layout) {
            let mut spare = self.spare.borrow_mut();
            if spare.len() < KEEP_COUNT {
                spare.push(raw);
                return;
            }
        }
        // SAFETY: `raw` was allocated by `pin` with this layout and holds no live value any more.
        unsafe { std::alloc::dealloc(raw.as_ptr(), layout) };
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.spare.borrow().len()
    }
}

impl Drop for SpareBoxes {
    fn drop(&mut self) {
        if let Some(layout) = self.layout.get() {
            for raw in self.spare.get_mut().drain(..) {
                // SAFETY: every kept pointer was allocated by `pin` with this layout and is empty.
                unsafe { std::alloc::dealloc(raw.as_ptr(), layout) };
            }
        }
    }
}

/// A future in a shard's kept allocation: it never moves until it is dropped there, then the allocation
/// goes back to the shard.
pub struct Recycled<'a, F> {
    home: NonNull<F>,
    boxes: &'a SpareBoxes,
    /// It owns an `F` (and drops it), for the drop checker.
    _owns: PhantomData<F>,
}

/// Moving the handle never moves the future (as with `Box`).
impl<F> Unpin for Recycled<'_, F> {}

impl<F: Future> Future for Recycled<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `home` holds a live `F` that is never moved: only `Drop` ends it, in place.
        unsafe { Pin::new_unchecked(&mut *self.home.as_ptr()) }.poll(cx)
    }
}

impl<F> Drop for Recycled<'_, F> {
    fn drop(&mut self) {
        // SAFETY: `home` holds the live `F` written by `pin`, dropped exactly once, here.
        unsafe { std::ptr::drop_in_place(self.home.as_ptr()) };
        let layout = Layout::new::<F>();
        if layout.size() != 0 {
            self.boxes.give_back(self.home.cast(), layout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Counts its drops, to see each future dropped exactly once.
    struct Probe(Rc<Cell<u32>>, [u8; 4096]);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn futures_run_to_their_result_and_the_allocation_is_reused() {
        let boxes = SpareBoxes::default();
        let drops = Rc::new(Cell::new(0));
        let mut homes = Vec::new();
        for i in 0..10u32 {
            let probe = Probe(drops.clone(), [7; 4096]);
            let f = boxes.pin_with(|| async move {
                futures_lite::future::yield_now().await;
                i + probe.1[4095] as u32
            });
            homes.push(f.home.as_ptr() as usize);
            assert_eq!(futures_lite::future::block_on(f), i + 7);
        }
        assert_eq!(drops.get(), 10, "every future was dropped once");
        assert!(
            homes.iter().all(|&h| h == homes[0]),
            "one allocation served every request in turn"
        );
        assert_eq!(boxes.kept(), 1);
    }

    #[test]
    fn a_future_dropped_before_it_finishes_is_dropped_once_and_its_home_kept() {
        let boxes = SpareBoxes::default();
        let drops = Rc::new(Cell::new(0));
        let probe = Probe(drops.clone(), [0; 4096]);
        let mut f = boxes.pin_with(|| async move {
            let _p = probe;
            std::future::pending::<()>().await
        });
        assert!(futures_lite::future::block_on(futures_lite::future::poll_once(&mut f)).is_none());
        drop(f);
        assert_eq!(drops.get(), 1);
        assert_eq!(boxes.kept(), 1);
    }

    #[test]
    fn at_most_keep_count_are_kept_and_other_layouts_are_not() {
        let boxes = SpareBoxes::default();
        let many: Vec<_> = (0..KEEP_COUNT + 10)
            .map(|_| {
                let a = [1u8; 2048];
                boxes.pin_with(|| async move { a[0] })
            })
            .collect();
        drop(many);
        assert_eq!(boxes.kept(), KEEP_COUNT);
        let b = [2u8; 100];
        let other = boxes.pin_with(|| async move { b[0] });
        drop(other);
        assert_eq!(boxes.kept(), KEEP_COUNT, "a future of another size is not kept");
        let zero = boxes.pin_with(|| async {});
        futures_lite::future::block_on(zero);
    }
}
