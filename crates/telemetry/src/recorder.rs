//! The shard side of health: each shard records every upstream attempt into its own samples (no sharing),
//! and a timer ships them to the aggregator as deltas every ~100 ms.

use std::cell::RefCell;
use std::sync::Arc;

use crossbeam::channel::Sender;

use super::cause::Reason;
use super::metrics::{AttemptResult, ShardMetrics};
use super::window::Sample;
use prism_wire::rpc::methods::Family;
use prism_wire::rpc::ProviderId;

/// One shipped delta.
#[derive(Debug)]
pub struct Delta {
    pub network: usize,
    pub provider: ProviderId,
    pub family: Family,
    pub sample: Sample,
}

/// One attempt at a provider as the recorder counts it: its latency family and latency, how health sees it,
/// why it failed or was throttled, and whether it was a probe (counted apart from client traffic).
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub family: Family,
    pub latency_us: u64,
    pub result: AttemptResult,
    pub reason: Option<Reason>,
    pub probe: bool,
}

/// Per-shard samples, indexed `[network][provider][family]`.
pub struct Recorder {
    samples: RefCell<Vec<Vec<Vec<Sample>>>>,
    to_aggregator: Sender<Vec<Delta>>,
    metrics: Arc<ShardMetrics>,
}

impl Recorder {
    /// `shape[n]` = number of providers of network `n`.
    pub fn new(shape: &[usize], to_aggregator: Sender<Vec<Delta>>, metrics: Arc<ShardMetrics>) -> Self {
        let samples = shape
            .iter()
            .map(|&providers| {
                (0..providers)
                    .map(|_| Family::ALL.iter().map(|_| Sample::default()).collect())
                    .collect()
            })
            .collect();
        Recorder {
            samples: RefCell::new(samples),
            to_aggregator,
            metrics,
        }
    }

    pub fn metrics(&self) -> &ShardMetrics {
        &self.metrics
    }

    /// One attempt at `provider` (client traffic or, `probe`, a health probe) and how health sees it, with
    /// the reason when it failed or was throttled.
    pub fn record(&self, network: usize, provider: ProviderId, attempt: Attempt) {
        let Attempt {
            family,
            latency_us,
            result: outcome,
            reason,
            probe,
        } = attempt;
        self.metrics
            .attempt(network, provider, outcome, latency_us, reason, probe);
        let mut samples = self.samples.borrow_mut();
        // A reload may have added providers: their samples are made when they first answer (a histogram
        // per family is too big to hold for every possible slot).
        let providers = &mut samples[network];
        while providers.len() <= provider.index() {
            providers.push(Family::ALL.iter().map(|_| Sample::default()).collect());
        }
        providers[provider.index()][family as usize].record(
            latency_us,
            outcome == AttemptResult::Failed,
            outcome == AttemptResult::Throttled,
            probe,
        );
    }

    /// Ships everything recorded since the last flush.
    pub fn flush(&self) {
        let mut out = Vec::new();
        {
            let mut samples = self.samples.borrow_mut();
            for (n, providers) in samples.iter_mut().enumerate() {
                for (p, families) in providers.iter_mut().enumerate() {
                    for (f, sample) in families.iter_mut().enumerate() {
                        if !sample.is_empty() {
                            out.push(Delta {
                                network: n,
                                provider: ProviderId::new(p),
                                family: Family::ALL[f],
                                sample: std::mem::take(sample),
                            });
                        }
                    }
                }
            }
        }
        if !out.is_empty() {
            let _ = self.to_aggregator.send(out);
        }
    }
}
