//! Response validation: is this upstream body a JSON-RPC response to *our* call, and where are its
//! `result`/`error` bytes? A light scanner: nothing is copied or re-serialised.

use std::ops::Range;

use prism_wire::jsonscan::{skip_string, skip_value, skip_ws};

/// What a valid single JSON-RPC response carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcAnswer {
    /// Byte range of the `result` or `error` value inside the body.
    pub value: Range<usize>,
    pub is_error: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidResponse {
    #[error("response is not a JSON object")]
    NotAnObject,
    #[error("response JSON is malformed or truncated")]
    Malformed,
    #[error("response id does not match the request")]
    WrongId,
    #[error("response has neither result nor error")]
    NoResult,
    #[error("response is not valid UTF-8")]
    NotUtf8,
    #[error("response repeats a member (id, result or error)")]
    DuplicateMember,
}

/// Checks `body` is a JSON-RPC response whose id is the number `expected_id`: one well-formed JSON object
/// (see `jsonscan`), valid UTF-8, nothing after it, `id`, `result` and `error` each at most once (with two
/// results, which one is the answer?). Never panics, whatever the bytes.
pub fn check_response(body: &[u8], expected_id: u64) -> Result<RpcAnswer, InvalidResponse> {
    let mut p = skip_ws(body, 0);
    if body.get(p) != Some(&b'{') {
        return Err(InvalidResponse::NotAnObject);
    }
    if std::str::from_utf8(body).is_err() {
        return Err(InvalidResponse::NotUtf8);
    }
    p += 1;
    let (mut seen_id, mut seen_result, mut seen_error) = (false, false, false);
    let mut id_ok = false;
    let mut answer: Option<RpcAnswer> = None;
    p = skip_ws(body, p);
    if body.get(p) == Some(&b'}') {
        return Err(InvalidResponse::NoResult);
    }
    loop {
        p = skip_ws(body, p);
        let key_end = skip_string(body, p).ok_or(InvalidResponse::Malformed)?;
        let key = &body[p + 1..key_end - 1];
        p = skip_ws(body, key_end);
        if body.get(p) != Some(&b':') {
            return Err(InvalidResponse::Malformed);
        }
        let v_start = skip_ws(body, p + 1);
        let v_end = skip_value(body, v_start).ok_or(InvalidResponse::Malformed)?;
        let seen = match key {
            b"id" => Some(&mut seen_id),
            b"result" => Some(&mut seen_result),
            b"error" => Some(&mut seen_error),
            _ => None,
        };
        if let Some(seen) = seen {
            if std::mem::replace(seen, true) {
                return Err(InvalidResponse::DuplicateMember);
            }
        }
        match key {
            b"id" => id_ok = id_matches(&body[v_start..v_end], expected_id),
            // `"error": null` beside a result is no error (some nodes always write both members).
            b"error" if &body[v_start..v_end] == b"null" => {}
            b"result" if answer.as_ref().is_some_and(|a| a.is_error) => {}
            b"result" | b"error" => {
                answer = Some(RpcAnswer {
                    value: v_start..v_end,
                    is_error: key == b"error",
                })
            }
            _ => {}
        }
        p = skip_ws(body, v_end);
        match body.get(p) {
            Some(b',') => p += 1,
            Some(b'}') => break,
            _ => return Err(InvalidResponse::Malformed),
        }
    }
    if skip_ws(body, p + 1) != body.len() {
        return Err(InvalidResponse::Malformed);
    }
    if !id_ok {
        return Err(InvalidResponse::WrongId);
    }
    answer.ok_or(InvalidResponse::NoResult)
}

/// Our ids are plain integers; some servers echo them as strings.
fn id_matches(raw: &[u8], expected: u64) -> bool {
    let digits = raw
        .strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .unwrap_or(raw);
    digits == itoa::Buffer::new().format(expected).as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_result_and_error_spans() {
        let body = br#"{"jsonrpc":"2.0","id":7,"result":{"a":"}]\"","b":[1,2]}}"#;
        let a = check_response(body, 7).unwrap();
        assert_eq!(&body[a.value.clone()], br#"{"a":"}]\"","b":[1,2]}"#);
        assert!(!a.is_error);
        let body = br#" {"error" : {"code":-32000,"message":"execution reverted"} , "id":"9", "jsonrpc":"2.0"} "#;
        let a = check_response(body, 9).unwrap();
        assert!(a.is_error);
        assert_eq!(&body[a.value], br#"{"code":-32000,"message":"execution reverted"}"#);
    }

    #[test]
    fn a_null_error_beside_a_result_is_no_error() {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":"0x","error":null}"#;
        let a = check_response(body, 1).unwrap();
        assert!(!a.is_error);
        assert_eq!(&body[a.value], b"\"0x\"");
        let body = br#"{"jsonrpc":"2.0","id":1,"error":null,"result":"0x"}"#;
        assert!(!check_response(body, 1).unwrap().is_error);
        // An error object wins over a result beside it, in either order.
        let body = br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"result":null}"#;
        assert!(check_response(body, 1).unwrap().is_error);
        let body = br#"{"jsonrpc":"2.0","id":1,"result":null,"error":{"code":1,"message":"x"}}"#;
        assert!(check_response(body, 1).unwrap().is_error);
        assert_eq!(
            check_response(br#"{"jsonrpc":"2.0","id":1,"error":null}"#, 1),
            Err(InvalidResponse::NoResult)
        );
    }

    #[test]
    fn rejects_bad_bodies() {
        assert_eq!(check_response(b"<html>", 1), Err(InvalidResponse::NotAnObject));
        assert_eq!(
            check_response(br#"{"id":1,"result":"0x1"#, 1),
            Err(InvalidResponse::Malformed)
        );
        assert_eq!(
            check_response(br#"{"id":2,"result":"0x1"}"#, 1),
            Err(InvalidResponse::WrongId)
        );
        assert_eq!(check_response(br#"{"id":1}"#, 1), Err(InvalidResponse::NoResult));
        assert_eq!(
            check_response(br#"{"id":1,"result":nul}"#, 1),
            Err(InvalidResponse::Malformed)
        );
        assert_eq!(
            check_response(br#"{"id":1,"result":1} x"#, 1),
            Err(InvalidResponse::Malformed)
        );
        assert_eq!(
            check_response(br#"[{"id":1,"result":1}]"#, 1),
            Err(InvalidResponse::NotAnObject)
        );
    }

    #[test]
    fn hostile_bodies_are_invalid_never_a_panic() {
        let cases: &[(&[u8], InvalidResponse)] = &[
            (br#"{"\"#, InvalidResponse::Malformed),
            (br#"{"jsonrpc":"2.0","id":1,"result":"\"#, InvalidResponse::Malformed),
            (br#"{"id":1,"result":[}}"#, InvalidResponse::Malformed),
            (br#"{"id":1,"result":1e}"#, InvalidResponse::Malformed),
            (br#"{"id":1,"result":"\ud800"}"#, InvalidResponse::Malformed),
            (b"{\"id\":1,\"result\":\"\xff\"}", InvalidResponse::NotUtf8),
            (
                br#"{"id":1,"result":"0x1","result":"0x2"}"#,
                InvalidResponse::DuplicateMember,
            ),
            (br#"{"id":1,"id":1,"result":"0x1"}"#, InvalidResponse::DuplicateMember),
            (br#"{"id":1,"result":"0x1"}{}"#, InvalidResponse::Malformed),
            (b"", InvalidResponse::NotAnObject),
            (b"\0\0\0\0", InvalidResponse::NotAnObject),
            (b"{", InvalidResponse::Malformed),
            (b"{}}", InvalidResponse::NoResult),
        ];
        for (body, want) in cases {
            assert_eq!(
                check_response(body, 1),
                Err(*want),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        let deep = format!(r#"{{"id":1,"result":{}}}"#, "[".repeat(100_000));
        assert_eq!(check_response(deep.as_bytes(), 1), Err(InvalidResponse::Malformed));
        // A number of any size is valid JSON: passed on as the node sent it.
        let big = format!(r#"{{"id":1,"result":{}}}"#, "1".repeat(400));
        assert!(check_response(big.as_bytes(), 1).is_ok());
        // Every prefix of a good answer is refused, none panics.
        let good = br#"{"jsonrpc":"2.0","id":1,"result":{"a":["\u00e9\"",1.5e3,null]}}"#;
        assert!(check_response(good, 1).is_ok());
        for cut in 0..good.len() {
            assert!(check_response(&good[..cut], 1).is_err(), "prefix {cut}");
        }
    }
}
