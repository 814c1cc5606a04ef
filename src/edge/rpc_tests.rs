//! The edge's own JSON-RPC errors and the answer budget: every error Prism writes must be a valid
//! JSON-RPC 2.0 error object a client library can parse, with `data` a client can act on.

use super::*;
use prism_transport::validate::InvalidResponse;
use prism_transport::TransportError;
use prism_wire::rpc::ProviderId;

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

/// Parses a JSON-RPC error reply and checks its envelope; returns `(id, error object)`.
fn error_reply(bytes: &[u8]) -> (serde_json::Value, serde_json::Value) {
    let v = json(bytes);
    let obj = v.as_object().expect("a reply is an object");
    assert_eq!(v["jsonrpc"], "2.0");
    assert!(obj.contains_key("id"), "a reply always has an id (null when unknown)");
    assert!(!obj.contains_key("result"), "an error reply has no result");
    let error = v["error"].clone();
    assert!(error["code"].is_i64(), "code is an integer");
    assert!(error["message"].is_string(), "message is a string");
    (v["id"].clone(), error)
}

#[test]
fn answer_budget_allows_up_to_the_cap_and_not_one_byte_more() {
    let b = AnswerBudget {
        used: Cell::new(0),
        max: 100,
    };
    assert!(b.take(60));
    assert!(b.take(40), "exactly at the cap is still allowed");
    assert!(!b.over());
    assert!(!b.take(1));
    assert!(b.over());
    assert!(!b.take(0), "once over, it stays over");
    assert!(b.over());
}

#[test]
fn answer_budget_does_not_overflow() {
    let b = AnswerBudget {
        used: Cell::new(0),
        max: usize::MAX - 1,
    };
    assert!(!b.take(usize::MAX));
    assert!(!b.take(usize::MAX), "saturates instead of wrapping back under the cap");
    assert!(b.over());
}

#[test]
fn throttled_error_says_when_to_retry_in_whole_milliseconds_rounded_up() {
    let mut out = Vec::new();
    write_throttled(&mut out, None, 1_000_001);
    let (id, error) = error_reply(&out);
    assert_eq!(id, serde_json::Value::Null);
    assert_eq!(error["code"], RATE_LIMITED);
    assert_eq!(error["message"], "Rate limit exceeded for this API key");
    assert_eq!(error["data"], serde_json::json!({"retryAfterMs": 2}));

    let mut out = Vec::new();
    write_throttled(&mut out, Some(b"\"req-1\""), 5_000_000);
    let (id, error) = error_reply(&out);
    assert_eq!(id, "req-1", "the client's id bytes are echoed");
    assert_eq!(error["data"]["retryAfterMs"], 5);

    let mut out = Vec::new();
    write_throttled(&mut out, Some(b"3"), 0);
    assert_eq!(error_reply(&out).1["data"]["retryAfterMs"], 0);
}

/// For errors that name no provider.
const NO_NAMES: &[&str] = &[];

#[test]
fn all_down_data_says_how_many_providers_are_open_and_when_to_retry() {
    let d = error_data(
        &ProxyError::AllDown {
            providers_open: 3,
            retry_after_ms: 1500,
        },
        NO_NAMES,
    )
    .unwrap();
    assert_eq!(json(&d), serde_json::json!({"providersOpen": 3, "retryAfterMs": 1500}));
}

#[test]
fn write_outcome_unknown_data_names_what_to_poll() {
    let data = |tx: TxRef| {
        let d = error_data(
            &ProxyError::WriteOutcomeUnknown {
                provider: ProviderId::new(1),
                tx,
            },
            &["infura", "alchemy"][..],
        )
        .unwrap();
        json(&d)
    };
    assert_eq!(
        data(TxRef::Hash("0xabc".into())),
        serde_json::json!({"provider": "alchemy", "txHash": "0xabc", "sent": true})
    );
    assert_eq!(
        data(TxRef::Signature("5sig".into())),
        serde_json::json!({"provider": "alchemy", "signature": "5sig", "sent": true})
    );
    assert_eq!(
        data(TxRef::Unknown),
        serde_json::json!({"provider": "alchemy", "txHash": null, "sent": true})
    );
    assert_eq!(
        data(TxRef::Method),
        serde_json::json!({"provider": "alchemy", "sent": true})
    );
}

#[test]
fn upstream_failure_data_names_the_provider_and_nothing_else() {
    let provider = "quote\" back\\slash\nnewline";
    let names = [provider];
    for e in [
        ProxyError::Transport {
            provider: ProviderId::new(0),
            error: TransportError::Timeout { sent: true },
        },
        ProxyError::Status {
            provider: ProviderId::new(0),
            status: 502,
        },
        ProxyError::BadResponse {
            provider: ProviderId::new(0),
            why: InvalidResponse::Malformed,
        },
    ] {
        let d = error_data(&e, &names[..]).unwrap();
        assert_eq!(json(&d), serde_json::json!({ "provider": provider }), "{e:?}");
    }
}

#[test]
fn prism_refusals_carry_no_data() {
    for e in [
        ProxyError::Unsupported("Subscriptions need a WebSocket connection"),
        ProxyError::NotServed("no"),
        ProxyError::Rejected {
            code: -32602,
            message: "bad".into(),
        },
    ] {
        assert_eq!(error_data(&e, NO_NAMES), None, "{e:?}");
    }
}

#[test]
fn every_proxy_error_makes_a_valid_reply_with_its_code() {
    // What handle_item writes for a failed call: the code, the display text and the data, together.
    let cases = [
        ProxyError::AllDown {
            providers_open: 2,
            retry_after_ms: 10,
        },
        ProxyError::WriteOutcomeUnknown {
            provider: ProviderId::new(0),
            tx: TxRef::Hash("0x1".into()),
        },
        ProxyError::Transport {
            provider: ProviderId::new(0),
            error: TransportError::Connect("refused \"x\"".into()),
        },
        ProxyError::Rejected {
            code: -32602,
            message: "line\nbreak and \"quotes\"".into(),
        },
    ];
    for e in cases {
        let mut out = Vec::new();
        write_error(
            &mut out,
            Some(b"9"),
            e.code(),
            &e.shown(&["p"][..]).to_string(),
            error_data(&e, &["p"][..]).as_deref(),
        );
        let (id, error) = error_reply(&out);
        assert_eq!(id, 9);
        assert_eq!(error["code"], e.code());
        assert_eq!(error["message"], e.shown(&["p"][..]).to_string());
        if let Some(data) = error_data(&e, &["p"][..]) {
            if json(&data).get("provider").is_some() {
                assert_eq!(json(&data)["provider"], "p", "the provider is named, not numbered");
            }
        }
    }
}

#[test]
fn answer_too_large_is_a_valid_error_naming_the_limit() {
    let (id, error) = error_reply(&answer_too_large(4096, None));
    assert_eq!(id, serde_json::Value::Null);
    assert_eq!(error_reply(&answer_too_large(4096, Some(b"\"a\""))).0, "a");
    assert_eq!(error["code"], ANSWER_TOO_LARGE);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("limits.max_answer_bytes (4096 bytes)"), "{message}");
}

#[test]
fn envelope_errors_are_valid_errors_with_their_codes() {
    let cases = [
        (EnvelopeError::Parse("unexpected \"}\" at\tline 1\n".into()), -32700),
        (EnvelopeError::NotARequest, INVALID_REQUEST),
        (EnvelopeError::EmptyBatch, INVALID_REQUEST),
        (EnvelopeError::BatchTooLarge { len: 101, max: 100 }, INVALID_REQUEST),
        (EnvelopeError::TooDeep { max: 64 }, INVALID_REQUEST),
        (EnvelopeError::TooManyHugeNumbers { max: 16 }, INVALID_REQUEST),
    ];
    for (e, code) in cases {
        let (id, error) = error_reply(&envelope_error(&e));
        assert_eq!(id, serde_json::Value::Null, "the id of an unreadable request is null");
        assert_eq!(error["code"], code, "{e}");
        assert_eq!(error["message"], e.to_string());
    }
}
