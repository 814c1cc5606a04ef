//! The JSON-RPC 2.0 envelope through a running Prism: single calls, batches, notifications, ids, the spec's
//! errors, duplicate keys, depth, and byte transparency of params and results.

use crate::support::http;
use crate::support::{
    batch, batch_items, call, expect_error, expect_http_error, expect_http_result, expect_result, json, notification,
    raw_field, FakeProvider, Prism, Reply,
};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(3);

fn setup() -> (FakeProvider, Prism) {
    let fake = FakeProvider::start();
    let prism = Prism::start(&[&fake]);
    (fake, prism)
}

fn message(err: &serde_json::Value) -> String {
    err["message"].as_str().unwrap_or_default().to_ascii_lowercase()
}

// ---- calls, batches, notifications -------------------------------------------------------------

#[test]
fn single_call() {
    let (fake, prism) = setup();
    let r = prism.rpc(call("1", "eth_chainId", "[]").as_bytes());
    assert_eq!(expect_http_result(&r, "1"), b"\"0x1237\"");
    // A new head the chain can have reached since the last probe (a jump of thousands of blocks in no
    // time is implausible: see `poisoned_heads`).
    fake.set_head(0x120);
    let r = prism.rpc(call("2", "eth_blockNumber", "[]").as_bytes());
    assert_eq!(expect_http_result(&r, "2"), b"\"0x120\"");
}

#[test]
fn call_without_params_is_forwarded() {
    let (fake, prism) = setup();
    let r = prism.rpc(br#"{"jsonrpc":"2.0","id":3,"method":"echo"}"#);
    let result = expect_http_result(&r, "3");
    assert_eq!(
        raw_field(&result, "params"),
        b"null",
        "the upstream must not receive invented params"
    );
    assert_eq!(fake.calls_to("echo")[0].params, None);
}

#[test]
fn batch_keeps_request_order() {
    let (fake, prism) = setup();
    // The first call is answered last upstream: order must still follow the request.
    fake.set_delay("eth_getBalance", Duration::from_millis(300));
    let body = batch(&[
        call("1", "eth_getBalance", "[\"0x00\",\"latest\"]"),
        call("\"two\"", "eth_chainId", "[]"),
        call("3", "echo", "[3]"),
        call("4", "echo", "[4]"),
    ]);
    let r = prism.rpc(body.as_bytes());
    let items = batch_items(&r);
    assert_eq!(items.len(), 4, "{}", r.describe());
    assert_eq!(expect_result(&items[0], "1"), b"\"0x0\"");
    assert_eq!(expect_result(&items[1], "\"two\""), b"\"0x1237\"");
    assert_eq!(raw_field(expect_result(&items[2], "3"), "params"), b"[3]");
    assert_eq!(raw_field(expect_result(&items[3], "4"), "params"), b"[4]");
}

#[test]
fn batch_calls_reach_the_upstream_as_single_calls_with_exact_params() {
    let (fake, prism) = setup();
    let params = ["[1]", "[ \"a\" ,\n2 ]", "{\"k\" : 1e400}"];
    let body = batch(&[
        call("\"x\"", "echo", params[0]),
        call("\"y\"", "echo", params[1]),
        call("\"z\"", "echo", params[2]),
    ]);
    let items = batch_items(&prism.rpc(body.as_bytes()));
    assert_eq!(items.len(), 3);
    for (item, (id, p)) in items.iter().zip(["\"x\"", "\"y\"", "\"z\""].iter().zip(params)) {
        assert_eq!(json::text(raw_field(expect_result(item, id), "params")), p);
    }
    let mut got: Vec<String> = fake
        .calls_to("echo")
        .iter()
        .map(|c| json::text(c.params.as_deref().unwrap()))
        .collect();
    got.sort();
    let mut want: Vec<String> = params.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want, "params bytes at the upstream");
    assert!(
        fake.calls().iter().all(|c| !c.in_batch),
        "Prism forwards each call of a batch on its own"
    );
}

#[test]
fn exactly_max_batch_is_served() {
    let (_fake, prism) = setup(); // max_batch = 10
    let items: Vec<String> = (0..10)
        .map(|i| call(&i.to_string(), "echo", &format!("[{i}]")))
        .collect();
    let out = batch_items(&prism.rpc(batch(&items).as_bytes()));
    assert_eq!(out.len(), 10);
    for (i, item) in out.iter().enumerate() {
        expect_result(item, &i.to_string());
    }
}

#[test]
fn batch_over_max_batch_is_one_clear_error() {
    let (fake, prism) = setup();
    let items: Vec<String> = (0..11).map(|i| call(&i.to_string(), "echo", "[]")).collect();
    let r = prism.rpc(batch(&items).as_bytes());
    let (err, id) = expect_http_error(&r, -32600);
    assert_eq!(id, "null");
    assert!(
        message(&err).contains("batch"),
        "the message should say the batch is too large: {err}"
    );
    crate::support::assert_no_client_calls(&fake, "an oversize batch");
}

#[test]
fn single_notification_is_forwarded_and_answered_204() {
    let (fake, prism) = setup();
    let r = prism.rpc(notification("echo", "[\"note\"]").as_bytes());
    assert_eq!(r.status, 204, "{}", r.describe());
    assert!(r.body.is_empty());
    assert!(
        fake.wait_for_calls("echo", 1, WAIT),
        "the notification never reached the upstream"
    );
    assert_eq!(fake.calls_to("echo")[0].params.as_deref(), Some(&b"[\"note\"]"[..]));
}

#[test]
fn batch_of_only_notifications_is_answered_204() {
    let (fake, prism) = setup();
    let r = prism.rpc(batch(&[notification("echo", "[1]"), notification("echo", "[2]")]).as_bytes());
    assert_eq!(r.status, 204, "{}", r.describe());
    assert!(r.body.is_empty());
    assert!(
        fake.wait_for_calls("echo", 2, WAIT),
        "notifications did not all reach the upstream"
    );
}

#[test]
fn batch_with_notifications_returns_only_the_calls() {
    let (fake, prism) = setup();
    let body = batch(&[
        call("1", "eth_chainId", "[]"),
        notification("echo", "[\"n\"]"),
        call("2", "eth_blockNumber", "[]"),
    ]);
    let items = batch_items(&prism.rpc(body.as_bytes()));
    assert_eq!(
        items.len(),
        2,
        "{:?}",
        items.iter().map(|i| json::text(i)).collect::<Vec<_>>()
    );
    expect_result(&items[0], "1");
    expect_result(&items[1], "2");
    assert!(
        fake.wait_for_calls("echo", 1, WAIT),
        "the notification inside the batch never reached the upstream"
    );
}

#[test]
fn id_null_is_a_call() {
    let (fake, prism) = setup();
    let r = prism.rpc(br#"{"jsonrpc":"2.0","id":null,"method":"echo","params":[]}"#);
    assert_eq!(raw_field(&expect_http_result(&r, "null"), "params"), b"[]");
    assert_eq!(fake.count("echo"), 1);
}

// ---- ids -----------------------------------------------------------------------------------------

const IDS: &[&str] = &[
    "1",
    "0",
    "-0",
    "-1",
    "1e400",
    "-1.5E-7",
    "123456789012345678901234567890",
    "\"str\"",
    "\"\\u00e9\"",
    "\"é\"",
    "\"a\\\"b\"",
    "\"\"",
    "null",
];

#[test]
fn ids_of_every_json_type_are_kept_byte_for_byte() {
    let (fake, prism) = setup();
    let mut c = prism.conn();
    for id in IDS {
        let r = c.request(&http::post("/", call(id, "echo", "[]").as_bytes()));
        expect_http_result(&r, id);
    }
    assert_eq!(fake.count("echo"), IDS.len());
}

#[test]
fn ids_in_a_batch_are_kept_byte_for_byte() {
    let fake = FakeProvider::start();
    let prism = Prism::builder().provider(&fake).limit("max_batch", 20).start();
    let items: Vec<String> = IDS.iter().map(|id| call(id, "eth_chainId", "[]")).collect();
    let out = batch_items(&prism.rpc(batch(&items).as_bytes()));
    assert_eq!(out.len(), IDS.len());
    for (item, id) in out.iter().zip(IDS) {
        expect_result(item, id);
    }
}

#[test]
fn object_or_array_id_is_an_invalid_request() {
    let (fake, prism) = setup();
    for id in ["{\"a\":1}", "[1]", "true"] {
        let r = prism.rpc(call(id, "echo", "[]").as_bytes());
        expect_http_error(&r, -32600);
    }
    crate::support::assert_no_client_calls(&fake, "an invalid request");
}

// ---- spec errors ---------------------------------------------------------------------------------

#[test]
fn invalid_json_is_parse_error_with_null_id() {
    let (fake, prism) = setup();
    let bad: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance""#,
        b"not json",
        br#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance"} trailing"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance",}"#,
        br#"[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance"},"#,
        br#"{"jsonrpc":"2.0","id":01,"method":"eth_getBalance"}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":[1,]}"#,
        br#"{'jsonrpc':'2.0'}"#,
    ];
    for body in bad {
        let r = prism.rpc(body);
        let (_, id) = expect_http_error(&r, -32700);
        assert_eq!(id, "null", "for body {:?}", String::from_utf8_lossy(body));
    }
    crate::support::assert_no_client_calls(&fake, "an invalid request");
}

#[test]
fn empty_body_is_an_error() {
    let (fake, prism) = setup();
    for body in [&b""[..], b"   \n"] {
        let r = prism.rpc(body);
        assert_eq!(r.status, 200, "{}", r.describe());
        let err = json::field(&r.body, "error").unwrap_or_else(|| panic!("no error: {}", r.describe()));
        let code: serde_json::Value = serde_json::from_slice(err).unwrap();
        let code = code["code"].as_i64().unwrap();
        assert!(code == -32700 || code == -32600, "code {code}");
    }
    crate::support::assert_no_client_calls(&fake, "an invalid request");
}

#[test]
fn invalid_request_is_32600() {
    let (fake, prism) = setup();
    let cases: &[(&[u8], &[&str])] = &[
        (br#"{"jsonrpc":"2.0","id":1}"#, &["1", "null"]),
        (br#"{"jsonrpc":"2.0","id":1,"method":1}"#, &["1", "null"]),
        (br#"{"jsonrpc":"2.0","id":1,"method":null}"#, &["1", "null"]),
        (b"1", &["null"]),
        (b"\"eth_getBalance\"", &["null"]),
        (b"true", &["null"]),
        (b"null", &["null"]),
    ];
    for (body, ids) in cases {
        let r = prism.rpc(body);
        let (_, id) = expect_http_error(&r, -32600);
        assert!(
            ids.contains(&id.as_str()),
            "id {id} for {:?}",
            String::from_utf8_lossy(body)
        );
    }
    crate::support::assert_no_client_calls(&fake, "an invalid request");
}

#[test]
fn empty_batch_is_one_error_object() {
    let (fake, prism) = setup();
    for body in [&b"[]"[..], b"[ ]", b" [\n] "] {
        let r = prism.rpc(body);
        let (_, id) = expect_http_error(&r, -32600); // asserts an object, not an array
        assert_eq!(id, "null");
    }
    crate::support::assert_no_client_calls(&fake, "an invalid request");
}

#[test]
fn batch_of_non_objects_gets_one_error_each() {
    let (fake, prism) = setup();
    let items = batch_items(&prism.rpc(b"[1,2]"));
    assert_eq!(items.len(), 2);
    for item in &items {
        expect_error(item, -32600);
        assert_eq!(raw_field(item, "id"), b"null");
    }
    let items = batch_items(&prism.rpc(b"[1]"));
    assert_eq!(items.len(), 1);
    expect_error(&items[0], -32600);
    crate::support::assert_no_client_calls(&fake, "an invalid request");
}

#[test]
fn batch_mixing_valid_and_invalid_items() {
    let (fake, prism) = setup();
    let body = format!(
        "[{},5,{{\"jsonrpc\":\"2.0\",\"id\":9}},{}]",
        call("1", "echo", "[1]"),
        call("2", "echo", "[2]")
    );
    let items = batch_items(&prism.rpc(body.as_bytes()));
    assert_eq!(items.len(), 4);
    expect_result(&items[0], "1");
    expect_error(&items[1], -32600);
    expect_error(&items[2], -32600);
    expect_result(&items[3], "2");
    assert_eq!(fake.count("echo"), 2);
    assert_eq!(fake.client_calls().len(), 2);
}

// ---- duplicate keys and depth --------------------------------------------------------------------

#[test]
fn duplicate_top_level_keys_are_rejected() {
    let (fake, prism) = setup();
    let cases: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","method":"echo"}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","m\u0065thod":"echo"}"#,
        br#"{"jsonrpc":"2.0","id":1,"\u006dethod":"echo","method":"eth_getBalance"}"#,
        br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"eth_getBalance"}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[1],"params":[2]}"#,
        br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"eth_getBalance"}"#,
    ];
    for body in cases {
        let r = prism.rpc(body);
        let (err, _) = expect_http_error(&r, -32600);
        assert!(
            message(&err).contains("duplicate"),
            "message should name the duplicate key: {err}"
        );
    }
    crate::support::assert_no_client_calls(&fake, "a call with duplicate keys");
}

#[test]
fn duplicate_keys_in_a_batch_item_fail_only_that_item() {
    let (fake, prism) = setup();
    let body = format!(
        "[{},{}]",
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","m\u0065thod":"echo"}"#,
        call("2", "net_peerCount", "[]")
    );
    let items = batch_items(&prism.rpc(body.as_bytes()));
    assert_eq!(items.len(), 2);
    expect_error(&items[0], -32600);
    expect_result(&items[1], "2");
    let seen: Vec<String> = fake.client_calls().into_iter().map(|c| c.method).collect();
    assert_eq!(
        seen,
        vec!["net_peerCount".to_string()],
        "only the valid item may reach the upstream"
    );
}

#[test]
fn duplicate_keys_inside_params_are_forwarded_unchanged() {
    let (fake, prism) = setup();
    let params = r#"[{"a":1,"a":2}]"#;
    let r = prism.rpc(call("1", "echo", params).as_bytes());
    assert_eq!(json::text(raw_field(&expect_http_result(&r, "1"), "params")), params);
    assert_eq!(fake.count("echo"), 1);
}

#[test]
fn escaped_key_and_method_are_understood() {
    let (fake, prism) = setup();
    let r = prism.rpc(br#"{"jsonrpc":"2.0","id":1,"m\u0065thod":"\u0065cho","params":[5]}"#);
    assert_eq!(raw_field(&expect_http_result(&r, "1"), "params"), b"[5]");
    assert_eq!(fake.count("echo"), 1);
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn nesting_within_max_depth_is_forwarded() {
    let (_fake, prism) = setup(); // max_depth = 16
    let params = nested(10);
    let r = prism.rpc(call("1", "echo", &params).as_bytes());
    assert_eq!(json::text(raw_field(&expect_http_result(&r, "1"), "params")), params);
}

#[test]
fn nesting_deeper_than_max_depth_is_rejected() {
    let (fake, prism) = setup();
    let r = prism.rpc(call("1", "echo", &nested(30)).as_bytes());
    let (err, _) = expect_http_error(&r, -32600);
    let m = message(&err);
    assert!(
        m.contains("deep") || m.contains("depth") || m.contains("nest"),
        "message should say why: {err}"
    );
    // also through objects, and inside a batch item
    let deep_obj = format!("{}1{}", "{\"a\":".repeat(30), "}".repeat(30));
    expect_http_error(&prism.rpc(call("2", "echo", &deep_obj).as_bytes()), -32600);
    crate::support::assert_no_client_calls(&fake, "an invalid request");
}

#[test]
fn pathological_nesting_is_answered_quickly_and_prism_survives() {
    let (_fake, prism) = setup();
    let t = Instant::now();
    let body = "[".repeat(60_000);
    let r = prism.rpc(body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.describe());
    let err = json::field(&r.body, "error").unwrap_or_else(|| panic!("no error: {}", r.describe()));
    let code = serde_json::from_slice::<serde_json::Value>(err).unwrap()["code"]
        .as_i64()
        .unwrap();
    assert!(code == -32600 || code == -32700, "code {code}");
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
    let r = prism.rpc(call("1", "eth_chainId", "[]").as_bytes());
    expect_http_result(&r, "1");
}

// ---- transparency --------------------------------------------------------------------------------

#[test]
fn params_bytes_reach_the_upstream_unchanged() {
    let (fake, prism) = setup();
    let odd: &[&str] = &[
        "[ \"0xAbCd\" ,\n\t{\"to\" : \"0x00\" ,\"value\":\"0x1\"} ,\r\n \"latest\" ]",
        "[\"\\u00e9\\ud83d\\ude00\\/\\n\", \"é😀\"]",
        "[123456789012345678901234567890123, 1e400, -0, -0.0, 1E+2, 0.000000000000000000001]",
        "{\"named\" : true, \"z\":null , \"a\":[]}",
        "[]",
        "{}",
    ];
    for (i, p) in odd.iter().enumerate() {
        let r = prism.rpc(call(&i.to_string(), "echo", p).as_bytes());
        let result = expect_http_result(&r, &i.to_string());
        assert_eq!(json::text(raw_field(&result, "params")), *p, "params as echoed back");
    }
    let seen: Vec<String> = fake
        .calls_to("echo")
        .iter()
        .map(|c| json::text(c.params.as_deref().unwrap()))
        .collect();
    assert_eq!(
        seen,
        odd.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        "params at the upstream"
    );
}

#[test]
fn large_raw_transaction_params_are_forwarded_unchanged() {
    let (fake, prism) = setup();
    let tx = format!("[\"0x{}\"]", "ab".repeat(30_000));
    let r = prism.rpc(call("1", "echo", &tx).as_bytes());
    assert_eq!(json::text(raw_field(&expect_http_result(&r, "1"), "params")), tx);
    assert_eq!(fake.calls_to("echo")[0].params.as_deref(), Some(tx.as_bytes()));
}

#[test]
fn result_bytes_reach_the_client_unchanged() {
    let (fake, prism) = setup();
    let odd = "{ \"x\" : [1 , 2.50, 1e400, \"\\u00e9\", \"é\"] ,\n\"y\":null, \"n\":123456789012345678901234567890 }";
    fake.set_reply("eth_weird", Reply::Result(odd.into()));
    let r = prism.rpc(call("\"q\"", "eth_weird", "[]").as_bytes());
    assert_eq!(json::text(&expect_http_result(&r, "\"q\"")), odd);
    // null is an answer, not an error
    fake.set_reply("eth_getTransactionReceipt", Reply::Result("null".into()));
    let r = prism.rpc(call("1", "eth_getTransactionReceipt", "[\"0x00\"]").as_bytes());
    assert_eq!(expect_http_result(&r, "1"), b"null");
    // a big result too
    let big = format!("\"0x{}\"", "cd".repeat(100_000));
    fake.set_reply("eth_big", Reply::Result(big.clone()));
    let r = prism.rpc(call("2", "eth_big", "[]").as_bytes());
    assert_eq!(expect_http_result(&r, "2"), big.as_bytes());
}

#[test]
fn upstream_json_rpc_error_bytes_reach_the_client_unchanged() {
    let (fake, prism) = setup();
    let err = r#"{"code":3,"message":"execution reverted: nope","data":"0x08c379a0"}"#;
    fake.set_reply("eth_call", Reply::Error(err.into()));
    let r = prism.rpc(call("7", "eth_call", "[{\"to\":\"0x00\"},\"latest\"]").as_bytes());
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(raw_field(&r.body, "id"), b"7");
    assert_eq!(json::text(raw_field(&r.body, "error")), err);
    assert!(json::field(&r.body, "result").is_none());
}
