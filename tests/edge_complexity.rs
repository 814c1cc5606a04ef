//! No single client can take a shard down, through the real binary on real sockets:
//!
//! - bodies built against quadratic parsers (80 000 distinct keys, long escape runs, a batch at the batch
//!   limit, nesting at the depth limit across a wide array, a 1 MB string of `\u0041` escapes) are answered
//!   fast, and a small call sent meanwhile to the same (only) shard from another thread is answered quickly;
//! - subscriptions are capped per connection and per shard, with an error naming the limit, and billed like
//!   any call (a key with a tiny rate cannot open unlimited subscriptions);
//! - one request's answer is capped (`limits.max_answer_bytes`): a batch of many copies of a large answer is
//!   refused with one clear error;
//! - upstream connections per provider per shard are capped (`limits.upstream_max_connections`): a burst
//!   queues and never opens more, a call that cannot get one in time fails with "Upstream connection limit",
//!   and the provider's breaker stays closed.
//!
//! Bounds are generous (a loaded 2-core machine); the measured figures are printed so they can be quoted.
//! Every wait polls observable state with a deadline.

use crate::support::ws_fake;

use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{
    batch, call, expect_http_result, wait_serving, wait_until, FakeProvider, Prism, PrismBuilder, Reply,
};
use serde_json::{json, Value};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};
use ws_fake::WsFake;

const WAIT: Duration = Duration::from_secs(10);
/// Upper bound for answering one maximal hostile body (was 30 s for 80 000 keys).
const BIG_BOUND: Duration = Duration::from_secs(3);
/// Upper bound for a small call on the same shard while a hostile body is being answered.
const SMALL_BOUND: Duration = Duration::from_secs(1);

// ---- work per byte -------------------------------------------------------------------------------

/// One shard (so every connection meets the same one), bodies up to 6 MiB, batches up to 1000, depth 64.
fn complexity_prism(fake: &FakeProvider) -> Prism {
    let prism = Prism::builder()
        .shards(1)
        .provider(fake)
        .limit("max_body_bytes", 6 * 1024 * 1024)
        .limit("max_batch", 1000)
        .limit("max_depth", 64)
        .limit("request_deadline_ms", 10_000)
        .limit("client_timeout_ms", 10_000)
        .limit("idle_timeout_ms", 10_000)
        .start();
    wait_serving(&prism, &["p1"]);
    prism
}

/// Sends `body` while another thread keeps sending a one-line `eth_chainId` to the same shard; returns how
/// long the body took and the slowest small call that started while it was in flight.
fn answer_meanwhile(prism: &Prism, what: &str, body: &[u8], check: impl FnOnce(&crate::support::Response)) {
    let addr = prism.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let in_flight = Arc::new(AtomicBool::new(false));
    let small = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let warm = Arc::new(AtomicUsize::new(0));
    let pinger = {
        let (stop, in_flight, small, warm) = (stop.clone(), in_flight.clone(), small.clone(), warm.clone());
        thread::spawn(move || {
            let one = call("7", "eth_chainId", "[]");
            while !stop.load(Ordering::SeqCst) {
                let during = in_flight.load(Ordering::SeqCst);
                let started = Instant::now();
                let r = crate::support::Conn::connect(addr).request(&crate::support::http::post("/", one.as_bytes()));
                let took = started.elapsed();
                expect_http_result(&r, "7");
                warm.fetch_add(1, Ordering::SeqCst);
                if during {
                    small.lock().unwrap().push(took);
                }
            }
        })
    };
    assert!(
        wait_until(WAIT, || warm.load(Ordering::SeqCst) > 0),
        "small calls are answered"
    );
    in_flight.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let mut conn = prism.conn();
    conn.stream().set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let resp = conn.request(&crate::support::http::post("/", body));
    let took = started.elapsed();
    // Let at least one small call start after the big one was answered too, so the pinger saw it through.
    let seen = warm.load(Ordering::SeqCst);
    assert!(
        wait_until(WAIT, || warm.load(Ordering::SeqCst) > seen + 1),
        "small calls continue"
    );
    in_flight.store(false, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    pinger.join().unwrap();
    let small = small.lock().unwrap().clone();
    let worst = small.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{what}: {} KiB answered in {took:?}; {} small eth_chainId calls meanwhile, slowest {worst:?}",
        body.len() / 1024,
        small.len()
    );
    check(&resp);
    assert!(took < BIG_BOUND, "{what}: answered in {took:?}");
    assert!(
        worst < SMALL_BOUND,
        "{what}: a small call on the same shard waited {worst:?}"
    );
}

fn many_keys(n: usize, extra: &str) -> Vec<u8> {
    let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId""#);
    for i in 0..n {
        s.push_str(&format!(r#","key{i:06}":{i}"#));
    }
    s.push_str(extra);
    s.push('}');
    s.into_bytes()
}

#[test]
fn eighty_thousand_distinct_keys_are_answered_fast_and_the_shard_keeps_serving() {
    let fake = FakeProvider::start();
    let prism = complexity_prism(&fake);
    let body = many_keys(80_000, "");
    assert!(
        body.len() > 1_200_000,
        "the body the bug report measured: {} bytes",
        body.len()
    );
    answer_meanwhile(&prism, "80 000 distinct keys", &body, |r| {
        assert_eq!(expect_http_result(r, "1"), b"\"0x1237\"");
    });
    // The same body with one key repeated at the very end is refused, just as fast.
    let dup = many_keys(80_000, r#","key000000":0"#);
    answer_meanwhile(&prism, "80 000 keys, one duplicate", &dup, |r| {
        let (err, id) = crate::support::expect_http_error(r, -32600);
        assert_eq!(id, "1");
        assert!(err["message"].as_str().unwrap().contains("duplicate key"), "{err}");
    });
}

#[test]
fn escape_runs_and_unicode_escapes_are_answered_fast() {
    let fake = FakeProvider::start();
    let prism = complexity_prism(&fake);
    // 512 KiB of escaped backslashes in the params (forwarded and echoed byte for byte) and in a key name.
    let run = "\\\\".repeat(256 * 1024);
    let body = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"echo","params":["{run}"],"x{run}":1}}"#);
    answer_meanwhile(&prism, "escape runs", body.as_bytes(), |r| {
        let result = expect_http_result(r, "2");
        assert!(result.len() > 512 * 1024, "echoed params: {} bytes", result.len());
    });
    // A 1 MB string of \u0041 escapes, as params and as the value of an unknown member.
    let a = "\\u0041".repeat(175_000);
    let body = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"echo","params":["{a}"],"other":"{a}"}}"#);
    assert!(body.len() > 2_000_000);
    answer_meanwhile(&prism, "1 MB of \\u0041", body.as_bytes(), |r| {
        let result = expect_http_result(r, "3");
        assert!(crate::support::json::text(&result).contains(r#""params":["\u0041\u0041"#));
    });
}

#[test]
fn a_batch_at_the_limit_and_nesting_at_the_depth_limit_are_answered_fast() {
    let fake = FakeProvider::start();
    let prism = complexity_prism(&fake);
    // 1000 calls (the batch limit), each with 40 extra keys: every one takes the hash-set path.
    let items: Vec<String> = (0..1000)
        .map(|i| {
            let mut s = format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"eth_chainId""#);
            for k in 0..40 {
                s.push_str(&format!(r#","k{k}":{k}"#));
            }
            s.push('}');
            s
        })
        .collect();
    let body = batch(&items);
    answer_meanwhile(&prism, "batch of 1000", body.as_bytes(), |r| {
        let replies = crate::support::batch_items(r);
        assert_eq!(replies.len(), 1000);
        for (i, reply) in replies.iter().enumerate() {
            assert_eq!(crate::support::expect_result(reply, &i.to_string()), b"\"0x1237\"");
        }
    });
    // 8000 arrays each nested 60 deep (object + params + 60 = 62 of 64 levels), forwarded and echoed.
    let nest = format!("{}1{}", "[".repeat(60), "]".repeat(60));
    let params = vec![nest; 8000].join(",");
    let body = format!(r#"{{"jsonrpc":"2.0","id":4,"method":"echo","params":[{params}]}}"#);
    answer_meanwhile(&prism, "wide nesting at the depth limit", body.as_bytes(), |r| {
        let result = expect_http_result(r, "4");
        assert!(result.len() > body.len() - 100, "echoed: {} bytes", result.len());
    });
    // One level deeper is refused, not walked.
    let too_deep = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"echo","params":[{}1{}]}}"#,
        "[".repeat(63),
        "]".repeat(63)
    );
    let (err, _) = crate::support::expect_http_error(&prism.rpc(too_deep.as_bytes()), -32600);
    assert!(err["message"].as_str().unwrap().contains("deeper than 64"), "{err}");
}

// ---- the answer-size cap ---------------------------------------------------------------------------

#[test]
fn a_batch_whose_answers_exceed_max_answer_bytes_is_refused_with_one_error() {
    const BLOCK: &str = "0x00000000000000000000000000000000000000000000000000000000000000aa";
    let fake = FakeProvider::start();
    // A 100 KiB answer (an immutable block by hash: cached after the first call).
    let big = format!(r#"{{"hash":"{BLOCK}","extraData":"0x{}"}}"#, "ab".repeat(50 * 1024));
    fake.set_reply("eth_getBlockByHash", Reply::Result(big.clone()));
    let prism = Prism::builder()
        .provider(&fake)
        .limit("max_batch", 100)
        .limit("max_answer_bytes", 1024 * 1024)
        .start();
    wait_serving(&prism, &["p1"]);
    let one = |i: usize| call(&i.to_string(), "eth_getBlockByHash", &format!(r#"["{BLOCK}",false]"#));
    // Under the cap: answered in full.
    let r = prism.rpc(batch(&(0..5).map(one).collect::<Vec<_>>()).as_bytes());
    let items = crate::support::batch_items(&r);
    assert_eq!(items.len(), 5);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(crate::support::expect_result(item, &i.to_string()).len(), big.len());
    }
    // 100 copies (10 MiB) against a 1 MiB cap: one error, not a 10 MiB body.
    let r = prism.rpc(batch(&(0..100).map(one).collect::<Vec<_>>()).as_bytes());
    assert!(r.body.len() < 4096, "refused, not built: {} bytes", r.body.len());
    let (err, id) = crate::support::expect_http_error(&r, -32003);
    assert_eq!(id, "null");
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("max_answer_bytes"), "{err}");
    // The connection's buffers are not pinned by it: the next call is answered as usual.
    assert!(expect_http_result(&prism.rpc(one(7).as_bytes()), "7").len() == big.len());
}

/// One code and one message per size limit, each naming its limit and value (docs/CONFIGURATION.md,
/// `[limits]`): an upstream answer over `limits.max_response_bytes` is -32005 with the client's id (the
/// issue-40 report: a 200 MB `eth_getLogs` answer came back as -32603 "Upstream error: response too large",
/// naming nothing), and answers over `limits.max_answer_bytes` are -32003. Neither blames the provider.
#[test]
fn each_size_limit_has_its_own_code_and_names_itself() {
    const BLOCK: &str = "0x00000000000000000000000000000000000000000000000000000000000000aa";
    let fake = FakeProvider::start();
    // 2 MiB of logs for one block hash: over a 1 MiB max_response_bytes, and a filter that cannot be split.
    let logs = format!(r#"[{{"blockHash":"{BLOCK}","data":"0x{}"}}]"#, "ab".repeat(1024 * 1024));
    fake.set_reply("eth_getLogs", Reply::Result(logs));
    // 100 KiB blocks: ten of them are over a 512 KiB max_answer_bytes, one is not.
    let block = format!(r#"{{"hash":"{BLOCK}","extraData":"0x{}"}}"#, "ab".repeat(50 * 1024));
    fake.set_reply("eth_getBlockByHash", Reply::Result(block.clone()));
    // 600 KiB of receipts: under max_response_bytes, over max_answer_bytes on its own.
    let receipts = format!(r#"[{{"logsBloom":"0x{}"}}]"#, "ab".repeat(300 * 1024));
    fake.set_reply("eth_getBlockReceipts", Reply::Result(receipts));
    let prism = Prism::builder()
        .provider(&fake)
        .limit("max_response_bytes", 1024 * 1024)
        .limit("max_answer_bytes", 512 * 1024)
        .start();
    wait_serving(&prism, &["p1"]);

    let started = Instant::now();
    let r = prism.rpc(call("7", "eth_getLogs", &format!(r#"[{{"blockHash":"{BLOCK}"}}]"#)).as_bytes());
    let (err, id) = crate::support::expect_http_error(&r, -32005);
    assert_eq!(id, "7", "the client's own id");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("limits.max_response_bytes (1048576 bytes)"),
        "names the limit and its value: {err}"
    );
    assert!(started.elapsed() < WAIT, "refused promptly: {:?}", started.elapsed());
    // Asking too much is the caller's doing: the provider stays in service.
    assert_eq!(prism.provider_state("p1"), "closed");

    let one = |i: usize| call(&i.to_string(), "eth_getBlockByHash", &format!(r#"["{BLOCK}",false]"#));
    assert_eq!(
        expect_http_result(&prism.rpc(one(1).as_bytes()), "1").len(),
        block.len()
    );
    let r = prism.rpc(batch(&(0..10).map(one).collect::<Vec<_>>()).as_bytes());
    let (err, id) = crate::support::expect_http_error(&r, -32003);
    assert_eq!(id, "null", "a batch gets one error");
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("limits.max_answer_bytes (524288 bytes)"), "{err}");
    let r = prism.rpc(call("\"r\"", "eth_getBlockReceipts", r#"["0x10"]"#).as_bytes());
    let (err, id) = crate::support::expect_http_error(&r, -32003);
    assert_eq!(id, "\"r\"", "one call's error carries its id");
    assert!(
        err["message"].as_str().unwrap().contains("limits.max_answer_bytes"),
        "{err}"
    );
    assert_eq!(prism.provider_state("p1"), "closed");
}

// ---- the upstream connection cap -------------------------------------------------------------------

/// `eth_getBalance` of a distinct address per `i` (no two deduplicated).
fn balance(i: usize) -> String {
    call(&i.to_string(), "eth_getBalance", &format!(r#"["0x{i:040x}","latest"]"#))
}

#[test]
fn a_burst_beyond_the_upstream_connection_cap_queues_and_never_opens_more() {
    const CAP: usize = 2;
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .network_option("probe_interval_ms", 60_000)
        .limit("upstream_max_connections", CAP)
        .limit("request_deadline_ms", 8000)
        .limit("client_timeout_ms", 8000)
        .limit("max_connections", 1000)
        .start();
    wait_serving(&prism, &["p1"]);
    fake.set_delay("eth_getBalance", Duration::from_millis(150));
    let peak = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let addr = prism.addr();
    let started = Instant::now();
    thread::scope(|s| {
        let _stop_sampling = crate::support::StopOnDrop(&done);
        // Samples the provider's open connections while the burst runs.
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                peak.fetch_max(fake.open_connections(), Ordering::SeqCst);
                thread::sleep(Duration::from_millis(2));
            }
        });
        let clients: Vec<_> = (0..12)
            .map(|i| {
                s.spawn(move || {
                    let r = crate::support::Conn::connect(addr)
                        .request(&crate::support::http::post("/", balance(i).as_bytes()));
                    expect_http_result(&r, &i.to_string());
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
    });
    let took = started.elapsed();
    eprintln!(
        "12 calls of 150 ms through {CAP} connections: {took:?}, peak open {}, accepted {}",
        peak.load(Ordering::SeqCst),
        fake.connections_accepted()
    );
    assert_eq!(fake.count("eth_getBalance"), 12, "every call reached the provider");
    assert!(
        peak.load(Ordering::SeqCst) <= CAP,
        "peak {} connections",
        peak.load(Ordering::SeqCst)
    );
    assert!(
        fake.connections_accepted() <= CAP,
        "{} connections were opened",
        fake.connections_accepted()
    );
    // 12 × 150 ms over 2 connections: queued, so at least ~900 ms.
    assert!(took >= Duration::from_millis(850), "calls did not queue: {took:?}");
    assert_eq!(prism.provider_state("p1"), "closed");
}

#[test]
fn a_call_that_cannot_get_an_upstream_connection_in_time_fails_clearly_and_blames_no_one() {
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .network_option("probe_interval_ms", 60_000)
        .limit("upstream_max_connections", 1)
        .limit("request_deadline_ms", 3000)
        .limit("client_timeout_ms", 5000)
        .start();
    wait_serving(&prism, &["p1"]);
    // A write holds the only connection for 1.5 s (a write's attempt has the whole 3 s deadline; a read's
    // first attempt a third of it).
    fake.set_delay("eth_sendRawTransaction", Duration::from_millis(1500));
    let addr = prism.addr();
    let write = thread::spawn(move || {
        let body = call("\"w\"", "eth_sendRawTransaction", r#"["0x02f8"]"#);
        crate::support::Conn::connect(addr).request(&crate::support::http::post("/", body.as_bytes()))
    });
    assert!(
        fake.wait_for_calls("eth_sendRawTransaction", 1, WAIT),
        "the write reached the provider"
    );
    let started = Instant::now();
    let reads: Vec<_> = (0..3)
        .map(|i| {
            thread::spawn(move || {
                crate::support::Conn::connect(addr).request(&crate::support::http::post("/", balance(i).as_bytes()))
            })
        })
        .collect();
    for (i, r) in reads.into_iter().enumerate() {
        let r = r.join().unwrap();
        let (err, id) = crate::support::expect_http_error(&r, -32603);
        assert_eq!(id, i.to_string());
        let message = err["message"].as_str().unwrap();
        assert!(message.contains("Upstream connection limit"), "{err}");
    }
    let took = started.elapsed();
    eprintln!("reads refused for the connection limit after {took:?}");
    assert!(
        took < Duration::from_millis(1500),
        "they waited for their deadline, not longer: {took:?}"
    );
    assert_eq!(fake.count("eth_getBalance"), 0, "no read was sent");
    let w = write.join().unwrap();
    assert_eq!(w.status, 200, "{}", w.describe());
    // Reads go through again once the connection is free, and the provider was never blamed.
    expect_http_result(&prism.rpc(balance(9).as_bytes()), "9");
    let row = prism.wait_provider("p1", WAIT, "calls recorded", |r| r["calls"].as_u64() >= Some(2));
    assert_eq!(row["state"], "closed", "{row}");
    assert_eq!(row["failures"], 0, "{row}");
}

// ---- subscriptions ---------------------------------------------------------------------------------

struct Ws {
    ws: WebSocket<TcpStream>,
    next_id: u64,
}

impl Ws {
    fn connect(prism: &Prism, path: &str, headers: &[(&'static str, &str)]) -> Ws {
        let stream = TcpStream::connect(prism.addr()).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!("ws://{}{}", prism.addr(), path).into_client_request().unwrap();
        for (k, v) in headers {
            req.headers_mut().insert(*k, v.parse().unwrap());
        }
        let (ws, _) = tungstenite::client(req, stream).unwrap_or_else(|e| panic!("upgrade: {e}"));
        Ws { ws, next_id: 1 }
    }

    /// Sends a call and reads until its reply (notifications read meanwhile are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let text = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string();
        self.ws.send(Message::Text(text)).expect("send");
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < deadline, "no reply to {method}");
            match self.ws.read() {
                Ok(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v["id"] == json!(id) {
                        return v;
                    }
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("reading the reply to {method}: {e}"),
            }
        }
    }

    fn subscribe(&mut self) -> Value {
        self.call("eth_subscribe", json!(["newHeads"]))
    }

    fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }
}

fn sub_id(r: &Value) -> String {
    r["result"]
        .as_str()
        .unwrap_or_else(|| panic!("eth_subscribe: {r}"))
        .to_string()
}

fn limit_error(r: &Value, limit: &str) {
    assert_eq!(r["error"]["code"], -32005, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(limit), "the error names {limit}: {r}");
}

fn ws_prism(fake: &WsFake, b: PrismBuilder) -> Prism {
    let prism = b
        .limit("idle_timeout_ms", 30_000)
        .provider_url_with(&fake.http_url(), &fake.ws_option())
        .start();
    wait_serving(&prism, &["p1"]);
    prism
}

#[test]
fn subscriptions_are_capped_per_connection_and_per_shard() {
    let fake = WsFake::start(0x100);
    let prism = ws_prism(
        &fake,
        Prism::builder()
            .shards(1)
            .limit("max_subscriptions_per_connection", 3)
            .limit("max_subscriptions_per_shard", 5),
    );
    let mut a = Ws::connect(&prism, "/", &[]);
    let ids: Vec<String> = (0..3).map(|_| sub_id(&a.subscribe())).collect();
    limit_error(&a.subscribe(), "max_subscriptions_per_connection");
    // The cap is on open subscriptions: one released makes room for one.
    assert_eq!(a.call("eth_unsubscribe", json!([ids[0]]))["result"], true);
    sub_id(&a.subscribe());
    limit_error(&a.subscribe(), "max_subscriptions_per_connection");
    // Other calls on the capped connection still work.
    assert_eq!(a.call("eth_chainId", json!([]))["result"], "0x1237");

    // The shard holds 5: a has 3, b gets 2, then the shard's cap speaks.
    let mut b = Ws::connect(&prism, "/", &[]);
    sub_id(&b.subscribe());
    sub_id(&b.subscribe());
    limit_error(&b.subscribe(), "max_subscriptions_per_shard");
    // a's subscriptions are released when it leaves.
    a.close();
    let mut opened = 0;
    assert!(
        wait_until(WAIT, || {
            let r = b.subscribe();
            if r["result"].is_string() {
                opened += 1;
                return true;
            }
            limit_error(&r, "max_subscriptions_per_shard");
            false
        }),
        "the shard's count drops when a connection closes"
    );
    assert_eq!(opened, 1);
    b.close();
}

#[test]
fn subscribing_takes_a_rate_limit_token_like_any_call() {
    let fake = WsFake::start(0x100);
    let prism = ws_prism(
        &fake,
        Prism::builder()
            .extra_toml("[[keys]]\nname = \"tiny\"\nkey = \"tiny-key-0001\"\nrate_per_s = 0.5\nburst = 3\n"),
    );
    let mut c = Ws::connect(&prism, "/", &[("x-api-key", "tiny-key-0001")]);
    let started = Instant::now();
    let mut opened = 0;
    let mut throttled = 0;
    for _ in 0..20 {
        let r = c.subscribe();
        if r["result"].is_string() {
            opened += 1;
        } else {
            assert_eq!(r["error"]["code"], -32005, "{r}");
            assert!(r["error"]["message"].as_str().unwrap().contains("Rate limit"), "{r}");
            throttled += 1;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!("tiny key: {opened} subscriptions opened, {throttled} throttled in {elapsed:.2} s");
    // burst 3 plus 0.5 per second elapsed.
    assert!(
        opened as f64 <= 3.0 + 0.5 * elapsed + 1.0,
        "{opened} subscriptions opened in {elapsed:.2} s"
    );
    assert!(throttled >= 15, "{throttled} throttled");
    c.close();
}
