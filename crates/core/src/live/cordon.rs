//! Cordoning: an operator takes a provider out of routing at once (`POST /providers/{name}/cordon`, `prism
//! cordon`), with a reason `/status` and the page show, and puts it back (`/uncordon`). Routing reads one
//! atomic; the reason is an immutable snapshot swapped whole. Probes go on, so its health stays visible.
//! A cordon lasts until uncordoned or the process ends (it is this node's, not the config's).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

/// Why and since when (wall-clock ms) a provider is cordoned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CordonNote {
    pub reason: String,
    pub since_unix_ms: u64,
}

#[derive(Default)]
pub struct Cordon {
    on: AtomicBool,
    note: ArcSwapOption<CordonNote>,
}

/// The longest reason kept (the rest is cut): it is shown on the page and in `/status`.
pub const MAX_REASON: usize = 200;

impl Cordon {
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Takes the provider out of routing; returns whether it was in.
    pub fn set(&self, reason: &str, since_unix_ms: u64) -> bool {
        let reason: String = reason.chars().filter(|c| !c.is_control()).take(MAX_REASON).collect();
        self.note.store(Some(Arc::new(CordonNote { reason, since_unix_ms })));
        !self.on.swap(true, Ordering::AcqRel)
    }

    /// Puts it back; returns whether it was cordoned.
    pub fn clear(&self) -> bool {
        let was = self.on.swap(false, Ordering::AcqRel);
        self.note.store(None);
        was
    }

    pub fn note(&self) -> Option<CordonNote> {
        if !self.is_on() {
            return None;
        }
        self.note.load_full().map(|n| (*n).clone())
    }
}
