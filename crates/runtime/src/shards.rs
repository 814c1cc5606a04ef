//! One glommio executor per shard, optionally pinned one per core.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use glommio::{LocalExecutorPoolBuilder, PoolPlacement};

/// Index of a shard, 0-based and dense.
pub type ShardId = usize;

#[derive(Debug, Clone, Copy)]
pub struct ShardPlacement {
    /// Number of shards; 0 = one per available core.
    pub shards: usize,
    /// Pin each shard to its own core.
    pub pin: bool,
    /// io_uring registered buffer memory per shard, bytes.
    pub io_memory: usize,
    /// Busy-poll this long before parking an idle shard.
    pub spin_before_park: std::time::Duration,
}

impl ShardPlacement {
    pub fn resolved_shards(&self) -> usize {
        if self.shards > 0 {
            self.shards
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("cannot start shards: {0} (io_uring needs RLIMIT_MEMLOCK >= 512 KiB - try `ulimit -l unlimited` or LimitMEMLOCK=infinity - and a seccomp profile that allows io_uring)")]
    Start(String),
    #[error("shard failed: {0}")]
    Join(String),
}

/// Starts the shards, runs `shard_main(id)` on each, and blocks until every shard's future has finished.
pub fn run_shards<G, F>(placement: ShardPlacement, shard_main: G) -> Result<(), ShardError>
where
    G: Fn(ShardId) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + 'static,
{
    let n = placement.resolved_shards();
    let pool_placement = if placement.pin {
        PoolPlacement::MaxSpread(n, None)
    } else {
        PoolPlacement::Unbound(n)
    };
    let next_id = Arc::new(AtomicUsize::new(0));
    let shard_main = Arc::new(shard_main);
    let handles = LocalExecutorPoolBuilder::new(pool_placement)
        .name("prism-shard")
        .io_memory(placement.io_memory)
        .spin_before_park(placement.spin_before_park)
        .on_all_shards(move || {
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            let shard_main = shard_main.clone();
            async move { shard_main(id).await }
        })
        .map_err(|e| ShardError::Start(e.to_string()))?;
    for result in handles.join_all() {
        result.map_err(|e| ShardError::Join(e.to_string()))?;
    }
    Ok(())
}
