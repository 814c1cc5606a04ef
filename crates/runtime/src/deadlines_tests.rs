//! The shard's deadlines against real time on a real executor: they fire when due and not before, an earlier
//! one re-arms the driver, dropped ones are forgotten without piling up, and a second executor on the same
//! thread gets a driver of its own.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Deadline, WHEEL};
use crate::test_shard;

/// Runs `f` on its own thread, failing the test (instead of hanging it) after `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).expect("a deadline never fired")
}

fn heap_len() -> usize {
    WHEEL.with(|w| w.borrow().heap.len())
}

fn live() -> usize {
    WHEEL.with(|w| w.borrow().live)
}

#[test]
fn deadlines_fire_when_due_in_order_and_not_before() {
    let order = within(Duration::from_secs(20), || {
        test_shard(async {
            let t0 = Instant::now();
            let fired = Rc::new(std::cell::RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            // Registered latest first, so each new one is earlier than what the driver sleeps for.
            for ms in [120u64, 80, 40, 10] {
                let fired = fired.clone();
                tasks.push(glommio::spawn_local(async move {
                    Deadline::at(t0 + Duration::from_millis(ms)).await;
                    let late = t0.elapsed();
                    assert!(late >= Duration::from_millis(ms), "{ms} ms deadline fired at {late:?}");
                    fired.borrow_mut().push(ms);
                }));
            }
            for t in tasks {
                t.await;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "overslept: {:?}", t0.elapsed());
            assert_eq!(live(), 0);
            let v = fired.borrow().clone();
            v
        })
    });
    assert_eq!(order, vec![10, 40, 80, 120]);
}

#[test]
fn an_earlier_deadline_wakes_the_driver_sleeping_for_a_later_one() {
    let waited = within(Duration::from_secs(20), || {
        test_shard(async {
            // The driver now sleeps for an hour.
            let far = glommio::spawn_local(Deadline::at(Instant::now() + Duration::from_secs(3600)));
            glommio::yield_if_needed().await;
            futures_lite::future::yield_now().await;
            let t0 = Instant::now();
            Deadline::at(t0 + Duration::from_millis(20)).await;
            let waited = t0.elapsed();
            drop(far);
            waited
        })
    });
    assert!(waited >= Duration::from_millis(20), "fired early: {waited:?}");
    assert!(
        waited < Duration::from_secs(2),
        "the driver slept through an earlier deadline: {waited:?}"
    );
}

#[test]
fn a_deadline_already_past_is_ready_at_once() {
    within(Duration::from_secs(20), || {
        test_shard(async {
            Deadline::at(Instant::now() - Duration::from_millis(1)).await;
            assert_eq!(heap_len(), 0, "a past deadline was registered");
        })
    });
}

#[test]
fn dropped_deadlines_never_fire_and_do_not_pile_up() {
    let (still_waiting, max_heap) = within(Duration::from_secs(30), || {
        test_shard(async {
            let mut max_heap = 0;
            let mut kept = Vec::new();
            for i in 0..20_000u64 {
                // Each request's deadline, armed and then dropped because the work finished first.
                let due = Instant::now() + Duration::from_millis(5 + i % 7);
                let mut d = Box::pin(Deadline::at(due));
                // Ready only if the thread was held up past `due` (a loaded machine): never before it.
                if futures_lite::future::poll_once(&mut d).await.is_some() {
                    assert!(Instant::now() >= due, "a deadline fired before it was due");
                }
                drop(d);
                // Now and then one that stays, like an idle connection's: it takes a slot a dropped one
                // had, whose stale heap entry comes due long before it.
                if i % 100 == 0 {
                    let mut k = Box::pin(Deadline::at(Instant::now() + Duration::from_secs(3600)));
                    assert!(futures_lite::future::poll_once(&mut k).await.is_none());
                    kept.push(k);
                }
                max_heap = max_heap.max(heap_len());
            }
            // Long enough for every dropped deadline to have come due.
            glommio::timer::sleep(Duration::from_millis(50)).await;
            assert_eq!(live(), kept.len());
            let mut still_waiting = 0;
            for k in kept.iter_mut() {
                if futures_lite::future::poll_once(k).await.is_none() {
                    still_waiting += 1;
                }
            }
            (still_waiting, max_heap)
        })
    });
    assert_eq!(
        still_waiting, 200,
        "a stale entry fired a deadline that reused its slot"
    );
    assert!(
        max_heap <= super::SLACK + 3 * 200 + 2,
        "stale entries piled up: {max_heap}"
    );
}

#[test]
fn a_slot_taken_again_is_not_fired_by_the_entry_its_last_deadline_left() {
    let fired = within(Duration::from_secs(20), || {
        test_shard(async {
            // 50 ms: far enough that a loaded machine does not reach it before the first poll.
            let mut first = Box::pin(Deadline::at(Instant::now() + Duration::from_millis(50)));
            assert!(futures_lite::future::poll_once(&mut first).await.is_none());
            drop(first);
            // Takes the slot `first` freed; `first`'s heap entry comes due in 50 ms.
            let mut second = Box::pin(Deadline::at(Instant::now() + Duration::from_secs(3600)));
            assert!(futures_lite::future::poll_once(&mut second).await.is_none());
            glommio::timer::sleep(Duration::from_millis(120)).await;
            futures_lite::future::poll_once(&mut second).await.is_some()
        })
    });
    assert!(!fired, "a stale heap entry fired the deadline that reused its slot");
}

#[test]
fn many_concurrent_deadlines_all_fire() {
    let n = within(Duration::from_secs(30), || {
        test_shard(async {
            let t0 = Instant::now();
            let count = Rc::new(Cell::new(0u32));
            let tasks: Vec<_> = (0..2000u64)
                .map(|i| {
                    let count = count.clone();
                    glommio::spawn_local(async move {
                        let at = t0 + Duration::from_micros(((i * 7919) % 50) * 1000);
                        Deadline::at(at).await;
                        assert!(Instant::now() >= at);
                        count.set(count.get() + 1);
                    })
                })
                .collect();
            for t in tasks {
                t.await;
            }
            count.get()
        })
    });
    assert_eq!(n, 2000);
}

#[test]
fn a_second_executor_on_the_same_thread_gets_its_own_driver() {
    within(Duration::from_secs(20), || {
        for round in 0..3 {
            test_shard(async move {
                // Left waiting when this executor ends: the next one must not depend on it.
                glommio::spawn_local(Deadline::at(Instant::now() + Duration::from_secs(3600))).detach();
                futures_lite::future::yield_now().await;
                let t0 = Instant::now();
                Deadline::at(t0 + Duration::from_millis(10)).await;
                assert!(t0.elapsed() < Duration::from_secs(2), "round {round}: overslept");
            });
        }
    });
}
