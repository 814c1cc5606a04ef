//! Counters and histograms for Prometheus. Each shard writes only its own block (relaxed atomics on memory
//! no other core writes, so no contention); a scrape sums the blocks. Labels carry method, provider, key
//! name and outcome, never params, addresses or results.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use super::cause::Reason;
use prism_wire::rpc::methods::KNOWN_METHODS;

mod render;
pub use render::render;

/// Histogram bucket upper bounds, microseconds.
pub const BUCKETS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000,
];

#[derive(Default)]
pub struct Histo {
    buckets: [AtomicU64; BUCKETS_US.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histo {
    pub fn observe(&self, us: u64) {
        if let Some(i) = BUCKETS_US.iter().position(|&b| us <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }
}

/// How a client call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    /// A result.
    Ok = 0,
    /// The node's JSON-RPC error, passed through.
    RpcError = 1,
    /// Prism could not get an answer (all down, upstream failure, timeout).
    Failed = 2,
    /// Refused before routing: invalid request, method not allowed.
    Rejected = 3,
}
const CALL_RESULTS: [&str; 4] = ["ok", "rpc_error", "failed", "rejected"];

/// How one upstream attempt ended, as health and metrics see it (the one outcome enum: the classifier's
/// `Class::attempt_result` maps into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// An answer (including user errors: the provider worked).
    Ok = 0,
    /// The provider's fault.
    Failed = 1,
    /// Rate limited: neither success nor failure.
    Throttled = 2,
    /// Unsupported or data unavailable there: rerouted, not counted against it.
    Rerouted = 3,
}
const ATTEMPT_RESULTS: [&str; 4] = ["ok", "failed", "throttled", "rerouted"];

#[derive(Default)]
pub struct MethodMetrics {
    results: [AtomicU64; 4],
    latency: Histo,
}

#[derive(Default)]
pub struct ProviderMetrics {
    /// Client attempts by result, and their latency.
    results: [AtomicU64; 4],
    latency: Histo,
    /// Health probes by result (apart: probes are not traffic).
    probes: [AtomicU64; 4],
    /// Failed and throttled attempts by reason: `[0]` client, `[1]` probes.
    reasons: [[AtomicU64; Reason::COUNT]; 2],
}

#[derive(Default)]
pub struct KeyMetrics {
    requests: AtomicU64,
    throttled: AtomicU64,
    /// Calls not sent to a provider because the key had spent its fair share of its quota.
    over_share: AtomicU64,
}

pub struct NetMetrics {
    methods: Vec<MethodMetrics>,
    providers: Vec<ProviderMetrics>,
    /// Credits each key cost at each provider (`core::live::quota`): `[key * providers + provider]`, made when a
    /// provider with a price table is first used (sized for the providers configured then).
    credits: std::sync::OnceLock<(usize, Box<[AtomicU64]>)>,
}

/// One shard's metrics.
pub struct ShardMetrics {
    networks: Vec<NetMetrics>,
    /// Index 0 = requests without a key; then one per configured key.
    keys: Vec<KeyMetrics>,
    /// HTTP-level refusals by status (401, 403, 408, 413, 429, 431, ...).
    refusals: Vec<(u16, AtomicU64)>,
    cache: CacheMetrics,
    /// WebSocket: open client sockets, subscriptions (newHeads, logs, pending), upstream reconnects,
    /// backfilled heads, backfilled logs. Gauges may go below zero on one shard and above on another.
    ws: [std::sync::atomic::AtomicI64; 10],
    /// Solana magic router, see [`SolanaMetric`].
    solana: [std::sync::atomic::AtomicI64; 8],
    reads: ReadMetrics,
    writes: WriteMetrics,
}

/// Calls answered without their own upstream request, and the result cache that answers some of them.
#[derive(Default)]
struct CacheMetrics {
    /// Cache hits, misses, dedupe joins.
    reuse: [AtomicU64; 3],
    /// Cache bytes, entries, evictions (set by the shard's housekeeping).
    size: [AtomicU64; 3],
}

/// What reads cost beyond one attempt at one provider: hedges, verified reads, and second opinions on
/// errors no classifier rule knows.
#[derive(Default)]
struct ReadMetrics {
    /// Errors no classifier rule knows, by how they were settled, see [`Settled`].
    settled: [AtomicU64; 7],
    /// Hedged reads: sent, and won (the hedge answered first).
    hedges: [AtomicU64; 2],
    /// Verified reads, by how they ended, see [`Verified`].
    verified: [AtomicU64; 5],
}

/// Writes that needed more than passing their answer on, and calls sent once as writes are.
#[derive(Default)]
struct WriteMetrics {
    /// Transaction submissions whose first answer left the client unsure, by how that was settled, see
    /// [`Submitted`].
    submitted: [AtomicU64; 4],
    /// `eth_sendRawTransactionSync` emulated at a provider that lacks it: answered with the receipt, or
    /// EIP-7966's timeout error.
    sync_emulated: [AtomicU64; 2],
    /// Calls of methods the table does not know (sent once, as writes are).
    unknown_methods: AtomicU64,
}

/// How a submission's unsure answer was settled (see `core::call::submit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// The answer was lost after sending; a lookup found the transaction: answered as a success.
    LostFound = 0,
    /// The answer was lost and no provider knew the transaction: -32098.
    LostUnresolved = 1,
    /// The node said "already known": answered with the hash.
    AlreadyKnown = 2,
    /// "nonce too low", and a lookup found this very transaction mined: answered as a success.
    MinedBefore = 3,
}

/// How a verified read ended (see `core::call::verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    /// The first providers asked agreed.
    Agreed = 0,
    /// Two disagreed and more providers settled it: a quorum agreed, the outvoted one was counted.
    Settled = 1,
    /// No quorum agreed: -32097.
    Disagreed = 2,
    /// Fewer than the quorum answered: -32096.
    Short = 3,
    /// Fewer than the quorum answered and the key takes the answer there is (`when_short = "unverified"`).
    Unverified = 4,
}

/// How an error the classifier does not know (on a read) was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// A second opinion answered the same error (or refused the call as a user error): the client's.
    SecondOpinionClient = 0,
    /// A second opinion answered with a result: the first provider was blamed.
    SecondOpinionProvider = 1,
    /// The second opinion failed or said something else: nobody blamed.
    SecondOpinionInconclusive = 2,
    /// A remembered "client's" verdict answered it without asking.
    RememberedClient = 3,
    /// A remembered "provider's" verdict blamed the provider without asking.
    RememberedProvider = 4,
    /// A second opinion on the same error was already in flight: nobody blamed.
    Pending = 5,
    /// No other provider could be asked: nobody blamed.
    Alone = 6,
}

/// What the Solana magic router counts (all solana-magic networks together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SolanaMetric {
    /// Accounts in the shards' delegation tables (gauge).
    TrackedAccounts = 0,
    /// Of those, delegated to an ER (gauge).
    DelegatedAccounts = 1,
    /// Delegation records read from the base layer over HTTP.
    RecordReads = 2,
    /// Base-layer record subscription sockets lost (accounts went into limbo).
    LinkDrops = 3,
    /// Answers that came from the wrong side and were asked again of the ER.
    Rerouted = 4,
    /// Upstream WebSockets carrying client subscriptions (gauge).
    UpstreamSockets = 5,
    /// Upstream subscriptions held for clients, identical client subscriptions counted once (gauge).
    Topics = 6,
    /// Notifications delivered after a lost socket came back: a change (or a landed signature) missed in
    /// the gap, read over HTTP.
    CaughtUp = 7,
}

/// Ways a call was answered without its own upstream request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    CacheHit = 0,
    CacheMiss = 1,
    Joined = 2,
}

const REFUSAL_STATUSES: [u16; 10] = [400, 401, 403, 404, 405, 408, 411, 413, 429, 431];

impl ShardMetrics {
    /// `providers[n]` = provider count of network `n`; `keys` = configured keys.
    pub fn new(providers: &[usize], keys: usize) -> Self {
        ShardMetrics {
            networks: providers
                .iter()
                .map(|&p| NetMetrics {
                    methods: (0..=KNOWN_METHODS.len()).map(|_| MethodMetrics::default()).collect(),
                    providers: (0..p).map(|_| ProviderMetrics::default()).collect(),
                    credits: std::sync::OnceLock::new(),
                })
                .collect(),
            keys: (0..=keys).map(|_| KeyMetrics::default()).collect(),
            refusals: REFUSAL_STATUSES.iter().map(|&s| (s, AtomicU64::new(0))).collect(),
            cache: CacheMetrics::default(),
            ws: Default::default(),
            solana: Default::default(),
            reads: ReadMetrics::default(),
            writes: WriteMetrics::default(),
        }
    }

    pub fn submitted(&self, how: Submitted) {
        self.writes.submitted[how as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// An emulated `eth_sendRawTransactionSync` ended: with its receipt, or timed out (EIP-7966 code 4).
    pub fn sync_emulated(&self, receipt: bool) {
        self.writes.sync_emulated[usize::from(!receipt)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn verified(&self, how: Verified) {
        self.reads.verified[how as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn unknown_method(&self) {
        self.writes.unknown_methods.fetch_add(1, Ordering::Relaxed);
    }

    /// A hedge was sent (`won`: it answered first).
    pub fn hedge(&self, won: bool) {
        self.reads.hedges[usize::from(won)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn settled(&self, how: Settled) {
        self.reads.settled[how as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn solana(&self, m: SolanaMetric, delta: i64) {
        self.solana[m as usize].fetch_add(delta, Ordering::Relaxed);
    }

    pub fn ws_clients(&self, delta: i64) {
        self.ws[0].fetch_add(delta, Ordering::Relaxed);
    }

    pub fn subscription(&self, kind: prism_wire::rpc::TopicKind, delta: i64) {
        let i = match kind {
            prism_wire::rpc::TopicKind::NewHeads => 1,
            prism_wire::rpc::TopicKind::Logs => 2,
            prism_wire::rpc::TopicKind::PendingTransactions => 3,
        };
        self.ws[i].fetch_add(delta, Ordering::Relaxed);
    }

    pub fn ws_reconnect(&self) {
        self.ws[4].fetch_add(1, Ordering::Relaxed);
    }

    /// An upstream WebSocket that stopped answering pings was dropped.
    pub fn ws_unresponsive(&self) {
        self.ws[7].fetch_add(1, Ordering::Relaxed);
    }

    /// A subscription's delivery fell behind its upstream (inbox full) and was rebuilt.
    pub fn ws_topic_rebuilt(&self) {
        self.ws[8].fetch_add(1, Ordering::Relaxed);
    }

    /// A `newHeads` topic linked a head to a fork below its last one: the node announced a reorg.
    pub fn ws_reorg(&self) {
        self.ws[9].fetch_add(1, Ordering::Relaxed);
    }

    pub fn ws_backfilled(&self, heads: bool, n: u64) {
        self.ws[if heads { 5 } else { 6 }].fetch_add(n as i64, Ordering::Relaxed);
    }

    pub fn reuse(&self, r: Reuse) {
        self.cache.reuse[r as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_cache(&self, bytes: u64, entries: u64, evictions: u64) {
        self.cache.size[0].store(bytes, Ordering::Relaxed);
        self.cache.size[1].store(entries, Ordering::Relaxed);
        self.cache.size[2].store(evictions, Ordering::Relaxed);
    }

    pub fn call(&self, network: usize, method_index: usize, result: CallResult, latency_us: u64) {
        let m = &self.networks[network].methods[method_index.min(KNOWN_METHODS.len())];
        m.results[result as usize].fetch_add(1, Ordering::Relaxed);
        m.latency.observe(latency_us);
    }

    pub fn attempt(
        &self,
        network: usize,
        provider: prism_wire::rpc::ProviderId,
        result: AttemptResult,
        latency_us: u64,
        reason: Option<Reason>,
        probe: bool,
    ) {
        let p = &self.networks[network].providers[provider];
        if probe {
            p.probes[result as usize].fetch_add(1, Ordering::Relaxed);
        } else {
            p.results[result as usize].fetch_add(1, Ordering::Relaxed);
            p.latency.observe(latency_us);
        }
        if let Some(r) = reason {
            p.reasons[usize::from(probe)][r as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn key_request(&self, key: usize, throttled: bool) {
        if let Some(k) = self.keys.get(key) {
            k.requests.fetch_add(1, Ordering::Relaxed);
            if throttled {
                k.throttled.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A call of key slot `key` was not sent to a provider: over its fair share of its quota.
    pub fn over_share(&self, key: usize) {
        if let Some(k) = self.keys.get(key) {
            k.over_share.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `credits` spent by key slot `key` at provider `p` of network `net` (`providers`: how many the
    /// network has now, which sizes the table on first use; a provider added later is not counted).
    pub fn credits(&self, net: usize, key: usize, p: prism_wire::rpc::ProviderId, providers: usize, credits: u64) {
        let Some(n) = self.networks.get(net) else { return };
        let (width, table) = n.credits.get_or_init(|| {
            let width = providers.max(1);
            (width, (0..width * self.keys.len()).map(|_| AtomicU64::new(0)).collect())
        });
        if p.index() < *width {
            if let Some(c) = table.get(key * width + p.index()) {
                c.fetch_add(credits, Ordering::Relaxed);
            }
        }
    }

    pub fn refusal(&self, status: u16) {
        if let Some((_, c)) = self.refusals.iter().find(|(s, _)| *s == status) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counters the status page turns into rates (the aggregator samples them every history point).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// JSON-RPC calls answered, every network and result.
    pub calls: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub dedupe_joins: u64,
    /// Hedged reads sent.
    pub hedges: u64,
    /// Per key (index 0 = no key, then the configured keys in order): requests, refused by its rate limit.
    pub key_requests: Vec<u64>,
    pub key_throttled: Vec<u64>,
}

impl Counters {
    /// The sum over every shard's block.
    pub fn sum(shards: &[std::sync::Arc<ShardMetrics>]) -> Counters {
        let mut c = Counters::default();
        for s in shards {
            c.calls += s
                .networks
                .iter()
                .flat_map(|n| &n.methods)
                .flat_map(|m| &m.results)
                .map(|r| r.load(Ordering::Relaxed))
                .sum::<u64>();
            c.cache_hits += s.cache.reuse[Reuse::CacheHit as usize].load(Ordering::Relaxed);
            c.cache_misses += s.cache.reuse[Reuse::CacheMiss as usize].load(Ordering::Relaxed);
            c.dedupe_joins += s.cache.reuse[Reuse::Joined as usize].load(Ordering::Relaxed);
            c.hedges += s.reads.hedges.iter().map(|h| h.load(Ordering::Relaxed)).sum::<u64>();
            c.key_requests.resize(s.keys.len(), 0);
            c.key_throttled.resize(s.keys.len(), 0);
            for (k, m) in s.keys.iter().enumerate() {
                c.key_requests[k] += m.requests.load(Ordering::Relaxed);
                c.key_throttled[k] += m.throttled.load(Ordering::Relaxed);
            }
        }
        c
    }
}

/// Names the scrape needs to label series.
/// One network's provider slots as metrics label them: (provider, region), `None` for a retired slot.
pub type ProviderLabels<'a> = Vec<Option<(&'a str, &'a str)>>;

pub struct Labels<'a> {
    /// Per network, its provider slots: `None` for a provider a reload retired (not exported).
    pub networks: &'a [(&'a str, ProviderLabels<'a>)],
    pub keys: &'a [&'a str],
}

/// One counter family with a single label: HELP, TYPE, then one line per label value.
/// `prism_credits_total{network,key,provider}`: what each key cost at each provider with a price table, in
/// its credits (only networks where one was used; only the pairs with any).
fn render_credits(out: &mut String, labels: &Labels<'_>, keys: &[&str], shards: &[&ShardMetrics]) {
    let mut header = false;
    for (n, (net, providers)) in labels.networks.iter().enumerate() {
        let Some(width) = shards
            .iter()
            .find_map(|s| s.networks.get(n).and_then(|m| m.credits.get()).map(|c| c.0))
        else {
            continue;
        };
        for (k, key) in keys.iter().enumerate() {
            for (p, entry) in providers.iter().enumerate().take(width) {
                let Some((provider, _)) = entry else { continue };
                let v = sum(shards, |s| {
                    s.networks
                        .get(n)
                        .and_then(|m| m.credits.get())
                        .and_then(|c| c.1.get(k * c.0 + p))
                        .map_or(0, |c| c.load(Ordering::Relaxed))
                });
                if v == 0 {
                    continue;
                }
                if !header {
                    header = true;
                    out.push_str("# HELP prism_credits_total Credits each key cost at each provider with a price table, in the units the provider bills.\n# TYPE prism_credits_total counter\n");
                }
                let (mut kl, mut pl) = (String::new(), String::new());
                label(&mut kl, key);
                label(&mut pl, provider);
                let _ = writeln!(
                    out,
                    "prism_credits_total{{network=\"{net}\",key=\"{kl}\",provider=\"{pl}\"}} {v}"
                );
            }
        }
    }
}

fn labelled_counter(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    values: &[&str],
    count: impl Fn(usize) -> u64,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (i, v) in values.iter().enumerate() {
        let _ = writeln!(out, "{name}{{{label}=\"{v}\"}} {}", count(i));
    }
}

fn sum(shards: &[&ShardMetrics], f: impl Fn(&ShardMetrics) -> u64) -> u64 {
    shards.iter().map(|s| f(s)).sum()
}

/// Escapes a label value per the Prometheus text format.
pub fn label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn histogram(
    out: &mut String,
    name: &str,
    labels: &str,
    shards: &[&ShardMetrics],
    h: impl Fn(&ShardMetrics) -> &Histo,
) {
    let mut cumulative = 0;
    for (i, b) in BUCKETS_US.iter().enumerate() {
        cumulative += sum(shards, |s| h(s).buckets[i].load(Ordering::Relaxed));
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{}\"}} {cumulative}", *b as f64 / 1e6);
    }
    let count = sum(shards, |s| h(s).count.load(Ordering::Relaxed));
    let sum_us = sum(shards, |s| h(s).sum_us.load(Ordering::Relaxed));
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", sum_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
}
