//! The method table: every EVM method Prism knows, what kind of call it is, what its answer reveals about
//! the chain head, and whether its answer can ever be cached. Unknown methods are forwarded as reads.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
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
        kind,
        family,
        head,
        block_param,
        cacheable,
    }
}

use Family::*;
use HeadHint::{BlockNumberField, ResultIsHead};
use Kind::*;

const READ: MethodInfo = info(Read, Light, HeadHint::None, None, false);

/// Looks a method up; anything unknown is a read.
pub fn lookup(method: &str) -> MethodInfo {
    match method {
        "eth_blockNumber" => info(Read, Light, ResultIsHead, None, false),
        "eth_chainId" | "net_version" => info(Local, Light, HeadHint::None, None, true),
        "eth_getBlockByNumber" => info(Read, Light, BlockNumberField, Some(0), true),
        "eth_getBlockByHash" => info(Read, Light, BlockNumberField, None, true),
        "eth_getBalance" | "eth_getCode" | "eth_getTransactionCount" => {
            info(Read, Light, HeadHint::None, Some(1), true)
        }
        "eth_getStorageAt" | "eth_getProof" => info(Read, Light, HeadHint::None, Some(2), true),
        "eth_call" | "eth_estimateGas" | "eth_createAccessList" => info(Read, Execute, HeadHint::None, Some(1), true),
        "eth_getTransactionByHash" | "eth_getTransactionReceipt" | "eth_getBlockReceipts" => {
            let block = if method == "eth_getBlockReceipts" {
                Some(0)
            } else {
                None
            };
            info(Read, Light, HeadHint::None, block, true)
        }
        "eth_getTransactionByBlockHashAndIndex"
        | "eth_getBlockTransactionCountByHash"
        | "eth_getUncleCountByBlockHash"
        | "eth_getUncleByBlockHashAndIndex" => info(Read, Light, HeadHint::None, None, true),
        "eth_getTransactionByBlockNumberAndIndex"
        | "eth_getBlockTransactionCountByNumber"
        | "eth_getUncleCountByBlockNumber"
        | "eth_getUncleByBlockNumberAndIndex" => info(Read, Light, HeadHint::None, Some(0), true),
        "eth_feeHistory" => info(Read, Light, HeadHint::None, Some(1), false),
        "eth_getLogs" => info(Read, Logs, HeadHint::None, None, true),
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
        | "eth_coinbase" => READ,
        "eth_sendRawTransaction"
        | "eth_sendTransaction"
        | "eth_sendRawTransactionConditional"
        | "eth_sendBundle"
        | "eth_sendPrivateTransaction"
        | "eth_submitWork"
        | "eth_submitHashrate"
        | "eth_sign"
        | "eth_signTransaction" => info(Write, Submit, HeadHint::None, None, false),
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
        m if m.starts_with("eth_submit") => info(Write, Submit, HeadHint::None, None, false),
        _ => READ,
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
    "eth_sendTransaction",
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

/// Index of a method in [`KNOWN_METHODS`], or `KNOWN_METHODS.len()` for "other".
pub fn method_index(method: &str) -> usize {
    static INDEX: std::sync::OnceLock<ahash::AHashMap<&'static str, usize>> = std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| KNOWN_METHODS.iter().enumerate().map(|(i, m)| (*m, i)).collect());
    index.get(method).copied().unwrap_or(KNOWN_METHODS.len())
}

/// Shorthand for the exactly-once rule.
pub fn is_write(method: &str) -> bool {
    lookup(method).kind == Kind::Write
}

/// The block a state read targets, as far as routing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockRef {
    /// `latest`, `pending`, or no block param: answered from the provider's head.
    Latest,
    /// `safe`, `finalized`, `earliest`.
    Tag,
    Number(u64),
    /// A block hash or an EIP-1898 object.
    Pinned,
    /// Not a block-addressed read.
    NotApplicable,
}

/// Which block a call reads at.
pub fn block_ref(info: &MethodInfo, params: Option<&[u8]>) -> BlockRef {
    let Some(index) = info.block_param else {
        return BlockRef::NotApplicable;
    };
    let Some(raw) = params.and_then(|p| nth_element(p, index)) else {
        return BlockRef::Latest;
    };
    if raw.first() == Some(&b'{') {
        return BlockRef::Pinned;
    }
    match plain_str(raw) {
        Some("latest") | Some("pending") => BlockRef::Latest,
        Some("safe") | Some("finalized") | Some("earliest") => BlockRef::Tag,
        Some(s) if s.len() == 66 => BlockRef::Pinned,
        Some(_) => crate::jsonscan::hex_quantity(raw).map_or(BlockRef::Tag, BlockRef::Number),
        None if raw == b"null" => BlockRef::Latest,
        None => BlockRef::Tag,
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
        assert_eq!(lookup("some_unknownMethod").kind, Read);
        assert_eq!(lookup("eth_getLogs").family, Logs);
        assert_eq!(lookup("debug_traceTransaction").family, Trace);
        assert!(is_write("eth_sendRawTransaction") && !is_write("eth_call"));
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
        assert_eq!(block_ref(&call, Some(br#"[{}, "finalized"]"#)), BlockRef::Tag);
        let hash = format!(r#"[{{}}, "0x{}"]"#, "ab".repeat(32));
        assert_eq!(block_ref(&call, Some(hash.as_bytes())), BlockRef::Pinned);
        assert_eq!(block_ref(&lookup("eth_blockNumber"), None), BlockRef::NotApplicable);
        assert_eq!(
            block_ref(&lookup("eth_getBlockByNumber"), Some(br#"["pending", false]"#)),
            BlockRef::Latest
        );
    }
}
