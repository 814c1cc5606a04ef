//! API keys at the edge of a running Prism: a missing or wrong key never reaches an upstream (counted at
//! the fake) in any of the three forms (x-api-key, Authorization: Bearer, last path segment); a browser key
//! cannot submit transactions while the other calls of its batch proceed; the origin lock and the CORS
//! preflight answer per key; a key limited to some networks cannot use the others.

use crate::support::{
    assert_no_client_calls, batch, batch_items, call, expect_error, expect_http_result, http, json, Conn, FakeProvider,
    Prism, Response, BALANCE_PARAMS,
};

const SERVER_KEY: &str = "srv-7d1f0c2a9b";
const BROWSER_KEY: &str = "pub-3e8a6b4c2d";
const APP_ORIGIN: &str = "https://app.example";

const KEYS: &str = r#"
[[keys]]
name = "server"
key = "srv-7d1f0c2a9b"

[[keys]]
name = "browser"
key = "pub-3e8a6b4c2d"
allow = ["eth_call", "eth_getBalance", "eth_blockNumber", "eth_chainId", "net_*"]
origins = ["https://app.example"]
"#;

fn start(fake: &FakeProvider) -> Prism {
    Prism::builder().provider(fake).extra_toml(KEYS).start()
}

fn balance_body() -> String {
    call("1", "eth_getBalance", BALANCE_PARAMS)
}

fn post(prism: &Prism, path: &str, body: &str, headers: &[&str]) -> Response {
    Conn::connect(prism.addr()).request(&http::post_with(path, body.as_bytes(), headers))
}

fn assert_unauthorized(r: &Response, what: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.describe());
    let body = json::whole(&r.body).unwrap_or_else(|e| panic!("{what}: body not JSON ({e}): {}", r.describe()));
    let err = expect_error(body, -32001);
    assert!(
        err["message"].as_str().unwrap_or("").to_lowercase().contains("key"),
        "{what}: {err}"
    );
}

#[test]
fn missing_or_wrong_key_never_reaches_an_upstream() {
    let fake = FakeProvider::start();
    let prism = start(&fake);
    let body = balance_body();
    let batch_body = batch(&[balance_body(), call("2", "eth_call", "[{}, \"latest\"]")]);
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        ("no key", "/".into(), vec![]),
        ("no key, network path", "/testnet".into(), vec![]),
        ("wrong x-api-key", "/".into(), vec!["x-api-key: srv-7d1f0c2a9c".into()]),
        ("empty x-api-key", "/".into(), vec!["x-api-key: ".into()]),
        (
            "key with other case",
            "/".into(),
            vec![format!("x-api-key: {}", SERVER_KEY.to_uppercase())],
        ),
        (
            "key prefix",
            "/".into(),
            vec![format!("x-api-key: {}", &SERVER_KEY[..SERVER_KEY.len() - 1])],
        ),
        (
            "wrong bearer",
            "/".into(),
            vec!["Authorization: Bearer nope-000".into()],
        ),
        (
            "basic auth is not a key",
            "/".into(),
            vec![format!("Authorization: Basic {SERVER_KEY}")],
        ),
        ("wrong path key", "/testnet/nope-000".into(), vec![]),
        ("wrong key as the only segment", "/nope-000".into(), vec![]),
        ("key name instead of key", "/".into(), vec!["x-api-key: server".into()]),
    ];
    for (what, path, headers) in &cases {
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        assert_unauthorized(&post(&prism, path, &body, &h), what);
        assert_unauthorized(&post(&prism, path, &batch_body, &h), &format!("{what} (batch)"));
    }
    assert_no_client_calls(&fake, "requests without a valid key");

    // The right key, in each form, reaches the upstream.
    let good: Vec<(&str, String, Vec<String>)> = vec![
        ("x-api-key", "/".into(), vec![format!("x-api-key: {SERVER_KEY}")]),
        (
            "bearer",
            "/".into(),
            vec![format!("Authorization: Bearer {SERVER_KEY}")],
        ),
        (
            "bearer, other case of the scheme",
            "/".into(),
            vec![format!("authorization: bearer {SERVER_KEY}")],
        ),
        ("network path key", format!("/testnet/{SERVER_KEY}"), vec![]),
        ("path key (one network)", format!("/{SERVER_KEY}"), vec![]),
    ];
    for (k, (what, path, headers)) in good.iter().enumerate() {
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        let r = post(&prism, path, &body, &h);
        expect_http_result(&r, "1");
        assert_eq!(
            fake.count("eth_getBalance"),
            k + 1,
            "{what}: the call reached the upstream once"
        );
    }
}

#[test]
fn browser_key_cannot_send_transactions_and_the_rest_of_its_batch_proceeds() {
    let fake = FakeProvider::start();
    let prism = start(&fake);
    let headers = [
        &format!("x-api-key: {BROWSER_KEY}")[..],
        &format!("Origin: {APP_ORIGIN}")[..],
    ];
    let tx = r#"["0x02f86b8212378084"]"#;
    // Alone.
    for (i, method) in [
        "eth_sendRawTransaction",
        "eth_sendTransaction",
        "eth_sendRawTransactionConditional",
        "debug_traceTransaction",
    ]
    .iter()
    .enumerate()
    {
        let id = (100 + i).to_string();
        let r = post(&prism, "/", &call(&id, method, tx), &headers);
        let (err, got_id) = crate::support::expect_http_error(&r, -32001);
        assert_eq!(got_id, id);
        assert!(err["message"].as_str().unwrap().contains(method), "{err}");
    }
    // In a batch with allowed calls, and as a notification.
    let body = batch(&[
        call("1", "eth_getBalance", BALANCE_PARAMS),
        call("2", "eth_sendRawTransaction", tx),
        call(
            "3",
            "eth_call",
            r#"[{"to":"0x00000000000000000000000000000000000000aa"},"latest"]"#,
        ),
        crate::support::notification("eth_sendRawTransaction", tx),
        call("4", "net_version", "[]"),
    ]);
    let r = post(&prism, "/", &body, &headers);
    let items = batch_items(&r);
    assert_eq!(items.len(), 4, "{}", r.describe());
    crate::support::expect_result(&items[0], "1");
    let err = expect_error(&items[1], -32001);
    assert_eq!(json::text(crate::support::raw_field(&items[1], "id")), "2", "{err}");
    crate::support::expect_result(&items[2], "3");
    crate::support::expect_result(&items[3], "4");
    assert_eq!(
        fake.count("eth_sendRawTransaction"),
        0,
        "a browser key's transaction reached the upstream"
    );
    assert_eq!(fake.count("eth_sendTransaction"), 0);
    assert_eq!(fake.count("eth_sendRawTransactionConditional"), 0);
    assert_eq!(fake.count("debug_traceTransaction"), 0);
    assert_eq!(fake.count("eth_getBalance"), 1);
    assert_eq!(fake.count("eth_call"), 1);
    // The server key may send them.
    let r = post(
        &prism,
        "/",
        &call("9", "eth_sendRawTransaction", tx),
        &[&format!("x-api-key: {SERVER_KEY}")],
    );
    expect_http_result(&r, "9");
    assert_eq!(fake.count("eth_sendRawTransaction"), 1);
}

#[test]
fn origin_lock_and_preflight_answer_per_key() {
    let fake = FakeProvider::start();
    let prism = start(&fake);
    let key = format!("x-api-key: {BROWSER_KEY}");
    // Listed origin: served, with CORS headers for it.
    let r = post(&prism, "/", &balance_body(), &[&key, &format!("Origin: {APP_ORIGIN}")]);
    expect_http_result(&r, "1");
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some(APP_ORIGIN),
        "{}",
        r.describe()
    );
    assert_eq!(fake.count("eth_getBalance"), 1);
    // Another origin: 403, JSON-RPC error body, nothing upstream, no CORS grant.
    for origin in [
        "https://evil.example",
        "https://app.example.evil.example",
        "http://app.example",
        "null",
    ] {
        let r = post(&prism, "/", &balance_body(), &[&key, &format!("Origin: {origin}")]);
        assert_eq!(r.status, 403, "origin {origin}: {}", r.describe());
        expect_error(json::whole(&r.body).unwrap(), -32001);
        assert_ne!(
            r.header("access-control-allow-origin"),
            Some(origin),
            "a refused origin was granted CORS: {}",
            r.describe()
        );
    }
    assert_eq!(fake.count("eth_getBalance"), 1, "a refused origin reached the upstream");
    // No Origin at all: not a browser; the lock does not apply.
    expect_http_result(&post(&prism, "/", &balance_body(), &[&key]), "1");
    // The server key has no origin lock.
    let r = post(
        &prism,
        "/",
        &balance_body(),
        &[&format!("x-api-key: {SERVER_KEY}"), "Origin: https://evil.example"],
    );
    expect_http_result(&r, "1");

    // Preflight (browsers send no credentials: the key is in the path).
    let preflight = |path: &str, origin: &str| {
        Conn::connect(prism.addr()).request(&http::bodyless(
            "OPTIONS",
            path,
            &[
                &format!("Origin: {origin}"),
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: content-type",
            ],
        ))
    };
    let browser_path = format!("/testnet/{BROWSER_KEY}");
    let r = preflight(&browser_path, APP_ORIGIN);
    assert!(r.status == 204 || r.status == 200, "{}", r.describe());
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some(APP_ORIGIN),
        "{}",
        r.describe()
    );
    let methods = r.header("access-control-allow-methods").unwrap_or("").to_uppercase();
    assert!(methods.contains("POST"), "{}", r.describe());
    let allowed = r.header("access-control-allow-headers").unwrap_or("").to_lowercase();
    assert!(allowed.contains("content-type"), "{}", r.describe());
    let r = preflight(&browser_path, "https://evil.example");
    assert_eq!(r.status, 403, "preflight from an unlisted origin: {}", r.describe());
    assert_ne!(r.header("access-control-allow-origin"), Some("https://evil.example"));
    let r = preflight(&format!("/testnet/{SERVER_KEY}"), "https://evil.example");
    assert!(
        r.status == 204 || r.status == 200,
        "a key without origin lock: {}",
        r.describe()
    );
    // And the actual POST through the path key.
    let r = post(
        &prism,
        &browser_path,
        &balance_body(),
        &[&format!("Origin: {APP_ORIGIN}")],
    );
    expect_http_result(&r, "1");
    let r = post(
        &prism,
        &browser_path,
        &balance_body(),
        &["Origin: https://evil.example"],
    );
    assert_eq!(r.status, 403, "{}", r.describe());
}

#[test]
fn key_limited_to_networks_cannot_use_the_others() {
    let (alpha, beta) = (FakeProvider::start(), FakeProvider::start());
    let prism = Prism::builder()
        .network("alpha", 4663)
        .provider(&alpha)
        .network("beta", 4663)
        .provider(&beta)
        .extra_toml(
            r#"
[[keys]]
name = "beta-only"
key = "beta-only-5c9e"
networks = ["beta"]

[[keys]]
name = "all"
key = "all-networks-1a2b"
"#,
        )
        .start();
    let body = balance_body();
    let beta_key = "x-api-key: beta-only-5c9e";
    for (path, headers) in [
        ("/alpha", vec![beta_key]),
        ("/alpha/beta-only-5c9e", vec![]),
        ("/alpha", vec!["Authorization: Bearer beta-only-5c9e"]),
    ] {
        let r = post(&prism, path, &body, &headers);
        assert_eq!(r.status, 403, "{path} {headers:?}: {}", r.describe());
        expect_error(json::whole(&r.body).unwrap(), -32001);
    }
    assert_no_client_calls(&alpha, "a key limited to beta");
    expect_http_result(&post(&prism, "/beta", &body, &[beta_key]), "1");
    expect_http_result(&post(&prism, "/beta/beta-only-5c9e", &body, &[]), "1");
    assert_eq!(beta.count("eth_getBalance"), 2);
    // An unrestricted key uses both.
    expect_http_result(&post(&prism, "/alpha", &body, &["x-api-key: all-networks-1a2b"]), "1");
    expect_http_result(&post(&prism, "/beta", &body, &["x-api-key: all-networks-1a2b"]), "1");
    assert_eq!(alpha.count("eth_getBalance"), 1);
    assert_eq!(beta.count("eth_getBalance"), 3);
}
