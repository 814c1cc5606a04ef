//! API keys: where a request's key comes from, who it is, what it may call, from which origins, how fast.
//!
//! Keys are stored as keyed 128-bit digests (SipHash with per-process random keys), never as text; a
//! presented key is digested the same way and compared in constant time, so neither the table nor timing
//! reveals a key.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use super::ratelimit::{Gcra, SharedBucket};
use prism_config::{Config, Key, Strategy, Weights};
use prism_core::live::marks::MarkKey;

type Digest = [u64; 2];

/// One configured key, ready for the request path.
pub struct KeyEntry {
    /// 1-based: index 0 is "no key" in metrics and marks.
    pub index: usize,
    pub name: String,
    digest: Digest,
    scope: KeyScope,
    pub rate: KeyRate,
    pub strategy: Strategy,
    pub weights: Weights,
    /// Its verified reads (`core::call::verify`; off unless `verify` is configured).
    pub verify: prism_core::call::verify::VerifyRule,
    /// Its weight in fair shares of provider quota (`core::live::quota`).
    pub quota_weight: f64,
}

/// What a key may use: which networks, which methods, from which origins.
struct KeyScope {
    /// Network indexes this key may use; `None` = all.
    networks: Option<Vec<usize>>,
    allow: Allowlist,
    origins: Vec<String>,
}

/// How fast a key may go: its own token bucket, or with `[cluster]` the one shared across nodes.
pub struct KeyRate {
    pub bucket: Option<Arc<Gcra>>,
    /// With `[cluster]`: the limit shared across nodes (used instead of `bucket`).
    pub shared: Option<Arc<SharedBucket>>,
    /// The limit as configured (rate, burst): a reload keeps the bucket while this is unchanged.
    limit: Option<(f64, u32)>,
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
        self.scope.networks.as_ref().is_none_or(|n| n.contains(&network))
    }

    pub fn allows(&self, method: &str) -> bool {
        self.scope.allow.allows(method)
    }

    /// Origin lock: a request carrying an Origin must name a listed one. Requests without an Origin are
    /// not browsers; a lock cannot stop a server from forging one anyway.
    pub fn origin_ok(&self, origin: Option<&[u8]>) -> bool {
        match origin {
            None => true,
            Some(_) if self.scope.origins.is_empty() => true,
            Some(o) => self
                .scope
                .origins
                .iter()
                .any(|allowed| allowed.as_bytes() == o || allowed == "*"),
        }
    }

    /// Takes `cost` tokens from the key's limit (shared across nodes when clustered). `Err(wait_ns)` when
    /// over it; keys without a limit always pass.
    pub fn admit(&self, now_ns: u64, cost: u64) -> Result<(), u64> {
        match (&self.rate.shared, &self.rate.bucket) {
            (Some(shared), _) => shared.try_take(now_ns, cost),
            (None, Some(bucket)) => bucket.try_take(now_ns, cost),
            (None, None) => Ok(()),
        }
    }

    pub fn mark(&self) -> MarkKey {
        MarkKey::Key(self.index)
    }
}

impl KeyRing {
    /// Every configured key's index and `quota_weight` (for `core::live::quota::QuotaLive::configure`).
    pub fn quota_weights(&self) -> Vec<(usize, f64)> {
        self.entries.iter().map(|e| (e.index, e.quota_weight)).collect()
    }
}

/// Keys a running node can gain through reloads beyond those it started with: marks and per-key metrics
/// are sized for them at start-up. A reload past it is refused (restart to grow the tables).
pub const KEYS_ADDED_BY_RELOAD: usize = 1024;

/// All keys. With none configured, the endpoint is open.
pub struct KeyRing {
    hasher_a: std::collections::hash_map::RandomState,
    hasher_b: std::collections::hash_map::RandomState,
    entries: Vec<KeyEntry>,
    /// `labels[i - 1]` = the name of the key with index `i`, for every index ever given out (removed keys
    /// keep theirs: their counters stay under their name, their index is never reused).
    labels: Vec<String>,
    /// Most key indexes this process may give out (see [`KEYS_ADDED_BY_RELOAD`]).
    capacity: usize,
    /// `positions[index]` = 1 + the entry's position in `entries`, 0 for an index not configured now.
    positions: Vec<u32>,
}

impl KeyRing {
    pub fn from_config(config: &Config) -> Self {
        let hasher_a = std::collections::hash_map::RandomState::new();
        let hasher_b = std::collections::hash_map::RandomState::new();
        let mut ring = KeyRing {
            hasher_a,
            hasher_b,
            entries: Vec::new(),
            labels: config.keys.iter().map(|k| k.name.clone()).collect(),
            capacity: Self::capacity_for(config.keys.len()),
            positions: Vec::new(),
        };
        for (i, k) in config.keys.iter().enumerate() {
            let entry = ring.entry(i + 1, k, config, None);
            ring.entries.push(entry);
        }
        ring.index_positions();
        ring
    }

    fn index_positions(&mut self) {
        self.positions = vec![0; self.labels.len() + 1];
        for (pos, e) in self.entries.iter().enumerate() {
            self.positions[e.index] = pos as u32 + 1;
        }
    }

    /// Key indexes a node started with `keys` keys may use (marks and metrics are sized for it).
    pub fn capacity_for(keys: usize) -> usize {
        keys + KEYS_ADDED_BY_RELOAD
    }

    /// The ring after a reload to `config`: kept names keep their index and, with the same limit, their
    /// bucket; new names get new indexes. Refused when the index table is full.
    pub fn reloaded(&self, config: &Config) -> Result<KeyRing, String> {
        let mut ring = KeyRing {
            hasher_a: self.hasher_a.clone(),
            hasher_b: self.hasher_b.clone(),
            entries: Vec::with_capacity(config.keys.len()),
            labels: self.labels.clone(),
            capacity: self.capacity,
            positions: Vec::new(),
        };
        let old_by_name: ahash::AHashMap<&str, &KeyEntry> = self.entries.iter().map(|e| (e.name.as_str(), e)).collect();
        let mut label_index: ahash::AHashMap<String, usize> = self
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.clone(), i + 1))
            .collect();
        for k in &config.keys {
            let old = old_by_name.get(k.name.as_str()).copied();
            let index = match old {
                Some(e) => e.index,
                None => match label_index.get(&k.name).copied() {
                    // A name removed earlier and now back gets its index again.
                    Some(i) => i,
                    None if ring.labels.len() < ring.capacity => {
                        ring.labels.push(k.name.clone());
                        label_index.insert(k.name.clone(), ring.labels.len());
                        ring.labels.len()
                    }
                    None => {
                        return Err(format!(
                            "keys: this node has given out {} key indexes (its start-up keys plus {KEYS_ADDED_BY_RELOAD}); restart to add more",
                            ring.capacity
                        ))
                    }
                },
            };
            let entry = ring.entry(index, k, config, old);
            ring.entries.push(entry);
        }
        ring.index_positions();
        Ok(ring)
    }

    fn entry(&self, index: usize, k: &Key, config: &Config, old: Option<&KeyEntry>) -> KeyEntry {
        let limit = k.rate_per_s.map(|r| (r, k.burst.unwrap_or(r.ceil() as u32)));
        let keep = old.filter(|o| o.rate.limit == limit);
        KeyEntry {
            index,
            name: k.name.clone(),
            digest: self.digest(k.key.as_bytes()),
            scope: KeyScope {
                networks: (!k.networks.is_empty()).then(|| {
                    k.networks
                        .iter()
                        .filter_map(|n| config.networks.iter().position(|c| &c.name == n))
                        .collect()
                }),
                allow: Allowlist::new(&k.allow),
                origins: k.origins.clone(),
            },
            rate: KeyRate {
                bucket: match keep {
                    Some(o) => o.rate.bucket.clone(),
                    None => limit.map(|(r, b)| Arc::new(Gcra::new(r, b))),
                },
                shared: match (keep, &config.cluster, limit) {
                    (Some(o), _, _) => o.rate.shared.clone(),
                    (None, Some(c), Some((r, b))) => Some(Arc::new(SharedBucket::new(r, b, c.expected_nodes))),
                    _ => None,
                },
                limit,
            },
            strategy: k.strategy,
            weights: k.weights,
            // `prism check` refused a `verify` that does not build.
            verify: k
                .verify
                .as_ref()
                .and_then(|v| prism_core::call::verify::VerifyRule::from_config(v).ok())
                .unwrap_or(prism_core::call::verify::VerifyRule::OFF),
            quota_weight: k.quota_weight,
        }
    }

    pub fn is_open(&self) -> bool {
        self.entries.is_empty()
    }

    /// Names by index (`[i - 1]` for index `i`), removed keys included: the metrics' key labels.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Most key indexes this process may give out.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The entry with this index, if the key is still configured.
    pub fn by_index(&self, index: usize) -> Option<&KeyEntry> {
        match self.positions.get(index) {
            Some(&pos) if pos > 0 => self.entries.get(pos as usize - 1),
            _ => None,
        }
    }

    /// Whether a key accepted by an earlier ring (same hashers: an earlier generation of this one) is still
    /// configured with the same secret. A WebSocket session opened with a key that a reload rotated out
    /// ends on its next request.
    pub fn still_holds(&self, entry: &KeyEntry) -> bool {
        self.by_index(entry.index).is_some_and(|e| e.digest == entry.digest)
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

    fn ring_config(keys: &[(&str, &str, &str)]) -> Config {
        let mut text = String::from(
            "[server]\nlisten = \"127.0.0.1:1\"\n[[networks]]\nname = \"a\"\nkind = \"evm\"\n  [[networks.providers]]\n  name = \"p\"\n  url = \"http://127.0.0.1:2\"\n",
        );
        for (name, key, extra) in keys {
            text.push_str(&format!("[[keys]]\nname = \"{name}\"\nkey = \"{key}\"\n{extra}\n"));
        }
        Config::from_toml_with(&text, |_| None).unwrap()
    }

    #[test]
    fn a_reload_keeps_indexes_and_buckets_of_kept_names() {
        let ring = KeyRing::from_config(&ring_config(&[
            ("a", "a-1", "rate_per_s = 1.0"),
            ("b", "b-1", ""),
            ("c", "c-1", "rate_per_s = 5.0"),
        ]));
        let a = ring.find(b"a-1").unwrap();
        assert!(
            a.admit(0, 1).is_ok() && a.admit(0, 1).is_err(),
            "a's burst of one is spent"
        );
        // b removed, a kept, c's limit changed, d added, a's secret rotated.
        let next = ring
            .reloaded(&ring_config(&[
                ("d", "d-1", ""),
                ("a", "a-2", "rate_per_s = 1.0"),
                ("c", "c-1", "rate_per_s = 50.0"),
            ]))
            .unwrap();
        let a2 = next.find(b"a-2").unwrap();
        assert_eq!(a2.index, 1, "a keeps its index (marks, metrics)");
        assert!(a2.admit(0, 1).is_err(), "and its bucket: still spent");
        assert!(
            next.find(b"a-1").is_none() && !next.still_holds(a),
            "the old secret is gone"
        );
        assert!(next.find(b"b-1").is_none() && next.by_index(2).is_none());
        assert_eq!(
            next.find(b"d-1").unwrap().index,
            4,
            "a new name takes a new index, never b's"
        );
        let c = next.find(b"c-1").unwrap();
        assert_eq!(c.index, 3);
        assert!(next.still_holds(ring.find(b"c-1").unwrap()));
        assert_eq!(next.labels(), ["a", "b", "c", "d"], "removed names keep their label");
        // b back: its old index again.
        let again = next
            .reloaded(&ring_config(&[("b", "b-9", ""), ("a", "a-2", "rate_per_s = 1.0")]))
            .unwrap();
        assert_eq!(again.find(b"b-9").unwrap().index, 2);
        assert_eq!(again.by_index(1).map(|e| e.name.as_str()), Some("a"));
    }

    #[test]
    fn reloads_stop_at_the_index_capacity() {
        let mut ring = KeyRing::from_config(&ring_config(&[("k0", "s0", "")]));
        for batch in 0..(KEYS_ADDED_BY_RELOAD / 256) {
            let names: Vec<(String, String)> = (0..256)
                .map(|i| (format!("n{batch}-{i}"), format!("s{batch}-{i}")))
                .collect();
            let keys: Vec<(&str, &str, &str)> = names.iter().map(|(n, k)| (n.as_str(), k.as_str(), "")).collect();
            ring = ring.reloaded(&ring_config(&keys)).unwrap();
        }
        let err = ring.reloaded(&ring_config(&[("late", "late", "")])).err().unwrap();
        assert!(err.contains("restart"), "{err}");
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
