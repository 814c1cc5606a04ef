//! Method classes. A write is sent exactly once to one upstream: never retried, hedged, deduplicated or
//! cached. Everything not known to be a write is treated as a read.

/// Submissions that change chain state (EVM and Solana).
pub fn is_write(method: &str) -> bool {
    matches!(
        method,
        "eth_sendRawTransaction"
            | "eth_sendTransaction"
            | "eth_sendRawTransactionConditional"
            | "eth_sendBundle"
            | "eth_sendPrivateTransaction"
            | "sendTransaction"
    ) || method.starts_with("eth_submit")
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_are_known() {
        for m in [
            "eth_sendRawTransaction",
            "eth_submitWork",
            "sendTransaction",
        ] {
            assert!(super::is_write(m), "{m}");
        }
        for m in [
            "eth_call",
            "eth_getBalance",
            "eth_sendRawTransactionX".trim_end_matches('X'),
            "getBalance",
        ] {
            assert_eq!(super::is_write(m), m == "eth_sendRawTransaction", "{m}");
        }
    }
}
