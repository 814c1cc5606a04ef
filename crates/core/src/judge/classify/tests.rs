use super::*;

/// The whole exchange as the retry loop and the prober judge it (`core::judge`), under the id the body
/// carries; `None` for a JSON body whose id is not a number (`null` in a node's parse error): Prism's own
/// calls always carry a numeric id, so such a body is never an answer to one of them (`check_response`).
fn judged(status: u16, body: &[u8], is_write: bool) -> Option<Class> {
    judged_in(Dialect::Evm, status, body, is_write)
}

fn judged_in(dialect: Dialect, status: u16, body: &[u8], is_write: bool) -> Option<Class> {
    let id = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => v.get("id").and_then(serde_json::Value::as_u64)?,
        Err(_) => 1,
    };
    Some(crate::judge::judge_answer(status, body.to_vec(), id, is_write, dialect).class())
}

fn classify_response(status: u16, body: &[u8], is_write: bool) -> Class {
    judged(status, body, is_write).unwrap_or(Class::ProviderFailure)
}

const CORPUS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/errors/corpus.jsonl"
));

/// Agave, MagicBlock ER and Solana providers' error bodies, classed in the Solana dialect.
const SOLANA_CORPUS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/errors/solana.jsonl"
));

fn class_named(name: &str) -> Option<Class> {
    Class::ALL.into_iter().find(|c| c.as_str() == name)
}

fn rpc(code: i64, message: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "code": code, "message": message })).unwrap()
}

fn rpc_data(code: i64, message: &str, data: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "code": code, "message": message, "data": data })).unwrap()
}

fn read(code: i64, message: &str) -> Class {
    classify_rpc_error(&rpc(code, message), false)
}

fn write(code: i64, message: &str) -> Class {
    classify_rpc_error(&rpc(code, message), true)
}

struct Row {
    line: usize,
    source: String,
    status: u16,
    body: Vec<u8>,
    error: Option<Vec<u8>>,
    is_write: bool,
    method: String,
    expect: Class,
    note: String,
}

fn corpus() -> Vec<Row> {
    rows_of(CORPUS)
}

fn rows_of(text: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("corpus line {}: {e}", i + 1));
        let field = |k: &str| v.get(k).unwrap_or_else(|| panic!("corpus line {}: no {k:?}", i + 1));
        let body_v = field("body");
        let body = match body_v.as_str() {
            Some(s) => s.as_bytes().to_vec(),
            None => serde_json::to_vec(body_v).unwrap(),
        };
        let error = body_v
            .get("error")
            .filter(|e| !e.is_null())
            .map(|e| serde_json::to_vec(e).unwrap());
        let expect = field("expect").as_str().unwrap();
        rows.push(Row {
            line: i + 1,
            source: field("source").as_str().unwrap().to_owned(),
            status: field("http_status").as_u64().unwrap() as u16,
            body,
            error,
            is_write: field("is_write").as_bool().unwrap(),
            method: field("method").as_str().unwrap().to_owned(),
            note: v.get("note").and_then(|n| n.as_str()).unwrap_or("").to_owned(),
            expect: class_named(expect).unwrap_or_else(|| panic!("corpus line {}: unknown class {expect:?}", i + 1)),
        });
    }
    rows
}

#[test]
fn every_corpus_row_gets_its_class() {
    let rows = corpus();
    let mut wrong = Vec::new();
    for r in &rows {
        let mut got: Vec<_> = judged(r.status, &r.body, r.is_write)
            .map(|c| ("judge", c))
            .into_iter()
            .collect();
        if let Some(err) = &r.error {
            got.push((
                "classify_rpc_error_with_status",
                classify_rpc_error_with_status(r.status, err, r.is_write),
            ));
            if (200..300).contains(&r.status) {
                got.push(("classify_rpc_error", classify_rpc_error(err, r.is_write)));
            }
        } else if !(200..300).contains(&r.status) {
            got.push(("classify_http", classify_http(r.status, &r.body)));
        }
        for (f, class) in got {
            if class != r.expect {
                let rule = r.error.as_deref().and_then(matching_rule);
                wrong.push(format!(
                    "line {} [{} {} {}]: {f} gave {class}, expected {} (rule {:?}: {:?})\n    {}",
                    r.line,
                    r.source,
                    r.status,
                    r.method,
                    r.expect,
                    rule,
                    rule.map(|i| RPC_RULES[i]),
                    String::from_utf8_lossy(&r.body).chars().take(200).collect::<String>(),
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} corpus rows misclassified:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_solana_corpus_row_gets_its_class() {
    let rows = rows_of(SOLANA_CORPUS);
    let mut wrong = Vec::new();
    for r in &rows {
        let mut got: Vec<_> = judged_in(Dialect::Solana, r.status, &r.body, r.is_write)
            .map(|c| ("judge", c))
            .into_iter()
            .collect();
        if let Some(err) = &r.error {
            got.push((
                "classify_rpc_error_in",
                classify_rpc_error_in(Dialect::Solana, r.status, err, r.is_write),
            ));
        }
        for (f, class) in got {
            if class != r.expect {
                wrong.push(format!(
                    "line {} [{} {} {}]: {f} gave {class}, expected {}\n    {}",
                    r.line,
                    r.source,
                    r.status,
                    r.method,
                    r.expect,
                    String::from_utf8_lossy(&r.body).chars().take(200).collect::<String>(),
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} Solana corpus rows misclassified:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
    for source in [
        "agave",
        "quicknode",
        "helius",
        "triton",
        "solana-mainnet-beta",
        "magicblock-er",
    ] {
        assert!(
            rows.iter().any(|r| r.source == source),
            "no Solana corpus row from {source}"
        );
    }
}

#[test]
fn solanas_codes_are_not_read_as_evms() {
    // The collisions the Solana rows exist for: the same code, another meaning.
    let cases = [
        (
            -32005,
            "Node is behind by 42 slots",
            Class::DataUnavailable,
            Class::Throttled,
        ),
        (-32005, "Node is unhealthy", Class::ProviderFailure, Class::Throttled),
        (
            -32016,
            "Minimum context slot has not been reached",
            Class::DataUnavailable,
            Class::Throttled,
        ),
        (
            -32007,
            "Slot 9 was skipped, or missing due to ledger jump to recent snapshot",
            Class::DataUnavailable,
            Class::Throttled,
        ),
        (
            -32004,
            "Block not available for slot 9",
            Class::DataUnavailable,
            Class::Unsupported,
        ),
        (
            -32002,
            "Transaction simulation failed: Blockhash not found",
            Class::UserError,
            Class::DataUnavailable,
        ),
    ];
    for (code, message, solana, evm) in cases {
        let e = rpc(code, message);
        assert_eq!(
            classify_rpc_error_in(Dialect::Solana, 200, &e, false),
            solana,
            "{code} {message}"
        );
        assert_eq!(
            classify_rpc_error_in(Dialect::Evm, 200, &e, false),
            evm,
            "{code} {message} on EVM"
        );
    }
}

#[test]
fn corpus_covers_every_class_and_the_named_providers() {
    let rows = corpus();
    assert!(rows.len() >= 60, "corpus has only {} rows", rows.len());
    for class in Class::ALL {
        assert!(rows.iter().any(|r| r.expect == class), "no corpus row expects {class}");
    }
    for source in [
        "geth",
        "nitro",
        "erigon",
        "alchemy",
        "quicknode",
        "infura",
        "ankr",
        "chainstack",
        "blast",
    ] {
        assert!(rows.iter().any(|r| r.source == source), "no corpus row from {source}");
    }
    assert!(rows.iter().any(|r| r.is_write), "no write in the corpus");
    // A row no rule decides exercises only the default; say so, so the table's coverage stays honest.
    for r in &rows {
        if let Some(err) = &r.error {
            if matching_rule(err).is_none() {
                assert!(
                    r.note.contains("default"),
                    "line {}: decided by the default, but its note does not say so",
                    r.line
                );
            }
        }
    }
}

// ---- the overlaps that matter

#[test]
fn gas_limits_are_not_rate_limits() {
    assert_eq!(write(-32000, "exceeds block gas limit"), Class::UserError);
    assert_eq!(read(-32000, "gas required exceeds allowance (0)"), Class::UserError);
    assert_eq!(
        read(-32010, "Transaction cost exceeds current gas limit"),
        Class::UserError
    );
    assert_eq!(read(-32016, "over rate limit"), Class::Throttled);
    assert_eq!(read(-32000, "rate limit exceeded"), Class::Throttled);
    assert_eq!(read(-32005, "limit exceeded"), Class::Throttled);
}

#[test]
fn capacity_is_throttled_but_monthly_capacity_is_quota() {
    assert_eq!(
        read(429, "Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message."),
        Class::Throttled
    );
    assert_eq!(
        read(-32000, "exceeded the allotted capacity for this key"),
        Class::Throttled
    );
    assert_eq!(
        read(-32600, "Monthly capacity limit exceeded. Visit https://dashboard.alchemy.com/settings/billing to upgrade your scaling policy for continued service."),
        Class::QuotaExhausted
    );
    assert_eq!(
        read(-32000, "You have reached the free tier limit, upgrade your plan"),
        Class::QuotaExhausted
    );
    // A per-second limit that mentions upgrading is still per second.
    assert_eq!(
        read(
            -32007,
            "100/second request limit reached - reduce calls per second or upgrade your account at quicknode.com"
        ),
        Class::Throttled
    );
    // A method that is not on the free tier is unsupported here, not a billing outage.
    assert_eq!(
        read(
            -32600,
            "trace_block is not available on the Free tier - upgrade to Growth, Scale, or Enterprise for access."
        ),
        Class::Unsupported
    );
}

#[test]
fn fee_and_price_errors_are_the_users() {
    for m in [
        "max fee per gas less than block base fee: address 0x1, maxFeePerGas: 1 baseFee: 7",
        "transaction underpriced",
        "replacement transaction underpriced",
        "intrinsic gas too low",
        "insufficient funds for gas * price + value",
        "nonce too low",
        "nonce too high",
        "already known",
        "tx fee (2.00 ether) exceeds the configured cap (1.00 ether)",
    ] {
        assert_eq!(write(-32000, m), Class::UserError, "{m}");
        assert_eq!(read(-32000, m), Class::UserError, "{m}");
    }
}

#[test]
fn missing_data_is_data_unavailable() {
    assert_eq!(read(-32000, "header not found"), Class::DataUnavailable);
    assert_eq!(
        read(-32000, "missing trie node 1f0c (path ) <nil>"),
        Class::DataUnavailable
    );
    assert_eq!(read(-32000, "unknown block"), Class::DataUnavailable);
    assert_eq!(read(-32000, "block not found"), Class::DataUnavailable);
    // Alchemy uses code 3 for it too.
    assert_eq!(read(3, "Unknown block"), Class::DataUnavailable);
}

#[test]
fn reverts_win_over_whatever_the_contract_says() {
    assert_eq!(read(3, "execution reverted: rate limit exceeded"), Class::UserError);
    assert_eq!(read(-32000, "execution reverted: header not found"), Class::UserError);
    assert_eq!(read(-32000, "execution reverted: too many requests"), Class::UserError);
    assert_eq!(write(3, "execution reverted"), Class::UserError);
    assert_eq!(read(3, ""), Class::UserError);
}

#[test]
fn node_timeouts_are_the_providers_but_execution_budgets_take_a_second_opinion() {
    assert_eq!(read(-32002, "request timed out"), Class::ProviderFailure);
    assert_eq!(read(-32000, "context deadline exceeded"), Class::ProviderFailure);
    assert_eq!(read(-32000, "timeout"), Class::ProviderFailure);
    assert_eq!(write(-32000, "request timed out"), Class::ProviderFailure);
    // The call's own budget: a heavy call hits it on every node, a slow node alone.
    assert_eq!(read(-32000, "execution timeout"), Class::Unknown);
    assert_eq!(read(-32000, "execution aborted (timeout = 5s)"), Class::Unknown);
    assert_eq!(read(-32000, "tracer timeout"), Class::Unknown);
    // A write is never asked twice: as before, the provider's.
    assert_eq!(
        write(-32000, "execution aborted (timeout = 5s)"),
        Class::ProviderFailure
    );
    // Not in a well-formed 2xx answer: the provider's.
    assert_eq!(
        classify_rpc_error_with_status(503, &rpc(-32000, "execution timeout"), false),
        Class::ProviderFailure
    );
}

#[test]
fn prisms_own_size_errors_are_too_large_not_a_throttle() {
    // A Prism behind a Prism passes them on and blames no provider for them.
    use crate::call::outcome::{answer_too_large_message, response_too_large_message};
    let response = response_too_large_message(1 << 20, "the upstream's answer");
    assert_eq!(read(-32005, &response), Class::TooLarge);
    assert_eq!(read(-32003, &answer_too_large_message(1 << 20)), Class::TooLarge);
}

#[test]
fn result_caps_beat_the_throttle_code() {
    assert_eq!(read(-32005, "query returned more than 10000 results"), Class::TooLarge);
    assert_eq!(read(-32005, "project ID request rate exceeded"), Class::Throttled);
    assert_eq!(
        read(-32005, "daily request count exceeded, request rate limited"),
        Class::Throttled
    );
    assert_eq!(read(-32005, "something new"), Class::Throttled);
    assert_eq!(read(-32602, "range 1000000 exceeds limit of 10000"), Class::TooLarge);
    assert_eq!(read(-32602, "Block range limit exceeded."), Class::TooLarge);
    assert_eq!(
        read(-32000, "block range extends beyond current head block"),
        Class::DataUnavailable
    );
    assert_eq!(read(-32000, "invalid block range params"), Class::UserError);
    assert_eq!(read(-32012, "credits limited to 6000/sec"), Class::Throttled);
    assert_eq!(
        read(-32614, "eth_getLogs is limited to a 10,000 range"),
        Class::TooLarge
    );
}

#[test]
fn unknown_minus_32000_depends_on_direction() {
    // A read's unknown error takes a second opinion; a write's is the user's.
    assert_eq!(read(-32000, "something nobody has seen"), Class::Unknown);
    assert_eq!(write(-32000, "something nobody has seen"), Class::UserError);
    assert_eq!(read(-31999, ""), Class::Unknown);
    assert_eq!(write(12345, "?"), Class::UserError);
    // Only a well-formed 2xx answer gets the benefit of the doubt.
    let e = rpc(-32000, "something nobody has seen");
    assert_eq!(classify_rpc_error_with_status(200, &e, false), Class::Unknown);
    assert_eq!(classify_rpc_error_with_status(500, &e, false), Class::ProviderFailure);
    assert_eq!(classify_rpc_error_with_status(400, &e, false), Class::ProviderFailure);
    assert!(!Class::Unknown.counts_as_failure());
    assert!(!Class::Unknown.is_final_answer());
}

#[test]
fn execution_apis_simulate_codes_are_the_callers() {
    // eth_simulateV1's -380xx codes describe the simulated input, whatever the message says.
    for code in [
        -38010, -38011, -38012, -38013, -38014, -38015, -38020, -38021, -38022, -38023, -38024, -38025,
    ] {
        assert_eq!(read(code, "something new"), Class::UserError, "{code}");
        assert_eq!(read(code, ""), Class::UserError, "{code}");
    }
    assert_eq!(read(-38026, "Client adjustable limit exceeded"), Class::TooLarge);
    assert_eq!(read(-38026, "too many blocks"), Class::TooLarge);
    // -32005 is a rate limit, except when it says the fee is too low.
    assert_eq!(read(-32005, "Transactions maxFeePerGas is too low"), Class::UserError);
    assert_eq!(read(-32005, "limit exceeded"), Class::Throttled);
    assert_eq!(read(-32015, "VM execution error."), Class::UserError);
    assert_eq!(read(-32015, ""), Class::UserError);
    // geth's -32603 for a nonce override at its maximum is the caller's, not an internal error.
    assert_eq!(
        read(-32603, "err: nonce has max value: address 0xC000000000000000000000000000000000000000, nonce: 18446744073709551615 (supplied gas 50000000)"),
        Class::UserError
    );
    assert_eq!(read(-32603, "Internal error"), Class::ProviderFailure);
    // Besu codes that elsewhere mean "unsupported" and "throttled".
    assert_eq!(read(-32004, "Upfront cost exceeds account balance"), Class::UserError);
    assert_eq!(
        read(-32009, "Gas price below configured minimum gas price"),
        Class::UserError
    );
}

#[test]
fn codes_decide_when_no_phrase_does() {
    assert_eq!(read(-32601, "Method not found"), Class::Unsupported);
    assert_eq!(read(-32601, ""), Class::Unsupported);
    assert_eq!(read(-32603, ""), Class::ProviderFailure);
    assert_eq!(write(-32603, "Internal error"), Class::ProviderFailure);
    assert_eq!(
        read(-32602, "invalid argument 0: hex string without 0x prefix"),
        Class::UserError
    );
    assert_eq!(read(-32602, ""), Class::UserError);
    assert_eq!(read(-32600, ""), Class::UserError);
    assert_eq!(read(-32700, ""), Class::UserError);
    assert_eq!(read(-32005, ""), Class::Throttled);
}

#[test]
fn method_availability() {
    assert_eq!(
        read(-32601, "the method eth_x does not exist/is not available"),
        Class::Unsupported
    );
    assert_eq!(read(-32000, "method not whitelisted"), Class::Unsupported);
    assert_eq!(
        read(
            -32600,
            "Unsupported method: eth_sendTransaction. See available methods at https://docs.alchemy.com"
        ),
        Class::Unsupported
    );
    // A node that cannot take a transaction type refuses it everywhere on that chain.
    assert_eq!(write(-32000, "transaction type not supported"), Class::UserError);
    // An IP allowlist is the provider entry's configuration.
    assert_eq!(
        read(-32002, "IP address 1.2.3.4 is not on whitelist"),
        Class::ProviderFailure
    );
}

#[test]
fn data_is_read_as_well_as_message() {
    let e = rpc_data(
        -32602,
        "invalid params",
        serde_json::json!({"error_id": "4ed9", "payload": "range 9009594 is bigger than range limit 2000"}),
    );
    assert_eq!(classify_rpc_error(&e, false), Class::TooLarge);
    let e = rpc_data(
        -32603,
        "Internal error",
        serde_json::json!({"message": "header not found"}),
    );
    assert_eq!(classify_rpc_error(&e, false), Class::DataUnavailable);
    let e = rpc_data(-32000, "failed", serde_json::json!("request rate limited"));
    assert_eq!(classify_rpc_error(&e, true), Class::Throttled);
}

#[test]
fn odd_error_shapes_do_not_panic() {
    for raw in [
        &b""[..],
        b"null",
        b"\"rate limited\"",
        b"{\"code\":\"-32601\",\"message\":\"nope\"}",
        b"{\"code\":-32000.0,\"message\":\"header not found\"}",
        b"{\"code\":1e400,\"message\":\"header not found\"}",
        b"{\"code\":-32000,\"message\":\"missing trie node",
        b"[1,2,3]",
        b"{\"message\":{\"nested\":[\"Nonce too low\"]}}",
        "{\"code\":-32000,\"message\":\"\u{e9}\u{e9}\u{e9} header not found\"}".as_bytes(),
    ] {
        let _ = classify_rpc_error(raw, false);
        let _ = classify_rpc_error_with_status(503, raw, true);
        let _ = classify_response(200, raw, false);
        let _ = classify_http(500, raw);
    }
    assert_eq!(classify_rpc_error(b"\"rate limited\"", false), Class::Throttled);
    assert_eq!(
        classify_rpc_error(b"{\"code\":\"-32601\",\"message\":\"nope\"}", false),
        Class::Unsupported
    );
    assert_eq!(
        classify_rpc_error(b"{\"code\":1e400,\"message\":\"header not found\"}", false),
        Class::DataUnavailable
    );
    assert_eq!(
        classify_rpc_error(b"{\"code\":-32000,\"message\":\"missing trie node", false),
        Class::DataUnavailable
    );
    assert_eq!(
        classify_rpc_error(b"{\"message\":{\"nested\":[\"Nonce too low\"]}}", true),
        Class::UserError
    );
}

// ---- HTTP and whole responses

#[test]
fn http_status_rules() {
    assert_eq!(classify_http(429, b""), Class::Throttled);
    assert_eq!(
        classify_http(429, b"Monthly capacity limit exceeded"),
        Class::QuotaExhausted
    );
    assert_eq!(classify_http(402, b"Payment Required"), Class::QuotaExhausted);
    assert_eq!(
        classify_http(403, b"Your free tier has been used up; see billing"),
        Class::QuotaExhausted
    );
    assert_eq!(classify_http(403, b"Forbidden"), Class::ProviderFailure);
    assert_eq!(classify_http(401, b"invalid project id\n"), Class::ProviderFailure);
    assert_eq!(classify_http(404, b"404 page not found"), Class::ProviderFailure);
    assert_eq!(classify_http(405, b""), Class::ProviderFailure);
    assert_eq!(
        classify_http(413, b"<h1>413 Request Entity Too Large</h1>"),
        Class::TooLarge
    );
    assert_eq!(classify_http(400, b"bad request"), Class::ProviderFailure);
    assert_eq!(classify_http(500, b""), Class::ProviderFailure);
    assert_eq!(
        classify_http(502, b"<title>502 Bad Gateway</title>"),
        Class::ProviderFailure
    );
    assert_eq!(
        classify_http(503, b"<html><body>Too Many Requests</body></html>"),
        Class::Throttled
    );
    assert_eq!(classify_http(200, b"error code: 1015"), Class::Throttled);
    assert_eq!(classify_http(200, b"<html>maintenance</html>"), Class::ProviderFailure);
    assert_eq!(classify_http(301, b""), Class::ProviderFailure);
    // A body about a plan-gated method is not read as billing.
    assert_eq!(
        classify_http(403, b"trace_block is not available on the Free tier"),
        Class::ProviderFailure
    );
}

#[test]
fn status_and_error_are_reconciled() {
    let e = rpc(-32000, "something nobody has seen");
    assert_eq!(classify_rpc_error_with_status(429, &e, true), Class::Throttled);
    assert_eq!(classify_rpc_error_with_status(503, &e, true), Class::ProviderFailure);
    assert_eq!(classify_rpc_error_with_status(200, &e, true), Class::UserError);
    // A 4xx whose error no rule knows falls back to the status.
    assert_eq!(classify_rpc_error_with_status(403, &e, true), Class::ProviderFailure);
    // By code alone, an auth status wins; a phrase wins over the status.
    assert_eq!(
        classify_rpc_error_with_status(401, &rpc(-32600, "whatever"), false),
        Class::ProviderFailure
    );
    assert_eq!(
        classify_rpc_error_with_status(403, &rpc(-32600, "Monthly capacity limit exceeded."), false),
        Class::QuotaExhausted
    );
    assert_eq!(
        classify_rpc_error_with_status(400, &rpc(-32602, "invalid argument 0"), false),
        Class::UserError
    );
    assert_eq!(
        classify_rpc_error_with_status(413, &rpc(-32602, ""), false),
        Class::TooLarge
    );
    assert_eq!(
        classify_rpc_error_with_status(500, &rpc(-32020, "backend response too large"), false),
        Class::TooLarge
    );
    assert_eq!(
        classify_rpc_error_with_status(500, &rpc(-32602, ""), false),
        Class::ProviderFailure
    );
    assert_eq!(
        classify_rpc_error_with_status(503, &rpc(-32005, ""), false),
        Class::Throttled
    );
    assert_eq!(
        classify_rpc_error_with_status(429, &rpc(-32600, "Monthly capacity limit exceeded."), false),
        Class::QuotaExhausted
    );
}

#[test]
fn answers_are_success() {
    assert_eq!(
        classify_response(200, br#"{"jsonrpc":"2.0","id":1,"result":null}"#, false),
        Class::Success
    );
    assert_eq!(
        classify_response(
            200,
            br#"{"jsonrpc":"2.0","id":1,"result":{"status":"0x0","gasUsed":"0x5208"}}"#,
            false
        ),
        Class::Success
    );
    assert_eq!(
        classify_response(200, br#"{"jsonrpc":"2.0","id":1,"result":"0x","error":null}"#, false),
        Class::Success
    );
    // Prism sends single calls upstream: a batch array is no answer to one.
    assert_eq!(
        classify_response(200, br#"[{"jsonrpc":"2.0","id":1,"result":"0x1"}]"#, false),
        Class::ProviderFailure
    );
    // A result under a failing status is not trusted.
    assert_eq!(
        classify_response(502, br#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#, false),
        Class::ProviderFailure
    );
    assert_eq!(
        classify_response(200, br#"{"jsonrpc":"2.0","id":1}"#, false),
        Class::ProviderFailure
    );
    assert_eq!(
        classify_response(
            200,
            br#"{"jsonrpc":"2.0","id":1,"result":null,"error":{"code":-32000,"message":"method handler crashed"}}"#,
            false
        ),
        Class::ProviderFailure
    );
}

#[test]
fn transport_errors() {
    use prism_transport::TransportError as T;
    for e in [
        T::Unresolved,
        T::Connect("refused".into()),
        T::Tls("bad certificate".into()),
        T::Timeout { sent: false },
        T::Timeout { sent: true },
        T::Reset { sent: false },
        T::Reset { sent: true },
        T::Malformed("bad chunk"),
    ] {
        assert_eq!(classify_transport(&e), Class::ProviderFailure, "{e}");
    }
    assert_eq!(classify_transport(&T::TooLarge { max: 1 }), Class::TooLarge);
}

#[test]
fn class_helpers_agree_with_the_design() {
    for c in Class::ALL {
        assert_eq!(class_named(c.as_str()), Some(c));
        assert_eq!(c.to_string(), c.as_str());
        // Nothing that goes back to the client as it came is also retried or counted.
        assert!(
            !(c.is_final_answer() && (c.read_may_go_elsewhere() || c.counts_as_failure())),
            "{c}"
        );
    }
    assert!(Class::ProviderFailure.counts_as_failure());
    assert!(!Class::Throttled.counts_as_failure());
    assert!(!Class::UserError.read_may_go_elsewhere());
}

// ---- the table itself

#[test]
fn rules_are_lowercase_and_phrases_come_before_codes() {
    let mut seen_code_only = false;
    for (i, r) in RPC_RULES.iter().enumerate() {
        for ph in r.phrases {
            assert!(!ph.is_empty(), "rule {i}: empty phrase");
            assert_eq!(
                *ph,
                ph.to_lowercase(),
                "rule {i}: phrases are matched against lowercase text"
            );
        }
        assert!(r.code.is_some() || !r.phrases.is_empty(), "rule {i} matches everything");
        if r.phrases.is_empty() {
            seen_code_only = true;
        } else {
            assert!(
                !seen_code_only,
                "rule {i} ({:?}) is a phrase rule after the code rules",
                r.phrases
            );
        }
    }
}

/// A rule is dead when an earlier rule matches every text it matches: same code or none, and each of the
/// earlier rule's phrases is inside one of the later rule's phrases.
#[test]
fn no_rule_is_shadowed_by_an_earlier_one() {
    let mut dead = Vec::new();
    for (i, later) in RPC_RULES.iter().enumerate() {
        for (j, earlier) in RPC_RULES[..i].iter().enumerate() {
            let code_covers = earlier.code.is_none() || earlier.code == later.code;
            let phrases_cover = earlier
                .phrases
                .iter()
                .all(|e| later.phrases.iter().any(|l| l.contains(e)));
            if code_covers && phrases_cover {
                dead.push(format!("rule {i} {:?} is shadowed by rule {j} {:?}", later, earlier));
            }
        }
    }
    assert!(dead.is_empty(), "{}", dead.join("\n"));
}

#[test]
fn what_a_submission_error_says_about_its_transaction() {
    use SubmissionSays::*;
    for (code, message, says) in [
        (-32000, "already known", AlreadyKnown),     // geth, Erigon
        (-32010, "Known transaction", AlreadyKnown), // Besu
        (-32010, "AlreadyKnown", AlreadyKnown),      // Nethermind
        (
            -32000,
            "Transaction with the same hash was already imported.",
            AlreadyKnown,
        ), // OpenEthereum
        (
            -32000,
            "rpc error: code = ALREADY_EXISTS desc = tx already in mempool",
            AlreadyKnown,
        ),
        (
            -32002,
            "Transaction simulation failed: This transaction has already been processed",
            AlreadyKnown,
        ), // Agave
        (-32000, "nonce too low: next nonce 8, tx nonce 7", NonceTooLow),
        (-38010, "Transactions nonce is too low", NonceTooLow),
        (
            -32000,
            "OldNonce, Current nonce: 8, nonce of rejected tx: 7",
            NonceTooLow,
        ),
        (-32000, "replacement transaction underpriced", Underpriced),
        (-32003, "transaction underpriced", Underpriced), // ganache, for an exact duplicate too
        (-32000, "unknown transaction type", Other),
        (-32000, "insufficient funds for gas * price + value", Other),
    ] {
        assert_eq!(submission_says(&rpc(code, message)), says, "{code} {message}");
    }
}
