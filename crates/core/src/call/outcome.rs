//! What a call comes to, and who is asking: the answer (the upstream's bytes) or why there is none, with the
//! JSON-RPC codes clients see. Every part of the pipeline (retry loop, dedupe, cache, submissions, the Solana
//! router, the edge) speaks these types.

use std::ops::Range;

use prism_config::{Strategy, Weights};
use prism_transport::validate::InvalidResponse;
use prism_transport::TransportError;

use crate::live::marks::MarkKey;
use prism_wire::rpc::ProviderId;

/// Where an answer came from, for the diagnostic headers (`x-prism-cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    /// Asked upstream for this call.
    #[default]
    Upstream,
    /// No upstream call: the cache, or what Prism knows itself (`eth_chainId`).
    Hit,
    /// Shared with an identical call already in flight.
    Join,
}

/// How an answer was got: who answered, after how many attempts, from where, hedged or not. Small and
/// `Copy`: it rides along with the answer and costs nothing when nobody reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct How {
    /// The provider whose bytes these are (none for Prism's own answers).
    pub provider: Option<ProviderId>,
    /// Upstream attempts this call made (0 when it made none).
    pub attempts: u8,
    pub source: Source,
    /// A hedge was sent for this call.
    pub hedged: bool,
    /// Providers that agreed on this answer byte for byte (a verified read, `core::call::verify`); 0 = not
    /// verified.
    pub verified: u8,
}

impl How {
    /// An answer from provider `p`.
    pub fn from(p: ProviderId) -> How {
        How {
            provider: Some(p),
            ..How::default()
        }
    }
}

/// The answer to one call.
#[derive(Debug)]
pub enum CallOutcome {
    /// A valid JSON-RPC response: `body[value]` is the `result` or `error` value.
    Answer {
        body: Vec<u8>,
        value: Range<usize>,
        is_error: bool,
        how: How,
    },
    Failed(ProxyError),
}

impl CallOutcome {
    /// An answer Prism made itself (or copied out of a shared one): all of `value` is the `result` value,
    /// or the `error` value when `is_error`.
    pub fn whole(value: Vec<u8>, is_error: bool) -> CallOutcome {
        let len = value.len();
        CallOutcome::Answer {
            body: value,
            value: 0..len,
            is_error,
            how: How::default(),
        }
    }

    /// How the answer was got (`None` for a failure).
    pub fn how(&self) -> Option<How> {
        match self {
            CallOutcome::Answer { how, .. } => Some(*how),
            CallOutcome::Failed(_) => None,
        }
    }

    /// The same outcome with its `How` changed by `f` (a failure is returned as it is).
    pub fn with_how(mut self, f: impl FnOnce(&mut How)) -> CallOutcome {
        if let CallOutcome::Answer { how, .. } = &mut self {
            f(how);
        }
        self
    }

    /// A `result` Prism made itself.
    pub fn result(value: Vec<u8>) -> CallOutcome {
        CallOutcome::whole(value, false)
    }

    /// The `result` value of a successful answer; `None` for an error object or a failure.
    pub fn result_value(&self) -> Option<&[u8]> {
        match self {
            CallOutcome::Answer {
                body,
                value,
                is_error: false,
                ..
            } => Some(&body[value.clone()]),
            _ => None,
        }
    }
}

/// Why Prism could not get an answer. A provider is named by its [`ProviderId`] in the network's route (no
/// name is copied on a failure); [`ProxyError::shown`] names it when the message is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyError {
    /// Every provider's breaker is open (or none is usable): answered at once.
    AllDown {
        providers_open: usize,
        retry_after_ms: u64,
    },
    Transport {
        provider: ProviderId,
        error: TransportError,
    },
    Status {
        provider: ProviderId,
        status: u16,
    },
    BadResponse {
        provider: ProviderId,
        why: InvalidResponse,
    },
    /// A write was sent and its answer lost (timeout, reset, broken answer): it may or may not have landed.
    WriteOutcomeUnknown {
        provider: ProviderId,
        tx: TxRef,
    },
    /// The method cannot be served this way (e.g. subscriptions over HTTP).
    Unsupported(&'static str),
    NotServed(&'static str),
    /// Refused by Prism before any upstream saw it, with the JSON-RPC code a node would use.
    Rejected {
        code: i32,
        message: String,
    },
    /// A verified read: the providers asked answered differently (`core::call::verify`).
    Disagreement {
        providers: Vec<ProviderId>,
        /// The block they were asked at, when Prism pinned one.
        block: Option<u64>,
    },
    /// A verified read: fewer providers than the quorum answered.
    ShortOfQuorum {
        answered: usize,
        quorum: usize,
    },
    /// The key spent its fair share of the only usable provider's quota (`core::live::quota`): not sent.
    OverShare {
        provider: ProviderId,
        retry_after_ms: u64,
    },
}

impl ProxyError {
    /// The JSON-RPC error code the client sees.
    pub fn code(&self) -> i32 {
        match self {
            ProxyError::Unsupported(_) => -32601,
            ProxyError::Rejected { code, .. } => *code,
            ProxyError::WriteOutcomeUnknown { .. } => WRITE_OUTCOME_UNKNOWN,
            ProxyError::Disagreement { .. } => DISAGREEMENT,
            ProxyError::ShortOfQuorum { .. } => SHORT_OF_QUORUM,
            ProxyError::OverShare { .. } => -32005,
            ProxyError::Transport {
                error: TransportError::TooLarge { .. },
                ..
            } => RESPONSE_TOO_LARGE,
            _ => -32603,
        }
    }

    /// Over `limits.max_response_bytes` (`max`): `what` is the answer that was, in the client's terms.
    pub fn response_too_large(max: usize, what: &str) -> ProxyError {
        ProxyError::Rejected {
            code: RESPONSE_TOO_LARGE,
            message: response_too_large_message(max, what),
        }
    }
}

/// One code per size limit, so a client can tell which one it hit (docs/CONFIGURATION.md, `[limits]`). Over
/// `limits.max_response_bytes` (one upstream answer, or an `eth_getLogs` merged from parts): EIP-1474's
/// "limit exceeded", the code providers give a too-wide `eth_getLogs`.
pub const RESPONSE_TOO_LARGE: i32 = -32005;
/// Over `limits.max_answer_bytes` (everything one request is answered with, a whole batch): geth's code
/// for its own batch answer limit.
pub const ANSWER_TOO_LARGE: i32 = -32003;

/// The message of [`RESPONSE_TOO_LARGE`]: names the limit and its value, then what was over it.
pub fn response_too_large_message(max: usize, what: &str) -> String {
    format!("Response too large: {what} exceeds limits.max_response_bytes ({max} bytes); ask for less")
}

/// The message of [`ANSWER_TOO_LARGE`].
pub fn answer_too_large_message(max: usize) -> String {
    format!(
        "Answer too large: the answers to this request exceed limits.max_answer_bytes ({max} bytes); ask for less or split the batch"
    )
}

/// A verified read (`core::call::verify`): the providers asked answered differently.
pub const DISAGREEMENT: i32 = -32097;
/// A verified read: fewer providers than the quorum answered.
pub const SHORT_OF_QUORUM: i32 = -32096;

/// Distinct code for "your transaction may have been sent": poll `data.txHash`, do not resend blindly.
pub const WRITE_OUTCOME_UNKNOWN: i32 = -32098;

/// What a client can poll for a write whose answer was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxRef {
    /// The transaction hash Prism computed from the raw bytes (`data.txHash`).
    Hash(String),
    /// A Solana transaction's first signature (`data.signature`).
    Signature(String),
    /// A known submission whose hash only the node knows (`eth_sendTransaction`): `data.txHash` is null.
    Unknown,
    /// A method the table does not know, sent once because it may change state.
    Method,
}

/// The providers of one network by [`ProviderId`]: what turns an error's ids into the names its message
/// shows (`NetworkRoute` is one; a test may use a list of names).
pub trait ProviderNames {
    fn provider_name(&self, p: ProviderId) -> &str;
}

impl<S: AsRef<str>> ProviderNames for [S] {
    fn provider_name(&self, p: ProviderId) -> &str {
        self.get(p.index()).map_or("?", AsRef::as_ref)
    }
}

impl ProxyError {
    /// The message the client sees, with providers named by `names` (the route the call went through).
    pub fn shown<'a, N: ProviderNames + ?Sized>(&'a self, names: &'a N) -> Shown<'a, N> {
        Shown { error: self, names }
    }

    /// The provider this error names, if it names one.
    pub fn provider(&self) -> Option<ProviderId> {
        match self {
            ProxyError::Transport { provider, .. }
            | ProxyError::Status { provider, .. }
            | ProxyError::BadResponse { provider, .. }
            | ProxyError::WriteOutcomeUnknown { provider, .. }
            | ProxyError::OverShare { provider, .. } => Some(*provider),
            _ => None,
        }
    }
}

/// A [`ProxyError`] with the names of its network's providers at hand: its `Display` is the client's message.
pub struct Shown<'a, N: ?Sized> {
    error: &'a ProxyError,
    names: &'a N,
}

impl<N: ProviderNames + ?Sized> std::fmt::Display for Shown<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = self.names;
        match self.error {
            ProxyError::AllDown { .. } => f.write_str("No healthy upstream available"),
            ProxyError::Transport {
                error: TransportError::Timeout { .. },
                ..
            } => f.write_str("Upstream timeout"),
            ProxyError::Transport {
                error: TransportError::TooLarge { max },
                ..
            } => f.write_str(&response_too_large_message(*max, "the upstream's answer")),
            ProxyError::Transport { error, .. } => write!(f, "Upstream error: {error}"),
            ProxyError::Status { status, .. } => write!(f, "Upstream error: HTTP {status}"),
            ProxyError::BadResponse { why, .. } => write!(f, "Upstream error: {why}"),
            ProxyError::WriteOutcomeUnknown { tx: TxRef::Method, .. } => f.write_str(
                "The call was cut off after it was sent (timeout or lost connection) and was not sent again: Prism does not know this method, so it may change state and may have taken effect (declare it in the network's methods.read if it is a read)",
            ),
            ProxyError::WriteOutcomeUnknown { .. } => f.write_str(
                "Transaction submission was cut off after it was sent (timeout or lost connection) and no provider knows it yet; it may still land: poll its hash, do not resend blindly",
            ),
            ProxyError::Unsupported(why) | ProxyError::NotServed(why) => f.write_str(why),
            ProxyError::Rejected { message, .. } => f.write_str(message),
            ProxyError::Disagreement { providers, block } => {
                f.write_str("Providers disagree: ")?;
                for (i, p) in providers.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(names.provider_name(*p))?;
                }
                f.write_str(" answered this verified read differently")?;
                match block {
                    Some(b) => write!(f, " at block 0x{b:x}"),
                    None => Ok(()),
                }
            }
            ProxyError::OverShare { provider, .. } => write!(
                f,
                "Quota share exceeded: this key has used its fair share of provider {}'s quota and no other provider is usable; retry after data.retryAfterMs",
                names.provider_name(*provider)
            ),
            ProxyError::ShortOfQuorum { answered, quorum } => write!(
                f,
                "Verified read not answered: it needs {quorum} providers to agree and {answered} could (the others are down, lagging or excluded)"
            ),
        }
    }
}

/// Who is asking, as routing cares: strategy, weights and whose high-water mark applies.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub strategy: Strategy,
    pub weights: Weights,
    pub mark: MarkKey,
    /// The providers this call may use (bit i = provider i). All by default; the Solana router narrows it
    /// to one side (the base layer, or one ephemeral rollup).
    pub providers: u64,
    /// The head (Solana: slot) the answer must come from at least, beyond the mark: Solana's
    /// `minContextSlot`. 0 = none.
    pub floor: u64,
    /// The key's verified reads (`core::call::verify`); off for most keys.
    pub verify: crate::call::verify_rule::VerifyRule,
    /// The key's slot (its index; 0 = no key): its fair share of provider quota, its credits.
    pub key: u32,
}

impl Default for Caller {
    fn default() -> Self {
        Caller {
            strategy: Strategy::Score,
            weights: Weights::default(),
            mark: MarkKey::Key(0),
            providers: u64::MAX,
            floor: 0,
            verify: crate::call::verify_rule::VerifyRule::OFF,
            key: 0,
        }
    }
}
