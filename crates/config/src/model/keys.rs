//! `[[keys]]`: an API key, what it may use (networks, methods, origins, rate), how its calls are routed
//! (strategy, weights) and which of its reads are verified.

use serde::{Deserialize, Serialize};

use super::provider::default_weight;

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
