//! The retry loop driven by a scripted exchange and a clock that moves only when told: no sockets, no
//! waiting. Each test names the rule it holds the loop to.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::judge::blame::{Blame, BlameKey};
use crate::live::state::NetworkLive;
use crate::routing::route::{Lifecycle, RoutePolicy, ShardServices, SubmitLimits, Upstream, WsSettings};
use crate::routing::router::ProviderStatic;
use prism_config::testing::network;
use prism_config::Jitter;
use prism_config::{BreakerPolicy, Endpoint, RetryOn, RetryPolicy};
use prism_telemetry::metrics::ShardMetrics;
use prism_telemetry::recorder::Recorder;
use prism_transport::{PoolSettings, UpstreamPool, UpstreamResponse};
use prism_wire::rpc::methods::{lookup, Family, Finality};

/// What the next provider called does.
enum Reply {
    /// Answers `status` with this body; `{id}` is replaced by the id the call was sent under.
    Http(u16, &'static str),
    /// Answers with another call's id.
    WrongId,
    /// Fails in the transport before or after sending.
    Transport(TransportError),
    /// Never answers: the clock runs to the attempt's deadline, then the transport times out.
    Hang,
}

/// One call the loop made: to whom, when (since the start) and with what deadline (since the start).
#[derive(Debug, Clone, Copy)]
struct Sent {
    to: ProviderId,
    at: Duration,
    deadline: Duration,
}

/// A scripted exchange: replies are handed out in call order, whichever provider is called.
struct Script {
    replies: RefCell<VecDeque<Reply>>,
    sent: RefCell<Vec<Sent>>,
    start: Instant,
    start_ms: u64,
    elapsed: Cell<Duration>,
}

impl Script {
    fn new(replies: Vec<Reply>) -> Self {
        Script {
            replies: RefCell::new(replies.into()),
            sent: RefCell::new(Vec::new()),
            start: Instant::now(),
            start_ms: prism_telemetry::clock::now_ms(),
            elapsed: Cell::new(Duration::ZERO),
        }
    }

    fn sent(&self) -> Vec<Sent> {
        self.sent.borrow().clone()
    }

    fn to(&self) -> Vec<usize> {
        self.sent().iter().map(|s| s.to.index()).collect()
    }
}

impl Exchange for Script {
    async fn post(
        &self,
        _route: &NetworkRoute,
        p: ProviderId,
        body: &[u8],
        deadline: Instant,
        _replay_safe: bool,
    ) -> Result<UpstreamResponse, TransportError> {
        self.sent.borrow_mut().push(Sent {
            to: p,
            at: self.elapsed.get(),
            deadline: deadline - self.start,
        });
        let id = prism_wire::jsonscan::object_field(body, "id")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
            .expect("the loop sends a numeric id");
        let answer = |status: u16, body: String| Ok(UpstreamResponse::answered(status, body.into_bytes()));
        match self
            .replies
            .borrow_mut()
            .pop_front()
            .expect("a reply is scripted for every call")
        {
            Reply::Http(status, text) => answer(status, text.replace("{id}", &id.to_string())),
            Reply::WrongId => answer(200, format!(r#"{{"jsonrpc":"2.0","id":{},"result":"0x1"}}"#, id + 1)),
            Reply::Transport(e) => Err(e),
            Reply::Hang => {
                self.elapsed.set(deadline - self.start);
                Err(TransportError::Timeout { sent: true })
            }
        }
    }

    fn now(&self) -> Instant {
        self.start + self.elapsed.get()
    }

    fn now_ms(&self) -> u64 {
        self.start_ms + self.elapsed.get().as_millis() as u64
    }

    async fn sleep(&self, d: Duration) {
        self.elapsed.set(self.elapsed.get() + d);
    }
}

/// A route over `n` providers that are never dialled (the script answers for them). Breakers open at the
/// first counted failure, so "counted" is visible as an open breaker.
fn route(n: usize, retry: RetryPolicy) -> NetworkRoute {
    let net = network(n);
    let breaker = BreakerPolicy {
        failure_threshold: 1,
        ..Default::default()
    };
    let settings = PoolSettings {
        max_idle: 1,
        idle_timeout: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(1),
        max_response_bytes: 1 << 20,
        max_connections: 1,
    };
    let (to_aggregator, _) = crossbeam::channel::unbounded();
    NetworkRoute {
        index: 0,
        name: net.name.clone(),
        upstreams: net
            .providers
            .iter()
            .map(|p| {
                let endpoint = Endpoint::parse(&p.url).unwrap();
                let pool = UpstreamPool::new(endpoint, Arc::from(Vec::new()), None, settings).unwrap();
                Rc::new(Upstream::new(p.name.clone(), pool, None))
            })
            .collect(),
        statics: (0..n)
            .map(|_| ProviderStatic {
                weight: 1.0,
                overflow: false,
                region_distance: 0.0,
                quota_rps: None,
                credits: None,
            })
            .collect(),
        live: NetworkLive::new(&net, &breaker, 1),
        policy: RoutePolicy {
            retry,
            hedge: crate::routing::hedge::Hedging::off(),
            operators: (0..n as u16).collect(),
            declared: Default::default(),
            submit: SubmitLimits::default(),
            logs: Default::default(),
            cache_depth: 64,
            chain: &crate::chain::EVM,
        },
        ws: WsSettings {
            tls: None,
            connect_timeout_ms: 1000,
            ping: None,
        },
        shard: ShardServices {
            recorder: Rc::new(Recorder::new(&[n], to_aggregator, Arc::new(ShardMetrics::new(&[n], 1)))),
            cache: None,
            inflight: None,
            subs: Default::default(),
            newest: Default::default(),
            blame: Default::default(),
            hedge_budget: Default::default(),
            sync: Default::default(),
            bodies: Default::default(),
        },
        turns: Default::default(),
        life: Lifecycle::new(prism_runtime::Shutdown::new()),
    }
}

fn no_jitter(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay_ms: 100,
        max_delay_ms: 1_000,
        jitter: Jitter::None,
        ..Default::default()
    }
}

/// Runs one call through the loop with a deadline `within` from the script's start.
fn run(route: &NetworkRoute, script: &Script, method: &str, params: &str, within: Duration) -> CallOutcome {
    let call = Call {
        id: Some(b"1"),
        method: method.into(),
        params: Some(params.as_bytes()),
    };
    let ids = Cell::new(1);
    let deadline = script.now() + within;
    let caller = Caller::default();
    let cx = CallCtx::new(route, &call, lookup(method), &caller, deadline, &ids);
    futures_lite::future::block_on(forward_with(script, route, &cx))
}

fn is_open(route: &NetworkRoute, p: usize) -> bool {
    !route.live.providers()[p].breaker.is_closed()
}

const RESULT: &str = r#"{"jsonrpc":"2.0","id":{id},"result":"0x2a"}"#;
const PAGE_503: &str = "<html>503 Service Unavailable</html>";
const UNKNOWN: &str = r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32000,"message":"zorglub happened"}}"#;
const RAW_TX: &str = r#"["0x02f86c0180843b9aca00850c92a69c0082520894000000000000000000000000000000000000dead0180c0"]"#;
const SECOND: Duration = Duration::from_secs(1);

#[test]
fn a_read_moves_on_after_a_5xx_and_the_failing_provider_is_counted() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![Reply::Http(503, PAGE_503), Reply::Http(200, RESULT)]);
    let out = run(&route, &script, "eth_getBalance", r#"["0x1","latest"]"#, 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    assert_eq!(script.to(), [0, 1]);
    assert!(is_open(&route, 0) && !is_open(&route, 1));
}

#[test]
fn an_answer_to_another_call_is_never_handed_over() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![Reply::WrongId, Reply::Http(200, RESULT)]);
    let out = run(&route, &script, "eth_chainId", "[]", 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    assert_eq!(script.to(), [0, 1]);
    assert!(is_open(&route, 0), "a broken answer is the provider's failure");
}

#[test]
fn a_write_ends_where_it_was_answered_even_with_a_429() {
    let route = route(2, no_jitter(3));
    let throttled = r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32005,"message":"rate limit exceeded"}}"#;
    let script = Script::new(vec![Reply::Http(429, throttled)]);
    let out = run(&route, &script, "eth_sendRawTransaction", RAW_TX, 10 * SECOND);
    assert_eq!(script.to(), [0], "a provider that answered has seen the write");
    match out {
        CallOutcome::Answer {
            body, value, is_error, ..
        } => {
            assert!(is_error);
            assert!(std::str::from_utf8(&body[value]).unwrap().contains("rate limit"));
        }
        other => panic!("the node's own answer goes back: {other:?}"),
    }
    assert!(
        route.live.providers()[0].is_parked(script.now_ms()),
        "throttled: parked"
    );
    assert!(!is_open(&route, 0), "a throttle is not a failure");
}

#[test]
fn a_write_moves_on_only_when_not_one_byte_was_sent() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![
        Reply::Transport(TransportError::Connect("connection refused".into())),
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":"0xabc"}"#),
    ]);
    let out = run(&route, &script, "eth_sendRawTransaction", RAW_TX, 10 * SECOND);
    assert_eq!(script.to(), [0, 1]);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0xabc\""[..]));
}

#[test]
fn a_write_whose_answer_is_lost_is_never_sent_again() {
    let route = route(3, no_jitter(3));
    let script = Script::new(vec![Reply::Transport(TransportError::Reset { sent: true })]);
    let out = run(&route, &script, "eth_sendRawTransaction", RAW_TX, 10 * SECOND);
    assert_eq!(script.to(), [0]);
    match out {
        CallOutcome::Failed(ProxyError::WriteOutcomeUnknown {
            provider,
            tx: TxRef::Hash(hash),
        }) => {
            assert_eq!(provider, ProviderId::new(0));
            assert_eq!(Some(hash), raw_tx_hash(Some(RAW_TX.as_bytes())));
        }
        other => panic!("a lost write answer says so, with its hash: {other:?}"),
    }
}

#[test]
fn a_method_nobody_knows_is_sent_once_like_a_write() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![Reply::Hang]);
    let out = run(&route, &script, "acme_doSomething", "[]", 2 * SECOND);
    assert_eq!(script.to(), [0]);
    assert!(matches!(
        out,
        CallOutcome::Failed(ProxyError::WriteOutcomeUnknown { tx: TxRef::Method, .. })
    ));
    // Sent once means it had the whole deadline, not a share of it.
    assert_eq!(script.sent()[0].deadline, 2 * SECOND);
}

#[test]
fn an_unknown_error_blames_the_first_provider_only_when_another_answers_a_result() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![Reply::Http(200, UNKNOWN), Reply::Http(200, RESULT)]);
    let out = run(&route, &script, "eth_call", r#"[{"to":"0x1"},"latest"]"#, 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    assert_eq!(script.to(), [0, 1]);
    assert!(
        is_open(&route, 0),
        "contradicted by a result: the first provider's failure"
    );
    let key = BlameKey::of("eth_call", br#"{"code":-32000,"message":"zorglub happened"}"#);
    assert_eq!(
        route.shard.blame.recall(key, script.now_ms()),
        Some(Blame::Provider(ProviderId::new(0)))
    );
}

#[test]
fn an_unknown_error_both_providers_give_is_the_callers_and_nobody_is_counted() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![Reply::Http(200, UNKNOWN), Reply::Http(200, UNKNOWN)]);
    let out = run(&route, &script, "eth_call", r#"[{"to":"0x1"},"latest"]"#, 10 * SECOND);
    assert_eq!(script.to(), [0, 1]);
    match &out {
        CallOutcome::Answer {
            body, is_error: true, ..
        } => {
            assert!(std::str::from_utf8(body).unwrap().contains("zorglub"))
        }
        other => panic!("the first node's bytes go back: {other:?}"),
    }
    assert!(!is_open(&route, 0) && !is_open(&route, 1));
    // Remembered: the same call's error is not asked about again for a while.
    let key = BlameKey::of("eth_call", br#"{"code":-32000,"message":"zorglub happened"}"#);
    assert_eq!(route.shard.blame.recall(key, script.now_ms()), Some(Blame::Client));
    let again = Script::new(vec![Reply::Http(200, UNKNOWN)]);
    run(&route, &again, "eth_call", r#"[{"to":"0x1"},"latest"]"#, 10 * SECOND);
    assert_eq!(again.to().len(), 1, "a remembered verdict costs no second opinion");
}

#[test]
fn retries_back_off_exponentially_on_the_clock() {
    let route = route(3, no_jitter(3));
    let script = Script::new(vec![
        Reply::Http(503, PAGE_503),
        Reply::Http(503, PAGE_503),
        Reply::Http(200, RESULT),
    ]);
    let out = run(&route, &script, "eth_getBalance", r#"["0x1","latest"]"#, 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    let at: Vec<_> = script.sent().iter().map(|s| s.at).collect();
    assert_eq!(
        at,
        [Duration::ZERO, Duration::from_millis(100), Duration::from_millis(300)]
    );
    let mut to = script.to();
    to.sort();
    assert_eq!(to, [0, 1, 2], "each attempt goes to a provider not tried yet");
}

#[test]
fn a_backoff_that_would_pass_the_deadline_ends_the_call_instead() {
    let route = route(3, no_jitter(3));
    let script = Script::new(vec![Reply::Http(503, PAGE_503), Reply::Http(503, PAGE_503)]);
    let out = run(
        &route,
        &script,
        "eth_getBalance",
        r#"["0x1","latest"]"#,
        Duration::from_millis(250),
    );
    // 100 ms of backoff fits in 250 ms; the next 200 ms does not.
    assert_eq!(script.to().len(), 2);
    assert!(script.now() - script.start <= Duration::from_millis(250));
    assert!(matches!(
        out,
        CallOutcome::Failed(ProxyError::Status { status: 503, .. })
    ));
}

#[test]
fn each_attempt_gets_a_share_of_what_is_left() {
    let route = route(3, no_jitter(3));
    let script = Script::new(vec![Reply::Hang, Reply::Hang, Reply::Http(200, RESULT)]);
    let out = run(&route, &script, "eth_getBalance", r#"["0x1","latest"]"#, 3 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    let sent = script.sent();
    assert_eq!(
        sent[0].deadline, SECOND,
        "a third of 3 s for the first of three attempts"
    );
    // The second starts after the first timed out and one backoff: half of what is left.
    let left = 3 * SECOND - sent[1].at;
    assert_eq!(sent[1].deadline, sent[1].at + left / 2);
    assert_eq!(sent[2].deadline, 3 * SECOND, "the last attempt has all that is left");
}

#[test]
fn never_retry_methods_get_one_attempt() {
    let retry = RetryPolicy {
        never_retry: vec!["eth_getBalance".into()],
        ..no_jitter(3)
    };
    let route = route(2, retry);
    let script = Script::new(vec![Reply::Http(503, PAGE_503)]);
    let out = run(&route, &script, "eth_getBalance", r#"["0x1","latest"]"#, 10 * SECOND);
    assert_eq!(script.to(), [0]);
    assert!(matches!(
        out,
        CallOutcome::Failed(ProxyError::Status { status: 503, .. })
    ));
}

#[test]
fn retry_on_decides_which_failures_are_tried_again() {
    let retry = RetryPolicy {
        retry_on: vec![RetryOn::Timeout],
        ..no_jitter(3)
    };
    let route = route(2, retry);
    let script = Script::new(vec![Reply::Http(503, PAGE_503)]);
    run(&route, &script, "eth_getBalance", r#"["0x1","latest"]"#, 10 * SECOND);
    assert_eq!(script.to(), [0], "a 5xx is not in retry_on");
    let timeout = Script::new(vec![Reply::Hang, Reply::Http(200, RESULT)]);
    let route = self::route(
        2,
        RetryPolicy {
            retry_on: vec![RetryOn::Timeout],
            ..no_jitter(3)
        },
    );
    let out = run(&route, &timeout, "eth_getBalance", r#"["0x1","latest"]"#, 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    assert_eq!(timeout.to(), [0, 1]);
}

#[test]
fn prisms_own_connection_cap_moves_the_call_without_blaming_anyone() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![
        Reply::Transport(TransportError::ConnectionLimit { max: 1 }),
        Reply::Http(200, RESULT),
    ]);
    let out = run(&route, &script, "eth_getBalance", r#"["0x1","latest"]"#, 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    assert!(!is_open(&route, 0), "the cap is Prism's, not the provider's");
}

#[test]
fn a_head_below_the_clients_mark_is_never_answered() {
    let route = route(2, no_jitter(3));
    let caller = Caller::default();
    route.live.marks.raise(caller.mark, 0x100);
    let script = Script::new(vec![
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":"0x50"}"#),
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":"0x60"}"#),
    ]);
    let out = run(&route, &script, "eth_blockNumber", "[]", 10 * SECOND);
    assert_eq!(
        script.to(),
        [0, 1],
        "a lagging answer sends the call to another provider"
    );
    // Both behind: the mark itself is a height the chain has reached.
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x100\""[..]));
    assert_eq!(
        route.live.providers()[0]
            .heads
            .head
            .load(std::sync::atomic::Ordering::Relaxed),
        0x50
    );
}

#[test]
fn a_latest_read_is_held_to_the_head_the_pool_showed_lately_even_with_no_mark() {
    // A key that has seen nothing on this node (its mark reaches this node through Redis, later): provider 0
    // showed 0x100 a moment ago and has fallen back since, as has the pool's best head.
    let route = route(2, no_jitter(3));
    let caller = Caller::default();
    let now = prism_telemetry::clock::now_ms();
    assert!(route.live.observe_head_at(ProviderId::new(0), 0x100, now).accepted());
    route.live.lower_head(ProviderId::new(0), 0x80);
    assert_eq!(
        route.live.heads.best_head.load(std::sync::atomic::Ordering::Relaxed),
        0x80
    );
    let script = Script::new(vec![
        Reply::Http(
            200,
            r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0x80","hash":"0x01"}}"#,
        ),
        Reply::Http(
            200,
            r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0x81","hash":"0x02"}}"#,
        ),
    ]);
    let out = run(
        &route,
        &script,
        "eth_getBlockByNumber",
        r#"["latest",false]"#,
        10 * SECOND,
    );
    assert_eq!(
        script.to(),
        [0, 1],
        "each answer below 0x100 less the tolerance sends the call on"
    );
    assert!(
        matches!(out, CallOutcome::Failed(ProxyError::NotServed(_))),
        "never a block below what the pool showed: {out:?}"
    );
    // eth_blockNumber answers the head shown (a height the chain reached), and the key's mark rises to it.
    let script = Script::new(vec![
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":"0x80"}"#),
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":"0x81"}"#),
    ]);
    let out = run(&route, &script, "eth_blockNumber", "[]", 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x100\""[..]));
    assert_eq!(route.live.marks.get(caller.mark), 0x100);
}

#[test]
fn a_light_read_flooding_the_response_limit_is_the_providers_failure() {
    let route = route(2, no_jitter(3));
    let script = Script::new(vec![
        Reply::Transport(TransportError::TooLarge { max: 1 << 20 }),
        Reply::Http(200, RESULT),
    ]);
    let out = run(&route, &script, "eth_blockNumber", "[]", 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    assert!(is_open(&route, 0));
}

const MISSING_TRIE: &str = r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32000,"message":"missing trie node 0f3a (path ) state 0x0f3a is not available"}}"#;

#[test]
fn no_data_deep_in_history_teaches_a_floor_and_the_next_read_goes_elsewhere_first() {
    let route = route(2, no_jitter(3));
    for i in 0..2 {
        route.live.observe_head(ProviderId::new(i), 10_000);
    }
    let script = Script::new(vec![Reply::Http(200, MISSING_TRIE), Reply::Http(200, RESULT)]);
    // 0x1f40 = 8 000: far below both heads.
    let out = run(&route, &script, "eth_getBalance", r#"["0x1","0x1f40"]"#, 10 * SECOND);
    assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    assert_eq!(script.to(), [0, 1]);
    assert_eq!(route.live.providers()[0].floor.get(), 8_001);
    assert!(!is_open(&route, 0), "lacking history is no failure");
    // Below the learned floor: provider 1 first, whatever the rotation says.
    for _ in 0..4 {
        let script = Script::new(vec![Reply::Http(200, RESULT)]);
        run(&route, &script, "eth_getBalance", r#"["0x1","0x1000"]"#, 10 * SECOND);
        assert_eq!(script.to(), [1]);
    }
    // "header not found" one block below the head is a node not there yet: no floor.
    let script = Script::new(vec![Reply::Http(200, MISSING_TRIE), Reply::Http(200, RESULT)]);
    run(&route, &script, "eth_getBalance", r#"["0x1","0x270f"]"#, 10 * SECOND);
    assert!(route.live.providers().iter().all(|p| p.floor.get() <= 8_001));
}

#[test]
fn a_finalized_block_below_the_callers_tag_mark_is_never_answered() {
    let route = route(2, no_jitter(3));
    for i in 0..2 {
        route.live.observe_head(ProviderId::new(i), 0x200);
    }
    let caller = Caller::default();
    let finalized = route.live.tag_mark(caller.mark, Finality::Finalized);
    route.live.marks.raise(finalized, 0x100);
    route.live.marks.raise(caller.mark, 0x1f0);
    let script = Script::new(vec![
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0xf0"}}"#),
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0x101"}}"#),
    ]);
    let out = run(
        &route,
        &script,
        "eth_getBlockByNumber",
        r#"["finalized",false]"#,
        10 * SECOND,
    );
    assert_eq!(script.to(), [0, 1], "the lagging provider's answer is not the client's");
    assert_eq!(CallOutcome::result_value(&out), Some(&br#"{"number":"0x101"}"#[..]));
    assert_eq!(route.live.marks.get(finalized), 0x101, "the tag's mark rose");
    assert_eq!(route.live.marks.get(caller.mark), 0x1f0, "the latest mark is its own");
    assert_eq!(
        route.live.providers()[0].tags.get(Finality::Finalized),
        0,
        "lowered to what it showed"
    );
    assert_eq!(route.live.providers()[1].tags.get(Finality::Finalized), 0x101);
    // Both behind the mark: an error the client can retry, never an older block.
    let script = Script::new(vec![
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0xf0"}}"#),
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0xf1"}}"#),
    ]);
    let out = run(
        &route,
        &script,
        "eth_getBlockByNumber",
        r#"["finalized",false]"#,
        10 * SECOND,
    );
    assert!(CallOutcome::result_value(&out).is_none());
    // A number above any head the pool believes is never answered, nor raises the mark.
    let script = Script::new(vec![
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0xffffff"}}"#),
        Reply::Http(200, r#"{"jsonrpc":"2.0","id":{id},"result":{"number":"0x102"}}"#),
    ]);
    let out = run(
        &route,
        &script,
        "eth_getBlockByNumber",
        r#"["finalized",false]"#,
        10 * SECOND,
    );
    assert_eq!(CallOutcome::result_value(&out), Some(&br#"{"number":"0x102"}"#[..]));
    assert_eq!(route.live.marks.get(finalized), 0x102);
}

#[test]
fn a_read_leaves_a_provider_whose_call_in_flight_is_far_older_than_usual() {
    let route = route(2, no_jitter(3));
    let script = Script::new((0..4).map(|_| Reply::Http(200, RESULT)).collect());
    let read = |n: u32| {
        let out = run(
            &route,
            &script,
            "eth_call",
            &format!(r#"[{{"to":"0x{n}"}},"latest"]"#),
            SECOND,
        );
        assert_eq!(CallOutcome::result_value(&out), Some(&b"\"0x2a\""[..]));
    };
    // Idle providers share reads in rotation: p1, then p2 ...
    read(1);
    // ... and a call of another family waiting at p2 says nothing about this one.
    let logs = route.upstreams[1].in_flight(Family::Logs, script.now_ms());
    script.elapsed.set(script.elapsed.get() + Duration::from_millis(80));
    read(2);
    read(3);
    assert_eq!(script.to(), [0, 1, 0]);
    drop(logs);
    // A call of the family has waited at p2 for 80 ms and nothing came back yet: the next read goes
    // elsewhere, though no answer has taught routing anything.
    let _stuck = route.upstreams[1].in_flight(Family::Execute, script.now_ms());
    script.elapsed.set(script.elapsed.get() + Duration::from_millis(80));
    read(4);
    assert_eq!(script.to(), [0, 1, 0, 0], "the rotation would have picked p2");
}
