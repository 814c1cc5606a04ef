//! WebSockets that survive providers, through a running Prism with real WebSocket clients (tungstenite,
//! sync) and fake providers that speak HTTP and WebSocket ([`ws_fake::WsFake`]):
//!
//! - a `newHeads` subscription outlives its upstream socket: no gap, no duplicate, same subscription id;
//! - it moves to another provider when its provider's breaker opens, or its socket stays down;
//! - `logs` missed while the socket was down are backfilled with `eth_getLogs`, each exactly once;
//! - a client that does not read is cut off (close 1008) while a reading client gets every head;
//! - the upstream subscription is shared and released when its last client leaves;
//! - ordinary JSON-RPC over the socket, keys and allowlists on the upgrade;
//! - the WebSocket metrics follow all of the above.
//!
//! Every wait is a deadline with polling; nothing sleeps blindly to let something happen.

use crate::support::ws_fake;

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::wait_until as eventually;
use crate::support::{tcp_socket_exists, wait_serving, Prism, PrismBuilder};
use serde_json::{json, Value};
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::HandshakeError;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};
use ws_fake::{block_hash, WsFake};

const WAIT: Duration = Duration::from_secs(10);
const ADDR: &str = "0x00000000000000000000000000000000000000aa";
const OTHER: &str = "0x00000000000000000000000000000000000000bb";

// ---- a WebSocket client --------------------------------------------------------------------------

/// What the client read next.
#[derive(Debug)]
enum Next {
    Json(Value),
    /// A close frame (with its code), or the connection ended without one (`None`).
    Closed(Option<CloseCode>),
    /// Nothing within the deadline.
    Silent,
}

struct Client {
    ws: WebSocket<TcpStream>,
    /// Messages read while looking for something else (notifications while waiting for a reply).
    notifications: VecDeque<Value>,
    next_id: u64,
    closed: bool,
}

impl Client {
    fn connect(prism: &Prism, path: &str) -> Client {
        Client::try_connect(prism, path, &[], None).unwrap_or_else(|(s, b)| panic!("upgrade refused: {s} {b}"))
    }

    /// Upgrades on `path` with extra headers; `rcvbuf` sets SO_RCVBUF before connecting. Err((status, body))
    /// when the upgrade is refused.
    fn try_connect(
        prism: &Prism,
        path: &str,
        headers: &[(&'static str, &str)],
        rcvbuf: Option<usize>,
    ) -> Result<Client, (u16, String)> {
        let stream = match rcvbuf {
            None => TcpStream::connect(prism.addr()).unwrap(),
            Some(size) => {
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
                s.set_recv_buffer_size(size).unwrap();
                s.connect(&prism.addr().into()).unwrap();
                s.into()
            }
        };
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!("ws://{}{}", prism.addr(), path).into_client_request().unwrap();
        for (k, v) in headers {
            req.headers_mut().insert(*k, v.parse().unwrap());
        }
        match tungstenite::client(req, stream) {
            Ok((ws, _)) => {
                ws.get_ref().set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                Ok(Client {
                    ws,
                    notifications: VecDeque::new(),
                    next_id: 1,
                    closed: false,
                })
            }
            Err(HandshakeError::Failure(tungstenite::Error::Http(resp))) => Err((
                resp.status().as_u16(),
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or(b"")).into_owned(),
            )),
            Err(e) => panic!("WebSocket handshake on {path}: {e}"),
        }
    }

    fn send(&mut self, text: &str) {
        self.ws.send(Message::Text(text.to_string())).expect("send to Prism");
    }

    /// The next message within `within` (pings are answered by tungstenite and skipped).
    fn next(&mut self, within: Duration) -> Next {
        if self.closed {
            return Next::Closed(None);
        }
        let deadline = Instant::now() + within;
        loop {
            match self.ws.read() {
                Ok(Message::Text(t)) => {
                    return Next::Json(serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}): {t}")))
                }
                Ok(Message::Binary(b)) => {
                    return Next::Json(serde_json::from_slice(&b).expect("binary frame not JSON"))
                }
                Ok(Message::Close(f)) => {
                    // Answer the close like a browser does (tungstenite queued the reply).
                    let _ = self.ws.flush();
                    self.closed = true;
                    return Next::Closed(f.map(|f| f.code));
                }
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if Instant::now() >= deadline {
                        return Next::Silent;
                    }
                }
                Err(_) => {
                    self.closed = true;
                    return Next::Closed(None);
                }
            }
        }
    }

    /// Sends a call and returns its response (the whole object); notifications read meanwhile are kept.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string());
        self.reply_to(&json!(id), method)
    }

    /// Reads until the response with this id (or an array, for a batch) arrives.
    fn reply_to(&mut self, id: &Value, what: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.next(deadline.saturating_duration_since(Instant::now())) {
                Next::Json(v) if v["method"] == "eth_subscription" => self.notifications.push_back(v),
                Next::Json(v) if v.is_array() || v["id"] == *id => return v,
                Next::Json(v) => panic!("{what}: unexpected message {v}"),
                other => panic!("{what}: no answer ({other:?})"),
            }
        }
    }

    /// `eth_subscribe` → the subscription id.
    fn subscribe(&mut self, params: Value) -> String {
        let r = self.call("eth_subscribe", params.clone());
        r["result"]
            .as_str()
            .unwrap_or_else(|| panic!("eth_subscribe {params}: {r}"))
            .to_string()
    }

    /// `eth_unsubscribe` → its boolean result.
    fn unsubscribe(&mut self, id: &str) -> bool {
        let r = self.call("eth_unsubscribe", json!([id]));
        r["result"].as_bool().unwrap_or_else(|| panic!("eth_unsubscribe: {r}"))
    }

    /// The next `eth_subscription` notification's params (`{"subscription","result"}`) within `within`.
    fn notification(&mut self, within: Duration) -> Option<Value> {
        if let Some(n) = self.notifications.pop_front() {
            return Some(n["params"].clone());
        }
        match self.next(within) {
            Next::Json(v) if v["method"] == "eth_subscription" => Some(v["params"].clone()),
            Next::Json(v) => panic!("unexpected message while waiting for a notification: {v}"),
            Next::Closed(code) => panic!("the connection closed ({code:?}) while waiting for a notification"),
            Next::Silent => None,
        }
    }

    /// Reads head notifications of subscription `sub` into `seen` until head `until` arrives. Checks each
    /// head's content (number, hash, parent) and that it carries `sub`.
    fn heads_until(&mut self, sub: &str, until: u64, seen: &mut Vec<u64>) {
        while seen.last().is_none_or(|&h| h < until) {
            let n = self
                .notification(WAIT)
                .unwrap_or_else(|| panic!("no head within {WAIT:?}: waiting for {until}, seen so far {seen:?}"));
            assert_eq!(n["subscription"], sub, "subscription id changed: {n}");
            seen.push(check_head(&n["result"]));
        }
    }

    fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }
}

/// Checks a head object against the fake's chain; returns its number.
fn check_head(head: &Value) -> u64 {
    let n = head["number"]
        .as_str()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| panic!("head without a number: {head}"));
    assert_eq!(head["hash"], block_hash(n), "hash of head {n}");
    assert_eq!(head["parentHash"], block_hash(n - 1), "parent of head {n}");
    n
}

/// `seen` is exactly `from..=to`: no gap, no duplicate, never backwards.
fn assert_consecutive(seen: &[u64], from: u64, to: u64) {
    let expected: Vec<u64> = (from..=to).collect();
    if seen != expected {
        let dups: Vec<_> = seen.windows(2).filter(|w| w[1] <= w[0]).collect();
        let gaps: Vec<_> = seen.windows(2).filter(|w| w[1] > w[0] + 1).collect();
        panic!("heads not exactly {from}..={to}: backwards/duplicate at {dups:?}, gaps at {gaps:?}; all: {seen:?}");
    }
}

// ---- Prism set-up and metrics ----------------------------------------------------------------------

/// Prism in front of these fakes (`p1`, `p2` ... with their `ws_url`), with an idle timeout long enough
/// that a test's pauses between reads never look like an idle client.
fn prism_for(fakes: &[&WsFake]) -> PrismBuilder {
    let mut b = Prism::builder().limit("idle_timeout_ms", 30_000);
    for f in fakes {
        b = b.provider_url_with(&f.http_url(), &f.ws_option());
    }
    b
}

/// Starts Prism and waits until every provider serves and Prism's view of the head is `head`.
fn start(b: PrismBuilder, names: &[&str], head: u64) -> Prism {
    let prism = b.start();
    wait_serving(&prism, names);
    for name in names {
        prism.wait_provider(name, WAIT, "head probed", |r| r["head"].as_u64() == Some(head));
    }
    prism
}

fn wait_metric(prism: &Prism, name: &str, want: f64) {
    let ok = eventually(WAIT, || prism.metric(name) == want);
    assert!(ok, "metric {name}: want {want}, got {}", prism.metric(name));
}

fn wait_for(what: &str, f: impl FnMut() -> bool) {
    assert!(eventually(WAIT, f), "{what} did not happen within {WAIT:?}");
}

// ---- provider credentials on the upgrade ----------------------------------------------------------

#[test]
fn the_upstream_upgrade_carries_the_providers_auth_headers() {
    let fake = WsFake::start(100);
    let auth = format!(
        "{}\n[networks.providers.auth]\nheaders = {{ \"x-api-key\" = \"${{WS_PROVIDER_KEY}}\" }}",
        fake.ws_option()
    );
    let prism = start(
        Prism::builder()
            .provider_url_with(&fake.http_url(), &auth)
            .env("WS_PROVIDER_KEY", "ws-k3y-secret"),
        &["p1"],
        100,
    );
    let mut c = Client::connect(&prism, "/");
    c.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || fake.active_subscriptions() == 1);
    let upgrades = fake.handshake_headers();
    assert!(!upgrades.is_empty());
    for headers in &upgrades {
        assert!(
            headers.iter().any(|(n, v)| n == "x-api-key" && v == "ws-k3y-secret"),
            "an upgrade without the provider's header: {headers:?}"
        );
    }
    assert!(!prism.log().contains("ws-k3y-secret"));
}

// ---- newHeads across socket drops ----------------------------------------------------------------

#[test]
fn heads_continue_without_gap_or_duplicate_when_the_upstream_socket_drops() {
    let fake = WsFake::start(100);
    let prism = start(
        prism_for(&[&fake]).network_option("probe_interval_ms", 200),
        &["p1"],
        100,
    );
    let mut c = Client::connect(&prism, "/");
    let sub = c.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || fake.active_subscriptions() == 1);
    let mut seen = Vec::new();
    fake.advance_head(3);
    c.heads_until(&sub, 103, &mut seen);

    // Kill the socket; five heads are mined while Prism cannot reconnect (upgrades refused).
    fake.set_ws_refuse(true);
    assert_eq!(fake.drop_sockets(), 1);
    fake.advance_head(5); // 104..=108, heard by nobody
    wait_for("a reconnect attempt", || fake.ws_refused() >= 1);
    fake.set_ws_refuse(false);
    wait_for("the subscription replayed", || fake.active_subscriptions() == 1);
    assert_eq!(fake.subscribe_calls(), 2, "one replay after the reconnect");
    fake.advance_head(2); // 109, 110: the gap 104..=108 is backfilled before them
    c.heads_until(&sub, 110, &mut seen);
    assert_consecutive(&seen, 101, 110);

    // Heads advancing continuously from another thread while the socket drops twice more.
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let _stop_heads = crate::support::StopOnDrop(&stop);
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                fake.advance_head(1);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        for round in 0..2 {
            let target = fake.head() + 5;
            c.heads_until(&sub, target, &mut seen);
            let calls = fake.subscribe_calls();
            assert_eq!(fake.drop_sockets(), 1, "round {round}");
            wait_for("the subscription replayed", || {
                fake.subscribe_calls() > calls && fake.active_subscriptions() == 1
            });
        }
        let target = fake.head() + 5;
        c.heads_until(&sub, target, &mut seen);
        stop.store(true, Ordering::SeqCst);
    });
    let last = fake.head();
    c.heads_until(&sub, last, &mut seen);
    assert_consecutive(&seen, 101, last);
    assert!(
        c.notification(Duration::from_millis(200)).is_none(),
        "nothing after the last head"
    );

    wait_metric(&prism, "prism_ws_upstream_reconnects_total", 3.0);
    assert!(
        prism.metric("prism_ws_backfilled_heads_total") >= 5.0,
        "backfilled heads: {}",
        prism.metric("prism_ws_backfilled_heads_total")
    );
    assert_eq!(prism.metric("prism_ws_clients"), 1.0);
    assert_eq!(prism.metric("prism_ws_upstream_subscriptions{type=\"newHeads\"}"), 1.0);
}

// ---- provider moves ------------------------------------------------------------------------------

/// Two providers on the same chain with WebSockets, breakers that open after two probe failures and stay
/// open for the whole test.
fn two_providers() -> (WsFake, WsFake, Prism) {
    let a = WsFake::start(100);
    let b = WsFake::start(100);
    let prism = start(
        prism_for(&[&a, &b])
            .network_option("probe_interval_ms", 100)
            .extra_toml("[policy.breaker]\nfailure_threshold = 2\ncooldown_ms = 60000\n"),
        &["p1", "p2"],
        100,
    );
    (a, b, prism)
}

/// Subscribes to newHeads on the pair, checks that `a` carries it and delivers 101..=103.
fn subscribe_on_a(prism: &Prism, a: &WsFake, b: &WsFake) -> (Client, String, Vec<u64>) {
    let mut c = Client::connect(prism, "/");
    let sub = c.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || {
        a.active_subscriptions() + b.active_subscriptions() == 1
    });
    assert_eq!(
        a.active_subscriptions(),
        1,
        "equal providers: the first one carries the subscription"
    );
    let mut seen = Vec::new();
    a.advance_head(3);
    b.advance_head(3);
    c.heads_until(&sub, 103, &mut seen);
    (c, sub, seen)
}

/// Mines on both providers every 20 ms until `moved` holds, then three more heads; checks the client saw
/// every head exactly once, in order, under one subscription id.
fn heads_across_the_move(
    a: &WsFake,
    b: &WsFake,
    c: &mut Client,
    sub: &str,
    seen: &mut Vec<u64>,
    moved: impl Fn() -> bool,
) {
    let deadline = Instant::now() + WAIT;
    while !moved() {
        assert!(
            Instant::now() < deadline,
            "the subscription did not move: a={} b={} active",
            a.active_subscriptions(),
            b.active_subscriptions()
        );
        a.advance_head(1);
        b.advance_head(1);
        std::thread::sleep(Duration::from_millis(20));
    }
    a.advance_head(3);
    b.advance_head(3);
    let last = b.head();
    c.heads_until(sub, last, seen);
    assert_consecutive(seen, 101, last);
}

#[test]
fn subscription_moves_to_another_provider_when_its_breaker_opens() {
    let (a, b, prism) = two_providers();
    let (mut c, sub, mut seen) = subscribe_on_a(&prism, &a, &b);
    a.set_http_status(Some(500));
    heads_across_the_move(&a, &b, &mut c, &sub, &mut seen, || {
        b.active_subscriptions() == 1 && a.active_subscriptions() == 0
    });
    assert_eq!(prism.provider_state("p1"), "open");
    assert_eq!(a.unsubscribe_calls(), 1, "the old upstream subscription is released");
}

#[test]
fn subscription_moves_to_another_provider_when_its_socket_stays_down() {
    let (a, b, prism) = two_providers();
    let (mut c, sub, mut seen) = subscribe_on_a(&prism, &a, &b);
    a.set_ws_refuse(true);
    assert_eq!(a.drop_sockets(), 1);
    heads_across_the_move(&a, &b, &mut c, &sub, &mut seen, || b.active_subscriptions() == 1);
    assert_eq!(a.active_subscriptions(), 0);
}

#[test]
fn subscription_moves_off_a_provider_that_falls_behind() {
    let a = WsFake::start(100);
    let b = WsFake::start(100);
    let prism = start(
        prism_for(&[&a, &b])
            .network_option("probe_interval_ms", 100)
            .network_option("max_drift_blocks", 3),
        &["p1", "p2"],
        100,
    );
    let (mut c, sub, mut seen) = subscribe_on_a(&prism, &a, &b);
    // `a` stops at 103 (its socket stays up, silent); `b` keeps mining.
    let deadline = Instant::now() + WAIT;
    while b.active_subscriptions() == 0 {
        assert!(
            Instant::now() < deadline,
            "the subscription did not leave the lagging provider"
        );
        b.advance_head(1);
        std::thread::sleep(Duration::from_millis(20));
    }
    b.advance_head(3);
    let last = b.head();
    c.heads_until(&sub, last, &mut seen);
    assert_consecutive(&seen, 101, last);
    wait_for("the lagging provider's subscription released", || {
        a.active_subscriptions() == 0
    });
}

#[test]
fn pending_transactions_come_from_a_provider_that_offers_them() {
    // p1 is preferred (config order, same head) but refuses newPendingTransactions; p2 offers it.
    let a = WsFake::start(100);
    let b = WsFake::start(100);
    a.set_unsupported("newPendingTransactions");
    let prism = start(prism_for(&[&a, &b]), &["p1", "p2"], 100);
    let mut c = Client::connect(&prism, "/");
    let r = c.call("eth_subscribe", json!(["newPendingTransactions"]));
    let Some(sub) = r["result"].as_str() else {
        // Refusing the client outright would also be honest; nothing else is.
        assert!(r["error"].is_object(), "{r}");
        return;
    };
    let tx = "0x00000000000000000000000000000000000000000000000000000000000000ee";
    let within = Duration::from_secs(5);
    let deadline = Instant::now() + within;
    let n = loop {
        b.emit_pending(tx);
        if let Some(n) = c.notification(Duration::from_millis(100)) {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "no pending transaction within {within:?}: the upstream refusal left the subscription with no \
             source (p1 subscribe calls {}, p2 subscribe calls {})",
            a.subscribe_calls(),
            b.subscribe_calls()
        );
    };
    assert_eq!(n["subscription"], sub);
    assert_eq!(n["result"], tx);
}

// ---- logs backfill -------------------------------------------------------------------------------

/// Reads log notifications of `sub` until `want` logs arrived (or WAIT passed), then 300 ms more (a
/// duplicate would show);
/// returns (blockNumber, logIndex, data) of each.
fn read_logs(c: &mut Client, sub: &str, want: usize) -> Vec<(String, String, String)> {
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(n) = c.notification(left) else {
            break; // short: the caller's comparison says what is missing
        };
        assert_eq!(n["subscription"], sub);
        got.push(n["result"].clone());
    }
    while let Some(n) = c.notification(Duration::from_millis(300)) {
        got.push(n["result"].clone());
    }
    for l in &got {
        assert_eq!(l["address"], ADDR, "log for another address: {l}");
    }
    got.iter()
        .map(|l| {
            (
                l["blockNumber"].as_str().unwrap_or("").to_string(),
                l["logIndex"].as_str().unwrap_or("").to_string(),
                l["data"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn expected_logs(logs: &[ws_fake::Log]) -> Vec<(String, String, String)> {
    logs.iter()
        .filter(|l| l.address == ADDR)
        .map(|l| {
            let v = l.to_json();
            (
                v["blockNumber"].as_str().unwrap().to_string(),
                v["logIndex"].as_str().unwrap().to_string(),
                v["data"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Subscribes to logs of ADDR, sees two live ones, drops the socket, mines three blocks with logs while
/// upgrades are refused, calls `before_reconnect`, lets Prism reconnect, mines two more: the client gets
/// all seven exactly once, in order.
fn logs_across_a_gap(probe_interval_ms: u64, before_reconnect: impl FnOnce(&Prism, &WsFake)) {
    let fake = WsFake::start(100);
    let prism = start(
        prism_for(&[&fake]).network_option("probe_interval_ms", probe_interval_ms),
        &["p1"],
        100,
    );
    let mut c = Client::connect(&prism, "/");
    let sub = c.subscribe(json!(["logs", {"address": ADDR}]));
    wait_for("upstream subscription", || fake.active_of("logs") == 1);
    let live1 = fake.advance_with_logs(2, &[ADDR, OTHER]);
    assert_eq!(read_logs(&mut c, &sub, 2), expected_logs(&live1));

    fake.set_ws_refuse(true);
    assert_eq!(fake.drop_sockets(), 1);
    let missed = fake.advance_with_logs(3, &[ADDR, OTHER]); // blocks 103..=105, heard by nobody
    wait_for("a reconnect attempt", || fake.ws_refused() >= 1);
    before_reconnect(&prism, &fake);
    fake.set_ws_refuse(false);
    wait_for("the subscription replayed", || fake.active_of("logs") == 1);
    let live2 = fake.advance_with_logs(2, &[ADDR, OTHER]);

    let want: Vec<_> = expected_logs(&missed)
        .into_iter()
        .chain(expected_logs(&live2))
        .collect();
    let got = read_logs(&mut c, &sub, want.len());
    assert_eq!(
        got,
        want,
        "missed logs backfilled once each, then the live ones (blocks mined while down: 0x67..=0x69; \
         eth_getLogs calls at the provider: {:?}; Prism's head for p1 in /status: {})",
        fake.get_logs_calls(),
        prism.provider_status("p1")["head"]
    );
    assert!(!fake.get_logs_calls().is_empty(), "the backfill used eth_getLogs");
    // The backfill asks up to "latest", so it may also fetch a live log first (the socket's copy is then
    // dropped as a duplicate): at least the 3 missed, at most those plus the live ones.
    let backfilled = "prism_ws_backfilled_logs_total";
    assert!(
        eventually(WAIT, || prism.metric(backfilled) >= 3.0),
        "metric {backfilled}: {}",
        prism.metric(backfilled)
    );
    assert!(prism.metric(backfilled) <= (3 + expected_logs(&live2).len()) as f64);
    assert_eq!(prism.metric("prism_ws_upstream_reconnects_total"), 1.0);
    assert_eq!(prism.metric("prism_ws_upstream_subscriptions{type=\"logs\"}"), 1.0);
}

#[test]
fn logs_missed_during_a_gap_are_backfilled_once() {
    // Prism's probes have seen the new head before the socket comes back.
    logs_across_a_gap(100, |prism, fake| {
        let head = fake.head();
        prism.wait_provider("p1", WAIT, "new head probed", |r| r["head"].as_u64() == Some(head));
    });
}

#[test]
fn logs_backfill_does_not_wait_for_a_head_probe() {
    // The socket comes back before any probe has seen the blocks mined during the gap (probes every
    // minute): the backfill must still reach the provider's head.
    logs_across_a_gap(60_000, |_, _| {});
}

#[test]
fn logs_of_a_block_cut_mid_way_are_backfilled() {
    // The socket dies after the first of a block's three logs was announced: the other two must come
    // from the backfill, which therefore has to cover the block of the last log delivered, not only the
    // blocks after it.
    let fake = WsFake::start(100);
    let prism = start(
        prism_for(&[&fake]).network_option("probe_interval_ms", 100),
        &["p1"],
        100,
    );
    let mut c = Client::connect(&prism, "/");
    let sub = c.subscribe(json!(["logs", {"address": ADDR}]));
    wait_for("upstream subscription", || fake.active_of("logs") == 1);
    fake.set_ws_refuse(true);
    fake.drop_after_notifications(1);
    let cut = fake.advance_with_logs(1, &[ADDR, ADDR, ADDR]); // block 101
    assert_eq!(fake.ws_open(), 0, "the socket died mid-block");
    wait_for("a reconnect attempt", || fake.ws_refused() >= 1);
    prism.wait_provider("p1", WAIT, "head 101 probed", |r| r["head"].as_u64() == Some(101));
    fake.set_ws_refuse(false);
    wait_for("the subscription replayed", || fake.active_of("logs") == 1);
    let live = fake.advance_with_logs(1, &[ADDR]); // block 102
    let want: Vec<_> = expected_logs(&cut).into_iter().chain(expected_logs(&live)).collect();
    let got = read_logs(&mut c, &sub, want.len());
    assert_eq!(
        got,
        want,
        "every log of block 0x65 once (one live, two backfilled), then block 0x66's; eth_getLogs calls: {:?}",
        fake.get_logs_calls()
    );
}

// ---- slow clients --------------------------------------------------------------------------------

#[test]
fn slow_client_is_disconnected_while_others_keep_every_head() {
    let fake = WsFake::start(100);
    fake.set_head_padding(32 * 1024);
    let prism = start(prism_for(&[&fake]).limit("ws_max_queue", 8), &["p1"], 100);
    let mut fast = Client::connect(&prism, "/");
    let mut slow = Client::try_connect(&prism, "/", &[], Some(4096)).unwrap();
    let fast_sub = fast.subscribe(json!(["newHeads"]));
    let slow_sub = slow.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || fake.active_subscriptions() == 1);
    wait_metric(&prism, "prism_ws_clients", 2.0);

    // Heads in lockstep with the fast client; the slow one never reads. 32 KiB heads: a few hundred fill
    // any socket buffer and then the 8-message queue.
    let mut seen = Vec::new();
    let mut cut_after = None;
    for i in 0..400u64 {
        fake.advance_head(1);
        fast.heads_until(&fast_sub, 101 + i, &mut seen);
        if i % 20 == 19 && prism.metric("prism_ws_clients") == 1.0 {
            cut_after = Some(101 + i);
            break;
        }
    }
    let emitted = fake.head();
    let disconnected =
        cut_after.is_some() || eventually(Duration::from_secs(3), || prism.metric("prism_ws_clients") == 1.0);
    // The fast client is unaffected, before and after.
    fake.advance_head(5);
    fast.heads_until(&fast_sub, emitted + 5, &mut seen);
    assert_consecutive(&seen, 101, emitted + 5);
    let clients_before_reading = prism.metric("prism_ws_clients");

    // What the slow client finds when it finally reads: a prefix of the heads, then close 1008.
    let mut slow_seen: Vec<u64> = Vec::new();
    let end = loop {
        match slow.next(WAIT) {
            Next::Json(v) if v["method"] == "eth_subscription" => {
                assert_eq!(v["params"]["subscription"], slow_sub);
                slow_seen.push(check_head(&v["params"]["result"]));
            }
            Next::Json(v) => panic!("unexpected message: {v}"),
            other => break other,
        }
    };
    assert!(
        matches!(end, Next::Closed(Some(CloseCode::Policy)) | Next::Closed(None)),
        "the slow client should be closed (1008 or connection closed), got {end:?}"
    );
    if let Some(&last) = slow_seen.last() {
        assert_consecutive(&slow_seen, 101, last);
        assert!(
            last < emitted,
            "the slow client got every head ({last}), it was never cut off"
        );
    }
    assert_eq!(fake.active_subscriptions(), 1, "the fast client's subscription stays");
    wait_metric(&prism, "prism_ws_clients", 1.0);
    // Cut off by Prism on its own, not only once the client read again: a client that never reads must
    // not hold its connection (and its place in the subscription) forever.
    assert!(
        disconnected,
        "a client that stopped reading was not disconnected after {} heads, while it did not read \
         (prism_ws_clients = {clients_before_reading}); it got {} heads and {end:?} once it read",
        emitted - 100,
        slow_seen.len()
    );
}

/// A client that stopped reading, its socket filling with 32 KiB heads until Prism gives up on it
/// (`prism_ws_clients` drops): returns its subscription.
fn stall(prism: &Prism, fake: &WsFake, slow: &mut Client) -> String {
    stall_counting(prism, fake, slow).0
}

/// [`stall`], also returning how many heads were mined before Prism dropped the client.
fn stall_counting(prism: &Prism, fake: &WsFake, slow: &mut Client) -> (String, usize) {
    let sub = slow.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || fake.active_subscriptions() == 1);
    wait_metric(prism, "prism_ws_clients", 1.0);
    for n in 1..=400 {
        fake.advance_head(1);
        if eventually(Duration::from_millis(20), || prism.metric("prism_ws_clients") == 0.0) {
            return (sub, n);
        }
    }
    panic!("a client that never reads was not dropped after 400 heads of 32 KiB");
}

/// perf/fanout.sh --slow: with the kernel's autotuned send buffer a client that stopped reading was found
/// slow only once the kernel had queued 4 MiB for it (~7.5 min of a newHeads stream). The session's send
/// buffer is capped (`limits.ws_send_buffer_bytes`), so a write waits, and the client is dropped, after
/// about that much: here 32 KiB heads, a 128 KiB cap (256 KiB in the kernel), a 4 KiB client window.
#[test]
fn a_stalled_client_is_found_after_its_capped_send_buffer_fills() {
    let fake = WsFake::start(100);
    fake.set_head_padding(32 * 1024);
    let b = prism_for(&[&fake])
        .limit("ws_max_queue", 100_000)
        .limit("client_timeout_ms", 300)
        .limit("ws_send_buffer_bytes", 128 * 1024);
    let prism = start(b, &["p1"], 100);
    let mut slow = Client::try_connect(&prism, "/", &[], Some(4096)).unwrap();
    let (_, heads) = stall_counting(&prism, &fake, &mut slow);
    assert!(
        heads <= 24,
        "dropped after {heads} heads of 32 KiB: the kernel queued more than the capped buffer"
    );
}

/// The issue-40 report: a stalled client was dropped with no close frame. A client that is slow but
/// reads again while Prism closes it (`limits.close_timeout_ms`) finds what it was sent, then close 1008.
#[test]
fn a_client_too_slow_gets_close_1008_after_what_it_was_sent() {
    let fake = WsFake::start(100);
    fake.set_head_padding(32 * 1024);
    let b = prism_for(&[&fake])
        .limit("ws_max_queue", 8)
        .limit("close_timeout_ms", 20_000);
    let prism = start(b, &["p1"], 100);
    let mut slow = Client::try_connect(&prism, "/", &[], Some(4096)).unwrap();
    let sub = stall(&prism, &fake, &mut slow);
    let mut seen = Vec::new();
    let end = loop {
        match slow.next(WAIT) {
            Next::Json(v) if v["method"] == "eth_subscription" => {
                assert_eq!(v["params"]["subscription"], sub);
                seen.push(check_head(&v["params"]["result"]));
            }
            Next::Json(v) => panic!("unexpected message: {v}"),
            other => break other,
        }
    };
    assert!(
        matches!(end, Next::Closed(Some(CloseCode::Policy))),
        "close 1008 after {} heads, got {end:?}",
        seen.len()
    );
    let last = *seen.last().expect("the heads sent before it gave up");
    assert_consecutive(&seen, 101, last);
    assert!(last < fake.head(), "it was cut off");
}

/// A client that never reads again cannot be sent a close frame: its socket is full (a write waited
/// `limits.client_timeout_ms`, so Prism gave up on it), and once `limits.close_timeout_ms` has passed
/// Prism resets the connection, so the socket (and the bytes queued in it) is freed while the client
/// still holds it open; the client later reads what reached it, then the reset.
#[test]
fn a_client_that_never_reads_again_is_reset_and_its_socket_freed() {
    let fake = WsFake::start(100);
    fake.set_head_padding(32 * 1024);
    let b = prism_for(&[&fake])
        .limit("ws_max_queue", 100_000)
        .limit("client_timeout_ms", 300)
        .limit("close_timeout_ms", 200);
    let prism = start(b, &["p1"], 100);
    let mut slow = Client::try_connect(&prism, "/", &[], Some(4096)).unwrap();
    let port = slow.ws.get_ref().local_addr().unwrap().port();
    assert!(
        tcp_socket_exists(prism.addr().port(), port),
        "Prism's side of the connection"
    );
    stall(&prism, &fake, &mut slow);
    wait_for("Prism lets go of the socket", || {
        !tcp_socket_exists(prism.addr().port(), port)
    });
    let end = loop {
        match slow.next(WAIT) {
            Next::Json(_) => {}
            other => break other,
        }
    };
    assert!(matches!(end, Next::Closed(None)), "a reset, not a close frame: {end:?}");
}

// ---- unsubscribe ---------------------------------------------------------------------------------

#[test]
fn upstream_subscription_is_shared_and_released_by_the_last_client() {
    let fake = WsFake::start(100);
    let prism = start(prism_for(&[&fake]), &["p1"], 100);
    let mut a = Client::connect(&prism, "/");
    let mut b = Client::connect(&prism, "/");
    let sa = a.subscribe(json!(["newHeads"]));
    let sb = b.subscribe(json!(["newHeads"]));
    assert_ne!(sa, sb, "each client subscription has its own id");
    wait_for("upstream subscription", || fake.active_subscriptions() == 1);
    assert_eq!(
        fake.subscribe_calls(),
        1,
        "identical subscriptions share one upstream subscription"
    );
    wait_metric(&prism, "prism_ws_clients", 2.0);
    assert_eq!(prism.metric("prism_ws_upstream_subscriptions{type=\"newHeads\"}"), 1.0);

    fake.advance_head(1);
    let (mut sa_seen, mut sb_seen) = (Vec::new(), Vec::new());
    a.heads_until(&sa, 101, &mut sa_seen);
    b.heads_until(&sb, 101, &mut sb_seen);

    assert!(
        !b.unsubscribe(&sa),
        "another connection's subscription id is unknown here"
    );
    assert!(!a.unsubscribe("0x0123456789abcdef0123456789abcdef"), "unknown id");
    assert!(a.unsubscribe(&sa), "first client leaves");
    assert!(!a.unsubscribe(&sa), "already gone");
    fake.advance_head(1);
    b.heads_until(&sb, 102, &mut sb_seen);
    assert!(
        a.notification(Duration::from_millis(200)).is_none(),
        "no heads after unsubscribing"
    );
    assert_eq!(
        fake.active_subscriptions(),
        1,
        "one client left: the upstream subscription stays"
    );
    assert_eq!(fake.unsubscribe_calls(), 0);

    assert!(b.unsubscribe(&sb), "last client leaves");
    wait_for("upstream unsubscribe", || fake.active_subscriptions() == 0);
    assert_eq!(fake.unsubscribe_calls(), 1);
    wait_metric(&prism, "prism_ws_upstream_subscriptions{type=\"newHeads\"}", 0.0);

    // A client that goes away without unsubscribing releases its subscription too.
    let sc = a.subscribe(json!(["newHeads"]));
    let sd = b.subscribe(json!(["newPendingTransactions"]));
    wait_for("upstream subscriptions", || fake.active_subscriptions() == 2);
    fake.emit_pending("0x00000000000000000000000000000000000000000000000000000000000000ff");
    let n = b.notification(WAIT).expect("pending transaction");
    assert_eq!(n["subscription"], sd);
    assert_eq!(
        n["result"],
        "0x00000000000000000000000000000000000000000000000000000000000000ff"
    );
    assert_eq!(
        prism.metric("prism_ws_upstream_subscriptions{type=\"newPendingTransactions\"}"),
        1.0
    );
    let _ = sc;
    a.close();
    wait_for("upstream newHeads released", || fake.active_of("newHeads") == 0);
    wait_metric(&prism, "prism_ws_clients", 1.0);
    drop(b); // TCP close without a close frame
    wait_for("upstream pending released", || fake.active_subscriptions() == 0);
    wait_metric(&prism, "prism_ws_clients", 0.0);
    wait_metric(
        &prism,
        "prism_ws_upstream_subscriptions{type=\"newPendingTransactions\"}",
        0.0,
    );
}

// ---- JSON-RPC over the socket, keys ----------------------------------------------------------------

#[test]
fn json_rpc_calls_over_the_websocket() {
    let fake = WsFake::start(100);
    let prism = start(prism_for(&[&fake]), &["p1"], 100);
    let mut c = Client::connect(&prism, "/");
    let r = c.call("eth_blockNumber", json!([]));
    assert_eq!(r, json!({"jsonrpc":"2.0","id":1,"result":"0x64"}));
    let r = c.call("eth_getBalance", json!([ADDR, "latest"]));
    assert_eq!(r["result"], "0x0", "{r}");
    assert!(fake.http_calls("eth_getBalance") >= 1, "the read went to the provider");

    c.send(r#"[{"jsonrpc":"2.0","id":"a","method":"eth_chainId","params":[]},{"jsonrpc":"2.0","id":"b","method":"eth_blockNumber","params":[]}]"#);
    let r = c.reply_to(&json!(null), "batch");
    assert_eq!(
        r,
        json!([{"jsonrpc":"2.0","id":"a","result":"0x1237"},{"jsonrpc":"2.0","id":"b","result":"0x64"}])
    );
    // Errors keep the JSON-RPC shape; a bad subscription name is refused.
    let r = c.call("eth_subscribe", json!(["nonsense"]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    c.send("{not json");
    let r = c.reply_to(&json!(null), "parse error");
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(fake.ws_accepted(), 0, "no upstream socket for plain calls");
}

#[test]
fn websocket_upgrade_needs_a_key_and_keeps_its_allowlist() {
    let fake = WsFake::start(100);
    let prism = start(
        prism_for(&[&fake]).extra_toml(
            "[[keys]]\nname = \"ws\"\nkey = \"ws-key-0001\"\n\n\
             [[keys]]\nname = \"ro\"\nkey = \"ro-key-0001\"\nallow = [\"eth_blockNumber\"]\n",
        ),
        &["p1"],
        100,
    );
    let (status, body) = Client::try_connect(&prism, "/", &[], None)
        .err()
        .expect("upgrade without a key");
    assert_eq!(status, 401, "{body}");
    let (status, _) = Client::try_connect(&prism, "/", &[("x-api-key", "nope")], None)
        .err()
        .expect("upgrade with an unknown key");
    assert_eq!(status, 401);
    let (status, _) = Client::try_connect(&prism, "/testnet/nope", &[], None)
        .err()
        .expect("unknown path key");
    assert_eq!(status, 401);
    assert_eq!(fake.ws_accepted(), 0, "no upstream socket for a refused upgrade");
    assert_eq!(fake.http_client_calls(), 0, "no upstream call for a refused upgrade");

    let mut c = Client::try_connect(&prism, "/", &[("x-api-key", "ws-key-0001")], None).unwrap();
    assert_eq!(c.call("eth_chainId", json!([]))["result"], "0x1237");
    let mut c = Client::try_connect(&prism, "/testnet/ws-key-0001", &[], None).unwrap();
    let sub = c.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || fake.active_subscriptions() == 1);
    fake.advance_head(1);
    c.heads_until(&sub, 101, &mut Vec::new());

    let mut ro = Client::try_connect(&prism, "/", &[("Authorization", "Bearer ro-key-0001")], None).unwrap();
    assert_eq!(ro.call("eth_blockNumber", json!([]))["result"], "0x65");
    let r = ro.call("eth_subscribe", json!(["newHeads"]));
    assert_eq!(r["error"]["code"], -32001, "subscribe outside the allowlist: {r}");
    let r = ro.call("eth_chainId", json!([]));
    assert!(r["error"].is_object(), "call outside the allowlist: {r}");
    assert_eq!(
        fake.subscribe_calls(),
        1,
        "the refused subscribe never reached the provider"
    );
}

// ---- upstream liveness ---------------------------------------------------------------------------

/// A frozen upstream (socket open, nothing read or sent: a hung node or a half-open TCP connection) is
/// caught by its unanswered ping and treated like a dropped socket: reconnected, replayed, and the heads
/// it swallowed are backfilled, so the client's stream has no gap.
#[test]
fn a_frozen_upstream_socket_is_detected_by_ping_and_replaced() {
    let fake = WsFake::start(100);
    let prism = start(
        prism_for(&[&fake])
            .network_option("probe_interval_ms", 200)
            .limit("upstream_ws_ping_ms", 200),
        &["p1"],
        100,
    );
    let mut c = Client::connect(&prism, "/");
    let sub = c.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || fake.active_subscriptions() == 1);
    let mut seen = Vec::new();
    fake.advance_head(2);
    c.heads_until(&sub, 102, &mut seen);

    assert_eq!(fake.freeze_sockets(), 1);
    fake.advance_head(3); // 103..=105: heard by nobody
    wait_for("the subscription replayed on a new socket", || {
        fake.ws_accepted() >= 2 && fake.active_subscriptions() == 1
    });
    fake.advance_head(1); // 106: the gap 103..=105 is backfilled first
    c.heads_until(&sub, 106, &mut seen);
    assert_consecutive(&seen, 101, 106);
    assert!(
        prism.metric("prism_ws_upstream_unresponsive_total") >= 1.0,
        "unresponsive sockets: {}",
        prism.metric("prism_ws_upstream_unresponsive_total")
    );
}

// ---- config reloads ------------------------------------------------------------------------------

/// `POST /reload` on the admin listener; panics unless the new config was applied.
fn reload(prism: &Prism) {
    let mut conn = crate::support::Conn::connect(prism.admin_addr());
    let r = conn.request(&crate::support::http::bodyless(
        "POST",
        "/reload",
        &["Content-Length: 0", "Connection: close"],
    ));
    assert_eq!(r.status, 200, "reload: {}", r.describe());
}

#[test]
fn a_subscription_survives_reloads_and_moves_off_a_removed_provider() {
    let a = WsFake::start(100);
    let b = WsFake::start(100);
    let prism = start(prism_for(&[&a]).network_option("probe_interval_ms", 100), &["p1"], 100);
    let mut c = Client::connect(&prism, "/");
    let sub = c.subscribe(json!(["newHeads"]));
    wait_for("upstream subscription", || a.active_subscriptions() == 1);
    let mut seen = Vec::new();
    a.advance_head(3);
    b.advance_head(3);
    c.heads_until(&sub, 103, &mut seen);

    // Add p2 (the session was opened before it existed), then remove p1: the subscription moves to p2.
    let p1 = format!(
        "\n  [[networks.providers]]\n  name = \"p1\"\n  url = \"{}\"\n  {}\n",
        a.http_url(),
        a.ws_option()
    );
    let p2 = format!(
        "\n  [[networks.providers]]\n  name = \"p2\"\n  url = \"{}\"\n  {}\n",
        b.http_url(),
        b.ws_option()
    );
    let text = prism.config();
    assert!(text.contains(&p1), "the test's idea of the config:\n{text}");
    std::fs::write(&prism.config_path, format!("{text}{p2}")).unwrap();
    reload(&prism);
    prism.wait_provider("p2", WAIT, "p2 serving", |r| r["state"] == "closed" && r["head"] == 103);
    a.advance_head(2);
    b.advance_head(2);
    c.heads_until(&sub, 105, &mut seen);
    assert_eq!(
        a.active_subscriptions(),
        1,
        "an added provider does not move a healthy subscription"
    );

    std::fs::write(&prism.config_path, format!("{text}{p2}").replace(&p1, "")).unwrap();
    reload(&prism);
    heads_across_the_move(&a, &b, &mut c, &sub, &mut seen, || {
        b.active_subscriptions() == 1 && a.active_subscriptions() == 0
    });
    assert_eq!(
        a.unsubscribe_calls(),
        1,
        "the removed provider's subscription is released"
    );
    let r = c.call("eth_blockNumber", json!([]));
    assert!(
        r["result"].is_string(),
        "a call on the same session after the reloads: {r}"
    );
}

// ---- framing: what Prism does with the client's frames --------------------------------------------

/// A socket upgraded by hand, for frames no WebSocket library would send.
fn raw_upgrade(prism: &Prism) -> TcpStream {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(prism.addr()).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: prism\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "upgrade answer cut short");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s
}

/// A client frame, masked as a client's must be (or not, to break the rule).
fn client_frame(fin: bool, opcode: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mask = [0x11, 0x22, 0x33, 0x44];
    let mut f = vec![if fin { 0x80 } else { 0 } | opcode];
    let m = if masked { 0x80 } else { 0 };
    if payload.len() < 126 {
        f.push(m | payload.len() as u8);
    } else {
        f.push(m | 126);
        f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    }
    if masked {
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    } else {
        f.extend_from_slice(payload);
    }
    f
}

/// Reads one server frame: (opcode, payload). Server frames are never masked.
fn server_frame(s: &mut TcpStream) -> (u8, Vec<u8>) {
    use std::io::Read;
    let mut h = [0u8; 2];
    s.read_exact(&mut h).unwrap();
    assert_eq!(h[1] & 0x80, 0, "a server frame is not masked");
    let len = match h[1] & 0x7F {
        126 => {
            let mut l = [0u8; 2];
            s.read_exact(&mut l).unwrap();
            u16::from_be_bytes(l) as usize
        }
        127 => {
            let mut l = [0u8; 8];
            s.read_exact(&mut l).unwrap();
            u64::from_be_bytes(l) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).unwrap();
    (h[0] & 0x0F, payload)
}

/// The close frame's code and reason, after the socket's last frames.
fn close_of(s: &mut TcpStream) -> (u16, String) {
    loop {
        let (op, p) = server_frame(s);
        if op == 0x8 {
            return (
                u16::from_be_bytes([p[0], p[1]]),
                String::from_utf8(p[2..].to_vec()).unwrap(),
            );
        }
    }
}

#[test]
fn fragments_pings_and_the_clients_close_are_answered_as_rfc_6455_says() {
    use std::io::Write;
    let fake = WsFake::start(100);
    let prism = start(prism_for(&[&fake]), &["p1"], 100);
    let mut s = raw_upgrade(&prism);
    // One call in three fragments, a ping between two of them.
    let call = br#"{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}"#;
    s.write_all(&client_frame(false, 0x1, &call[..10], true)).unwrap();
    s.write_all(&client_frame(true, 0x9, b"are you there", true)).unwrap();
    s.write_all(&client_frame(false, 0x0, &call[10..30], true)).unwrap();
    s.write_all(&client_frame(true, 0x0, &call[30..], true)).unwrap();
    assert_eq!(
        server_frame(&mut s),
        (0xA, b"are you there".to_vec()),
        "the pong echoes the ping"
    );
    let (op, answer) = server_frame(&mut s);
    assert_eq!(op, 0x1, "answers are text frames");
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        (answer["id"].clone(), answer["result"].clone()),
        (json!(7), json!("0x1237"))
    );
    // The client closes: Prism answers with its code, then ends the connection.
    s.write_all(&client_frame(true, 0x8, &[0x0F, 0xA0, b'b', b'y', b'e'], true))
        .unwrap();
    assert_eq!(close_of(&mut s).0, 4000, "the client's close code is echoed");
    let mut rest = Vec::new();
    assert_eq!(
        std::io::Read::read_to_end(&mut s, &mut rest).unwrap(),
        0,
        "FIN after the close frame"
    );
}

#[test]
fn a_client_that_breaks_the_protocol_is_closed_with_the_rule_it_broke() {
    use std::io::Write;
    let fake = WsFake::start(100);
    let prism = start(prism_for(&[&fake]).limit("max_body_bytes", 4096), &["p1"], 100);
    let cases: [(Vec<u8>, u16, &str); 4] = [
        (client_frame(true, 0x1, b"{}", false), 1002, "client frame not masked"),
        (
            client_frame(true, 0x1, &[b' '; 5000], true),
            1009,
            "message too big (limits.max_body_bytes)",
        ),
        (
            client_frame(true, 0x1, &[0xC3, 0x28], true),
            1007,
            "text message is not UTF-8",
        ),
        (client_frame(true, 0x3, b"", true), 1002, "reserved opcode"),
    ];
    for (frame, code, reason) in cases {
        let mut s = raw_upgrade(&prism);
        s.write_all(&frame).unwrap();
        assert_eq!(close_of(&mut s), (code, reason.to_string()));
    }
    // The session's neighbours were not touched: a new client is served.
    let mut c = Client::try_connect(&prism, "/", &[], None).unwrap();
    assert_eq!(c.call("eth_chainId", json!([]))["result"], "0x1237");
}
