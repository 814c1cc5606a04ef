//! The one judge: what a single exchange with a provider (the transport's result, the HTTP status, the
//! body) says, before anything a caller adds of its own. The retry loop (`core::call::forward`) and the prober
//! (`upstream::prober`) both start from [`judge`], so a 429, a 3xx with an error object or a flood means
//! the same to client traffic and to probes.
//!
//! Pure: no I/O, no clock, no shared state. Blame memory, heads and the write rule are the retry loop's.

pub mod blame;
pub mod classify;

use std::ops::Range;

use prism_config::RetryOn;
use prism_telemetry::cause::{CauseLog, Reason};
use prism_transport::validate::{check_response, InvalidResponse};
use prism_transport::{TransportError, UpstreamResponse};

use crate::judge::classify::{classify_http, classify_rpc_error_in, classify_transport, Class, Dialect};

/// A judged exchange.
#[derive(Debug)]
pub enum Judged {
    /// A JSON-RPC answer to our call: a result (`Success`) or an error object with the classifier's class
    /// (any HTTP status: the status is reconciled with the error's text by `classify`).
    Answer {
        body: Vec<u8>,
        /// The `result` or `error` value inside `body`.
        value: Range<usize>,
        is_error: bool,
        status: u16,
        class: Class,
    },
    /// No JSON-RPC answer a client could be given.
    Failed { failure: Failure, class: Class },
}

/// Why an exchange gave no answer.
#[derive(Debug)]
pub enum Failure {
    /// Nothing readable came back (refused, timed out, reset, broken framing, too large).
    Transport(TransportError),
    /// A non-2xx status whose body is no JSON-RPC answer (an HTML error page, plain text, nothing).
    Status(u16),
    /// A body that is not a JSON-RPC answer to our call (wrong id, truncated, two results...).
    Malformed {
        status: u16,
        why: InvalidResponse,
        bytes: usize,
    },
}

/// Judges one exchange for the call sent under `id`. `light` marks answers that are small on any honest
/// node (heads, balances, probes): one over the response limit is the provider's flood, not a request
/// asking too much. `is_write` decides what an error no rule knows means (see `classify`); `dialect` whose
/// error codes these are.
pub fn judge(
    result: Result<UpstreamResponse, TransportError>,
    id: u64,
    light: bool,
    is_write: bool,
    dialect: Dialect,
) -> Judged {
    match result {
        Ok(resp) => judge_answer(resp.status, resp.body, id, is_write, dialect),
        Err(error) => {
            let class = match classify_transport(&error) {
                Class::TooLarge if light => Class::ProviderFailure,
                c => c,
            };
            Judged::Failed {
                failure: Failure::Transport(error),
                class,
            }
        }
    }
}

/// The `retry_on` entry that governs retrying after an error answer of `class` (the provider's failure is
/// a 5xx, a throttle or quota a 429), also after blame memory changed the class.
pub fn error_retry_on(class: Class) -> RetryOn {
    if class == Class::ProviderFailure {
        RetryOn::Status5xx
    } else {
        RetryOn::Status429
    }
}

/// Judges an HTTP answer (`status`, `body`) to the call sent under `id`.
pub fn judge_answer(status: u16, body: Vec<u8>, id: u64, is_write: bool, dialect: Dialect) -> Judged {
    let ok_status = (200..300).contains(&status);
    match check_response(&body, id) {
        Ok(a) if a.is_error => {
            let class = classify_rpc_error_in(dialect, status, &body[a.value.clone()], is_write);
            Judged::Answer {
                body,
                value: a.value,
                is_error: true,
                status,
                class,
            }
        }
        Ok(a) if ok_status => Judged::Answer {
            body,
            value: a.value,
            is_error: false,
            status,
            class: Class::Success,
        },
        // A result under a failing status: the status wins (a proxy's cached page, a half-broken node).
        _ if !ok_status => Judged::Failed {
            class: classify_http(status, &body),
            failure: Failure::Status(status),
        },
        Ok(_) => unreachable!("a result under a 2xx is an answer"),
        // Not JSON-RPC under a 2xx: the provider's, unless its text says throttled or out of quota (a CDN's
        // "error code: 1015" page served with 200).
        Err(why) => Judged::Failed {
            class: classify_http(status, &body),
            failure: Failure::Malformed {
                status,
                why,
                bytes: body.len(),
            },
        },
    }
}

impl Judged {
    pub fn class(&self) -> Class {
        match self {
            Judged::Answer { class, .. } | Judged::Failed { class, .. } => *class,
        }
    }

    /// Why this exchange failed or was throttled, as metrics, `/status` and the log name it (`None` for an
    /// answer, or for what is nobody's failure yet). The status wins over the body: a 401 with a JSON-RPC
    /// error in it is `http_401`.
    pub fn reason(&self) -> Option<Reason> {
        match self {
            Judged::Failed {
                failure: Failure::Transport(e),
                ..
            } => e.reason(),
            Judged::Failed { class, .. } if *class == Class::QuotaExhausted => Some(Reason::Quota),
            Judged::Failed {
                failure: Failure::Status(status),
                ..
            } => Some(Reason::of_status(*status)),
            Judged::Failed {
                failure: Failure::Malformed { why, status, .. },
                class,
            } => Some(match (why, class) {
                (_, Class::Throttled) if *status == 429 => Reason::Http429,
                (_, Class::Throttled) => Reason::Throttled,
                (InvalidResponse::WrongId, _) => Reason::WrongId,
                _ => Reason::Malformed,
            }),
            Judged::Answer { status, class, .. } => match class {
                Class::ProviderFailure | Class::Throttled if !(200..300).contains(status) => {
                    Some(Reason::of_status(*status))
                }
                Class::ProviderFailure => Some(Reason::RpcError),
                Class::Throttled => Some(Reason::Throttled),
                Class::QuotaExhausted => Some(Reason::Quota),
                _ => None,
            },
        }
    }

    /// Whether any byte of the call may have reached the provider (only a transport failure before
    /// sending says no).
    pub fn maybe_sent(&self) -> bool {
        match self {
            Judged::Failed {
                failure: Failure::Transport(e),
                ..
            } => e.maybe_sent(),
            _ => true,
        }
    }

    /// Which `policy.retry.retry_on` entry allows a read to be tried again after this; `None` when no
    /// entry governs it (a malformed answer: always another provider's turn).
    pub fn retry_on(&self) -> Option<RetryOn> {
        match self {
            Judged::Failed {
                failure: Failure::Transport(TransportError::Timeout { .. }),
                ..
            } => Some(RetryOn::Timeout),
            Judged::Failed {
                failure: Failure::Transport(_),
                ..
            } => Some(RetryOn::ConnectionReset),
            Judged::Failed {
                failure: Failure::Malformed { .. },
                ..
            } => None,
            Judged::Failed {
                failure: Failure::Status(status),
                class,
            } => Some(if *status == 429 || *class == Class::Throttled {
                RetryOn::Status429
            } else {
                RetryOn::Status5xx
            }),
            Judged::Answer { class, .. } => Some(error_retry_on(*class)),
        }
    }

    /// Logs what a broken answer looked like: the reason and size, never the body (it may carry another
    /// caller's data). At most one line per provider every few seconds (`causes`): a provider answering
    /// garbage under load is not a log storm.
    pub fn log_broken(
        &self,
        causes: &CauseLog,
        now_ms: impl FnOnce() -> u64,
        network: &str,
        provider: &str,
        method: &str,
    ) {
        let broken = matches!(
            self,
            Judged::Failed {
                failure: Failure::Transport(TransportError::Malformed(_)) | Failure::Malformed { .. },
                ..
            }
        );
        if !broken || causes.may_log(now_ms()).is_none() {
            return;
        }
        match self {
            Judged::Failed {
                failure: Failure::Transport(TransportError::Malformed(why)),
                ..
            } => tracing::warn!(network, provider, method, why, "malformed upstream response"),
            Judged::Failed {
                failure: Failure::Malformed { status, why, bytes },
                ..
            } => tracing::warn!(network, provider, method, status, bytes, %why, "malformed upstream answer"),
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
