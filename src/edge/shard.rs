//! What one shard owns: the current config generation (the networks it serves, each network's route and,
//! for Solana, its magic router; its limits and keys), its counters, the JSON-RPC state and its upstream
//! ids. The HTTP server, the WebSocket sessions and the shard's background tasks all work on it.
//!
//! A reload installs a new [`Gen`] whole. A request takes the generation current when it starts and keeps it
//! to its end (so its provider's pool and its key's bucket stay the ones it began with); the next request
//! on the same connection takes the new one. Nothing waits for a reload.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::envelope::{EnvelopeLimits, EnvelopeParser};
use super::keys::KeyRing;
use super::network::Network;
use super::rpc::RpcShard;
use prism_config::Limits;
use prism_runtime::Shutdown;
use prism_wire::http1::SpareBufs;

/// What a client connection holds in malloc (its task, its state, the runtime's socket), at the least: an
/// idle one measured 2.15 KiB (perf/idle_clients.py, 10 000 clients).
pub const CONNECTION_BYTES: usize = 2 * 1024;

/// One config generation as a shard serves it.
pub struct Gen {
    /// 0 at start-up, one more per applied reload.
    pub number: u64,
    pub limits: Limits,
    /// The networks, in config order (the route's `index`).
    pub networks: Vec<Network>,
    /// API keys, shared by all shards (their rate-limit state is atomic).
    pub keys: Arc<KeyRing>,
    /// Each network's `probe_interval_ms`.
    pub probe_interval_ms: Vec<u64>,
    /// `server.diagnostic_headers`.
    pub diagnostic_headers: bool,
}

/// Everything one shard owns.
pub struct Shard {
    pub id: usize,
    /// TLS termination, when `[server.tls]` is set.
    pub tls: Option<Arc<super::tls::EdgeTls>>,
    gen: RefCell<Rc<Gen>>,
    pub rpc: RpcShard,
    pub shutdown: Shutdown,
    /// The same shutdown, waited on by this shard's connections alone (no shared list per idle read).
    pub local_shutdown: prism_runtime::LocalShutdown,
    pub open: OpenConnections,
    /// Client subscriptions open on this shard (EVM and Solana), for `limits.max_subscriptions_per_shard`.
    pub subscriptions: Cell<usize>,
    /// This shard's health samples, shipped to the aggregator.
    pub recorder: Rc<prism_telemetry::recorder::Recorder>,
    pub spare: SpareBuffers,
    pub homes: FutureHomes,
}

/// Client connections counted open, for the connection limit, draining and trimming.
pub struct OpenConnections {
    /// Across all shards, for `limits.max_connections`.
    pub global: Arc<AtomicUsize>,
    /// On this shard, for draining.
    pub local: Cell<usize>,
    /// The most open at once since the last [`Shard::trim_spares`]: those closed since freed their memory.
    pub peak: Cell<usize>,
}

/// Buffers that idle connections and finished requests gave back, lent to the next one that needs one: an
/// idle connection holds none.
#[derive(Default)]
pub struct SpareBuffers {
    /// Read buffers idle connections gave back while they wait (`ReadBuf::read_idle_from`).
    pub reads: SpareBufs,
    /// Answer buffers idle connections gave back.
    pub out: SpareBufs,
    /// Request bodies between requests.
    pub bodies: SpareBufs,
}

/// Heap homes for the large futures a connection runs only now and then, kept between uses: boxed so an
/// idle connection's task stays small, and reused so each use skips malloc's slow path.
#[derive(Default)]
pub struct FutureHomes {
    /// For the future that answers a request (`edge::server`).
    pub answer: prism_runtime::SpareBoxes,
    /// For the future that reads the rest of a request once its first bytes are in.
    pub request: prism_runtime::SpareBoxes,
    /// For the future that answers one WebSocket message (`edge::ws`): not part of every idle subscriber's
    /// session.
    pub message: prism_runtime::SpareBoxes,
}

// === impl Shard ===

impl Shard {
    pub fn new(
        id: usize,
        tls: Option<Arc<super::tls::EdgeTls>>,
        gen: Gen,
        shutdown: Shutdown,
        open_global: Arc<AtomicUsize>,
        recorder: Rc<prism_telemetry::recorder::Recorder>,
    ) -> Shard {
        let rpc = RpcShard {
            parser: RefCell::new(EnvelopeParser::new(envelope_limits(&gen.limits))),
            ids: Cell::new(prism_wire::rpc::ids::CLIENT_CALLS),
            max_answer_bytes: Cell::new(gen.limits.max_answer_bytes),
            answers: Default::default(),
        };
        Shard {
            id,
            tls,
            gen: RefCell::new(Rc::new(gen)),
            rpc,
            local_shutdown: prism_runtime::LocalShutdown::new(shutdown.clone()),
            shutdown,
            open: OpenConnections {
                global: open_global,
                local: Cell::new(0),
                peak: Cell::new(0),
            },
            subscriptions: Cell::new(0),
            recorder,
            spare: SpareBuffers::default(),
            homes: FutureHomes::default(),
        }
    }

    /// Frees the spare buffers no request took since the last call (the shard's own pools, each network's
    /// call bodies, each upstream's requests): what a burst left kept goes back to malloc once it is over.
    /// Returns the bytes freed since the last call, counting those, buffers the pools would not keep, and
    /// the client connections that closed (at least [`CONNECTION_BYTES`] each), so the caller can tell
    /// malloc to return them (`runtime::memory`): 10 000 clients that came and went leave their memory.
    pub fn trim_spares(&self) -> usize {
        let open = self.open.local.get();
        let closed = self.open.peak.replace(open).saturating_sub(open);
        let mut freed = closed * CONNECTION_BYTES
            + self.spare.reads.trim()
            + self.spare.out.trim()
            + self.spare.bodies.trim()
            + self.rpc.answers.trim();
        for net in &self.gen().networks {
            freed += net.route.shard.bodies.trim();
            freed += net
                .route
                .upstreams
                .iter()
                .map(|up| up.pool.trim_spares())
                .sum::<usize>();
        }
        freed
    }

    /// The generation new requests use.
    pub fn gen(&self) -> Rc<Gen> {
        self.gen.borrow().clone()
    }

    /// Makes `gen` the one new requests use; returns the one it replaces (its routes are marked superseded,
    /// so their probers stop; calls and sessions still holding it finish on it).
    pub fn install(&self, gen: Gen) -> Rc<Gen> {
        if let Ok(mut parser) = self.rpc.parser.try_borrow_mut() {
            *parser = EnvelopeParser::new(envelope_limits(&gen.limits));
        }
        self.rpc.max_answer_bytes.set(gen.limits.max_answer_bytes);
        let old = self.gen.replace(Rc::new(gen));
        let now = self.gen.borrow().clone();
        for (net, next) in old.networks.iter().zip(&now.networks) {
            if !Rc::ptr_eq(&net.route, &next.route) {
                net.route.life.superseded.set(true);
            }
        }
        old
    }
}

fn envelope_limits(limits: &Limits) -> EnvelopeLimits {
    EnvelopeLimits {
        max_batch: limits.max_batch,
        max_depth: limits.max_depth,
    }
}
