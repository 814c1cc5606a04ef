//! `[[networks]]`: one chain behind one endpoint, its kind, how its providers' heads (EVM) or slots
//! (Solana) are judged, and the methods it declares beyond Prism's table. Its providers: `provider.rs`.

use serde::{Deserialize, Serialize};

use super::provider::Provider;

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
