//! Timers of the shard. Deadlines are `Instant`s so a request's budget is computed once; all of a shard's
//! share one glommio timer (`deadlines.rs`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::deadlines::Deadline;

/// The deadline passed before the future finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline elapsed")]
pub struct Elapsed;

pub async fn sleep(d: Duration) {
    Deadline::at(Instant::now() + d).await;
}

/// Races `fut` against `deadline`. A deadline already past still polls `fut` once first, so work that is
/// ready is never thrown away.
pub fn timeout_at<F: Future>(deadline: Instant, fut: F) -> Timeout<F> {
    Timeout {
        fut,
        deadline: Deadline::at(deadline),
    }
}

pin_project_lite::pin_project! {
    /// [`timeout_at`]'s future: the work and its deadline side by side, no more (an idle connection's task
    /// holds one; an `async fn` kept the work twice).
    pub struct Timeout<F> {
        #[pin]
        fut: F,
        deadline: Deadline,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(done) = this.fut.poll(cx) {
            return Poll::Ready(Ok(done));
        }
        // Most writes (and reads of data already queued) finish on the first poll: the deadline is armed
        // (its first poll) only when the work has to wait.
        Pin::new(this.deadline).poll(cx).map(|()| Err(Elapsed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_shard;

    #[test]
    fn ready_work_wins_even_past_its_deadline() {
        let past = Instant::now() - Duration::from_millis(1);
        assert_eq!(test_shard(timeout_at(past, async { 7 })), Ok(7));
    }

    #[test]
    fn work_still_waiting_at_its_deadline_is_elapsed_and_not_before() {
        let start = Instant::now();
        let due = start + Duration::from_millis(30);
        let out = test_shard(timeout_at(due, sleep(Duration::from_secs(30))));
        assert_eq!(out, Err(Elapsed));
        assert!(Instant::now() >= due, "elapsed before its deadline");
    }

    #[test]
    fn work_done_before_its_deadline_is_its_output() {
        let out = test_shard(async {
            timeout_at(Instant::now() + Duration::from_secs(30), async {
                sleep(Duration::from_millis(5)).await;
                "done"
            })
            .await
        });
        assert_eq!(out, Ok("done"));
    }

    /// The reason it is a hand-written future: the work is kept once, beside its deadline (an idle
    /// connection's task holds one of these for as long as the client stays).
    #[test]
    fn holds_the_work_once() {
        let work = async {
            let big = [0u8; 1024];
            sleep(Duration::from_millis(1)).await;
            big.len()
        };
        let work_size = std::mem::size_of_val(&work);
        let t = timeout_at(Instant::now(), work);
        assert!(std::mem::size_of_val(&t) <= work_size + std::mem::size_of::<Deadline>() + 8);
    }
}
