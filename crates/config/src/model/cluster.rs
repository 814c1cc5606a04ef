//! `[cluster]`: the Redis (or Sentinel) nodes share advisory state through, its credentials (never shown
//! in `{:?}` or logs: `redact_url`), and how often and how long state is published.

use serde::{Deserialize, Serialize};

/// Where the shared state lives: one Redis (`redis_url`) or the master Redis Sentinel names (`sentinels`).
#[derive(Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// `redis://` or `rediss://` (TLS), optionally with `user:password@`; absent when `sentinels` is given.
    #[serde(default)]
    pub redis_url: Option<String>,
    /// ACL user (Redis 6+); overrides none in the URL (giving it in both places is refused).
    #[serde(default)]
    pub username: Option<String>,
    /// Password for `username` (or the default user); `${ENV}` keeps it out of the file.
    #[serde(default)]
    pub password: Option<String>,
    /// PEM CA certificates to trust instead of the public roots (a private deployment's CA).
    #[serde(default)]
    pub tls_ca_file: Option<String>,
    /// Client certificate chain (PEM), for Redis with `tls-auth-clients yes`; needs `tls_key_file`.
    #[serde(default)]
    pub tls_cert_file: Option<String>,
    #[serde(default)]
    pub tls_key_file: Option<String>,
    /// Redis Sentinel addresses (`host:port`); the master they name for `sentinel_master` is used.
    #[serde(default)]
    pub sentinels: Vec<String>,
    #[serde(default)]
    pub sentinel_master: Option<String>,
    /// TLS to the sentinels and to the master they name (with the `tls_*` files above).
    #[serde(default)]
    pub sentinel_tls: bool,
    /// Credentials of the sentinels themselves, when they have their own (`requirepass`/ACL in sentinel.conf).
    #[serde(default)]
    pub sentinel_username: Option<String>,
    #[serde(default)]
    pub sentinel_password: Option<String>,
    /// How long a node's published state stays valid without a refresh.
    #[serde(default = "default_cluster_ttl_ms")]
    pub ttl_ms: u64,
    /// How often a node publishes and reads its peers.
    #[serde(default = "default_sync_interval_ms")]
    pub sync_interval_ms: u64,
    /// Nodes assumed when Redis has never been reachable (each then keeps 1/n of a shared limit).
    #[serde(default = "default_expected_nodes")]
    pub expected_nodes: u32,
    /// Prefix for every Redis key, so several clusters can share one Redis.
    #[serde(default = "default_cluster_prefix")]
    pub prefix: String,
}

/// Passwords never reach a log line, a panic message or `{:?}` of the config.
impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |s: &Option<String>| s.as_ref().map(|_| "***");
        f.debug_struct("Cluster")
            .field("redis_url", &self.redis_url.as_deref().map(redact_url))
            .field("username", &self.username)
            .field("password", &secret(&self.password))
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("sentinels", &self.sentinels)
            .field("sentinel_master", &self.sentinel_master)
            .field("sentinel_tls", &self.sentinel_tls)
            .field("sentinel_username", &self.sentinel_username)
            .field("sentinel_password", &secret(&self.sentinel_password))
            .field("ttl_ms", &self.ttl_ms)
            .field("sync_interval_ms", &self.sync_interval_ms)
            .field("expected_nodes", &self.expected_nodes)
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// A URL with the password of its userinfo (`user:password@`) replaced by `***`; userinfo without a colon
/// is hidden whole (it may be a password written as a user). For logs and error messages.
pub fn redact_url(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let Some(at) = url[start..end].rfind('@').map(|i| start + i) else {
        return url.to_string();
    };
    let shown = match url[start..at].split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_string(),
    };
    format!("{}{shown}{}", &url[..start], &url[at..])
}

fn default_sync_interval_ms() -> u64 {
    100
}
fn default_expected_nodes() -> u32 {
    1
}
fn default_cluster_prefix() -> String {
    "prism".to_string()
}
fn default_cluster_ttl_ms() -> u64 {
    5000
}
