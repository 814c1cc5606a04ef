//! Config reloads without a restart (SIGHUP, `prism reload`, the admin `POST /reload`).
//!
//! The file is read and checked as `prism check` does; a config that fails, or that changes what only a
//! restart can (`config::changes::restart_needed`), is refused whole and the running one stays. Otherwise the
//! new roster (providers by slot, removed ones retired) and key ring are built here, off the shards, and
//! published as a new [`World`]; each shard builds its own generation from it between requests and installs
//! it whole (`edge::shard::Shard::install`). Requests already running finish on the generation they began
//! with, so a removed provider's in-flight calls complete; new requests take the new one. The reload answers
//! once every shard runs it.
#![allow(
    clippy::disallowed_types,
    reason = "reloads run on their own thread (SIGHUP, POST /reload), never on a shard"
)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::access::keys::KeyRing;
use crate::edge::admin::{Reload, ReloadOutcome};
use crate::upstream::Registry;
use prism_config::{changes, Config};
use prism_core::live::state::NetworkLive;
use prism_wire::rpc::methods::Declared;

/// Everything built from one config generation that every shard reads: immutable, swapped whole.
pub struct World {
    /// 0 at start-up, one more per applied reload.
    pub generation: u64,
    /// The running config: each network's providers in slot order, removed ones marked `retired`.
    pub config: Arc<Config>,
    pub registry: Arc<Registry>,
    pub keys: Arc<KeyRing>,
    pub declared: Arc<Vec<Declared>>,
}

pub type WorldCell = ArcSwap<World>;

/// How long a reload waits for every shard to take the new generation before it answers anyway.
const APPLY_WAIT: Duration = Duration::from_secs(5);

/// Reads, checks and publishes reloads; one at a time.
pub struct Reloader {
    path: Option<PathBuf>,
    world: Arc<WorldCell>,
    config: Arc<ArcSwap<Config>>,
    keys: Arc<ArcSwap<KeyRing>>,
    lives: Vec<Arc<NetworkLive>>,
    /// The generation each shard runs, and the longest a shard spent building and installing one (µs).
    applied: Vec<AtomicU64>,
    longest_install_us: AtomicU64,
    busy: Mutex<()>,
    last: Mutex<Option<ReloadOutcome>>,
}

impl Reloader {
    pub fn new(
        path: Option<PathBuf>,
        world: Arc<WorldCell>,
        config: Arc<ArcSwap<Config>>,
        keys: Arc<ArcSwap<KeyRing>>,
        lives: Vec<Arc<NetworkLive>>,
        shards: usize,
    ) -> Reloader {
        Reloader {
            path,
            world,
            config,
            keys,
            lives,
            applied: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            longest_install_us: AtomicU64::new(0),
            busy: Mutex::new(()),
            last: Mutex::new(None),
        }
    }

    /// Whether there is a file to reload from (`prism serve --config`; not the demo).
    pub fn has_file(&self) -> bool {
        self.path.is_some()
    }

    /// A shard runs `generation` now; building and installing it took `took` of that shard's time.
    pub fn applied(&self, shard: usize, generation: u64, took: Duration) {
        self.longest_install_us
            .fetch_max(took.as_micros() as u64, Ordering::AcqRel);
        if let Some(a) = self.applied.get(shard) {
            a.store(generation, Ordering::Release);
        }
    }

    /// Reads and checks the file; builds the next world, or says why not.
    fn prepare(&self, running: &Config) -> Result<(World, Vec<String>), String> {
        let path = self.path.as_ref().ok_or("no config file")?;
        let new = Config::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
        super::declared_methods(&new).map_err(|e| format!("{}: {e}", path.display()))?;
        let restart = changes::restart_needed(running, &new);
        if !restart.is_empty() {
            return Err(format!(
                "{}: these need a restart, so nothing was changed: {}",
                path.display(),
                restart.join("; ")
            ));
        }
        let next = changes::roster(running, new)?;
        let keys = self.keys.load().reloaded(&next)?;
        let declared = super::declared_methods(&next).map_err(|e| e.to_string())?;
        let summary = changes::summary(running, &next);
        let generation = self.world.load().generation + 1;
        Ok((
            World {
                generation,
                registry: Arc::new(Registry::resolve(&next)),
                config: Arc::new(next),
                keys: Arc::new(keys),
                declared: Arc::new(declared),
            },
            summary,
        ))
    }

    /// Makes `world` the one shards run, and waits (bounded) until they all do.
    fn publish(&self, world: World) -> Result<Duration, String> {
        let generation = world.generation;
        let started = Instant::now();
        self.longest_install_us.store(0, Ordering::Release);
        // Readers that walk the config's provider list index slots directly, so the order here only decides
        // what the admin view shows for a moment.
        self.config.store(world.config.clone());
        for (n, (live, net)) in self.lives.iter().zip(&world.config.networks).enumerate() {
            live.apply_roster(net);
            live.quota.configure(&world.config, n, &world.keys.quota_weights());
        }
        self.keys.store(world.keys.clone());
        self.world.store(Arc::new(world));
        while self.applied.iter().any(|a| a.load(Ordering::Acquire) < generation) {
            if started.elapsed() > APPLY_WAIT {
                return Err(format!(
                    "generation {generation} published, but not every shard took it within {} s",
                    APPLY_WAIT.as_secs()
                ));
            }
            // Not a shard: the reload thread, waiting for the shards to switch.
            #[allow(clippy::disallowed_methods, reason = "not a shard thread")]
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(started.elapsed())
    }
}

impl Reload for Reloader {
    fn reload(&self) -> ReloadOutcome {
        let _one_at_a_time = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        let started = Instant::now();
        let running = self.config.load_full();
        let outcome = match self.prepare(&running) {
            Err(why) => {
                tracing::warn!(reason = %why, "config reload refused; the running config stays");
                ReloadOutcome {
                    applied: false,
                    generation: self.world.load().generation,
                    at_ms: wall_ms(),
                    message: why,
                    changes: Vec::new(),
                }
            }
            Ok((world, summary)) => {
                let generation = world.generation;
                let prepared = started.elapsed();
                match self.publish(world) {
                    Ok(took) => {
                        let held_us = self.longest_install_us.load(Ordering::Acquire);
                        let message = format!(
                            "generation {generation} applied on {} shard(s): checked in {:.1} ms, every shard running it {:.1} ms later; the longest a shard paused to install it was {held_us} µs",
                            self.applied.len(),
                            prepared.as_secs_f64() * 1e3,
                            took.as_secs_f64() * 1e3,
                        );
                        tracing::info!(generation, changes = ?summary, "{message}");
                        ReloadOutcome {
                            applied: true,
                            generation,
                            at_ms: wall_ms(),
                            message,
                            changes: summary,
                        }
                    }
                    Err(why) => {
                        tracing::warn!(generation, "{why}");
                        ReloadOutcome {
                            applied: true,
                            generation,
                            at_ms: wall_ms(),
                            message: why,
                            changes: summary,
                        }
                    }
                }
            }
        };
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome.clone());
        outcome
    }

    fn last(&self) -> Option<ReloadOutcome> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
