//! The diagnostic headers: how a request was answered, for a person debugging with curl; clients ignore
//! them. `x-prism-provider` (names, never URLs or keys), `x-prism-attempts`, `x-prism-cache`
//! (`hit` / `join` / `miss`) and `x-prism-hedged`; a batch gets counts. `[server] diagnostic_headers = false`
//! turns them off. Collected without allocating: counters and a provider bitmask. `x-prism-verified: N` (a
//! verified read: N providers agreed, `core::call::verify`) is not diagnostic but part of the answer's meaning:
//! it is written whatever the setting, when every answered call of the request was verified.

use std::cell::Cell;

use prism_core::{How, NetworkRoute, Source};
use prism_wire::rpc::ProviderId;

/// What one request's calls came to, gathered as they finish (batch items run concurrently).
#[derive(Default)]
pub struct Diagnosis {
    calls: Cell<u32>,
    attempts: Cell<u32>,
    hits: Cell<u32>,
    joins: Cell<u32>,
    misses: Cell<u32>,
    hedged: Cell<u32>,
    providers: Cell<u64>,
    batch: Cell<bool>,
    /// Calls answered verified, and the fewest providers any of them agreed by.
    verified: Cell<u32>,
    verified_min: Cell<u8>,
    /// A call was refused over its key's fair share of provider quota: the longest wait it was told.
    over_share_ms: Cell<Option<u64>>,
}

impl Diagnosis {
    /// The request is a batch: the headers give counts.
    pub fn mark_batch(&self) {
        self.batch.set(true);
    }

    /// One call's answer (`None`: it failed).
    pub fn note(&self, how: Option<How>) {
        self.calls.set(self.calls.get() + 1);
        let Some(how) = how else { return };
        self.attempts.set(self.attempts.get() + u32::from(how.attempts));
        let counter = match how.source {
            Source::Hit => &self.hits,
            Source::Join => &self.joins,
            Source::Upstream => &self.misses,
        };
        counter.set(counter.get() + 1);
        if how.hedged {
            self.hedged.set(self.hedged.get() + 1);
        }
        if let Some(p) = how.provider {
            self.providers.set(self.providers.get() | p.bit());
        }
        if how.verified > 0 {
            let min = self.verified_min.get();
            self.verified_min.set(if self.verified.get() == 0 {
                how.verified
            } else {
                min.min(how.verified)
            });
            self.verified.set(self.verified.get() + 1);
        }
    }

    /// A call was refused over its key's fair share (`core::live::quota`), to retry after `ms`.
    pub fn note_over_share(&self, ms: u64) {
        self.over_share_ms
            .set(Some(self.over_share_ms.get().map_or(ms, |m| m.max(ms))));
    }

    /// The wait a refused call was told, if one was refused over its fair share.
    pub fn over_share(&self) -> Option<u64> {
        self.over_share_ms.get()
    }

    /// `x-prism-verified: N` when every call of the request was answered verified (N: the fewest providers
    /// that agreed on one of them).
    pub fn write_verified(&self, out: &mut Vec<u8>) {
        if self.verified.get() == 0 || self.verified.get() != self.calls.get() {
            return;
        }
        out.extend_from_slice(b"x-prism-verified: ");
        out.extend_from_slice(itoa::Buffer::new().format(self.verified_min.get()).as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    /// Appends the header lines (each ending in CRLF); nothing when no call was made.
    pub fn write_headers(&self, out: &mut Vec<u8>, route: &NetworkRoute) {
        if self.calls.get() == 0 {
            return;
        }
        let mut n = itoa::Buffer::new();
        let providers = self.providers.get();
        if providers != 0 {
            out.extend_from_slice(b"x-prism-provider: ");
            let mut first = true;
            for p in ProviderId::in_set(providers, route.upstreams.len()) {
                if !first {
                    out.extend_from_slice(b", ");
                }
                first = false;
                out.extend_from_slice(route.upstreams[p].name.as_bytes());
            }
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"x-prism-attempts: ");
        out.extend_from_slice(n.format(self.attempts.get()).as_bytes());
        out.extend_from_slice(b"\r\nx-prism-cache: ");
        if self.batch.get() {
            out.extend_from_slice(b"hit=");
            out.extend_from_slice(n.format(self.hits.get()).as_bytes());
            out.extend_from_slice(b", join=");
            out.extend_from_slice(n.format(self.joins.get()).as_bytes());
            out.extend_from_slice(b", miss=");
            out.extend_from_slice(n.format(self.misses.get()).as_bytes());
            out.extend_from_slice(b"\r\nx-prism-hedged: ");
            out.extend_from_slice(n.format(self.hedged.get()).as_bytes());
        } else {
            let cache: &[u8] = if self.hits.get() > 0 {
                b"hit"
            } else if self.joins.get() > 0 {
                b"join"
            } else {
                b"miss"
            };
            out.extend_from_slice(cache);
            out.extend_from_slice(b"\r\nx-prism-hedged: ");
            out.extend_from_slice(if self.hedged.get() > 0 { b"true" } else { b"false" });
        }
        out.extend_from_slice(b"\r\n");
    }
}
