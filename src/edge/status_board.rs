//! The parts of `/status` the status page draws beyond the provider table: each provider's badge (with the
//! cause of its failures) and its last 15 minutes of points, each network's timeline of state changes and
//! (solana-magic) its ERs and delegation table counts, and the node's totals. Kept apart from `admin.rs`
//! so the listener and its routes stay small; everything here only reads snapshots and atomics.

use std::sync::atomic::Ordering;

use super::admin::{wall_ms, AdminView};
use prism_telemetry::badge::badge;
use prism_telemetry::clock::now_ms;
use prism_telemetry::history::POINT_MS;
use prism_telemetry::status::{
    round, ErProvider, ErStatus, KeyStatus, MinuteStatus, NetworkStatus, ProviderStatus, Series, SolanaStatus,
    TimelineEvent, TotalsStatus,
};
use prism_wire::rpc::ProviderId;

/// Milliseconds since the Unix epoch of a process-clock time, for a browser to print as a wall time.
fn unix_ms(at_ms: u64, now: u64) -> u64 {
    wall_ms().saturating_sub(now.saturating_sub(at_ms))
}

/// A failure this recent explains a badge that is not green.
const CAUSE_FRESH_MS: u64 = 60_000;

impl AdminView {
    /// Sets each row's badge from its state and last-minute figures next to its peers' (`slots[k]` is row
    /// `k`'s provider slot). A badge that is not green says the cause of the provider's last failure when it
    /// is fresh: "breaker open: http_401 (check this provider's credentials)".
    pub(super) fn set_badges(&self, network: usize, slots: &[usize], rows: &mut [ProviderStatus]) {
        let health = self.lives[network].health.load();
        let minute = |row: usize| health.providers.get(slots[row]).map(|h| h.minute).unwrap_or_default();
        for i in 0..rows.len() {
            let peers: Vec<u64> = (0..rows.len())
                .filter(|&j| j != i && minute(j).calls > 0)
                .map(|j| minute(j).p99_us)
                .collect();
            let (b, mut why) = badge(&rows[i].state, &minute(i), &peers);
            if let Some(c) = &rows[i].cordon {
                why = format!("cordoned: {}", c.reason);
            } else if let Some(e) = rows[i]
                .errors
                .last_error
                .as_ref()
                .filter(|e| b.name() != "green" && e.ago_s * 1000 < CAUSE_FRESH_MS)
            {
                why = format!(
                    "{why}: {} ({}x in the last minute){}",
                    e.reason,
                    e.last_minute,
                    e.hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default()
                );
            }
            rows[i].board.badge = b.name().to_string();
            rows[i].board.badge_reason = why;
        }
    }

    /// A provider's last minute and its series of points.
    pub(super) fn fill_board(&self, network: usize, provider: usize, row: &mut ProviderStatus) {
        let health = self.lives[network].health.load();
        let minute = health.providers.get(provider).map(|h| h.minute).unwrap_or_default();
        row.board.minute = MinuteStatus {
            calls: minute.calls,
            failures: minute.failures,
            p99_ms: round(minute.p99_us as f64 / 1000.0, 2),
        };
        let Some(ring) = health.history.providers.get(provider) else {
            return;
        };
        row.board.series = Some(Series {
            at_ms: ring.iter().map(|p| p.at_ms).collect(),
            calls: ring.iter().map(|p| p.calls).collect(),
            p50_ms: ring.iter().map(|p| round(p.p50_us as f64 / 1000.0, 2)).collect(),
            p99_ms: ring.iter().map(|p| round(p.p99_us as f64 / 1000.0, 2)).collect(),
            error_rate: ring.iter().map(|p| round(p.error_rate(), 4)).collect(),
            share: ring.iter().map(|p| round(p.share, 4)).collect(),
        });
    }

    /// A network's point interval, timeline and (solana-magic) ERs.
    pub(super) fn fill_network_board(&self, network: usize, net: &prism_config::Network, out: &mut NetworkStatus) {
        let now = now_ms();
        let live = &self.lives[network];
        let health = live.health.load();
        out.point_ms = POINT_MS;
        out.timeline = health
            .history
            .timeline
            .events()
            .map(|e| TimelineEvent {
                at_unix_ms: unix_ms(e.at_ms, now),
                ago_s: now.saturating_sub(e.at_ms) / 1000,
                provider: net
                    .providers
                    .get(e.provider)
                    .map_or("?", |p| p.name.as_str())
                    .to_string(),
                from: e.from.to_string(),
                to: e.to.to_string(),
            })
            .collect();
        let Some(Some(sol)) = self.solana.get(network) else {
            return;
        };
        let (tracked, delegated, limbo) = sol.counts.read();
        let slot = |p: ProviderId| live.slot(p).heads.head.load(Ordering::Relaxed);
        let base_slot = ProviderId::in_set(sol.base, net.providers.len())
            .map(slot)
            .max()
            .unwrap_or(0);
        out.solana = Some(SolanaStatus {
            base_slot,
            tracked_accounts: tracked,
            delegated_accounts: delegated,
            in_limbo: limbo,
            ers: sol
                .ers
                .iter()
                .map(|er| {
                    let members: Vec<ProviderId> = ProviderId::in_set(er.providers, net.providers.len()).collect();
                    ErStatus {
                        name: er.name.clone(),
                        slot: members.iter().map(|&p| slot(p)).max().unwrap_or(0),
                        providers: members
                            .iter()
                            .map(|&p| ErProvider {
                                name: net.providers[p.index()].name.clone(),
                                slot: slot(p),
                                state: live.describe(p, now).to_string(),
                            })
                            .collect(),
                    }
                })
                .collect(),
        });
    }

    /// The top-level `"totals"`: node-wide rates over the last history interval. Keys by name only.
    pub(super) fn totals_status(&self) -> TotalsStatus {
        let t = self.totals.load();
        // The keys configured now, by their index (a reload keeps a kept key's index).
        let ring = self.keys.load();
        let keys = std::iter::once((0, "-")).chain(ring.entries().iter().map(|e| (e.index, e.name.as_str())));
        TotalsStatus {
            interval_ms: t.interval_ms,
            rps: t.rps.filter(|v| v.is_finite()).map(|v| round(v, 2)),
            cache_hit_rate: t.cache_hit_rate.filter(|v| v.is_finite()).map(|v| round(v, 4)),
            join_rate: t.join_rate.filter(|v| v.is_finite()).map(|v| round(v, 4)),
            hedge_rate: t.hedge_rate.filter(|v| v.is_finite()).map(|v| round(v, 4)),
            rps_series: t.rps_points.iter().map(|v| round(*v, 2)).collect(),
            keys: keys
                .map(|(k, name)| {
                    let kt = t.keys.get(k).copied().unwrap_or_default();
                    KeyStatus {
                        name: name.to_string(),
                        requests: kt.requests,
                        refused: kt.throttled,
                        refused_last_interval: kt.throttled_last,
                    }
                })
                .collect(),
        }
    }
}
