//! Blame needs evidence: an error no classifier rule knows, in a well-formed answer to a read, waits here for
//! a second opinion from another provider (`forward`'s loop asks it). A result there blames the first
//! provider; the same error, a user error, or nobody else to ask blames nobody (`core::judge::blame`
//! remembers the verdict for a while).

use prism_telemetry::cause::{Origin, Reason};
use prism_telemetry::metrics::Settled;
use prism_wire::rpc::ProviderId;

use crate::call::attempts::Attempts;
use crate::call::exchange::Exchange;
use crate::call::outcome::CallOutcome;
use crate::call::verdict::Verdict;
use crate::judge::blame::{Blame, BlameKey};
use crate::judge::classify::Class;
use crate::routing::route::Heard;

/// An unknown error waiting for a second opinion: who answered it, how fast, and the answer itself.
pub(super) struct Dispute {
    pub(super) provider: ProviderId,
    pub(super) latency_us: u64,
    pub(super) key: BlameKey,
    pub(super) answer: CallOutcome,
}

impl<E: Exchange> Attempts<'_, '_, E> {
    /// Settles `d` with the answer provider `j` gave to the same call: a result blames `d`'s provider (and
    /// returns `None`: the result is the client's answer, handled as any other), anything else blames
    /// nobody and returns `d`'s answer, the first node's bytes.
    pub(super) fn second_opinion(
        &self,
        d: Dispute,
        j: ProviderId,
        verdict: &Verdict,
        latency_us: u64,
    ) -> Option<CallOutcome> {
        let route = self.route;
        let (blame, how) = match verdict {
            Verdict::Answer { is_error: false, .. } => {
                (Some(Blame::Provider(d.provider)), Settled::SecondOpinionProvider)
            }
            // The same error, or one the rules know as the caller's (a user error, too large).
            Verdict::Answer { is_error: true, .. } => (Some(Blame::Client), Settled::SecondOpinionClient),
            Verdict::Disputed { key, .. } if *key == d.key => (Some(Blame::Client), Settled::SecondOpinionClient),
            _ => (None, Settled::SecondOpinionInconclusive),
        };
        if let Verdict::Disputed { .. } = verdict {
            // The second provider's unknown error is not asked of a third: nobody's.
            route.note_outcome(
                j,
                Heard {
                    family: self.cx.info.family,
                    class: Class::UserError,
                    reason: None,
                    latency_us,
                    by: Origin::Client,
                    now: self.ex.now_ms(),
                },
            );
        }
        let blamed = matches!(blame, Some(Blame::Provider(_)));
        let first = if blamed {
            Class::ProviderFailure
        } else {
            Class::UserError
        };
        let now = self.ex.now_ms();
        let reason = blamed.then_some(Reason::RpcError);
        route.note_outcome(
            d.provider,
            Heard {
                family: self.cx.info.family,
                class: first,
                reason,
                latency_us: d.latency_us,
                by: Origin::Client,
                now,
            },
        );
        route.shard.blame.settle(d.key, blame, now);
        route.shard.recorder.metrics().settled(how);
        if blamed {
            tracing::info!(network = %route.name, provider = %route.upstreams[d.provider].name, method = %self.cx.call.method, blamed_by = %route.upstreams[j].name, "an error another provider answered with a result: blamed");
            None
        } else {
            Some(d.answer)
        }
    }

    /// `d` is settled without a second opinion: nobody is blamed, the client gets the node's bytes.
    pub(super) fn undisputed(&self, d: Dispute, how: Settled) -> CallOutcome {
        let now = self.ex.now_ms();
        self.route.note_outcome(
            d.provider,
            Heard {
                family: self.cx.info.family,
                class: Class::UserError,
                reason: None,
                latency_us: d.latency_us,
                by: Origin::Client,
                now,
            },
        );
        self.route.shard.blame.settle(d.key, None, now);
        self.route.shard.recorder.metrics().settled(how);
        d.answer
    }
}
