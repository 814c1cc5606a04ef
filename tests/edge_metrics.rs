//! `/metrics` of a running Prism, read by a real Prometheus text parser (Python's `prometheus_client`):
//! it parses, every sample line is understood, and the series an operator needs are there, per provider
//! (and region), per method and per key, with values that match the traffic sent.

use crate::support::tools::{python_with_prometheus_client, run_with_timeout};
use crate::support::{batch, call, expect_http_result, FakeProvider, Mode, Prism};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

/// One parsed sample: name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses `text` with `prometheus_client.parser.text_string_to_metric_families` and returns every sample
/// plus every family's (name, type). Fails the test when the parser rejects the text.
fn parse_with_prometheus_client(text: &str) -> (Vec<Sample>, Vec<(String, String)>) {
    let py = python_with_prometheus_client();
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
text = sys.stdin.read()
out = {"samples": [], "families": []}
for fam in text_string_to_metric_families(text):
    out["families"].append([fam.name, fam.type])
    for s in fam.samples:
        v = s.value
        out["samples"].append([s.name, s.labels, None if v != v else v])
print(json.dumps(out))
"#;
    let mut cmd = Command::new(py);
    cmd.args(["-c", script]);
    let ran = run_with_timeout(cmd, text.as_bytes(), Duration::from_secs(60));
    assert!(
        ran.ok,
        "the Prometheus text parser rejected /metrics:\n{}\n---- /metrics ----\n{text}",
        ran.stderr
    );
    let v: serde_json::Value = serde_json::from_str(ran.stdout.trim()).expect("parser output");
    let samples = v["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Sample {
            name: s[0].as_str().unwrap().to_string(),
            labels: s[1]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect(),
            value: s[2].as_f64().unwrap_or(f64::NAN),
        })
        .collect();
    let families = v["families"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f[0].as_str().unwrap().to_string(), f[1].as_str().unwrap().to_string()))
        .collect();
    (samples, families)
}

fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn total(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    find(samples, name, labels).iter().map(|s| s.value).sum()
}

#[test]
fn metrics_parse_with_a_prometheus_parser_and_have_provider_method_and_key_series() {
    let (p1, p2) = (FakeProvider::start(), FakeProvider::start());
    p2.set_method_mode("eth_estimateGas", Mode::Status(500));
    let prism = Prism::builder()
        .shards(2)
        .provider_with(&p1, "region = \"eu-west\"")
        .provider_with(&p2, "region = \"us-east\"")
        .network_option("probe_interval_ms", 100)
        .extra_toml(
            "[policy.retry]\nbase_delay_ms = 1\nmax_delay_ms = 5\n\n\
             [[keys]]\nname = \"dashboard\"\nkey = \"dash-key-77\"\nstrategy = \"round_robin\"\n\n\
             [[keys]]\nname = \"mobile \\\"app\\\"\"\nkey = \"mobile-key-88\"\nrate_per_s = 0.01\nburst = 1\n",
        )
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let dash = ["x-api-key: dash-key-77"];
    for i in 0..6 {
        let body = call(
            &i.to_string(),
            "eth_getBalance",
            &format!("[\"0x{i:040x}\",\"latest\"]"),
        );
        expect_http_result(&prism.rpc_with("/", body.as_bytes(), &dash), &i.to_string());
    }
    for i in 10..13 {
        let body = call(&i.to_string(), "eth_estimateGas", "[{}]");
        expect_http_result(&prism.rpc_with("/", body.as_bytes(), &dash), &i.to_string());
    }
    let r = prism.rpc_with(
        "/",
        batch(&[call("20", "eth_call", "[{}, \"latest\"]"), call("21", "foo_bar", "[]")]).as_bytes(),
        &dash,
    );
    assert_eq!(crate::support::batch_items(&r).len(), 2);
    // The limited key: one call served, the next throttled.
    let mobile = ["x-api-key: mobile-key-88"];
    expect_http_result(
        &prism.rpc_with("/", call("30", "eth_blockNumber", "[]").as_bytes(), &mobile),
        "30",
    );
    assert_eq!(
        prism
            .rpc_with("/", call("31", "eth_blockNumber", "[]").as_bytes(), &mobile)
            .status,
        429
    );
    // Refused at the door.
    assert_eq!(
        prism
            .rpc_with("/", call("40", "eth_blockNumber", "[]").as_bytes(), &[])
            .status,
        401
    );

    let resp = prism.admin_get("/metrics");
    assert_eq!(resp.status, 200, "{}", resp.describe());
    let ctype = resp.header("content-type").unwrap_or("");
    assert!(ctype.starts_with("text/plain"), "content type {ctype:?}");
    let text = resp.text();
    let (samples, families) = parse_with_prometheus_client(&text);

    // Every sample line was understood (a lenient parser must not have skipped any).
    let lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .count();
    assert_eq!(samples.len(), lines, "samples parsed vs sample lines in the text");
    // Prometheus naming conventions: prism_ prefix (process_* are the standard process metrics' own names);
    // counters end in _total; durations are seconds.
    for (name, kind) in &families {
        assert!(
            name.starts_with("prism_") || name.starts_with("process_"),
            "metric {name} lacks the prism_ prefix"
        );
        if kind == "histogram" {
            assert!(name.ends_with("_seconds"), "histogram {name} should be in seconds");
        }
    }
    // Identity and process: which build runs, and what it uses.
    for family in [
        "prism_build_info",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_cpu_seconds",
    ] {
        // The parser names a counter's family without its `_total`.
        assert!(families.iter().any(|(n, _)| n == family), "no {family}:\n{text}");
    }
    assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
    assert!(text.contains("prism_build_info{version=\"0.1.0\",commit=\""), "{text}");
    for s in &samples {
        assert!(
            !s.name.ends_with("_ms") && !s.name.contains("_milliseconds"),
            "{}: use seconds",
            s.name
        );
    }
    let counter_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# TYPE ") && l.ends_with(" counter"))
        .collect();
    for l in &counter_lines {
        let name = l.split_whitespace().nth(2).unwrap();
        assert!(name.ends_with("_total"), "counter {name} should end in _total");
    }

    // Per method: counts match the traffic.
    let calls = |method: &str| total(&samples, "prism_calls_total", &[("method", method)]);
    assert_eq!(calls("eth_getBalance"), 6.0, "{text}");
    assert_eq!(calls("eth_estimateGas"), 3.0);
    assert_eq!(calls("eth_call"), 1.0);
    assert!(calls("eth_blockNumber") >= 1.0);
    assert!(
        !find(
            &samples,
            "prism_call_duration_seconds_count",
            &[("method", "eth_getBalance")]
        )
        .is_empty(),
        "no latency histogram for eth_getBalance"
    );
    // Per provider (and region): attempts by result, latency histogram, breaker state, head, share.
    for (p, region) in [("p1", "eu-west"), ("p2", "us-east")] {
        let attempts = total(
            &samples,
            "prism_upstream_attempts_total",
            &[("provider", p), ("region", region)],
        );
        assert!(attempts >= 3.0, "{p}: {attempts} attempts");
        assert!(
            !find(&samples, "prism_upstream_duration_seconds_bucket", &[("provider", p)]).is_empty(),
            "{p}: no latency histogram"
        );
        for g in [
            "prism_provider_breaker_state",
            "prism_provider_head_block",
            "prism_provider_drift_blocks",
            "prism_provider_traffic_share",
        ] {
            assert_eq!(find(&samples, g, &[("provider", p)]).len(), 1, "{g} for {p}");
        }
        assert_eq!(
            find(&samples, "prism_provider_head_block", &[("provider", p)])[0].value,
            256.0,
            "{p} head"
        );
    }
    // p2 failed eth_estimateGas: its failed attempts show.
    assert!(
        total(
            &samples,
            "prism_upstream_attempts_total",
            &[("provider", "p2"), ("result", "failed")]
        ) >= 1.0,
        "p2's failures are not in the metrics"
    );
    // Per key.
    assert_eq!(
        total(&samples, "prism_key_requests_total", &[("key", "dashboard")]),
        10.0
    );
    assert_eq!(
        total(&samples, "prism_key_requests_total", &[("key", "mobile \"app\"")]),
        2.0
    );
    assert_eq!(
        total(&samples, "prism_key_throttled_total", &[("key", "mobile \"app\"")]),
        1.0
    );
    assert_eq!(
        total(&samples, "prism_key_throttled_total", &[("key", "dashboard")]),
        0.0
    );
    // Histograms are consistent: cumulative buckets, +Inf equals the count.
    let buckets = find(
        &samples,
        "prism_call_duration_seconds_bucket",
        &[("method", "eth_getBalance")],
    );
    let mut prev = 0.0;
    for b in &buckets {
        assert!(b.value >= prev, "buckets are not cumulative: {buckets:?}");
        prev = b.value;
    }
    let inf = buckets
        .iter()
        .find(|b| b.labels.get("le").map(String::as_str) == Some("+Inf"))
        .unwrap();
    let count = find(
        &samples,
        "prism_call_duration_seconds_count",
        &[("method", "eth_getBalance")],
    )[0];
    assert_eq!(inf.value, count.value);
}
