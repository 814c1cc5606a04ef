//! The shard side of health: each shard records every upstream attempt into its own samples (no sharing),
//! and a timer ships them to the aggregator as deltas every ~100 ms.

use std::cell::RefCell;
use std::sync::Arc;

use crossbeam::channel::Sender;

use super::metrics::{AttemptResult, ShardMetrics};
use super::window::Sample;
use crate::rpc::methods::Family;

/// One shipped delta.
#[derive(Debug)]
pub struct Delta {
    pub network: usize,
    pub provider: usize,
    pub family: Family,
    pub sample: Sample,
}

/// Outcome of one attempt as health sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An answer (including user errors: the provider worked).
    Ok,
    /// The provider's fault.
    Failed,
    /// Rate limited: neither success nor failure.
    Throttled,
    /// Not this provider's to answer (unsupported there, data unavailable there): rerouted, not counted.
    Rerouted,
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

    pub fn record(&self, network: usize, provider: usize, family: Family, latency_us: u64, outcome: Outcome) {
        let result = match outcome {
            Outcome::Ok => AttemptResult::Ok,
            Outcome::Failed => AttemptResult::Failed,
            Outcome::Throttled => AttemptResult::Throttled,
            Outcome::Rerouted => AttemptResult::Rerouted,
        };
        self.metrics.attempt(network, provider, result, latency_us);
        let mut samples = self.samples.borrow_mut();
        samples[network][provider][family as usize].record(
            latency_us,
            outcome == Outcome::Failed,
            outcome == Outcome::Throttled,
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
                                provider: p,
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
