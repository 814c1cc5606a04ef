//! `[policy]`: how calls are retried, how providers are broken and brought back, when reads are hedged,
//! and whether scarce provider quota is shared fairly between keys.

use serde::{Deserialize, Serialize};

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
