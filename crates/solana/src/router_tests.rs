//! The magic router's pure pieces: how a `getMultipleAccounts` is split by side (`group`, `part_params`),
//! how the parts' answers are read (`context_and_values`, `CallOutcome::result_value`, `error_message`) and merged back in
//! the client's order with one context (`merged`), and how params are read (`keys_param`, `param_str`).

use super::params::{keys_param, param_str};
use super::reply::error_message;
use super::split::{context_and_values, group, merged, part_params};
use crate::net::Dest;
use crate::pubkey::Pubkey;
use prism_core::call::outcome::{CallOutcome, ProxyError};
use prism_wire::jsonscan::nth_element;

fn key(n: u8) -> Pubkey {
    Pubkey([n; 32])
}

/// `"<base58>"`, as a key appears in params.
fn quoted(n: u8) -> String {
    format!("\"{}\"", key(n).to_base58())
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

/// A whole upstream response with `result` or `error` as `value`, the way validation leaves it.
fn answer(value: &str, is_error: bool) -> CallOutcome {
    let member = if is_error { "error" } else { "result" };
    let body = format!(r#"{{"jsonrpc":"2.0","id":7,"{member}":{value}}}"#);
    let start = body.find(value).unwrap();
    CallOutcome::Answer {
        value: start..start + value.len(),
        body: body.into_bytes(),
        is_error,
        how: Default::default(),
    }
}

#[test]
fn group_puts_the_base_layer_first_then_ers_in_order_of_first_appearance() {
    let dests = [Dest::Er(1), Dest::Base, Dest::Er(0), Dest::Er(1), Dest::Base];
    assert_eq!(
        group(&dests),
        vec![
            (Dest::Base, vec![1, 4]),
            (Dest::Er(1), vec![0, 3]),
            (Dest::Er(0), vec![2]),
        ]
    );
}

#[test]
fn group_of_one_side_is_one_group_and_nothing_is_no_group() {
    assert_eq!(group(&[Dest::Er(2); 3]), vec![(Dest::Er(2), vec![0, 1, 2])]);
    assert_eq!(group(&[Dest::Base, Dest::Base]), vec![(Dest::Base, vec![0, 1])]);
    assert!(group(&[]).is_empty());
}

#[test]
fn group_covers_every_index_exactly_once() {
    let dests: Vec<Dest> = (0..40)
        .map(|i| if i % 3 == 0 { Dest::Base } else { Dest::Er(i % 4) })
        .collect();
    let mut all: Vec<usize> = group(&dests).into_iter().flat_map(|(_, idx)| idx).collect();
    all.sort_unstable();
    assert_eq!(all, (0..40).collect::<Vec<_>>());
    for (d, idx) in group(&dests) {
        assert!(idx.windows(2).all(|w| w[0] < w[1]), "indexes keep request order");
        assert!(idx.iter().all(|&i| dests[i] == d));
    }
}

#[test]
fn part_params_picks_the_group_items_in_order_and_keeps_the_config() {
    let (k0, k1, k2) = (quoted(0), quoted(1), quoted(2));
    let items: Vec<&[u8]> = vec![k0.as_bytes(), k1.as_bytes(), k2.as_bytes()];
    let config = br#"{"encoding":"base64","commitment":"confirmed"}"#;
    let p = part_params(&items, &[0, 2], Some(config));
    assert_eq!(
        json(&p),
        serde_json::json!([
            [key(0).to_base58(), key(2).to_base58()],
            {"encoding": "base64", "commitment": "confirmed"}
        ])
    );
    let p = part_params(&items, &[1], None);
    assert_eq!(json(&p), serde_json::json!([[key(1).to_base58()]]));
}

#[test]
fn part_params_copies_items_byte_for_byte() {
    // Whatever the client wrote for an item goes to the side as it was (no re-encoding).
    let items: Vec<&[u8]> = vec![b"\"a\"", b"\"b\""];
    assert_eq!(part_params(&items, &[1, 0], None), br#"[["b","a"]]"#);
    assert_eq!(part_params(&items, &[0], Some(b"{}")), br#"[["a"],{}]"#);
}

#[test]
fn context_and_values_reads_a_multiple_accounts_result() {
    let result = br#" { "context" : {"apiVersion":"2.1","slot":42}, "value": [null, {"lamports":5}] } "#;
    let (ctx, values) = context_and_values(result).unwrap();
    assert_eq!(ctx, br#"{"apiVersion":"2.1","slot":42}"#);
    assert_eq!(values, vec![&b"null"[..], &br#"{"lamports":5}"#[..]]);
    let (_, empty) = context_and_values(br#"{"context":{"slot":1},"value":[]}"#).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn context_and_values_refuses_answers_of_another_shape() {
    for bad in [
        &br#"{"value":[null]}"#[..],                  // no context
        br#"{"context":{"slot":1}}"#,                 // no value
        br#"{"context":{"slot":1},"value":null}"#,    // getAccountInfo's shape
        br#"{"context":{"slot":1},"value":[null,]}"#, // broken list
        br#"[null]"#,
    ] {
        assert!(context_and_values(bad).is_none(), "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn merged_is_one_context_and_the_values_in_the_given_order() {
    let values: [&[u8]; 3] = [b"null", br#"{"lamports":1}"#, br#"{"lamports":2}"#];
    let out = merged(br#"{"slot":9}"#, values.into_iter());
    assert_eq!(
        json(&out),
        serde_json::json!({"context": {"slot": 9}, "value": [null, {"lamports": 1}, {"lamports": 2}]})
    );
    assert_eq!(
        json(&merged(b"{}", std::iter::empty())),
        serde_json::json!({"context": {}, "value": []})
    );
}

#[test]
fn split_by_side_and_merged_back_restores_the_client_order() {
    // Five accounts over three sides. Each side answers its part with values naming the key asked for; the
    // merge, by the groups' indexes, must hand them back in the client's order.
    let keys: Vec<String> = (0..5).map(quoted).collect();
    let params = format!("[[{}],{{\"encoding\":\"base64\"}}]", keys.join(" , "));
    let (items, parsed) = keys_param(Some(params.as_bytes())).unwrap();
    assert_eq!(parsed, (0..5).map(key).collect::<Vec<_>>());
    let dests = [Dest::Er(0), Dest::Base, Dest::Er(1), Dest::Base, Dest::Er(0)];
    let config = nth_element(params.as_bytes(), 1);
    let mut values: Vec<Option<Vec<u8>>> = vec![None; items.len()];
    for (dest, idx) in group(&dests) {
        let part = part_params(&items, &idx, config);
        // The side sees only its own keys, in request order, with the client's config.
        let (part_items, part_keys) = keys_param(Some(&part)).unwrap();
        assert_eq!(part_keys, idx.iter().map(|&i| key(i as u8)).collect::<Vec<_>>());
        assert_eq!(nth_element(&part, 1), config);
        assert!(idx.iter().all(|&i| dests[i] == dest));
        let side_answer = format!(
            r#"{{"context":{{"slot":{}}},"value":[{}]}}"#,
            dest.code(),
            part_items
                .iter()
                .map(|k| format!(r#"{{"owner":{}}}"#, String::from_utf8_lossy(k)))
                .collect::<Vec<_>>()
                .join(",")
        );
        let (_, vals) = context_and_values(side_answer.as_bytes()).unwrap();
        for (v, &i) in vals.iter().zip(&idx) {
            values[i] = Some(v.to_vec());
        }
    }
    let out = merged(br#"{"slot":0}"#, values.iter().map(|v| v.as_deref().unwrap()));
    let out = json(&out);
    for (i, v) in out["value"].as_array().unwrap().iter().enumerate() {
        assert_eq!(v["owner"], key(i as u8).to_base58(), "value {i} out of place");
    }
}

#[test]
fn keys_param_reads_every_key_and_keeps_the_raw_items() {
    let params = format!("[[{}, {}]]", quoted(1), quoted(2));
    let (items, keys) = keys_param(Some(params.as_bytes())).unwrap();
    assert_eq!(keys, vec![key(1), key(2)]);
    assert_eq!(items, vec![quoted(1).as_bytes(), quoted(2).as_bytes()]);
    let (items, keys) = keys_param(Some(b"[[]]")).unwrap();
    assert!(items.is_empty() && keys.is_empty());
}

#[test]
fn keys_param_is_none_unless_every_item_is_a_key() {
    let k = quoted(1);
    for bad in [
        format!("[[{k}, \"not-a-key\"]]"),
        format!("[[{k}, 5]]"),
        format!("[{k}]"),                      // params[0] not a list
        "[]".to_string(),                      // no params[0]
        "{\"a\":1}".to_string(),               // params not a list
        format!("[[\"{}\"]]", "1".repeat(45)), // too long for a key
    ] {
        assert!(keys_param(Some(bad.as_bytes())).is_none(), "{bad}");
    }
    assert!(keys_param(None).is_none());
}

#[test]
fn param_str_reads_plain_strings_only() {
    let params = br#"["sig", 5, "esc\"aped", {"a":1}]"#;
    assert_eq!(param_str(Some(params), 0), Some("sig"));
    assert_eq!(param_str(Some(params), 1), None, "a number is not a string");
    assert_eq!(param_str(Some(params), 2), None, "escaped strings are not read");
    assert_eq!(param_str(Some(params), 3), None);
    assert_eq!(param_str(Some(params), 4), None, "past the end");
    assert_eq!(param_str(None, 0), None);
    assert_eq!(param_str(Some(b"\"sig\""), 0), None, "params must be a list");
}

#[test]
fn result_of_is_the_result_value_of_a_successful_answer_only() {
    let ok = answer(r#"{"context":{"slot":1},"value":null}"#, false);
    assert_eq!(
        CallOutcome::result_value(&ok),
        Some(&br#"{"context":{"slot":1},"value":null}"#[..])
    );
    let err = answer(r#"{"code":-32602,"message":"bad"}"#, true);
    assert_eq!(CallOutcome::result_value(&err), None);
    let failed = CallOutcome::Failed(ProxyError::Unsupported("x"));
    assert_eq!(CallOutcome::result_value(&failed), None);
    assert_eq!(
        CallOutcome::result_value(&CallOutcome::result(b"\"made\"".to_vec())),
        Some(&b"\"made\""[..])
    );
}

#[test]
fn error_message_is_the_raw_message_of_an_error_answer_only() {
    let err = answer(
        r#"{"code":-32602,"message":"Invalid param: not a Token account","data":null}"#,
        true,
    );
    let m = error_message(&err).unwrap();
    assert_eq!(
        m, br#""Invalid param: not a Token account""#,
        "raw JSON, quotes included"
    );
    assert!(memchr::memmem::find(m, b"not a Token account").is_some());
    assert_eq!(
        error_message(&answer(r#"{"message":"no"}"#, false)),
        None,
        "a result is not an error"
    );
    assert_eq!(error_message(&answer(r#"{"code":-1}"#, true)), None);
    assert_eq!(error_message(&CallOutcome::Failed(ProxyError::Unsupported("x"))), None);
}
