//! The method table: every EVM method Prism knows, what kind of call it is, what its answer reveals about
//! the chain head, and whether its answer can ever be cached.
//!
//! Safe by default: a method the table does not know may change state (a vendor's submission, a bundler's
//! user operation, a sequencer's express lane), so it is sent once, like a write: never retried after its
//! bytes left, never joined, hedged or cached. Operators declare their vendor reads (and writes) per network
//! (`[[networks]] methods.read / methods.write`, see [`Declared`]).

use crate::jsonscan::{nth_element, plain_str};

/// How a call may be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Idempotent: may be retried on another provider, deduplicated, sometimes cached.
    Read,
    /// Changes chain state: exactly one upstream, once. Never retried, hedged, deduplicated or cached.
    Write,
    /// Needs a WebSocket (`eth_subscribe`, `eth_unsubscribe`).
    Subscription,
    /// Server-side filter state lives on one provider: sticky to where it was created.
    Filter,
    /// Answered by Prism itself.
    Local,
    /// Not in the table and not declared: handled like a write (one upstream, once; never retried after
    /// bytes left, joined or cached), but with no transaction hash to look up when its answer is lost.
    Unknown,
}

/// The latency family a call belongs to: providers are scored per family, so one slow on wide `eth_getLogs`
/// loses those calls, not everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Cheap lookups: heads, balances, receipts, blocks.
    Light = 0,
    /// EVM execution: `eth_call`, gas estimation, access lists.
    Execute = 1,
    /// Log queries.
    Logs = 2,
    /// Traces and debug.
    Trace = 3,
    /// Transaction submission.
    Submit = 4,
}

impl Family {
    pub const ALL: [Family; 5] = [
        Family::Light,
        Family::Execute,
        Family::Logs,
        Family::Trace,
        Family::Submit,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Family::Light => "light",
            Family::Execute => "execute",
            Family::Logs => "logs",
            Family::Trace => "trace",
            Family::Submit => "submit",
        }
    }
}

/// What an answer says about a provider's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadHint {
    None,
    /// The result is the head height (`eth_blockNumber`).
    ResultIsHead,
    /// The result is a block object whose `number` the provider has.
    BlockNumberField,
}

/// The methods the balancer treats by name (the cache's anchors, local answers, submissions, split
/// `eth_getLogs`): the table's lookup is the one string match, and every stage after it compares this id.
/// Every other method is `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodId {
    Other,
    BlockNumber,
    ChainId,
    NetVersion,
    GetBlockByNumber,
    GetBlockByHash,
    GetTransactionByHash,
    GetTransactionReceipt,
    GetTransactionByBlockHashAndIndex,
    GetTransactionByBlockNumberAndIndex,
    GetBlockTransactionCountByHash,
    GetUncleCountByBlockHash,
    GetUncleByBlockHashAndIndex,
    GetLogs,
    SendRawTransaction,
    SendRawTransactionConditional,
    SendRawTransactionSync,
}

impl MethodId {
    /// The id of an EVM method by its name (the table's lookup; for tests and callers with only a name).
    pub fn of(method: &str) -> MethodId {
        lookup(method).id
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    /// Which method this is, where the balancer handles it by name.
    pub id: MethodId,
    pub kind: Kind,
    pub family: Family,
    pub head: HeadHint,
    /// Index of the block tag/number param (absent = "latest"), for methods that read state at a block.
    pub block_param: Option<usize>,
    /// Whether an answer can ever be cached (pinned to a hash or deep enough below the head).
    pub cacheable: bool,
}

const fn info(kind: Kind, family: Family, head: HeadHint, block_param: Option<usize>, cacheable: bool) -> MethodInfo {
    MethodInfo {
        id: MethodId::Other,
        kind,
        family,
        head,
        block_param,
        cacheable,
    }
}

impl MethodInfo {
    /// This row, for the method `id` names.
    pub const fn named(self, id: MethodId) -> MethodInfo {
        MethodInfo { id, ..self }
    }
}

use Family::*;
use HeadHint::{BlockNumberField, ResultIsHead};
use Kind::*;

const READ: MethodInfo = info(Read, Light, HeadHint::None, None, false);
const SUBMIT: MethodInfo = info(Write, Submit, HeadHint::None, None, false);
const LOCAL: MethodInfo = info(Local, Light, HeadHint::None, None, true);
/// A read of something a hash fixes (a transaction, a block by hash): cacheable, no block parameter.
const BY_HASH_READ: MethodInfo = info(Read, Light, HeadHint::None, None, true);
/// Not in the table: sent once. Scored with execution-like calls (vendor methods mostly are).
pub const UNKNOWN: MethodInfo = info(Unknown, Execute, HeadHint::None, None, false);
/// An operator's declared read: retried and joined like any read, never cached (Prism cannot tell when
/// its answer is final), scored with execution-like calls.
pub const DECLARED_READ: MethodInfo = info(Read, Execute, HeadHint::None, None, false);
/// An operator's declared write.
pub const DECLARED_WRITE: MethodInfo = SUBMIT;

/// Looks a method up in the EVM table; anything it does not know is [`UNKNOWN`].
pub fn lookup(method: &str) -> MethodInfo {
    match method {
        "eth_blockNumber" => info(Read, Light, ResultIsHead, None, false).named(MethodId::BlockNumber),
        "eth_chainId" => LOCAL.named(MethodId::ChainId),
        "net_version" => LOCAL.named(MethodId::NetVersion),
        "eth_getBlockByNumber" => info(Read, Light, BlockNumberField, Some(0), true).named(MethodId::GetBlockByNumber),
        "eth_getBlockByHash" => info(Read, Light, BlockNumberField, None, true).named(MethodId::GetBlockByHash),
        "eth_getBalance" | "eth_getCode" | "eth_getTransactionCount" => {
            info(Read, Light, HeadHint::None, Some(1), true)
        }
        "eth_getStorageAt" | "eth_getProof" => info(Read, Light, HeadHint::None, Some(2), true),
        "eth_call" | "eth_estimateGas" | "eth_createAccessList" => info(Read, Execute, HeadHint::None, Some(1), true),
        "eth_getTransactionByHash" => BY_HASH_READ.named(MethodId::GetTransactionByHash),
        "eth_getTransactionReceipt" => BY_HASH_READ.named(MethodId::GetTransactionReceipt),
        "eth_getBlockReceipts" => info(Read, Light, HeadHint::None, Some(0), true),
        "eth_getTransactionByBlockHashAndIndex" => BY_HASH_READ.named(MethodId::GetTransactionByBlockHashAndIndex),
        "eth_getBlockTransactionCountByHash" => BY_HASH_READ.named(MethodId::GetBlockTransactionCountByHash),
        "eth_getUncleCountByBlockHash" => BY_HASH_READ.named(MethodId::GetUncleCountByBlockHash),
        "eth_getUncleByBlockHashAndIndex" => BY_HASH_READ.named(MethodId::GetUncleByBlockHashAndIndex),
        "eth_getTransactionByBlockNumberAndIndex" => {
            info(Read, Light, HeadHint::None, Some(0), true).named(MethodId::GetTransactionByBlockNumberAndIndex)
        }
        "eth_getBlockTransactionCountByNumber"
        | "eth_getUncleCountByBlockNumber"
        | "eth_getUncleByBlockNumberAndIndex" => info(Read, Light, HeadHint::None, Some(0), true),
        "eth_feeHistory" => info(Read, Light, HeadHint::None, Some(1), false),
        "eth_getLogs" => info(Read, Logs, HeadHint::None, None, true).named(MethodId::GetLogs),
        "eth_gasPrice"
        | "eth_maxPriorityFeePerGas"
        | "eth_blobBaseFee"
        | "eth_syncing"
        | "net_listening"
        | "net_peerCount"
        | "web3_clientVersion"
        | "web3_sha3"
        | "eth_protocolVersion"
        | "eth_accounts"
        | "eth_mining"
        | "eth_hashrate"
        | "eth_coinbase"
        | "eth_getWork"
        | "eth_pendingTransactions"
        | "eth_getRawTransactionByHash"
        | "eth_getTransactionBySenderAndNonce"
        | "eth_getHeaderByHash"
        | "eth_getHeaderByNumber"
        | "rpc_modules"
        | "txpool_content"
        | "txpool_contentFrom"
        | "txpool_inspect"
        | "txpool_status"
        // ERC-4337 bundler reads.
        | "eth_supportedEntryPoints"
        | "eth_getUserOperationByHash"
        | "eth_getUserOperationReceipt" => READ,
        "eth_estimateUserOperationGas" => info(Read, Execute, HeadHint::None, None, false),
        "eth_simulateV1" | "eth_callMany" => info(Read, Execute, HeadHint::None, Some(1), false),
        "eth_sendRawTransaction" => SUBMIT.named(MethodId::SendRawTransaction),
        "eth_sendRawTransactionSync" => SUBMIT.named(MethodId::SendRawTransactionSync),
        "eth_sendRawTransactionConditional" => SUBMIT.named(MethodId::SendRawTransactionConditional),
        "eth_sendTransaction"
        | "eth_sendUserOperation"
        | "eth_sendBundle"
        | "eth_sendPrivateTransaction"
        | "eth_sendPrivateRawTransaction"
        | "eth_cancelPrivateTransaction"
        | "eth_submitWork"
        | "eth_submitHashrate"
        | "eth_sign"
        | "eth_signTransaction"
        | "eth_signTypedData"
        | "eth_signTypedData_v3"
        | "eth_signTypedData_v4"
        | "personal_sign"
        | "personal_sendTransaction" => SUBMIT,
        "eth_subscribe" | "eth_unsubscribe" => info(Subscription, Light, HeadHint::None, None, false),
        "eth_newFilter"
        | "eth_newBlockFilter"
        | "eth_newPendingTransactionFilter"
        | "eth_getFilterChanges"
        | "eth_getFilterLogs"
        | "eth_uninstallFilter" => info(Filter, Light, HeadHint::None, None, false),
        m if m.starts_with("debug_") || m.starts_with("trace_") => {
            let block = match m {
                "debug_traceCall" => Some(1),
                "trace_call" => Some(2),
                "trace_block" | "debug_traceBlockByNumber" => Some(0),
                _ => None,
            };
            info(Read, Trace, HeadHint::None, block, false)
        }
        // Arbitrum's traces (pre-Nitro blocks) and Otterscan's reads.
        m if m.starts_with("arbtrace_") || m.starts_with("ots_") => info(Read, Trace, HeadHint::None, None, false),
        // Timeboost's express lane and its auction: submissions.
        m if m.starts_with("eth_submit") || m.starts_with("timeboost_") || m.starts_with("auctioneer_") => SUBMIT,
        _ => UNKNOWN,
    }
}

/// Every method with its own metrics series; anything else is counted as "other".
pub const KNOWN_METHODS: &[&str] = &[
    "eth_blockNumber",
    "eth_chainId",
    "net_version",
    "eth_getBlockByNumber",
    "eth_getBlockByHash",
    "eth_getBalance",
    "eth_getCode",
    "eth_getTransactionCount",
    "eth_getStorageAt",
    "eth_getProof",
    "eth_call",
    "eth_estimateGas",
    "eth_createAccessList",
    "eth_getTransactionByHash",
    "eth_getTransactionReceipt",
    "eth_getBlockReceipts",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getTransactionByBlockNumberAndIndex",
    "eth_getBlockTransactionCountByHash",
    "eth_getBlockTransactionCountByNumber",
    "eth_getUncleCountByBlockHash",
    "eth_getUncleCountByBlockNumber",
    "eth_getUncleByBlockHashAndIndex",
    "eth_getUncleByBlockNumberAndIndex",
    "eth_feeHistory",
    "eth_getLogs",
    "eth_gasPrice",
    "eth_maxPriorityFeePerGas",
    "eth_blobBaseFee",
    "eth_syncing",
    "net_listening",
    "net_peerCount",
    "web3_clientVersion",
    "web3_sha3",
    "eth_protocolVersion",
    "eth_accounts",
    "eth_sendRawTransaction",
    "eth_sendRawTransactionSync",
    "eth_sendTransaction",
    "eth_sendUserOperation",
    "eth_sendRawTransactionConditional",
    "eth_sendBundle",
    "eth_subscribe",
    "eth_unsubscribe",
    "eth_newFilter",
    "eth_newBlockFilter",
    "eth_newPendingTransactionFilter",
    "eth_getFilterChanges",
    "eth_getFilterLogs",
    "eth_uninstallFilter",
    "debug_traceTransaction",
    "debug_traceCall",
    "debug_traceBlockByNumber",
    "debug_traceBlockByHash",
    "trace_block",
    "trace_call",
    "trace_transaction",
    "trace_filter",
];

/// Reads by hash: their answer does not depend on a block, only on whether the provider has seen it.
pub const BY_HASH: &[&str] = &[
    "eth_getBlockByHash",
    "eth_getTransactionByHash",
    "eth_getTransactionReceipt",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getBlockTransactionCountByHash",
    "eth_getUncleCountByBlockHash",
    "eth_getUncleByBlockHashAndIndex",
];

const _: () = assert!(
    KNOWN_METHODS.len() <= 128,
    "a verified set keeps one bit per known method"
);

/// Whether a method's answer is the same on every honest provider once its block is pinned (a verified
/// read, `core::call::verify`): a read at a block, by hash, or `eth_getLogs`.
pub fn verifiable(method: &str) -> bool {
    let info = lookup(method);
    info.kind == Kind::Read && (info.block_param.is_some() || method == "eth_getLogs" || BY_HASH.contains(&method))
}

/// The methods a key's `verify.methods` names (method names, or the families `light`, `execute`, `logs`,
/// `trace`) as one bit per [`KNOWN_METHODS`] index; `Err((i, why))` for the first name that cannot be
/// verified.
pub fn verified_set(names: &[String]) -> Result<u128, (usize, String)> {
    let mut set = 0u128;
    for (i, name) in names.iter().enumerate() {
        if let Some(family) = Family::ALL.iter().find(|f| f.name() == name) {
            if *family == Family::Submit {
                return Err((i, "submissions are never verified (they are sent once)".into()));
            }
            for (bit, m) in KNOWN_METHODS.iter().enumerate() {
                if verifiable(m) && lookup(m).family == *family {
                    set |= 1 << bit;
                }
            }
            continue;
        }
        let why = match lookup(name).kind {
            Kind::Read if verifiable(name) => {
                set |= 1 << method_index(name);
                continue;
            }
            Kind::Write => "submits transactions: writes are sent once, never verified",
            Kind::Unknown => "is not a method Prism knows (verified reads are for the table's reads)",
            Kind::Read => "cannot be verified: honest providers answer it differently (it is not pinned to a block)",
            _ => "is not a read that can be verified (filters, subscriptions and local answers are not)",
        };
        return Err((i, format!("{name} {why}")));
    }
    Ok(set)
}

/// Index of a method in [`KNOWN_METHODS`], or `KNOWN_METHODS.len()` for "other".
pub fn method_index(method: &str) -> usize {
    static INDEX: std::sync::OnceLock<ahash::AHashMap<&'static str, usize>> = std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| KNOWN_METHODS.iter().enumerate().map(|(i, m)| (*m, i)).collect());
    index.get(method).copied().unwrap_or(KNOWN_METHODS.len())
}

impl Kind {
    /// Sent to one upstream once: a known write or an unknown method.
    pub fn sent_once(self) -> bool {
        matches!(self, Kind::Write | Kind::Unknown)
    }
}

/// Methods an operator declared for one network (`[[networks]] methods.read` and `methods.write`): a
/// declared write is sent once even if the table says read; a declared read is retried and joined where
/// the table does not know it. A known submission can never be declared a read (see [`Declared::new`]).
#[derive(Debug, Default, Clone)]
pub struct Declared {
    reads: ahash::AHashSet<Box<str>>,
    writes: ahash::AHashSet<Box<str>>,
}

/// Why a declaration was refused: the field and the message, for `prism check` and start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DeclaredError {
    pub field: String,
    pub message: String,
}

impl Declared {
    /// Checks and builds one network's declarations. `table` is the network's own method table (the EVM
    /// one, or the Solana router's), `at` the network's config path (`networks[0]`).
    pub fn new(
        at: &str,
        reads: &[String],
        writes: &[String],
        table: impl Fn(&str) -> MethodInfo,
    ) -> Result<Declared, DeclaredError> {
        let err = |list: &str, i: usize, message: String| DeclaredError {
            field: format!("{at}.methods.{list}[{i}]"),
            message,
        };
        let mut out = Declared::default();
        for (list, names) in [("read", reads), ("write", writes)] {
            for (i, name) in names.iter().enumerate() {
                let plausible = !name.is_empty()
                    && name.len() <= 128
                    && name.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
                if !plausible {
                    return Err(err(
                        list,
                        i,
                        format!("{name:?} is not a method name (1-128 printable ASCII characters, no quotes)"),
                    ));
                }
                let set = if list == "read" {
                    &mut out.reads
                } else {
                    &mut out.writes
                };
                if !set.insert(name.as_str().into()) {
                    return Err(err(list, i, format!("{name} is listed twice")));
                }
            }
        }
        for (i, name) in reads.iter().enumerate() {
            if out.writes.contains(name.as_str()) {
                return Err(err("read", i, format!("{name} is declared both a read and a write")));
            }
            if table(name).kind == Kind::Write {
                return Err(err(
                    "read",
                    i,
                    format!("{name} submits transactions: it is sent to exactly one upstream once and cannot be declared a read"),
                ));
            }
        }
        Ok(out)
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty()
    }

    /// `table`'s answer for `method`, with this network's declarations applied.
    pub fn apply(&self, method: &str, table: MethodInfo) -> MethodInfo {
        if self.is_empty() {
            return table;
        }
        if self.writes.contains(method) {
            return DECLARED_WRITE.named(table.id);
        }
        if table.kind == Kind::Unknown && self.reads.contains(method) {
            return DECLARED_READ;
        }
        table
    }

    /// The EVM table with this network's declarations applied.
    pub fn lookup(&self, method: &str) -> MethodInfo {
        self.apply(method, lookup(method))
    }
}

/// The block a state read targets, as far as routing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockRef {
    /// `latest`, `pending`, or no block param: answered from the provider's head.
    Latest,
    /// `earliest`, or a tag Prism does not know.
    Tag,
    /// `safe` or `finalized`: answered from the provider's own view of finality, which providers disagree on.
    Final(Finality),
    Number(u64),
    /// A block hash or an EIP-1898 object.
    Pinned,
    /// Not a block-addressed read.
    NotApplicable,
}

/// The finality tags a read may name, in lane order (`Finality::lane`: 1 safe, 2 finalized; 0 is latest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finality {
    Safe = 0,
    Finalized = 1,
}

impl Finality {
    pub const ALL: [Finality; 2] = [Finality::Safe, Finality::Finalized];

    /// The tag as the JSON-RPC block parameter spells it.
    pub fn tag(self) -> &'static str {
        match self {
            Finality::Safe => "safe",
            Finality::Finalized => "finalized",
        }
    }

    /// Index into per-tag arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Which block a call reads at.
pub fn block_ref(info: &MethodInfo, params: Option<&[u8]>) -> BlockRef {
    let Some(index) = info.block_param else {
        return BlockRef::NotApplicable;
    };
    let Some(raw) = params.and_then(|p| nth_element(p, index)) else {
        return BlockRef::Latest;
    };
    // Compared as raw bytes (this runs for every read). A tag spelt with an escape (`"lat\u0065st"`) is
    // not recognised and reads as `Tag`, as it did when this went through `plain_str`.
    match raw {
        [b'{', ..] => BlockRef::Pinned,
        b"\"latest\"" | b"\"pending\"" | b"null" => BlockRef::Latest,
        b"\"safe\"" => BlockRef::Final(Finality::Safe),
        b"\"finalized\"" => BlockRef::Final(Finality::Finalized),
        b"\"earliest\"" => BlockRef::Tag,
        // A block hash (66 characters with the 0x).
        _ if raw.len() == 68 && plain_str(raw).is_some() => BlockRef::Pinned,
        _ => crate::jsonscan::hex_quantity(raw).map_or(BlockRef::Tag, BlockRef::Number),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_are_indexed() {
        assert_eq!(KNOWN_METHODS[method_index("eth_call")], "eth_call");
        assert_eq!(method_index("no_suchMethod"), KNOWN_METHODS.len());
        let mut sorted = KNOWN_METHODS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), KNOWN_METHODS.len(), "no duplicates");
    }

    #[test]
    fn classes() {
        assert_eq!(lookup("eth_sendRawTransaction").kind, Write);
        assert_eq!(lookup("eth_submitWork").kind, Write);
        assert_eq!(lookup("eth_getFilterChanges").kind, Filter);
        assert_eq!(lookup("eth_subscribe").kind, Subscription);
        assert_eq!(lookup("eth_chainId").kind, Local);
        assert_eq!(lookup("some_unknownMethod").kind, Unknown);
        for m in [
            "eth_sendRawTransactionSync",
            "eth_sendUserOperation",
            "timeboost_sendExpressLaneTransaction",
            "auctioneer_submitBid",
            "eth_signTypedData_v4",
        ] {
            assert_eq!(lookup(m).kind, Write, "{m}");
        }
        assert!(
            lookup("alchemy_getTokenBalances").kind.sent_once(),
            "unknown methods are sent once"
        );
        assert_eq!(lookup("eth_getLogs").family, Logs);
        assert_eq!(lookup("debug_traceTransaction").family, Trace);
        assert!(lookup("eth_sendRawTransaction").kind.sent_once() && !lookup("eth_call").kind.sent_once());
    }

    #[test]
    fn declarations_apply_over_the_table_and_never_make_a_submission_a_read() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let d = Declared::new(
            "networks[0]",
            &names(&["alchemy_getTokenBalances"]),
            &names(&["eth_call"]),
            lookup,
        )
        .unwrap();
        assert_eq!(d.lookup("alchemy_getTokenBalances").kind, Read);
        assert_eq!(d.lookup("eth_call").kind, Write, "a declared write wins over the table");
        assert_eq!(d.lookup("vendor_other").kind, Unknown);
        assert_eq!(d.lookup("eth_getBalance"), lookup("eth_getBalance"));
        let e = Declared::new(
            "networks[1]",
            &names(&["eth_getBalance", "eth_sendRawTransaction"]),
            &[],
            lookup,
        )
        .unwrap_err();
        assert_eq!(e.field, "networks[1].methods.read[1]");
        assert!(e.message.contains("cannot be declared a read"), "{e}");
        let e = Declared::new("networks[0]", &names(&["x_y"]), &names(&["x_y"]), lookup).unwrap_err();
        assert!(e.message.contains("both"), "{e}");
        let e = Declared::new("networks[0]", &names(&["a b"]), &[], lookup).unwrap_err();
        assert!(e.message.contains("not a method name"), "{e}");
        let e = Declared::new("networks[0]", &[], &names(&["w", "w"]), lookup).unwrap_err();
        assert_eq!(e.field, "networks[0].methods.write[1]");
    }

    #[test]
    fn block_refs() {
        let call = lookup("eth_call");
        assert_eq!(block_ref(&call, Some(br#"[{"to":"0x1"}]"#)), BlockRef::Latest);
        assert_eq!(block_ref(&call, Some(br#"[{"to":"0x1"}, "latest"]"#)), BlockRef::Latest);
        assert_eq!(
            block_ref(&call, Some(br#"[{"to":"0x1"}, "0x10"]"#)),
            BlockRef::Number(16)
        );
        assert_eq!(
            block_ref(&call, Some(br#"[{}, {"blockHash":"0xab"}]"#)),
            BlockRef::Pinned
        );
        assert_eq!(
            block_ref(&call, Some(br#"[{}, "finalized"]"#)),
            BlockRef::Final(Finality::Finalized)
        );
        assert_eq!(
            block_ref(&call, Some(br#"[{}, "safe"]"#)),
            BlockRef::Final(Finality::Safe)
        );
        assert_eq!(block_ref(&call, Some(br#"[{}, "earliest"]"#)), BlockRef::Tag);
        let hash = format!(r#"[{{}}, "0x{}"]"#, "ab".repeat(32));
        assert_eq!(block_ref(&call, Some(hash.as_bytes())), BlockRef::Pinned);
        assert_eq!(block_ref(&lookup("eth_blockNumber"), None), BlockRef::NotApplicable);
        assert_eq!(
            block_ref(&lookup("eth_getBlockByNumber"), Some(br#"["pending", false]"#)),
            BlockRef::Latest
        );
        assert_eq!(block_ref(&call, Some(br#"[{}, null]"#)), BlockRef::Latest);
        // A tag spelt with an escape, a number, or a 66-byte string with an escape in it is not recognised:
        // `Tag` (not cached, not held to the latest mark), as before block_ref compared raw bytes.
        assert_eq!(block_ref(&call, Some(br#"[{}, "lat\u0065st"]"#)), BlockRef::Tag);
        assert_eq!(block_ref(&call, Some(br#"[{}, 16]"#)), BlockRef::Tag);
        let escaped = format!(r#"[{{}}, "0x\u0030{}"]"#, "a".repeat(58));
        assert_eq!(nth_element(escaped.as_bytes(), 1).map(<[u8]>::len), Some(68));
        assert_eq!(block_ref(&call, Some(escaped.as_bytes())), BlockRef::Tag);
    }
}
