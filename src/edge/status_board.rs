//! The parts of `/status` the status page draws beyond the provider table: each provider's badge and its
//! last 15 minutes of points, each network's timeline of state changes and (solana-magic) its ERs and
//! delegation table counts, and the node's totals. Kept apart from `admin.rs` so the listener and its
//! routes stay small; everything here only reads snapshots and atomics.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use super::admin::{json_str, AdminView, ProviderRow};
use crate::rpc::ProviderId;
use crate::telemetry::badge::badge;
use crate::telemetry::clock::now_ms;
use crate::telemetry::history::POINT_MS;

/// A finite float as JSON (`null` for none).
fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "null".to_string(),
    }
}

/// Milliseconds since the Unix epoch of a process-clock time, for a browser to print as a wall time.
fn unix_ms(at_ms: u64, now: u64) -> u64 {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    wall.saturating_sub(now.saturating_sub(at_ms))
}

impl AdminView {
    /// Sets each row's badge from its state and last-minute figures next to its peers'.
    pub(super) fn set_badges(&self, network: usize, rows: &mut [ProviderRow]) {
        let health = self.lives[network].health.load();
        // Rows are the providers in service; their figures are by slot.
        let slots: Vec<usize> = rows.iter().map(|r| r.slot).collect();
        let minute = |row: usize| health.providers.get(slots[row]).map(|h| h.minute).unwrap_or_default();
        for i in 0..rows.len() {
            let peers: Vec<u64> = (0..rows.len())
                .filter(|&j| j != i && minute(j).calls > 0)
                .map(|j| minute(j).p99_us)
                .collect();
            let (b, why) = badge(rows[i].state, &minute(i), &peers);
            rows[i].badge = b.name();
            rows[i].badge_reason = why;
        }
    }

    /// The fields a provider's `/status` object has beyond the table: badge, last minute, series.
    pub(super) fn write_provider_board(&self, out: &mut String, network: usize, provider: usize, row: &ProviderRow) {
        let health = self.lives[network].health.load();
        let minute = health.providers.get(provider).map(|h| h.minute).unwrap_or_default();
        let _ = write!(
            out,
            r#","badge":"{}","badgeReason":{},"minute":{{"calls":{},"failures":{},"p99Ms":{:.2}}}"#,
            row.badge,
            json_str(&row.badge_reason),
            minute.calls,
            minute.failures,
            minute.p99_us as f64 / 1000.0
        );
        let Some(ring) = health.history.providers.get(provider) else {
            return;
        };
        let series = |f: &dyn Fn(&crate::telemetry::history::Point) -> String| -> String {
            ring.iter().map(f).collect::<Vec<_>>().join(",")
        };
        let _ = write!(
            out,
            r#","series":{{"atMs":[{}],"calls":[{}],"p50Ms":[{}],"p99Ms":[{}],"errorRate":[{}],"share":[{}]}}"#,
            series(&|p| p.at_ms.to_string()),
            series(&|p| p.calls.to_string()),
            series(&|p| format!("{:.2}", p.p50_us as f64 / 1000.0)),
            series(&|p| format!("{:.2}", p.p99_us as f64 / 1000.0)),
            series(&|p| format!("{:.4}", p.error_rate())),
            series(&|p| format!("{:.4}", p.share)),
        );
    }

    /// The fields a network's `/status` object has beyond its providers: point interval, timeline, Solana.
    pub(super) fn write_network_board(&self, out: &mut String, network: usize) {
        let now = now_ms();
        let live = &self.lives[network];
        let config = self.config.load();
        let net = &config.networks[network];
        let health = live.health.load();
        let _ = write!(out, r#","pointMs":{POINT_MS},"timeline":["#);
        for (k, e) in health.history.timeline.events().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let name = net.providers.get(e.provider).map_or("?", |p| p.name.as_str());
            let _ = write!(
                out,
                r#"{{"atUnixMs":{},"agoS":{},"provider":{},"from":"{}","to":"{}"}}"#,
                unix_ms(e.at_ms, now),
                now.saturating_sub(e.at_ms) / 1000,
                json_str(name),
                e.from,
                e.to
            );
        }
        out.push(']');
        let Some(Some(sol)) = self.solana.get(network) else {
            return;
        };
        let (tracked, delegated, limbo) = sol.counts.read();
        let slot = |p: ProviderId| live.slot(p).head.load(Ordering::Relaxed);
        let base_slot = ProviderId::in_set(sol.base, net.providers.len())
            .map(slot)
            .max()
            .unwrap_or(0);
        let _ = write!(
            out,
            r#","solana":{{"baseSlot":{base_slot},"trackedAccounts":{tracked},"delegatedAccounts":{delegated},"inLimbo":{limbo},"ers":["#
        );
        for (k, er) in sol.ers.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let members: Vec<ProviderId> = ProviderId::in_set(er.providers, net.providers.len()).collect();
            let providers: Vec<String> = members
                .iter()
                .map(|&p| {
                    format!(
                        r#"{{"name":{},"slot":{},"state":"{}"}}"#,
                        json_str(&net.providers[p.index()].name),
                        slot(p),
                        live.describe(p, now)
                    )
                })
                .collect();
            let _ = write!(
                out,
                r#"{{"name":{},"slot":{},"providers":[{}]}}"#,
                json_str(&er.name),
                members.iter().map(|&p| slot(p)).max().unwrap_or(0),
                providers.join(",")
            );
        }
        out.push_str("]}");
    }

    /// The top-level `"totals"` field: node-wide rates over the last history interval. Keys by name only.
    pub(super) fn write_totals(&self, out: &mut String) {
        let t = self.totals.load();
        let rps: Vec<String> = t.rps_points.iter().map(|v| format!("{v:.2}")).collect();
        let _ = write!(
            out,
            r#","totals":{{"intervalMs":{},"rps":{},"cacheHitRate":{},"joinRate":{},"hedgeRate":{},"rpsSeries":[{}],"keys":["#,
            t.interval_ms,
            num(t.rps, 2),
            num(t.cache_hit_rate, 4),
            num(t.join_rate, 4),
            num(t.hedge_rate, 4),
            rps.join(",")
        );
        // The keys configured now, by their index (a reload keeps a kept key's index).
        let ring = self.keys.load();
        let keys = std::iter::once((0, "-")).chain(ring.entries().iter().map(|e| (e.index, e.name.as_str())));
        for (n, (k, name)) in keys.enumerate() {
            if n > 0 {
                out.push(',');
            }
            let kt = t.keys.get(k).copied().unwrap_or_default();
            let _ = write!(
                out,
                r#"{{"name":{},"requests":{},"refused":{},"refusedLastInterval":{}}}"#,
                json_str(name),
                kt.requests,
                kt.throttled,
                kt.throttled_last
            );
        }
        out.push_str("]}");
    }
}
