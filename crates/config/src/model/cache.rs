//! `[cache]`: in-flight deduplication and the deterministic-result cache, per shard.

use serde::{Deserialize, Serialize};

/// In-flight deduplication and the deterministic-result cache (per shard).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Identical in-flight reads share one upstream call.
    pub dedupe: bool,
    /// Cache answers that can never change.
    pub enabled: bool,
    /// Memory bound per shard, in bytes (keys and values).
    pub max_bytes: u64,
    /// Answers larger than this are not cached.
    pub max_entry_bytes: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            dedupe: true,
            enabled: true,
            max_bytes: 32 * 1024 * 1024,
            max_entry_bytes: 1024 * 1024,
        }
    }
}
