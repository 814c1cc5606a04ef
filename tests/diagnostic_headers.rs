//! Answers that say how: `x-prism-provider`, `x-prism-attempts`, `x-prism-cache` and `x-prism-hedged` on a
//! running Prism in front of fake providers. A first answer names its provider and one attempt; a retried
//! one names the provider that answered and both attempts; a cached one says `hit` with no attempt; a call
//! that shares an identical one in flight says `join`; a batch gets counts; `diagnostic_headers = false`
//! sends none; a header never carries a URL or a key.

use std::time::Duration;

use crate::support::{FakeProvider, Mode, Prism, Response};

fn call(id: u64, method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

fn headers(r: &Response) -> [Option<String>; 4] {
    [
        "x-prism-provider",
        "x-prism-attempts",
        "x-prism-cache",
        "x-prism-hedged",
    ]
    .map(|h| r.header(h).map(str::to_string))
}

fn strs(v: [Option<&str>; 4]) -> [Option<String>; 4] {
    v.map(|s| s.map(str::to_string))
}

#[test]
fn answers_say_who_answered_after_how_many_attempts_and_from_where() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    // Blocks up to 200 final (heads at 256): a block there is cached without a heads feed to prove it.
    for f in [&a, &b] {
        f.set_tag("finalized", 200);
    }
    let prism = Prism::builder()
        .providers(&[&a, &b])
        .extra_toml("[[keys]]\nname = \"app\"\nkey = \"secret-app-key\"\nstrategy = \"round_robin\"\n")
        .start();
    crate::support::wait_serving(&prism, &["p1", "p2"]);
    assert!(
        crate::support::wait_until(Duration::from_secs(5), || prism.status()["networks"][0]["finalized"]
            == 200),
        "the finalized block was never learned"
    );
    let key = ["x-api-key: secret-app-key"];

    // A plain read: one attempt, one provider, a miss.
    let r = prism.rpc_with("/", call(1, "eth_getBalance", r#"["0x01","latest"]"#).as_bytes(), &key);
    assert_eq!(r.status, 200, "{}", r.describe());
    let [provider, attempts, cache, hedged] = headers(&r);
    assert!(matches!(provider.as_deref(), Some("p1" | "p2")), "{}", r.describe());
    assert_eq!(
        (attempts.as_deref(), cache.as_deref(), hedged.as_deref()),
        (Some("1"), Some("miss"), Some("false"))
    );

    // p1 fails the next read: the answer is p2's, after two attempts.
    a.set_method_mode("eth_getBalance", Mode::Status(500));
    let mut moved = None;
    for n in 0..6 {
        let r = prism.rpc_with(
            "/",
            call(10 + n, "eth_getBalance", &format!(r#"["0x{n:02x}","latest"]"#)).as_bytes(),
            &key,
        );
        assert_eq!(r.status, 200, "{}", r.describe());
        if r.header("x-prism-attempts") == Some("2") {
            moved = Some(r);
            break;
        }
    }
    let r = moved.expect("round robin sends one of six reads to p1 first");
    assert_eq!(headers(&r), strs([Some("p2"), Some("2"), Some("miss"), Some("false")]));
    a.clear_method_mode("eth_getBalance");

    // A final block by number is cached: the second one is a hit, with no attempt.
    let block = call(20, "eth_getBlockByNumber", r#"["0x1",false]"#);
    let first = prism.rpc_with("/", block.as_bytes(), &key);
    assert_eq!(first.header("x-prism-cache"), Some("miss"), "{}", first.describe());
    let second = prism.rpc_with("/", block.as_bytes(), &key);
    assert_eq!(
        headers(&second),
        strs([None, Some("0"), Some("hit"), Some("false")]),
        "{}",
        second.describe()
    );

    // Two identical reads at once, the upstream slow: the second shares the first's call.
    a.set_delay("eth_call", Duration::from_millis(300));
    b.set_delay("eth_call", Duration::from_millis(300));
    let body = call(
        30,
        "eth_call",
        r#"[{"to":"0x00000000000000000000000000000000000000aa","data":"0x"},"latest"]"#,
    );
    let (x, y) = std::thread::scope(|s| {
        let x = s.spawn(|| prism.rpc_with("/", body.as_bytes(), &key));
        let y = s.spawn(|| prism.rpc_with("/", body.as_bytes(), &key));
        (x.join().unwrap(), y.join().unwrap())
    });
    let mut sources = [
        x.header("x-prism-cache").unwrap_or(""),
        y.header("x-prism-cache").unwrap_or(""),
    ];
    sources.sort();
    assert_eq!(sources, ["join", "miss"], "{}\n{}", x.describe(), y.describe());
    let joined = if x.header("x-prism-cache") == Some("join") {
        &x
    } else {
        &y
    };
    assert_eq!(
        joined.header("x-prism-attempts"),
        Some("0"),
        "a joined call made no attempt of its own"
    );
    assert!(
        joined.header("x-prism-provider").is_some(),
        "it names the provider whose answer it shares"
    );

    // A batch: counts.
    let batch = format!(
        "[{},{},{}]",
        call(40, "eth_getBalance", r#"["0x41","latest"]"#),
        call(41, "eth_getBalance", r#"["0x42","latest"]"#),
        block
    );
    let r = prism.rpc_with("/", batch.as_bytes(), &key);
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(
        r.header("x-prism-cache"),
        Some("hit=1, join=0, miss=2"),
        "{}",
        r.describe()
    );
    assert_eq!(r.header("x-prism-attempts"), Some("2"));
    assert_eq!(r.header("x-prism-hedged"), Some("0"));

    // Names only.
    for line in r
        .describe()
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("x-prism-"))
    {
        assert!(
            !line.contains("127.0.0.1") && !line.contains("secret-app-key"),
            "{line}"
        );
    }
}

#[test]
fn diagnostic_headers_can_be_turned_off() {
    let a = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&a)
        .server_option("diagnostic_headers", false)
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    let r = prism.rpc(call(1, "eth_getBalance", r#"["0x01","latest"]"#).as_bytes());
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(headers(&r), [None, None, None, None], "{}", r.describe());
}
