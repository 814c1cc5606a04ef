//! The health aggregator: one thread that merges the shards' deltas into 5-minute sliding windows per
//! provider and latency family, and publishes an immutable `NetworkHealth` snapshot for every shard to
//! read lock-free. Breakers do not wait for it: they are shared atomics that shards update at once.
//! It also keeps what the status page draws (`telemetry::history`: a point per provider every 10 s, the
//! timeline of state changes seen at each publish) and samples the shards' counters into node-wide rates
//! (`telemetry::totals`).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};

use prism_core::live::state::NetworkLive;
use prism_runtime::Shutdown;
use prism_telemetry::clock::now_ms;
use prism_telemetry::history::{NetworkHistory, Ticker, POINT_MS};
use prism_telemetry::metrics::{Counters, ShardMetrics};
use prism_telemetry::recorder::Delta;
use prism_telemetry::snapshot::{NetworkHealth, ProviderHealth};
use prism_telemetry::totals::Totals;
use prism_telemetry::window::{Interval, Window};
use prism_wire::rpc::methods::Family;
use prism_wire::rpc::ProviderId;

/// How often a fresh snapshot is published.
const PUBLISH_EVERY: Duration = Duration::from_millis(200);

struct ProviderWindows {
    overall: Window,
    families: Vec<Window>,
    recent: Window,
    /// The last minute, in 5-s buckets: the status page's badge.
    minute: Window,
    /// Samples since the last history point.
    interval: Interval,
}

impl ProviderWindows {
    fn new() -> Self {
        ProviderWindows {
            overall: Window::five_minutes(),
            families: Family::ALL.iter().map(|_| Window::five_minutes()).collect(),
            recent: Window::new(5_000, 5),
            minute: Window::new(60_000, 12),
            interval: Interval::default(),
        }
    }
}

/// What the aggregator reads besides deltas, and where it puts the node-wide totals.
pub struct Inputs {
    pub networks: Vec<Arc<NetworkLive>>,
    /// Every shard's counters, sampled once per history point.
    pub metrics: Vec<Arc<ShardMetrics>>,
    pub totals: Arc<ArcSwap<Totals>>,
}

/// Starts the aggregator thread. Returns the sender shards use.
pub fn spawn_aggregator(inputs: Inputs, shutdown: Shutdown) -> Sender<Vec<Delta>> {
    let (tx, rx) = crossbeam::channel::unbounded::<Vec<Delta>>();
    std::thread::Builder::new()
        .name("prism-health".into())
        .spawn(move || run(inputs, rx, shutdown))
        .expect("spawn health aggregator");
    tx
}

fn run(inputs: Inputs, rx: Receiver<Vec<Delta>>, shutdown: Shutdown) {
    let networks = &inputs.networks;
    let mut windows: Vec<Vec<ProviderWindows>> = networks
        .iter()
        .map(|n| (0..n.providers().len()).map(|_| ProviderWindows::new()).collect())
        .collect();
    let mut history: Vec<Arc<NetworkHistory>> = networks
        .iter()
        .map(|n| Arc::new(NetworkHistory::new(n.providers().len())))
        .collect();
    let mut totals = Totals::default();
    totals.sample(now_ms(), Counters::sum(&inputs.metrics));
    let mut ticker = Ticker::new(now_ms(), POINT_MS);
    let mut next_publish = std::time::Instant::now();
    while !shutdown.is_triggered() {
        // Fair shares refill every tick: wake that often while they are on.
        let wait = if networks.iter().any(|n| n.quota.fair_on()) {
            Duration::from_millis(prism_core::live::quota::TICK_MS)
        } else {
            PUBLISH_EVERY
        };
        match rx.recv_timeout(wait) {
            Ok(batch) => {
                grow(networks, &mut windows, &mut history);
                let now = now_ms();
                for d in batch {
                    if let Some(w) = windows.get_mut(d.network).and_then(|n| n.get_mut(d.provider.index())) {
                        w.overall.add(now, &d.sample);
                        w.families[d.family as usize].add(now, &d.sample);
                        w.recent.add(now, &d.sample);
                        w.minute.add(now, &d.sample);
                        w.interval.add(&d.sample);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Quota shares refill every `core::live::quota::TICK_MS` (the tick itself skips an early call).
        let now = now_ms();
        for net in networks.iter() {
            net.quota.tick(now);
        }
        if std::time::Instant::now() >= next_publish {
            next_publish = std::time::Instant::now() + PUBLISH_EVERY;
            let now = now_ms();
            grow(networks, &mut windows, &mut history);
            let point_due = ticker.due(now);
            for (n, net) in networks.iter().enumerate() {
                note_states(&mut history[n], net, now);
                if point_due {
                    let points = windows[n].iter_mut().map(|w| w.interval.close(now)).collect();
                    Arc::make_mut(&mut history[n]).push_points(points);
                }
                let mut health = build(&mut windows[n], now);
                health.history = history[n].clone();
                net.health.store(Arc::new(health));
            }
            if point_due {
                totals.sample(now, Counters::sum(&inputs.metrics));
                inputs.totals.store(Arc::new(totals.clone()));
            }
        }
    }
}

/// Adds each provider's state change since the last publish to the network's timeline (copied only when
/// something changed: shards may still hold the previous snapshot's history).
fn note_states(history: &mut Arc<NetworkHistory>, net: &NetworkLive, now: u64) {
    for i in ProviderId::all(net.providers().len()) {
        let state = net.describe(i, now);
        if history.timeline.last_state(i.index()) != Some(state) {
            Arc::make_mut(history).timeline.observe(now, i.index(), state);
        }
    }
}

/// A reload that added providers gave their network more slots: they get windows of their own.
fn grow(networks: &[Arc<NetworkLive>], windows: &mut [Vec<ProviderWindows>], history: &mut [Arc<NetworkHistory>]) {
    for ((net, w), h) in networks.iter().zip(windows.iter_mut()).zip(history.iter_mut()) {
        let slots = net.providers().len();
        while w.len() < slots {
            w.push(ProviderWindows::new());
        }
        if h.providers.len() < slots {
            Arc::make_mut(h).grow(slots);
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
                minute: w.minute.figures(now),
                ..Default::default()
            };
            for (i, fw) in w.families.iter_mut().enumerate() {
                h.by_family[i] = fw.figures(now);
            }
            h
        })
        .collect();
    // Share of client traffic: a provider only probes reach (excluded, cordoned) has none.
    let client = |p: &ProviderHealth| p.overall.calls - p.overall.probes;
    let total: u64 = providers.iter().map(client).sum();
    if total > 0 {
        for p in &mut providers {
            p.share = client(p) as f64 / total as f64;
        }
    }
    NetworkHealth {
        providers,
        built_at_ms: now,
        history: Default::default(),
    }
}
