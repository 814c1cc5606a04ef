//! Extra request headers a provider requires (API-key headers, bearer tokens, basic auth): the header
//! lines are written to bytes once per provider (per config generation), so a request copies one slice
//! and formats nothing. Values never appear in `{:?}`, logs or errors.

use std::sync::Arc;

#[derive(Clone, Default, PartialEq, Eq)]
pub struct ExtraHeaders {
    /// `Name: value\r\n` for each header, in order.
    wire: Arc<[u8]>,
    /// The same as pairs, for the WebSocket handshake.
    pairs: Arc<[(String, String)]>,
}

impl ExtraHeaders {
    /// From validated name/value pairs (no CR, LF or NUL in either: `config` checks them).
    pub fn new(pairs: Vec<(String, String)>) -> ExtraHeaders {
        let mut wire = Vec::new();
        for (name, value) in &pairs {
            wire.extend_from_slice(name.as_bytes());
            wire.extend_from_slice(b": ");
            wire.extend_from_slice(value.as_bytes());
            wire.extend_from_slice(b"\r\n");
        }
        ExtraHeaders {
            wire: wire.into(),
            pairs: pairs.into(),
        }
    }

    /// The header lines as they go on the wire.
    pub fn wire(&self) -> &[u8] {
        &self.wire
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// Names only.
impl std::fmt::Debug for ExtraHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.pairs.iter().map(|(n, _)| n)).finish()
    }
}
