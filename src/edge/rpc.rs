//! From a request body to a response body: parse the envelope, forward every call, assemble the replies
//! in request order with each client's own id.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use futures_util::future::join_all;

use super::envelope::{Envelope, EnvelopeError, EnvelopeParser, Item};
use super::reply::{write_answer, write_error};
use crate::core::forward::write_json_str;
use crate::core::{forward, CallOutcome, Caller, NetworkRoute, ProxyError};

/// JSON-RPC error codes Prism produces itself.
pub const INVALID_REQUEST: i32 = -32600;

/// Per-shard state the JSON-RPC path needs.
pub struct RpcShard {
    pub parser: RefCell<EnvelopeParser>,
    /// Prism's upstream ids: unique per shard, so a response can be matched to its call.
    pub ids: Cell<u64>,
}

/// Processes one request body. Returns the response body, or `None` when nothing is to be returned
/// (only notifications).
pub async fn handle_body(
    shard: &RpcShard,
    route: &NetworkRoute,
    caller: &Caller,
    body: &[u8],
    deadline: Instant,
) -> Option<Vec<u8>> {
    let parsed = shard.parser.borrow_mut().parse(body);
    match parsed {
        Err(e) => Some(envelope_error(&e)),
        Ok(Envelope::Single(item)) => {
            let mut out = Vec::new();
            handle_item(shard, route, caller, item, deadline, &mut out)
                .await
                .then_some(out)
        }
        Ok(Envelope::Batch(items)) => {
            let replies = join_all(items.into_iter().map(|item| async move {
                let mut out = Vec::new();
                handle_item(shard, route, caller, item, deadline, &mut out)
                    .await
                    .then_some(out)
            }))
            .await;
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
    }
}

fn envelope_error(e: &EnvelopeError) -> Vec<u8> {
    let mut out = Vec::new();
    write_error(&mut out, None, e.code(), &e.to_string(), None);
    out
}

/// Handles one call; returns whether a reply was written (false for notifications).
async fn handle_item(
    shard: &RpcShard,
    route: &NetworkRoute,
    caller: &Caller,
    item: Item<'_>,
    deadline: Instant,
    out: &mut Vec<u8>,
) -> bool {
    match item {
        Err(rejected) => {
            let message = format!("Invalid Request: {}", rejected.why);
            write_error(out, rejected.id, INVALID_REQUEST, &message, None);
            true
        }
        Ok(call) => {
            let outcome = forward(route, &call, caller, deadline, &shard.ids).await;
            let Some(id) = call.id else { return false };
            match outcome {
                CallOutcome::Answer { body, value, is_error } => write_answer(out, id, is_error, &body[value]),
                CallOutcome::Failed(e) => {
                    write_error(out, Some(id), e.code(), &e.to_string(), error_data(&e).as_deref())
                }
            }
            true
        }
    }
}

/// The `data` member of an error Prism makes: what a client can act on, never params or results.
fn error_data(e: &ProxyError) -> Option<Vec<u8>> {
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
        ProxyError::WriteOutcomeUnknown { provider, tx_hash } => {
            d.extend_from_slice(br#"{"provider":"#);
            write_json_str(&mut d, provider);
            d.extend_from_slice(br#","txHash":"#);
            match tx_hash {
                Some(h) => write_json_str(&mut d, h),
                None => d.extend_from_slice(b"null"),
            }
            d.extend_from_slice(br#","sent":true}"#);
        }
        ProxyError::Transport { provider, .. }
        | ProxyError::Status { provider, .. }
        | ProxyError::BadResponse { provider, .. } => {
            d.extend_from_slice(br#"{"provider":"#);
            write_json_str(&mut d, provider);
            d.push(b'}');
        }
        ProxyError::Unsupported(_) | ProxyError::NotServed(_) => return None,
    }
    Some(d)
}
