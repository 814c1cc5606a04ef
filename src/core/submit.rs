//! A transaction submission after it was sent: everything Prism does from here is a read. The submission
//! itself went to exactly one upstream once (`forward`); this settles the answers that leave a client
//! unsure whether its transaction exists:
//!
//! - **Lost answer** (timeout, reset, broken answer after the bytes left): the transaction is looked up by
//!   its locally computed hash on every usable provider, a few short polls in the time kept for it
//!   (`limits.write_lookup_ms`). Found: the client gets the hash (or, for `eth_sendRawTransactionSync`, the
//!   receipt) as a success. Nobody knows it: `-32098` with `data.txHash`.
//! - **"already known"** from the one upstream: the transaction is in that pool; the client's intent holds,
//!   so the hash is the answer (a sync submission waits for its receipt).
//! - **"nonce too low"**: stays the node's error, unless a lookup shows this very transaction mined (a
//!   client resending what already landed): then the hash (or receipt) is the answer.
//! - **"transaction underpriced"**: stays the node's error, unless a lookup shows this very transaction in
//!   a pool (ganache answers an exact duplicate that way): then it is "already known".
//!
//! Never a second `eth_sendRawTransaction`.

use std::cell::Cell;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::jsonscan::{hex_quantity, nth_element, object_field, plain_str};
use crate::rpc::Call;
use crate::rpc::ProviderId;
use crate::telemetry::metrics::Submitted;
use crate::transport::validate::check_response;

use super::classify::{submission_says, SubmissionSays};
use super::forward::forward_as;
use super::outcome::{CallOutcome, Caller, How, ProxyError, TxRef};
use super::route::NetworkRoute;
pub use super::route::SubmitLimits;
use super::txhash::raw_tx_hash;
use crate::rpc::methods::MethodInfo;
use crate::rpc::wire::write_upstream_call;

/// Beyond a sync submission's own wait: the node's answer still has to travel.
const SYNC_GRACE: Duration = Duration::from_millis(2_000);
/// One lookup round waits at most this long for its answers; rounds are this far apart.
const ROUND_MAX: Duration = Duration::from_millis(500);
const ROUND_GAP: Duration = Duration::from_millis(100);

/// EVM submissions whose transaction hash Prism computes itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submission {
    /// `eth_sendRawTransaction`, `eth_sendRawTransactionConditional`: answered with the hash.
    Raw,
    /// `eth_sendRawTransactionSync` (EIP-7966): answered with the receipt.
    Sync,
}

impl Submission {
    pub fn of(method: &str) -> Option<Submission> {
        match method {
            "eth_sendRawTransaction" | "eth_sendRawTransactionConditional" => Some(Submission::Raw),
            "eth_sendRawTransactionSync" => Some(Submission::Sync),
            _ => None,
        }
    }
}

/// The deadline for sending, keeping `keep` (at most a third of what is left) for a lookup afterwards.
pub fn send_deadline(deadline: Instant, keep: Duration) -> Instant {
    let left = deadline.saturating_duration_since(Instant::now());
    deadline - keep.min(left / 3)
}

/// A sync submission's deadline: its own wait (`params[1]`, milliseconds as a number or a hex quantity,
/// else the default; at most `sync_max`) plus the way back and the lookup, never less than `deadline`.
pub fn sync_deadline(params: Option<&[u8]>, limits: &SubmitLimits, deadline: Instant, now: Instant) -> Instant {
    let asked = params.and_then(|p| nth_element(p, 1)).and_then(|t| {
        std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .or_else(|| hex_quantity(t))
    });
    let wait = asked
        .filter(|&ms| ms > 0)
        .map_or(limits.sync_default, Duration::from_millis)
        .min(limits.sync_max);
    deadline.max(now + wait + SYNC_GRACE + limits.lookup)
}

/// Sends an EVM submission whose hash Prism can compute, then settles what its answer leaves open.
pub async fn submit(
    route: &NetworkRoute,
    call: &Call<'_>,
    info: MethodInfo,
    kind: Submission,
    caller: &Caller,
    deadline: Instant,
    ids: &Cell<u64>,
) -> CallOutcome {
    let Some(hash) = raw_tx_hash(call.params) else {
        // Not a raw transaction (the node will say why): nothing to look up.
        return forward_as(route, call, info, caller, deadline, ids).await;
    };
    let deadline = match kind {
        Submission::Sync => sync_deadline(call.params, &route.submit, deadline, Instant::now()),
        Submission::Raw => deadline,
    };
    let out = forward_as(
        route,
        call,
        info,
        caller,
        send_deadline(deadline, route.submit.lookup),
        ids,
    )
    .await;
    let metrics = route.recorder.metrics();
    let mut lookup = Lookup {
        route,
        caller,
        hash: &hash,
        ids,
        sent_to: None,
    };
    match out {
        CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { provider, .. }) => {
            lookup.sent_to = route
                .upstreams
                .iter()
                .position(|u| u.name == provider)
                .map(ProviderId::new);
            match lookup.poll(kind, deadline).await {
                Seen::Receipt(answer) => {
                    metrics.submitted(Submitted::LostFound);
                    answer
                }
                Seen::Known if kind == Submission::Raw => {
                    metrics.submitted(Submitted::LostFound);
                    hash_answer(&hash)
                }
                Seen::Known => {
                    metrics.submitted(Submitted::LostFound);
                    not_included(&hash)
                }
                Seen::Nothing => {
                    metrics.submitted(Submitted::LostUnresolved);
                    CallOutcome::Failed(ProxyError::WriteOutcomeUnknown {
                        provider,
                        tx: TxRef::Hash(hash),
                    })
                }
            }
        }
        CallOutcome::Answer {
            ref body,
            ref value,
            is_error: true,
            ..
        } => match submission_says(&body[value.clone()]) {
            SubmissionSays::AlreadyKnown => {
                metrics.submitted(Submitted::AlreadyKnown);
                match kind {
                    Submission::Raw => hash_answer(&hash),
                    Submission::Sync => match lookup.poll(kind, deadline).await {
                        Seen::Receipt(answer) => answer,
                        _ => not_included(&hash),
                    },
                }
            }
            SubmissionSays::NonceTooLow => match lookup.mined(deadline).await {
                Some(answer) => {
                    metrics.submitted(Submitted::MinedBefore);
                    match kind {
                        Submission::Sync => answer,
                        Submission::Raw => hash_answer(&hash),
                    }
                }
                None => out,
            },
            SubmissionSays::Underpriced if kind == Submission::Raw => {
                match lookup.round("eth_getTransactionByHash", deadline).await {
                    Seen::Nothing => out,
                    _ => {
                        metrics.submitted(Submitted::AlreadyKnown);
                        hash_answer(&hash)
                    }
                }
            }
            SubmissionSays::Underpriced | SubmissionSays::Other => out,
        },
        out => out,
    }
}

/// `"0x…"`: what `eth_sendRawTransaction` answers.
fn hash_answer(hash: &str) -> CallOutcome {
    CallOutcome::result(format!("\"{hash}\"").into_bytes())
}

/// A sync submission in the pool but without a receipt by its deadline: EIP-7966's timeout error (code 4)
/// with the hash as `data`, as a node answers it.
fn not_included(hash: &str) -> CallOutcome {
    let error = format!(
        r#"{{"code":4,"message":"The transaction was added to the transaction pool but was not included in a block within the timeout","data":"{hash}"}}"#
    );
    CallOutcome::whole(error.into_bytes(), true)
}

/// What the providers know of a transaction.
enum Seen {
    Nothing,
    /// In a pool (or mined, where only the hash is wanted).
    Known,
    /// Mined: the receipt (sync), or just "mined" (a hash submission answered `nonce too low`).
    Receipt(CallOutcome),
}

/// Looks one transaction up on every usable provider.
struct Lookup<'a> {
    route: &'a NetworkRoute,
    caller: &'a Caller,
    hash: &'a str,
    ids: &'a Cell<u64>,
    /// The provider the submission went to: asked even if its breaker opened meanwhile.
    sent_to: Option<ProviderId>,
}

impl Lookup<'_> {
    /// Polls until the transaction is found (a receipt, for a sync submission) or `deadline`. A sync
    /// submission whose transaction some pool holds waits for its receipt until `deadline`; one nobody
    /// knows is given up after `limits.write_lookup_ms`, as a hash submission's lookup is.
    async fn poll(&self, kind: Submission, deadline: Instant) -> Seen {
        let unknown_by = deadline.min(Instant::now() + self.route.submit.lookup);
        let mut known = false;
        loop {
            if kind == Submission::Sync {
                if let Seen::Receipt(r) = self.round("eth_getTransactionReceipt", deadline).await {
                    return Seen::Receipt(r);
                }
            }
            if !known {
                match self.round("eth_getTransactionByHash", deadline).await {
                    Seen::Nothing => {}
                    _ if kind == Submission::Raw => return Seen::Known,
                    _ => known = true,
                }
            }
            let until = if known { deadline } else { unknown_by };
            if Instant::now() + ROUND_GAP >= until {
                return if known { Seen::Known } else { Seen::Nothing };
            }
            crate::runtime::sleep(ROUND_GAP).await;
        }
    }

    /// Whether a provider has this transaction mined (one round of receipts).
    async fn mined(&self, deadline: Instant) -> Option<CallOutcome> {
        match self.round("eth_getTransactionReceipt", deadline).await {
            Seen::Receipt(r) => Some(r),
            _ => None,
        }
    }

    /// One round of `method` (`eth_getTransactionReceipt` or `eth_getTransactionByHash`) on every usable
    /// provider at once.
    async fn round(&self, method: &'static str, deadline: Instant) -> Seen {
        let route = self.route;
        let live = &route.live;
        let by = deadline.min(Instant::now() + ROUND_MAX);
        let receipt = method == "eth_getTransactionReceipt";
        let params = format!("[\"{}\"]", self.hash);
        let asks = ProviderId::all(route.upstreams.len()).filter(|&i| {
            i.is_in(self.caller.providers)
                && live.admissible(i)
                && (live.providers()[i].breaker.is_closed() || Some(i) == self.sent_to)
        });
        let answers = join_all(asks.map(|i| {
            let id = self.ids.get();
            self.ids.set(id.wrapping_add(1));
            let mut body = Vec::with_capacity(64 + params.len());
            write_upstream_call(&mut body, id, method, Some(params.as_bytes()));
            async move {
                let resp = route.upstreams[i].pool.post(&body, by, true).await.ok()?;
                let a = check_response(&resp.body, id).ok()?;
                (!a.is_error && (200..300).contains(&resp.status)).then_some((resp.body, a.value))
            }
        }))
        .await;
        let field = if receipt { "transactionHash" } else { "hash" };
        let mut seen = Seen::Nothing;
        for (body, value) in answers.into_iter().flatten() {
            if !names(&body[value.clone()], field, self.hash) {
                continue;
            }
            if receipt {
                return Seen::Receipt(CallOutcome::Answer {
                    body,
                    value,
                    is_error: false,
                    how: How::default(),
                });
            }
            seen = Seen::Known;
        }
        seen
    }
}

/// Whether `result` is an object whose `field` is `hash` (any case).
fn names(result: &[u8], field: &str, hash: &str) -> bool {
    object_field(result, field)
        .and_then(plain_str)
        .is_some_and(|h| h.eq_ignore_ascii_case(hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_deadline_honours_the_call_within_bounds() {
        let limits = SubmitLimits::default();
        let now = Instant::now();
        let base = now + Duration::from_secs(1);
        let extra = SYNC_GRACE + limits.lookup;
        let at = |p: &str| sync_deadline(Some(p.as_bytes()), &limits, base, now);
        assert_eq!(at(r#"["0x00"]"#), now + limits.sync_default + extra);
        assert_eq!(at(r#"["0x00", 5000]"#), now + Duration::from_millis(5000) + extra);
        assert_eq!(at(r#"["0x00", "0x1388"]"#), now + Duration::from_millis(5000) + extra);
        assert_eq!(at(r#"["0x00", 999999999]"#), now + limits.sync_max + extra);
        assert_eq!(at(r#"["0x00", 0]"#), now + limits.sync_default + extra);
        let late = now + Duration::from_secs(600);
        assert_eq!(sync_deadline(Some(b"[\"0x00\", 1]"), &limits, late, now), late);
    }

    #[test]
    fn the_lookup_keeps_at_most_a_third() {
        let deadline = Instant::now() + Duration::from_millis(900);
        let send = send_deadline(deadline, Duration::from_millis(1500));
        let kept = deadline - send;
        assert!(
            kept <= Duration::from_millis(300) && kept >= Duration::from_millis(250),
            "{kept:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        assert_eq!(
            deadline - send_deadline(deadline, Duration::from_millis(1500)),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn a_lookup_answer_must_name_the_hash() {
        let h = "0xAbC";
        assert!(names(br#"{"hash":"0xabc","blockNumber":null}"#, "hash", h));
        assert!(!names(br#"{"hash":"0xabd"}"#, "hash", h));
        assert!(!names(br#""0x0""#, "hash", h));
        assert!(!names(b"null", "hash", h));
    }
}
