//! The glommio boundary. Everything else sees shards, sockets, timers and a shutdown signal, not glommio.

mod deadlines;
pub mod hangup;
pub mod memory;
pub mod queue;
mod reset;
pub mod shards;
mod shutdown;
mod spare_box;
mod time;
mod zip_apart;

#[cfg(test)]
mod net_tests;
#[cfg(test)]
mod park_tests;

pub use shards::{run_shards, ShardId, ShardPlacement};
pub use shutdown::{LocalShutdown, Shutdown};
pub use spare_box::{Recycled, SpareBoxes};
pub use time::{sleep, timeout_at, Elapsed, Timeout};
pub use zip_apart::zip_apart;

/// Sockets of the shard's own io_uring ring.
pub mod net {
    pub use super::reset::{cap_send_buffer, reset};
    pub use glommio::net::{TcpListener, TcpStream};
}

/// Runs `f` to completion on a fresh executor, for tests that need real shard sockets and timers (small
/// registered-buffer memory: tests run under `ulimit -l 8192`).
#[cfg(any(test, feature = "testing"))]
pub fn test_shard<T>(f: impl std::future::Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::default()
        .io_memory(256 << 10)
        .make()
        .expect("glommio executor (needs locked memory: ulimit -l 8192)")
        .run(f)
}

/// Runs a future as a task on the current shard and hands back its result when awaited (tests of the crates
/// above that need two calls in flight at once).
#[cfg(any(test, feature = "testing"))]
pub fn spawn_joined<T: 'static>(
    future: impl std::future::Future<Output = T> + 'static,
) -> impl std::future::Future<Output = T> {
    glommio::spawn_local(future)
}

/// Runs a future as a detached task on the current shard.
pub fn spawn<T: 'static>(future: impl std::future::Future<Output = T> + 'static) {
    glommio::spawn_local(future).detach();
}

/// Lets the shard's other tasks run when this one has used up its time slice; otherwise returns at once (a
/// flag check). Long loops over client input (the calls of a batch, frames of a socket) call it so one
/// large request cannot stall every small one on the shard.
pub async fn yield_if_needed() {
    glommio::yield_if_needed().await
}
