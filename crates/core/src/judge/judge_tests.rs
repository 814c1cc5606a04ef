use super::*;
use crate::judge::classify::Dialect;

fn answer(status: u16, body: &str) -> Result<UpstreamResponse, TransportError> {
    Ok(UpstreamResponse::answered(status, body.as_bytes().to_vec()))
}

#[test]
fn a_result_is_a_success_and_its_bytes_are_kept() {
    let body = r#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#;
    match judge(answer(200, body), 7, true, false, Dialect::Evm) {
        Judged::Answer {
            body: b,
            value,
            is_error: false,
            class: Class::Success,
            status: 200,
        } => assert_eq!(&b[value], b"\"0x10\""),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_answer_to_another_call_is_the_providers_failure_and_always_retryable() {
    let j = judge(
        answer(200, r#"{"jsonrpc":"2.0","id":8,"result":"0x10"}"#),
        7,
        true,
        false,
        Dialect::Evm,
    );
    assert!(matches!(
        j,
        Judged::Failed {
            failure: Failure::Malformed {
                why: InvalidResponse::WrongId,
                ..
            },
            class: Class::ProviderFailure
        }
    ));
    assert_eq!(j.retry_on(), None);
    assert!(j.maybe_sent());
}

#[test]
fn a_result_under_a_failing_status_is_the_status() {
    let j = judge(
        answer(503, r#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#),
        1,
        true,
        false,
        Dialect::Evm,
    );
    assert!(matches!(
        j,
        Judged::Failed {
            failure: Failure::Status(503),
            class: Class::ProviderFailure
        }
    ));
    assert_eq!(j.retry_on(), Some(RetryOn::Status5xx));
}

#[test]
fn a_429_page_is_a_throttle_and_a_429_error_object_too() {
    let page = judge(answer(429, "Too Many Requests"), 1, true, false, Dialect::Evm);
    assert_eq!(page.class(), Class::Throttled);
    assert_eq!(page.retry_on(), Some(RetryOn::Status429));
    let object = judge(
        answer(
            429,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"slow down"}}"#,
        ),
        1,
        true,
        false,
        Dialect::Evm,
    );
    assert_eq!(object.class(), Class::Throttled);
    assert!(matches!(object, Judged::Answer { is_error: true, .. }));
    assert_eq!(object.retry_on(), Some(RetryOn::Status429));
}

#[test]
fn an_error_object_under_a_redirect_reads_like_the_redirect_page() {
    // The retry loop and the prober used to disagree here: one judged the object, the other the status.
    let with_object = judge(
        answer(
            302,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"rate limit exceeded"}}"#,
        ),
        1,
        true,
        false,
        Dialect::Evm,
    );
    assert_eq!(with_object.class(), Class::Throttled);
    let unknown = judge(
        answer(
            302,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"moved"}}"#,
        ),
        1,
        true,
        false,
        Dialect::Evm,
    );
    assert_eq!(unknown.class(), Class::ProviderFailure);
}

#[test]
fn an_error_no_rule_knows_is_unknown_on_a_read_and_the_callers_on_a_write() {
    let body = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"zorglub"}}"#;
    assert_eq!(
        judge(answer(200, body), 1, false, false, Dialect::Evm).class(),
        Class::Unknown
    );
    assert_eq!(
        judge(answer(200, body), 1, false, true, Dialect::Evm).class(),
        Class::UserError
    );
    // Only a well-formed 2xx answer gets the benefit of the doubt.
    assert_eq!(
        judge(answer(500, body), 1, false, false, Dialect::Evm).class(),
        Class::ProviderFailure
    );
}

#[test]
fn a_flood_is_the_providers_on_light_answers_and_too_large_on_heavy_ones() {
    let light = judge(
        Err(TransportError::TooLarge { max: 1 << 20 }),
        1,
        true,
        false,
        Dialect::Evm,
    );
    assert_eq!(light.class(), Class::ProviderFailure);
    let heavy = judge(
        Err(TransportError::TooLarge { max: 1 << 20 }),
        1,
        false,
        false,
        Dialect::Evm,
    );
    assert_eq!(heavy.class(), Class::TooLarge);
}

#[test]
fn only_a_failure_before_sending_says_nothing_was_sent() {
    let refused = judge(
        Err(TransportError::Connect("refused".into())),
        1,
        true,
        true,
        Dialect::Evm,
    );
    assert!(!refused.maybe_sent());
    assert_eq!(refused.class(), Class::ProviderFailure);
    assert_eq!(refused.retry_on(), Some(RetryOn::ConnectionReset));
    let timed_out = judge(Err(TransportError::Timeout { sent: true }), 1, true, true, Dialect::Evm);
    assert!(timed_out.maybe_sent());
    assert_eq!(timed_out.retry_on(), Some(RetryOn::Timeout));
    let cap = judge(
        Err(TransportError::ConnectionLimit { max: 4 }),
        1,
        true,
        true,
        Dialect::Evm,
    );
    assert!(!cap.maybe_sent());
    assert!(!cap.class().counts_as_failure());
}

#[test]
fn a_broken_body_under_a_2xx_is_malformed_not_a_status() {
    let j = judge(
        answer(200, r#"{"jsonrpc":"2.0","id":1,"result":"#),
        1,
        true,
        false,
        Dialect::Evm,
    );
    assert!(matches!(
        j,
        Judged::Failed {
            failure: Failure::Malformed {
                status: 200,
                why: InvalidResponse::Malformed,
                ..
            },
            ..
        }
    ));
}

#[test]
fn every_failure_names_its_reason_and_answers_name_none() {
    let reason = |r: Result<UpstreamResponse, TransportError>| judge(r, 7, true, false, Dialect::Evm).reason();
    let ok = r#"{"jsonrpc":"2.0","id":7,"result":"0x1"}"#;
    let cases: Vec<(Result<UpstreamResponse, TransportError>, Option<&str>)> = vec![
        (answer(200, ok), None),
        (
            answer(
                200,
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":3,"message":"execution reverted"}}"#,
            ),
            None,
        ),
        (answer(401, r#"{"error":"invalid API key"}"#), Some("http_401")),
        // A JSON-RPC error under 401 is still the status's cause.
        (
            answer(
                401,
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"unauthorized"}}"#,
            ),
            Some("http_401"),
        ),
        (answer(403, "<html>forbidden</html>"), Some("http_403")),
        (answer(429, "slow down"), Some("http_429")),
        (answer(503, "<html>maintenance</html>"), Some("http_5xx")),
        (answer(200, "<html>oops</html>"), Some("malformed")),
        (
            answer(200, r#"{"jsonrpc":"2.0","id":8,"result":"0x1"}"#),
            Some("wrong_id"),
        ),
        (
            answer(
                200,
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"rate limit exceeded"}}"#,
            ),
            Some("throttled"),
        ),
        (
            answer(
                200,
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"internal error"}}"#,
            ),
            Some("rpc_error"),
        ),
        (Err(TransportError::Timeout { sent: true }), Some("timeout")),
        (Err(TransportError::Reset { sent: false }), Some("reset")),
        (Err(TransportError::Refused), Some("refused")),
        (Err(TransportError::Tls("bad certificate".into())), Some("tls")),
        (Err(TransportError::Unresolved), Some("dns")),
        (Err(TransportError::ConnectionLimit { max: 4 }), None),
    ];
    for (r, want) in cases {
        let shown = format!("{r:?}");
        assert_eq!(reason(r).map(|r| r.as_str()), want, "{shown}");
    }
}
