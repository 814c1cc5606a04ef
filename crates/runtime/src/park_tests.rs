//! How a shard parks, held against the vendored glommio's sleep (vendor/README.md, change 9): a shard with
//! only a timer pending sleeps in the kernel until the timer is due (the wait carries the timeout itself),
//! and a wakeup sent from another thread always reaches a sleeping shard (fences, not a membarrier, order
//! the sleeper's flag against the waker's message). Change 10 skips polling the cross-thread queues when they
//! are empty; these tests (and the blocking-pool one) are what would catch a result or a wake it skipped.
//! Change 12 keeps a shard from parking with a woken task still queued when a preemption was pending.
//! Change 18 keeps one clock reading per loop turn; the last four tests are what would catch a reading
//! kept past a sleep or a spin, or a task-queue run accounted without reading its end.
#![allow(
    clippy::disallowed_methods,
    reason = "the test's own threads (a waker, a scripted server), not a shard"
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use event_listener::Event;

use super::{sleep, test_shard, timeout_at};

/// CPU time this thread has used so far.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` on a fresh shard in its own thread, failing the test (instead of hanging it) after `limit`.
fn on_shard_within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .expect("the shard never finished: a sleep was not woken")
}

#[test]
fn a_shard_waiting_only_on_a_timer_sleeps_until_it_is_due() {
    const NAPS: u32 = 20;
    const NAP: Duration = Duration::from_millis(25);
    let (elapsed, cpu) = on_shard_within(Duration::from_secs(30), || {
        test_shard(async {
            let (t0, c0) = (Instant::now(), thread_cpu());
            for _ in 0..NAPS {
                sleep(NAP).await;
            }
            (t0.elapsed(), thread_cpu() - c0)
        })
    });
    assert!(elapsed >= NAP * NAPS, "woke before the timers were due: {elapsed:?}");
    assert!(
        elapsed < NAP * NAPS * 4,
        "overslept: {elapsed:?} for {NAPS} naps of {NAP:?}"
    );
    // A wait that ignored its timeout would spin through the 500 ms instead of sleeping in the kernel.
    assert!(
        cpu < Duration::from_millis(100),
        "the shard spun while it waited: {cpu:?} of CPU"
    );
}

#[test]
fn every_wakeup_from_another_thread_reaches_a_sleeping_shard() {
    const ROUNDS: usize = 2_000;
    let event = Arc::new(Event::new());
    let sent = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = mpsc::channel::<usize>();

    let waker = {
        let (event, sent) = (event.clone(), sent.clone());
        std::thread::spawn(move || {
            // Each round: wait until the shard is about to park for round `i`, then wake it from here.
            while let Ok(i) = ready_rx.recv() {
                sent.store(i + 1, Ordering::Release);
                event.notify(1);
            }
        })
    };

    let woken = on_shard_within(Duration::from_secs(60), move || {
        test_shard(async move {
            for i in 0..ROUNDS {
                let listener = event.listen();
                ready_tx.send(i).unwrap();
                if sent.load(Ordering::Acquire) <= i {
                    let deadline = Instant::now() + Duration::from_secs(10);
                    timeout_at(deadline, listener)
                        .await
                        .unwrap_or_else(|_| panic!("round {i}: the wakeup from the other thread was lost"));
                }
                assert_eq!(sent.load(Ordering::Acquire), i + 1);
            }
            ROUNDS
        })
    });
    assert_eq!(woken, ROUNDS);
    waker.join().unwrap();
}

#[test]
fn every_blocking_pool_result_reaches_the_shard_that_waits_for_it() {
    const ROUNDS: u64 = 300;
    let total = on_shard_within(Duration::from_secs(60), || {
        test_shard(async {
            let mut total = 0;
            for i in 0..ROUNDS {
                // Odd rounds make the pool thread take long enough that the shard parks meanwhile.
                let job = glommio::executor().spawn_blocking(move || {
                    if i % 2 == 1 {
                        std::thread::sleep(Duration::from_micros(300));
                    }
                    i
                });
                let deadline = Instant::now() + Duration::from_secs(10);
                total += timeout_at(deadline, job)
                    .await
                    .unwrap_or_else(|_| panic!("round {i}: the blocking pool's result never reached the shard"));
            }
            total
        })
    });
    assert_eq!(total, ROUNDS * (ROUNDS - 1) / 2);
}

/// Change 12: a task woken just as a kept preemption timer fires still runs. The executor polls the rings,
/// then runs task queues only while no preemption is pending; a kept timer that fired between the two made
/// it run nothing, report "nothing ran", and park with the woken task still queued, asleep with no timeout
/// because the task's timer had just been taken (the pool's timed-out exchange hung this way in ~3 % of
/// runs). Naps of one to two quanta, a different length each time, land the wakes at every phase of the
/// quantum, so the race comes up many times a run (before the fix this hung in every run within seconds).
#[test]
fn a_task_woken_as_its_quantum_ends_still_runs() {
    const NAPS: u64 = 3_000;
    const QUANTUM_US: u64 = 500;
    let naps = on_shard_within(Duration::from_secs(60), || {
        glommio::LocalExecutorBuilder::default()
            .io_memory(256 << 10)
            .preempt_timer(Duration::from_micros(QUANTUM_US))
            .make()
            .expect("glommio executor (needs locked memory: ulimit -l 8192)")
            .run(async {
                let mut naps = 0;
                for i in 0..NAPS {
                    sleep(Duration::from_micros(QUANTUM_US + (i * 37) % QUANTUM_US)).await;
                    naps += 1;
                }
                naps
            })
    });
    assert_eq!(naps, NAPS);
}

/// How long `f` takes on the shard.
async fn timed(f: impl std::future::Future<Output = ()>) -> Duration {
    let started = Instant::now();
    f.await;
    started.elapsed()
}

/// A timer pass right after a long sleep must see the time the sleep ended, not the one before it: with the
/// reading kept across the wait, a due timer looks a whole sleep away and is slept for again.
#[test]
fn timers_armed_around_a_long_sleep_fire_on_time() {
    let (long, short) = on_shard_within(Duration::from_secs(30), || {
        test_shard(async {
            let long = timed(sleep(Duration::from_millis(300))).await;
            let short = timed(sleep(Duration::from_millis(30))).await;
            (long, short)
        })
    });
    assert!(
        long >= Duration::from_millis(300),
        "the long sleep ended early: {long:?}"
    );
    assert!(
        long < Duration::from_millis(450),
        "the long sleep was slept twice: {long:?}"
    );
    assert!(
        short >= Duration::from_millis(30),
        "the short sleep ended early: {short:?}"
    );
    assert!(
        short < Duration::from_millis(250),
        "the short sleep overslept: {short:?}"
    );
}

/// A shard that never goes idle (a task that always has more to do) still fires its timers: each task-queue
/// run reads the clock at its end.
#[test]
fn timers_fire_while_the_shard_is_never_idle() {
    let slept = on_shard_within(Duration::from_secs(30), || {
        test_shard(async {
            let done = std::rc::Rc::new(std::cell::Cell::new(false));
            let spinning = done.clone();
            glommio::spawn_local(async move {
                while !spinning.get() {
                    futures_lite::future::yield_now().await;
                }
            })
            .detach();
            let slept = timed(sleep(Duration::from_millis(20))).await;
            done.set(true);
            slept
        })
    });
    assert!(slept >= Duration::from_millis(20), "ended early: {slept:?}");
    assert!(
        slept < Duration::from_millis(500),
        "a busy shard's timer fired late: {slept:?}"
    );
}

/// With `spin_before_park`, a timer that comes due during the spin fires then, not when the spin gives up
/// and parks: each spin pass reads the clock.
#[test]
fn a_timer_due_while_the_shard_spins_fires_during_the_spin() {
    let slept = on_shard_within(Duration::from_secs(30), || {
        glommio::LocalExecutorBuilder::default()
            .io_memory(256 << 10)
            .spin_before_park(Duration::from_millis(800))
            // Longer than the spin, so no preemption pass ends it early and hides a stale reading.
            .preempt_timer(Duration::from_secs(2))
            .make()
            .expect("glommio executor (needs locked memory: ulimit -l 8192)")
            .run(async {
                // The first turn after the executor starts may not spin; give it a turn with nothing due.
                sleep(Duration::from_millis(5)).await;
                timed(sleep(Duration::from_millis(20))).await
            })
    });
    assert!(slept >= Duration::from_millis(20), "ended early: {slept:?}");
    assert!(
        slept < Duration::from_millis(400),
        "fired only once the spin parked: {slept:?}"
    );
}

/// A task-queue run is accounted from the clock at its end: the executor's runtime stays true (glommio's
/// task-queue shares and stall detection use it).
#[test]
fn a_task_queue_run_is_accounted_its_real_length() {
    let runtime = on_shard_within(Duration::from_secs(30), || {
        test_shard(async {
            let before = glommio::executor().executor_stats().executor_runtime();
            glommio::spawn_local(async {
                let started = Instant::now();
                while started.elapsed() < Duration::from_millis(60) {
                    std::hint::spin_loop();
                }
            })
            .await;
            // The run is accounted when it ends: let it end.
            sleep(Duration::from_millis(5)).await;
            glommio::executor().executor_stats().executor_runtime() - before
        })
    });
    assert!(
        runtime >= Duration::from_millis(50),
        "a 60 ms run was accounted {runtime:?}"
    );
}
