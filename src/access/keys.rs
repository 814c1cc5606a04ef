//! API keys: where a request's key comes from, who it is, what it may call, from which origins, how fast.
//!
//! Keys are stored as keyed 128-bit digests (SipHash with per-process random keys), never as text; a
//! presented key is digested the same way and compared in constant time, so neither the table nor timing
//! reveals a key.

use std::hash::{BuildHasher, Hasher};

use super::ratelimit::{Gcra, SharedBucket};
use crate::config::{Config, Key, Strategy, Weights};
use crate::core::marks::MarkKey;

type Digest = [u64; 2];

/// One configured key, ready for the request path.
pub struct KeyEntry {
    /// 1-based: index 0 is "no key" in metrics and marks.
    pub index: usize,
    pub name: String,
    digest: Digest,
    /// Network indexes this key may use; `None` = all.
    networks: Option<Vec<usize>>,
    allow: Allowlist,
    origins: Vec<String>,
    pub bucket: Option<Gcra>,
    /// With `[cluster]`: the limit shared across nodes (used instead of `bucket`).
    pub shared: Option<SharedBucket>,
    pub strategy: Strategy,
    pub weights: Weights,
}

/// Method allowlist: exact names and `prefix_*` patterns; empty = everything.
pub struct Allowlist {
    exact: ahash::AHashSet<String>,
    prefixes: Vec<String>,
}

impl Allowlist {
    pub fn new(patterns: &[String]) -> Self {
        let mut exact = ahash::AHashSet::new();
        let mut prefixes = Vec::new();
        for p in patterns {
            match p.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_string()),
                None => {
                    exact.insert(p.clone());
                }
            }
        }
        Allowlist { exact, prefixes }
    }

    pub fn allows(&self, method: &str) -> bool {
        (self.exact.is_empty() && self.prefixes.is_empty())
            || self.exact.contains(method)
            || self.prefixes.iter().any(|p| method.starts_with(p.as_str()))
    }
}

impl KeyEntry {
    pub fn may_use(&self, network: usize) -> bool {
        self.networks.as_ref().is_none_or(|n| n.contains(&network))
    }

    pub fn allows(&self, method: &str) -> bool {
        self.allow.allows(method)
    }

    /// Origin lock: a request carrying an Origin must name a listed one. Requests without an Origin are
    /// not browsers; a lock cannot stop a server from forging one anyway.
    pub fn origin_ok(&self, origin: Option<&[u8]>) -> bool {
        match origin {
            None => true,
            Some(_) if self.origins.is_empty() => true,
            Some(o) => self
                .origins
                .iter()
                .any(|allowed| allowed.as_bytes() == o || allowed == "*"),
        }
    }

    /// Takes `cost` tokens from the key's limit (shared across nodes when clustered). `Err(wait_ns)` when
    /// over it; keys without a limit always pass.
    pub fn admit(&self, now_ns: u64, cost: u64) -> Result<(), u64> {
        match (&self.shared, &self.bucket) {
            (Some(shared), _) => shared.try_take(now_ns, cost),
            (None, Some(bucket)) => bucket.try_take(now_ns, cost),
            (None, None) => Ok(()),
        }
    }

    pub fn mark(&self) -> MarkKey {
        MarkKey::Key(self.index)
    }
}

/// All keys. With none configured, the endpoint is open.
pub struct KeyRing {
    hasher_a: std::collections::hash_map::RandomState,
    hasher_b: std::collections::hash_map::RandomState,
    entries: Vec<KeyEntry>,
}

impl KeyRing {
    pub fn from_config(config: &Config) -> Self {
        let hasher_a = std::collections::hash_map::RandomState::new();
        let hasher_b = std::collections::hash_map::RandomState::new();
        let mut ring = KeyRing {
            hasher_a,
            hasher_b,
            entries: Vec::new(),
        };
        for (i, k) in config.keys.iter().enumerate() {
            let entry = ring.entry(i + 1, k, config);
            ring.entries.push(entry);
        }
        ring
    }

    fn entry(&self, index: usize, k: &Key, config: &Config) -> KeyEntry {
        KeyEntry {
            index,
            name: k.name.clone(),
            digest: self.digest(k.key.as_bytes()),
            networks: (!k.networks.is_empty()).then(|| {
                k.networks
                    .iter()
                    .filter_map(|n| config.networks.iter().position(|c| &c.name == n))
                    .collect()
            }),
            allow: Allowlist::new(&k.allow),
            origins: k.origins.clone(),
            bucket: k.rate_per_s.map(|r| Gcra::new(r, k.burst.unwrap_or(r.ceil() as u32))),
            shared: match (&config.cluster, k.rate_per_s) {
                (Some(c), Some(r)) => Some(SharedBucket::new(
                    r,
                    k.burst.unwrap_or(r.ceil() as u32),
                    c.expected_nodes,
                )),
                _ => None,
            },
            strategy: k.strategy,
            weights: k.weights,
        }
    }

    pub fn is_open(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.name.as_str()).collect()
    }

    pub fn entries(&self) -> &[KeyEntry] {
        &self.entries
    }

    fn digest(&self, key: &[u8]) -> Digest {
        let mut a = self.hasher_a.build_hasher();
        a.write(key);
        let mut b = self.hasher_b.build_hasher();
        b.write(key);
        [a.finish(), b.finish()]
    }

    /// The entry for a presented key. Every entry is compared, in constant time, whatever matches.
    pub fn find(&self, presented: &[u8]) -> Option<&KeyEntry> {
        let d = self.digest(presented);
        let mut found = None;
        for e in &self.entries {
            let diff = (e.digest[0] ^ d[0]) | (e.digest[1] ^ d[1]);
            if diff == 0 {
                found = Some(e);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_patterns() {
        let a = Allowlist::new(&["eth_call".into(), "net_*".into()]);
        assert!(a.allows("eth_call") && a.allows("net_version"));
        assert!(!a.allows("eth_sendRawTransaction") && !a.allows("eth_callX"));
        assert!(Allowlist::new(&[]).allows("anything"));
    }

    #[test]
    fn keys_are_found_by_value_only() {
        let text = r#"
[server]
listen = "127.0.0.1:1"
[[networks]]
name = "a"
kind = "evm"
  [[networks.providers]]
  name = "p"
  url = "http://127.0.0.1:2"
[[networks]]
name = "b"
kind = "evm"
  [[networks.providers]]
  name = "p"
  url = "http://127.0.0.1:3"
[[keys]]
name = "one"
key = "secret-1"
networks = ["b"]
origins = ["https://app.example"]
"#;
        let config = Config::from_toml_with(text, |_| None).unwrap();
        let ring = KeyRing::from_config(&config);
        let k = ring.find(b"secret-1").unwrap();
        assert_eq!((k.index, k.name.as_str()), (1, "one"));
        assert!(ring.find(b"secret-2").is_none() && ring.find(b"").is_none());
        assert!(!k.may_use(0) && k.may_use(1));
        assert!(k.origin_ok(Some(b"https://app.example")) && !k.origin_ok(Some(b"https://evil.example")));
        assert!(k.origin_ok(None));
    }
}
