//! `GET /status` of the admin listener, typed ([`StatusDoc`], the same value `prism status` reads back):
//! each network's providers as the status page and the terminal tables show them, the cluster and the
//! last reload. Only reads atomics and snapshots; what the page draws beyond the table is `status_board.rs`.

use std::sync::atomic::Ordering;

use super::admin::{wall_ms, AdminView};
use prism_config::NetworkKind;
use prism_core::live::state::NetworkLive;
use prism_telemetry::clock::now_ms;
use prism_telemetry::snapshot::NetworkHealth;
use prism_telemetry::status::{
    round, BlocksStatus, BoardStatus, ChainPosition, ClusterStatus, CordonStatus, ErrorsStatus, LastError,
    NetworkStatus, PeerStatus, ProviderStatus, ReloadStatus, RoutingStatus, SolanaCadence, StatusDoc, TrafficStatus,
};
use prism_wire::rpc::methods::Finality;
use prism_wire::rpc::ProviderId;

impl AdminView {
    /// One network's providers as `/status`, the status page and the terminal tables show them.
    pub fn network_status(&self, n: usize, net: &prism_config::Network) -> NetworkStatus {
        let now = now_ms();
        let wall = wall_ms();
        let live = &self.lives[n];
        let health = live.health.load();
        let best = live.heads.best_head.load(Ordering::Relaxed);
        let read = NetworkRead {
            live,
            health: &health,
            best,
            solana: net.kind == NetworkKind::SolanaMagic,
            now,
            wall,
        };
        let mut slots = Vec::new();
        let mut providers: Vec<ProviderStatus> = net
            .providers
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.retired)
            .map(|(i, p)| {
                slots.push(i);
                read.provider(ProviderId::new(i), p)
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

/// One network's live state as `/status` reads it once for all its rows: its health snapshot, best head,
/// kind and the clocks.
struct NetworkRead<'a> {
    live: &'a NetworkLive,
    health: &'a NetworkHealth,
    best: u64,
    /// A solana-magic network: its rows show their slot cadence.
    solana: bool,
    /// Process-clock ms (`telemetry::clock`), and the wall clock at the same moment.
    now: u64,
    wall: u64,
}

// === impl NetworkRead ===

impl NetworkRead<'_> {
    /// Provider `i`'s row, but for what `status_board.rs` fills in (badge, last minute, series).
    fn provider(&self, i: ProviderId, p: &prism_config::Provider) -> ProviderStatus {
        let NetworkRead {
            live,
            health,
            best,
            solana,
            now,
            wall,
        } = *self;
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
            chain: ChainPosition {
                head,
                // A provider that never reported a head has no drift to show.
                lag: if head == 0 { 0 } else { best.saturating_sub(head) },
            },
            traffic: TrafficStatus {
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
            },
            routing: RoutingStatus {
                cooldown_ms: pl.breaker.cooldown_ms(),
                overflow: p.overflow,
                outlier_heads: pl.heads.outlier_heads.load(Ordering::Relaxed),
                claimed_head: pl.heads.claimed_head.load(Ordering::Relaxed),
            },
            // The badge, the last minute and the series: `status_board.rs` fills them in.
            board: BoardStatus::default(),
            blocks: BlocksStatus {
                floor_block: pl.floor.get(),
                safe_head: pl.tags.get(Finality::Safe),
                finalized_head: pl.tags.get(Finality::Finalized),
            },
            errors: ErrorsStatus {
                last_error,
                errors_last_minute: pl
                    .causes
                    .minute_counts(now)
                    .into_iter()
                    .map(|(r, c)| (r.as_str().to_string(), c))
                    .collect(),
            },
            cordon: pl.cordon.note().map(|c| CordonStatus {
                reason: c.reason,
                since_unix_ms: c.since_unix_ms,
            }),
            solana: SolanaCadence {
                slot_ms: solana.then(|| round(pl.slots.clock.per_slot_us() as f64 / 1000.0, 1)),
                stall_after_ms: solana.then(|| live.stall_after_ms(i)),
            },
        }
    }
}
