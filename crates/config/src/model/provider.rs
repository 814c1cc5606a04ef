//! `[[networks.providers]]`: one upstream, where it is, what it may carry (quota, credits, logs limits),
//! its Solana side, its credentials, and how it takes `eth_sendRawTransactionSync`.

use serde::{Deserialize, Serialize};

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
    pub auth: crate::secrets::ProviderAuth,
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

/// A provider's `weight` and a key's `quota_weight` when unset.
pub(super) fn default_weight() -> f64 {
    1.0
}
