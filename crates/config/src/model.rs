//! The config types. Field names are the TOML keys; defaults are the seeds' policy defaults.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: Server,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub policy: Policy,
    pub networks: Vec<Network>,
    #[serde(default)]
    pub keys: Vec<Key>,
    #[serde(default)]
    pub cluster: Option<Cluster>,
    #[serde(default)]
    pub cache: CacheConfig,
    /// `[admin]`: who may use the admin listener's mutating endpoints (reload, cordon).
    #[serde(default)]
    pub admin: super::secrets::AdminAccess,
    /// `NAME=value` lines read for `${NAME}` before the process environment, on start-up and on every
    /// reload (so a secret rotated in the file is picked up by a reload). Relative to the config file.
    #[serde(default)]
    pub env_file: Option<String>,
    /// Not a config key: a fingerprint of every secret the config read (`${NAME}` values and secret files),
    /// by name, so a reload can say which ones changed without holding or showing them.
    #[serde(skip)]
    pub secrets: super::secrets::Fingerprints,
}

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

/// Every limit the edge and transport enforce. All have sane defaults.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body accepted (413 beyond). geth's own limit is 5 MiB.
    pub max_body_bytes: usize,
    /// Largest request head (request line + headers), 431 beyond.
    pub max_header_bytes: usize,
    /// Most calls in one JSON-RPC batch.
    pub max_batch: usize,
    /// Deepest JSON nesting accepted in a request.
    pub max_depth: usize,
    /// Most client connections open at once across all shards (503 beyond).
    pub max_connections: usize,
    /// Overall deadline for one client request, upstream attempts included.
    pub request_deadline_ms: u64,
    /// How long a keep-alive client connection may sit idle between requests.
    pub idle_timeout_ms: u64,
    /// How long a started request may take to arrive in full (slow clients get 408).
    pub client_timeout_ms: u64,
    /// How long shutdown waits for in-flight requests.
    pub drain_timeout_ms: u64,
    /// TCP (and TLS) connect deadline towards an upstream.
    pub upstream_connect_timeout_ms: u64,
    /// Idle keep-alive connections kept per upstream per shard.
    pub upstream_max_idle: usize,
    /// An idle upstream connection older than this is closed rather than reused.
    pub upstream_idle_timeout_ms: u64,
    /// Largest upstream response accepted.
    pub max_response_bytes: usize,
    /// Messages queued for one WebSocket client before it is disconnected as too slow.
    pub ws_max_queue: usize,
    /// The kernel send buffer of a client WebSocket session, in bytes (0: the kernel's autotuned default, up
    /// to `net.ipv4.tcp_wmem`'s maximum). What a client that stopped reading can hold in the kernel before
    /// a write waits and `client_timeout_ms` starts.
    pub ws_send_buffer_bytes: usize,
    /// How long a client connection's last bytes may take to leave (a WebSocket close frame, the rest of an
    /// answer, then the FIN) before the connection is reset: a client that stopped reading is not waited
    /// for, and its socket is freed.
    pub close_timeout_ms: u64,
    /// An upstream WebSocket silent this long is pinged; silent for as long again (no pong), it is taken
    /// for dead (frozen peer, half-open TCP): reconnected and replayed. 0 turns the check off.
    pub upstream_ws_ping_ms: u64,
    /// Open connections (busy and idle) per upstream per shard; beyond it calls queue for a free one until
    /// their deadline, then fail with "Upstream connection limit" (never counted against the provider).
    pub upstream_max_connections: usize,
    /// Solana: delegation-record subscriptions a shard sends per second when its base-layer WebSocket comes
    /// back (accounts a request touches go first), so 200 000 tracked accounts are not one burst.
    pub record_resubscribe_per_sec: usize,
    /// Solana: client subscriptions (topics: identical ones are shared) one upstream WebSocket carries; a side
    /// opens another socket only when its sockets hold this many. Shared provider plans often allow 50-100
    /// per connection: lower it there.
    pub solana_subscriptions_per_socket: usize,
    /// Largest answer Prism builds for one request (a whole batch together); beyond it the request is
    /// answered with a -32003 "answer too large" error instead.
    pub max_answer_bytes: usize,
    /// Subscriptions one WebSocket connection may hold (EVM and Solana alike).
    pub max_subscriptions_per_connection: usize,
    /// Client subscriptions open on one shard across all its connections.
    pub max_subscriptions_per_shard: usize,
    /// Kept at the end of a transaction submission's deadline to look it up by its hash (or signature) when
    /// its answer is lost after sending; at most a third of the deadline.
    pub write_lookup_ms: u64,
    /// How long `eth_sendRawTransactionSync` waits for its receipt when the call names no timeout; a
    /// timeout it names is honoured up to `limits.sync_submit_max_ms`.
    pub sync_submit_timeout_ms: u64,
    /// The longest wait an `eth_sendRawTransactionSync` call may ask for.
    pub sync_submit_max_ms: u64,
    /// How many sub-ranges of one wide `eth_getLogs` (split to fit providers' limits) are in flight at once.
    pub logs_split_concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 5 * 1024 * 1024,
            max_header_bytes: 16 * 1024,
            max_batch: 100,
            max_depth: 64,
            max_connections: 20_000,
            request_deadline_ms: 10_000,
            idle_timeout_ms: 60_000,
            client_timeout_ms: 10_000,
            drain_timeout_ms: 10_000,
            upstream_connect_timeout_ms: 2_000,
            upstream_max_idle: 64,
            upstream_idle_timeout_ms: 30_000,
            max_response_bytes: 64 * 1024 * 1024,
            ws_max_queue: 1024,
            ws_send_buffer_bytes: 128 * 1024,
            close_timeout_ms: 1_000,
            upstream_ws_ping_ms: 15_000,
            upstream_max_connections: 256,
            record_resubscribe_per_sec: 2_000,
            solana_subscriptions_per_socket: 1_000,
            max_answer_bytes: 64 * 1024 * 1024,
            max_subscriptions_per_connection: 64,
            max_subscriptions_per_shard: 10_000,
            write_lookup_ms: 1_500,
            sync_submit_timeout_ms: 10_000,
            sync_submit_max_ms: 60_000,
            logs_split_concurrency: 4,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    pub retry: RetryPolicy,
    pub breaker: BreakerPolicy,
    pub hedge: HedgePolicy,
    pub fair_share: FairSharePolicy,
}

/// `[policy.fair_share]`: when a provider's `quota_rps` is the bottleneck, keys get weighted max-min fair
/// shares of it (`quota_weight` per key); a key over its share goes to other providers or is refused with
/// `Retry-After` (`core::live::quota`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FairSharePolicy {
    pub enabled: bool,
}

/// `credits = { default = 1, methods = { eth_call = 26 } }` on a provider: what each call costs there in
/// the units it bills (its `quota_rps` is then credits per second).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Credits {
    #[serde(default = "one_credit")]
    pub default: u32,
    #[serde(default)]
    pub methods: std::collections::BTreeMap<String, u32>,
}

fn one_credit() -> u32 {
    1
}

/// `[policy.hedge]`: when a read's answer is later than its provider's recent p95 (for the call's family),
/// the same read goes to the next-best provider of another operator and the first good answer wins. Never
/// for writes, filters or anything not idempotent; capped by a budget of extra upstream calls; never billed
/// to the key.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HedgePolicy {
    pub enabled: bool,
    /// Hedges a shard may send, as a percentage of the attempts it makes on the network.
    pub budget_percent: f64,
    /// Never hedge sooner than this, whatever the provider's p95.
    pub min_delay_ms: u64,
    /// Latency families that are hedged: `light`, `execute`, `logs`, `trace`.
    pub families: Vec<String>,
}

impl Default for HedgePolicy {
    fn default() -> Self {
        HedgePolicy {
            enabled: true,
            budget_percent: 5.0,
            min_delay_ms: 20,
            families: vec!["light".into(), "execute".into(), "logs".into()],
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
    pub jitter: Jitter,
    pub retry_on: Vec<RetryOn>,
    pub never_retry: Vec<String>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay_ms: 120,
            max_delay_ms: 2000,
            jitter: Jitter::Full,
            retry_on: vec![
                RetryOn::Timeout,
                RetryOn::Status5xx,
                RetryOn::Status429,
                RetryOn::ConnectionReset,
            ],
            never_retry: vec!["eth_sendRawTransaction".to_string()],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Jitter {
    Full,
    Equal,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum RetryOn {
    #[serde(rename = "timeout")]
    Timeout,
    #[serde(rename = "5xx")]
    Status5xx,
    #[serde(rename = "429")]
    Status429,
    #[serde(rename = "connection-reset")]
    ConnectionReset,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerPolicy {
    pub failure_threshold: u32,
    pub window_ms: u64,
    pub cooldown_ms: u64,
    pub half_open_probes: u32,
    pub backoff_multiplier: f64,
    pub max_cooldown_ms: u64,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            failure_threshold: 5,
            window_ms: 30_000,
            cooldown_ms: 15_000,
            half_open_probes: 1,
            backoff_multiplier: 2.0,
            max_cooldown_ms: 300_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum NetworkKind {
    #[serde(rename = "evm")]
    Evm,
    #[serde(rename = "solana-magic")]
    SolanaMagic,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub name: String,
    pub kind: NetworkKind,
    /// Checked against `eth_chainId` at start-up (EVM).
    #[serde(default)]
    pub chain_id: Option<u64>,
    #[serde(default = "default_probe_interval_ms")]
    pub probe_interval_ms: u64,
    #[serde(default = "default_max_drift_blocks")]
    pub max_drift_blocks: u64,
    #[serde(default = "default_hwm_tolerance_blocks")]
    pub hwm_tolerance_blocks: u64,
    /// The chain's block time, for how far a provider's head may plausibly move: at most twice this rate
    /// since a believed head was first seen, plus `max_drift_blocks + head_slack_blocks`. The default (250,
    /// Arbitrum Nitro / Robinhood Chain) is lenient for every slower chain.
    #[serde(default = "default_block_time_ms")]
    pub block_time_ms: u64,
    /// Blocks a head may be beyond that bound, and beyond the median of the other providers' heads, before
    /// its provider is an outlier.
    #[serde(default = "default_head_slack_blocks")]
    pub head_slack_blocks: u64,
    /// Reads pinned to a block number at least this far below the pool's head may be cached.
    #[serde(default = "default_cache_depth_blocks")]
    pub cache_depth_blocks: u64,
    /// Solana magic router: the delegation program id.
    #[serde(default)]
    pub delegation_program: Option<String>,
    /// Solana magic router: the ER used for records whose authority is the default pubkey.
    #[serde(default)]
    pub default_er: Option<String>,
    /// Solana magic router: a base-layer provider this many slots behind the best base-layer provider is left
    /// out until it catches up.
    #[serde(default = "default_max_slot_drift")]
    pub max_slot_drift: u64,
    /// Solana magic router: a provider whose slot has stood still for `slot_stall_slots` of its own slot
    /// times (its cadence, learned from its probes) is down (an ER's `getHealth` says "ok" whatever its
    /// state). This is the ceiling of that wait, and the whole wait while the cadence is unknown or
    /// `slot_stall_slots` is 0; 0 turns the check off.
    #[serde(default = "default_slot_stall_ms")]
    pub slot_stall_ms: u64,
    /// Solana magic router: how many of its own slot times a provider's slot may stand still before it is
    /// down (about 1 s for a 50 ms ER, 8 s for a 400 ms base layer; never under 500 ms nor over
    /// `slot_stall_ms`); 0 = `slot_stall_ms` alone.
    #[serde(default = "default_slot_stall_slots")]
    pub slot_stall_slots: u64,
    /// Methods this network's providers serve that Prism's table does not know. Unknown methods are sent
    /// once (they may change state); declared reads are retried and joined, declared writes sent once.
    #[serde(default)]
    pub methods: DeclaredMethods,
    pub providers: Vec<Provider>,
}

/// `[networks.methods]`: `read = [...]`, `write = [...]` (checked by `prism check`: a known submission
/// cannot be declared a read).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeclaredMethods {
    pub read: Vec<String>,
    pub write: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderRole {
    Base,
    Ephemeral,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub ws_url: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default = "default_weight")]
    pub weight: f64,
    #[serde(default)]
    pub quota_rps: Option<u32>,
    /// Used only when no other provider is usable.
    #[serde(default)]
    pub overflow: bool,
    /// Solana magic router: base layer or ephemeral rollup.
    #[serde(default)]
    pub role: Option<ProviderRole>,
    /// Solana magic router: the ER validator identity delegation records name as authority.
    #[serde(default)]
    pub identity: Option<String>,
    /// Solana magic router: the address clients reach this ER at (`fqdn` in `getIdentity`, `getRoutes` and
    /// `getDelegationStatus`). Never taken from `url`, which may carry the operator's credentials.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Solana magic router, ephemeral providers: what `getRoutes` reports for this ER, as MagicBlock's
    /// router reports an ER's registration: its base fee (lamports per signature; unset: 0), block time
    /// (ms; unset: 50, MagicBlock's ER default) and country (ISO 3166-1 alpha-2; unset: "").
    #[serde(default)]
    pub base_fee: Option<u16>,
    #[serde(default)]
    pub block_time_ms: Option<u16>,
    #[serde(default)]
    pub country_code: Option<String>,
    /// Who runs it: a hedge goes to a provider of another operator. Each provider is its own by default.
    #[serde(default)]
    pub operator: Option<String>,
    /// Not a config key: set on the running roster when a reload removed this provider (its slot stays,
    /// drained; see `config::changes`).
    #[serde(skip)]
    pub retired: bool,
    /// The lowest block this provider has state and logs for (a pruned or snapshot-synced node); 0 = an
    /// archive node. Reads pinned below it go to providers that have the block first. Prism also learns a
    /// floor from "missing trie node"-style answers; this one is never forgotten.
    #[serde(default)]
    pub floor_block: u64,
    /// The widest `eth_getLogs` block range this provider accepts (its plan's limit): wider filters are
    /// split to fit without asking first. Unset: learned from its "range too large" answers.
    #[serde(default)]
    pub max_logs_range: Option<u64>,
    /// The most logs one `eth_getLogs` answer of this provider may hold: sub-ranges are sized from the
    /// density of the logs already fetched so they stay under it.
    #[serde(default)]
    pub max_logs_results: Option<u64>,
    /// `[networks.providers.auth]`: headers and basic auth the provider requires (HTTP and WebSocket).
    #[serde(default)]
    pub auth: super::secrets::ProviderAuth,
    /// Its price table: credits per method (and a default), so quota, burn and per-key cost are counted in
    /// the units it bills. Unset: one per call.
    #[serde(default)]
    pub credits: Option<Credits>,
    /// Whether it serves `eth_sendRawTransactionSync` (EIP-7966): `auto` (send it; a "method not found"
    /// answer teaches Prism it does not, and the call is emulated), `emulate` (never sent: Prism sends
    /// `eth_sendRawTransaction` and waits for the receipt itself), `native` (always sent, never emulated).
    #[serde(default)]
    pub sync_submit: SyncSubmit,
}

/// How `eth_sendRawTransactionSync` reaches a provider (`providers[].sync_submit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncSubmit {
    #[default]
    Auto,
    Emulate,
    Native,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    #[default]
    Score,
    RoundRobin,
    Random,
    Weighted,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Weights {
    pub latency: f64,
    pub error: f64,
    pub quota: f64,
    pub affinity: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            latency: 0.55,
            error: 0.30,
            quota: 0.10,
            affinity: 0.05,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    pub name: String,
    pub key: String,
    /// Networks this key may use; empty = all.
    #[serde(default)]
    pub networks: Vec<String>,
    /// Method allowlist (exact names and `prefix_*`); empty = all.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Origin lock; empty = any origin.
    #[serde(default)]
    pub origins: Vec<String>,
    #[serde(default)]
    pub rate_per_s: Option<f64>,
    #[serde(default)]
    pub burst: Option<u32>,
    #[serde(default)]
    pub strategy: Strategy,
    #[serde(default)]
    pub weights: Weights,
    /// Verified reads: these methods' answers are checked against more providers (`core::call::verify`).
    #[serde(default)]
    pub verify: Option<VerifyConfig>,
    /// Its weight in fair shares of scarce provider quota (`[policy.fair_share]`).
    #[serde(default = "default_weight")]
    pub quota_weight: f64,
}

/// `[[keys]] verify = { methods = [...], quorum = 2, when_short = "error" }`: the key's reads of `methods`
/// (names, or the families `light`, `execute`, `logs`, `trace`) go to `quorum` providers at one pinned
/// block and are answered only when that many agree byte for byte.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    pub methods: Vec<String>,
    #[serde(default = "default_quorum")]
    pub quorum: u32,
    /// Fewer than `quorum` providers answered (down, or lagging): an error (`error`), or the answer there
    /// is, without `x-prism-verified` (`unverified`).
    #[serde(default)]
    pub when_short: WhenShort,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenShort {
    #[default]
    Error,
    Unverified,
}

fn default_quorum() -> u32 {
    2
}

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

fn yes() -> bool {
    true
}
fn default_io_memory_kib() -> usize {
    128
}
fn default_probe_interval_ms() -> u64 {
    2000
}
fn default_max_drift_blocks() -> u64 {
    10
}
fn default_hwm_tolerance_blocks() -> u64 {
    2
}
fn default_block_time_ms() -> u64 {
    250
}
fn default_head_slack_blocks() -> u64 {
    128
}
fn default_cache_depth_blocks() -> u64 {
    64
}
fn default_max_slot_drift() -> u64 {
    150
}
fn default_slot_stall_ms() -> u64 {
    10_000
}
fn default_slot_stall_slots() -> u64 {
    20
}
fn default_weight() -> f64 {
    1.0
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
