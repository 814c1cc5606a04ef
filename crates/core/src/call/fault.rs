//! One failed attempt and what may follow it. The facts are set where the failure is judged
//! (`verdict::Attempts::verdict`: the provider as a `ProviderId`, whose fault it is as the judge's class, the
//! transport's `maybe_sent` and the judge's `retry_on`); whether the
//! call ends, goes to another provider at once, or is tried again after a backoff is decided here, in
//! [`Fault::next`], and nowhere else. (The transport's one silent retry of a request on a reused keep-alive
//! connection that turned out dead happens below this, before any byte reached a provider.)

use std::time::Duration;

use prism_config::{Jitter, RetryOn, RetryPolicy};

use super::outcome::{CallOutcome, ProxyError, TxRef};
use crate::judge::classify::Class;
use crate::judge::Failure;
use prism_wire::rpc::ProviderId;

/// A failed attempt at one provider.
pub struct Fault {
    /// What the client is told if nothing better comes (it names the provider).
    pub error: ProxyError,
    /// Whether any byte of the call may have reached the provider: a write that was sent is never sent again.
    pub sent: bool,
    /// The `policy.retry.retry_on` entry that lets a read be tried again; `None` when no entry governs it (a
    /// malformed answer): always another provider's turn.
    pub retry_on: Option<RetryOn>,
    /// The node's own JSON-RPC error, returned as it came if nothing better comes.
    pub node_answer: Option<CallOutcome>,
    /// Whose fault, as the judge (or blame memory) settled it: the provider's failure, throttle or quota
    /// (what its breaker and health count), or a transport class.
    pub class: Class,
}

/// What the retry loop does after a [`Fault`].
pub enum Next {
    /// The call ends with this answer.
    End(CallOutcome),
    /// Another provider may take the call at once: a write no byte of which left Prism. The answer is what
    /// the client gets if none does.
    Elsewhere(CallOutcome),
    /// A read tried again after the backoff; the answer is what the client gets if nothing better comes.
    Retry(CallOutcome),
}

impl Fault {
    /// What the judge found when nothing usable came back from `provider`.
    pub fn judged(
        failure: Failure,
        provider: ProviderId,
        class: Class,
        sent: bool,
        retry_on: Option<RetryOn>,
    ) -> Fault {
        let error = match failure {
            Failure::Transport(error) => ProxyError::Transport { provider, error },
            Failure::Status(status) => ProxyError::Status { provider, status },
            Failure::Malformed { why, .. } => ProxyError::BadResponse { provider, why },
        };
        Fault {
            error,
            sent,
            retry_on,
            node_answer: None,
            class,
        }
    }

    /// The rule: a write ends where the provider may have seen it (with the node's answer, or "outcome
    /// unknown" when the bytes left and the answer was lost) and goes elsewhere when nothing was sent; a read
    /// is tried again while attempts are left (`more`) and `policy.retry_on` allows this kind of failure.
    pub fn next(self, write: bool, more: bool, policy: &RetryPolicy, tx: impl FnOnce() -> TxRef) -> Next {
        let Fault {
            error,
            sent,
            retry_on,
            node_answer,
            class: _,
        } = self;
        if write && sent {
            // The provider answered (a 429 too: it has seen the write, and "rate limited" does not prove it
            // was dropped): the write ends there, with that answer.
            return Next::End(match (error, node_answer) {
                (_, Some(answer)) => answer,
                // The bytes went out and the answer was lost (timeout, reset, a broken response): the node may
                // have taken it.
                (ProxyError::Transport { provider, .. } | ProxyError::BadResponse { provider, .. }, _) => {
                    CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { provider, tx: tx() })
                }
                (e, _) => CallOutcome::Failed(e),
            });
        }
        let last = node_answer.unwrap_or(CallOutcome::Failed(error));
        if write {
            // Not one byte left Prism: another provider still makes it exactly once.
            return Next::Elsewhere(last);
        }
        let allowed = retry_on.is_none_or(|c| policy.retry_on.contains(&c));
        if more && allowed {
            Next::Retry(last)
        } else {
            Next::End(last)
        }
    }
}

/// Exponential backoff for the `n`-th retry (1-based): full jitter draws from [0, cap].
pub(super) fn backoff(policy: &RetryPolicy, n: u32) -> Duration {
    let cap = policy
        .base_delay_ms
        .saturating_mul(1u64 << (n - 1).min(20))
        .min(policy.max_delay_ms);
    let ms = match policy.jitter {
        Jitter::Full => fastrand::u64(0..=cap),
        Jitter::Equal => cap / 2 + fastrand::u64(0..=cap / 2),
        Jitter::None => cap,
    };
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prism_transport::TransportError;

    fn lost(sent: bool) -> Fault {
        Fault {
            error: ProxyError::Transport {
                provider: ProviderId::new(0),
                error: TransportError::Reset { sent },
            },
            sent,
            retry_on: Some(RetryOn::ConnectionReset),
            node_answer: None,
            class: Class::ProviderFailure,
        }
    }

    fn throttled() -> Fault {
        Fault {
            error: ProxyError::Status {
                provider: ProviderId::new(0),
                status: 429,
            },
            sent: true,
            retry_on: Some(RetryOn::Status429),
            node_answer: Some(CallOutcome::result(b"\"node's own\"".to_vec())),
            class: Class::Throttled,
        }
    }

    fn tx() -> TxRef {
        TxRef::Hash("0xabc".into())
    }

    #[test]
    fn a_write_that_may_have_arrived_ends_there() {
        let policy = RetryPolicy::default();
        match lost(true).next(true, true, &policy, tx) {
            Next::End(CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { provider, tx })) => {
                assert_eq!(provider, ProviderId::new(0));
                assert!(matches!(tx, TxRef::Hash(h) if h == "0xabc"));
            }
            _ => panic!("a write whose answer was lost ends with 'outcome unknown'"),
        }
        // The provider answered (a 429 too): the write ends with the node's own answer.
        assert!(matches!(
            throttled().next(true, true, &policy, tx),
            Next::End(CallOutcome::Answer { .. })
        ));
    }

    #[test]
    fn a_write_no_byte_of_which_left_goes_elsewhere_at_once() {
        let policy = RetryPolicy {
            retry_on: vec![],
            ..RetryPolicy::default()
        };
        // Even with nothing in retry_on and no attempts "left": another provider makes it exactly once.
        assert!(matches!(lost(false).next(true, false, &policy, tx), Next::Elsewhere(_)));
    }

    #[test]
    fn a_read_is_tried_again_while_attempts_are_left_and_retry_on_allows_it() {
        let policy = RetryPolicy::default();
        assert!(matches!(lost(true).next(false, true, &policy, tx), Next::Retry(_)));
        assert!(
            matches!(lost(true).next(false, false, &policy, tx), Next::End(_)),
            "no attempts left"
        );
        let no_resets = RetryPolicy {
            retry_on: vec![RetryOn::Timeout, RetryOn::Status5xx, RetryOn::Status429],
            ..RetryPolicy::default()
        };
        assert!(
            matches!(lost(true).next(false, true, &no_resets, tx), Next::End(_)),
            "retry_on says no"
        );
        // A malformed answer is governed by no entry: always another provider's turn.
        let malformed = Fault {
            retry_on: None,
            ..lost(true)
        };
        let none = RetryPolicy {
            retry_on: vec![],
            ..RetryPolicy::default()
        };
        assert!(matches!(malformed.next(false, true, &none, tx), Next::Retry(_)));
        // What the client gets if nothing better comes is the node's own error.
        assert!(matches!(
            throttled().next(false, false, &policy, tx),
            Next::End(CallOutcome::Answer { .. })
        ));
    }
}

#[cfg(test)]
mod backoff_tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_jittered() {
        let policy = prism_config::RetryPolicy::default();
        for n in 1..10 {
            let cap = (120u64 << (n - 1)).min(2000);
            for _ in 0..50 {
                assert!(backoff(&policy, n).as_millis() as u64 <= cap);
            }
        }
        let none = prism_config::RetryPolicy {
            jitter: Jitter::None,
            ..Default::default()
        };
        assert_eq!(backoff(&none, 1), Duration::from_millis(120));
        assert_eq!(backoff(&none, 6), Duration::from_millis(2000));
    }
}
