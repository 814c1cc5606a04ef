//! Answers used more than once: the per-shard result cache (`cache`), identical reads joined while in flight
//! (`dedupe`), and the canonical key both compare calls by (`canon`).

pub mod cache;
pub mod canon;
pub mod dedupe;
