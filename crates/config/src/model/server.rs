//! `[server]`: the node's listeners (JSON-RPC, admin, the WebSocket port Solana's SDK derives), TLS, its
//! shards and how they use their cores.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// JSON-RPC over HTTP (and later WebSocket).
    pub listen: String,
    /// Admin endpoints: metrics, status, health.
    #[serde(default)]
    pub admin_listen: Option<String>,
    /// Number of shards; 0 = one per available core.
    #[serde(default)]
    pub shards: usize,
    /// Where this node runs; feeds region affinity.
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub tls: Option<Tls>,
    /// Pin each shard to its own core (turn off when several processes share a small machine).
    #[serde(default = "yes")]
    pub pin_cores: bool,
    /// io_uring registered buffer memory per shard, in KiB. Prism does no file I/O, so it stays small.
    #[serde(default = "default_io_memory_kib")]
    pub io_memory_kib: usize,
    /// Microseconds a shard keeps polling before it sleeps when idle: lower wake-up latency at moderate
    /// rates for some CPU. 0 = sleep at once.
    #[serde(default)]
    pub spin_before_park_us: u64,
    /// A second listener serving the same endpoints. @solana/web3.js derives its WebSocket URL as the RPC
    /// port + 1, so with a solana-magic network it defaults to `listen`'s port + 1; `"off"` disables it.
    #[serde(default)]
    pub ws_listen: Option<String>,
    /// `x-prism-provider`, `x-prism-attempts`, `x-prism-cache`, `x-prism-hedged` on JSON-RPC answers
    /// (names only, never URLs or keys).
    #[serde(default = "yes")]
    pub diagnostic_headers: bool,
}

impl Server {
    /// The second listener's address, if any (`has_solana`: a solana-magic network is configured).
    pub fn ws_listen_addr(&self, has_solana: bool) -> Option<std::net::SocketAddr> {
        match self.ws_listen.as_deref() {
            Some("off") => None,
            Some(a) => a.parse().ok(),
            None if has_solana => {
                let mut a: std::net::SocketAddr = self.listen.parse().ok()?;
                a.set_port(a.port().checked_add(1)?);
                Some(a)
            }
            None => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    pub cert: String,
    pub key: String,
}

fn yes() -> bool {
    true
}
fn default_io_memory_kib() -> usize {
    128
}
