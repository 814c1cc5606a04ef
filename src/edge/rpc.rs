//! From a request body to a response body: parse the envelope, forward every call, assemble the replies
//! in request order with each client's own id.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use futures_util::future::join_all;

use super::diagnosis::Diagnosis;
use super::envelope::{Envelope, EnvelopeError, EnvelopeParser, Item};
use super::keys::KeyEntry;
use super::network::Network;
use super::reply::{write_answer, write_error};
use prism_core::call::outcome::{answer_too_large_message, ProviderNames, TxRef, ANSWER_TOO_LARGE};
use prism_core::{CallOutcome, Caller, ProxyError};
use prism_telemetry::metrics::CallResult;
use prism_wire::http1::SpareBufs;
use prism_wire::rpc::methods::method_index;
use prism_wire::rpc::wire::write_json_str;

/// JSON-RPC error codes Prism produces itself.
pub const INVALID_REQUEST: i32 = -32600;
/// Missing/unknown key, network or method not allowed for the key.
pub const UNAUTHORIZED: i32 = -32001;
/// Over the key's rate limit (the code providers use for it), or over a subscription limit.
pub const RATE_LIMITED: i32 = -32005;

/// What the edge writes back.
pub enum BodyReply {
    Body(Vec<u8>),
    /// Only notifications: nothing to return.
    Empty,
    /// Over the key's rate limit: HTTP 429 with `Retry-After`.
    Throttled {
        retry_after_s: u64,
        body: Vec<u8>,
    },
    /// A single call over the key's fair share of the only usable provider's quota (`core::live::quota`):
    /// HTTP 429 with `Retry-After` too, and the JSON-RPC error in the body.
    OverShare {
        retry_after_s: u64,
        body: Vec<u8>,
    },
}

/// Per-shard state the JSON-RPC path needs.
pub struct RpcShard {
    pub parser: RefCell<EnvelopeParser>,
    /// Prism's upstream ids: unique per shard, so a response can be matched to its call.
    pub ids: Cell<u64>,
    /// `limits.max_answer_bytes`: the most one request's answer (a whole batch) may weigh.
    pub max_answer_bytes: Cell<usize>,
    /// Single calls' answer bodies between requests (`edge::server` gives each back once it is written).
    pub answers: SpareBufs,
}

/// The running size of one request's answer. Once it passes the cap nothing more is kept: answers that
/// arrive later are dropped as they come, and the request gets one error instead of a body nobody should
/// hold in memory.
struct AnswerBudget {
    used: Cell<usize>,
    max: usize,
}

/// One HTTP request's context at the edge, the same for every call of a batch: who asks, on which network,
/// until when, and what its answers may weigh.
#[derive(Clone, Copy)]
struct Asked<'a> {
    shard: &'a RpcShard,
    network: &'a Network,
    caller: &'a Caller,
    key: Option<&'a KeyEntry>,
    deadline: Instant,
    budget: &'a AnswerBudget,
    diag: &'a Diagnosis,
}

impl AnswerBudget {
    /// Counts `n` more bytes; false once the total is past the cap.
    fn take(&self, n: usize) -> bool {
        let used = self.used.get().saturating_add(n);
        self.used.set(used);
        used <= self.max
    }

    fn over(&self) -> bool {
        self.used.get() > self.max
    }
}

/// The error sent when a key is over its rate limit.
pub fn write_throttled(out: &mut Vec<u8>, id: Option<&[u8]>, wait_ns: u64) {
    let retry_after_ms = wait_ns.div_ceil(1_000_000);
    let data = format!(r#"{{"retryAfterMs":{retry_after_ms}}}"#);
    write_error(
        out,
        id,
        RATE_LIMITED,
        "Rate limit exceeded for this API key",
        Some(data.as_bytes()),
    );
}

/// Processes one request body: parse, bill the key (one token per call), forward every call.
pub async fn handle_body(
    shard: &RpcShard,
    network: &Network,
    caller: &Caller,
    key: Option<&KeyEntry>,
    body: &[u8],
    deadline: Instant,
    diag: &Diagnosis,
) -> BodyReply {
    let parsed = shard.parser.borrow_mut().parse(body);
    // One token per client call; a batch of n costs n. Retries inside Prism are never billed.
    let cost = match &parsed {
        Ok(Envelope::Batch(items)) => items.len() as u64,
        _ => 1,
    };
    if let Some(key) = key {
        if let Err(wait_ns) = key.admit(prism_telemetry::clock::now_ns(), cost) {
            let mut body = Vec::new();
            write_throttled(&mut body, None, wait_ns);
            return BodyReply::Throttled {
                retry_after_s: wait_ns.div_ceil(1_000_000_000).max(1),
                body,
            };
        }
    }
    let budget = AnswerBudget {
        used: Cell::new(0),
        max: shard.max_answer_bytes.get(),
    };
    let budget = &budget;
    let asked = &Asked {
        shard,
        network,
        caller,
        key,
        deadline,
        budget,
        diag,
    };
    let reply = match parsed {
        Err(e) => Some(envelope_error(&e)),
        Ok(Envelope::Single(item)) => {
            let id = match &item {
                Ok(call) => call.id,
                Err(rejected) => rejected.id,
            };
            let mut out = shard.answers.take_empty();
            let answered = handle_item(asked, item, &mut out).await;
            if budget.over() {
                // One call: its error carries the call's own id, as any other error would.
                shard.answers.give(out);
                return BodyReply::Body(answer_too_large(budget.max, id));
            }
            if answered {
                if let Some(ms) = diag.over_share() {
                    return BodyReply::OverShare {
                        retry_after_s: ms.div_ceil(1000).max(1),
                        body: out,
                    };
                }
                Some(out)
            } else {
                shard.answers.give(out);
                None
            }
        }
        Ok(Envelope::Batch(items)) => {
            diag.mark_batch();
            let replies = join_all(items.into_iter().map(|item| async move {
                // A batch at the limit must not keep the shard from its other connections.
                prism_runtime::yield_if_needed().await;
                let mut out = Vec::new();
                handle_item(asked, item, &mut out).await.then_some(out)
            }))
            .await;
            if budget.over() {
                // A batch gets one error object (id null), as for a batch refused whole.
                return BodyReply::Body(answer_too_large(budget.max, None));
            }
            let mut out = Vec::with_capacity(2 + replies.iter().flatten().map(|r| r.len() + 1).sum::<usize>());
            out.push(b'[');
            for reply in replies.iter().flatten() {
                if out.len() > 1 {
                    out.push(b',');
                }
                out.extend_from_slice(reply);
            }
            out.push(b']');
            // A batch of only notifications gets no body at all (JSON-RPC 2.0 §6).
            (out.len() > 2).then_some(out)
        }
    };
    match reply {
        Some(b) => BodyReply::Body(b),
        None => BodyReply::Empty,
    }
}

fn answer_too_large(max: usize, id: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    write_error(&mut out, id, ANSWER_TOO_LARGE, &answer_too_large_message(max), None);
    out
}

fn envelope_error(e: &EnvelopeError) -> Vec<u8> {
    let mut out = Vec::new();
    write_error(&mut out, None, e.code(), &e.to_string(), None);
    out
}

/// Handles one call; returns whether a reply was written (false for notifications).
async fn handle_item(asked: &Asked<'_>, item: Item<'_>, out: &mut Vec<u8>) -> bool {
    let Asked {
        shard,
        network,
        caller,
        key,
        deadline,
        budget,
        diag,
    } = *asked;
    let started = Instant::now();
    let route = &network.route;
    let metrics = route.shard.recorder.metrics();
    match item {
        Err(rejected) => {
            let message = format!("Invalid Request: {}", rejected.why);
            write_error(out, rejected.id, INVALID_REQUEST, &message, None);
            metrics.call(route.index, usize::MAX, CallResult::Rejected, 0);
            true
        }
        Ok(call) => {
            let method = method_index(&call.method);
            if key.is_some_and(|k| !k.allows(&call.method)) {
                metrics.call(route.index, method, CallResult::Rejected, 0);
                let Some(id) = call.id else { return false };
                let message = format!("Method {} is not allowed for this API key", call.method);
                write_error(out, Some(id), UNAUTHORIZED, &message, None);
                return true;
            }
            let outcome = network.forward(&call, caller, deadline, &shard.ids).await;
            diag.note(outcome.how());
            if let CallOutcome::Failed(ProxyError::OverShare { retry_after_ms, .. }) = &outcome {
                diag.note_over_share(*retry_after_ms);
            }
            let latency_us = started.elapsed().as_micros() as u64;
            let result = match &outcome {
                CallOutcome::Answer { is_error: false, .. } => CallResult::Ok,
                CallOutcome::Answer { is_error: true, .. } => CallResult::RpcError,
                CallOutcome::Failed(_) => CallResult::Failed,
            };
            metrics.call(route.index, method, result, latency_us);
            tracing::debug!(network = %route.name, method = %call.method, result = ?result, latency_us, "call");
            let Some(id) = call.id else { return false };
            match outcome {
                // Past the cap the answer is dropped here, before it is copied anywhere.
                CallOutcome::Answer { value, .. } if !budget.take(48 + id.len() + value.len()) => {}
                CallOutcome::Answer {
                    body, value, is_error, ..
                } => write_answer(out, id, is_error, &body[value]),
                CallOutcome::Failed(e) => write_proxy_error(out, Some(id), &e, &**route),
            }
            true
        }
    }
}

/// A failed call's error object: its code, its message and its `data`, providers named by `names` (the
/// route the call went through).
pub(crate) fn write_proxy_error<N: ProviderNames + ?Sized>(
    out: &mut Vec<u8>,
    id: Option<&[u8]>,
    e: &ProxyError,
    names: &N,
) {
    write_error(
        out,
        id,
        e.code(),
        &e.shown(names).to_string(),
        error_data(e, names).as_deref(),
    );
}

/// The `data` member of an error Prism makes: what a client can act on, never params or results.
fn error_data<N: ProviderNames + ?Sized>(e: &ProxyError, names: &N) -> Option<Vec<u8>> {
    let mut d = Vec::new();
    match e {
        ProxyError::AllDown {
            providers_open,
            retry_after_ms,
        } => {
            d.extend_from_slice(br#"{"providersOpen":"#);
            d.extend_from_slice(itoa::Buffer::new().format(*providers_open).as_bytes());
            d.extend_from_slice(br#","retryAfterMs":"#);
            d.extend_from_slice(itoa::Buffer::new().format(*retry_after_ms).as_bytes());
            d.push(b'}');
        }
        ProxyError::WriteOutcomeUnknown { provider, tx } => {
            d.extend_from_slice(br#"{"provider":"#);
            write_json_str(&mut d, names.provider_name(*provider));
            match tx {
                TxRef::Hash(h) => {
                    d.extend_from_slice(br#","txHash":"#);
                    write_json_str(&mut d, h);
                }
                TxRef::Signature(s) => {
                    d.extend_from_slice(br#","signature":"#);
                    write_json_str(&mut d, s);
                }
                TxRef::Unknown => d.extend_from_slice(br#","txHash":null"#),
                TxRef::Method => {}
            }
            d.extend_from_slice(br#","sent":true}"#);
        }
        ProxyError::Transport { provider, .. }
        | ProxyError::Status { provider, .. }
        | ProxyError::BadResponse { provider, .. } => {
            d.extend_from_slice(br#"{"provider":"#);
            write_json_str(&mut d, names.provider_name(*provider));
            d.push(b'}');
        }
        ProxyError::Disagreement { providers, block } => {
            d.extend_from_slice(br#"{"providers":["#);
            for (i, p) in providers.iter().enumerate() {
                if i > 0 {
                    d.push(b',');
                }
                write_json_str(&mut d, names.provider_name(*p));
            }
            d.push(b']');
            if let Some(b) = block {
                d.extend_from_slice(format!(r#","block":"0x{b:x}""#).as_bytes());
            }
            d.push(b'}');
        }
        ProxyError::OverShare {
            provider,
            retry_after_ms,
        } => {
            d.extend_from_slice(br#"{"provider":"#);
            write_json_str(&mut d, names.provider_name(*provider));
            d.extend_from_slice(format!(r#","retryAfterMs":{retry_after_ms}}}"#).as_bytes());
        }
        ProxyError::ShortOfQuorum { answered, quorum } => {
            d.extend_from_slice(format!(r#"{{"answered":{answered},"quorum":{quorum}}}"#).as_bytes());
        }
        ProxyError::Unsupported(_) | ProxyError::NotServed(_) | ProxyError::Rejected { .. } => return None,
    }
    Some(d)
}

#[cfg(test)]
#[path = "rpc_tests.rs"]
mod tests;
