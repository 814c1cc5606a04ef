//! The glommio boundary. Everything else sees shards, sockets, timers and a shutdown signal, not glommio.

pub mod hangup;
pub mod queue;
pub mod shards;
mod shutdown;
mod time;

pub use shards::{run_shards, ShardId, ShardPlacement};
pub use shutdown::Shutdown;
pub use time::{sleep, timeout_at, Elapsed};

/// Sockets of the shard's own io_uring ring.
pub mod net {
    pub use glommio::net::{TcpListener, TcpStream};
}

/// Runs a future as a detached task on the current shard.
pub fn spawn<T: 'static>(future: impl std::future::Future<Output = T> + 'static) {
    glommio::spawn_local(future).detach();
}
