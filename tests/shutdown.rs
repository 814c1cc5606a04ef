//! Graceful shutdown: SIGTERM/SIGINT stop accepting, finish in-flight requests, exit 0 within the drain
//! deadline.

use crate::support::http;
use crate::support::{call, expect_http_result, FakeProvider, Mode, Prism};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

const DRAIN_MS: u64 = 3000;

#[test]
fn sigterm_lets_an_in_flight_request_finish_then_exits_0() {
    let fake = FakeProvider::start();
    let mut prism = Prism::builder()
        .provider(&fake)
        .limit("request_deadline_ms", 5000)
        .limit("drain_timeout_ms", DRAIN_MS)
        .start();
    let addr = prism.addr();
    let client = thread::spawn(move || {
        let mut c = crate::support::Conn::connect(addr);
        c.request(&http::post("/", call("\"slow\"", "echo", "[1]").as_bytes()))
    });
    assert!(
        fake.wait_for_calls("echo", 1, Duration::from_secs(3)),
        "the request never reached the upstream"
    );
    let t = Instant::now();
    prism.signal(libc::SIGTERM);

    // Stops accepting while the slow request is still in flight.
    let refused = crate::support::wait_until(Duration::from_millis(1000), || TcpStream::connect(addr).is_err());
    assert!(refused, "still accepting connections 1 s after SIGTERM");

    let r = client.join().expect("client thread");
    expect_http_result(&r, "\"slow\"");
    let st = prism
        .wait_exit(Duration::from_millis(DRAIN_MS + 2000))
        .unwrap_or_else(|| panic!("not exited {:?} after SIGTERM", t.elapsed()));
    assert_eq!(st.code(), Some(0), "exit status {st}");
}

#[test]
fn sigint_on_an_idle_prism_exits_0_quickly() {
    let fake = FakeProvider::start();
    let mut prism = Prism::start(&[&fake]);
    expect_http_result(&prism.rpc(call("1", "eth_chainId", "[]").as_bytes()), "1");
    prism.signal(libc::SIGINT);
    let st = prism
        .wait_exit(Duration::from_secs(2))
        .expect("not exited 2 s after SIGINT");
    assert_eq!(st.code(), Some(0), "exit status {st}");
}

#[test]
fn idle_keep_alive_clients_do_not_hold_up_shutdown() {
    let fake = FakeProvider::start();
    let mut prism = Prism::builder()
        .provider(&fake)
        .shards(2)
        .limit("idle_timeout_ms", 60_000)
        .limit("client_timeout_ms", 60_000)
        .limit("drain_timeout_ms", 10_000)
        .start();
    fake.set_mode(Mode::Slow(Duration::from_millis(1500)));
    let mut conns: Vec<crate::support::Conn> = (0..4).map(|_| prism.conn()).collect();
    for c in conns.iter_mut() {
        expect_http_result(
            &c.request(&http::post("/", call("1", "eth_chainId", "[]").as_bytes())),
            "1",
        );
    }
    let t = Instant::now();
    prism.signal(libc::SIGTERM);
    let st = prism.wait_exit(Duration::from_secs(3)).unwrap_or_else(|| {
        panic!(
            "idle keep-alive connections kept Prism alive {:?} after SIGTERM",
            t.elapsed()
        )
    });
    assert_eq!(st.code(), Some(0), "exit status {st}");
    drop(conns);
}

#[test]
fn drain_deadline_bounds_shutdown_with_a_hung_upstream() {
    let fake = FakeProvider::start();
    let mut prism = Prism::builder()
        .provider(&fake)
        .limit("request_deadline_ms", 30_000)
        .limit("drain_timeout_ms", 1000)
        .start();
    fake.set_mode(Mode::Hang);
    let addr = prism.addr();
    let client = thread::spawn(move || {
        let mut c = crate::support::Conn::connect(addr);
        let _ = c.send(&http::post(
            "/",
            call("1", "eth_getBalance", r#"["0x00","latest"]"#).as_bytes(),
        ));
        c.read_response_within(Duration::from_secs(10))
    });
    assert!(fake.wait_for_calls("eth_getBalance", 1, Duration::from_secs(3)));
    let t = Instant::now();
    prism.signal(libc::SIGTERM);
    let st = prism.wait_exit(Duration::from_millis(1000 + 2000));
    assert!(
        st.is_some(),
        "a hung request kept Prism alive past the 1 s drain deadline ({:?})",
        t.elapsed()
    );
    // The client is not left hanging: it gets an answer or a close.
    let res = client.join().unwrap();
    if let Ok(r) = res {
        assert_ne!(r.status, 0);
    }
}

/// `kill -HUP` / `systemctl reload` on a node without TLS: logged and ignored, never the default action
/// (which ends the process). It keeps serving, and SIGTERM still drains it as usual afterwards.
#[test]
fn sighup_without_tls_is_logged_and_ignored() {
    let fake = FakeProvider::start();
    let mut prism = Prism::start(&[&fake]);
    expect_http_result(&prism.rpc(call("1", "eth_chainId", "[]").as_bytes()), "1");
    for _ in 0..3 {
        prism.signal(libc::SIGHUP);
    }
    let logged = crate::support::wait_until(Duration::from_secs(3), || prism.log().contains("SIGHUP received"));
    assert!(logged, "no log line for SIGHUP; log:\n{}", prism.log());
    assert!(prism.running(), "SIGHUP ended the process; log:\n{}", prism.log());
    expect_http_result(&prism.rpc(call("2", "eth_chainId", "[]").as_bytes()), "2");
    prism.signal(libc::SIGTERM);
    let st = prism
        .wait_exit(Duration::from_secs(3))
        .expect("not exited 3 s after SIGTERM");
    assert_eq!(st.code(), Some(0), "exit status {st}");
}
