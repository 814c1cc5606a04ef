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
