//! The admin listener (shard 0): `/metrics` (Prometheus text), `/status` (JSON), `/` (the HTML status page),
//! `/healthz` (alive) and `/readyz` (every served network has a usable provider). Read-only views of the
//! shared state; nothing here is on the request path. This file is the listener, its routes and the
//! mutating endpoints; the documents it serves are built in `admin_metrics.rs` (`/metrics`),
//! `admin_status.rs` (`/status`) and `status_board.rs` (what the page draws).

use std::sync::atomic::AtomicUsize;
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
use prism_telemetry::metrics::ShardMetrics;
use prism_wire::http1::ReadBuf;
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
}

/// Wall-clock ms since the Unix epoch.
pub(super) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
