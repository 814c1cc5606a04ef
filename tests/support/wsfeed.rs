//! A WebSocket subscriber that records every notification it receives, on a thread of its own, with the
//! instant it arrived: for comparing what a real node streams with what Prism streams, and timing it.
//!
//! ```ignore
//! let feed = Feed::connect(&format!("ws://{}/", prism.addr()));
//! let heads = feed.subscribe(json!(["newHeads"]));
//! feed.wait(Duration::from_secs(5), |f| f.of(&heads).len() >= 3);
//! ```
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

/// One notification: which subscription, its `result`, when it arrived.
#[derive(Clone, Debug)]
pub struct Frame {
    pub subscription: String,
    pub result: Value,
    pub at: Instant,
}

#[derive(Default)]
struct Shared {
    frames: Vec<Frame>,
    /// Replies to our calls, by id.
    replies: Vec<Value>,
    outbox: Vec<String>,
}

pub struct Feed {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    reader: Option<thread::JoinHandle<()>>,
    next_id: Mutex<u64>,
}

impl Feed {
    /// Connects to `url` (`ws://host:port/path`) and starts recording.
    pub fn connect(url: &str) -> Feed {
        let req = url.into_client_request().unwrap();
        let host = req.uri().host().unwrap().to_string();
        let port = req.uri().port_u16().unwrap();
        let stream = TcpStream::connect((host.as_str(), port)).unwrap_or_else(|e| panic!("connect {url}: {e}"));
        stream.set_nodelay(true).unwrap();
        let (ws, _) = tungstenite::client(req, stream).unwrap_or_else(|e| panic!("WebSocket upgrade at {url}: {e}"));
        ws.get_ref().set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, stop2) = (shared.clone(), stop.clone());
        let reader = thread::spawn(move || pump(ws, s2, stop2));
        Feed {
            shared,
            stop,
            reader: Some(reader),
            next_id: Mutex::new(1),
        }
    }

    /// `eth_subscribe` with these params; the subscription id (panics on an error or no answer in 10 s).
    pub fn subscribe(&self, params: Value) -> String {
        let id = {
            let mut n = self.next_id.lock().unwrap();
            *n += 1;
            *n
        };
        let msg = json!({"jsonrpc":"2.0","id":id,"method":"eth_subscribe","params":params}).to_string();
        self.shared.lock().unwrap().outbox.push(msg);
        let mut reply = Value::Null;
        let ok = super::wait_until(Duration::from_secs(10), || {
            let g = self.shared.lock().unwrap();
            match g.replies.iter().find(|r| r["id"] == id) {
                Some(r) => {
                    reply = r.clone();
                    true
                }
                None => false,
            }
        });
        assert!(ok, "no answer to eth_subscribe {params}");
        reply["result"]
            .as_str()
            .unwrap_or_else(|| panic!("eth_subscribe {params}: {reply}"))
            .to_string()
    }

    /// Every frame of subscription `sub` so far, in arrival order.
    pub fn of(&self, sub: &str) -> Vec<Frame> {
        self.shared
            .lock()
            .unwrap()
            .frames
            .iter()
            .filter(|f| f.subscription == sub)
            .cloned()
            .collect()
    }

    /// Polls `done` on this feed until it holds or `within` passes; its last answer.
    pub fn wait(&self, within: Duration, mut done: impl FnMut(&Feed) -> bool) -> bool {
        super::wait_until(within, || done(self))
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

fn pump(mut ws: WebSocket<TcpStream>, shared: Arc<Mutex<Shared>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let out: Vec<String> = std::mem::take(&mut shared.lock().unwrap().outbox);
        for m in out {
            if ws.send(Message::Text(m)).is_err() {
                return;
            }
        }
        match ws.read() {
            Ok(Message::Text(t)) => {
                let at = Instant::now();
                let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                let mut g = shared.lock().unwrap();
                if v["method"] == "eth_subscription" {
                    g.frames.push(Frame {
                        subscription: v["params"]["subscription"].as_str().unwrap_or("").to_string(),
                        result: v["params"]["result"].clone(),
                        at,
                    });
                } else {
                    g.replies.push(v);
                }
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}
