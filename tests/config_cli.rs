//! `prism check` / `prism serve` on configs: the reference configs load, `${ENV}` substitution, and errors
//! that name the bad field with a non-zero exit.

use crate::support::prism::{run_cli, CliOutput, PrismBuilder, Scratch};
use crate::support::{call, expect_http_result, FakeProvider, Prism};
use std::path::{Path, PathBuf};
use std::time::Duration;

const CLI_TIME: Duration = Duration::from_secs(20);

/// Values for the `${VAR}`s the reference configs use.
const EXAMPLE_ENV: &[(&str, &str)] = &[
    ("ALCHEMY_KEY", "test-alchemy-key"),
    ("QUICKNODE_KEY", "test-quicknode-key"),
    ("PRISM_BACKEND_KEY", "test-backend-key"),
    ("PRISM_GAME_KEY", "test-game-key"),
    ("ER1_IDENTITY", "CjTYPhdXbWoQgc6swxZjirpUnTjc9jQVZupCGDmMhVfv"),
];

fn check(path: &Path, env: &[(&str, &str)]) -> CliOutput {
    run_cli(&["check", "--config", path.to_str().unwrap()], env, CLI_TIME)
}

/// Writes `toml` to a temp file and runs `prism check` on it.
fn check_text(toml: &str, env: &[(&str, &str)]) -> CliOutput {
    let dir = Scratch::new();
    check(&dir.file("config.toml", toml), env)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)
}

/// A valid config with two providers, to be broken by each test.
fn base_config() -> String {
    PrismBuilder::new()
        .provider_url("http://127.0.0.1:1")
        .provider_url("http://127.0.0.1:2")
        .config_toml("127.0.0.1:18545".parse().unwrap())
}

fn assert_rejected(out: &CliOutput, needle: &str) {
    assert!(
        !out.success(),
        "expected a non-zero exit; got {:?}\n{}",
        out.status,
        out.all()
    );
    assert!(
        out.all().contains(needle),
        "the error should name {needle:?}; output:\n{}",
        out.all()
    );
}

/// The reference configs in `examples/` (their keys are a public contract: see docs/CONFIGURATION.md).
const REFERENCE_CONFIGS: &[&str] = &["robinhood.toml", "solana-magic.toml", "quickstart.toml"];

#[test]
fn check_accepts_the_reference_configs() {
    for &name in REFERENCE_CONFIGS {
        let p = fixture(name);
        // A missing copy is a failure, never a skip: these files are what the README points users at.
        assert!(p.is_file(), "reference config {} is missing", p.display());
        let out = check(&p, EXAMPLE_ENV);
        assert!(
            out.success(),
            "prism check {} failed ({:?}):\n{}",
            p.display(),
            out.status,
            out.all()
        );
    }
}

#[test]
fn check_accepts_the_test_config() {
    let out = check_text(&base_config(), &[]);
    assert!(
        out.success(),
        "the config the tests use does not pass check ({:?}):\n{}\n{}",
        out.status,
        out.all(),
        base_config()
    );
}

#[test]
fn check_names_a_bad_provider_url() {
    let toml = base_config().replace("http://127.0.0.1:2", "not a url");
    assert_rejected(&check_text(&toml, &[]), "networks[0].providers[1].url");
}

#[test]
fn check_names_an_unknown_key() {
    let toml = base_config().replace("max_batch = 10", "max_batch = 10\nmax_bodyy_bytes = 1");
    assert_rejected(&check_text(&toml, &[]), "max_bodyy_bytes");
    let toml = format!("{}\n[serverr]\nx = 1\n", base_config());
    assert_rejected(&check_text(&toml, &[]), "serverr");
}

#[test]
fn check_names_a_field_of_the_wrong_type() {
    let toml = base_config().replace("max_batch = 10", "max_batch = \"ten\"");
    assert_rejected(&check_text(&toml, &[]), "max_batch");
}

#[test]
fn check_rejects_invalid_toml_and_missing_files() {
    let out = check_text("[server\nlisten = ", &[]);
    assert!(!out.success(), "invalid TOML passed check:\n{}", out.all());
    let out = check(Path::new("/nonexistent/prism.toml"), &[]);
    assert!(!out.success(), "a missing file passed check:\n{}", out.all());
    assert!(!out.all().trim().is_empty(), "no message for a missing file");
}

#[test]
fn an_unset_env_var_is_named_and_serve_refuses_it() {
    // `check` may accept a config whose secrets are not set where it runs, but must say which are missing;
    // `serve` must refuse to start with it.
    let dir = Scratch::new();
    let toml = base_config().replace(
        "http://127.0.0.1:2",
        "http://127.0.0.1:2/${PRISM_TEST_SURELY_UNSET_VAR}",
    );
    let path = dir.file("unset.toml", &toml);
    let out = check(&path, &[]);
    assert!(
        out.all().contains("PRISM_TEST_SURELY_UNSET_VAR"),
        "check does not name the unset variable:\n{}",
        out.all()
    );
    let out = run_cli(&["serve", "--config", path.to_str().unwrap()], &[], CLI_TIME);
    assert_rejected(&out, "PRISM_TEST_SURELY_UNSET_VAR");
}

#[test]
fn env_substitution_reaches_the_served_config() {
    let fake = FakeProvider::start();
    let port = fake.port().to_string();
    let prism = Prism::builder()
        .provider_url("http://127.0.0.1:${PRISM_TEST_UPSTREAM_PORT}/${PRISM_TEST_UPSTREAM_PATH}")
        .env("PRISM_TEST_UPSTREAM_PORT", &port)
        .env("PRISM_TEST_UPSTREAM_PATH", "key-123")
        .start();
    let r = prism.rpc(call("1", "eth_chainId", "[]").as_bytes());
    assert_eq!(expect_http_result(&r, "1"), b"\"0x1237\"");
    let reqs = fake.http_requests();
    assert!(
        reqs.iter().any(|r| r.request.path == "/key-123"),
        "paths seen: {:?}",
        reqs.iter().map(|r| &r.request.path).collect::<Vec<_>>()
    );
    // and `check` substitutes too
    let out = check(
        &prism.config_path,
        &[("PRISM_TEST_UPSTREAM_PORT", &port), ("PRISM_TEST_UPSTREAM_PATH", "k")],
    );
    assert!(out.success(), "{}", out.all());
}

#[test]
fn serve_with_a_bad_config_exits_non_zero() {
    let dir = Scratch::new();
    let path = dir.file("bad.toml", &base_config().replace("http://127.0.0.1:2", "not a url"));
    let out = run_cli(&["serve", "--config", path.to_str().unwrap()], &[], CLI_TIME);
    assert_rejected(&out, "networks[0].providers[1].url");
}

#[test]
fn the_production_config_and_the_examples_pass_check_without_their_secrets() {
    // CI lints a deployment's config on a machine that holds none of its secrets.
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prism.toml");
    for path in [deploy, fixture("robinhood.toml"), fixture("quickstart.toml")] {
        let out = check(&path, &[]);
        assert!(out.success(), "{}: {}", path.display(), out.all());
        assert!(!out.all().contains("warning"), "{}: {}", path.display(), out.all());
        assert!(out.stdout.contains("is not available here"), "{}", out.all());
    }
    // `--strict` wants them; an env file gives them.
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prism.toml");
    let out = run_cli(
        &["check", "--strict", "--config", deploy.to_str().unwrap()],
        &[],
        CLI_TIME,
    );
    assert_rejected(&out, "env_file: cannot read /etc/prism/env");
    let dir = Scratch::new();
    let env = dir.file(
        "env",
        "ALCHEMY_KEY=a\nQUICKNODE_URL=https://example.quiknode.pro/k/\nPRISM_TRADING_KEY=t\n",
    );
    let out = run_cli(
        &[
            "check",
            "--strict",
            "--env-file",
            env.to_str().unwrap(),
            "--config",
            deploy.to_str().unwrap(),
        ],
        &[],
        CLI_TIME,
    );
    assert!(out.success() && !out.stdout.contains("not available"), "{}", out.all());
}

#[test]
fn a_toml_syntax_error_names_its_line_and_column() {
    let toml = base_config().replace("max_batch = 10", "max_batch = 10\nmax_depth = = 3");
    let line = toml.lines().position(|l| l.contains("max_depth = = 3")).unwrap() + 1;
    let out = check_text(&toml, &[]);
    assert_rejected(&out, &format!("TOML syntax error at line {line}, column 13"));
}

#[test]
fn check_warns_about_allowlist_typos_and_a_burst_below_the_batch_limit() {
    let toml = format!(
        "{}\n[[keys]]\nname = \"app\"\nkey = \"k-1\"\nallow = [\"eth_getLog\", \"eth_call\", \"eth_*\"]\nrate_per_s = 50\nburst = 5\n",
        base_config()
    );
    let out = check_text(&toml, &[]);
    assert!(out.success(), "warnings are not errors: {}", out.all());
    assert!(
        out.stdout.contains(
            "warning: keys[0].allow[0]: \"eth_getLog\" is not a method Prism knows; did you mean \"eth_getLogs\"?"
        ),
        "{}",
        out.all()
    );
    assert!(
        out.stdout
            .contains("warning: keys[0].burst: 5 is below limits.max_batch (10)"),
        "{}",
        out.all()
    );
    assert_eq!(out.stdout.matches("warning:").count(), 2, "{}", out.all());
}

#[test]
fn a_secret_with_quotes_backslashes_and_newlines_is_one_value() {
    // Substitution happens in parsed values: the secret cannot close the string or add a key.
    let toml = base_config().replace("http://127.0.0.1:2", "http://127.0.0.1:2/${PRISM_TEST_ODD_SECRET}");
    let out = check_text(&toml, &[("PRISM_TEST_ODD_SECRET", "a\"b\\c\n[limits]\nmax_batch = 1")]);
    assert_rejected(&out, "networks[0].providers[1].url: invalid characters in the path");
}
