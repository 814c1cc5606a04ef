//! Day one with real providers, over real sockets: a provider answering 401 names its cause in `/status`,
//! `/metrics` and the log (and how fast); providers that need an API-key header or basic auth are served
//! and their secrets appear nowhere Prism writes; a secret file rotated under load is picked up by SIGHUP
//! with no failed call; `prism status` prints the node's real head; cordoning takes a provider out of
//! routing at once and puts it back, behind the admin token.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::prism::{free_port, run_cli, Scratch};
use crate::support::{call, expect_http_result, wait_until, FakeProvider, Prism, BALANCE_PARAMS};

const WAIT: Duration = Duration::from_secs(10);

fn metrics(prism: &Prism) -> String {
    prism.admin_get("/metrics").text()
}

#[test]
fn a_provider_answering_401_names_the_cause_in_status_metrics_and_the_log() {
    let good = FakeProvider::start();
    let bad = FakeProvider::start();
    // A wrong API key: every request is refused with 401 before anything else.
    bad.require_header("x-api-key", &["the-right-key"]);
    let prism = Prism::builder()
        .provider(&good)
        .provider(&bad)
        .network_option("probe_interval_ms", 100)
        .start();
    // From the provider's first 401 to the cause on /status.
    assert!(
        wait_until(WAIT, || bad.rejected() > 0),
        "no request reached the provider"
    );
    let first_401 = Instant::now();
    let row = prism.wait_provider("p2", WAIT, "lastError http_401", |r| {
        r["lastError"]["reason"] == "http_401"
    });
    let visible = first_401.elapsed();
    println!("first 401 -> cause on /status: {:.1} ms", visible.as_secs_f64() * 1e3);
    assert_eq!(row["lastError"]["hint"], "check this provider's credentials", "{row}");
    assert_eq!(row["lastError"]["by"], "probe", "{row}");
    assert!(row["errorsLastMinute"]["http_401"].as_u64() >= Some(1), "{row}");

    // Client traffic goes to the good provider; the refused one has no share of it (probes are not traffic).
    for i in 0..20 {
        let r = prism.rpc(call(&i.to_string(), "eth_getBalance", BALANCE_PARAMS).as_bytes());
        expect_http_result(&r, &i.to_string());
    }
    let row = prism.wait_provider("p2", WAIT, "breaker open and red, saying why", |r| {
        r["state"] == "open" && r["badgeReason"].as_str().is_some_and(|w| w.contains("http_401"))
    });
    assert_eq!(row["share"], 0.0, "{row}");
    assert!(
        row["badgeReason"]
            .as_str()
            .unwrap()
            .contains("check this provider's credentials"),
        "{row}"
    );
    assert!(
        wait_until(WAIT, || prism.provider_status("p1")["share"] == 1.0),
        "{}",
        prism.provider_status("p1")
    );

    let text = metrics(&prism);
    let failures = text
        .lines()
        .find(|l| {
            l.starts_with("prism_upstream_failures_total{")
                && l.contains("provider=\"p2\"")
                && l.contains("by=\"probe\"")
                && l.contains("reason=\"http_401\"")
        })
        .unwrap_or_else(|| panic!("no http_401 failures for p2:\n{text}"));
    assert!(
        failures.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 1.0,
        "{failures}"
    );
    assert!(
        text.contains("prism_upstream_probes_total{network=\"testnet\",provider=\"p2\",region=\"\",result=\"failed\"}"),
        "{text}"
    );

    // The log says it at the default level, once, not once per probe.
    assert!(
        wait_until(WAIT, || prism
            .log()
            .contains("http_401 (check this provider's credentials)")),
        "{}",
        prism.log()
    );
    std::thread::sleep(Duration::from_secs(2));
    let lines = prism
        .log()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("provider=p2"))
        .count();
    let probes = bad.rejected();
    assert!(
        lines <= 3 && probes >= 10,
        "{lines} WARN lines for {probes} refused requests:\n{}",
        prism.log()
    );
}

#[test]
fn providers_needing_a_header_or_basic_auth_are_served_and_the_secrets_appear_nowhere() {
    const KEY: &str = "k3y-Value-0f-the-heAder";
    const PASSWORD: &str = "pa55-w0rd-in-a-file";
    let keyed = FakeProvider::start();
    let basic = FakeProvider::start();
    keyed.require_header("x-api-key", &[KEY]);
    use base64::Engine as _;
    let basic_value = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("prism:{PASSWORD}"))
    );
    basic.require_header("authorization", &[&basic_value]);
    let dir = Scratch::new();
    let password_file = dir.file("password", &format!("{PASSWORD}\n"));
    let prism = Prism::builder()
        .provider_with(
            &keyed,
            "[networks.providers.auth]\nheaders = { \"x-api-key\" = \"${PROVIDER_KEY}\" }",
        )
        .provider_with(
            &basic,
            &format!(
                "[networks.providers.auth]\nbasic_user = \"prism\"\nbasic_password_file = \"{}\"",
                password_file.display()
            ),
        )
        .env("PROVIDER_KEY", KEY)
        .network_option("probe_interval_ms", 100)
        .extra_toml("[cache]\nenabled = false\ndedupe = false\n")
        .log_level("debug")
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    for i in 0..40 {
        let r = prism.rpc(call(&i.to_string(), "eth_getBalance", BALANCE_PARAMS).as_bytes());
        expect_http_result(&r, &i.to_string());
    }
    assert_eq!(
        (keyed.rejected(), basic.rejected()),
        (0, 0),
        "a request went without its credentials"
    );
    assert!(keyed.client_calls().len() + basic.client_calls().len() >= 40);
    assert!(
        !keyed.client_calls().is_empty() && !basic.client_calls().is_empty(),
        "both serve"
    );

    // Nothing Prism writes shows them: log (at debug), /metrics, /status, the page, an error answer.
    let wrong = prism.rpc(br#"{"jsonrpc":"2.0","id":1,"method":"eth_nosuchmethod_xyz"}"#);
    let b64 = basic_value.trim_start_matches("Basic ").to_string();
    let check = run_cli(
        &["check", "--config", prism.config_path().to_str().unwrap()],
        &[("PROVIDER_KEY", KEY)],
        WAIT,
    );
    assert!(check.success(), "{}", check.all());
    for (what, text) in [
        ("log", prism.log()),
        ("/metrics", metrics(&prism)),
        ("/status", prism.admin_get("/status").text()),
        ("page", prism.admin_get("/").text()),
        ("an answer", wrong.text()),
        ("prism check", check.all()),
    ] {
        for secret in [KEY, PASSWORD, b64.as_str()] {
            assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
        }
    }
}

#[test]
fn a_rotated_secret_file_is_picked_up_by_sighup_under_load_with_no_failed_call() {
    let fake = FakeProvider::start();
    fake.require_header("x-api-key", &["key-one"]);
    let dir = Scratch::new();
    let key_file = dir.file("api-key", "key-one\n");
    let prism = Arc::new(
        Prism::builder()
            .provider_with(
                &fake,
                &format!(
                    "[networks.providers.auth]\nheader_files = {{ \"x-api-key\" = \"{}\" }}",
                    key_file.display()
                ),
            )
            .shards(2)
            .network_option("probe_interval_ms", 100)
            .extra_toml("[cache]\nenabled = false\ndedupe = false\n")
            .start(),
    );
    crate::support::wait_serving(&prism, &["p1"]);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load: Vec<_> = (0..4)
        .map(|t| {
            let (prism, stop, ok, failed) = (prism.clone(), stop.clone(), ok.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut conn = prism.conn();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let id = format!("{}", t * 1_000_000 + i);
                    let body = call(&id, "eth_getBalance", BALANCE_PARAMS);
                    let r = conn.request(&crate::support::http::post("/", body.as_bytes()));
                    if r.status == 200 && r.json().get("result").is_some() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        eprintln!("failed call: {}", r.describe());
                    }
                }
            })
        })
        .collect();
    assert!(wait_until(WAIT, || ok.load(Ordering::Relaxed) > 200), "no load");
    // The provider issues a second key; the file is rotated; SIGHUP; the old key is revoked once Prism
    // sends the new one.
    fake.require_header("x-api-key", &["key-one", "key-two"]);
    std::fs::write(&key_file, "key-two\n").unwrap();
    prism.signal(libc::SIGHUP);
    let sends_new = || {
        fake.http_requests()
            .iter()
            .rev()
            .take(20)
            .all(|r| r.request.header("x-api-key") == Some("key-two"))
    };
    assert!(wait_until(WAIT, sends_new), "Prism still sends the old key");
    fake.require_header("x-api-key", &["key-two"]);
    let at_revocation = ok.load(Ordering::Relaxed);
    assert!(wait_until(WAIT, || ok.load(Ordering::Relaxed) > at_revocation + 200));
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
    assert_eq!(failed.load(Ordering::Relaxed), 0, "calls failed across the rotation");
    assert_eq!(fake.rejected(), 0, "a request carried a revoked key");
    let last = &prism.status()["reload"]["last"];
    let changes = last["changes"].to_string();
    assert_eq!(last["applied"], true, "{last}");
    assert!(
        changes.contains("secrets changed (names only): file ") && changes.contains("api-key"),
        "{changes}"
    );
    assert!(
        !changes.contains("key-two") && !prism.log().contains("key-two"),
        "{changes}"
    );
}

#[test]
fn prism_status_prints_the_nodes_real_head_lag_and_uptime() {
    let fake = FakeProvider::start();
    fake.set_head(0x1234567);
    let admin = free_port();
    let prism = Prism::builder()
        .provider(&fake)
        .admin_port(admin)
        .network_option("probe_interval_ms", 100)
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    prism.wait_provider("p1", WAIT, "head", |r| r["head"] == 0x1234567);
    for addr in [
        format!("127.0.0.1:{admin}"),
        format!("localhost:{admin}"),
        format!("http://127.0.0.1:{admin}/"),
    ] {
        let out = run_cli(&["status", "--admin", &addr], &[], WAIT);
        assert!(out.success(), "{addr}: {}", out.all());
        assert!(out.stdout.contains("best head 19088743"), "{}", out.stdout);
        let row = out.stdout.lines().find(|l| l.trim_start().starts_with("p1")).unwrap();
        assert!(
            row.contains(" 19088743 ") && row.contains(" 0 "),
            "head and lag in: {row}"
        );
        assert!(
            out.stdout.contains(" up ") && out.stdout.contains("commit"),
            "{}",
            out.stdout
        );
    }
    // Nothing listening: one line that says where it looked.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let out = run_cli(&["status", "--admin", &nowhere], &[], WAIT);
    assert!(!out.success());
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("no Prism admin listener at {nowhere}")),
        "{}",
        out.stderr
    );
    let out = run_cli(&["status", "--admin", "not an address"], &[], WAIT);
    assert!(
        !out.success() && out.stderr.contains("is not an admin address"),
        "{}",
        out.stderr
    );
}

#[test]
fn cordon_takes_a_provider_out_of_routing_at_once_behind_the_admin_token_and_uncordon_puts_it_back() {
    const TOKEN: &str = "admin-token-of-sixteen-plus";
    let (f1, f2) = (FakeProvider::start(), FakeProvider::start());
    let admin = free_port();
    let prism = Prism::builder()
        .providers(&[&f1, &f2])
        .admin_port(admin)
        .network_option("probe_interval_ms", 100)
        .extra_toml("[admin]\ntoken = \"${ADMIN_TOKEN}\"\n[cache]\nenabled = false\ndedupe = false\n")
        .env("ADMIN_TOKEN", TOKEN)
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    let admin_addr = format!("127.0.0.1:{admin}");
    // Without the token, nothing changes.
    let out = run_cli(&["cordon", "p1", "--admin", &admin_addr], &[], WAIT);
    assert!(!out.success() && out.stderr.contains("401"), "{}", out.all());
    let mut c = crate::support::Conn::connect(prism.admin_addr());
    let r = c.request(&crate::support::http::post_with(
        "/reload",
        b"",
        &["Authorization: Bearer wrong-token-0000000"],
    ));
    assert_eq!(r.status, 401, "{}", r.describe());
    assert_eq!(prism.provider_state("p1"), "closed");

    let out = run_cli(
        &[
            "cordon",
            "p1",
            "--reason",
            "answers stale heads",
            "--admin",
            &admin_addr,
        ],
        &[("PRISM_ADMIN_TOKEN", TOKEN)],
        WAIT,
    );
    assert!(out.success(), "{}", out.all());
    let row = prism.provider_status("p1");
    assert_eq!(row["state"], "cordoned", "at once: {row}");
    assert_eq!(row["cordon"]["reason"], "answers stale heads", "{row}");
    assert!(
        row["badgeReason"].as_str().unwrap().contains("answers stale heads"),
        "{row}"
    );
    let before = f1.client_calls().len();
    for i in 0..30 {
        let r = prism.rpc(call(&i.to_string(), "eth_getBalance", BALANCE_PARAMS).as_bytes());
        expect_http_result(&r, &i.to_string());
    }
    assert_eq!(f1.client_calls().len(), before, "a cordoned provider got client calls");

    let out = run_cli(
        &["cordon", "p1", "--undo", "--admin", &admin_addr, "--token", TOKEN],
        &[],
        WAIT,
    );
    assert!(out.success(), "{}", out.all());
    assert_eq!(prism.provider_state("p1"), "closed");
    // Back in routing: with p2 cordoned in turn, calls reach p1 (scoring alone may prefer p2).
    let out = run_cli(&["cordon", "p2", "--admin", &admin_addr, "--token", TOKEN], &[], WAIT);
    assert!(out.success(), "{}", out.all());
    for i in 0..30 {
        let r = prism.rpc(call(&i.to_string(), "eth_getBalance", BALANCE_PARAMS).as_bytes());
        expect_http_result(&r, &i.to_string());
    }
    assert!(f1.client_calls().len() >= before + 30, "back in routing");
    assert_eq!(prism.provider_status("p2")["cordon"]["reason"], "no reason given");
    let out = run_cli(
        &["cordon", "nobody", "--admin", &admin_addr, "--token", TOKEN],
        &[],
        WAIT,
    );
    assert!(
        !out.success() && out.stderr.contains("no provider named"),
        "{}",
        out.all()
    );
}
