//! The HTML status page of a running Prism, in a real headless Chromium: it loads, its script fetches
//! `/status` and renders one row per provider (with `data-provider`, `data-state` and `data-badge`), a
//! breaker that opens shows up on the next load and in the timeline, and a provider failing half its calls
//! turns amber with an error-rate sparkline that shows it. Assertions are on the DOM after the script ran.

use crate::support::tools::{artifacts_dir, chromium_dump_dom, chromium_dump_dom_sized, chromium_screenshot};
use crate::support::{FakeProvider, Mode, Prism};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    crate::support::wait_serving(&prism, &["p1", "p2", "p3"]);
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
    // The aggregator notes state changes at each publish (every 200 ms): the timeline has it soon after.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = prism.status();
        let timeline = status["networks"][0]["timeline"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if timeline
            .iter()
            .any(|e| e["provider"] == "p2" && e["from"] == "closed" && e["to"] == "open")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no closed -> open event for p2 in the timeline: {timeline:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let dom = chromium_dump_dom(&url, 3000);
    let rows = provider_rows(&dom);
    assert_eq!(rows.get("p2").map(String::as_str), Some("open"), "p2's row:\n{dom}");
    assert_eq!(rows.get("p1").map(String::as_str), Some("closed"));
    assert_eq!(rows.get("p3").map(String::as_str), Some("closed"));
    assert!(
        dom.contains("breaker open"),
        "the open breaker is not shown in words:\n{dom}"
    );
    assert_eq!(badges(&dom).get("p2").map(String::as_str), Some("red"), "{dom}");
    assert!(
        dom.contains("p2: closed → breaker open"),
        "the timeline is not drawn:\n{dom}"
    );
}

/// Attributes of every `<tag ...>` element in `dom`, in document order, with the text up to its end tag.
fn elements(dom: &str, tag: &str) -> Vec<(BTreeMap<String, String>, String)> {
    let open = format!("<{tag} ");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    for piece in dom.split(&open).skip(1) {
        let Some(end) = piece.find('>') else { continue };
        let mut attrs = BTreeMap::new();
        let mut rest = &piece[..end];
        while let Some(eq) = rest.find("=\"") {
            let name = rest[..eq].trim().rsplit(' ').next().unwrap_or("").to_string();
            let after = &rest[eq + 2..];
            let Some(q) = after.find('"') else { break };
            attrs.insert(name, after[..q].replace("&amp;", "&"));
            rest = &after[q + 1..];
        }
        let inner = &piece[end + 1..];
        out.push((attrs, inner[..inner.find(&close).unwrap_or(inner.len())].to_string()));
    }
    out
}

/// `data-provider` → `data-badge` of every provider row.
fn badges(dom: &str) -> BTreeMap<String, String> {
    elements(dom, "tr")
        .into_iter()
        .filter_map(|(a, _)| Some((a.get("data-provider")?.clone(), a.get("data-badge")?.clone())))
        .collect()
}

/// A drawn sparkline: what its data attributes say and the points of its polyline.
#[derive(Debug)]
struct Spark {
    max: f64,
    last: f64,
    points: usize,
    drawn: Vec<(f64, f64)>,
}

fn sparkline(dom: &str, provider: &str, series: &str) -> Option<Spark> {
    let (a, inner) = elements(dom, "svg").into_iter().find(|(a, _)| {
        a.get("data-provider").map(String::as_str) == Some(provider)
            && a.get("data-series").map(String::as_str) == Some(series)
    })?;
    let num = |k: &str| a.get(k).and_then(|v| v.parse::<f64>().ok());
    let (poly, _) = elements(&inner, "polyline").into_iter().next()?;
    let drawn = poly
        .get("points")?
        .split_whitespace()
        .filter_map(|xy| {
            let (x, y) = xy.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect();
    Some(Spark {
        max: num("data-max")?,
        last: num("data-last")?,
        points: num("data-points")? as usize,
        drawn,
    })
}

/// The height of the sparklines' view box: a value `v` of a series whose scale is `max` is drawn at
/// `y = H - v / max * H`.
const SPARK_H: f64 = 28.0;

#[test]
fn a_provider_failing_half_its_calls_turns_amber_and_its_error_sparkline_shows_it() {
    let fakes = [FakeProvider::start(), FakeProvider::start()];
    // Breakers count failures in a window: the default (5 within 30 s) would open p2's at once, and an open
    // breaker is red, not amber. 10 000 failures within one second never happen at this rate, so p2 stays
    // closed and keeps serving (with retries on p1 for its failed reads): the state this test is about.
    let prism = Prism::builder()
        .providers(&[&fakes[0], &fakes[1]])
        .network_option("probe_interval_ms", 100)
        .extra_toml("[policy.breaker]\nfailure_threshold = 10000\nwindow_ms = 1000")
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let url = format!("http://{}/", prism.admin_addr());
    fakes[1].set_mode(Mode::FailHalf(500));

    // Client reads through Prism until the test ends; each failed attempt at p2 is retried on p1.
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let client = {
        let (stop, sent, failed) = (stop.clone(), sent.clone(), failed.clone());
        let addr = prism.addr();
        std::thread::spawn(move || {
            let body = crate::support::call("1", "eth_getBalance", crate::support::BALANCE_PARAMS);
            let mut conn = crate::support::http::Conn::connect(addr);
            while !stop.load(Ordering::Relaxed) {
                let r = conn.request(&crate::support::http::post("/", body.as_bytes()));
                sent.fetch_add(1, Ordering::Relaxed);
                if r.status != 200 || !r.text().contains("\"result\"") {
                    failed.fetch_add(1, Ordering::Relaxed);
                    conn = crate::support::http::Conn::connect(addr);
                }
                // Pacing, not synchronisation: a steady ~100 calls/s leaves the CPUs to Prism and Chromium.
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };

    // /status: p2 amber with the reason, still closed; p1 green.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (p1, p2) = loop {
        let s = prism.status();
        let p1 = crate::support::prism::find_provider(&s, "p1").expect("p1 in /status");
        let p2 = crate::support::prism::find_provider(&s, "p2").expect("p2 in /status");
        assert_eq!(
            p2["state"], "closed",
            "p2's breaker opened: the test's thresholds are wrong: {p2}"
        );
        if p2["badge"] == "amber" && p1["badge"] == "green" {
            break (p1, p2);
        }
        assert!(
            Instant::now() < deadline,
            "no amber badge for p2 within a minute: p1 {p1}\np2 {p2}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let reason = p2["badgeReason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("success ") && reason.contains("% over 1 min"),
        "{reason}"
    );
    let success = p2["minute"]["calls"].as_f64().unwrap() - p2["minute"]["failures"].as_f64().unwrap();
    assert!(
        success / p2["minute"]["calls"].as_f64().unwrap() < 0.8,
        "p2's last minute is not ~50 % failures: {p2}"
    );
    assert!(p1["badgeReason"].as_str().unwrap_or("").starts_with("healthy"), "{p1}");

    // The page, as drawn: p2's row amber, its error-rate sparkline up at its last point (a point closes
    // every 10 s), p1's flat at zero.
    let deadline = Instant::now() + Duration::from_secs(60);
    let dom = loop {
        let dom = chromium_dump_dom(&url, 3000);
        let p2_spark = sparkline(&dom, "p2", "error_rate");
        if badges(&dom).get("p2").map(String::as_str) == Some("amber")
            && p2_spark.as_ref().is_some_and(|s| s.last > 0.3)
        {
            break dom;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed p2 amber with its error rate up: {:?} {p2_spark:?}\n{dom}",
            badges(&dom)
        );
    };
    assert_eq!(badges(&dom).get("p1").map(String::as_str), Some("green"), "{dom}");
    let rows = provider_rows(&dom);
    assert_eq!(
        rows.get("p2").map(String::as_str),
        Some("closed"),
        "p2 serves while amber"
    );
    let bad = sparkline(&dom, "p2", "error_rate").unwrap();
    let good = sparkline(&dom, "p1", "error_rate").unwrap();
    assert!(bad.last < 0.7 && bad.max >= bad.last, "about half, not all: {bad:?}");
    assert!(good.last < 0.02 && good.points >= 1, "p1's error rate is ~0: {good:?}");
    for s in [&bad, &good] {
        assert_eq!(s.drawn.len(), s.points, "one polyline vertex per point: {s:?}");
        let (_, y) = *s.drawn.last().unwrap();
        let expected = SPARK_H - s.last / s.max * SPARK_H;
        assert!(
            (y - expected).abs() < 0.2,
            "the last vertex is not at the last value: {s:?}"
        );
    }
    assert!(
        bad.drawn.last().unwrap().1 < SPARK_H * 0.5,
        "p2's line is not up: {bad:?}"
    );
    assert!(
        (good.drawn.last().unwrap().1 - SPARK_H).abs() < 0.2,
        "p1's line is not flat at 0: {good:?}"
    );
    for series in ["p99_ms", "share"] {
        assert!(sparkline(&dom, "p1", series).is_some(), "no {series} sparkline:\n{dom}");
    }

    // Totals: a rate over the last interval, once one closed with the client running.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = prism.status()["totals"].clone();
        if t["rps"].as_f64().is_some_and(|r| r > 5.0) {
            assert!(t["keys"].as_array().is_some_and(|k| !k.is_empty()), "{t}");
            break;
        }
        assert!(Instant::now() < deadline, "no requests per second in totals: {t}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Readable on a laptop and on a phone: the phone gets cards, neither scrolls sideways. The screenshots
    // stay for a person to look at.
    let dir = artifacts_dir();
    for (name, size, layout) in [
        ("status-page-1280x800.png", (1280, 800), "table"),
        ("status-page-390x844.png", (390, 844), "cards"),
    ] {
        let dom = chromium_dump_dom_sized(&url, 3000, Some(size));
        let (html, _) = elements(&dom, "html").into_iter().next().expect("an <html> element");
        assert_eq!(html.get("data-layout").map(String::as_str), Some(layout), "{html:?}");
        assert_eq!(
            html.get("data-fits").map(String::as_str),
            Some("true"),
            "scrolls sideways: {html:?}"
        );
        assert_eq!(
            html.get("data-width"),
            Some(&size.0.to_string()),
            "not laid out at {size:?}: {html:?}"
        );
        assert_eq!(badges(&dom).get("p2").map(String::as_str), Some("amber"), "at {size:?}");
        let path = dir.join(name);
        chromium_screenshot(&url, &path, size, 3000);
        eprintln!("status page screenshot: {}", path.display());
    }

    stop.store(true, Ordering::Relaxed);
    client.join().unwrap();
    assert!(sent.load(Ordering::Relaxed) > 100, "the client loop barely ran");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "reads failed at the client although p1 could answer every one"
    );
}

/// A provider whose key is refused (HTTP 401) shows the cause on the page, not only "breaker open": its row
/// carries `data-last-error="http_401"`, and its Why and Last error cells say to check its credentials.
#[test]
fn a_provider_refusing_its_key_shows_http_401_on_the_page() {
    let (good, refusing) = (FakeProvider::start(), FakeProvider::start());
    refusing.require_header("x-api-key", &["not-what-prism-sends"]);
    let prism = Prism::builder()
        .providers(&[&good, &refusing])
        .network_option("probe_interval_ms", 100)
        .start();
    prism.wait_provider("p2", Duration::from_secs(10), "open, for http_401", |r| {
        r["state"] == "open" && r["lastError"]["reason"] == "http_401"
    });
    let url = format!("http://{}/", prism.admin_addr());
    let dom = chromium_dump_dom(&url, 3000);
    let row = dom
        .split("<tr")
        .find(|r| r.contains("data-provider=\"p2\""))
        .unwrap_or_else(|| panic!("no row for p2:\n{dom}"));
    let row = &row[..row.find("</tr>").unwrap_or(row.len())];
    assert!(row.contains("data-last-error=\"http_401\""), "{row}");
    assert!(row.contains("check this provider's credentials"), "{row}");
    assert!(
        row.contains("breaker open: http_401"),
        "the badge's reason names the cause: {row}"
    );
    assert!(dom.contains("<th>Last error</th>"), "{dom}");
}
