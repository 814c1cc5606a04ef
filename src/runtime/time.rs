//! Timers on the shard's ring. Deadlines are `Instant`s so a request's budget is computed once.

use std::future::Future;
use std::time::{Duration, Instant};

/// The deadline passed before the future finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline elapsed")]
pub struct Elapsed;

pub async fn sleep(d: Duration) {
    glommio::timer::sleep(d).await;
}

/// Races `fut` against `deadline`. A deadline already past still polls `fut` once first, so work that is
/// ready is never thrown away.
pub async fn timeout_at<T>(deadline: Instant, fut: impl Future<Output = T>) -> Result<T, Elapsed> {
    // Most writes (and reads of data already queued) finish on the first poll: only arm a timer when the
    // work actually has to wait. A timer is a reactor registration and a removal, on every request.
    let mut fut = std::pin::pin!(fut);
    if let Some(done) = futures_lite::future::poll_once(&mut fut).await {
        return Ok(done);
    }
    let work = async { Ok(fut.await) };
    let timer = async {
        let now = Instant::now();
        if deadline > now {
            glommio::timer::Timer::new(deadline - now).await;
        }
        Err(Elapsed)
    };
    futures_lite::future::or(work, timer).await
}
