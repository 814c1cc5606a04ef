//! `GET /metrics` of the admin listener: the shards' counters (`telemetry::metrics::render`), the gauges read
//! from live provider state, build and process metrics, and the cluster's. Only reads atomics and
//! snapshots; nothing here is on the request path.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::admin::AdminView;
use prism_telemetry::clock::now_ms;
use prism_telemetry::metrics::{self, ShardMetrics};
use prism_wire::rpc::ProviderId;

impl AdminView {
    /// The Prometheus text of `/metrics`.
    pub fn metrics_text(&self) -> String {
        let shards: Vec<&ShardMetrics> = self.metrics.iter().map(|m| &**m).collect();
        let config = self.config.load();
        let regions: Vec<Vec<String>> = config
            .networks
            .iter()
            .map(|n| {
                n.providers
                    .iter()
                    .map(|p| {
                        let mut r = String::new();
                        metrics::label(&mut r, p.region.as_deref().unwrap_or(""));
                        r
                    })
                    .collect()
            })
            .collect();
        let networks: Vec<(&str, metrics::ProviderLabels)> = config
            .networks
            .iter()
            .zip(&regions)
            .map(|(n, r)| {
                (
                    n.name.as_str(),
                    n.providers
                        .iter()
                        .zip(r)
                        .map(|(p, r)| (!p.retired).then_some((p.name.as_str(), r.as_str())))
                        .collect(),
                )
            })
            .collect();
        let keys = self.keys.load();
        let key_names: Vec<&str> = keys.labels().iter().map(String::as_str).collect();
        let mut out = String::with_capacity(16 * 1024);
        metrics::render(
            &mut out,
            &shards,
            &metrics::Labels {
                networks: &networks,
                keys: &key_names,
            },
        );
        self.render_gauges(&mut out);
        prism_telemetry::build::render(&mut out);
        let _ = writeln!(out, "# HELP prism_provider_outlier_heads_total Heads reported that the chain cannot be at (beyond what time allows, or far above the other providers); the provider is excluded as an outlier meanwhile.\n# TYPE prism_provider_outlier_heads_total counter");
        for (n, net) in config.networks.iter().enumerate() {
            for (i, p) in net.providers.iter().enumerate().filter(|(_, p)| !p.retired) {
                let mut l = String::new();
                metrics::label(&mut l, &p.name);
                let v = self.lives[n]
                    .slot(ProviderId::new(i))
                    .heads
                    .outlier_heads
                    .load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "prism_provider_outlier_heads_total{{network=\"{}\",provider=\"{l}\"}} {v}",
                    net.name
                );
            }
        }
        if let Some(c) = &self.cluster {
            let lag = c.lag_ms();
            let lag = if lag == u64::MAX { f64::NAN } else { lag as f64 / 1000.0 };
            let _ = writeln!(out, "# HELP prism_cluster_connected Whether Redis was reachable at the last sync.\n# TYPE prism_cluster_connected gauge");
            let _ = writeln!(
                out,
                "prism_cluster_connected {}",
                u8::from(c.connected.load(Ordering::Relaxed))
            );
            let _ = writeln!(out, "# HELP prism_cluster_sync_lag_seconds Time since the last successful sync with Redis.\n# TYPE prism_cluster_sync_lag_seconds gauge");
            let _ = writeln!(out, "prism_cluster_sync_lag_seconds {lag}");
            let _ = writeln!(out, "# HELP prism_cluster_redis_errors_total Failed syncs with Redis.\n# TYPE prism_cluster_redis_errors_total counter");
            let _ = writeln!(
                out,
                "prism_cluster_redis_errors_total {}",
                c.errors.load(Ordering::Relaxed)
            );
            let _ = writeln!(out, "# HELP prism_cluster_refused_total Values read from Redis that were out of bounds and ignored or clamped (peer heads and marks beyond what this node's own heads make plausible, far-future node entries, token grants outside what was asked).\n# TYPE prism_cluster_refused_total counter");
            let _ = writeln!(out, "prism_cluster_refused_total {}", c.refused.load(Ordering::Relaxed));
            let _ = writeln!(
                out,
                "# HELP prism_cluster_peers Live peer nodes seen at the last sync.\n# TYPE prism_cluster_peers gauge"
            );
            let _ = writeln!(out, "prism_cluster_peers {}", c.peers.load().len());
        }
        out
    }

    fn render_gauges(&self, out: &mut String) {
        let now = now_ms();
        let config = self.config.load();
        let _ = writeln!(out, "# HELP prism_open_connections Open client connections.");
        let _ = writeln!(out, "# TYPE prism_open_connections gauge");
        let _ = writeln!(
            out,
            "prism_open_connections {}",
            self.open_connections.load(Ordering::Relaxed)
        );
        let gauges: [(&str, &str); 6] = [
            (
                "prism_provider_breaker_state",
                "Breaker state: 0 closed, 1 open, 2 half-open, 3 excluded (drift, outlier or wrong chain).",
            ),
            (
                "prism_provider_head_block",
                "Latest head height seen from the provider.",
            ),
            ("prism_provider_drift_blocks", "Blocks behind the pool's best head."),
            (
                "prism_provider_traffic_share",
                "Share of the network's calls over the last 5 minutes (0..1).",
            ),
            ("prism_provider_latency_p50_seconds", "Rolling 5-minute p50 latency."),
            ("prism_provider_latency_p99_seconds", "Rolling 5-minute p99 latency."),
        ];
        for (g, (name, help)) in gauges.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (n, net) in config.networks.iter().enumerate() {
                let live = &self.lives[n];
                let health = live.health.load();
                let best = live.heads.best_head.load(Ordering::Relaxed);
                for (i, p) in ProviderId::all(net.providers.len()).zip(&net.providers) {
                    if p.retired {
                        continue;
                    }
                    let pl = live.slot(i);
                    let h = health.providers.get(i.index()).cloned().unwrap_or_default();
                    let head = pl.heads.head.load(Ordering::Relaxed);
                    let v: f64 = match g {
                        0 => match live.describe(i, now) {
                            "closed" | "parked" => 0.0,
                            "open" => 1.0,
                            "half-open" => 2.0,
                            _ => 3.0,
                        },
                        1 => head as f64,
                        2 => best.saturating_sub(head) as f64,
                        3 => h.share,
                        4 => h.overall.p50_us as f64 / 1e6,
                        _ => h.overall.p99_us as f64 / 1e6,
                    };
                    let mut l = String::new();
                    metrics::label(&mut l, &p.name);
                    let _ = writeln!(out, "{name}{{network=\"{}\",provider=\"{l}\"}} {v}", net.name);
                }
            }
        }
    }
}
