//! `prism demo`: Prism in front of built-in loopback providers that misbehave on purpose, with a little
//! traffic and a live table, so a new user sees it work without any account or network.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::edge::envelope::{Envelope, EnvelopeLimits, EnvelopeParser};
use prism_config::Config;

/// How a demo provider behaves.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    Fast,
    Slow(Duration),
    /// Fails (HTTP 503) for `bad` seconds out of every `period`.
    Flapping {
        period: u64,
        bad: u64,
    },
    /// Reports a head this many blocks behind.
    Lagging(u64),
}

/// A tiny JSON-RPC node on loopback: a head that advances every second, chain id 4663.
pub struct DemoProvider {
    pub name: &'static str,
    pub addr: SocketAddr,
    pub behaviour: Behaviour,
    pub served: Arc<AtomicU64>,
}

impl DemoProvider {
    pub fn start(name: &'static str, behaviour: Behaviour, epoch: Instant) -> std::io::Result<DemoProvider> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let served = Arc::new(AtomicU64::new(0));
        let counter = served.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counter = counter.clone();
                std::thread::spawn(move || serve_conn(stream, behaviour, epoch, &counter));
            }
        });
        Ok(DemoProvider {
            name,
            addr,
            behaviour,
            served,
        })
    }
}

fn serve_conn(stream: TcpStream, behaviour: Behaviour, epoch: Instant, served: &AtomicU64) {
    let mut parser = EnvelopeParser::new(EnvelopeLimits {
        max_batch: 1000,
        max_depth: 64,
    });
    let mut reader = BufReader::new(stream.try_clone().expect("clone socket"));
    let mut writer = stream;
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let elapsed = epoch.elapsed().as_secs();
        let head = 1_000_000 + elapsed * 4;
        let (status, reply) = match behaviour {
            Behaviour::Flapping { period, bad } if elapsed % period < bad => {
                (503, b"{\"error\":\"maintenance\"}".to_vec())
            }
            _ => {
                if let Behaviour::Slow(d) = behaviour {
                    // Not a shard: the demo's fake provider thread, slow on purpose.
                    #[allow(clippy::disallowed_methods, reason = "not a shard thread")]
                    std::thread::sleep(d);
                }
                let head = match behaviour {
                    Behaviour::Lagging(n) => head - n,
                    _ => head,
                };
                (200, answer(&mut parser, &body, head))
            }
        };
        served.fetch_add(1, Ordering::Relaxed);
        // One write: a head and body in two segments would meet Nagle and delayed ACKs (40 ms).
        let mut resp = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            reply.len()
        )
        .into_bytes();
        resp.extend_from_slice(&reply);
        if writer.write_all(&resp).is_err() {
            return;
        }
    }
}

fn answer(parser: &mut EnvelopeParser, body: &[u8], head: u64) -> Vec<u8> {
    let Ok(Envelope::Single(Ok(call))) = parser.parse(body) else {
        return br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"demo provider takes single calls"}}"#
            .to_vec();
    };
    let id = String::from_utf8_lossy(call.id.unwrap_or(b"null")).into_owned();
    let result = match &*call.method {
        "eth_chainId" => "\"0x1237\"".to_string(),
        "net_version" => "\"4663\"".to_string(),
        "eth_blockNumber" => format!("\"0x{head:x}\""),
        "eth_gasPrice" => "\"0x3b9aca00\"".to_string(),
        _ => "null".to_string(),
    };
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#).into_bytes()
}

/// The demo's providers and the config that puts Prism in front of them.
pub fn start_providers() -> std::io::Result<Vec<DemoProvider>> {
    let epoch = Instant::now();
    let plan = vec![
        ("fast", Behaviour::Fast),
        ("slow", Behaviour::Slow(Duration::from_millis(120))),
        ("flapping", Behaviour::Flapping { period: 20, bad: 8 }),
        ("lagging", Behaviour::Lagging(25)),
    ];
    plan.into_iter()
        .map(|(name, b)| DemoProvider::start(name, b, epoch))
        .collect()
}

/// The embedded default config for the demo, pointing at the given providers. Breaker timings are shortened
/// so a minute shows open, half-open and closed.
pub fn demo_config(listen: &str, admin: &str, providers: &[DemoProvider]) -> Config {
    let mut text = format!(
        "[server]\nlisten = \"{listen}\"\nadmin_listen = \"{admin}\"\nshards = 1\npin_cores = false\n\n\
         [limits]\nrequest_deadline_ms = 2000\n\n[policy.breaker]\ncooldown_ms = 5000\nmax_cooldown_ms = 20000\n\n\
         [[networks]]\nname = \"demo\"\nkind = \"evm\"\nchain_id = 4663\nprobe_interval_ms = 1000\n"
    );
    for p in providers {
        text.push_str(&format!(
            "  [[networks.providers]]\n  name = \"{}\"\n  url = \"http://{}\"\n",
            p.name, p.addr
        ));
    }
    Config::from_toml_with(&text, |_| None).expect("the embedded demo config is valid")
}

/// Sends one `eth_blockNumber` through Prism; returns whether a result came back.
pub fn probe_once(prism: SocketAddr) -> bool {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#;
    let Ok(mut s) = TcpStream::connect_timeout(&prism, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let mut req = format!(
        "POST / HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    if s.write_all(&req).is_err() {
        return false;
    }
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp.contains("\"result\"")
}

impl std::fmt::Display for Behaviour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Behaviour::Fast => f.write_str("answers at once"),
            Behaviour::Slow(d) => write!(f, "answers after {} ms", d.as_millis()),
            Behaviour::Flapping { period, bad } => write!(f, "fails with 503 for {bad} s of every {period} s"),
            Behaviour::Lagging(n) => write!(f, "reports a head {n} blocks behind"),
        }
    }
}

/// Drives a little traffic through Prism and prints the provider table every two seconds.
pub fn drive(
    prism: SocketAddr,
    view: &crate::edge::admin::AdminView,
    shutdown: &prism_runtime::Shutdown,
    seconds: Option<u64>,
) {
    let started = Instant::now();
    let (mut ok, mut failed) = (0u64, 0u64);
    let mut last_print = started;
    while !shutdown.is_triggered() {
        if probe_once(prism) {
            ok += 1;
        } else {
            failed += 1;
        }
        if last_print.elapsed() >= Duration::from_secs(2) {
            last_print = Instant::now();
            println!("{}", render_table(view, started.elapsed().as_secs(), ok, failed));
        }
        if seconds.is_some_and(|s| started.elapsed() >= Duration::from_secs(s)) {
            shutdown.trigger();
        }
        #[allow(clippy::disallowed_methods, reason = "the demo's main thread, watching for its end")]
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The terminal version of the status page's table (the renderer `prism status` uses too).
pub fn render_table(view: &crate::edge::admin::AdminView, elapsed_s: u64, ok: u64, failed: u64) -> String {
    format!(
        "[{elapsed_s:>4}s] client calls: {ok} ok, {failed} failed\n{}",
        prism_telemetry::status::render_table(&view.status_doc())
    )
}
