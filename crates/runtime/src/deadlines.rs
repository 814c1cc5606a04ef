//! A shard's deadlines, all driven by one glommio timer.
//!
//! Every forwarded request waits on two or three deadlines (the client's idle read, the upstream's answer,
//! a hedge) that almost never fire. As glommio timers each costs an allocation, a `BTreeMap` insert and
//! remove in the reactor and a clock read when armed, and a removal when dropped: about 870 instructions,
//! ~6 % of a request. Here a deadline is a slab slot and a push onto a min-heap whose new entries are
//! usually the latest (deadlines are "now + a fixed budget"), so the push does not sift. A deadline that is
//! dropped before it fires frees its slot and leaves its heap entry behind, stale (its registration number no
//! longer matches the slot); stale entries are discarded when they reach the top, or all at once when they
//! outnumber the live ones. One driver task per shard sleeps on a glommio timer until the earliest entry it
//! saw is due, wakes what is due, and sleeps again; it is woken early only by a deadline earlier than the
//! one it sleeps for.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use slab::Slab;

/// Completes at its instant (or on its first poll when that is already past).
pub struct Deadline {
    at: Instant,
    /// The registration, once the first poll found the instant still ahead.
    slot: Option<Key>,
}

impl Deadline {
    pub fn at(at: Instant) -> Deadline {
        Deadline { at, slot: None }
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        match this.slot {
            None => {
                if this.at <= Instant::now() {
                    return Poll::Ready(());
                }
                let at = this.at;
                let (key, wake) = WHEEL.with(|w| w.borrow_mut().insert(at, cx.waker()));
                this.slot = Some(key);
                // Outside the borrow: glommio runs a spawned task right away.
                match wake {
                    Wake::Nobody => {}
                    Wake::Driver(driver) => driver.wake(),
                    Wake::Start(executor) => {
                        glommio::spawn_local(drive(executor)).detach();
                    }
                }
                Poll::Pending
            }
            Some(key) => {
                let fired = WHEEL.with(|w| w.borrow_mut().check(key, cx.waker()));
                if fired {
                    this.slot = None;
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(key) = self.slot.take() {
            // At thread exit the wheel may be gone already; nothing is left to cancel then.
            let _ = WHEEL.try_with(|w| w.borrow_mut().cancel(key));
        }
    }
}

thread_local! {
    static WHEEL: RefCell<Wheel> = const { RefCell::new(Wheel::new()) };
}

enum State {
    Waiting(Waker),
    Fired,
}

struct Entry {
    /// This registration's number: a heap entry or a `Deadline` holding another one for the same slot is
    /// stale (the slot was freed and taken again).
    seq: u64,
    state: State,
}

/// A registered deadline: its slot and its registration's number.
type Key = (usize, u64);

/// The shard's deadlines (one per thread: a shard is one executor on one thread).
struct Wheel {
    entries: Slab<Entry>,
    /// Numbers registrations; never reset, so nothing from before a restart matches after it.
    next_seq: u64,
    /// Earliest first; entries whose slot no longer holds that registration are stale.
    heap: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    /// Entries still waiting (fired ones wait in the slab for their `Deadline`'s next poll).
    live: usize,
    /// The executor whose driver task serves this wheel; another one (a test's next shard on the same
    /// thread) starts afresh.
    executor: Option<usize>,
    /// When the driver's timer fires, while it sleeps on one.
    armed: Option<Instant>,
    /// Set by an earlier deadline than `armed`; the driver re-arms.
    poked: bool,
    driver: Option<Waker>,
}

/// What a new deadline asks of the driver.
enum Wake {
    Nobody,
    /// Re-arm for this earlier deadline.
    Driver(Waker),
    /// This executor has no driver yet.
    Start(usize),
}

/// Stale heap entries allowed beyond the live ones before they are swept in one pass.
const SLACK: usize = 64;

/// Whether `(idx, seq)` is a registration still waiting.
fn waiting(entries: &Slab<Entry>, idx: usize, seq: u64) -> bool {
    entries
        .get(idx)
        .is_some_and(|e| e.seq == seq && matches!(e.state, State::Waiting(_)))
}

impl Wheel {
    const fn new() -> Wheel {
        Wheel {
            entries: Slab::new(),
            next_seq: 0,
            heap: BinaryHeap::new(),
            live: 0,
            executor: None,
            armed: None,
            poked: false,
            driver: None,
        }
    }

    /// Registers a deadline; also says whether the driver must re-arm for this earlier instant, or start.
    fn insert(&mut self, at: Instant, waker: &Waker) -> (Key, Wake) {
        let executor = glommio::executor().id();
        let start = self.executor != Some(executor);
        if start {
            self.restart(executor);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let idx = self.entries.insert(Entry {
            seq,
            state: State::Waiting(waker.clone()),
        });
        self.heap.push(Reverse((at, idx, seq)));
        self.live += 1;
        if self.heap.len() > SLACK + 2 * self.live {
            let entries = &self.entries;
            self.heap.retain(|Reverse((_, i, q))| waiting(entries, *i, *q));
        }
        let wake = if start {
            Wake::Start(executor)
        } else if self.armed.is_none_or(|armed| at < armed) {
            self.armed = Some(at);
            self.poked = true;
            self.driver.take().map_or(Wake::Nobody, Wake::Driver)
        } else {
            Wake::Nobody
        };
        ((idx, seq), wake)
    }

    /// Whether the deadline fired (its slot is then freed); otherwise keeps the latest waker.
    fn check(&mut self, (idx, seq): Key, waker: &Waker) -> bool {
        let Some(e) = self.entries.get_mut(idx).filter(|e| e.seq == seq) else {
            // The wheel restarted under it (a new executor on this thread): it can never fire now.
            return false;
        };
        match &mut e.state {
            State::Fired => {
                self.entries.remove(idx);
                true
            }
            State::Waiting(w) => {
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
                false
            }
        }
    }

    fn cancel(&mut self, (idx, seq): Key) {
        if self.entries.get(idx).is_some_and(|e| e.seq == seq)
            && matches!(self.entries.remove(idx).state, State::Waiting(_))
        {
            self.live -= 1;
        }
    }

    /// Marks every deadline due at `now` fired and takes its waker into `due`; returns the earliest
    /// deadline still waiting, which the driver sleeps for.
    fn expire(&mut self, now: Instant, due: &mut Vec<Waker>) -> Option<Instant> {
        while let Some(&Reverse((at, idx, seq))) = self.heap.peek() {
            let current = waiting(&self.entries, idx, seq);
            if current && at > now {
                self.armed = Some(at);
                return Some(at);
            }
            self.heap.pop();
            if current {
                if let State::Waiting(w) = std::mem::replace(&mut self.entries[idx].state, State::Fired) {
                    due.push(w);
                }
                self.live -= 1;
            }
        }
        self.armed = None;
        None
    }

    /// A new executor on this thread: what the old one registered belongs to tasks that are gone.
    fn restart(&mut self, executor: usize) {
        self.entries.clear();
        self.heap.clear();
        self.live = 0;
        self.armed = None;
        self.poked = false;
        self.driver = None;
        self.executor = Some(executor);
    }
}

/// The shard's one timer: sleeps until the earliest deadline, wakes what is due, repeats.
async fn drive(executor: usize) {
    let mut due = Vec::new();
    loop {
        let next = WHEEL.with(|w| {
            let mut w = w.borrow_mut();
            if w.executor != Some(executor) {
                return Err(());
            }
            w.poked = false;
            Ok(w.expire(Instant::now(), &mut due))
        });
        let Ok(next) = next else { return };
        for w in due.drain(..) {
            w.wake();
        }
        let poked = std::future::poll_fn(|cx| {
            WHEEL.with(|w| {
                let mut w = w.borrow_mut();
                if w.poked {
                    Poll::Ready(())
                } else {
                    w.driver = Some(cx.waker().clone());
                    Poll::Pending
                }
            })
        });
        match next {
            Some(at) => {
                let sleep = glommio::timer::Timer::new(at.saturating_duration_since(Instant::now()));
                futures_lite::future::or(
                    async {
                        sleep.await;
                    },
                    poked,
                )
                .await;
            }
            None => poked.await,
        }
    }
}

#[cfg(test)]
#[path = "deadlines_tests.rs"]
mod tests;
