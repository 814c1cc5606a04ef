//! Privacy through a running Prism at debug log level: calls carry distinctive addresses, calldata and raw
//! transactions, and providers answer distinctive results and revert data; none of it (nor the API key)
//! may appear in the log, in `/metrics` or in `/status`, while the log does show one line per call.

use crate::support::{batch, call, http, Conn, FakeProvider, Mode, Prism, Reply};

const API_KEY: &str = "sk-live-7f3a9c1e5b2d4f60";
const ADDRESS: &str = "0xdeadbeefcafe0000000000000000000000b0b0b0";
const CALLDATA: &str = "0xfeedfacefeedface00000000000000000000000000000000000000000000c0ffee";
const RAW_TX: &str = "0x02f8abad1deaabad1deaabad1dea0000000000000000000000000000000000000000";
const RESULT: &str = "0x5ca1ab1e5ca1ab1e5ca1ab1e";
const REVERT_DATA: &str = "0x08c379a0badc0ffee0ddf00d";
const SECRET_WORDS: &str = "my-secret-memo-31337";

/// Every string that must never leave the request path, and some shorter fragments of them.
fn secrets() -> Vec<String> {
    let mut v: Vec<String> = [API_KEY, ADDRESS, CALLDATA, RAW_TX, RESULT, REVERT_DATA, SECRET_WORDS]
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    for s in [
        "deadbeefcafe",
        "feedfacefeedface",
        "abad1deaabad1dea",
        "5ca1ab1e5ca1ab1e",
        "badc0ffee0ddf00d",
    ] {
        v.push(s.to_string());
    }
    v
}

fn exercise(log_args: &[&str]) {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    for p in [&p1, &p2] {
        p.set_reply("eth_getBalance", Reply::Result(format!("\"{RESULT}\"")));
        p.set_reply("eth_call", Reply::Result(format!("\"{RESULT}\"")));
        p.set_reply(
            "eth_estimateGas",
            Reply::Error(format!(
                r#"{{"code":3,"message":"execution reverted: {SECRET_WORDS}","data":"{REVERT_DATA}"}}"#
            )),
        );
        p.set_reply("eth_sendRawTransaction", Reply::Result(format!("\"{RESULT}\"")));
    }
    // p2 fails some reads: warnings and failure paths get exercised too.
    p2.set_method_mode("eth_getTransactionCount", Mode::Status(500));
    let mut b = Prism::builder()
        .shards(2)
        .providers(&[&p1, &p2])
        .network_option("probe_interval_ms", 100)
        .extra_toml(&format!(
            "[policy.retry]\nbase_delay_ms = 1\nmax_delay_ms = 5\n[policy.breaker]\nfailure_threshold = 2\n\n\
             [[keys]]\nname = \"app\"\nkey = \"{API_KEY}\"\nrate_per_s = 1000\nburst = 1000\n"
        ))
        .log_level("debug");
    for a in log_args {
        b = b.arg(a);
    }
    let prism = b.start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let key = format!("x-api-key: {API_KEY}");
    let calls = [
        call("1", "eth_getBalance", &format!("[\"{ADDRESS}\",\"latest\"]")),
        call(
            "2",
            "eth_call",
            &format!(r#"[{{"to":"{ADDRESS}","data":"{CALLDATA}"}},"latest"]"#),
        ),
        call(
            "3",
            "eth_estimateGas",
            &format!(r#"[{{"from":"{ADDRESS}","data":"{CALLDATA}"}}]"#),
        ),
        call("4", "eth_sendRawTransaction", &format!("[\"{RAW_TX}\"]")),
        call("5", "eth_getTransactionCount", &format!("[\"{ADDRESS}\",\"latest\"]")),
        call(
            "6",
            "eth_getLogs",
            &format!(r#"[{{"address":"{ADDRESS}","topics":["{CALLDATA}"]}}]"#),
        ),
        call("7", "totally_unknown_method", &format!("[\"{SECRET_WORDS}\"]")),
    ];
    for round in 0..3 {
        for c in &calls {
            let r = prism.rpc_with("/", c.as_bytes(), &[&key]);
            assert_eq!(r.status, 200, "round {round}: {}", r.describe());
        }
        let r = prism.rpc_with("/", batch(&calls).as_bytes(), &[&key]);
        assert_eq!(r.status, 200, "{}", r.describe());
        // The answers do carry the secrets back to the client: that is the point of the service.
        assert!(r.text().contains(RESULT), "{}", r.describe());
    }
    // Key in the path, a wrong key, and a malformed body echoing secrets.
    let r = Conn::connect(prism.addr()).request(&http::post(&format!("/testnet/{API_KEY}"), calls[0].as_bytes()));
    assert_eq!(r.status, 200, "{}", r.describe());
    let r = prism.rpc_with("/", calls[0].as_bytes(), &[&format!("x-api-key: {API_KEY}x")]);
    assert_eq!(r.status, 401);
    let r = prism.rpc_with(
        "/",
        format!("{{\"method\":\"{ADDRESS}\", {SECRET_WORDS}").as_bytes(),
        &[&key],
    );
    assert_eq!(r.status, 200, "{}", r.describe());

    let metrics = prism.admin_get("/metrics").text();
    let status = prism.admin_get("/status").text();
    // Shut down so every buffered log line is written.
    prism.signal(libc::SIGTERM);
    let mut prism = prism;
    assert!(
        prism.wait_exit(std::time::Duration::from_secs(10)).is_some(),
        "prism did not stop"
    );
    let log = prism.log();
    assert!(
        log.contains("eth_getBalance") && log.contains("eth_sendRawTransaction"),
        "the debug log should show one line per call (method names); is debug logging on?\n{log}"
    );
    for (what, text) in [("log", &log), ("/metrics", &metrics), ("/status", &status)] {
        let lower = text.to_lowercase();
        for s in secrets() {
            assert!(
                !lower.contains(&s),
                "{what} contains {s:?} (params, addresses, results or the API key must never appear)\n{}",
                text.lines()
                    .filter(|l| l.to_lowercase().contains(&s))
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

#[test]
fn no_params_addresses_results_or_keys_in_logs_metrics_or_status() {
    exercise(&[]);
}

#[test]
fn no_params_addresses_results_or_keys_in_json_logs() {
    exercise(&["--log-format", "json"]);
}
