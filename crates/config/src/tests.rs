use super::*;

const MINIMAL: &str = r#"
[server]
listen = "127.0.0.1:8545"
[[networks]]
name = "n"
kind = "evm"
  [[networks.providers]]
  name = "a"
  url = "http://127.0.0.1:1234/rpc?x=1"
"#;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn minimal_config_gets_seed_defaults() {
    let c = Config::from_toml_with(MINIMAL, no_env).unwrap();
    assert_eq!(c.policy.retry.max_attempts, 3);
    assert_eq!(c.policy.breaker.failure_threshold, 5);
    assert_eq!(c.policy.breaker.max_cooldown_ms, 300_000);
    assert_eq!(c.limits.max_body_bytes, 5 * 1024 * 1024);
    assert_eq!(c.networks[0].max_drift_blocks, 10);
    assert!(c.server.pin_cores);
}

#[test]
fn reference_configs_load() {
    // An ER identity must be a real public key; other variables can be anything.
    let env = |name: &str| {
        Some(match name {
            "ER1_IDENTITY" => "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin".to_string(),
            _ => format!("value-of-{name}"),
        })
    };
    for text in [
        include_str!("../../../examples/robinhood.toml"),
        include_str!("../../../examples/solana-magic.toml"),
    ] {
        Config::from_toml_with(text, env).unwrap();
    }
}

#[test]
fn the_shipped_credit_tables_load() {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Table {
        credits: super::Credits,
    }
    for (name, text) in [
        ("alchemy", include_str!("../../../deploy/credits/alchemy.toml")),
        ("chainstack", include_str!("../../../deploy/credits/chainstack.toml")),
    ] {
        let t: Table = toml::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(t.credits.default >= 1 && !t.credits.methods.is_empty(), "{name}");
        for m in t.credits.methods.keys() {
            assert!(
                prism_wire::rpc::methods::lookup(m).kind != prism_wire::rpc::methods::Kind::Unknown,
                "{name}: {m} is not a method Prism knows"
            );
        }
    }
}

#[test]
fn env_substitution_is_in_values_and_a_value_is_data() {
    let mut lookup = |n: &str, _: &str, _: bool| (n == "X").then(|| "x".to_string());
    assert_eq!(substitute("${X}/${Y:-dflt}/$$", "k", &mut lookup).unwrap(), "x/dflt/$");
    let err = substitute("${NOPE}", "networks[0].providers[1].url", &mut lookup)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("networks[0].providers[1].url:") && err.contains("NOPE"),
        "{err}"
    );
    // A secret holding a quote, a backslash and a newline is the value, whole: it neither breaks the file
    // nor adds a key; a `${...}` in a comment is never looked up.
    let hostile = "k\"ey\\\n[limits]\nmax_batch = 1";
    let text = MINIMAL.replace("name = \"a\"", "name = \"${NAME}\" # ${NEVER_READ}");
    let env = |n: &str| match n {
        "NAME" => Some(hostile.to_string()),
        "NEVER_READ" => panic!("a comment was read"),
        _ => None,
    };
    let c = Config::from_toml_with(&text, env).unwrap();
    assert_eq!(c.networks[0].providers[0].name, hostile);
    assert_eq!(c.limits.max_batch, Limits::default().max_batch);
}

#[test]
fn toml_syntax_errors_say_where() {
    let err = Config::from_toml_with("[server]\nlisten = \"127.0.0.1:1\"\n[[networks]\nname = 1\n", no_env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3, column"), "{err}");
}

#[test]
fn env_file_values_win_over_the_environment_and_are_fingerprinted() {
    let dir = std::env::temp_dir().join(format!("prism-envfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("env"), "# secrets\nexport NAME=\"from-file\"\n").unwrap();
    let text = MINIMAL
        .replace("name = \"a\"", "name = \"${NAME}\"")
        .replace("[server]", "env_file = \"env\"\n[server]");
    let reading = Reading {
        base_dir: Some(dir.clone()),
        ..Reading::default()
    };
    let env = |n: &str| (n == "NAME").then(|| "from-process".to_string());
    let first = Config::parse(&text, &reading, &env).unwrap().config;
    assert_eq!(first.networks[0].providers[0].name, "from-file");
    std::fs::write(dir.join("env"), "NAME=rotated\n").unwrap();
    let second = Config::parse(&text, &reading, &env).unwrap().config;
    assert_eq!(first.secrets.changed(&second.secrets), ["env NAME"]);
    assert!(!format!("{:?}", second.secrets).contains("rotated"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn provider_auth_headers_are_checked_and_never_printed() {
    let with = |auth: &str| format!("{MINIMAL}  [networks.providers.auth]\n  {auth}\n");
    let env = |n: &str| (n == "KEY").then(|| "s3cret".to_string());
    let c = Config::from_toml_with(
        &with("headers = { \"x-api-key\" = \"${KEY}\" }\n  basic_user = \"u\"\n  basic_password = \"${KEY}\""),
        env,
    )
    .unwrap();
    let lines: Vec<(String, String)> = c.networks[0].providers[0]
        .auth
        .header_lines()
        .iter()
        .map(|(n, v)| (n.clone(), v.expose().to_string()))
        .collect();
    assert_eq!(
        lines,
        [
            ("x-api-key".to_string(), "s3cret".to_string()),
            ("Authorization".to_string(), "Basic dTpzM2NyZXQ=".to_string())
        ]
    );
    assert!(
        !format!("{c:?}").contains("s3cret"),
        "a secret in the config's Debug output"
    );
    for (auth, field, says) in [
        (
            "headers = { \"host\" = \"x\" }",
            "auth.headers.host",
            "Prism writes itself",
        ),
        (
            "headers = { \"bad name\" = \"x\" }",
            "auth.headers.bad name",
            "not a valid HTTP header name",
        ),
        (
            "headers = { \"x-k\" = \"a\\r\\nInjected: 1\" }",
            "auth.headers.x-k",
            "line break",
        ),
        ("basic_password = \"p\"", "auth.basic_password", "needs auth.basic_user"),
        ("bearer = \"t\"\n  basic_user = \"u\"", "providers[0].auth", "give one"),
        (
            "bearer_file = \"/nonexistent/token\"",
            "auth.bearer_file",
            "cannot read",
        ),
    ] {
        let err = Config::from_toml_with(&with(auth), env).unwrap_err().to_string();
        assert!(err.contains(field) && err.contains(says), "{auth}: {err}");
    }
}

#[test]
fn errors_name_the_field() {
    let bad_url = MINIMAL.replace("http://127.0.0.1:1234/rpc?x=1", "ftp://x");
    let err = Config::from_toml_with(&bad_url, no_env).unwrap_err().to_string();
    assert!(err.starts_with("networks[0].providers[0].url:"), "{err}");

    let bad_type = MINIMAL.replace("name = \"a\"", "name = \"a\"\n  weight = \"heavy\"");
    let err = Config::from_toml_with(&bad_type, no_env).unwrap_err().to_string();
    assert!(err.contains("networks[0].providers[0].weight"), "{err}");

    let unknown = MINIMAL.replace("[server]", "[server]\nlisten_typo = 1");
    let err = Config::from_toml_with(&unknown, no_env).unwrap_err().to_string();
    assert!(err.contains("listen_typo"), "{err}");

    let bad_listen = MINIMAL.replace("127.0.0.1:8545", "nowhere");
    let err = Config::from_toml_with(&bad_listen, no_env).unwrap_err().to_string();
    assert!(err.starts_with("server.listen:"), "{err}");
}

#[test]
fn endpoint_parsing() {
    let e = Endpoint::parse("https://h.example.com/v2/abc").unwrap();
    assert_eq!(
        (e.port, e.path.as_str(), e.host_header.as_str()),
        (443, "/v2/abc", "h.example.com")
    );
    let e = Endpoint::parse("http://[::1]:8080").unwrap();
    assert_eq!(
        (e.host.as_str(), e.port, e.path.as_str(), e.host_header.as_str()),
        ("::1", 8080, "/", "[::1]:8080")
    );
    assert_eq!(e.to_string(), "http://[::1]:8080");
    assert!(Endpoint::parse("http://user:pw@h/").is_err());
    assert!(Endpoint::parse("http://h:99999/").is_err());
}

#[test]
fn head_plausibility_keys_default_and_validate() {
    let c = Config::from_toml_with(MINIMAL, no_env).unwrap();
    assert_eq!(
        (c.networks[0].block_time_ms, c.networks[0].head_slack_blocks),
        (250, 128)
    );
    let set = MINIMAL.replace(
        "kind = \"evm\"",
        "kind = \"evm\"\nblock_time_ms = 12000\nhead_slack_blocks = 8",
    );
    let c = Config::from_toml_with(&set, no_env).unwrap();
    assert_eq!(
        (c.networks[0].block_time_ms, c.networks[0].head_slack_blocks),
        (12_000, 8)
    );
    let zero = MINIMAL.replace("kind = \"evm\"", "kind = \"evm\"\nblock_time_ms = 0");
    let err = Config::from_toml_with(&zero, no_env).unwrap_err().to_string();
    assert!(err.starts_with("networks[0].block_time_ms:"), "{err}");
}

fn cluster_err(section: &str) -> String {
    let text = format!("{MINIMAL}[cluster]\n{section}\n");
    Config::from_toml_with(&text, no_env).unwrap_err().to_string()
}

fn cluster_ok(section: &str) -> Cluster {
    let text = format!("{MINIMAL}[cluster]\n{section}\n");
    Config::from_toml_with(&text, no_env).unwrap().cluster.unwrap()
}

#[test]
fn redis_urls_plain_tls_and_with_credentials_load() {
    let c = cluster_ok(r#"redis_url = "redis://127.0.0.1:6379""#);
    assert_eq!(c.redis_url.as_deref(), Some("redis://127.0.0.1:6379"));
    cluster_ok(r#"redis_url = "rediss://redis.example.com:6380""#);
    cluster_ok(r#"redis_url = "rediss://prism:s3cret@redis.example.com:6380/0""#);
    let c = cluster_ok("redis_url = \"rediss://redis.example.com:6380\"\nusername = \"prism\"\npassword = \"pw\"");
    assert_eq!(c.username.as_deref(), Some("prism"));
}

#[test]
fn cluster_password_comes_from_the_environment() {
    let text = format!("{MINIMAL}[cluster]\nredis_url = \"redis://h:6379\"\npassword = \"${{REDIS_PASSWORD}}\"\n");
    let env = |n: &str| (n == "REDIS_PASSWORD").then(|| "from-env".to_string());
    let c = Config::from_toml_with(&text, env).unwrap().cluster.unwrap();
    assert_eq!(c.password.as_deref(), Some("from-env"));
    let shown = format!("{c:?}");
    assert!(!shown.contains("from-env") && shown.contains("***"), "{shown}");
}

#[test]
fn cluster_errors_name_the_field() {
    for (section, field, says) in [
        ("ttl_ms = 5", "cluster.redis_url:", "required"),
        (r#"redis_url = "http://h:6379""#, "cluster.redis_url:", "redis://"),
        (
            r#"redis_url = "rediss://h:6380/#insecure""#,
            "cluster.redis_url:",
            "always verified",
        ),
        (r#"redis_url = "redis://""#, "cluster.redis_url:", "no host"),
        (
            "redis_url = \"redis://h:6379\"\nsentinels = [\"h:26379\"]\nsentinel_master = \"m\"",
            "cluster.sentinels:",
            "not both",
        ),
        (r#"sentinels = ["h:26379"]"#, "cluster.sentinel_master:", "required"),
        (
            "sentinels = [\"h\"]\nsentinel_master = \"m\"",
            "cluster.sentinels[0]:",
            "host:port",
        ),
        (
            "sentinels = [\"h:1\", \"redis://h:26379\"]\nsentinel_master = \"m\"",
            "cluster.sentinels[1]:",
            "host:port",
        ),
        (
            "redis_url = \"redis://h:6379\"\nsentinel_master = \"m\"",
            "cluster.sentinel_master:",
            "sentinels",
        ),
        (
            "redis_url = \"redis://h:6379\"\nsentinel_tls = true",
            "cluster.sentinel_tls:",
            "sentinels",
        ),
        (
            "redis_url = \"redis://h:6379\"\nusername = \"u\"",
            "cluster.username:",
            "cluster.password",
        ),
        (
            "redis_url = \"redis://u:p@h:6379\"\npassword = \"q\"",
            "cluster.password:",
            "one place",
        ),
        (
            "redis_url = \"redis://h:6379\"\ntls_ca_file = \"/etc/hostname\"",
            "cluster.tls_ca_file:",
            "rediss://",
        ),
        (
            "redis_url = \"rediss://h:6379\"\ntls_ca_file = \"/nonexistent/ca.pem\"",
            "cluster.tls_ca_file:",
            "cannot read",
        ),
        (
            "redis_url = \"rediss://h:6379\"\ntls_cert_file = \"/etc/hostname\"",
            "cluster.tls_key_file:",
            "tls_cert_file",
        ),
        (
            "sentinels = [\"h:26379\"]\nsentinel_master = \"m\"\nsentinel_username = \"u\"",
            "cluster.sentinel_username:",
            "sentinel_password",
        ),
    ] {
        let err = cluster_err(section);
        assert!(err.starts_with(field) && err.contains(says), "{section:?}: {err}");
    }
}

#[test]
fn sentinel_configs_load() {
    let c = cluster_ok(
        "sentinels = [\"10.0.0.1:26379\", \"[::1]:26379\"]\nsentinel_master = \"mymaster\"\npassword = \"x\"",
    );
    assert_eq!(c.sentinels.len(), 2);
    assert!(c.redis_url.is_none());
    cluster_ok(
        "sentinels = [\"h:26379\"]\nsentinel_master = \"m\"\nsentinel_tls = true\ntls_ca_file = \"/etc/hostname\"",
    );
}

#[test]
fn urls_are_redacted_for_logs() {
    assert_eq!(redact_url("redis://u:pw@h:6379/0"), "redis://u:***@h:6379/0");
    assert_eq!(redact_url("rediss://:pw@h:6380"), "rediss://:***@h:6380");
    assert_eq!(redact_url("redis://maybe-a-password@h"), "redis://***@h");
    assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
    assert_eq!(
        redact_url("redis://u:p@ss@h:1"),
        "redis://u:***@h:1",
        "the last @ ends the userinfo"
    );
    assert_eq!(redact_url("redis://h:1/?q=a@b"), "redis://h:1/?q=a@b");
    let c = cluster_ok(r#"redis_url = "redis://prism:hunter2@h:6379""#);
    let shown = format!("{c:?}");
    assert!(
        !shown.contains("hunter2") && shown.contains("prism:***@h:6379"),
        "{shown}"
    );
}

#[test]
fn per_client_bounds_have_defaults_and_are_validated() {
    let c = Config::from_toml_with(MINIMAL, no_env).unwrap();
    assert_eq!(c.limits.max_answer_bytes, 64 * 1024 * 1024);
    assert_eq!(c.limits.upstream_max_connections, 256);
    assert_eq!(c.limits.max_subscriptions_per_connection, 64);
    assert_eq!(c.limits.max_subscriptions_per_shard, 10_000);
    let with = |limits: &str| MINIMAL.replace("[[networks]]", &format!("[limits]\n{limits}\n[[networks]]"));
    for key in [
        "max_answer_bytes",
        "upstream_max_connections",
        "max_subscriptions_per_connection",
        "max_subscriptions_per_shard",
    ] {
        let err = Config::from_toml_with(&with(&format!("{key} = 0")), no_env)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&format!("limits.{key}:")), "{err}");
    }
    let err = Config::from_toml_with(
        &with("max_subscriptions_per_connection = 100\nmax_subscriptions_per_shard = 10"),
        no_env,
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("limits.max_subscriptions_per_shard:"), "{err}");
    let ok = with("upstream_max_connections = 8\nmax_answer_bytes = 1048576");
    let c = Config::from_toml_with(&ok, no_env).unwrap();
    assert_eq!(c.limits.upstream_max_connections, 8);
}

#[test]
fn a_network_has_at_most_64_providers() {
    let mut text = String::from("[server]\nlisten = \"127.0.0.1:8545\"\n[[networks]]\nname = \"n\"\nkind = \"evm\"\n");
    for i in 0..65 {
        text.push_str(&format!(
            "[[networks.providers]]\nname = \"p{i}\"\nurl = \"http://127.0.0.1:{}\"\n",
            2000 + i
        ));
    }
    let e = Config::from_toml_with(&text, no_env).unwrap_err().to_string();
    assert!(
        e.starts_with("networks[0].providers: 65 providers; a network may have at most 64"),
        "{e}"
    );
    let cut = text.rfind("[[networks.providers]]").unwrap();
    assert!(Config::from_toml_with(&text[..cut], no_env).is_ok(), "64 are fine");
}

#[test]
fn public_url_is_an_ers_address_and_nothing_else() {
    let magic = include_str!("../../../examples/solana-magic.toml");
    let env = |name: &str| match name {
        "ER1_IDENTITY" => Some("8CvwxZ9Db6XbLD46NZwwmVDZZRDy7eydFcAGkXKh9axa".to_string()),
        _ => Some("x".to_string()),
    };
    let er = "  url = \"https://er-1.example.com\"\n";
    let with = magic.replace(er, &format!("{er}  public_url = \"https://er-1.public.example\"\n"));
    let c = Config::from_toml_with(&with, env).unwrap();
    let p = &c.networks[0].providers[1];
    assert_eq!(p.public_url.as_deref(), Some("https://er-1.public.example"));
    let on_base = magic.replace(
        "  url = \"https://api.mainnet-beta.solana.com\"\n",
        "  url = \"https://api.mainnet-beta.solana.com\"\n  public_url = \"https://x.example\"\n",
    );
    let err = Config::from_toml_with(&on_base, env).unwrap_err().to_string();
    assert!(
        err.contains("providers[0].public_url") && err.contains("ephemeral"),
        "{err}"
    );
    let not_url = magic.replace(er, &format!("{er}  public_url = \"er-1.example.com\"\n"));
    let err = Config::from_toml_with(&not_url, env).unwrap_err().to_string();
    assert!(err.contains("public_url") && err.contains("URL"), "{err}");
}

#[test]
fn route_listing_keys_are_an_ers_and_country_codes_are_iso() {
    let magic = include_str!("../../../examples/solana-magic.toml");
    let env = |name: &str| match name {
        "ER1_IDENTITY" => Some("8CvwxZ9Db6XbLD46NZwwmVDZZRDy7eydFcAGkXKh9axa".to_string()),
        _ => Some("x".to_string()),
    };
    let er = "  url = \"https://er-1.example.com\"\n";
    let with = magic.replace(
        er,
        &format!("{er}  base_fee = 0\n  block_time_ms = 50\n  country_code = \"DE\"\n"),
    );
    let c = Config::from_toml_with(&with, env).unwrap();
    let p = &c.networks[0].providers[1];
    assert_eq!(
        (p.base_fee, p.block_time_ms, p.country_code.as_deref()),
        (Some(0), Some(50), Some("DE"))
    );
    let base = "  url = \"https://api.mainnet-beta.solana.com\"\n";
    let on_base = magic.replace(base, &format!("{base}  block_time_ms = 400\n"));
    let err = Config::from_toml_with(&on_base, env).unwrap_err().to_string();
    assert!(
        err.contains("providers[0].block_time_ms") && err.contains("ephemeral"),
        "{err}"
    );
    for bad in ["de", "DEU", "D1"] {
        let text = magic.replace(er, &format!("{er}  country_code = \"{bad}\"\n"));
        let err = Config::from_toml_with(&text, env).unwrap_err().to_string();
        assert!(
            err.contains("providers[1].country_code") && err.contains("ISO"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn hedge_policy_defaults_and_checks() {
    let c = Config::from_toml_with(MINIMAL, |_| None).unwrap();
    let h = &c.policy.hedge;
    assert!(h.enabled && h.budget_percent == 5.0 && h.min_delay_ms == 20);
    assert_eq!(h.families, ["light", "execute", "logs"]);
    let bad = format!("{MINIMAL}[policy.hedge]\nfamilies = [\"submit\"]\n");
    let err = Config::from_toml_with(&bad, |_| None).unwrap_err().to_string();
    assert!(err.starts_with("policy.hedge.families[0]:"), "{err}");
    let bad = format!("{MINIMAL}[policy.hedge]\nbudget_percent = 150\n");
    let err = Config::from_toml_with(&bad, |_| None).unwrap_err().to_string();
    assert!(err.starts_with("policy.hedge.budget_percent:"), "{err}");
}

#[test]
fn floor_block_defaults_to_archive_and_is_validated() {
    let c = Config::from_toml_with(MINIMAL, no_env).unwrap();
    assert_eq!(c.networks[0].providers[0].floor_block, 0, "archive by default");
    let pruned = format!("{MINIMAL}  floor_block = 18000000\n");
    let c = Config::from_toml_with(&pruned, no_env).unwrap();
    assert_eq!(c.networks[0].providers[0].floor_block, 18_000_000);
    let absurd = format!("{MINIMAL}  floor_block = {}\n", (1u64 << 53) + 1);
    let e = Config::from_toml_with(&absurd, no_env).unwrap_err().to_string();
    assert!(e.contains("networks[0].providers[0].floor_block"), "{e}");
    let magic = include_str!("../../../examples/solana-magic.toml");
    let env = |name: &str| match name {
        "ER1_IDENTITY" => Some("8CvwxZ9Db6XbLD46NZwwmVDZZRDy7eydFcAGkXKh9axa".to_string()),
        _ => Some("x".to_string()),
    };
    let base = "  url = \"https://api.mainnet-beta.solana.com\"\n";
    let on_solana = magic.replace(base, &format!("{base}  floor_block = 5\n"));
    let e = Config::from_toml_with(&on_solana, env).unwrap_err().to_string();
    assert!(e.contains("providers[0].floor_block") && e.contains("evm"), "{e}");
}

#[test]
fn logs_limits_load_default_and_name_the_field() {
    let c = Config::from_toml_with(MINIMAL, no_env).unwrap();
    assert_eq!(c.limits.logs_split_concurrency, 4);
    assert_eq!(c.networks[0].providers[0].max_logs_range, None);
    let declared = MINIMAL.replace(
        "name = \"a\"",
        "name = \"a\"\n  max_logs_range = 2000\n  max_logs_results = 10000",
    );
    let c = Config::from_toml_with(&declared, no_env).unwrap();
    assert_eq!(c.networks[0].providers[0].max_logs_range, Some(2000));
    assert_eq!(c.networks[0].providers[0].max_logs_results, Some(10_000));
    for key in ["max_logs_range", "max_logs_results"] {
        let zero = MINIMAL.replace("name = \"a\"", &format!("name = \"a\"\n  {key} = 0"));
        let err = Config::from_toml_with(&zero, no_env).unwrap_err().to_string();
        assert!(err.starts_with(&format!("networks[0].providers[0].{key}:")), "{err}");
    }
    let zero = MINIMAL.replace("[server]", "[limits]\nlogs_split_concurrency = 0\n[server]");
    let err = Config::from_toml_with(&zero, no_env).unwrap_err().to_string();
    assert!(err.starts_with("limits.logs_split_concurrency:"), "{err}");
}
