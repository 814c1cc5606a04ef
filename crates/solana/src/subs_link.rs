//! One shared upstream WebSocket of the Solana subscription hub (`subs`): a socket to one side (the base
//! layer or one ER) carrying up to `limits.solana_subscriptions_per_socket` topics. It connects (rotating
//! over that side's providers with a WebSocket, usable ones first), subscribes every topic placed on it,
//! hands notifications to their topics, and when the socket is lost puts its topics in limbo, reconnects
//! with backoff and replays them. It ends once nothing is left to carry.

use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use async_tungstenite::tungstenite::Message;

use super::subs_hub::{Link, Pending, OUT_QUEUE};
use super::SolanaRoute;
use prism_runtime::queue::LocalQueue;
use prism_runtime::sleep;
use prism_transport::ws::{connect_ws, pump, PumpEnd, Reconnect};
use prism_wire::jsonscan::{object_field, plain_str, plain_u64};

/// Keeps `link` up while it carries anything: connect, replay, read; on loss, limbo, back off and retry.
pub(super) async fn run(sol: Weak<SolanaRoute>, link: Rc<Link>) {
    let mut backoff = Reconnect::default();
    let mut attempt = 0usize;
    loop {
        let Some(s) = sol.upgrade() else { return };
        if link.closing.get() || s.route.life.shutdown.is_triggered() {
            return;
        }
        let route = &s.route;
        let mask = s.net.providers(link.dest);
        let mut candidates: Vec<usize> = (0..route.upstreams.len())
            .filter(|&i| mask & (1 << i) != 0 && route.upstreams[i].ws.is_some())
            .collect();
        if candidates.is_empty() {
            tracing::warn!(network = %s.net.name, side = s.net.dest_name(link.dest), "no provider on this side has a ws_url; subscriptions there cannot be served");
            // Refused at once (the topics end, and the socket with its last one), not left to time out.
            let carried = s.subs.carried_by(&link);
            for topic in carried {
                s.settle(
                    &topic,
                    &link,
                    None,
                    "no provider of this side has a WebSocket endpoint (ws_url)",
                );
            }
            return;
        }
        // Providers routing would use now first (breaker closed, not stalled or behind).
        let usable = |&i: &usize| {
            let p = prism_wire::rpc::ProviderId::new(i);
            route.live.admissible(p) && route.live.providers()[p].breaker.is_closed()
        };
        if candidates.iter().any(usable) {
            candidates.retain(usable);
        }
        let p = candidates[attempt % candidates.len()];
        attempt += 1;
        let ws = route.upstreams[p].ws.clone().expect("filtered");
        let deadline = Instant::now() + Duration::from_millis(route.ws.connect_timeout_ms);
        let tls = route.ws.tls.clone();
        let ping = route.ws.ping;
        let headers = route.upstreams[p].pool.headers();
        drop(s);
        let socket = match connect_ws(&ws.url, &ws.addrs, tls, &headers, deadline).await {
            Ok(socket) => socket,
            Err(e) => {
                tracing::debug!(link = link.id, error = %e, "subscription socket connect failed");
                sleep(backoff.after_failure()).await;
                continue;
            }
        };
        backoff.connected();
        let Some(s) = sol.upgrade() else { return };
        if link.closing.get() {
            return;
        }
        let out: Rc<LocalQueue<Message>> = LocalQueue::new(OUT_QUEUE);
        *link.out.borrow_mut() = Some(out.clone());
        link.pending.borrow_mut().clear();
        link.by_upstream.borrow_mut().clear();
        // Replay every topic this socket carries.
        let carried = s.subs.carried_by(&link);
        for topic in &carried {
            topic.upstream.id.set(None);
            link.subscribe(topic);
        }
        tracing::debug!(network = %s.net.name, side = s.net.dest_name(link.dest), provider = %s.route.upstreams[p].name,
            link = link.id, topics = carried.len(), "subscription socket connected");
        drop((s, carried));
        let end = pump(socket, out, ping, |text| {
            let Some(s) = sol.upgrade() else { return false };
            on_message(&s, &link, text);
            true
        })
        .await;
        *link.out.borrow_mut() = None;
        let Some(s) = sol.upgrade() else { return };
        if link.closing.get() || s.route.life.shutdown.is_triggered() {
            return;
        }
        // What it carried may have changed unheard: each topic reads it again once resubscribed.
        for topic in s.subs.topics.borrow().values().filter(|t| link.carries(t)) {
            topic.upstream.id.set(None);
            topic.gap.limbo.set(true);
        }
        s.route.shard.recorder.metrics().ws_reconnect();
        if end == PumpEnd::Unresponsive {
            s.route.shard.recorder.metrics().ws_unresponsive();
            tracing::warn!(network = %s.net.name, side = s.net.dest_name(link.dest), link = link.id, "subscription socket stopped answering pings; reconnecting");
        } else {
            tracing::warn!(network = %s.net.name, side = s.net.dest_name(link.dest), link = link.id, "subscription socket lost; reconnecting");
        }
        drop(s);
        sleep(backoff.current()).await;
    }
}

/// What the hub reads in one message from a subscription socket. Pure, so fuzzing reaches every byte an
/// upstream can send here; never panics.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubFrame<'a> {
    /// `{"method":"accountNotification","params":{"result":...,"subscription":ID}}`: the raw method (a JSON
    /// string) and `result`.
    Notification {
        method: &'a [u8],
        subscription: u64,
        result: &'a [u8],
    },
    /// A reply to our request `id`: the subscription id (`None` when refused, with the error's message).
    Reply {
        id: u64,
        subscription: Option<u64>,
        refused: Option<&'a str>,
    },
    Ignored,
}

#[doc(hidden)]
pub fn parse_sub_frame(text: &[u8]) -> SubFrame<'_> {
    if let (Some(method), Some(params)) = (object_field(text, "method"), object_field(text, "params")) {
        return match (
            object_field(params, "subscription").and_then(plain_u64),
            object_field(params, "result"),
        ) {
            (Some(subscription), Some(result)) if method.first() == Some(&b'"') => SubFrame::Notification {
                method,
                subscription,
                result,
            },
            _ => SubFrame::Ignored,
        };
    }
    match object_field(text, "id").and_then(plain_u64) {
        Some(id) => {
            let result = object_field(text, "result");
            SubFrame::Reply {
                id,
                subscription: result.and_then(plain_u64),
                refused: object_field(text, "error")
                    .and_then(|e| object_field(e, "message"))
                    .and_then(plain_str),
            }
        }
        None => SubFrame::Ignored,
    }
}

fn on_message(s: &Rc<SolanaRoute>, link: &Rc<Link>, text: &[u8]) {
    match parse_sub_frame(text) {
        SubFrame::Notification {
            method,
            subscription,
            result,
        } => {
            let topic = link.by_upstream.borrow().get(&subscription).and_then(Weak::upgrade);
            // A topic that moved: the old side's last words are not the account's state any more.
            if let Some(topic) = topic.filter(|t| t.alive.get() && link.carries(t)) {
                s.deliver(&topic, link.dest, method, result);
            }
        }
        SubFrame::Reply {
            id,
            subscription,
            refused,
        } => {
            let Some(Pending::Subscribe(topic, method)) = link.pending.borrow_mut().remove(&id) else {
                return;
            };
            match topic.upgrade().filter(|t| t.alive.get() && link.carries(t)) {
                Some(topic) => s.settle(
                    &topic,
                    link,
                    subscription,
                    refused.unwrap_or("the upstream refused the subscription"),
                ),
                // Ended or moved while subscribing: release the upstream subscription.
                None => {
                    if let Some(up) = subscription {
                        link.unsubscribe(&method, up);
                    }
                }
            }
        }
        SubFrame::Ignored => {}
    }
}
