//! The `/status` document: one serde type the admin listener writes and `prism status` reads, so the two
//! cannot disagree, and the one terminal table `prism status` and `prism demo` print from it.
//! Field names are the JSON's (camelCase); the status page reads the same names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `GET /status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDoc {
    pub service: String,
    pub version: String,
    /// The commit the binary was built from (`unknown` outside a git checkout).
    #[serde(default)]
    pub commit: String,
    pub uptime_seconds: u64,
    pub open_connections: u64,
    pub networks: Vec<NetworkStatus>,
    #[serde(default)]
    pub totals: TotalsStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
    #[serde(default)]
    pub reload: ReloadStatus,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    pub name: String,
    /// `evm` or `solana-magic`.
    pub kind: String,
    pub best_head: u64,
    pub providers: Vec<ProviderStatus>,
    /// Interval of the providers' series points.
    #[serde(default)]
    pub point_ms: u64,
    #[serde(default)]
    pub timeline: Vec<TimelineEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solana: Option<SolanaStatus>,
    /// The pool's agreed `safe` / `finalized` blocks (EVM; 0 = not known).
    #[serde(default)]
    pub safe: u64,
    #[serde(default)]
    pub finalized: u64,
}

/// One provider as operators see it. Rolling figures are over the last 5 minutes.
///
/// Its fields come in small records, each flattened: the JSON is one flat object, its fields in the order
/// written here (the status page and `prism status` read these names).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    pub name: String,
    pub region: Option<String>,
    /// `closed`, `open`, `half-open`, `parked`, `unverified`, `cordoned`, `open-drift`, `outlier`, ...
    pub state: String,
    #[serde(flatten)]
    pub chain: ChainPosition,
    #[serde(flatten)]
    pub traffic: TrafficStatus,
    #[serde(flatten)]
    pub routing: RoutingStatus,
    #[serde(flatten)]
    pub board: BoardStatus,
    #[serde(flatten)]
    pub blocks: BlocksStatus,
    #[serde(flatten)]
    pub errors: ErrorsStatus,
    /// Taken out of routing by an operator, and why.
    #[serde(default)]
    pub cordon: Option<CordonStatus>,
    #[serde(flatten)]
    pub solana: SolanaCadence,
}

/// Where a provider's head stands: `head`, `lag`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainPosition {
    pub head: u64,
    /// Blocks behind the pool's best head (0 for a provider that never reported one).
    pub lag: u64,
}

/// Its client traffic over the last 5 minutes: latency, success, share and counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficStatus {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub success: f64,
    /// Of the network's client calls (probes are not traffic), 0..1.
    pub share: f64,
    pub calls: u64,
    pub failures: u64,
    /// Of `calls`, Prism's own health probes.
    #[serde(default)]
    pub probes: u64,
    pub throttled: u64,
}

/// What holds routing back from it: its breaker's cooldown, its overflow role, heads refused as outliers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingStatus {
    pub cooldown_ms: u64,
    pub overflow: bool,
    pub outlier_heads: u64,
    pub claimed_head: u64,
}

/// What the status page draws for it beside the table: its badge and why, its last minute, its points.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BoardStatus {
    /// `green`, `amber` or `red`, and why.
    #[serde(default)]
    pub badge: String,
    #[serde(default)]
    pub badge_reason: String,
    #[serde(default)]
    pub minute: MinuteStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Series>,
}

/// The blocks it serves: its lowest (0 = archive) and its `safe` / `finalized` tags.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlocksStatus {
    #[serde(default)]
    pub floor_block: u64,
    #[serde(default)]
    pub safe_head: u64,
    #[serde(default)]
    pub finalized_head: u64,
}

/// Why it failed lately.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorsStatus {
    /// The last failed (or throttled) attempt: its reason, when, and how often in the last minute.
    #[serde(default)]
    pub last_error: Option<LastError>,
    /// Every reason seen in the last minute, with its count.
    #[serde(default)]
    pub errors_last_minute: BTreeMap<String, u64>,
}

/// Solana: a provider's slot cadence (absent on EVM networks).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SolanaCadence {
    /// Its cadence as its probes show it (ms per slot, 0 = not known yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_ms: Option<f64>,
    /// How long its slot may stand still before it is `stalled` (0 = the check is off; see
    /// `core::live::slots`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_after_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    /// `http_401`, `timeout`, `refused`, ... (`telemetry::cause::Reason`).
    pub reason: String,
    /// What to do about it, when one sentence helps ("check this provider's credentials").
    pub hint: Option<String>,
    pub at_unix_ms: u64,
    pub ago_s: u64,
    /// `client` or `probe`.
    pub by: String,
    /// How often this reason came in the last minute.
    pub last_minute: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CordonStatus {
    pub reason: String,
    pub since_unix_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MinuteStatus {
    pub calls: u64,
    pub failures: u64,
    pub p99_ms: f64,
}

/// A provider's points, oldest first, one per `pointMs`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    pub at_ms: Vec<u64>,
    pub calls: Vec<u64>,
    pub p50_ms: Vec<f64>,
    pub p99_ms: Vec<f64>,
    pub error_rate: Vec<f64>,
    pub share: Vec<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineEvent {
    pub at_unix_ms: u64,
    pub ago_s: u64,
    pub provider: String,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SolanaStatus {
    pub base_slot: u64,
    pub tracked_accounts: u64,
    pub delegated_accounts: u64,
    pub in_limbo: u64,
    pub ers: Vec<ErStatus>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErStatus {
    pub name: String,
    pub slot: u64,
    pub providers: Vec<ErProvider>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErProvider {
    pub name: String,
    pub slot: u64,
    pub state: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TotalsStatus {
    pub interval_ms: u64,
    pub rps: Option<f64>,
    pub cache_hit_rate: Option<f64>,
    pub join_rate: Option<f64>,
    pub hedge_rate: Option<f64>,
    pub rps_series: Vec<f64>,
    /// By key name (`-` = requests without a key), never the key itself.
    pub keys: Vec<KeyStatus>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyStatus {
    pub name: String,
    pub requests: u64,
    pub refused: u64,
    pub refused_last_interval: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub node: String,
    pub connected: bool,
    pub sync_lag_ms: Option<u64>,
    pub redis_errors: u64,
    pub refused: u64,
    pub peers: Vec<PeerStatus>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    pub node: String,
    pub open: Vec<String>,
    pub best_heads: Vec<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReloadStatus {
    pub enabled: bool,
    pub last: Option<ReloadOutcome>,
}

/// How a config reload went: for the log, `/status`, `POST /reload`'s answer and `prism reload`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReloadOutcome {
    pub applied: bool,
    /// The generation running afterwards (unchanged when refused).
    pub generation: u64,
    /// Wall-clock ms when it finished.
    pub at_ms: u64,
    /// What happened, or why the file was refused (and what needs a restart).
    pub message: String,
    /// One line per change (providers, keys, limits, weights, policies; secrets by name only).
    pub changes: Vec<String>,
}

impl ReloadOutcome {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A float rounded to `digits` decimals, so the JSON stays short.
pub fn round(v: f64, digits: i32) -> f64 {
    if !v.is_finite() {
        return 0.0;
    }
    let k = 10f64.powi(digits);
    (v * k).round() / k
}

/// The provider table of `prism status` and `prism demo`: one renderer for both.
pub fn render_table(doc: &StatusDoc) -> String {
    use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};
    let mut out = String::new();
    for net in &doc.networks {
        out.push_str(&format!("{} ({}), best head {}\n", net.name, net.kind, net.best_head));
        let mut table = Table::new();
        table.load_preset(NOTHING).set_header(vec![
            "provider",
            "p50",
            "p99",
            "success",
            "share",
            "head",
            "lag",
            "badge",
            "state",
            "last error",
        ]);
        for p in &net.providers {
            let last = match (&p.cordon, &p.errors.last_error) {
                (Some(c), _) => format!("cordoned: {}", c.reason),
                (None, Some(e)) if e.ago_s < 300 => format!(
                    "{} {} s ago, {}x/min{}",
                    e.reason,
                    e.ago_s,
                    e.last_minute,
                    e.hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default()
                ),
                _ => String::new(),
            };
            table.add_row(vec![
                Cell::new(&p.name),
                Cell::new(format!("{:.1} ms", p.traffic.p50_ms)).set_alignment(CellAlignment::Right),
                Cell::new(format!("{:.1} ms", p.traffic.p99_ms)).set_alignment(CellAlignment::Right),
                Cell::new(format!("{:.2}%", p.traffic.success * 100.0)).set_alignment(CellAlignment::Right),
                Cell::new(format!("{:.0}%", p.traffic.share * 100.0)).set_alignment(CellAlignment::Right),
                Cell::new(p.chain.head).set_alignment(CellAlignment::Right),
                Cell::new(p.chain.lag).set_alignment(CellAlignment::Right),
                Cell::new(&p.board.badge),
                Cell::new(&p.state),
                Cell::new(last),
            ]);
        }
        for line in table.to_string().lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_heads_lags_and_the_last_error() {
        let doc = StatusDoc {
            networks: vec![NetworkStatus {
                name: "main".into(),
                kind: "evm".into(),
                best_head: 1_000_123,
                providers: vec![ProviderStatus {
                    name: "alchemy".into(),
                    state: "open".into(),
                    chain: ChainPosition {
                        head: 1_000_100,
                        lag: 23,
                    },
                    board: BoardStatus {
                        badge: "red".into(),
                        ..Default::default()
                    },
                    errors: ErrorsStatus {
                        last_error: Some(LastError {
                            reason: "http_401".into(),
                            hint: Some("check this provider's credentials".into()),
                            at_unix_ms: 0,
                            ago_s: 2,
                            by: "probe".into(),
                            last_minute: 7,
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = render_table(&doc);
        assert!(text.contains("best head 1000123"), "{text}");
        for want in [
            "alchemy",
            "1000100",
            "23",
            "http_401 2 s ago, 7x/min (check this provider's credentials)",
        ] {
            assert!(text.contains(want), "{want:?} missing:\n{text}");
        }
        let json = serde_json::to_string(&doc).unwrap();
        let back: StatusDoc = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back.networks[0].providers[0].errors.last_error,
            doc.networks[0].providers[0].errors.last_error
        );
        assert!(
            json.contains("\"bestHead\":1000123") && json.contains("\"lastError\""),
            "{json}"
        );
    }

    /// A provider row as the status page and `prism status` read it: every field, in this order, and back.
    const FULL_ROW: &str = concat!(
        r#"{"name":"alchemy","region":"us-east","state":"open","head":100,"lag":3,"p50Ms":1.5,"p99Ms":9.25,"#,
        r#""success":0.99,"share":0.5,"calls":40,"failures":2,"probes":4,"throttled":1,"cooldownMs":500,"#,
        r#""overflow":true,"outlierHeads":2,"claimedHead":120,"badge":"amber","badgeReason":"slow","#,
        r#""minute":{"calls":5,"failures":1,"p99Ms":8.0},"series":{"atMs":[1],"calls":[2],"p50Ms":[1.0],"#,
        r#""p99Ms":[2.0],"errorRate":[0.5],"share":[0.25]},"floorBlock":7,"safeHead":90,"finalizedHead":80,"#,
        r#""lastError":{"reason":"timeout","hint":null,"atUnixMs":11,"agoS":2,"by":"client","lastMinute":3},"#,
        r#""errorsLastMinute":{"timeout":3},"cordon":{"reason":"maintenance","sinceUnixMs":12},"slotMs":400.5,"#,
        r#""stallAfterMs":1200}"#
    );

    #[test]
    fn a_provider_row_is_one_flat_object_in_its_order_both_ways() {
        let row: ProviderStatus = serde_json::from_str(FULL_ROW).unwrap();
        assert_eq!(row.chain.lag, 3);
        assert_eq!(row.traffic.throttled, 1);
        assert_eq!(row.board.badge_reason, "slow");
        assert_eq!(row.solana.stall_after_ms, Some(1200));
        assert_eq!(serde_json::to_string(&row).unwrap(), FULL_ROW);
        let empty = serde_json::to_string(&ProviderStatus::default()).unwrap();
        assert_eq!(
            empty,
            concat!(
                r#"{"name":"","region":null,"state":"","head":0,"lag":0,"p50Ms":0.0,"p99Ms":0.0,"success":0.0,"#,
                r#""share":0.0,"calls":0,"failures":0,"probes":0,"throttled":0,"cooldownMs":0,"overflow":false,"#,
                r#""outlierHeads":0,"claimedHead":0,"badge":"","badgeReason":"","#,
                r#""minute":{"calls":0,"failures":0,"p99Ms":0.0},"floorBlock":0,"safeHead":0,"finalizedHead":0,"#,
                r#""lastError":null,"errorsLastMinute":{},"cordon":null}"#
            )
        );
    }
}
