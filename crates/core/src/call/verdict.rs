//! What one judged exchange means for this call ([`Verdict`]): the answer, another provider's turn (not this
//! provider's to answer, or lagging below the caller's mark), an error waiting for a second opinion, or a
//! [`Fault`]. Heads the answer reveals are checked here: a height the chain cannot be at is never answered,
//! one below the caller's mark is lagging; `safe` / `finalized` answers against the tag's mark; Solana's
//! `context.slot` against the caller's slot.

use std::ops::Range;

use prism_telemetry::metrics::Settled;
use prism_wire::rpc::ProviderId;

use crate::call::attempts::Attempts;
use crate::call::exchange::Exchange;
use crate::call::fault::Fault;
use crate::call::outcome::{CallOutcome, How, ProxyError};
use crate::chain::{revealed_head, Asked, Height};
use crate::judge::blame::{Blame, BlameKey};
use crate::judge::classify::Class;
use crate::judge::{error_retry_on, Judged};
use crate::live::finality::{self, TagCheck};

impl<E: Exchange> Attempts<'_, '_, E> {
    /// What a judged exchange with provider `p` means for this call: blame memory settles an error no rule
    /// knows, the class decides whether it is the answer, another provider's turn, or a failure.
    pub(super) fn verdict(&self, p: ProviderId, judged: Judged) -> Verdict {
        let route = self.route;
        let causes = &route.live.providers()[p].causes;
        judged.log_broken(
            causes,
            || self.ex.now_ms(),
            &route.name,
            &route.upstreams[p].name,
            &self.cx.call.method,
        );
        let sent = judged.maybe_sent();
        let retry_on = judged.retry_on();
        match judged {
            Judged::Answer {
                body,
                value,
                is_error,
                status,
                class,
            } => {
                let mut class = class;
                let mut key = None;
                if class == Class::Unknown {
                    let k = BlameKey::of(&self.cx.call.method, &body[value.clone()]);
                    let (settled, how) = match route.shard.blame.recall(k, self.ex.now_ms()) {
                        None => (Class::Unknown, None),
                        Some(Blame::Client) => (Class::UserError, Some(Settled::RememberedClient)),
                        Some(Blame::Pending) => (Class::UserError, Some(Settled::Pending)),
                        // The verdict was on that provider: another one answering the same is asked again.
                        Some(Blame::Provider(q)) if q == p => {
                            (Class::ProviderFailure, Some(Settled::RememberedProvider))
                        }
                        Some(Blame::Provider(_)) => (Class::Unknown, None),
                    };
                    if let Some(how) = how {
                        route.shard.recorder.metrics().settled(how);
                    }
                    class = settled;
                    key = Some(k);
                }
                match class {
                    Class::Success | Class::UserError | Class::TooLarge => Verdict::Answer { body, value, is_error },
                    Class::Unknown => Verdict::Disputed {
                        answer: CallOutcome::Answer {
                            body,
                            value,
                            is_error,
                            how: How::from(p),
                        },
                        key: key.expect("set for Unknown"),
                    },
                    Class::Unsupported | Class::DataUnavailable => {
                        // No data at the block this read needs: the provider's floor is above it.
                        if let (Class::DataUnavailable, Some(b)) = (class, self.ask.at_block) {
                            route.live.learn_floor(p, b);
                        }
                        // What the chain reads in it (Solana's "Node is behind by N slots": `core::live::slots`).
                        if class == Class::DataUnavailable {
                            route
                                .policy
                                .chain
                                .told_unavailable(&route.live, p, &body[value.clone()], self.ex.now_ms());
                        }
                        Verdict::Reroute {
                            answer: CallOutcome::Answer {
                                body,
                                value,
                                is_error,
                                how: How::from(p),
                            },
                        }
                    }
                    Class::Throttled | Class::QuotaExhausted | Class::ProviderFailure => Verdict::Failed(Fault {
                        error: ProxyError::Status { provider: p, status },
                        sent: true,
                        // The class blame memory settled, not the judge's: `error_retry_on` of it.
                        retry_on: Some(error_retry_on(class)),
                        node_answer: Some(CallOutcome::Answer {
                            body,
                            value,
                            is_error,
                            how: How::from(p),
                        }),
                        class,
                    }),
                }
            }
            Judged::Failed { failure, class } => Verdict::Failed(Fault::judged(failure, p, class, sent, retry_on)),
        }
    }
}

impl<E: Exchange> Attempts<'_, '_, E> {
    /// A `safe` / `finalized` read's answer (`core::live::finality::check_answer` on the block `number` it shows):
    /// below the caller's mark for the tag it is lagging (the provider's tag is lowered, another is asked);
    /// above any block the pool believes exists it is never answered; otherwise it raises the provider's tag
    /// and, in `finish`, the caller's mark for the tag.
    pub(super) fn check_tag(&self, i: ProviderId, body: Vec<u8>, value: Range<usize>) -> Verdict {
        let (Some(t), live) = (self.cx.tag, &self.route.live) else {
            return Verdict::Answer {
                body,
                value,
                is_error: false,
            };
        };
        let best = live.heads.best_head.load(std::sync::atomic::Ordering::Relaxed);
        let ceiling = if best == 0 {
            0
        } else {
            best.saturating_add(live.rule.margin())
        };
        let shown = revealed_head(&self.cx.info, true, &body[value.clone()]);
        match shown.map(|n| (n, finality::check_answer(n, self.mark, ceiling))) {
            Some((n, TagCheck::Lagging)) => {
                live.slot(i).tags.lower(t, n);
                Verdict::Lagging {
                    answer: CallOutcome::Answer {
                        body,
                        value,
                        is_error: false,
                        how: How::from(i),
                    },
                }
            }
            Some((_, TagCheck::Implausible)) => Verdict::Reroute {
                answer: CallOutcome::Failed(ProxyError::NotServed(
                    "The provider answered a block the chain cannot be at; retry shortly",
                )),
            },
            found => {
                if let Some((n, _)) = found {
                    live.slot(i).tags.raise(t, n);
                    self.head.set(Some(n));
                }
                Verdict::Answer {
                    body,
                    value,
                    is_error: false,
                }
            }
        }
    }
}

pub(super) enum Verdict {
    Answer {
        body: Vec<u8>,
        value: Range<usize>,
        is_error: bool,
    },
    /// Not this provider's to answer (unsupported here, data unavailable here): another may.
    Reroute { answer: CallOutcome },
    /// The provider answered from below the client's mark.
    Lagging { answer: CallOutcome },
    /// An error no rule knows, on a read: whose fault it is takes a second opinion.
    Disputed { answer: CallOutcome, key: BlameKey },
    /// The attempt failed (`core::call::fault`: what may follow is decided there).
    Failed(Fault),
}

impl Verdict {
    pub(super) fn class(&self) -> Class {
        match self {
            Verdict::Answer { .. } | Verdict::Lagging { .. } => Class::Success,
            Verdict::Reroute { .. } => Class::Unsupported,
            Verdict::Disputed { .. } => Class::Unknown,
            Verdict::Failed(fault) => fault.class,
        }
    }

    /// An answer revealing a height (`core::chain`: the chain's rules read it): one beyond 2^53 is malformed
    /// (the provider's failure); one the chain cannot be at is never answered (try another); one below the
    /// client's mark is lagging (try another). A believed one raises the mark in `finish`. An EVM
    /// `safe` / `finalized` read is held to its tag (`check_tag`).
    pub(super) fn check_head<E: Exchange>(self, a: &Attempts<'_, '_, E>, i: ProviderId, now_ms: u64) -> Verdict {
        a.head.set(None);
        let Verdict::Answer {
            body,
            value,
            is_error: false,
        } = self
        else {
            return self;
        };
        let asked = Asked {
            info: &a.cx.info,
            latest: a.cx.latest,
        };
        let heard = a
            .route
            .policy
            .chain
            .heard_height(&a.route.live, i, asked, &body[value.clone()], a.mark, now_ms);
        match heard {
            Height::Malformed => Verdict::Failed(Fault {
                error: ProxyError::NotServed("The provider answered a block height beyond 2^53: a malformed answer"),
                sent: true,
                retry_on: None,
                node_answer: None,
                class: Class::ProviderFailure,
            }),
            Height::Implausible => Verdict::Reroute {
                answer: CallOutcome::Failed(ProxyError::NotServed(
                    "The provider reported a block height the chain cannot be at; retry shortly",
                )),
            },
            Height::Lagging => Verdict::Lagging {
                answer: CallOutcome::Answer {
                    body,
                    value,
                    is_error: false,
                    how: How::from(i),
                },
            },
            Height::Unshown if a.cx.tag.is_some() => a.check_tag(i, body, value),
            heard => {
                if let Height::Shown(h) = heard {
                    a.head.set(Some(h));
                }
                Verdict::Answer {
                    body,
                    value,
                    is_error: false,
                }
            }
        }
    }
}
