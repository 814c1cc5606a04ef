use super::*;

fn parser() -> EnvelopeParser {
    EnvelopeParser::new(EnvelopeLimits {
        max_batch: 5,
        max_depth: 8,
    })
}

fn single(body: &str) -> Item<'_> {
    match parser().parse(body.as_bytes()).unwrap() {
        Envelope::Single(item) => item,
        other => panic!("expected single, got {other:?}"),
    }
}

#[test]
fn spans_are_original_bytes() {
    let body = r#" { "jsonrpc" : "2.0", "id" : 1.50 , "method":"eth_call", "params" : [ {"to":"0xAb"} , "latest" ] } "#;
    let call = single(body).unwrap();
    assert_eq!(call.id, Some(&b"1.50"[..]));
    assert_eq!(call.method, "eth_call");
    assert!(matches!(call.method, Cow::Borrowed(_)));
    assert_eq!(call.params, Some(&br#"[ {"to":"0xAb"} , "latest" ]"#[..]));
}

#[test]
fn ids_of_every_type_kept() {
    for id in [
        "1",
        "-0",
        "123456789012345678901234567890",
        "1e400",
        "\"s\\u00e9\"",
        "null",
        "\"\"",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"m","id":{id}}}"#);
        let call = single(&body).unwrap_or_else(|e| panic!("{id}: {e:?}"));
        assert_eq!(call.id, Some(id.as_bytes()), "{id}");
    }
}

#[test]
fn notification_has_no_id() {
    let call = single(r#"{"jsonrpc":"2.0","method":"m","params":{}}"#).unwrap();
    assert!(call.is_notification());
    assert_eq!(call.params, Some(&b"{}"[..]));
}

#[test]
fn escaped_method_is_unescaped() {
    let call = single(r#"{"jsonrpc":"2.0","method":"eth_\u0063all","id":1}"#).unwrap();
    assert_eq!(call.method, "eth_call");
}

#[test]
fn invalid_requests() {
    let cases = [
        (r#"{"method":"m","id":1}"#, Invalid::MissingVersion),
        (r#"{"jsonrpc":"1.0","method":"m","id":1}"#, Invalid::BadVersion),
        (r#"{"jsonrpc":"2.0","id":1}"#, Invalid::MissingMethod),
        (r#"{"jsonrpc":"2.0","method":1,"id":1}"#, Invalid::MethodNotString),
        (
            r#"{"jsonrpc":"2.0","method":"m","params":"x","id":1}"#,
            Invalid::BadParams,
        ),
        (r#"{"jsonrpc":"2.0","method":"m","id":[1]}"#, Invalid::BadId),
        (r#"{"jsonrpc":"2.0","method":"m","id":true}"#, Invalid::BadId),
        (
            r#"{"jsonrpc":"2.0","method":"a","method":"b","id":1}"#,
            Invalid::DuplicateKey(KnownKey::Method),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"a","m\u0065thod":"b","id":1}"#,
            Invalid::DuplicateKey(KnownKey::Method),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"a","x":1,"x":2,"id":1}"#,
            Invalid::DuplicateOtherKey,
        ),
        ("{}", Invalid::MissingVersion),
    ];
    for (body, why) in cases {
        let rejected = single(body).unwrap_err();
        assert_eq!(rejected.why, why, "{body}");
    }
    // The id is reported when it could be read.
    assert_eq!(
        single(r#"{"jsonrpc":"2.0","id":"x"}"#).unwrap_err().id,
        Some(&b"\"x\""[..])
    );
    assert_eq!(single(r#"{"jsonrpc":"2.0","id":{}}"#).unwrap_err().id, None);
}

#[test]
fn batches_keep_order_and_reject_items() {
    let body = r#"[{"jsonrpc":"2.0","method":"a","id":1}, 2, {"jsonrpc":"2.0","method":"b"}, [], {}, {"jsonrpc":"2.0","method":"c","id":"z","params":[[1],{"a":[]}]}]"#;
    let mut p = EnvelopeParser::new(EnvelopeLimits {
        max_batch: 10,
        max_depth: 8,
    });
    let Envelope::Batch(items) = p.parse(body.as_bytes()).unwrap() else {
        panic!()
    };
    assert_eq!(items.len(), 6);
    assert_eq!(items[0].as_ref().unwrap().method, "a");
    assert_eq!(items[1].as_ref().unwrap_err().why, Invalid::NotAnObject);
    assert!(items[2].as_ref().unwrap().is_notification());
    assert_eq!(items[3].as_ref().unwrap_err().why, Invalid::NotAnObject);
    assert_eq!(items[4].as_ref().unwrap_err().why, Invalid::MissingVersion);
    let last = items[5].as_ref().unwrap();
    assert_eq!(
        (last.id, last.params),
        (Some(&b"\"z\""[..]), Some(&br#"[[1],{"a":[]}]"#[..]))
    );
}

#[test]
fn whole_body_errors() {
    let mut p = parser();
    assert_eq!(p.parse(b"[]").unwrap_err(), EnvelopeError::EmptyBatch);
    assert!(matches!(p.parse(b"{").unwrap_err(), EnvelopeError::Parse(_)));
    assert!(matches!(p.parse(b"").unwrap_err(), EnvelopeError::Parse(_)));
    assert!(matches!(p.parse(b"nope").unwrap_err(), EnvelopeError::Parse(_)));
    assert!(matches!(p.parse(b"{\"a\":1} x").unwrap_err(), EnvelopeError::Parse(_)));
    assert!(matches!(p.parse(b"\xff").unwrap_err(), EnvelopeError::Parse(_)));
    assert_eq!(p.parse(b"1").unwrap_err(), EnvelopeError::NotARequest);
    assert_eq!(
        p.parse(b"[1,1,1,1,1,1]").unwrap_err(),
        EnvelopeError::BatchTooLarge { len: 6, max: 5 }
    );
    let deep = format!(
        r#"{{"jsonrpc":"2.0","method":"m","params":{}{}}}"#,
        "[".repeat(8),
        "]".repeat(8)
    );
    assert_eq!(p.parse(deep.as_bytes()).unwrap_err(), EnvelopeError::TooDeep { max: 8 });
    // Brackets inside strings do not count.
    let fine = format!(r#"{{"jsonrpc":"2.0","method":"m","params":["{}"]}}"#, "[".repeat(50));
    assert!(p.parse(fine.as_bytes()).is_ok());
}

#[test]
fn parser_is_reusable_across_bodies() {
    let mut p = parser();
    for i in 0..100 {
        let body = format!(
            r#"{{"jsonrpc":"2.0","method":"m{i}","id":{i},"params":["{}"]}}"#,
            "ab".repeat(i)
        );
        let Envelope::Single(Ok(call)) = p.parse(body.as_bytes()).unwrap() else {
            panic!()
        };
        assert_eq!(call.method, format!("m{i}"));
    }
}

#[test]
fn out_of_range_numbers_are_valid_json() {
    let body = r#"{"jsonrpc":"2.0","method":"m","id":-1.5e400,"params":[1E-999, 2e+400]}"#;
    let call = single(body).unwrap();
    assert_eq!(call.id, Some(&b"-1.5e400"[..]));
    assert_eq!(call.params, Some(&b"[1E-999, 2e+400]"[..]));
    assert!(matches!(
        parser().parse(br#"{"jsonrpc":"2.0","method":"m","id":01}"#),
        Err(EnvelopeError::Parse(_))
    ));
    assert_eq!(number_len(b"-0.5e+3,"), Some(7));
    assert_eq!(number_len(b"1."), None);
}

/// Fuzzing findings (fuzz/RESULTS.md): valid JSON with huge exponents is served, and bytes simd-json skips
/// after a scalar (a NUL, garbage after a long number, an invalid number hidden behind a masked one) are
/// refused instead of forwarded.
#[test]
fn every_scalar_token_is_whole_and_long_exponents_are_valid() {
    let ok = |body: &[u8]| {
        let r = parser().parse(body);
        assert!(r.is_ok(), "{:?} refused: {r:?}", String::from_utf8_lossy(body));
    };
    let bad = |body: &[u8]| {
        let r = parser().parse(body);
        assert!(
            matches!(r, Err(EnvelopeError::Parse(_))),
            "{:?} accepted: {r:?}",
            String::from_utf8_lossy(body)
        );
    };
    ok(br#"{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[0e4345678901234567890]}"#);
    ok(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1e99999999999, 2e-4345678901234567890]}"#);
    ok(br#"{"jsonrpc":"2.0","id":18446744073709551616123,"method":"m","params":[66666666666666666626.5]}"#);
    bad(b"[3\0\0\0top1\0]");
    bad(b"{\"jsonrpc\":\"2.0\",\"id\":3\0xyz,\"method\":\"m\"}");
    bad(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[1\0garbage]}");
    bad(br#"{"jsonrpc":"2.0","id":18446744073709551616x,"method":"m"}"#);
    bad(br#"{"jsonrpc":"2.0","id":66666666666666666626.5vvv,"method":"m"}"#);
    bad(br#"[1e400,-1E+-400]"#);
    assert!(matches!(parser().parse(b"110E420"), Err(EnvelopeError::NotARequest)));
}

#[test]
fn more_huge_numbers_than_are_masked_is_an_invalid_request_not_a_parse_error() {
    // Found by fuzzing: valid JSON with 17+ numbers out of a double's range got -32700.
    let call = |n: usize| {
        let numbers = vec!["1e400"; n].join(",");
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":[{numbers}]}}"#)
    };
    let sixteen = call(16);
    let got = parser().parse(sixteen.as_bytes());
    assert!(matches!(got, Ok(Envelope::Single(Ok(_)))), "16 are masked: {got:?}");
    assert_eq!(
        parser().parse(call(17).as_bytes()).unwrap_err(),
        EnvelopeError::TooManyHugeNumbers { max: 16 }
    );
    // Still invalid JSON when the 17th is malformed, or anything after it is: a parse error, as before.
    let bad = call(16).replace("]}", r#",1e+-400]}"#);
    assert!(matches!(parser().parse(bad.as_bytes()), Err(EnvelopeError::Parse(_))));
    let bad = call(17).replace("]}", r#",,1]}"#);
    assert!(matches!(parser().parse(bad.as_bytes()), Err(EnvelopeError::Parse(_))));
    let bad = call(17).replace("]}", "]");
    assert!(matches!(parser().parse(bad.as_bytes()), Err(EnvelopeError::Parse(_))));
}

/// `{"jsonrpc":"2.0","id":1,"method":"m"` plus `n` other keys `k0`..; `dup` repeats key `k{dup}` at the end.
fn many_keys(n: usize, dup: Option<usize>) -> String {
    let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"m""#);
    for i in 0..n {
        s.push_str(&format!(r#","k{i}":{i}"#));
    }
    if let Some(d) = dup {
        s.push_str(&format!(r#","k{d}":0"#));
    }
    s.push('}');
    s
}

#[test]
fn duplicate_other_keys_are_found_on_both_sides_of_the_inline_limit() {
    for n in [
        1,
        2,
        INLINE_KEYS - 1,
        INLINE_KEYS,
        INLINE_KEYS + 1,
        3 * INLINE_KEYS,
        1000,
    ] {
        assert!(single(&many_keys(n, None)).is_ok(), "{n} distinct keys");
        for dup in [0, n / 2, n - 1] {
            let body = many_keys(n, Some(dup));
            assert_eq!(
                single(&body).unwrap_err().why,
                Invalid::DuplicateOtherKey,
                "{n} keys, k{dup} twice"
            );
        }
    }
    // An escaped spelling of the same key is the same key.
    let body = many_keys(40, None).replace("}", r#","k\u0033":0}"#);
    assert_eq!(single(&body).unwrap_err().why, Invalid::DuplicateOtherKey);
}

#[test]
fn many_distinct_keys_parse_in_linear_time() {
    // 80 000 keys took ~30 s with a pairwise check; linear, it is milliseconds even in a debug build.
    let body = many_keys(80_000, None);
    let started = std::time::Instant::now();
    assert!(single(&body).is_ok());
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(3), "80 000 keys took {took:?}");
}
