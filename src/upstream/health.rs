//! The health aggregator: one thread that merges the shards' deltas into 5-minute sliding windows per
//! provider and latency family, and publishes an immutable `NetworkHealth` snapshot for every shard to
//! read lock-free. Breakers do not wait for it: they are shared atomics that shards update at once.

use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};

use crate::core::state::NetworkLive;
use crate::rpc::methods::Family;
use crate::runtime::Shutdown;
use crate::telemetry::clock::now_ms;
use crate::telemetry::recorder::Delta;
use crate::telemetry::snapshot::{NetworkHealth, ProviderHealth};
use crate::telemetry::window::Window;

/// How often a fresh snapshot is published.
const PUBLISH_EVERY: Duration = Duration::from_millis(200);

struct ProviderWindows {
    overall: Window,
    families: Vec<Window>,
    recent: Window,
}

impl ProviderWindows {
    fn new() -> Self {
        ProviderWindows {
            overall: Window::five_minutes(),
            families: Family::ALL.iter().map(|_| Window::five_minutes()).collect(),
            recent: Window::new(5_000, 5),
        }
    }
}

/// Starts the aggregator thread. Returns the sender shards use.
pub fn spawn_aggregator(networks: Vec<Arc<NetworkLive>>, shutdown: Shutdown) -> Sender<Vec<Delta>> {
    let (tx, rx) = crossbeam::channel::unbounded::<Vec<Delta>>();
    std::thread::Builder::new()
        .name("prism-health".into())
        .spawn(move || run(networks, rx, shutdown))
        .expect("spawn health aggregator");
    tx
}

fn run(networks: Vec<Arc<NetworkLive>>, rx: Receiver<Vec<Delta>>, shutdown: Shutdown) {
    let mut windows: Vec<Vec<ProviderWindows>> = networks
        .iter()
        .map(|n| (0..n.providers().len()).map(|_| ProviderWindows::new()).collect())
        .collect();
    let mut next_publish = std::time::Instant::now();
    while !shutdown.is_triggered() {
        match rx.recv_timeout(PUBLISH_EVERY) {
            Ok(batch) => {
                grow(&networks, &mut windows);
                let now = now_ms();
                for d in batch {
                    if let Some(w) = windows.get_mut(d.network).and_then(|n| n.get_mut(d.provider.index())) {
                        w.overall.add(now, &d.sample);
                        w.families[d.family as usize].add(now, &d.sample);
                        w.recent.add(now, &d.sample);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if std::time::Instant::now() >= next_publish {
            next_publish = std::time::Instant::now() + PUBLISH_EVERY;
            let now = now_ms();
            grow(&networks, &mut windows);
            for (n, net) in networks.iter().enumerate() {
                net.health.store(Arc::new(build(&mut windows[n], now)));
            }
        }
    }
}

/// A reload that added providers gave their network more slots: they get windows of their own.
fn grow(networks: &[Arc<NetworkLive>], windows: &mut [Vec<ProviderWindows>]) {
    for (net, w) in networks.iter().zip(windows.iter_mut()) {
        while w.len() < net.providers().len() {
            w.push(ProviderWindows::new());
        }
    }
}

fn build(windows: &mut [ProviderWindows], now: u64) -> NetworkHealth {
    let mut providers: Vec<ProviderHealth> = windows
        .iter_mut()
        .map(|w| {
            let mut h = ProviderHealth {
                overall: w.overall.figures(now),
                recent_rps: w.recent.rate(now),
                throttled: w.overall.throttled(),
                ..Default::default()
            };
            for (i, fw) in w.families.iter_mut().enumerate() {
                h.by_family[i] = fw.figures(now);
            }
            h
        })
        .collect();
    let total: u64 = providers.iter().map(|p| p.overall.calls).sum();
    if total > 0 {
        for p in &mut providers {
            p.share = p.overall.calls as f64 / total as f64;
        }
    }
    NetworkHealth {
        providers,
        built_at_ms: now,
    }
}
