//! One read a subscription makes through the normal routing path (breakers, retries): the blocks a heads
//! backfill or a reorg's walk fetches, the logs a logs topic missed.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::call::outcome::{CallOutcome, Caller};
use crate::call::pipeline::forward;
use crate::routing::route::NetworkRoute;
use prism_wire::rpc::Call;

/// One read through the normal routing path (breakers, retries).
pub(super) async fn fetch(route: &NetworkRoute, method: &str, params: &str) -> Option<Vec<u8>> {
    let call = Call {
        id: Some(b"1"),
        method: method.into(),
        params: Some(params.as_bytes()),
    };
    let ids = Cell::new(1 << 51); // exact as a JavaScript number (< 2^53): JS nodes parse ids as doubles
    let deadline = Instant::now() + Duration::from_secs(5);
    match forward(route, &call, &Caller::default(), deadline, &ids).await {
        CallOutcome::Answer {
            body,
            value,
            is_error: false,
            ..
        } => Some(body[value].to_vec()),
        _ => None,
    }
}
