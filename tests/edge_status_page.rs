//! The HTML status page of a running Prism, in a real headless Chromium: it loads, its script fetches
//! `/status` and renders one row per provider (with `data-provider` and `data-state`), and a breaker that
//! opens shows up on the next load.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;
use support::tools::chromium_dump_dom;
use support::{FakeProvider, Mode, Prism};

/// `data-provider` → `data-state` of every `<tr>` in the DOM.
fn provider_rows(dom: &str) -> BTreeMap<String, String> {
    let mut rows = BTreeMap::new();
    for tag in dom.split("<tr").skip(1) {
        let Some(end) = tag.find('>') else { continue };
        let attrs = &tag[..end];
        let attr = |name: &str| {
            let needle = format!("{name}=\"");
            attrs.find(&needle).map(|i| {
                let rest = &attrs[i + needle.len()..];
                rest[..rest.find('"').unwrap_or(rest.len())].to_string()
            })
        };
        if let (Some(p), Some(s)) = (attr("data-provider"), attr("data-state")) {
            rows.insert(p, s);
        }
    }
    rows
}

#[test]
fn status_page_in_headless_chromium_shows_every_provider_and_an_open_breaker() {
    let fakes = [FakeProvider::start(), FakeProvider::start(), FakeProvider::start()];
    let prism = Prism::builder()
        .providers(&[&fakes[0], &fakes[1], &fakes[2]])
        .network_option("probe_interval_ms", 100)
        .extra_toml("[policy.breaker]\nfailure_threshold = 3\ncooldown_ms = 60000")
        .start();
    support::wait_serving(&prism, &["p1", "p2", "p3"]);
    let page = prism.admin_get("/");
    assert_eq!(page.status, 200, "{}", page.describe());
    assert!(page.header("content-type").unwrap_or("").starts_with("text/html"));
    let url = format!("http://{}/", prism.admin_addr());

    let dom = chromium_dump_dom(&url, 3000);
    let rows = provider_rows(&dom);
    let expected: BTreeMap<String, String> = ["p1", "p2", "p3"]
        .iter()
        .map(|p| (p.to_string(), "closed".to_string()))
        .collect();
    assert_eq!(rows, expected, "provider rows in the rendered page:\n{dom}");
    assert!(
        dom.contains("data-network=\"testnet\""),
        "no table for the network:\n{dom}"
    );
    for header in ["p50", "p99", "Success", "Share"] {
        assert!(dom.contains(header), "the table lacks a {header} column:\n{dom}");
    }

    // p2 fails everything, probes included, until its breaker opens.
    fakes[1].set_mode(Mode::Status(500));
    prism.wait_state("p2", "open", Duration::from_secs(5));
    let dom = chromium_dump_dom(&url, 3000);
    let rows = provider_rows(&dom);
    assert_eq!(rows.get("p2").map(String::as_str), Some("open"), "p2's row:\n{dom}");
    assert_eq!(rows.get("p1").map(String::as_str), Some("closed"));
    assert_eq!(rows.get("p3").map(String::as_str), Some("closed"));
    assert!(
        dom.contains("breaker open"),
        "the open breaker is not shown in words:\n{dom}"
    );
}
