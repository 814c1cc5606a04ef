//! TLS on both sides of a running Prism, with a private test CA: clients reach Prism over HTTPS (the
//! certificate is the configured one, ALPN http/1.1, answers correct; an untrusted client and plain HTTP
//! get nothing), SIGHUP reloads the certificate, and Prism forwards to an HTTPS upstream it trusts through
//! `SSL_CERT_FILE` (and refuses one it does not trust).

use crate::support::prism::Scratch;
use crate::support::tls::{tls_request, TestCa, TlsFront};
use crate::support::{call, expect_http_result, http, FakeProvider, Prism, BALANCE_PARAMS};
use std::time::{Duration, Instant};

fn tls_toml(cert: &std::path::Path, key: &std::path::Path) -> String {
    format!(
        "[server.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    )
}

fn rpc_request(id: &str) -> Vec<u8> {
    http::post_with(
        "/",
        call(id, "eth_getBalance", BALANCE_PARAMS).as_bytes(),
        &["Connection: close"],
    )
}

#[test]
fn clients_reach_prism_over_tls_with_the_configured_certificate() {
    let scratch = Scratch::new();
    let ca = TestCa::new("Prism Test CA");
    let issued = ca.issue(&["localhost", "127.0.0.1"]);
    let (cert, key) = issued.write(&scratch.0, "server");
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .shards(2)
        .provider(&fake)
        .extra_toml(&tls_toml(&cert, &key))
        .start();

    for (k, name) in ["localhost", "127.0.0.1", "localhost", "127.0.0.1"].iter().enumerate() {
        let id = k.to_string();
        let x = tls_request(prism.addr(), name, ca.client_config(), &rpc_request(&id))
            .unwrap_or_else(|e| panic!("TLS request (SNI {name}): {e}\nlog:\n{}", prism.log()));
        expect_http_result(&x.response, &id);
        assert_eq!(x.peer_cert, issued.cert_der, "Prism presented another certificate");
        assert_eq!(x.alpn.as_deref(), Some(b"http/1.1".as_slice()), "ALPN");
    }
    assert_eq!(fake.count("eth_getBalance"), 4);

    // A client that does not trust the test CA fails the handshake.
    let stranger = TestCa::new("Some Other CA");
    let e = tls_request(prism.addr(), "localhost", stranger.client_config(), &rpc_request("9"));
    assert!(e.is_err(), "a client not trusting the CA completed a request");
    // Plain HTTP on the TLS port gets no JSON-RPC answer.
    let mut c = crate::support::Conn::connect(prism.addr());
    c.send(&rpc_request("10")).unwrap();
    // Closed, or nothing at all, is fine; a JSON-RPC answer is not.
    if let Ok(r) = c.read_response_within(Duration::from_secs(3)) {
        assert!(
            r.status != 200 && !r.text().contains("\"result\""),
            "plain HTTP was served on the TLS port: {}",
            r.describe()
        );
    }
    assert_eq!(
        fake.count("eth_getBalance"),
        4,
        "an untrusted or plain request reached the upstream"
    );
}

#[test]
fn sighup_reloads_the_certificate() {
    let scratch = Scratch::new();
    let ca = TestCa::new("Prism Test CA");
    let first = ca.issue(&["localhost"]);
    let (cert, key) = first.write(&scratch.0, "server");
    let fake = FakeProvider::start();
    let prism = Prism::builder()
        .provider(&fake)
        .extra_toml(&tls_toml(&cert, &key))
        .start();
    let x = tls_request(prism.addr(), "localhost", ca.client_config(), &rpc_request("1")).unwrap();
    expect_http_result(&x.response, "1");
    assert_eq!(x.peer_cert, first.cert_der);

    // A renewed certificate lands on disk; SIGHUP.
    let second = ca.issue(&["localhost"]);
    assert_ne!(second.cert_der, first.cert_der);
    second.write(&scratch.0, "server");
    prism.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut n = 2;
    loop {
        let x = tls_request(
            prism.addr(),
            "localhost",
            ca.client_config(),
            &rpc_request(&n.to_string()),
        )
        .unwrap_or_else(|e| panic!("TLS request after SIGHUP: {e}\nlog:\n{}", prism.log()));
        expect_http_result(&x.response, &n.to_string());
        if x.peer_cert == second.cert_der {
            break;
        }
        assert_eq!(x.peer_cert, first.cert_der, "an unknown certificate was presented");
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not reload the certificate within 5 s"
        );
        n += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    // A broken file on reload keeps the current certificate.
    std::fs::write(&cert, "not a certificate").unwrap();
    prism.signal(libc::SIGHUP);
    let until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < until {
        let x = tls_request(prism.addr(), "localhost", ca.client_config(), &rpc_request("99"))
            .unwrap_or_else(|e| panic!("a bad reload broke TLS: {e}"));
        assert_eq!(x.peer_cert, second.cert_der);
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn prism_forwards_to_an_https_upstream_it_trusts_through_ssl_cert_file() {
    let scratch = Scratch::new();
    let ca = TestCa::new("Upstream Test CA");
    let ca_file = ca.write_cert(&scratch.0, "ca.pem");
    let fake = FakeProvider::start();
    let front = TlsFront::start(fake.addr(), &ca.issue(&["localhost"]));
    let prism = Prism::builder()
        .provider_url(&format!("https://localhost:{}/rpc", front.port()))
        .env("SSL_CERT_FILE", ca_file.to_str().unwrap())
        .start();
    crate::support::wait_serving(&prism, &["p1"]);
    for i in 0..5 {
        let r = prism.rpc(call(&i.to_string(), "echo", &format!("[{i}, \"over https\"]")).as_bytes());
        let result = expect_http_result(&r, &i.to_string());
        assert_eq!(
            crate::support::json::text(crate::support::raw_field(&result, "params")),
            format!("[{i}, \"over https\"]")
        );
    }
    assert_eq!(fake.count("echo"), 5, "the calls went through the HTTPS upstream");
    let req = fake
        .http_requests()
        .into_iter()
        .find(|r| r.request.body.windows(4).any(|w| w == b"echo"))
        .unwrap();
    assert_eq!(req.request.path, "/rpc");
    assert_eq!(
        req.request.header("host"),
        Some(format!("localhost:{}", front.port()).as_str())
    );
}

#[test]
fn prism_refuses_an_https_upstream_it_does_not_trust() {
    let scratch = Scratch::new();
    let trusted = TestCa::new("Trusted CA");
    let ca_file = trusted.write_cert(&scratch.0, "ca.pem");
    let other = TestCa::new("Untrusted CA");
    let fake = FakeProvider::start();
    let front = TlsFront::start(fake.addr(), &other.issue(&["localhost"]));
    let prism = Prism::builder()
        .provider_url(&format!("https://localhost:{}", front.port()))
        .env("SSL_CERT_FILE", ca_file.to_str().unwrap())
        .start();
    let r = prism.rpc(call("1", "eth_getBalance", BALANCE_PARAMS).as_bytes());
    crate::support::expect_http_error(&r, -32603);
    assert_eq!(
        fake.total_calls(),
        0,
        "Prism talked to an upstream whose certificate it cannot verify"
    );
}
