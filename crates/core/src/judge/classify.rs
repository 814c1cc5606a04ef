//! Error classifier: what an upstream exchange means for routing and health.
//!
//! Pure functions, no I/O. A transport error, an HTTP status with an unusable body, or a JSON-RPC error
//! object becomes one [`Class`], which decides whether the provider's breaker counts it, whether it is
//! parked, whether a read may go elsewhere, and whether the client gets the answer as it came.
//!
//! JSON-RPC errors are decided by one static table ([`RPC_RULES`]) of `(code, phrases, class)` rows read
//! top to bottom, first match wins. A row matches when its code (if any) equals the error's code and every
//! one of its phrases occurs, case-insensitively, in the error's text: `message` plus every string inside
//! `data` (a string, or an object such as `{"message": ..}` / `{"payload": ..}`). Phrase rows come before
//! code rows, and within phrases the order settles the overlaps:
//!
//! 1. reverts first: a revert reason is the contract's own text and may say anything ("rate limit", ...);
//! 2. methods gated by plan, monthly quotas, per-second throttles, then billing: the plan and per-second
//!    texts mention tiers and upgrades, so they go before "free tier" / "upgrade your plan";
//! 3. transaction validation (gas, fees, nonces, funds) before anything that says "limit";
//! 4. missing data, then request-too-large (specific range/size wordings before the generic
//!    "limit exceeded" throttle), then throttles;
//! 5. unsupported methods, provider-side failures, invalid arguments;
//! 6. codes; then the default: a write's unknown error is the user's; a read's is [`Class::Unknown`].
//!
//! Blame needs evidence: a well-formed error in a well-formed 2xx answer is the client's unless a rule
//! says it is the provider's. An error no rule knows on a read (and the execution/tracer time budgets,
//! which a heavy call and a slow node both hit) is `Unknown`: `forward` asks one other provider for a
//! second opinion before blaming anyone, and `core::judge::blame` remembers the verdict.
//!
//! The corpus in `tests/fixtures/errors/corpus.jsonl` holds real provider bodies with the class each must
//! get; `classify/tests.rs` checks every row.

use prism_telemetry::metrics::AttemptResult;
use prism_transport::TransportError;
use prism_wire::jsonscan::depth_at_most;
use simd_json::prelude::*;
use simd_json::BorrowedValue;

/// What an upstream exchange means for routing and health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// A result, including a receipt with `status: 0x0` and a `null` result.
    Success,
    /// The provider's fault: counts toward its breaker; a read may be retried elsewhere.
    ProviderFailure,
    /// Rate limited (429, "rate limit", -32005, per-second quotas): park the provider, do not count.
    Throttled,
    /// Billing, "upgrade your plan", free tier, monthly capacity: a long park, not counted as a failure.
    QuotaExhausted,
    /// The method is not served by this provider (not found, not whitelisted, not on the plan): reroute
    /// once, do not count.
    Unsupported,
    /// This provider lacks the data (header not found, missing trie node, unknown block: lagging or
    /// pruned): prefer a deeper provider, do not count.
    DataUnavailable,
    /// The request asks for too much (block range too wide, too many results, response too large): return
    /// to the client; never retried, never counted.
    TooLarge,
    /// A correct answer to a wrong call (revert, out of gas, nonce too low, invalid params, ...): return
    /// as it came; never counted, never retried.
    UserError,
    /// Nobody knows yet whose fault this error is (no rule knows it, on a read): ask one other provider
    /// before blaming anyone. Never counted by itself; never produced for a write.
    Unknown,
}

impl Class {
    /// Every class, in declaration order.
    pub const ALL: [Class; 9] = [
        Class::Success,
        Class::ProviderFailure,
        Class::Throttled,
        Class::QuotaExhausted,
        Class::Unsupported,
        Class::DataUnavailable,
        Class::TooLarge,
        Class::UserError,
        Class::Unknown,
    ];

    /// A stable name for logs and metrics (the variant's name).
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Success => "Success",
            Class::ProviderFailure => "ProviderFailure",
            Class::Throttled => "Throttled",
            Class::QuotaExhausted => "QuotaExhausted",
            Class::Unsupported => "Unsupported",
            Class::DataUnavailable => "DataUnavailable",
            Class::TooLarge => "TooLarge",
            Class::UserError => "UserError",
            Class::Unknown => "Unknown",
        }
    }

    /// Whether the exchange counts toward the provider's breaker.
    pub const fn counts_as_failure(self) -> bool {
        matches!(self, Class::ProviderFailure)
    }

    /// Whether a read may be tried on another provider after this.
    pub const fn read_may_go_elsewhere(self) -> bool {
        matches!(
            self,
            Class::ProviderFailure
                | Class::Throttled
                | Class::QuotaExhausted
                | Class::Unsupported
                | Class::DataUnavailable
                | Class::Unknown
        )
    }

    /// What the exchange was for health and metrics: the provider's failure, a throttle, rerouted (not this
    /// provider's to answer, or not settled yet), or an answer (a user error too: the provider worked).
    pub const fn attempt_result(self) -> AttemptResult {
        match self {
            Class::ProviderFailure => AttemptResult::Failed,
            Class::Throttled | Class::QuotaExhausted => AttemptResult::Throttled,
            Class::Unsupported | Class::DataUnavailable | Class::Unknown => AttemptResult::Rerouted,
            Class::Success | Class::UserError | Class::TooLarge => AttemptResult::Ok,
        }
    }

    /// Whether the upstream's answer goes to the client as it came.
    pub const fn is_final_answer(self) -> bool {
        matches!(self, Class::Success | Class::TooLarge | Class::UserError)
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every transport error is the provider's fault, except a response over `limits.max_response_bytes`:
/// that is the request asking for too much (a wide `eth_getLogs`), the same on every provider, so it must
/// not trip breakers across the pool.
pub fn classify_transport(e: &TransportError) -> Class {
    match e {
        TransportError::TooLarge { .. } => Class::TooLarge,
        // Prism's own connection cap, not the provider: inconclusive for a probe, never counted.
        TransportError::ConnectionLimit { .. } => Class::Unsupported,
        TransportError::Unresolved
        | TransportError::Refused
        | TransportError::Connect(_)
        | TransportError::Tls(_)
        | TransportError::Timeout { .. }
        | TransportError::Reset { .. }
        | TransportError::Malformed(_) => Class::ProviderFailure,
    }
}

/// A response whose body is not a JSON-RPC answer we can use (HTML, plain text, empty, truncated), by
/// status and body text: 429 → `Throttled`; 402 or billing text → `QuotaExhausted`; 413 → `TooLarge`
/// (our request was too big for it); 401/403/404/405, other 4xx and 5xx → `ProviderFailure` (a bad key is
/// the provider entry's fault). Rate-limit text ("error code: 1015", "too many requests") makes any status
/// `Throttled`, including a 2xx whose body is not JSON-RPC.
pub fn classify_http(status: u16, body: &[u8]) -> Class {
    let text = lowercase_prefix(body, MAX_TEXT);
    let hint = http_hint(&text);
    match status {
        429 => match hint {
            Some(Class::QuotaExhausted) => Class::QuotaExhausted,
            _ => Class::Throttled,
        },
        402 => Class::QuotaExhausted,
        413 => Class::TooLarge,
        _ => hint.unwrap_or(Class::ProviderFailure),
    }
}

/// A JSON-RPC error object (`{"code":..,"message":..,"data":..}`, raw bytes) by the rule table. `is_write`
/// decides the default for an error no row knows (the user's for a write, [`Class::Unknown`] for a read)
/// and what an `Unknown` row means for a write (the provider's, as a write is never asked twice).
pub fn classify_rpc_error(error: &[u8], is_write: bool) -> Class {
    rpc_ruling(&ErrorText::from_bytes(error), is_write, Dialect::Evm).class
}

/// Which network's errors these are: Solana's codes mean other things than the same codes on EVM nodes, so
/// a solana-magic network reads [`solana::SOLANA_RULES`] before the shared table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    Evm,
    Solana,
}

/// A JSON-RPC error object that came with HTTP `status`: the table's verdict, reconciled with the status.
/// 2xx: the table. 429: `Throttled` (or `QuotaExhausted` when the text says billing). 5xx: the table when
/// a phrase decided it or the code says throttled/quota/failure, else `ProviderFailure`. Other 4xx: the
/// table when a phrase decided it; by code alone 401/403/404/405 are `ProviderFailure`, 402
/// `QuotaExhausted`, 413 `TooLarge`; with neither, [`classify_http`].
pub fn classify_rpc_error_with_status(status: u16, error: &[u8], is_write: bool) -> Class {
    classify_rpc_error_in(Dialect::Evm, status, error, is_write)
}

/// [`classify_rpc_error_with_status`] in a network's dialect.
pub fn classify_rpc_error_in(dialect: Dialect, status: u16, error: &[u8], is_write: bool) -> Class {
    let ruling = rpc_ruling(&ErrorText::from_bytes(error), is_write, dialect);
    reconcile(status, ruling, error)
}

// ---------------------------------------------------------------------------------------------------------
// The table: `classify/rules.rs`.

mod rules;
use rules::{c, cp, p};
pub use rules::{Rule, RPC_RULES};

// ---------------------------------------------------------------------------------------------------------
// Matching.

/// How much of an error's text (or an HTTP body) is looked at.
const MAX_TEXT: usize = 16 * 1024;

/// Deepest upstream JSON handed to simd-json, which builds values (and drops them) recursively: a body
/// nested 100 000 deep would overflow the shard's stack. Deeper ones are read as raw text.
const MAX_PARSE_DEPTH: usize = 512;

/// The parts of an error the rules look at.
#[derive(Debug, Default)]
struct ErrorText {
    code: Option<i64>,
    /// Lowercase: `message`, then every string in `data` (and any other member), newline-separated.
    text: String,
}

impl ErrorText {
    fn from_bytes(error: &[u8]) -> ErrorText {
        let mut copy = error.to_vec();
        let value = if depth_at_most(error, MAX_PARSE_DEPTH) {
            simd_json::to_borrowed_value(&mut copy).ok()
        } else {
            None
        };
        match value {
            Some(value) => ErrorText::from_value(&value),
            // Not JSON we can read (1e400, truncated, nested too deep): look at the raw text.
            None => ErrorText {
                code: None,
                text: lowercase_prefix(error, MAX_TEXT),
            },
        }
    }

    fn from_value(value: &BorrowedValue<'_>) -> ErrorText {
        let mut out = ErrorText::default();
        match value.as_object() {
            Some(obj) => {
                out.code = obj.get("code").and_then(as_code);
                if let Some(m) = obj.get("message") {
                    push_strings(&mut out.text, m, 0);
                }
                for (k, v) in obj.iter() {
                    if k != "message" && k != "code" {
                        push_strings(&mut out.text, v, 0);
                    }
                }
            }
            // A bare string or anything else: its strings are the text.
            None => push_strings(&mut out.text, value, 0),
        }
        out
    }
}

fn as_code(v: &BorrowedValue<'_>) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    if let Some(f) = v.as_f64() {
        if f.fract() == 0.0 && f.abs() < 1e15 {
            return Some(f as i64);
        }
    }
    v.as_str().and_then(|s| s.trim().parse().ok())
}

/// Appends every string in `v` (depth-limited), lowercased, newline-separated, up to `MAX_TEXT` bytes.
fn push_strings(out: &mut String, v: &BorrowedValue<'_>, depth: usize) {
    if out.len() >= MAX_TEXT || depth > 4 {
        return;
    }
    if let Some(s) = v.as_str() {
        if !out.is_empty() {
            out.push('\n');
        }
        let room = MAX_TEXT - out.len();
        let s = if s.len() > room {
            &s[..floor_char_boundary(s, room)]
        } else {
            s
        };
        out.extend(s.chars().flat_map(char::to_lowercase));
    } else if let Some(a) = v.as_array() {
        for x in a.iter() {
            push_strings(out, x, depth + 1);
        }
    } else if let Some(o) = v.as_object() {
        for (_, x) in o.iter() {
            push_strings(out, x, depth + 1);
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn lowercase_prefix(bytes: &[u8], max: usize) -> String {
    let bytes = &bytes[..bytes.len().min(max)];
    String::from_utf8_lossy(bytes).to_lowercase()
}

/// What decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Phrase,
    Code,
    Default,
}

/// What the rule table says of an error, and what decided it (a phrase, a code, or the default).
#[derive(Debug, Clone, Copy)]
struct Ruling {
    class: Class,
    by: By,
}

fn rule_matches(rule: &Rule, e: &ErrorText) -> bool {
    let code_ok = match rule.code {
        Some(code) => e.code == Some(code),
        None => true,
    };
    code_ok && rule.phrases.iter().all(|ph| e.text.contains(ph))
}

/// The first matching rule, or the default.
fn rpc_ruling(e: &ErrorText, is_write: bool, dialect: Dialect) -> Ruling {
    let first: &[Rule] = match dialect {
        Dialect::Evm => &[],
        Dialect::Solana => solana::SOLANA_RULES,
    };
    for rule in first.iter().chain(RPC_RULES) {
        if rule_matches(rule, e) {
            let by = if rule.phrases.is_empty() { By::Code } else { By::Phrase };
            // A write is never asked twice, so nobody can give a second opinion: as before, the provider's.
            let class = match rule.class {
                Class::Unknown if is_write => Class::ProviderFailure,
                class => class,
            };
            return Ruling { class, by };
        }
    }
    Ruling {
        class: if is_write { Class::UserError } else { Class::Unknown },
        by: By::Default,
    }
}

/// What a node's error to a transaction submission says about that very transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmissionSays {
    /// It is already in the node's pool (or chain): "already known", "known transaction", ALREADY_EXISTS.
    AlreadyKnown,
    /// The sender's nonce moved past it: this transaction, or another with its nonce, landed.
    NonceTooLow,
    /// "(replacement) transaction underpriced": a transaction with its nonce is in the pool, which some nodes
    /// (ganache) also answer for an exact duplicate.
    Underpriced,
    Other,
}

/// Reads a submission's error value (`{"code":..,"message":..}` bytes) for [`SubmissionSays`].
pub fn submission_says(error: &[u8]) -> SubmissionSays {
    let e = ErrorText::from_bytes(error);
    let t = e.text.as_str();
    let known = t.contains("already known")
        || t.contains("alreadyknown") // Nethermind
        || (t.contains("known transaction") && !t.contains("unknown transaction")) // Besu, OpenEthereum
        || t.contains("already imported")
        || t.contains("already_exists") // gRPC-style gateways
        || t.contains("transaction already exists")
        || t.contains("tx already exist")
        || t.contains("already in the mempool")
        || t.contains("already in mempool")
        || t.contains("already in the pool")
        || t.contains("already been processed") // Agave preflight, AlreadyProcessed
        || t.contains("alreadyprocessed");
    if known {
        return SubmissionSays::AlreadyKnown;
    }
    let low = t.contains("nonce too low")
        || t.contains("nonce is too low")
        || t.contains("oldnonce") // Nethermind
        || t.contains("nonce has already been used")
        || e.code == Some(-38010);
    if low {
        return SubmissionSays::NonceTooLow;
    }
    if t.contains("underpriced") {
        return SubmissionSays::Underpriced;
    }
    SubmissionSays::Other
}

/// Which rule decides `error` (for tests and diagnostics): its index in [`RPC_RULES`], or `None` for the
/// default.
pub fn matching_rule(error: &[u8]) -> Option<usize> {
    let e = ErrorText::from_bytes(error);
    RPC_RULES.iter().position(|r| rule_matches(r, &e))
}

/// In a body that is not JSON-RPC, only throttle and billing text is believed; the first phrase rule that
/// matches decides, and one of another class means "nothing to add" (so a page about a method that is not
/// on the free tier is not read as billing).
fn http_hint(text: &str) -> Option<Class> {
    RPC_RULES
        .iter()
        .filter(|r| !r.phrases.is_empty())
        .find(|r| r.phrases.iter().all(|ph| text.contains(ph)))
        .and_then(|r| match r.class {
            Class::Throttled | Class::QuotaExhausted => Some(r.class),
            _ => None,
        })
}

fn reconcile(status: u16, v: Ruling, body: &[u8]) -> Class {
    // Only a well-formed 2xx answer gets the benefit of the doubt.
    let v = match v.class {
        Class::Unknown if !(200..300).contains(&status) => Ruling {
            class: Class::ProviderFailure,
            ..v
        },
        _ => v,
    };
    match status {
        200..=299 => v.class,
        429 => match v.class {
            Class::QuotaExhausted => Class::QuotaExhausted,
            _ => Class::Throttled,
        },
        500..=599 => match (v.by, v.class) {
            (By::Phrase, class) => class,
            (By::Code, class @ (Class::Throttled | Class::QuotaExhausted | Class::ProviderFailure)) => class,
            _ => Class::ProviderFailure,
        },
        400..=499 => match v.by {
            By::Phrase => v.class,
            By::Code => match status {
                401 | 403 | 404 | 405 => Class::ProviderFailure,
                402 => Class::QuotaExhausted,
                413 => Class::TooLarge,
                _ => v.class,
            },
            By::Default => classify_http(status, body),
        },
        // 1xx/3xx: no answer a node gives; its text may still say throttled.
        _ => classify_http(status, body),
    }
}

pub mod solana;

#[cfg(test)]
mod tests;
