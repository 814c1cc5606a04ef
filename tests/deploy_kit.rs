//! The deployment kit in `deploy/` says only what Prism does: every metric the Grafana dashboard and the
//! alert rules use exists on a running node's `/metrics` (with `[cluster]`, so Redis' metrics are there
//! too), the production config passes `prism check`, and the systemd unit verifies where systemd is.

use crate::support::redis as redis_server;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::support::{FakeProvider, Prism};
use redis_server::RedisServer;

fn deploy(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `prism_...` name in `text`, histogram series folded into their family.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("prism_") {
        let start = i + at;
        let boundary = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let end = start
            + text[start..]
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(text.len() - start);
        if boundary {
            let name = &text[start..end];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            names.insert(family.to_string());
        }
        i = end;
    }
    names
}

#[test]
fn the_dashboard_and_the_alerts_use_only_metrics_prism_exports() {
    let dashboard: serde_json::Value = serde_json::from_str(&deploy("grafana-dashboard.json")).expect("dashboard JSON");
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(exprs.len() >= 10, "a dashboard worth opening: {} queries", exprs.len());
    let alerts = deploy("alerts.yml");
    for alert in [
        "PrismBreakerOpen",
        "PrismAllProvidersDown",
        "PrismProviderDrift",
        "PrismErrorBudgetBurn",
        "PrismRateLimitSaturation",
        "PrismRedisUnreachable",
    ] {
        assert!(alerts.contains(&format!("alert: {alert}")), "alerts.yml has no {alert}");
    }
    let used: BTreeSet<String> = metric_names(&exprs.join("\n"))
        .union(&metric_names(&alerts))
        .cloned()
        .collect();

    let redis = RedisServer::start();
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .extra_toml(&format!("[cluster]\nredis_url = \"{}\"\n", redis.url()))
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    let _ = prism.rpc(br#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#);
    let metrics = prism.admin_get("/metrics").text();
    let exported: BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    let missing: Vec<&String> = used.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "deploy/ uses metrics Prism does not export: {missing:?}\nexported: {exported:?}"
    );
    assert!(used.len() >= 15, "only {} metrics used: {used:?}", used.len());
}

#[test]
fn the_production_config_passes_prism_check() {
    let out = Command::new(std::path::PathBuf::from(crate::support::prism::BIN))
        .args(["check", "-c"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prism.toml"))
        .env("ALCHEMY_KEY", "k")
        .env("QUICKNODE_URL", "https://quicknode.example")
        .env("PRISM_TRADING_KEY", "secret")
        .output()
        .expect("run prism check");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let config = deploy("prism.toml");
    assert!(
        config.contains("admin_listen = \"127.0.0.1:"),
        "the admin listener stays on localhost"
    );
}

#[test]
fn the_systemd_unit_verifies_where_systemd_is_available() {
    let unit = deploy("prism.service");
    for needed in [
        "LimitMEMLOCK=infinity",
        "LimitNOFILE=",
        "Restart=on-failure",
        "prism serve -c",
    ] {
        assert!(unit.contains(needed), "prism.service lacks {needed}");
    }
    let Ok(probe) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("systemd-analyze not installed: only the unit's keys were checked");
        return;
    };
    assert!(probe.status.success());
    // Verify a copy that points at this build, so the executable and config paths exist.
    let dir = std::env::temp_dir().join(format!("deploy-kit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prism.toml");
    let copy = unit
        .replace(
            "/usr/local/bin/prism",
            &std::path::PathBuf::from(crate::support::prism::BIN)
                .display()
                .to_string(),
        )
        .replace("/etc/prism/prism.toml", &config.display().to_string());
    let path = dir.join("prism.service");
    std::fs::write(&path, copy).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let about_ours: Vec<&str> = stderr.lines().filter(|l| l.contains("prism.service")).collect();
    // Lines about this unit are its faults; a failure naming nothing of it is the environment's (no
    // systemd running in a container, say), reported and not held against the unit.
    assert!(about_ours.is_empty(), "systemd-analyze verify: {stderr}");
    if !out.status.success() {
        eprintln!("systemd-analyze verify failed without naming the unit (environment): {stderr}");
    }
}
