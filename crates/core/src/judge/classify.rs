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
// The table.

/// One rule: matches when `code` (if set) equals the error's code and every phrase occurs in its text.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub code: Option<i64>,
    /// Lowercase; all must occur. Empty means the code alone decides.
    pub phrases: &'static [&'static str],
    pub class: Class,
}

const fn p(phrases: &'static [&'static str], class: Class) -> Rule {
    Rule {
        code: None,
        phrases,
        class,
    }
}

const fn cp(code: i64, phrases: &'static [&'static str], class: Class) -> Rule {
    Rule {
        code: Some(code),
        phrases,
        class,
    }
}

const fn c(code: i64, class: Class) -> Rule {
    Rule {
        code: Some(code),
        phrases: &[],
        class,
    }
}

use Class::{
    DataUnavailable as Data, ProviderFailure as Fail, QuotaExhausted as Quota, Throttled as Throttle,
    TooLarge as Large, Unknown, Unsupported as Unsup, UserError as User,
};

/// The JSON-RPC error rules, first match wins. See the module docs for why the order is what it is.
pub static RPC_RULES: &[Rule] = &[
    // 1. Reverts: the rest of the text is the contract's and may contain any phrase below.
    p(&["revert"], User), // execution reverted[: reason], VM Exception ... revert, transaction reverted
    p(&["vm execution error"], User),
    p(&["invalid opcode"], User),
    // 2. Not on this provider's plan (mentions tiers/upgrades, so before billing).
    p(&["not available on the free tier"], Unsup), // Alchemy: "trace_block is not available on the Free tier - upgrade to ..."
    p(&["not included in your current plan"], Unsup),
    p(&["not available on your plan"], Unsup),
    // Monthly quotas: a long park.
    p(&["monthly capacity"], Quota), // Alchemy "Monthly capacity limit exceeded. Visit .../billing to upgrade your scaling policy"
    p(&["monthly request"], Quota),
    p(&["monthly limit"], Quota),
    p(&["monthly quota"], Quota),
    // Per-second throttles (QuickNode says "upgrade your account", so before billing).
    p(&["request limit reached"], Throttle), // QuickNode -32007 "300/second request limit reached - reduce calls per second or upgrade ..."
    p(&["/second"], Throttle),
    p(&["per second"], Throttle), // Alchemy 429 "exceeded its compute units per second capacity"
    p(&["credits limited"], Throttle), // QuickNode -32012 "credits limited to 6000/sec"
    p(&["requests limited to"], Throttle),
    p(&["rps limit"], Throttle), // Chainstack "You've exceeded the RPS limit available on the current plan."
    // Billing: a long park.
    p(&["billing"], Quota),
    p(&["upgrade your plan"], Quota),
    p(&["free tier"], Quota),
    p(&["payment required"], Quota),
    p(&["ran out of cu"], Quota), // NodeReal MegaNode -32005 "ran out of cu"
    p(&["out of credits"], Quota),
    // 3. Transaction validation: the user's, before anything that says "limit".
    p(&["nonce too low"], User),
    p(&["nonce too high"], User),
    p(&["nonce is too"], User), // execution-apis -38010/-38011 "Transactions nonce is too low", Besu "nonce is too distant"
    p(&["nonce has max value"], User), // geth eth_simulateV1 -32603 "err: nonce has max value: ..." (a state override)
    p(&["correct nonce"], User), // ganache "the tx doesn't have the correct nonce"
    p(&["invalid transaction nonce"], User), // Arbitrum
    p(&["nonce has already been used"], User),
    p(&["oldnonce"], User), // Nethermind
    p(&["noncegap"], User), // Nethermind
    p(&["invalid nonce"], User),
    p(&["already known"], User),
    p(&["alreadyknown"], User), // Nethermind
    p(&["known transaction"], User),
    p(&["already imported"], User),
    p(&["underpriced"], User),              // (replacement) transaction underpriced
    p(&["less than block base fee"], User), // max fee per gas / fee cap less than block base fee
    p(&["max fee per gas"], User),
    p(&["max priority fee per gas"], User),
    p(&["maxfeepergas"], User), // execution-apis -32005 "Transactions maxFeePerGas is too low" (not a rate limit)
    p(&["basefeepergas"], User), // execution-apis -38012 "Transactions baseFeePerGas is too low"
    p(&["gas price below"], User), // Besu -32009 "Gas price below configured minimum gas price"
    p(&["gas price too low"], User), // Arbitrum
    p(&["feetoolow"], User),    // Nethermind
    p(&["intrinsic gas"], User), // intrinsic gas too low
    p(&["gas too low"], User),
    p(&["out of gas"], User),
    p(&["gas required exceeds allowance"], User),
    p(&["gas limit"], User), // exceeds block gas limit, Transaction cost exceeds current gas limit (QuickNode -32010)
    p(&["exceeds the configured cap"], User), // tx fee (x ether) exceeds the configured cap (1.00 ether)
    p(&["insufficient funds"], User),
    p(&["insufficientfunds"], User), // Nethermind
    p(&["insufficient balance"], User),
    p(&["upfront cost exceeds"], User), // Besu -32004 "Upfront cost exceeds account balance"
    p(&["not enough funds"], User),     // Arbitrum "not enough funds for gas"
    p(&["invalid sender"], User),
    p(&["invalid signature"], User),
    p(&["invalid chain id"], User),
    p(&["only replay-protected"], User), // only replay-protected (EIP-155) transactions allowed over RPC
    p(&["oversized data"], User),
    p(&["negative value"], User),
    p(&["initcode size"], User),
    p(&["init code size"], User), // execution-apis -38025 "Max init code size exceeded"
    p(&["sender not an eoa"], User),
    p(&["sender is not an eoa"], User),           // execution-apis -38024
    p(&["transaction type not supported"], User), // the chain's rule, the same at every provider
    p(&["tx type not supported"], User),
    p(&["rlp:"], User), // undecodable raw transaction
    p(&["typed transaction too short"], User),
    p(&["invalid block range"], User), // geth "invalid block range params" (from > to), not "too wide"
    // eth_simulateV1's input rules (execution-apis -380xx): the simulated blocks are the caller's.
    p(&["block numbers must be in order"], User),    // geth -38020
    p(&["block number in sequence"], User),          // execution-apis -38020
    p(&["block timestamps must be in order"], User), // geth -38021
    p(&["block timestamp in sequence"], User),       // execution-apis -38021
    p(&["moveprecompiletoaddress"], User),           // execution-apis -38022/-38023
    p(&["is not a precompile"], User),               // geth -32000 "account 0x.. is not a precompile"
    p(&["already overridden"], User),
    p(&["genesis is not traceable"], User), // geth debug_traceBlock* of block 0
    p(&["filter not found"], User),         // filters live where they were made
    // 4a. This provider lacks the data: lagging or pruned.
    p(&["header not found"], Data),
    p(&["missing trie node"], Data),
    p(&["unknown block"], Data),         // also Alchemy's code 3 "Unknown block"
    p(&["block not found"], Data),       // Erigon "block not found 21772057", "finalized block not found"
    p(&["block 0x", "not found"], Data), // geth debug_traceBlockByHash "block 0x.. not found"
    p(&["could not find block"], Data),
    p(&["pending block is not available"], Data),
    p(&["beyond current head"], Data), // reth "block range extends beyond current head block"
    p(&["block is out of range"], Data), // proxyd
    p(&["after last accepted block"], Data),
    p(&["historical state", "not available"], Data), // geth path scheme "historical state <root> is not available"
    p(&["historical state unavailable"], Data),      // "required historical state unavailable (reexec=128)"
    p(&["state histories haven't been fully indexed"], Data),
    p(&["no state available"], Data),
    p(&["unknown state"], Data), // "Unknown state. First available state is 9305"
    p(&["pruned"], Data),
    p(&["not currently canonical"], Data),
    p(&["requested data is not available"], Data),
    p(&["height is not available"], Data),
    p(&["transaction not found"], Data),
    // 4b. The request asks for too much: return it; before the generic "limit exceeded" throttle.
    p(&["returned more than"], Large), // Infura -32005 "query returned more than 10000 results"
    p(&["more than", "results"], Large),
    p(&["max results"], Large),             // reth "query exceeds max results 20000"
    p(&["query exceeds limit"], Large),     // Nitro "logs matched by query exceeds limit of 10000"
    p(&["range", "exceeds limit"], Large),  // Infura -32602 "range 1000000 exceeds limit of 10000"
    p(&["block range is too wide"], Large), // Ankr -32600
    p(&["range is too wide"], Large),
    p(&["range is too large"], Large),
    p(&["range too large"], Large),
    p(&["block range too"], Large), // "block range too high"
    p(&["range limit"], Large),     // Chainstack "Block range limit exceeded.", "bigger than range limit 2000"
    p(&["max block range"], Large),
    p(&["maximum block range"], Large), // "exceed maximum block range: 5000"
    p(&["blocks distance"], Large),     // Ankr "maximum [from, to] blocks distance: 10000"
    p(&["max range"], Large),
    p(&["exceeds the range"], Large), // Blast "exceeds the range allowed for your plan (10001 > 10000)"
    p(&["limited to a"], Large),      // QuickNode/Blast "eth_getLogs is limited to a 10,000 range"
    p(&["limited to", "block"], Large),
    p(&["block range"], Large), // Alchemy "up to a 2K block range", "this block range should work", "bigger than maxBlockRange"
    p(&["too many blocks"], Large), // also geth eth_simulateV1 -38026
    p(&["client adjustable limit"], Large), // execution-apis -38026 "Client adjustable limit exceeded"
    p(&["limit the query to"], Large),
    p(&["query must be smaller than"], Large),
    p(&["response size"], Large), // Alchemy "Log response size exceeded", 1rpc "response size should not greater than"
    p(&["response too large"], Large), // proxyd -32020 "backend response too large"; Prism's own -32005
    p(&["answer too large"], Large), // Prism's own -32003 (limits.max_answer_bytes)
    p(&["query timeout exceeded"], Large), // Infura -32005: the query ran past its 10 s budget
    p(&["batch size"], Large),
    p(&["batch limit"], Large),
    p(&["specify less number of address"], Large),
    p(&["request entity too large"], Large),
    p(&["payload too large"], Large),
    // 4c. Throttles: park, do not count.
    p(&["rate limit"], Throttle),    // rate limited / over rate limit / request rate limited
    p(&["rate exceeded"], Throttle), // Infura "project ID request rate exceeded"
    p(&["too many requests"], Throttle),
    p(&["too many concurrent"], Throttle),
    p(&["throttl"], Throttle),
    p(&["exceeded", "capacity"], Throttle),
    p(&["quota"], Throttle),
    p(&["limit exceeded"], Throttle), // BSC/EIP-1474 -32005 "limit exceeded"
    p(&["request limit"], Throttle),
    p(&["error code: 1015"], Throttle), // Cloudflare
    p(&["under too much load"], Throttle),
    p(&["txpool is full"], Throttle),
    p(&["queue full"], Throttle), // Arbitrum "queue full", "sequencer pending tx pool full, please try again"
    p(&["tx pool full"], Throttle),
    // 5. Not served by this provider.
    p(&["does not exist/is not available"], Unsup), // geth -32601 "the method x does not exist/is not available"
    p(&["method not found"], Unsup),
    p(&["unsupported method"], Unsup), // Alchemy -32600 "Unsupported method: x. See available methods at ..."
    p(&["method not supported"], Unsup),
    p(&["not whitelisted"], Unsup),
    p(&["method", "not allowed"], Unsup),
    p(&["method", "disabled"], Unsup),
    p(&["method", "not available"], Unsup),
    p(&["unknown method"], Unsup),
    p(&["does not support"], Unsup), // MegaNode -32004 "method x does not support"
    p(&["not supported"], Unsup),
    p(&["not implemented"], Unsup),
    // The call's own time budget on the node (eth_call's RPCEVMTimeout, a tracer's timeout): a heavy call hits
    // it everywhere, a slow node alone; only a second opinion tells which.
    p(&["execution aborted"], Unknown), // geth "execution aborted (timeout = 5s)"
    p(&["execution timeout"], Unknown), // geth tracers, eth_simulateV1 -32016 "execution timeout"
    p(&["tracer timeout"], Unknown),
    p(&["tracing timeout"], Unknown),
    // Provider-side failures.
    p(&["timed out"], Fail), // geth -32002 "request timed out"
    p(&["timeout"], Fail),   // MegaNode "timeout"
    p(&["deadline exceeded"], Fail),
    p(&["handler crashed"], Fail), // Erigon "method handler crashed"
    p(&["internal error"], Fail),
    p(&["internal server error"], Fail),
    p(&["server error"], Fail),
    p(&["unauthorized"], Fail), // a bad key is the provider entry's fault
    p(&["authenticate"], Fail), // Alchemy "Must be authenticated!", Ankr "You must authenticate your request"
    p(&["api key"], Fail),      // Ankr -32052 "API key is not allowed to access blockchain"
    p(&["project id"], Fail),   // Infura "invalid project id"
    p(&["whitelist"], Fail),    // MegaNode -32002 "IP address x is not on whitelist"
    p(&["forbidden"], Fail),
    p(&["access denied"], Fail),
    p(&["no backend"], Fail), // proxyd -32011 "no backend is currently healthy to serve traffic"
    p(&["no healthy upstream"], Fail),
    p(&["upstream connect error"], Fail),
    p(&["bad gateway"], Fail),
    p(&["service unavailable"], Fail),
    p(&["temporarily unavailable"], Fail),
    p(&["connection refused"], Fail),
    p(&["connection reset"], Fail),
    p(&["dial tcp"], Fail), // Nitro forwarding to its sequencer failed
    p(&["no such host"], Fail),
    p(&["error sending request"], Fail), // reth forwarding to its sequencer failed
    // Invalid arguments (after the rows above, which name specific ones).
    p(&["invalid argument"], User), // geth "invalid argument 0: hex string without 0x prefix"
    p(&["invalid params"], User),   // Nethermind, Reth (jsonrpsee), Besu "Invalid params"
    p(&["invalid input"], User),    // Besu
    p(&["invalid type:"], User),    // Reth/serde "invalid type: string \"x\", expected ..."
    p(&["invalid request"], User),
    p(&["parse error"], User),
    p(&["cannot unmarshal"], User),
    p(&["hex string"], User),
    p(&["missing value"], User),
    p(&["too many arguments"], User),
    // 6. Codes.
    c(3, User),       // execution reverted (geth, Nitro, Alchemy)
    c(-32700, User),  // parse error
    c(-32600, User),  // invalid request
    c(-32602, User),  // invalid params
    c(-32601, Unsup), // method not found
    c(-32004, Unsup), // EIP-1474 method not supported
    c(-32612, Unsup), // QuickNode: method not on the plan
    c(-32613, Unsup),
    c(-32603, Fail),     // internal error
    c(-32011, Fail),     // proxyd: no backend
    c(-32052, Fail),     // Ankr: key not allowed on this chain
    c(-32005, Throttle), // EIP-1474 limit exceeded (Infura, BSC)
    c(-32007, Throttle), // QuickNode request limit
    c(-32009, Throttle), // QuickNode
    c(-32012, Throttle), // QuickNode credits
    c(-32016, Throttle), // proxyd / Base over rate limit
    c(-32029, Throttle), // TheRPC
    c(429, Throttle),    // Alchemy puts the HTTP status in the code
    c(-32614, Large),    // QuickNode / Base getLogs range
    c(-32020, Large),    // proxyd backend response too large
    c(-32001, Data),     // EIP-1474 resource not found
    c(-32002, Data),     // EIP-1474 resource unavailable
    c(-32003, User),     // EIP-1474 transaction rejected
    c(-32010, User),     // QuickNode / Nethermind: transaction rejected by the pool
    c(-32015, User),     // execution-apis: VM execution error
    c(-38010, User),     // execution-apis eth_simulateV1: nonce too low
    c(-38011, User),     // nonce too high
    c(-38012, User),     // base fee too low
    c(-38013, User),     // intrinsic gas
    c(-38014, User),     // insufficient funds
    c(-38015, User),     // block gas limit exceeded
    c(-38020, User),     // block numbers out of order
    c(-38021, User),     // block timestamps out of order
    c(-38022, User),     // MovePrecompileToAddress referenced itself
    c(-38023, User),     // MovePrecompileToAddress twice to one address
    c(-38024, User),     // sender is not an EOA
    c(-38025, User),     // max init code size exceeded
    c(-38026, Large),    // client adjustable limit exceeded
];

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
