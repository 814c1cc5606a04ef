//! Reading an upstream's answer (its `result`, an error's `message`, the `context.slot`) and making the
//! router's own: answers are the upstream's bytes, so the router only peeks into them, and the few answers
//! it writes itself (merged, local, refused) are made here.

use prism_core::call::outcome::{CallOutcome, ProxyError};
use prism_wire::jsonscan::{object_field, plain_u64};

pub(super) fn rejected(code: i32, message: String) -> CallOutcome {
    CallOutcome::Failed(ProxyError::Rejected { code, message })
}

/// The node's "invalid params" code, for params the router itself cannot read.
pub(super) fn invalid(message: String) -> CallOutcome {
    rejected(-32602, message)
}

/// An answer the router made itself.
pub(super) fn local(result: Vec<u8>) -> CallOutcome {
    CallOutcome::result(result)
}

/// The raw `message` of an error answer (quotes included).
pub(super) fn error_message(out: &CallOutcome) -> Option<&[u8]> {
    match out {
        CallOutcome::Answer {
            body,
            value,
            is_error: true,
            ..
        } => object_field(&body[value.clone()], "message"),
        _ => None,
    }
}

/// The `context.slot` of a successful answer.
pub(super) fn answer_slot(out: &CallOutcome) -> Option<u64> {
    CallOutcome::result_value(out)
        .and_then(|r| object_field(r, "context"))
        .and_then(|c| object_field(c, "slot"))
        .and_then(plain_u64)
}
