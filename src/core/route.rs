//! Per-shard routing state for one network. Round robin over its providers for now; the scoring router
//! replaces `pick` without changing callers.

use std::cell::Cell;

use crate::transport::UpstreamPool;

/// One provider as seen by one shard: its name and this shard's pool to it.
pub struct Upstream {
    pub name: String,
    pub pool: UpstreamPool,
}

pub struct NetworkRoute {
    pub name: String,
    pub upstreams: Vec<Upstream>,
    /// Overflow providers are only used when no primary exists (until health lands, "usable" = configured).
    primaries: Vec<usize>,
    overflow: Vec<usize>,
    next: Cell<usize>,
}

impl NetworkRoute {
    pub fn new(name: String, upstreams: Vec<(Upstream, bool)>) -> Self {
        let mut primaries = Vec::new();
        let mut overflow = Vec::new();
        let upstreams = upstreams
            .into_iter()
            .enumerate()
            .map(|(i, (u, is_overflow))| {
                if is_overflow {
                    overflow.push(i);
                } else {
                    primaries.push(i);
                }
                u
            })
            .collect();
        NetworkRoute {
            name,
            upstreams,
            primaries,
            overflow,
            next: Cell::new(0),
        }
    }

    /// The next upstream in round-robin order.
    pub fn pick(&self) -> Option<&Upstream> {
        let set = if self.primaries.is_empty() {
            &self.overflow
        } else {
            &self.primaries
        };
        if set.is_empty() {
            return None;
        }
        let n = self.next.get();
        self.next.set(n.wrapping_add(1));
        Some(&self.upstreams[set[n % set.len()]])
    }
}
