//! The admin listener (shard 0): `/metrics` (Prometheus text), `/status` (JSON), `/` (the HTML status page),
//! `/healthz` (alive) and `/readyz` (every served network has a usable provider). Read-only views of the
//! shared state; nothing here is on the request path.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures_lite::AsyncWriteExt;

use super::http::{parse_head, Method};
use super::keys::KeyRing;
use super::reply::{write_http, ResponseMeta};
use crate::config::{Config, NetworkKind};
use crate::core::state::NetworkLive;
use crate::http1::ReadBuf;
use crate::rpc::methods::Finality;
use crate::rpc::ProviderId;
use crate::runtime::net::{TcpListener, TcpStream};
use crate::runtime::{spawn, timeout_at, Shutdown};
use crate::telemetry::clock::now_ms;
use crate::telemetry::metrics::{self, ShardMetrics};

/// Everything the admin endpoints show, shared read-only.
pub struct AdminView {
    pub cluster: Option<Arc<crate::cluster::ClusterState>>,
    /// The running config: providers by slot, those a reload removed marked `retired` (not shown).
    pub config: Arc<ArcSwap<Config>>,
    pub lives: Vec<Arc<NetworkLive>>,
    pub metrics: Vec<Arc<ShardMetrics>>,
    pub keys: Arc<ArcSwap<KeyRing>>,
    pub open_connections: Arc<AtomicUsize>,
    pub started: Instant,
    /// Config reloads (`POST /reload`), when the node was started from a config file.
    pub reloader: Option<Arc<dyn Reload>>,
    /// Node-wide rates the health aggregator derives (`telemetry::totals`), for the status page.
    pub totals: Arc<arc_swap::ArcSwap<crate::telemetry::totals::Totals>>,
    /// Each solana-magic network's shared state, by network index (`None` for EVM networks).
    pub solana: Vec<Option<Arc<crate::solana::SolanaNet>>>,
}

/// How a config reload went: for the log, `/status` and `prism reload`'s exit status.
#[derive(Debug, Clone)]
pub struct ReloadOutcome {
    pub applied: bool,
    /// The generation running afterwards (unchanged when refused).
    pub generation: u64,
    /// Wall-clock ms when it finished.
    pub at_ms: u64,
    /// What happened, or why the file was refused (and what needs a restart).
    pub message: String,
    /// One line per provider or key change.
    pub changes: Vec<String>,
}

impl ReloadOutcome {
    pub fn to_json(&self) -> String {
        let changes: Vec<String> = self.changes.iter().map(|c| json_str(c)).collect();
        format!(
            "{{\"applied\":{},\"generation\":{},\"at_ms\":{},\"message\":{},\"changes\":[{}]}}",
            self.applied,
            self.generation,
            self.at_ms,
            json_str(&self.message),
            changes.join(",")
        )
    }
}

/// Re-reads the config file and applies it, or refuses it whole (implemented by the composition root).
pub trait Reload: Send + Sync {
    /// Blocks until every shard runs the new generation (or the file is refused).
    fn reload(&self) -> ReloadOutcome;
    /// The last reload's outcome, if any.
    fn last(&self) -> Option<ReloadOutcome>;
}

const STATUS_PAGE: &str = include_str!("status_page.html");

/// Serves admin requests until shutdown.
pub async fn serve_admin(listener: TcpListener, view: Arc<AdminView>, shutdown: Shutdown) {
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            shutdown.triggered().await;
            None
        })
        .await;
        match accepted {
            None => return,
            Some(Ok(stream)) => {
                let view = view.clone();
                let shutdown = shutdown.clone();
                spawn(async move { admin_connection(stream, &view, &shutdown).await });
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "admin accept failed");
                crate::runtime::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn admin_connection(mut stream: TcpStream, view: &AdminView, shutdown: &Shutdown) {
    let mut buf = ReadBuf::with_capacity(4096);
    loop {
        let until = Instant::now() + Duration::from_secs(30);
        let head = loop {
            match parse_head(buf.filled(), 16 * 1024) {
                Ok(Some(h)) => break h,
                Ok(None) => {}
                Err(_) => return,
            }
            let read = futures_lite::future::or(
                async { Some(timeout_at(until, buf.read_from(&mut stream, 4096)).await) },
                async {
                    shutdown.triggered().await;
                    None
                },
            )
            .await;
            match read {
                Some(Ok(Ok(n))) if n > 0 => {}
                _ => return,
            }
        };
        buf.consume(head.len);
        // Admin requests carry no body; a client that sends one is not ours to serve.
        if head.content_length.unwrap_or(0) > 0 || head.chunked {
            return;
        }
        let mut out = Vec::new();
        let get = matches!(head.method, Some(Method::Get | Method::Head));
        let (status, ctype, body) = if head.method == Some(Method::Post) && head.path == "/reload" {
            reload(view).await
        } else if !get {
            (405, "text/plain", b"GET only (and POST /reload)\n".to_vec())
        } else {
            match head.path.as_str() {
                "/metrics" => (
                    200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    view.metrics_text().into_bytes(),
                ),
                "/status" => (200, "application/json", view.status_json().into_bytes()),
                "/" | "/index.html" => (200, "text/html; charset=utf-8", STATUS_PAGE.as_bytes().to_vec()),
                "/healthz" => (200, "text/plain", b"ok\n".to_vec()),
                "/readyz" => match view.unready() {
                    None => (200, "text/plain", b"ready\n".to_vec()),
                    Some(why) => (503, "text/plain", format!("not ready: {why}\n").into_bytes()),
                },
                _ => (404, "text/plain", b"not found\n".to_vec()),
            }
        };
        let meta = ResponseMeta {
            keep_alive: head.keep_alive,
            content_type: Some(ctype),
            omit_body: head.method == Some(Method::Head),
            extra: &["Cache-Control: no-store"],
            ..Default::default()
        };
        write_http(&mut out, status, &body, &meta);
        if stream.write_all(&out).await.is_err() || !head.keep_alive {
            return;
        }
    }
}

/// `POST /reload`: runs the reload on a thread of its own (it reads the file, resolves names and waits for
/// every shard, this one included, to take the new generation), and answers with its outcome: 200 when
/// applied, 422 when refused.
async fn reload(view: &AdminView) -> (u16, &'static str, Vec<u8>) {
    let Some(reloader) = view.reloader.clone() else {
        return (
            404,
            "text/plain",
            b"no config file to reload (this node was not started with `prism serve --config`)\n".to_vec(),
        );
    };
    let slot: Arc<std::sync::Mutex<Option<ReloadOutcome>>> = Default::default();
    let result = slot.clone();
    let started = std::thread::Builder::new().name("prism-reload".into()).spawn(move || {
        let outcome = reloader.reload();
        *result.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    });
    if started.is_err() {
        return (503, "text/plain", b"cannot start the reload\n".to_vec());
    }
    loop {
        if let Some(outcome) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let status = if outcome.applied { 200 } else { 422 };
            return (status, "application/json", outcome.to_json().into_bytes());
        }
        crate::runtime::sleep(Duration::from_millis(2)).await;
    }
}

impl AdminView {
    /// `None` when every served network has at least one usable provider.
    pub fn unready(&self) -> Option<String> {
        let now = now_ms();
        let config = self.config.load();
        for (n, net) in config.networks.iter().enumerate() {
            if net.kind != NetworkKind::Evm {
                continue;
            }
            let live = &self.lives[n];
            let usable = ProviderId::all(live.providers().len()).any(|i| {
                live.admissible(i) && live.providers()[i].breaker.is_closed() && !live.providers()[i].is_parked(now)
            });
            if !usable {
                return Some(format!("network {} has no usable provider", net.name));
            }
        }
        None
    }

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
        let _ = writeln!(out, "# HELP prism_provider_outlier_heads_total Heads reported that the chain cannot be at (beyond what time allows, or far above the other providers); the provider is excluded as an outlier meanwhile.\n# TYPE prism_provider_outlier_heads_total counter");
        for (n, net) in config.networks.iter().enumerate() {
            for (i, p) in net.providers.iter().enumerate().filter(|(_, p)| !p.retired) {
                let mut l = String::new();
                metrics::label(&mut l, &p.name);
                let v = self.lives[n]
                    .slot(ProviderId::new(i))
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
                let best = live.best_head.load(Ordering::Relaxed);
                for (i, p) in ProviderId::all(net.providers.len()).zip(&net.providers) {
                    if p.retired {
                        continue;
                    }
                    let pl = live.slot(i);
                    let h = health.providers.get(i.index()).cloned().unwrap_or_default();
                    let head = pl.head.load(Ordering::Relaxed);
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

    /// The provider table: what `/status`, the status page and the demo's terminal table show.
    pub fn table(&self) -> Vec<NetworkRows> {
        let now = now_ms();
        let config = self.config.load();
        config
            .networks
            .iter()
            .enumerate()
            .map(|(n, net)| {
                let live = &self.lives[n];
                let health = live.health.load();
                let best = live.best_head.load(Ordering::Relaxed);
                let providers = net
                    .providers
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !p.retired)
                    .map(|(i, p)| {
                        let i = ProviderId::new(i);
                        let h = health.providers.get(i.index()).cloned().unwrap_or_default();
                        let head = live.slot(i).head.load(Ordering::Relaxed);
                        ProviderRow {
                            slot: i.index(),
                            name: p.name.clone(),
                            region: p.region.clone(),
                            state: live.describe(i, now),
                            head,
                            // A provider that never reported a head has no drift to show.
                            lag: if head == 0 { 0 } else { best.saturating_sub(head) },
                            p50_ms: h.overall.p50_us as f64 / 1000.0,
                            p99_ms: h.overall.p99_us as f64 / 1000.0,
                            success: if h.overall.calls == 0 {
                                1.0
                            } else {
                                1.0 - h.overall.error_rate()
                            },
                            share: h.share,
                            calls: h.overall.calls,
                            failures: h.overall.failures,
                            throttled: h.throttled,
                            cooldown_ms: live.slot(i).breaker.cooldown_ms(),
                            overflow: p.overflow,
                            outlier_heads: live.slot(i).outlier_heads.load(Ordering::Relaxed),
                            claimed_head: live.slot(i).claimed_head.load(Ordering::Relaxed),
                            badge: "",
                            badge_reason: String::new(),
                            floor_block: live.slot(i).floor.get(),
                            safe_head: live.slot(i).tags.get(Finality::Safe),
                            finalized_head: live.slot(i).tags.get(Finality::Finalized),
                            slot_ms: live.slot(i).clock.per_slot_us() as f64 / 1000.0,
                            stall_after_ms: live.stall_after_ms(i),
                        }
                    })
                    .collect::<Vec<_>>();
                let mut providers = providers;
                self.set_badges(n, &mut providers);
                NetworkRows {
                    name: net.name.clone(),
                    kind: match net.kind {
                        NetworkKind::Evm => "evm",
                        NetworkKind::SolanaMagic => "solana-magic",
                    },
                    best_head: best,
                    providers,
                }
            })
            .collect()
    }

    pub fn status_json(&self) -> String {
        let mut out = String::with_capacity(4096);
        let _ = write!(
            out,
            r#"{{"service":"prism","version":"{}","uptimeSeconds":{},"openConnections":{},"networks":["#,
            env!("CARGO_PKG_VERSION"),
            self.started.elapsed().as_secs(),
            self.open_connections.load(Ordering::Relaxed)
        );
        for (n, net) in self.table().iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                r#"{{"name":{},"kind":"{}","bestHead":{},"providers":["#,
                json_str(&net.name),
                net.kind,
                net.best_head
            );
            for (i, r) in net.providers.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(
                    out,
                    r#"{{"name":{},"region":{},"state":"{}","head":{},"lag":{},"p50Ms":{:.2},"p99Ms":{:.2},"success":{:.5},"share":{:.4},"calls":{},"failures":{},"throttled":{},"cooldownMs":{},"overflow":{},"outlierHeads":{},"claimedHead":{}"#,
                    json_str(&r.name),
                    r.region.as_deref().map_or("null".to_string(), json_str),
                    r.state,
                    r.head,
                    r.lag,
                    r.p50_ms,
                    r.p99_ms,
                    r.success,
                    r.share,
                    r.calls,
                    r.failures,
                    r.throttled,
                    r.cooldown_ms,
                    r.overflow,
                    r.outlier_heads,
                    r.claimed_head,
                );
                self.write_provider_board(&mut out, n, r.slot, r);
                let _ = write!(
                    out,
                    r#","floorBlock":{},"safeHead":{},"finalizedHead":{}"#,
                    r.floor_block, r.safe_head, r.finalized_head
                );
                if net.kind == "solana-magic" {
                    let _ = write!(out, r#","slotMs":{:.1},"stallAfterMs":{}"#, r.slot_ms, r.stall_after_ms);
                }
                out.push('}');
            }
            out.push(']');
            self.write_network_board(&mut out, n);
            let tags = &self.lives[n].tags;
            let _ = write!(
                out,
                r#","safe":{},"finalized":{}"#,
                tags.agreed(Finality::Safe),
                tags.agreed(Finality::Finalized)
            );
            out.push('}');
        }
        out.push(']');
        self.write_totals(&mut out);
        if let Some(c) = &self.cluster {
            let lag = c.lag_ms();
            let _ = write!(
                out,
                r#","cluster":{{"node":"{}","connected":{},"syncLagMs":{},"redisErrors":{},"refused":{},"peers":["#,
                c.node_id,
                c.connected.load(Ordering::Relaxed),
                if lag == u64::MAX {
                    "null".to_string()
                } else {
                    lag.to_string()
                },
                c.errors.load(Ordering::Relaxed),
                c.refused.load(Ordering::Relaxed)
            );
            for (i, p) in c.peers.load().iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let open: Vec<String> = p.open.iter().map(|o| json_str(o)).collect();
                let _ = write!(
                    out,
                    r#"{{"node":{},"open":[{}],"bestHeads":{:?}}}"#,
                    json_str(&p.id),
                    open.join(","),
                    p.best_heads
                );
            }
            out.push_str("]}");
        }
        let last = self.reloader.as_ref().and_then(|r| r.last());
        let _ = write!(
            out,
            r#","reload":{{"enabled":{},"last":{}}}"#,
            self.reloader.is_some(),
            last.map_or("null".to_string(), |o| o.to_json())
        );
        out.push('}');
        out
    }
}

/// One network's rows of the provider table.
#[derive(Debug, Clone)]
pub struct NetworkRows {
    pub name: String,
    pub kind: &'static str,
    pub best_head: u64,
    pub providers: Vec<ProviderRow>,
}

/// One provider as operators see it. Rolling figures are over the last 5 minutes.
#[derive(Debug, Clone)]
pub struct ProviderRow {
    /// The provider's slot (`ProviderId`): where its figures are kept.
    pub slot: usize,
    pub name: String,
    pub region: Option<String>,
    pub state: &'static str,
    pub head: u64,
    pub lag: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub success: f64,
    pub share: f64,
    pub calls: u64,
    pub failures: u64,
    pub throttled: u64,
    pub cooldown_ms: u64,
    pub overflow: bool,
    /// Implausible heads reported so far, and the last one (0 = none).
    pub outlier_heads: u64,
    pub claimed_head: u64,
    /// "green", "amber" or "red" (`telemetry::badge`), and why.
    pub badge: &'static str,
    pub badge_reason: String,
    /// The lowest block it has (declared `floor_block` or learned; 0 = archive) and its `safe` /
    /// `finalized` blocks (0 = not known or not served).
    pub floor_block: u64,
    pub safe_head: u64,
    pub finalized_head: u64,
    /// Solana: its cadence as its probes show it (ms per slot, 0 = not known yet), and how long its slot
    /// may stand still before it is `stalled` (0 = the check is off; see `core::slots`).
    pub slot_ms: f64,
    pub stall_after_ms: u64,
}

pub(super) fn json_str(s: &str) -> String {
    let mut v = Vec::new();
    crate::rpc::wire::write_json_str(&mut v, s);
    String::from_utf8(v).unwrap_or_default()
}
