//! Shared test support, included by each integration test file with `mod support;`.
//!
//! - [`fake`]: `FakeProvider`, a misbehaving JSON-RPC upstream on loopback.
//! - [`hostile`]: `HostileProvider` / `HostileWs`, upstreams that answer with malformed bytes (issue 13).
//! - [`prism`]: the `Prism` harness that runs the real binary, and `run_cli` for `prism check`.
//! - [`http`]: raw HTTP/1.1 client helpers (exact bytes on the wire).
//! - [`json`]: a raw JSON span scanner for byte-exact assertions.
//! - [`tls`]: a test CA (rcgen), a TLS client helper, and an HTTPS front for any plain fake.
//! - [`logs_fake`]: `LogsFake`, a node over a synthetic chain whose `eth_getLogs` has real providers' limits.
//! - [`replay`]: `ReplayNode`, a node that answers from the recorded conformance corpus.
//! - [`solana_fake`]: `SolanaFake`, a Solana base layer / ephemeral rollup (HTTP + WebSocket on port + 1), the
//!   Solana fixtures, the `Magic` deployment (base, ERs, Prism) and a Solana WebSocket client.
//! - [`real_er`]: `RealEr`, MagicBlock's own ER validator on loopback with a base-layer fake as its remote.
//! - [`relay`]: a real EVM dev node (ganache, once per test binary) and fault-injecting relays in front of it
//!   that count every write they forward.
//! - [`tools`]: external tools (headless Chromium, Python's prometheus_client), failing loudly when absent.
//! - [`anvil`]: Foundry's anvil, a second real EVM node (one per test, mined by hand), whose `anvil_reorg` and
//!   `anvil_rollback` make reorgs on demand.
//! - [`wsfeed`]: `Feed`, a WebSocket subscriber recording every notification (with its arrival time) on a
//!   thread of its own, to compare a node's stream with Prism's.
#![allow(dead_code, unused_imports)]

pub mod anvil;
pub mod fake;
pub mod hostile;
pub mod http;
pub mod json;
pub mod logs_fake;
pub mod prism;
pub mod real_er;
pub mod redis;
pub mod relay;
pub mod replay;
pub mod solana_fake;
pub mod tls;
pub mod tools;
pub mod ws_fake;
pub mod wsfeed;

pub use fake::{Call, FakeProvider, Garbage, Mode, Reply, BACKGROUND_METHODS};
pub use http::{Conn, Response};
pub use prism::{Prism, PrismBuilder};

use std::time::{Duration, Instant};

/// Sets a stop flag when dropped. Threads of a `std::thread::scope` that poll the flag stop on every way out
/// of the scope, a failed assertion included: without it the scope waits on them forever and a failure
/// becomes a hang.
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Polls `f` every 10 ms until it returns true or `within` passes; returns its last answer.
pub fn wait_until(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the kernel holds a TCP socket from local port `from` to port `to` (IPv4, `/proc/net/tcp`): one
/// lives on after its process closed the descriptor while unsent bytes or a pending write hold it.
pub fn tcp_socket_exists(from: u16, to: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let want = (format!(":{from:04X}"), format!(":{to:04X}"));
    table.lines().skip(1).any(|line| {
        let mut cols = line.split_whitespace().skip(1);
        let (local, remote) = (cols.next().unwrap_or(""), cols.next().unwrap_or(""));
        local.ends_with(&want.0) && remote.ends_with(&want.1)
    })
}

/// `{"jsonrpc":"2.0","id":ID,"method":"METHOD","params":PARAMS}` with `id` and `params` as raw JSON text.
pub fn call(id: &str, method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

/// A notification (no id).
pub fn notification(method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params}}}"#)
}

/// `[a,b,...]`.
pub fn batch(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

/// Raw span of `key` in a JSON-RPC response object (panics with the body when absent).
pub fn raw_field<'a>(obj: &'a [u8], key: &str) -> &'a [u8] {
    json::field(obj, key).unwrap_or_else(|| panic!("no {key:?} in {:?}", json::text(obj)))
}

/// Asserts a successful JSON-RPC response object (raw bytes) with this raw id and returns its raw result.
pub fn expect_result<'a>(obj: &'a [u8], id: &str) -> &'a [u8] {
    let fields = json::object(obj).unwrap_or_else(|e| panic!("not a JSON object: {e}"));
    let get = |k: &str| fields.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    assert_eq!(
        get("jsonrpc"),
        Some(&b"\"2.0\""[..]),
        "jsonrpc member in {:?}",
        json::text(obj)
    );
    assert_eq!(
        get("id").map(json::text),
        Some(id.to_string()),
        "id bytes in {:?}",
        json::text(obj)
    );
    assert!(get("error").is_none(), "unexpected error in {:?}", json::text(obj));
    get("result").unwrap_or_else(|| panic!("no result in {:?}", json::text(obj)))
}

/// Asserts a JSON-RPC error object (raw bytes) with this code; returns `error` as a serde value.
pub fn expect_error(obj: &[u8], code: i64) -> serde_json::Value {
    let err = json::field(obj, "error").unwrap_or_else(|| panic!("no error member in {:?}", json::text(obj)));
    let err: serde_json::Value = serde_json::from_slice(err).unwrap();
    assert_eq!(err["code"].as_i64(), Some(code), "error code in {:?}", json::text(obj));
    assert!(err["message"].is_string(), "error message in {:?}", json::text(obj));
    assert!(
        json::field(obj, "result").is_none(),
        "both result and error in {:?}",
        json::text(obj)
    );
    assert_eq!(
        json::field(obj, "jsonrpc"),
        Some(&b"\"2.0\""[..]),
        "jsonrpc member in {:?}",
        json::text(obj)
    );
    err
}

/// Asserts an HTTP 200 JSON-RPC single error response with this code and returns (error, raw id).
pub fn expect_http_error(resp: &Response, code: i64) -> (serde_json::Value, String) {
    assert_eq!(resp.status, 200, "HTTP status: {}", resp.describe());
    let body = json::whole(&resp.body).unwrap_or_else(|e| panic!("body not JSON: {e}: {}", resp.describe()));
    assert_eq!(
        body.first(),
        Some(&b'{'),
        "expected one error object: {}",
        resp.describe()
    );
    let err = expect_error(body, code);
    (err, json::text(raw_field(body, "id")))
}

/// Asserts an HTTP 200 single success response with this id; returns the raw result bytes.
pub fn expect_http_result(resp: &Response, id: &str) -> Vec<u8> {
    assert_eq!(resp.status, 200, "HTTP status: {}", resp.describe());
    let body = json::whole(&resp.body).unwrap_or_else(|e| panic!("body not JSON: {e}: {}", resp.describe()));
    expect_result(body, id).to_vec()
}

/// The items of a batch response (panics when the body is not an array).
pub fn batch_items(resp: &Response) -> Vec<Vec<u8>> {
    assert_eq!(resp.status, 200, "HTTP status: {}", resp.describe());
    json::array(&resp.body)
        .unwrap_or_else(|e| panic!("expected a JSON array: {e}: {}", resp.describe()))
        .into_iter()
        .map(|s| s.to_vec())
        .collect()
}

/// Asserts that no client-caused call reached this provider (Prism's own probes are ignored).
pub fn assert_no_client_calls(fake: &FakeProvider, what: &str) {
    let calls = fake.client_calls();
    assert!(
        calls.is_empty(),
        "{what}: the upstream received {:?}",
        calls.iter().map(|c| json::text(&c.raw)).collect::<Vec<_>>()
    );
}

/// `eth_getBalance` params: a read Prism never answers itself and never sends on its own.
pub const BALANCE_PARAMS: &str = r#"["0x0000000000000000000000000000000000000001","latest"]"#;

/// Waits until each named provider shows state `closed` in `/status` (chain id verified, breaker
/// closed, not drifted): routing tests start from a pool where every provider may serve.
pub fn wait_serving(prism: &Prism, names: &[&str]) {
    for name in names {
        prism.wait_state(name, "closed", Duration::from_secs(10));
    }
}

/// The JSON-RPC `error` object of a single-response body, as a serde value (panics when absent).
pub fn error_of(resp: &Response) -> serde_json::Value {
    let v = resp.json();
    assert!(v.get("error").is_some(), "expected an error: {}", resp.describe());
    v["error"].clone()
}
