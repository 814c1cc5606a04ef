use super::*;

fn span(params: &str, head: u64) -> Option<Span> {
    Span::of(Some(params.as_bytes()), head)
}

#[test]
fn ranges_resolve_numbers_and_sound_tags_only() {
    assert_eq!(
        span(r#"[{"fromBlock":"0x1","toBlock":"0x20"}]"#, 0),
        Some(Span { from: 1, to: 32 })
    );
    assert_eq!(
        span(r#"[{"fromBlock":"earliest","toBlock":"latest"}]"#, 99),
        Some(Span { from: 0, to: 99 })
    );
    // Absent bounds are `latest`.
    assert_eq!(span(r#"[{"address":"0xab"}]"#, 7), Some(Span { from: 7, to: 7 }));
    assert_eq!(span(r#"[{"fromBlock":"0x5"}]"#, 9), Some(Span { from: 5, to: 9 }));
    // No agreed head yet: `latest` cannot be pinned.
    assert_eq!(span(r#"[{"fromBlock":"0x5"}]"#, 0), None);
    for tag in ["safe", "finalized", "pending", "bogus"] {
        assert_eq!(
            span(&format!(r#"[{{"fromBlock":"0x1","toBlock":"{tag}"}}]"#), 100),
            None,
            "{tag}"
        );
    }
    assert_eq!(
        span(r#"[{"blockHash":"0xab"}]"#, 100),
        None,
        "blockHash filters are never split"
    );
    assert_eq!(span(r#"[{"fromBlock":"0x9","toBlock":"0x2"}]"#, 100), None, "reversed");
    assert_eq!(span(r#"[{"fromBlock":"0x1"},{}]"#, 100), None, "two params");
    assert_eq!(span(r#"[]"#, 100), None);
    assert_eq!(span(r#"[{"fromBlock":"0x1""#, 100), None, "broken");
    assert_eq!(Span { from: 3, to: 3 }.width(), 1);
}

#[test]
fn sub_params_keep_every_other_member_as_sent() {
    let params = br#"[ {"address":["0xAb"], "fromBlock":"latest","topics":[null,"0x01"],"toBlock":"0x10"} ]"#;
    let out = sub_params(params, Span { from: 16, to: 255 }).unwrap();
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        r#"[{"fromBlock":"0x10","toBlock":"0xff","address":["0xAb"],"topics":[null,"0x01"]}]"#
    );
    let out = sub_params(br#"[{}]"#, Span { from: 0, to: 1 }).unwrap();
    assert_eq!(out, br#"[{"fromBlock":"0x0","toBlock":"0x1"}]"#);
}

fn stated(message: &str) -> Option<Stated> {
    stated_limit(
        format!(
            r#"{{"code":-32000,"message":{}}}"#,
            serde_json::to_string(message).unwrap()
        )
        .as_bytes(),
    )
}

#[test]
fn limits_stated_by_real_providers_are_read() {
    use Stated::*;
    for (message, want) in [
        ("query returned more than 10000 results", Some(Results(10_000))),
        ("eth_getLogs is limited to a 10,000 range", Some(Range(10_000))),
        ("eth_getLogs and eth_newFilter are limited to a 10,000 blocks range", Some(Range(10_000))),
        (
            "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters, this block range should work: [0xab7149, 0xab7918]",
            Some(Range(2_000)),
        ),
        ("You can make eth_getLogs requests with up to a 500 block range. Based on your parameters, this block range should work: [0x123c9b2, 0x123cba5]", Some(Range(500))),
        ("range 1000000 exceeds limit of 10000", Some(Range(10_000))),
        ("logs matched by query exceeds limit of 10000", Some(Results(10_000))),
        ("maximum [from, to] blocks distance: 10000", Some(Range(10_000))),
        ("query exceeds max results 20000, retry with the range 5022412-5023131", Some(Results(20_000))),
        ("exceeds the range allowed for your plan (10001 > 10000)", Some(Range(10_000))),
        ("block range is too wide", None),
        ("Block range limit exceeded.", None),
        ("backend response too large", None),
    ] {
        assert_eq!(stated(message), want, "{message}");
    }
    assert_eq!(stated_limit(b"not json"), None);
    assert_eq!(stated_limit(br#"{"code":1}"#), None);
    assert_eq!(
        stated("99999999999999999999999999 range"),
        Some(Stated::Range(u64::MAX))
    );
}

#[test]
fn merged_parts_are_the_elements_joined_in_range_order() {
    let mut m = Merged::default();
    assert_eq!(m.add(20, br#"[{"b":2},{"c":3}]"#), Some(2));
    assert_eq!(m.add(10, br#"[ {"a":1} ]"#), Some(1));
    assert_eq!(m.add(30, b"[]"), Some(0));
    assert_eq!(m.add(40, br#"{"x":1}"#), None);
    assert_eq!(m.logs, 3);
    assert_eq!(m.finish(), br#"[{"a":1},{"b":2},{"c":3}]"#);
    assert_eq!(Merged::default().finish(), b"[]");
    let mut empty = Merged::default();
    empty.add(1, b"[]");
    empty.add(2, b"[]");
    assert_eq!(empty.finish(), b"[]");
}
