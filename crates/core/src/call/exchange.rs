//! What the retry loop needs from the world, as one trait: send a body to a provider and read its answer,
//! tell the time, pause. Production uses [`Live`] (this shard's pools, the monotonic clock, glommio
//! timers); the retry loop's unit tests use a scripted exchange and a clock that moves only when told, so
//! attempts, backoff, blame, deadlines and the write rule are checked without sockets or waiting.

use std::future::Future;
use std::time::{Duration, Instant};

use prism_transport::{TransportError, UpstreamResponse};
use prism_wire::rpc::ProviderId;

use crate::routing::route::NetworkRoute;

pub trait Exchange {
    /// POSTs `body` to provider `p` of `route` and reads the answer, all before `deadline`.
    /// `replay_safe` lets the transport send it again on a fresh connection when a reused one was dead.
    fn post(
        &self,
        route: &NetworkRoute,
        p: ProviderId,
        body: &[u8],
        deadline: Instant,
        replay_safe: bool,
    ) -> impl Future<Output = Result<UpstreamResponse, TransportError>>;

    /// Now, for deadlines and latencies.
    fn now(&self) -> Instant;

    /// Now in milliseconds since the epoch (the clock breakers, parks and blame memory keep).
    fn now_ms(&self) -> u64;

    /// Waits `d` (a backoff).
    fn sleep(&self, d: Duration) -> impl Future<Output = ()>;
}

/// The real world: this shard's keep-alive pools, the real clocks, glommio timers.
pub struct Live;

impl Exchange for Live {
    async fn post(
        &self,
        route: &NetworkRoute,
        p: ProviderId,
        body: &[u8],
        deadline: Instant,
        replay_safe: bool,
    ) -> Result<UpstreamResponse, TransportError> {
        route.upstreams[p].pool.post(body, deadline, replay_safe).await
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn now_ms(&self) -> u64 {
        prism_telemetry::clock::now_ms()
    }

    async fn sleep(&self, d: Duration) {
        prism_runtime::sleep(d).await;
    }
}
