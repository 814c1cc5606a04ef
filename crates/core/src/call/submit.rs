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
//! - **`eth_sendRawTransactionSync` where the provider lacks it** (declared `sync_submit = "emulate"`, or
//!   learned when it answers the method "not found": `core::call::sync_submit`): the providers that serve it are
//!   preferred; when none is usable, or the one chosen refused the method (so it never took the
//!   transaction), `eth_sendRawTransaction` goes once to a provider that lacks it (the one that refused),
//!   and Prism polls that provider for the receipt until the call's timeout: the receipt, or EIP-7966's
//!   timeout error (code 4, the hash as `data`).
//!
//! Never a second `eth_sendRawTransaction`, and never to a second provider.

use std::cell::Cell;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use prism_telemetry::metrics::Submitted;
use prism_transport::validate::check_response;
use prism_wire::jsonscan::{hex_quantity, nth_element, object_field, plain_str};
use prism_wire::rpc::Call;
use prism_wire::rpc::ProviderId;

use crate::call::ctx::CallCtx;
use crate::call::exchange::Live;
use crate::call::forward::{forward_as, forward_with};
use crate::call::outcome::{CallOutcome, Caller, How, ProxyError, TxRef};
use crate::call::txhash::raw_tx_hash;
use crate::judge::classify::{classify_rpc_error_in, submission_says, Class, SubmissionSays};
use crate::routing::route::NetworkRoute;
pub use crate::routing::route::SubmitLimits;
use prism_wire::rpc::methods::MethodId;
use prism_wire::rpc::wire::write_upstream_call;

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
    pub fn of(id: MethodId) -> Option<Submission> {
        match id {
            MethodId::SendRawTransaction | MethodId::SendRawTransactionConditional => Some(Submission::Raw),
            MethodId::SendRawTransactionSync => Some(Submission::Sync),
            _ => None,
        }
    }
}

/// The deadline for sending, keeping `keep` (at most a third of what is left) for a lookup afterwards.
pub fn send_deadline(deadline: Instant, keep: Duration) -> Instant {
    let left = deadline.saturating_duration_since(Instant::now());
    deadline - keep.min(left / 3)
}

/// A sync submission's own wait: its timeout (`params[1]`, milliseconds as a number or a hex quantity, else
/// the default; at most `sync_max`).
pub fn sync_wait(params: Option<&[u8]>, limits: &SubmitLimits) -> Duration {
    let asked = params.and_then(|p| nth_element(p, 1)).and_then(|t| {
        std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .or_else(|| hex_quantity(t))
    });
    asked
        .filter(|&ms| ms > 0)
        .map_or(limits.sync_default, Duration::from_millis)
        .min(limits.sync_max)
}

/// A sync submission's deadline: its own wait ([`sync_wait`]) plus the way back and the lookup, never less
/// than `deadline`.
pub fn sync_deadline(params: Option<&[u8]>, limits: &SubmitLimits, deadline: Instant, now: Instant) -> Instant {
    deadline.max(now + sync_wait(params, limits) + SYNC_GRACE + limits.lookup)
}

/// Sends an EVM submission whose hash Prism can compute, then settles what its answer leaves open.
pub async fn submit(route: &NetworkRoute, cx: &CallCtx<'_, '_>, kind: Submission) -> CallOutcome {
    let params = cx.call.params;
    let Some(hash) = raw_tx_hash(params) else {
        // Not a raw transaction (the node will say why): nothing to look up.
        return forward_with(&Live, route, cx).await;
    };
    let started = Instant::now();
    let deadline = match kind {
        Submission::Sync => sync_deadline(params, &route.policy.submit, cx.deadline, started),
        Submission::Raw => cx.deadline,
    };
    let send = CallCtx {
        deadline: send_deadline(deadline, route.policy.submit.lookup),
        ..*cx
    };
    let (out, emulated) = match kind {
        Submission::Sync => send_sync(route, &send).await,
        Submission::Raw => (forward_with(&Live, route, &send).await, false),
    };
    let lookup = Lookup {
        route,
        caller: cx.caller,
        hash: &hash,
        ids: cx.ids,
        sent_to: None,
    };
    match out {
        // Emulated: the provider took the transaction (its hash is the answer); the receipt is Prism's to
        // wait for, until the call's own timeout.
        CallOutcome::Answer {
            is_error: false, how, ..
        } if emulated => {
            lookup
                .emulated_receipt(how, started + sync_wait(params, &route.policy.submit))
                .await
        }
        CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { provider, .. }) => {
            lookup.lost(provider, kind, deadline).await
        }
        CallOutcome::Answer {
            ref body,
            ref value,
            is_error: true,
            ..
        } => {
            let says = submission_says(&body[value.clone()]);
            lookup.refused(says, kind, deadline).await.unwrap_or(out)
        }
        out => out,
    }
}

impl Lookup<'_> {
    /// An emulated sync submission the provider took: its receipt, waited for until `by`.
    async fn emulated_receipt(mut self, how: How, by: Instant) -> CallOutcome {
        self.sent_to = how.provider;
        let receipt = self.receipt(by).await;
        self.route.shard.recorder.metrics().sync_emulated(receipt.is_some());
        receipt.map_or_else(|| not_included(self.hash), |r| r.with_how(|h| *h = how))
    }

    /// A submission whose answer was lost after it went to `provider`: looked up until `deadline`.
    async fn lost(mut self, provider: ProviderId, kind: Submission, deadline: Instant) -> CallOutcome {
        self.sent_to = Some(provider);
        let metrics = self.route.shard.recorder.metrics();
        match self.poll(kind, deadline).await {
            Seen::Receipt(answer) => {
                metrics.submitted(Submitted::LostFound);
                answer
            }
            Seen::Known if kind == Submission::Raw => {
                metrics.submitted(Submitted::LostFound);
                hash_answer(self.hash)
            }
            Seen::Known => {
                metrics.submitted(Submitted::LostFound);
                not_included(self.hash)
            }
            Seen::Nothing => {
                metrics.submitted(Submitted::LostUnresolved);
                CallOutcome::Failed(ProxyError::WriteOutcomeUnknown {
                    provider,
                    tx: TxRef::Hash(self.hash.to_string()),
                })
            }
        }
    }

    /// The node refused the submission (`says`): what a client should see instead when the transaction is in
    /// fact known or mined; `None` keeps the node's own answer.
    async fn refused(&self, says: SubmissionSays, kind: Submission, deadline: Instant) -> Option<CallOutcome> {
        let metrics = self.route.shard.recorder.metrics();
        match says {
            SubmissionSays::AlreadyKnown => {
                metrics.submitted(Submitted::AlreadyKnown);
                Some(match kind {
                    Submission::Raw => hash_answer(self.hash),
                    Submission::Sync => match self.poll(kind, deadline).await {
                        Seen::Receipt(answer) => answer,
                        _ => not_included(self.hash),
                    },
                })
            }
            SubmissionSays::NonceTooLow => {
                let answer = self.mined(deadline).await?;
                metrics.submitted(Submitted::MinedBefore);
                Some(match kind {
                    Submission::Sync => answer,
                    Submission::Raw => hash_answer(self.hash),
                })
            }
            SubmissionSays::Underpriced if kind == Submission::Raw => {
                match self.round("eth_getTransactionByHash", deadline).await {
                    Seen::Nothing => None,
                    _ => {
                        metrics.submitted(Submitted::AlreadyKnown);
                        Some(hash_answer(self.hash))
                    }
                }
            }
            SubmissionSays::Underpriced | SubmissionSays::Other => None,
        }
    }
}

/// Sends `eth_sendRawTransactionSync` once: as it is to a provider that serves it (preferred), else as
/// `eth_sendRawTransaction` to one that lacks it. A provider that answers the method "not found" never took
/// the transaction: it is learned to lack the method and gets the `eth_sendRawTransaction` (it alone: one
/// submission, one upstream). Returns the answer and whether it was emulated.
async fn send_sync(route: &NetworkRoute, cx: &CallCtx<'_, '_>) -> (CallOutcome, bool) {
    let now_ms = prism_telemetry::clock::now_ms();
    let (call, caller) = (cx.call, cx.caller);
    let native = route.shard.sync.native(now_ms) & caller.providers;
    let emulate_at = if usable(route, native, now_ms) {
        let native_caller = Caller {
            providers: native,
            ..*caller
        };
        let out = forward_with(
            &Live,
            route,
            &CallCtx {
                caller: &native_caller,
                ..*cx
            },
        )
        .await;
        let refused_by = match &out {
            CallOutcome::Answer {
                body,
                value,
                is_error: true,
                how,
            } if classify_rpc_error_in(route.dialect(), 200, &body[value.clone()], true) == Class::Unsupported => {
                how.provider
            }
            _ => None,
        };
        match refused_by {
            Some(p) if route.shard.sync.learn_lacking(p, now_ms) => {
                tracing::info!(network = %route.name, provider = %route.upstreams[p].name, "the provider lacks eth_sendRawTransactionSync: emulated there");
                p.bit()
            }
            _ => return (out, false),
        }
    } else {
        caller.providers & !native
    };
    // `raw_tx_hash` read the raw transaction from `params[0]`.
    let raw = call.params.and_then(|p| nth_element(p, 0)).unwrap_or(b"null");
    let mut params = Vec::with_capacity(raw.len() + 2);
    params.push(b'[');
    params.extend_from_slice(raw);
    params.push(b']');
    let send = Call {
        id: call.id,
        method: "eth_sendRawTransaction".into(),
        params: Some(&params),
    };
    let raw_info = route.policy.declared.lookup(&send.method);
    let out = forward_as(
        route,
        &send,
        raw_info,
        &Caller {
            providers: emulate_at,
            ..*caller
        },
        cx.deadline,
        cx.ids,
    )
    .await;
    (out, true)
}

/// Whether any provider in `mask` may be sent a call now.
fn usable(route: &NetworkRoute, mask: u64, now_ms: u64) -> bool {
    let live = &route.live;
    ProviderId::all(route.upstreams.len()).any(|i| {
        i.is_in(mask)
            && live.admissible(i)
            && live.providers()[i].breaker.is_closed()
            && !live.providers()[i].is_parked(now_ms)
    })
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
        let unknown_by = deadline.min(Instant::now() + self.route.policy.submit.lookup);
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
            prism_runtime::sleep(ROUND_GAP).await;
        }
    }

    /// An emulated sync submission's receipt: rounds of `eth_getTransactionReceipt` at the provider that
    /// took the transaction (every usable provider, if it is not usable any more) until `until`.
    async fn receipt(&self, until: Instant) -> Option<CallOutcome> {
        loop {
            let at = match self.sent_to {
                Some(p) if usable(self.route, p.bit(), prism_telemetry::clock::now_ms()) => p.bit(),
                _ => u64::MAX,
            };
            if let Seen::Receipt(r) = self.round_at("eth_getTransactionReceipt", until, at).await {
                return Some(r);
            }
            if Instant::now() + ROUND_GAP >= until {
                return None;
            }
            prism_runtime::sleep(ROUND_GAP).await;
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
        self.round_at(method, deadline, u64::MAX).await
    }

    /// [`Lookup::round`] on the usable providers in `mask`.
    async fn round_at(&self, method: &'static str, deadline: Instant, mask: u64) -> Seen {
        let route = self.route;
        let live = &route.live;
        let by = deadline.min(Instant::now() + ROUND_MAX);
        let receipt = method == "eth_getTransactionReceipt";
        let params = format!("[\"{}\"]", self.hash);
        let asks = ProviderId::all(route.upstreams.len()).filter(|&i| {
            i.is_in(self.caller.providers & mask)
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
