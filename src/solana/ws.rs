//! Client WebSocket subscriptions on a solana-magic network. Each client session keeps one upstream socket
//! per side it needs (base layer, or an ER), multiplexing that client's subscriptions; client subscription
//! ids are Prism's own and never change. `accountSubscribe` follows its account: when the delegation table
//! sees the account move between the base layer and an ER, the upstream subscription moves with it.
//! `signatureSubscribe` goes where the signature was sent; `slotSubscribe` and `rootSubscribe` to the chain
//! that issued the caller's latest blockhash (the same rule as `getBlockHeight`); the rest to the base layer.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use ahash::AHashMap;
use async_tungstenite::tungstenite::Message;

use super::net::Dest;
use super::pubkey::Pubkey;
use super::table::Status;
use super::SolanaRoute;
use crate::core::outcome::{Caller, ProxyError};
use crate::jsonscan::{nth_element, object_field, plain_str, plain_u64};
use crate::rpc::wire::write_upstream_call;
use crate::runtime::queue::LocalQueue;
use crate::runtime::{sleep, spawn};
use crate::transport::ws::{connect_ws, pump, PumpEnd, Reconnect};

/// Whether a WebSocket method is a Solana subscription call this module serves.
/// Only plain identifiers qualify: a client's method text never shapes an upstream frame's structure.
pub fn is_subscription_method(method: &str) -> bool {
    (method.ends_with("Subscribe") || method.ends_with("Unsubscribe"))
        && method.bytes().all(|b| b.is_ascii_alphanumeric())
}

struct ClientSub {
    id: u64,
    /// e.g. `accountSubscribe`; notifications are `accountNotification`.
    method: String,
    params: Vec<u8>,
    dest: Cell<Dest>,
    upstream: Cell<Option<u64>>,
    account: Option<Pubkey>,
    alive: Cell<bool>,
    /// The upstream refused it (set with the reason's text).
    refused: RefCell<Option<String>>,
    /// Fired when the upstream confirms or refuses.
    settled: event_listener::Event,
    /// While Prism tells whether a base-layer value owned by the delegation program is the account's state
    /// (`settle_held`): the notifications held, in order, each marked when it is such a value.
    held: RefCell<Option<Vec<(String, bool)>>>,
}

/// One upstream socket of one client session, to one side.
struct SideLink {
    dest: Dest,
    out: RefCell<Option<Rc<LocalQueue<Message>>>>,
    /// Request id of a pending subscribe → client subscription id.
    pending: RefCell<AHashMap<u64, u64>>,
    /// Upstream subscription id → client subscription id.
    by_upstream: RefCell<AHashMap<u64, u64>>,
    next_id: Cell<u64>,
}

impl SideLink {
    fn send(&self, method: &str, params: &[u8]) -> Option<u64> {
        let out = self.out.borrow().clone()?;
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        // The method is the client's text: written as a JSON string, so a name such as
        // `getX","method":"requestAirdrop","id":"zSubscribe` stays one (unknown) method.
        let mut msg = Vec::with_capacity(48 + method.len() + params.len());
        write_upstream_call(&mut msg, id, method, Some(params));
        out.push(Message::Text(String::from_utf8_lossy(&msg).into_owned()))
            .ok()?;
        Some(id)
    }

    fn subscribe(&self, sub: &ClientSub) {
        if let Some(id) = self.send(&sub.method, &sub.params) {
            self.pending.borrow_mut().insert(id, sub.id);
        }
    }

    fn unsubscribe(&self, sub: &ClientSub) {
        if let Some(up) = sub.upstream.take() {
            self.by_upstream.borrow_mut().remove(&up);
            let method = sub.method.replace("Subscribe", "Unsubscribe");
            self.send(&method, format!("[{up}]").as_bytes());
        }
    }
}

/// One client connection's Solana subscriptions.
pub struct Session {
    sol: Rc<SolanaRoute>,
    out: Rc<LocalQueue<Message>>,
    caller: Caller,
    subs: RefCell<AHashMap<u64, Rc<ClientSub>>>,
    links: RefCell<AHashMap<Dest, Rc<SideLink>>>,
    next: Cell<u64>,
    closed: Cell<bool>,
}

impl Session {
    pub fn new(sol: Rc<SolanaRoute>, out: Rc<LocalQueue<Message>>, caller: Caller) -> Rc<Session> {
        Rc::new(Session {
            sol,
            out,
            caller,
            subs: RefCell::new(AHashMap::new()),
            links: RefCell::new(AHashMap::new()),
            next: Cell::new(0),
            closed: Cell::new(false),
        })
    }

    /// Subscriptions this session holds (or is opening), for the edge's subscription caps.
    pub fn subscriptions(&self) -> usize {
        self.subs.borrow().len()
    }

    /// Ends every upstream socket of this session.
    pub fn close(&self) {
        self.closed.set(true);
        for sub in self.subs.borrow_mut().drain() {
            sub.1.alive.set(false);
        }
        for link in self.links.borrow_mut().drain() {
            if let Some(out) = link.1.out.borrow_mut().take() {
                out.close();
            }
        }
    }

    /// Serves a subscribe or unsubscribe call; returns the reply's `result` or an error.
    pub async fn handle(self: &Rc<Self>, method: &str, params: Option<&[u8]>) -> Result<Vec<u8>, ProxyError> {
        let params = params.unwrap_or(b"[]");
        if method.ends_with("Unsubscribe") {
            let id = nth_element(params, 0).and_then(plain_u64);
            let removed = id.and_then(|id| self.subs.borrow_mut().remove(&id));
            return Ok(match removed {
                Some(sub) => {
                    sub.alive.set(false);
                    if let Some(link) = self.links.borrow().get(&sub.dest.get()) {
                        link.unsubscribe(&sub);
                    }
                    b"true".to_vec()
                }
                None => b"false".to_vec(),
            });
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut account = None;
        let dest = match method {
            "accountSubscribe" => {
                let Some(key) = nth_element(params, 0).and_then(plain_str).and_then(Pubkey::from_base58) else {
                    return Err(invalid("accountSubscribe: params[0] must be a base58 account key"));
                };
                account = Some(key);
                dest_for(&self.sol, key, deadline).await?
            }
            "signatureSubscribe" => nth_element(params, 0)
                .and_then(plain_str)
                .and_then(|s| self.sol.net.signatures.get(s))
                .map_or(Dest::Base, Dest::from_code),
            "slotSubscribe" | "rootSubscribe" => super::router::caller_chain(&self.sol, &self.caller),
            "programSubscribe" => {
                return Err(ProxyError::Rejected {
                    code: -32601,
                    message: "programSubscribe is not supported by the magic router: it would mix base-layer and ephemeral-rollup state".into(),
                })
            }
            _ => Dest::Base,
        };
        let id = self.next.get() + 1;
        self.next.set(id);
        let sub = Rc::new(ClientSub {
            id,
            method: method.to_string(),
            params: params.to_vec(),
            dest: Cell::new(dest),
            upstream: Cell::new(None),
            account,
            alive: Cell::new(true),
            refused: RefCell::new(None),
            settled: event_listener::Event::new(),
            held: RefCell::new(None),
        });
        self.subs.borrow_mut().insert(id, sub.clone());
        self.link(dest).subscribe(&sub);
        // Like a validator, answer only once the subscription is live upstream: a change right after the
        // client has its id must reach it.
        while sub.upstream.get().is_none() && sub.refused.borrow().is_none() {
            let settled = sub.settled.listen();
            if sub.upstream.get().is_some() || sub.refused.borrow().is_some() {
                break;
            }
            if crate::runtime::timeout_at(deadline, settled).await.is_err() {
                self.subs.borrow_mut().remove(&id);
                sub.alive.set(false);
                return Err(ProxyError::NotServed(
                    "the upstream did not confirm the subscription in time",
                ));
            }
        }
        if let Some(why) = sub.refused.borrow_mut().take() {
            self.subs.borrow_mut().remove(&id);
            sub.alive.set(false);
            return Err(ProxyError::Rejected {
                code: -32602,
                message: why,
            });
        }
        // An account living on the base layer whatever any record says never moves.
        if let Some(key) = account.filter(|k| !super::base_only::by_address(k, &self.sol.net.program)) {
            let session = Rc::downgrade(self);
            spawn(async move { follow(session, sub, key).await });
        }
        Ok(itoa::Buffer::new().format(id).as_bytes().to_vec())
    }

    fn link(self: &Rc<Self>, dest: Dest) -> Rc<SideLink> {
        if let Some(l) = self.links.borrow().get(&dest) {
            return l.clone();
        }
        let link = Rc::new(SideLink {
            dest,
            out: RefCell::new(None),
            pending: RefCell::new(AHashMap::new()),
            by_upstream: RefCell::new(AHashMap::new()),
            next_id: Cell::new(0),
        });
        self.links.borrow_mut().insert(dest, link.clone());
        let (session, l) = (Rc::downgrade(self), link.clone());
        spawn(async move { run_side_link(session, l).await });
        link
    }

    /// Moves `sub` to `dest`: unsubscribe on the old side, subscribe on the new one; same client id.
    fn move_sub(self: &Rc<Self>, sub: &ClientSub, dest: Dest) {
        let old = sub.dest.replace(dest);
        if old == dest {
            return;
        }
        tracing::debug!(network = %self.sol.net.name, account = ?sub.account, from = self.sol.net.dest_name(old), to = self.sol.net.dest_name(dest), "subscription follows its account");
        if let Some(link) = self.links.borrow().get(&old) {
            link.unsubscribe(sub);
        }
        self.link(dest).subscribe(sub);
    }
}

fn invalid(message: &str) -> ProxyError {
    ProxyError::Rejected {
        code: -32602,
        message: message.into(),
    }
}

async fn dest_for(sol: &Rc<SolanaRoute>, key: Pubkey, deadline: Instant) -> Result<Dest, ProxyError> {
    match sol.status(key, deadline).await? {
        Status::Delegated { er: Some(k), .. } => Ok(Dest::Er(k)),
        Status::Delegated { er: None, record } => Err(super::router::unknown_er(&record.authority)),
        _ => Ok(Dest::Base),
    }
}

/// Moves an account subscription whenever the delegation table changes its mind about the account.
async fn follow(session: Weak<Session>, sub: Rc<ClientSub>, key: Pubkey) {
    loop {
        let Some(s) = session.upgrade() else { return };
        if !sub.alive.get() || s.closed.get() {
            return;
        }
        let entry = s.sol.watch(key);
        let listener = entry.changed.listen();
        let dest = match entry.trusted() {
            Some(_) => dest_for(&s.sol, key, Instant::now() + Duration::from_secs(5))
                .await
                .ok(),
            // In limbo: read the record again before trusting it.
            None if !entry.fetching.get() => {
                let _ = s.sol.refresh(&entry, Instant::now() + Duration::from_secs(5)).await;
                match entry.status.get() {
                    Status::Delegated { er: Some(k), .. } => Some(Dest::Er(k)),
                    Status::Undelegated => Some(Dest::Base),
                    _ => None,
                }
            }
            None => None,
        };
        if let Some(d) = dest {
            s.move_sub(&sub, d);
        }
        let sd = s.sol.route.shutdown.clone();
        drop(s);
        // Woken by status changes; a slow tick guards against a missed wake-up after a failed read.
        futures_lite::future::or(
            futures_lite::future::or(listener, sleep(Duration::from_secs(1))),
            sd.triggered(),
        )
        .await;
    }
}

/// Tells whether the held notifications of `sub` (from `slot` on) are the account's state, then relays
/// those that are, in order, and drops the base layer's copies of a delegated account.
async fn settle_held(session: Weak<Session>, sub: Rc<ClientSub>, key: Pubkey, slot: u64) {
    let Some(sol) = session.upgrade().map(|s| s.sol.clone()) else {
        return;
    };
    let verdict = sol
        .program_owned(key, slot, Instant::now() + Duration::from_secs(5))
        .await;
    let held = sub.held.take().unwrap_or_default();
    let Some(s) = session.upgrade() else { return };
    if !sub.alive.get() || s.closed.get() {
        return;
    }
    let copy = matches!(verdict, super::base_only::ProgramOwned::DelegatedCopy(_));
    for (msg, owned) in held {
        if !(owned && copy) {
            let _ = s.out.push(Message::Text(msg));
        }
    }
}

/// Keeps one side's socket up for a session: connect (rotating over that side's providers with a
/// WebSocket), resubscribe everything assigned to the side, relay notifications under client ids.
async fn run_side_link(session: Weak<Session>, link: Rc<SideLink>) {
    let mut backoff = Reconnect::default();
    let mut attempt = 0usize;
    loop {
        let Some(s) = session.upgrade() else { return };
        if s.closed.get() || s.sol.route.shutdown.is_triggered() {
            return;
        }
        let mask = s.sol.net.providers(link.dest);
        let route = &s.sol.route;
        let candidates: Vec<usize> = (0..route.upstreams.len())
            .filter(|&i| mask & (1 << i) != 0 && route.upstreams[i].ws.is_some())
            .collect();
        if candidates.is_empty() {
            tracing::warn!(network = %s.sol.net.name, side = s.sol.net.dest_name(link.dest), "no provider on this side has a ws_url; subscriptions there cannot be served");
            return;
        }
        let p = candidates[attempt % candidates.len()];
        attempt += 1;
        let ws = route.upstreams[p].ws.clone().expect("filtered");
        let deadline = Instant::now() + Duration::from_millis(route.connect_timeout_ms);
        let tls = route.ws_tls.clone();
        drop(s);
        let socket = match connect_ws(&ws.url, &ws.addrs, tls, deadline).await {
            Ok(socket) => socket,
            Err(_) => {
                sleep(backoff.after_failure()).await;
                continue;
            }
        };
        backoff.connected();
        let Some(s) = session.upgrade() else { return };
        let out: Rc<LocalQueue<Message>> = LocalQueue::new(1 << 16);
        *link.out.borrow_mut() = Some(out.clone());
        link.pending.borrow_mut().clear();
        link.by_upstream.borrow_mut().clear();
        let assigned: Vec<Rc<ClientSub>> = s
            .subs
            .borrow()
            .values()
            .filter(|sub| sub.dest.get() == link.dest)
            .cloned()
            .collect();
        for sub in assigned {
            sub.upstream.set(None);
            link.subscribe(&sub);
        }
        let ping = s.sol.route.ws_ping;
        drop(s);
        let end = pump(socket, out, ping, |text| {
            let Some(s) = session.upgrade() else { return false };
            on_side_message(&s, &link, text);
            true
        })
        .await;
        *link.out.borrow_mut() = None;
        let Some(s) = session.upgrade() else { return };
        if s.closed.get() {
            return;
        }
        if end == PumpEnd::Unresponsive {
            s.sol.route.recorder.metrics().ws_unresponsive();
            tracing::warn!(network = %s.sol.net.name, side = s.sol.net.dest_name(link.dest), "client's upstream WebSocket stopped answering pings; reconnecting");
        } else {
            tracing::debug!(network = %s.sol.net.name, side = s.sol.net.dest_name(link.dest), "client's upstream WebSocket lost; reconnecting");
        }
        drop(s);
        sleep(backoff.current()).await;
    }
}

fn on_side_message(s: &Rc<Session>, link: &SideLink, text: &[u8]) {
    if let (Some(method), Some(params)) = (object_field(text, "method"), object_field(text, "params")) {
        let Some(up) = object_field(params, "subscription").and_then(plain_u64) else {
            return;
        };
        let Some(result) = object_field(params, "result") else {
            return;
        };
        let Some(cid) = link.by_upstream.borrow().get(&up).copied() else {
            return;
        };
        let Some(sub) = s.subs.borrow().get(&cid).cloned() else {
            return;
        };
        if sub.dest.get() != link.dest {
            return; // moved: the old side's last words are not the account's state any more
        }
        let mut msg = String::with_capacity(64 + result.len());
        msg.push_str(r#"{"jsonrpc":"2.0","method":"#);
        msg.push_str(&String::from_utf8_lossy(method));
        msg.push_str(r#","params":{"result":"#);
        msg.push_str(&String::from_utf8_lossy(result));
        msg.push_str(r#","subscription":"#);
        msg.push_str(itoa::Buffer::new().format(cid));
        msg.push_str("}}");
        // A base-layer value owned by the delegation program is either the base's copy of an account being
        // delegated (not its state: held back while the follower moves the subscription to the ER) or one
        // of the program's own accounts, such as the delegation record MagicBlock's Resolver watches (its
        // state: relayed). A record read as new as the notification tells which; later notifications wait
        // behind it so their order holds.
        let program = s.sol.net.program.to_base58();
        let owned = link.dest == Dest::Base
            && object_field(result, "value")
                .and_then(|v| object_field(v, "owner"))
                .and_then(plain_str)
                == Some(program.as_str());
        if let Some(held) = sub.held.borrow_mut().as_mut() {
            held.push((msg, owned));
            return;
        }
        if let Some(key) = sub.account.filter(|_| owned) {
            if !s.sol.table.get(&key).is_some_and(|e| e.base_only.get()) {
                let slot = object_field(result, "context")
                    .and_then(|c| object_field(c, "slot"))
                    .and_then(plain_u64)
                    .unwrap_or(0);
                *sub.held.borrow_mut() = Some(vec![(msg, true)]);
                spawn(settle_held(Rc::downgrade(s), sub.clone(), key, slot));
                return;
            }
        }
        let _ = s.out.push(Message::Text(msg));
        // A signature subscription ends with its one notification (the node drops it too).
        if sub.method == "signatureSubscribe" && plain_str(method) == Some("signatureNotification") {
            let received = object_field(result, "value").is_some_and(|v| object_field(v, "err").is_some());
            if received {
                sub.alive.set(false);
                s.subs.borrow_mut().remove(&cid);
                link.by_upstream.borrow_mut().remove(&up);
            }
        }
        return;
    }
    let Some(req) = object_field(text, "id").and_then(plain_u64) else {
        return;
    };
    let Some(cid) = link.pending.borrow_mut().remove(&req) else {
        return;
    };
    let Some(sub) = s.subs.borrow().get(&cid).cloned() else {
        // Unsubscribed meanwhile: nothing will be relayed for it; the socket's end releases it upstream.
        return;
    };
    match object_field(text, "result").and_then(plain_u64) {
        Some(up) => {
            sub.upstream.set(Some(up));
            link.by_upstream.borrow_mut().insert(up, cid);
            sub.settled.notify(usize::MAX);
        }
        None => {
            let why = object_field(text, "error")
                .and_then(|e| object_field(e, "message"))
                .and_then(plain_str)
                .unwrap_or("the upstream refused the subscription");
            tracing::debug!(network = %s.sol.net.name, method = %sub.method, why, "upstream refused a subscription");
            // Only a first subscription is refused to the client; one moved to the other side stays (its
            // next move or the socket's next reconnect retries it).
            if sub.refused.borrow().is_none() && sub.upstream.get().is_none() {
                *sub.refused.borrow_mut() = Some(why.to_string());
            }
            sub.settled.notify(usize::MAX);
        }
    }
}
