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
use prism_config::{Config, NetworkKind};
use prism_core::live::state::NetworkLive;
use prism_runtime::net::{TcpListener, TcpStream};
use prism_runtime::{spawn, timeout_at, Shutdown};
use prism_telemetry::clock::now_ms;
use prism_telemetry::metrics::{self, ShardMetrics};
use prism_telemetry::status::{
    round, ClusterStatus, CordonStatus, LastError, NetworkStatus, PeerStatus, ProviderStatus, ReloadStatus, StatusDoc,
};
use prism_wire::http1::ReadBuf;
use prism_wire::rpc::methods::Finality;
use prism_wire::rpc::ProviderId;

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
    pub totals: Arc<arc_swap::ArcSwap<prism_telemetry::totals::Totals>>,
    /// Each solana-magic network's shared state, by network index (`None` for EVM networks).
    pub solana: Vec<Option<Arc<prism_solana::SolanaNet>>>,
}

pub use prism_telemetry::status::ReloadOutcome;

/// Re-reads the config file and applies it, or refuses it whole (implemented by the composition root).
pub trait Reload: Send + Sync {
    /// Blocks until every shard runs the new generation (or the file is refused).
    fn reload(&self) -> ReloadOutcome;
    /// The last reload's outcome, if any.
    fn last(&self) -> Option<ReloadOutcome>;
}

const STATUS_PAGE: &str = include_str!("status_page.html");

/// Serves admin requests until shutdown. `POST /reload` and `POST /providers/{name}/cordon` (`/uncordon`)
/// change the node: they need the `[admin] token` when one is set, else a loopback peer.
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
                prism_runtime::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Largest body an admin request may carry (a cordon's reason).
const MAX_ADMIN_BODY: usize = 4096;

async fn admin_connection(mut stream: TcpStream, view: &AdminView, shutdown: &Shutdown) {
    let loopback = stream.peer_addr().is_ok_and(|a| a.ip().is_loopback());
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
        // A body only for a POST, small and with a length (a cordon's reason); anything else is not ours.
        let length = head.content_length.unwrap_or(0);
        if head.chunked || length > MAX_ADMIN_BODY || (length > 0 && head.method != Some(Method::Post)) {
            return;
        }
        while buf.filled().len() < length {
            match timeout_at(until, buf.read_from(&mut stream, 4096)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
        }
        let body = String::from_utf8_lossy(&buf.filled()[..length]).into_owned();
        buf.consume(length);
        let mut out = Vec::new();
        let get = matches!(head.method, Some(Method::Get | Method::Head));
        let (status, ctype, body) = if head.method == Some(Method::Post) {
            match mutation_allowed(view, loopback, head.api_key.as_deref()) {
                Err(refusal) => refusal,
                Ok(()) if head.path == "/reload" => reload(view).await,
                Ok(()) => match cordon_target(&head.path) {
                    Some((name, on)) => view.cordon(name, on, body.trim()),
                    None => (404, "text/plain", b"not found\n".to_vec()),
                },
            }
        } else if !get {
            (
                405,
                "text/plain",
                b"GET only (and POST /reload, /providers/{name}/cordon, /providers/{name}/uncordon)\n".to_vec(),
            )
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
            extra: if status == 401 {
                &[
                    "Cache-Control: no-store",
                    "WWW-Authenticate: Bearer realm=\"prism admin\"",
                ]
            } else {
                &["Cache-Control: no-store"]
            },
            ..Default::default()
        };
        write_http(&mut out, status, &body, &meta);
        if stream.write_all(&out).await.is_err() || !head.keep_alive {
            return;
        }
    }
}

type Answer = (u16, &'static str, Vec<u8>);

/// Mutating endpoints need `[admin] token` as `Authorization: Bearer` when one is configured; without
/// one, only loopback peers may use them (the admin listener stays loopback by default).
fn mutation_allowed(view: &AdminView, loopback: bool, presented: Option<&[u8]>) -> Result<(), Answer> {
    let config = view.config.load();
    let access = &config.admin;
    if access.resolved.is_some() {
        if access.accepts(presented) {
            return Ok(());
        }
        return Err((
            401,
            "text/plain",
            b"this endpoint needs the admin token ([admin] token) as Authorization: Bearer\n".to_vec(),
        ));
    }
    if loopback {
        return Ok(());
    }
    Err((
        403,
        "text/plain",
        b"mutating admin endpoints answer only loopback peers unless [admin] token is set\n".to_vec(),
    ))
}

/// `/providers/{name}/cordon` or `/uncordon`: the name and whether to cordon.
fn cordon_target(path: &str) -> Option<(&str, bool)> {
    let rest = path.strip_prefix("/providers/")?;
    let (name, action) = rest.rsplit_once('/')?;
    let on = match action {
        "cordon" => true,
        "uncordon" => false,
        _ => return None,
    };
    (!name.is_empty() && !name.contains('/')).then_some((name, on))
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
    // Not a shard: taken once by the reload thread, then polled without blocking.
    #[allow(clippy::disallowed_types, reason = "not a shard thread")]
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
        prism_runtime::sleep(Duration::from_millis(2)).await;
    }
}

impl AdminView {
    /// Cordons (or uncordons) every provider named `name` (in each network that has one): out of routing at
    /// once, with `reason` shown in `/status` and on the page. 404 when no provider has that name.
    pub fn cordon(&self, name: &str, on: bool, reason: &str) -> Answer {
        let config = self.config.load();
        let mut hit = Vec::new();
        for (n, net) in config.networks.iter().enumerate() {
            for (i, p) in net.providers.iter().enumerate() {
                if p.retired || p.name != name {
                    continue;
                }
                let slot = self.lives[n].slot(ProviderId::new(i));
                let reason = if reason.is_empty() { "no reason given" } else { reason };
                let changed = if on {
                    slot.cordon.set(reason, wall_ms())
                } else {
                    slot.cordon.clear()
                };
                let what = if on { "cordoned" } else { "uncordoned" };
                tracing::warn!(network = %net.name, provider = %name, reason, changed, "provider {what} by an operator");
                hit.push(
                    serde_json::json!({"network": net.name, "provider": name, "cordoned": on, "changed": changed}),
                );
            }
        }
        if hit.is_empty() {
            return (
                404,
                "application/json",
                serde_json::json!({"error": format!("no provider named {name:?}")})
                    .to_string()
                    .into_bytes(),
            );
        }
        (
            200,
            "application/json",
            serde_json::json!({"providers": hit}).to_string().into_bytes(),
        )
    }

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

    /// One network's providers as `/status`, the status page and the terminal tables show them.
    pub fn network_status(&self, n: usize, net: &prism_config::Network) -> NetworkStatus {
        let now = now_ms();
        let wall = wall_ms();
        let live = &self.lives[n];
        let health = live.health.load();
        let best = live.heads.best_head.load(Ordering::Relaxed);
        let mut slots = Vec::new();
        let solana = net.kind == NetworkKind::SolanaMagic;
        let mut providers: Vec<ProviderStatus> = net
            .providers
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.retired)
            .map(|(i, p)| {
                slots.push(i);
                let i = ProviderId::new(i);
                let pl = live.slot(i);
                let h = health.providers.get(i.index()).cloned().unwrap_or_default();
                let head = pl.heads.head.load(Ordering::Relaxed);
                let last_error = pl.causes.last(now).map(|c| LastError {
                    reason: c.reason.as_str().to_string(),
                    hint: c.reason.hint().map(str::to_string),
                    at_unix_ms: wall.saturating_sub(now.saturating_sub(c.at_ms)),
                    ago_s: now.saturating_sub(c.at_ms) / 1000,
                    by: if c.probe { "probe" } else { "client" }.to_string(),
                    last_minute: c.last_minute,
                });
                ProviderStatus {
                    name: p.name.clone(),
                    region: p.region.clone(),
                    state: live.describe(i, now).to_string(),
                    head,
                    // A provider that never reported a head has no drift to show.
                    lag: if head == 0 { 0 } else { best.saturating_sub(head) },
                    p50_ms: round(h.overall.p50_us as f64 / 1000.0, 2),
                    p99_ms: round(h.overall.p99_us as f64 / 1000.0, 2),
                    success: round(
                        if h.overall.calls == 0 {
                            1.0
                        } else {
                            1.0 - h.overall.error_rate()
                        },
                        5,
                    ),
                    share: round(h.share, 4),
                    calls: h.overall.calls,
                    failures: h.overall.failures,
                    probes: h.overall.probes,
                    throttled: h.throttled,
                    cooldown_ms: pl.breaker.cooldown_ms(),
                    overflow: p.overflow,
                    outlier_heads: pl.heads.outlier_heads.load(Ordering::Relaxed),
                    claimed_head: pl.heads.claimed_head.load(Ordering::Relaxed),
                    floor_block: pl.floor.get(),
                    safe_head: pl.tags.get(Finality::Safe),
                    finalized_head: pl.tags.get(Finality::Finalized),
                    last_error,
                    errors_last_minute: pl
                        .causes
                        .minute_counts(now)
                        .into_iter()
                        .map(|(r, c)| (r.as_str().to_string(), c))
                        .collect(),
                    cordon: pl.cordon.note().map(|c| CordonStatus {
                        reason: c.reason,
                        since_unix_ms: c.since_unix_ms,
                    }),
                    slot_ms: solana.then(|| round(pl.slots.clock.per_slot_us() as f64 / 1000.0, 1)),
                    stall_after_ms: solana.then(|| live.stall_after_ms(i)),
                    ..Default::default()
                }
            })
            .collect();
        self.set_badges(n, &slots, &mut providers);
        for (row, &slot) in providers.iter_mut().zip(&slots) {
            self.fill_board(n, slot, row);
        }
        let tags = &live.tags;
        let mut out = NetworkStatus {
            name: net.name.clone(),
            kind: match net.kind {
                NetworkKind::Evm => "evm",
                NetworkKind::SolanaMagic => "solana-magic",
            }
            .to_string(),
            best_head: best,
            providers,
            safe: tags.agreed(Finality::Safe),
            finalized: tags.agreed(Finality::Finalized),
            ..Default::default()
        };
        self.fill_network_board(n, net, &mut out);
        out
    }

    /// `GET /status`, typed: the same value `prism status` reads back.
    pub fn status_doc(&self) -> StatusDoc {
        let config = self.config.load();
        StatusDoc {
            service: "prism".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            commit: prism_telemetry::build::COMMIT.into(),
            uptime_seconds: self.started.elapsed().as_secs(),
            open_connections: self.open_connections.load(Ordering::Relaxed) as u64,
            networks: config
                .networks
                .iter()
                .enumerate()
                .map(|(n, net)| self.network_status(n, net))
                .collect(),
            totals: self.totals_status(),
            cluster: self.cluster.as_ref().map(|c| {
                let lag = c.lag_ms();
                ClusterStatus {
                    node: c.node_id.clone(),
                    connected: c.connected.load(Ordering::Relaxed),
                    sync_lag_ms: (lag != u64::MAX).then_some(lag),
                    redis_errors: c.errors.load(Ordering::Relaxed),
                    refused: c.refused.load(Ordering::Relaxed),
                    peers: c
                        .peers
                        .load()
                        .iter()
                        .map(|p| PeerStatus {
                            node: p.id.clone(),
                            open: p.open.clone(),
                            best_heads: p.best_heads.clone(),
                        })
                        .collect(),
                }
            }),
            reload: ReloadStatus {
                enabled: self.reloader.is_some(),
                last: self.reloader.as_ref().and_then(|r| r.last()),
            },
        }
    }

    pub fn status_json(&self) -> String {
        serde_json::to_string(&self.status_doc()).unwrap_or_default()
    }
}

/// Wall-clock ms since the Unix epoch.
pub(super) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
