//! One provider's upstream WebSocket on a shard, carrying every topic assigned to that provider: opened
//! with the first topic, kept up (reconnect with backoff, replay every topic it carries) while any topic
//! uses it, let go once nothing is left to carry.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use async_tungstenite::tungstenite::Message;

use super::frame::on_upstream_message;
use super::hub::{Link, SubHub, Topic};
use crate::routing::route::{NetworkRoute, Newest};
use prism_runtime::queue::LocalQueue;
use prism_runtime::{sleep, spawn};
use prism_transport::ws::{connect_ws, pump, PumpEnd, Reconnect};
use prism_wire::rpc::wire::write_json_str;
use prism_wire::rpc::ProviderId;

// === impl SubHub ===

impl SubHub {
    /// The shard's link to `provider`, opened (its task started) when there is none yet.
    pub(super) fn link(&self, route: &Rc<NetworkRoute>, provider: ProviderId) -> Rc<Link> {
        if let Some(l) = self.links.borrow().get(&provider) {
            return l.clone();
        }
        let link = Rc::new(Link {
            provider,
            out: RefCell::new(None),
            pending: RefCell::new(AHashMap::new()),
            by_upstream: RefCell::new(AHashMap::new()),
            next_id: Cell::new(prism_wire::rpc::ids::WS_LINK),
            connected: Cell::new(false),
            failures: Cell::new(0),
        });
        self.links.borrow_mut().insert(provider, link.clone());
        let newest = route.shard.newest.clone();
        let l = link.clone();
        spawn(async move { run_link(newest, l).await });
        link
    }
}

// === impl Link ===

impl Link {
    pub(super) fn subscribe(&self, key: &[u8], topic: &Topic) {
        let Some(out) = self.out.borrow().clone() else { return }; // replayed on connect
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.pending.borrow_mut().insert(id, key.to_vec());
        let mut msg = Vec::with_capacity(64 + topic.params.len());
        msg.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        msg.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        msg.extend_from_slice(br#","method":"eth_subscribe","params":"#);
        msg.extend_from_slice(&topic.params);
        msg.push(b'}');
        let _ = out.push(Message::Text(String::from_utf8_lossy(&msg).into_owned()));
    }

    pub(super) fn send_unsubscribe(&self, upstream_id: &str) {
        let Some(out) = self.out.borrow().clone() else { return };
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let mut msg = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"eth_unsubscribe","params":["#).into_bytes();
        write_json_str(&mut msg, upstream_id);
        msg.extend_from_slice(b"]}");
        let _ = out.push(Message::Text(String::from_utf8_lossy(&msg).into_owned()));
    }
}

/// Keeps one provider's link up while any topic uses it: connect, replay, read; on loss, back off and retry.
async fn run_link(route: Newest, link: Rc<Link>) {
    let mut backoff = Reconnect::default();
    loop {
        let Some(r) = route.get() else { return };
        if r.life.shutdown.is_triggered() {
            return;
        }
        let assigned: Vec<(Vec<u8>, Rc<Topic>)> = r
            .shard
            .subs
            .topics
            .borrow()
            .iter()
            .filter(|(_, t)| t.upstream.provider.get() == Some(link.provider))
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        if assigned.is_empty() && link.failures.get() > 0 {
            // Nothing to carry any more: let the link go.
            r.shard.subs.links.borrow_mut().remove(&link.provider);
            return;
        }
        let Some(ws) = r.upstreams[link.provider].ws.clone() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_millis(r.ws.connect_timeout_ms);
        let tls = r.ws.tls.clone();
        let connected = connect_ws(
            &ws.url,
            &ws.addrs,
            tls,
            &r.upstreams[link.provider].pool.headers(),
            deadline,
        )
        .await;
        let socket = match connected {
            Ok(s) => s,
            Err(e) => {
                link.failures.set(link.failures.get() + 1);
                tracing::debug!(network = %r.name, provider = %r.upstreams[link.provider].name, error = %e, "WebSocket connect failed");
                drop(r);
                sleep(backoff.after_failure()).await;
                continue;
            }
        };
        tracing::debug!(network = %r.name, provider = %r.upstreams[link.provider].name, "upstream WebSocket connected");
        backoff.connected();
        link.failures.set(0);
        let out: Rc<LocalQueue<Message>> = LocalQueue::new(65_536);
        *link.out.borrow_mut() = Some(out.clone());
        link.connected.set(true);
        link.pending.borrow_mut().clear();
        link.by_upstream.borrow_mut().clear();
        // Replay every topic this provider carries.
        for (key, topic) in r.shard.subs.topics.borrow().iter() {
            if topic.upstream.provider.get() == Some(link.provider) {
                topic.upstream.id.borrow_mut().take();
                link.subscribe(key, topic);
            }
        }
        let end = pump(socket, out, r.ws.ping, |text| {
            let Some(route) = route.get() else { return false };
            on_upstream_message(&route, &link, text);
            true
        })
        .await;
        *link.out.borrow_mut() = None;
        link.connected.set(false);
        link.failures.set(link.failures.get() + 1);
        r.shard.recorder.metrics().ws_reconnect();
        match end {
            PumpEnd::Unresponsive => {
                r.shard.recorder.metrics().ws_unresponsive();
                tracing::warn!(network = %r.name, provider = %r.upstreams[link.provider].name, "upstream WebSocket stopped answering pings; reconnecting")
            }
            PumpEnd::Closed => {
                tracing::warn!(network = %r.name, provider = %r.upstreams[link.provider].name, "upstream WebSocket lost; reconnecting")
            }
        }
        for topic in r.shard.subs.topics.borrow().values() {
            if topic.upstream.provider.get() == Some(link.provider) {
                topic.upstream.id.borrow_mut().take();
            }
        }
        drop(r);
        sleep(backoff.current()).await;
    }
}
