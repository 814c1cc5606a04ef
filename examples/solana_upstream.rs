//! A fast loopback Solana node stand-in for `perf/solana_overhead.py`: JSON-RPC over HTTP/1.1 keep-alive on
//! ADDR and a PubSub WebSocket on ADDR's port + 1 (as validators serve them), one thread per connection.
//!
//! HTTP: `getSlot` (a clock of one slot per 400 ms), `getBlockHeight`, `getHealth`, `getVersion`,
//! `getIdentity` (IDENTITY), `getLatestBlockhash`; every other call gets
//! `{"context":{"apiVersion":"2.2.0","slot":S},"value":ACCOUNT}`, ACCOUNT a small system-owned account (so a
//! delegation record read says "not delegated"). WebSocket: every `*Subscribe` is confirmed with a new id;
//! nothing is ever notified.
//!
//! Usage: `solana_upstream ADDR [IDENTITY]`. Prints `listening ADDR` once both ports are bound.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const ACCOUNT: &str = r#"{"data":["","base64"],"executable":false,"lamports":1000000,"owner":"11111111111111111111111111111111","rentEpoch":18446744073709551615,"space":0}"#;

static SUBS: AtomicU64 = AtomicU64::new(1);

fn main() {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args.next().expect("ADDR").parse().expect("ADDR is host:port");
    let identity: &'static str = Box::leak(
        args.next()
            .unwrap_or_else(|| "Fe1ec7Fn8zd4uXmzFfD9rBtBv1tNpGgZ3PsPnJMB5kSw".into())
            .into_boxed_str(),
    );
    let http = TcpListener::bind(addr).expect("bind ADDR");
    let ws = TcpListener::bind(SocketAddr::new(addr.ip(), addr.port() + 1)).expect("bind ADDR's port + 1");
    println!("listening {addr}");
    io::stdout().flush().ok();
    let born = Instant::now();
    std::thread::spawn(move || {
        for s in ws.incoming().flatten() {
            std::thread::spawn(move || serve_ws(s));
        }
    });
    for s in http.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = serve_http(s, identity, born);
        });
    }
}

fn serve_http(s: TcpStream, identity: &str, born: Instant) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut out = s.try_clone()?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut len = 0usize;
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Ok(());
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
        body.resize(len, 0);
        r.read_exact(&mut body)?;
        let slot = 350_000_000 + born.elapsed().as_millis() as u64 / 400;
        let payload = answer(&body, identity, slot);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            payload.len()
        );
        out.write_all(&[head.as_bytes(), payload.as_bytes()].concat())?;
    }
}

fn answer(body: &[u8], identity: &str, slot: u64) -> String {
    let Ok(call) = serde_json::from_slice::<serde_json::Value>(body) else {
        return r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#.into();
    };
    let id = call["id"].to_string();
    let result = match call["method"].as_str().unwrap_or("") {
        "getSlot" => slot.to_string(),
        "getBlockHeight" => (slot - 50_000_000).to_string(),
        "getHealth" => r#""ok""#.into(),
        "getVersion" => r#"{"feature-set":3294202862,"solana-core":"2.2.0"}"#.into(),
        "getIdentity" => format!(r#"{{"identity":"{identity}"}}"#),
        "getLatestBlockhash" => format!(
            r#"{{"context":{{"apiVersion":"2.2.0","slot":{slot}}},"value":{{"blockhash":"EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N","lastValidBlockHeight":{}}}}}"#,
            slot - 50_000_000 + 150
        ),
        _ => format!(r#"{{"context":{{"apiVersion":"2.2.0","slot":{slot}}},"value":{ACCOUNT}}}"#),
    };
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

fn serve_ws(s: TcpStream) {
    let _ = s.set_nodelay(true);
    let Ok(mut ws) = tungstenite::accept(s) else { return };
    while let Ok(msg) = ws.read() {
        let text = match msg {
            tungstenite::Message::Text(t) => t,
            tungstenite::Message::Close(_) => return,
            _ => continue,
        };
        let Ok(call) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let method = call["method"].as_str().unwrap_or("");
        let result = if method.ends_with("Unsubscribe") {
            "true".to_string()
        } else {
            SUBS.fetch_add(1, Ordering::Relaxed).to_string()
        };
        let reply = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, call["id"]);
        if ws.send(tungstenite::Message::Text(reply)).is_err() {
            return;
        }
    }
}
