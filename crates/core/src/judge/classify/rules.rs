//! The JSON-RPC error rules the classifier reads top to bottom, first match wins (the order and why it is
//! what it is: the module doc of `classify`). A row is `p(phrases, class)`, `cp(code, phrases, class)` or
//! `c(code, class)`; every row is checked against real provider bodies in tests/fixtures/errors/corpus.jsonl.

use super::Class;

/// One rule: matches when `code` (if set) equals the error's code and every phrase occurs in its text.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub code: Option<i64>,
    /// Lowercase; all must occur. Empty means the code alone decides.
    pub phrases: &'static [&'static str],
    pub class: Class,
}

pub(super) const fn p(phrases: &'static [&'static str], class: Class) -> Rule {
    Rule {
        code: None,
        phrases,
        class,
    }
}

pub(super) const fn cp(code: i64, phrases: &'static [&'static str], class: Class) -> Rule {
    Rule {
        code: Some(code),
        phrases,
        class,
    }
}

pub(super) const fn c(code: i64, class: Class) -> Rule {
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
    // A JavaScript TypeError from the node's own code (ganache 7 answers a receipt asked for while its block
    // is being saved with -32700 "Cannot read properties of undefined (reading 'toJSON')"): Prism wrote the
    // request, so no code on it makes this the client's; another provider, or the same a moment later, answers.
    p(&["cannot read properties of"], Fail),
    p(&["cannot read property"], Fail),
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
