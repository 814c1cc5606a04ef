//! Timers of the shard. Deadlines are `Instant`s so a request's budget is computed once; all of a shard's
//! share one glommio timer (`deadlines.rs`).

use std::future::Future;
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
pub async fn timeout_at<T>(deadline: Instant, fut: impl Future<Output = T>) -> Result<T, Elapsed> {
    // Most writes (and reads of data already queued) finish on the first poll: only arm a deadline when the
    // work actually has to wait.
    let mut fut = std::pin::pin!(fut);
    if let Some(done) = futures_lite::future::poll_once(&mut fut).await {
        return Ok(done);
    }
    let work = async { Ok(fut.await) };
    let timer = async {
        Deadline::at(deadline).await;
        Err(Elapsed)
    };
    futures_lite::future::or(work, timer).await
}
