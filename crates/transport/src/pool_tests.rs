//! The pool's reuse rules and its connection cap, against a scripted HTTP/1.1 server on loopback. The
//! server counts the connections it accepts and logs every request with the connection it came on, so
//! reuse is observed from the outside, not inferred from the pool's own state.
#![allow(
    clippy::disallowed_types,
    reason = "the test's own threads (a waker, a scripted server), not a shard"
)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::super::conn::Stream;
use super::*;

/// One request as the server saw it: which accepted connection (0-based), its index on that connection,
/// and its body.
#[derive(Debug, Clone)]
struct Seen {
    conn: usize,
    nth: usize,
    body: String,
}

/// What the server does with one request.
enum Act {
    /// Writes these bytes and waits for the next request on the same connection.
    Reply(Vec<u8>),
    /// Writes these bytes, then closes the connection.
    ReplyThenClose(Vec<u8>),
    /// Closes the connection without answering.
    Close,
    /// Writes these bytes (the start of an answer, or nothing), then never more: reads and discards until
    /// the client closes. A connection reused after this would time out again.
    Hang(Vec<u8>),
}

type Script = dyn Fn(&Seen) -> Act + Send + Sync;

struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start(script: impl Fn(&Seen) -> Act + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let (a, l, s) = (accepted.clone(), log.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let conn = a.fetch_add(1, Ordering::SeqCst);
                let (l, script) = (l.clone(), script.clone());
                std::thread::spawn(move || serve(stream, conn, &l, &*script));
            }
        });
        Server {
            addr,
            accepted,
            log,
            stop,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// `(connection, body)` of every request so far, in arrival order.
    fn seen(&self) -> Vec<(usize, String)> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|s| (s.conn, s.body.clone()))
            .collect()
    }

    fn conn_of(&self, body: &str) -> Vec<usize> {
        self.seen()
            .into_iter()
            .filter(|(_, b)| b == body)
            .map(|(c, _)| c)
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop so it sees `stop`
    }
}

fn serve(mut stream: TcpStream, conn: usize, log: &Mutex<Vec<Seen>>, script: &Script) {
    let mut buf = Vec::new();
    for nth in 0.. {
        let Some(body) = read_request(&mut stream, &mut buf) else {
            return;
        };
        let seen = Seen { conn, nth, body };
        // Logged before the script runs, so a test can see a request arrive while its answer is held.
        log.lock().unwrap().push(seen.clone());
        match script(&seen) {
            Act::Reply(bytes) => {
                if stream.write_all(&bytes).is_err() {
                    return;
                }
            }
            Act::ReplyThenClose(bytes) => {
                let _ = stream.write_all(&bytes);
                return;
            }
            Act::Close => return,
            Act::Hang(bytes) => {
                let _ = stream.write_all(&bytes);
                let mut sink = [0u8; 4096];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                return;
            }
        }
    }
}

/// Reads one request (head and Content-Length body); `None` once the client closed.
fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(head)) = req.parse(buf) {
            let len = req
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse::<usize>().unwrap())
                .unwrap_or(0);
            if buf.len() >= head + len {
                let body = String::from_utf8(buf[head..head + len].to_vec()).unwrap();
                buf.drain(..head + len);
                return Some(body);
            }
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A 200 answer with a Content-Length (keep-alive, HTTP/1.1's default).
fn ok(body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// The answer that echoes the request body: lets a test check each caller got its own answer.
fn echo(seen: &Seen) -> Act {
    Act::Reply(ok(&format!("re:{}", seen.body)))
}

/// A latch the server's threads wait on until the test opens it (at most ten seconds, so a failing test
/// cannot hang the suite).
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    fn wait(&self) {
        let (lock, cvar) = &*self.0;
        let guard = lock.lock().unwrap();
        let _ = cvar
            .wait_timeout_while(guard, Duration::from_secs(10), |open| !*open)
            .unwrap();
    }
}

fn settings() -> PoolSettings {
    PoolSettings {
        max_idle: 8,
        idle_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(2),
        max_response_bytes: 1 << 20,
        max_connections: 8,
    }
}

fn pool(server: &Server, settings: PoolSettings) -> Rc<UpstreamPool> {
    let endpoint = Endpoint::parse(&format!("http://{}/rpc", server.addr)).unwrap();
    Rc::new(UpstreamPool::new(endpoint, Arc::from(vec![server.addr]), None, settings).unwrap())
}

use prism_runtime::test_shard as run;

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// Polls `cond` until it holds; panics with `what` after five seconds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = soon();
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        prism_runtime::sleep(Duration::from_millis(1)).await;
    }
}

async fn post(pool: &UpstreamPool, body: &str) -> Result<UpstreamResponse, TransportError> {
    pool.post(body.as_bytes(), soon(), true).await
}

fn text(resp: &UpstreamResponse) -> &str {
    std::str::from_utf8(&resp.body).unwrap()
}

#[test]
fn keep_alive_answer_read_in_full_is_reused() {
    let server = Server::start(echo);
    let pool = pool(&server, settings());
    run(async {
        for body in ["a", "b", "c"] {
            let resp = post(&pool, body).await.unwrap();
            assert_eq!((resp.status, text(&resp)), (200, &*format!("re:{body}")));
        }
    });
    assert_eq!(server.accepted(), 1, "three calls in a row must share one connection");
    assert_eq!(server.seen(), vec![(0, "a".into()), (0, "b".into()), (0, "c".into())]);
    assert_eq!(pool.idle.borrow().len(), 1);
}

#[test]
fn request_is_a_post_to_the_endpoint_path_with_its_host() {
    let head = Arc::new(Mutex::new(Vec::new()));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let h = head.clone();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.ends_with(b"{}") {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "client closed early");
            buf.extend_from_slice(&chunk[..n]);
        }
        *h.lock().unwrap() = buf;
        s.write_all(&ok("1")).unwrap();
    });
    let endpoint = Endpoint::parse(&format!("http://{addr}/v2/key?x=1")).unwrap();
    let pool = UpstreamPool::new(endpoint, Arc::from(vec![addr]), None, settings()).unwrap();
    let resp = run(pool.post(b"{}", soon(), true)).unwrap();
    assert_eq!(text(&resp), "1");
    let raw = head.lock().unwrap().clone();
    let raw = String::from_utf8(raw).unwrap();
    assert!(raw.starts_with("POST /v2/key?x=1 HTTP/1.1\r\n"), "{raw}");
    assert!(raw.contains(&format!("\r\nHost: {addr}\r\n")), "{raw}");
    assert!(raw.contains("\r\nContent-Length: 2\r\n"), "{raw}");
}

#[test]
fn connection_close_answer_is_not_reused() {
    // The server keeps the socket open: only the header can stop the pool from reusing it.
    let server = Server::start(|s| {
        Act::Reply(
            format!(
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\nre:{}",
                3 + s.body.len(),
                s.body
            )
            .into_bytes(),
        )
    });
    let pool = pool(&server, settings());
    run(async {
        assert_eq!(text(&post(&pool, "a").await.unwrap()), "re:a");
        assert_eq!(text(&post(&pool, "b").await.unwrap()), "re:b");
    });
    assert_eq!(server.accepted(), 2);
    assert_eq!(server.seen(), vec![(0, "a".into()), (1, "b".into())]);
    assert!(pool.idle.borrow().is_empty());
    assert_eq!(pool.slots.open.get(), 0, "a connection not kept must free its slot");
}

#[test]
fn http10_answer_without_keep_alive_is_not_reused() {
    let server =
        Server::start(|s| Act::Reply(format!("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{:2}", s.nth).into_bytes()));
    let pool = pool(&server, settings());
    run(async {
        post(&pool, "a").await.unwrap();
        post(&pool, "b").await.unwrap();
    });
    assert_eq!(server.accepted(), 2);
}

#[test]
fn answer_until_close_is_read_whole_and_not_reused() {
    let server =
        Server::start(|s| Act::ReplyThenClose(format!("HTTP/1.1 200 OK\r\n\r\nuntil-close:{}", s.body).into_bytes()));
    let pool = pool(&server, settings());
    run(async {
        assert_eq!(text(&post(&pool, "a").await.unwrap()), "until-close:a");
        assert_eq!(text(&post(&pool, "b").await.unwrap()), "until-close:b");
    });
    assert_eq!(server.accepted(), 2);
    assert!(pool.idle.borrow().is_empty());
}

#[test]
fn timeout_mid_answer_drops_the_connection() {
    // The slow answer stops halfway and never finishes; everything else is answered at once.
    let server = Server::start(|s| {
        if s.body == "slow" {
            return Act::Hang(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf!".to_vec());
        }
        echo(s)
    });
    let pool = pool(&server, settings());
    run(async {
        let deadline = Instant::now() + Duration::from_millis(200);
        let err = pool.post(b"slow", deadline, true).await.unwrap_err();
        assert_eq!(err, TransportError::Timeout { sent: true });
        assert!(Instant::now() >= deadline, "gave up before its deadline");
        assert!(
            pool.idle.borrow().is_empty(),
            "a timed-out connection went back to the pool"
        );
        assert_eq!(pool.slots.open.get(), 0);
        assert_eq!(text(&post(&pool, "next").await.unwrap()), "re:next");
    });
    assert_eq!(
        server.conn_of("next"),
        vec![1],
        "the next call must use a fresh connection"
    );
}

#[test]
fn partial_answer_then_close_is_a_reset_and_not_reused() {
    let server = Server::start(|s| {
        if s.body == "cut" {
            return Act::ReplyThenClose(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf!".to_vec());
        }
        echo(s)
    });
    let pool = pool(&server, settings());
    run(async {
        let err = post(&pool, "cut").await.unwrap_err();
        assert_eq!(err, TransportError::Reset { sent: true });
        assert!(err.maybe_sent());
        assert!(pool.idle.borrow().is_empty());
        assert_eq!(text(&post(&pool, "next").await.unwrap()), "re:next");
    });
    // "cut" went out once: a fresh connection that dies is not tried again, even for a replay-safe call.
    assert_eq!(server.conn_of("cut"), vec![0]);
    assert_eq!(server.conn_of("next"), vec![1]);
}

#[test]
fn malformed_answer_is_an_error_and_not_reused() {
    // The server keeps the socket open after the garbage, so only the pool's rule decides.
    let server = Server::start(|s| {
        if s.body == "bad" {
            return Act::Reply(b"SMTP ready\r\n\r\n".to_vec());
        }
        echo(s)
    });
    let pool = pool(&server, settings());
    run(async {
        let err = post(&pool, "bad").await.unwrap_err();
        assert!(matches!(err, TransportError::Malformed(_)), "{err:?}");
        assert!(pool.idle.borrow().is_empty());
        assert_eq!(text(&post(&pool, "next").await.unwrap()), "re:next");
    });
    assert_eq!(server.conn_of("next"), vec![1]);
}

#[test]
fn answer_over_max_response_bytes_is_too_large_and_not_reused() {
    let server = Server::start(|s| {
        if s.body == "big" {
            return Act::Reply(ok(&"x".repeat(2000)));
        }
        echo(s)
    });
    let pool = pool(
        &server,
        PoolSettings {
            max_response_bytes: 1000,
            ..settings()
        },
    );
    run(async {
        assert_eq!(
            post(&pool, "big").await.unwrap_err(),
            TransportError::TooLarge { max: 1000 }
        );
        assert!(pool.idle.borrow().is_empty());
        assert_eq!(text(&post(&pool, "next").await.unwrap()), "re:next");
    });
    assert_eq!(server.conn_of("next"), vec![1]);
}

#[test]
fn unasked_bytes_after_an_answer_prevent_reuse() {
    // A second, unasked answer right behind the first: framing disagrees, so the connection cannot be trusted.
    let server = Server::start(|s| {
        let mut bytes = ok(&format!("re:{}", s.body));
        bytes.extend_from_slice(&ok("stray"));
        Act::Reply(bytes)
    });
    let pool = pool(&server, settings());
    run(async {
        assert_eq!(text(&post(&pool, "a").await.unwrap()), "re:a");
        assert_eq!(
            text(&post(&pool, "b").await.unwrap()),
            "re:b",
            "the stray answer was taken for b's"
        );
    });
    assert_eq!(server.accepted(), 2);
}

#[test]
fn error_status_with_a_complete_answer_is_still_reused() {
    // An HTTP error read in full leaves the connection in a known state: the provider's failure, not the
    // connection's.
    let server = Server::start(|s| {
        let body = format!("oops:{}", s.body);
        Act::Reply(
            format!(
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    });
    let pool = pool(&server, settings());
    run(async {
        let a = post(&pool, "a").await.unwrap();
        assert_eq!((a.status, text(&a)), (503, "oops:a"));
        let b = post(&pool, "b").await.unwrap();
        assert_eq!((b.status, text(&b)), (503, "oops:b"));
    });
    assert_eq!(server.accepted(), 1);
}

#[test]
fn newest_idle_connection_is_used_first() {
    let gate = Gate::default();
    let g = gate.clone();
    let server = Server::start(move |s| {
        if s.body == "held" {
            g.wait();
        }
        echo(s)
    });
    let pool = pool(&server, settings());
    run(async {
        // "held" is in flight on one connection while "quick" takes a second one and comes back first;
        // "held" comes back last, so its connection is the newest idle one.
        let p = pool.clone();
        let held = prism_runtime::spawn_joined(async move { post(&p, "held").await });
        until("the server to see \"held\"", || !server.conn_of("held").is_empty()).await;
        assert_eq!(text(&post(&pool, "quick").await.unwrap()), "re:quick");
        gate.open();
        assert_eq!(text(&held.await.unwrap()), "re:held");
        assert_eq!(pool.idle.borrow().len(), 2);
        assert_eq!(text(&post(&pool, "next").await.unwrap()), "re:next");
    });
    let (held, quick) = (server.conn_of("held"), server.conn_of("quick"));
    assert_ne!(held, quick, "the two calls overlapped, so they needed two connections");
    assert_eq!(
        server.conn_of("next"),
        held,
        "the newest idle connection goes out first"
    );
    assert_eq!(server.accepted(), 2);
}

#[test]
fn more_answers_than_max_idle_close_the_extra_connections() {
    let gate = Gate::default();
    let g = gate.clone();
    let server = Server::start(move |s| {
        if s.body == "held" {
            g.wait();
        }
        echo(s)
    });
    let pool = pool(
        &server,
        PoolSettings {
            max_idle: 1,
            ..settings()
        },
    );
    run(async {
        let p = pool.clone();
        let held = prism_runtime::spawn_joined(async move { post(&p, "held").await });
        until("the server to see \"held\"", || !server.conn_of("held").is_empty()).await;
        post(&pool, "quick").await.unwrap();
        gate.open();
        held.await.unwrap();
        assert_eq!(pool.idle.borrow().len(), 1, "max_idle caps the idle list");
        assert_eq!(pool.slots.open.get(), 1, "the connection not kept gave its slot back");
    });
}

/// One call through `pool`, then its idle connection backdated by `age`.
fn idle_aged(age: Duration) -> (Server, usize) {
    let server = Server::start(echo);
    let pool = pool(
        &server,
        PoolSettings {
            idle_timeout: Duration::from_secs(10),
            ..settings()
        },
    );
    run(async {
        post(&pool, "first").await.unwrap();
        {
            let mut idle = pool.idle.borrow_mut();
            assert_eq!(idle.len(), 1);
            idle[0].since = idle[0].since.checked_sub(age).unwrap();
        }
        post(&pool, "second").await.unwrap();
    });
    let conns = server.accepted();
    (server, conns)
}

#[test]
fn idle_past_idle_timeout_is_dropped_at_checkout() {
    let (server, conns) = idle_aged(Duration::from_secs(11));
    assert_eq!(conns, 2, "a connection idle past idle_timeout must not be reused");
    assert_eq!(server.conn_of("second"), vec![1]);
}

#[test]
fn idle_within_idle_timeout_is_reused() {
    let (_server, conns) = idle_aged(Duration::from_secs(9));
    assert_eq!(conns, 1);
}

#[test]
fn sweep_closes_only_connections_past_idle_timeout() {
    let server = Server::start(echo);
    let timeout = Duration::from_secs(10);
    let pool = pool(
        &server,
        PoolSettings {
            idle_timeout: timeout,
            ..settings()
        },
    );
    run(async {
        post(&pool, "a").await.unwrap();
        let since = pool.idle.borrow()[0].since;
        pool.sweep(since + timeout - Duration::from_millis(1));
        assert_eq!(pool.idle.borrow().len(), 1);
        assert_eq!(pool.slots.open.get(), 1);
        pool.sweep(since + timeout);
        assert!(pool.idle.borrow().is_empty());
        assert_eq!(pool.slots.open.get(), 0, "a swept connection frees its slot");
    });
}

/// A server that closes connection 0 after its first answer without saying so; the others echo.
fn closes_after_first_answer() -> (Server, Rc<UpstreamPool>) {
    let server = Server::start(|s| {
        if s.conn == 0 {
            return Act::ReplyThenClose(ok("first"));
        }
        echo(s)
    });
    let pool = pool(&server, settings());
    (server, pool)
}

/// One call on connection 0, then until the pool's idle connection has seen the server's FIN.
async fn idle_one_the_server_closed(pool: &UpstreamPool) {
    post(pool, "a").await.unwrap();
    assert_eq!(pool.idle.borrow().len(), 1);
    until("the client side to see the server's FIN", || {
        !pool.idle.borrow()[0].conn.stream.looks_alive()
    })
    .await;
}

#[test]
fn idle_connection_the_peer_closed_is_replaced_before_sending() {
    // The server closes after its first answer without saying so. The pool must notice at checkout, so
    // even a call that is not replay-safe goes out once, on a fresh connection.
    let (server, pool) = closes_after_first_answer();
    run(async {
        idle_one_the_server_closed(&pool).await;
        let resp = pool.post(b"write", soon(), false).await.unwrap();
        assert_eq!(text(&resp), "re:write");
    });
    assert_eq!(server.seen(), vec![(0, "a".into()), (1, "write".into())]);
}

#[test]
fn a_replay_safe_call_on_a_recently_closed_connection_is_resent_on_a_fresh_one() {
    // No peek for a replay-safe call on a connection idle under PEEK_AFTER: the dead one is found by
    // using it, and the call still goes out once more, fresh, and is answered.
    let (server, pool) = closes_after_first_answer();
    run(async {
        idle_one_the_server_closed(&pool).await;
        let resp = post(&pool, "read").await.unwrap();
        assert_eq!(text(&resp), "re:read");
    });
    assert_eq!(server.accepted(), 2);
    assert_eq!(server.seen().last(), Some(&(1, "read".into())));
}

/// A server whose connection 0 answers its first request and then dies on reading the second, unanswered:
/// the keep-alive race, where the pool handed out a connection that looked alive.
fn dies_on_second_request() -> Server {
    Server::start(|s| {
        if s.conn == 0 && s.nth == 1 {
            return Act::Close;
        }
        echo(s)
    })
}

#[test]
fn reused_connection_dying_before_the_answer_is_resent_fresh_when_replay_safe() {
    let server = dies_on_second_request();
    let pool = pool(&server, settings());
    run(async {
        post(&pool, "a").await.unwrap();
        let resp = pool.post(b"read", soon(), true).await.unwrap();
        assert_eq!(text(&resp), "re:read");
    });
    assert_eq!(
        server.conn_of("read"),
        vec![0, 1],
        "sent again, once, on a fresh connection"
    );
    assert_eq!(server.accepted(), 2);
}

#[test]
fn reused_connection_dying_after_a_write_was_sent_is_not_resent() {
    let server = dies_on_second_request();
    let pool = pool(&server, settings());
    run(async {
        post(&pool, "a").await.unwrap();
        let err = pool.post(b"write", soon(), false).await.unwrap_err();
        assert_eq!(err, TransportError::Reset { sent: true });
        assert!(err.maybe_sent(), "the caller must learn the write may have landed");
        assert!(pool.idle.borrow().is_empty());
    });
    assert_eq!(
        server.conn_of("write"),
        vec![0],
        "a write that reached the server must not be sent twice"
    );
    assert_eq!(server.accepted(), 1, "no fresh connection was opened for it");
}

#[test]
fn fresh_connection_dying_is_not_retried_even_when_replay_safe() {
    let server = Server::start(|_| Act::Close);
    let pool = pool(&server, settings());
    run(async {
        let err = pool.post(b"read", soon(), true).await.unwrap_err();
        assert_eq!(err, TransportError::Reset { sent: true });
    });
    assert_eq!(server.accepted(), 1);
    assert_eq!(server.seen().len(), 1);
}

#[test]
fn connect_refused_is_a_refusal_that_sent_nothing() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }; // closed again: nothing listens there now
    let endpoint = Endpoint::parse(&format!("http://{addr}/")).unwrap();
    let pool = UpstreamPool::new(endpoint, Arc::from(vec![addr]), None, settings()).unwrap();
    let err = run(pool.post(b"{}", soon(), false)).unwrap_err();
    assert_eq!(err, TransportError::Refused);
    assert_eq!(err.reason(), Some(prism_telemetry::cause::Reason::Refused));
    assert!(!err.maybe_sent());
    assert_eq!(pool.slots.open.get(), 0, "a failed dial gives its slot back");
}

#[test]
fn no_address_is_unresolved() {
    let endpoint = Endpoint::parse("http://nowhere.invalid/").unwrap();
    let pool = UpstreamPool::new(endpoint, Arc::from(Vec::new()), None, settings()).unwrap();
    let err = run(pool.post(b"{}", soon(), true)).unwrap_err();
    assert_eq!(err, TransportError::Unresolved);
    assert_eq!(pool.slots.open.get(), 0);
}

#[test]
fn https_endpoint_without_tls_config_is_refused() {
    let endpoint = Endpoint::parse("https://example.com/").unwrap();
    let err = UpstreamPool::new(endpoint, Arc::from(Vec::new()), None, settings()).err();
    assert!(matches!(err, Some(TransportError::Tls(_))), "{err:?}");
}

/// A server that holds the answer to "held" until the gate opens, and echoes the rest.
fn holding(gate: &Gate) -> Server {
    let g = gate.clone();
    Server::start(move |s| {
        if s.body == "held" {
            g.wait();
        }
        echo(s)
    })
}

fn one_connection() -> PoolSettings {
    PoolSettings {
        max_connections: 1,
        ..settings()
    }
}

#[test]
fn at_the_connection_cap_a_caller_fails_with_connection_limit_at_its_deadline() {
    let gate = Gate::default();
    let server = holding(&gate);
    let pool = pool(&server, one_connection());
    run(async {
        let p = pool.clone();
        let held = prism_runtime::spawn_joined(async move { post(&p, "held").await });
        until("the server to see \"held\"", || !server.conn_of("held").is_empty()).await;
        let deadline = Instant::now() + Duration::from_millis(150);
        let err = pool.post(b"late", deadline, false).await.unwrap_err();
        assert_eq!(err, TransportError::ConnectionLimit { max: 1 });
        assert!(Instant::now() >= deadline, "gave up before its deadline");
        assert!(!err.maybe_sent(), "Prism's own limit: nothing was sent");
        gate.open();
        assert_eq!(text(&held.await.unwrap()), "re:held");
    });
    assert_eq!(server.accepted(), 1, "the cap held: no second connection was dialled");
    assert!(server.conn_of("late").is_empty());
}

#[test]
fn callers_waiting_at_the_cap_are_served_first_in_first_out() {
    let gate = Gate::default();
    let server = holding(&gate);
    let pool = pool(&server, one_connection());
    run(async {
        let p = pool.clone();
        let held = prism_runtime::spawn_joined(async move { post(&p, "held").await });
        until("the server to see \"held\"", || !server.conn_of("held").is_empty()).await;
        let mut waiters = Vec::new();
        for (n, body) in ["w1", "w2", "w3"].into_iter().enumerate() {
            let p = pool.clone();
            waiters.push(prism_runtime::spawn_joined(async move { post(&p, body).await }));
            // Each one is waiting before the next arrives.
            until("the waiter to queue", || pool.slots.freed.total_listeners() == n + 1).await;
        }
        gate.open();
        assert_eq!(text(&held.await.unwrap()), "re:held");
        for (w, body) in waiters.into_iter().zip(["w1", "w2", "w3"]) {
            assert_eq!(text(&w.await.unwrap()), format!("re:{body}"));
        }
    });
    let order: Vec<String> = server.seen().into_iter().map(|(_, b)| b).collect();
    assert_eq!(order, ["held", "w1", "w2", "w3"]);
    assert_eq!(
        server.accepted(),
        1,
        "the one connection was handed from caller to caller"
    );
}

#[test]
fn a_closed_connection_frees_its_place_for_a_waiter() {
    // The held answer says `Connection: close`: its slot is freed by the close, not by a checkin.
    let gate = Gate::default();
    let g = gate.clone();
    let server = Server::start(move |s| {
        if s.body == "held" {
            g.wait();
            return Act::ReplyThenClose(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nh".to_vec());
        }
        echo(s)
    });
    let pool = pool(&server, one_connection());
    run(async {
        let p = pool.clone();
        let held = prism_runtime::spawn_joined(async move { post(&p, "held").await });
        until("the server to see \"held\"", || !server.conn_of("held").is_empty()).await;
        let p = pool.clone();
        let waiter = prism_runtime::spawn_joined(async move { post(&p, "waiter").await });
        until("the waiter to queue", || pool.slots.freed.total_listeners() == 1).await;
        gate.open();
        assert_eq!(text(&held.await.unwrap()), "h");
        assert_eq!(text(&waiter.await.unwrap()), "re:waiter");
    });
    assert_eq!(server.conn_of("waiter"), vec![1]);
}

#[test]
fn a_place_reserved_for_a_dial_counts_against_max_connections() {
    // A fresh place is taken before the dial starts: a second caller must wait for it, not dial beside it.
    let server = Server::start(echo);
    let pool = pool(&server, one_connection());
    run(async {
        let Acquired::Fresh(dialling) = pool.acquire(soon(), false, false).await.unwrap() else {
            panic!("an empty pool has nothing to reuse");
        };
        let deadline = Instant::now() + Duration::from_millis(50);
        let err = pool.acquire(deadline, false, false).await.err();
        assert!(matches!(err, Some(TransportError::ConnectionLimit { max: 1 })));
        drop(dialling);
        assert_eq!(pool.slots.open.get(), 0);
        assert!(matches!(
            pool.acquire(soon(), false, false).await,
            Ok(Acquired::Fresh(_))
        ));
    });
}

#[test]
fn fresh_place_at_the_cap_closes_the_oldest_idle_connection() {
    // What the resend after a dead reused connection needs: room for a new connection even when the
    // other places are held by idle ones.
    let gate = Gate::default();
    let server = holding(&gate);
    let pool = pool(
        &server,
        PoolSettings {
            max_connections: 2,
            ..settings()
        },
    );
    let local = |i: usize| {
        let idle = pool.idle.borrow();
        let Stream::Plain(s) = &idle[i].conn.stream else {
            panic!("http dials plain TCP")
        };
        s.local_addr().unwrap()
    };
    run(async {
        let p = pool.clone();
        let held = prism_runtime::spawn_joined(async move { post(&p, "held").await });
        until("the server to see \"held\"", || !server.conn_of("held").is_empty()).await;
        post(&pool, "quick").await.unwrap();
        gate.open();
        held.await.unwrap();
        assert_eq!((pool.idle.borrow().len(), pool.slots.open.get()), (2, 2));
        let newest = local(1);
        let Acquired::Fresh(_slot) = pool.acquire(Instant::now(), true, false).await.unwrap() else {
            panic!("a fresh acquire never hands out an idle connection");
        };
        assert_eq!(pool.idle.borrow().len(), 1, "one idle connection made room");
        assert_eq!(local(0), newest, "the oldest one was closed, the newest kept");
        assert_eq!(pool.slots.open.get(), 2);
    });
}

#[test]
fn an_idle_connection_holds_no_read_buffer() {
    let server = Server::start(echo);
    let pool = pool(&server, settings());
    run(async {
        post(&pool, "a").await.unwrap();
        assert_eq!(
            pool.idle.borrow()[0].conn.buf.capacity(),
            0,
            "the buffer went back to the pool"
        );
        assert_eq!(text(&post(&pool, "b").await.unwrap()), "re:b");
        assert_eq!(pool.idle.borrow()[0].conn.buf.capacity(), 0);
    });
    assert_eq!(server.accepted(), 1);
}

/// Four calls at once (a stall or a burst) leave four idle connections. A window in which no call needed
/// them closes all but one, oldest first; a window in which calls took some keeps what they took.
#[test]
fn idle_connections_no_call_needed_for_a_whole_window_are_closed_but_one() {
    let gate = Gate::default();
    let server = holding(&gate);
    let pool = pool(&server, settings());
    run(async {
        let start = Instant::now();
        pool.sweep(start); // the first window begins
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let p = pool.clone();
                prism_runtime::spawn_joined(async move { post(&p, "held").await })
            })
            .collect();
        until("four connections", || server.conn_of("held").len() == 4).await;
        gate.open();
        for c in calls {
            c.await.unwrap();
        }
        assert_eq!(pool.idle.borrow().len(), 4);
        // The window in which they opened had none idle at its start: nothing is surplus yet.
        pool.sweep(start + SURPLUS_WINDOW);
        assert_eq!(pool.idle.borrow().len(), 4);
        // One call in the next window: one connection was needed, three were not (one of those is kept).
        post(&pool, "a").await.unwrap();
        assert_eq!(pool.idle.borrow().len(), 4);
        let newest: Vec<Instant> = pool.idle.borrow().iter().map(|i| i.since).collect();
        pool.sweep(start + SURPLUS_WINDOW * 2);
        assert_eq!(
            pool.idle.borrow().len(),
            4 - (3 - 1),
            "of three never taken, one is kept"
        );
        let kept: Vec<Instant> = pool.idle.borrow().iter().map(|i| i.since).collect();
        assert_eq!(kept, newest[2..], "the oldest are closed");
        assert_eq!(pool.slots.open.get(), 2, "closing frees their places");
        // A quiet window keeps the spare.
        pool.sweep(start + SURPLUS_WINDOW * 3);
        pool.sweep(start + SURPLUS_WINDOW * 4);
        assert_eq!(pool.idle.borrow().len(), 1);
    });
}
