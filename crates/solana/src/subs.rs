//! Every client's Solana subscriptions on one shard, carried over a few shared upstream sockets per side.
//!
//! A *topic* is one upstream subscription: identical client subscriptions (same method and params, on the
//! same side) share it, each client keeping its own subscription id. Topics live on *links* (`subs_link`):
//! upstream WebSockets to one side (the base layer or one ER), each carrying at most
//! `limits.solana_subscriptions_per_socket` topics; a side opens another socket only when its sockets are
//! full, and a socket left with nothing to carry closes. So a thousand browser tabs following five accounts
//! each cost a handful of upstream sockets, not a thousand.
//!
//! The rules of the old per-client sockets hold per topic:
//! - `accountSubscribe` follows its account: when the delegation table sees the account move between the
//!   base layer and an ER, the topic moves to a socket of the new side (same client ids). Accounts that live
//!   on the base layer whatever any record says (`base_only`) never move.
//! - A base-layer value owned by the delegation program is the base's copy of an account being delegated
//!   (held back, never relayed) or one of the program's own accounts such as a delegation record (relayed):
//!   a record read as new as the notification tells which, and later notifications wait behind it.
//! - A lost socket reconnects and replays its topics. Meanwhile its accounts are in *limbo*: once each is
//!   subscribed again it is read over HTTP and a change missed in the gap is delivered (once, as the
//!   notification the node would have sent); a signature that landed in the gap is looked up and delivered.
//! - A signature subscription ends with its one notification, for every client that shares it.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use super::net::Dest;
use super::pubkey::Pubkey;
use super::subs_hub::{topic_key, value_hash, Gap, Held, Link, Subject, Topic, Upstream};
use super::sync::READ;
use super::table::Status;
use super::SolanaRoute;
use prism_core::call::outcome::{Caller, ProxyError};
use prism_runtime::{sleep, spawn};
use prism_telemetry::metrics::SolanaMetric;
use prism_wire::jsonscan::{nth_element, object_field, plain_str, plain_u64};

impl SolanaRoute {
    /// The topic for `method(params)` on `dest`, made (placed on a socket, subscribed, followed) if new.
    /// `account`: an `accountSubscribe`'s account; `follows`: it moves with its delegation.
    pub fn topic(
        self: &Rc<Self>,
        method: &str,
        params: &[u8],
        dest: Dest,
        account: Option<Pubkey>,
        follows: bool,
    ) -> Rc<Topic> {
        let key = topic_key(method, params, dest, follows);
        if let Some(t) = self.subs.topics.borrow().get(&key) {
            return t.clone();
        }
        let topic = Rc::new(Topic {
            subject: Subject {
                key: key.clone(),
                method: method.to_string(),
                params: params.to_vec(),
                account,
                follows,
            },
            dest: Cell::new(dest),
            upstream: Upstream::new(),
            subscribers: RefCell::new(Vec::new()),
            alive: Cell::new(true),
            held: RefCell::new(None),
            gap: Gap::default(),
        });
        self.subs.topics.borrow_mut().insert(key, topic.clone());
        self.route.shard.recorder.metrics().solana(SolanaMetric::Topics, 1);
        self.place(&topic);
        if let (Some(key), true) = (account, follows) {
            let (sol, t) = (Rc::downgrade(self), Rc::downgrade(&topic));
            spawn(async move { follow(sol, t, key).await });
        }
        topic
    }

    /// Takes client `id` of `session` off `topic`; the topic (and its upstream subscription) ends with its
    /// last client.
    pub fn leave(&self, topic: &Rc<Topic>, session: u64, id: u64) {
        topic
            .subscribers
            .borrow_mut()
            .retain(|s| !(s.session == session && s.id == id));
        if topic.subscribers.borrow().is_empty() {
            self.end(topic);
        }
    }

    /// Ends `topic`: released upstream, off its socket, out of the hub.
    fn end(&self, topic: &Rc<Topic>) {
        if !topic.alive.replace(false) {
            return;
        }
        self.unplace(topic);
        let mut topics = self.subs.topics.borrow_mut();
        if topics.get(&topic.subject.key).is_some_and(|t| Rc::ptr_eq(t, topic)) {
            topics.remove(&topic.subject.key);
        }
        self.route.shard.recorder.metrics().solana(SolanaMetric::Topics, -1);
        topic.upstream.settled.notify(usize::MAX);
    }

    /// Puts `topic` on a socket of its side with room (a new one when all are full) and subscribes it.
    fn place(self: &Rc<Self>, topic: &Rc<Topic>) {
        let dest = topic.dest.get();
        let found = self
            .subs
            .links
            .borrow()
            .iter()
            .find(|l| l.dest == dest && !l.closing.get() && l.carried.get() < self.subs.per_socket)
            .cloned();
        let link = found.unwrap_or_else(|| {
            let id = self.subs.next_link.get() + 1;
            self.subs.next_link.set(id);
            let link = Link::new(id, dest);
            self.subs.links.borrow_mut().push(link.clone());
            self.route
                .shard
                .recorder
                .metrics()
                .solana(SolanaMetric::UpstreamSockets, 1);
            let (sol, l) = (Rc::downgrade(self), link.clone());
            spawn(async move { super::subs_link::run(sol, l).await });
            link
        });
        link.carried.set(link.carried.get() + 1);
        *topic.upstream.link.borrow_mut() = Some(link.clone());
        topic.upstream.id.set(None);
        link.subscribe(topic);
    }

    /// Takes `topic` off its socket (unsubscribed upstream when it was confirmed); a socket left with
    /// nothing to carry closes.
    fn unplace(&self, topic: &Topic) {
        let Some(link) = topic.upstream.link.borrow_mut().take() else {
            return;
        };
        if let Some(up) = topic.upstream.id.take() {
            link.by_upstream.borrow_mut().remove(&up);
            link.unsubscribe(&topic.subject.method, up);
        }
        link.carried.set(link.carried.get().saturating_sub(1));
        if link.carried.get() == 0 && !link.closing.replace(true) {
            self.subs.links.borrow_mut().retain(|l| !Rc::ptr_eq(l, &link));
            self.route
                .shard
                .recorder
                .metrics()
                .solana(SolanaMetric::UpstreamSockets, -1);
            if let Some(out) = link.out.borrow().as_ref() {
                out.close();
            }
        }
    }

    /// Moves `topic` to `dest`: off the old side's socket, onto one of the new side's; same client ids.
    fn move_topic(self: &Rc<Self>, topic: &Rc<Topic>, dest: Dest) {
        if topic.dest.get() == dest || !topic.alive.get() {
            return;
        }
        tracing::debug!(network = %self.net.name, account = ?topic.subject.account, from = self.net.dest_name(topic.dest.get()),
            to = self.net.dest_name(dest), "subscription follows its account");
        self.unplace(topic);
        topic.dest.set(dest);
        // The other side's slots are another clock.
        topic.gap.last.set(None);
        self.place(topic);
    }

    /// A notification of `topic` arrived on a socket of `side`: relayed to every client, held back while a
    /// base-layer value owned by the delegation program is judged, or dropped when it is the base's copy of
    /// a delegated account.
    pub(super) fn deliver(self: &Rc<Self>, topic: &Rc<Topic>, side: Dest, method: &[u8], result: &[u8]) {
        let program = self.net.program.to_base58();
        let owned = side == Dest::Base
            && object_field(result, "value")
                .and_then(|v| object_field(v, "owner"))
                .and_then(plain_str)
                == Some(program.as_str());
        let mut flood = Vec::new();
        if let Some(held) = topic.held.borrow_mut().as_mut() {
            held.push(Held {
                method: method.to_vec(),
                result: result.to_vec(),
                owned,
            });
            // Bounded: a flood while the verdict is out is relayed as it came rather than kept.
            if held.len() >= MAX_HELD {
                flood = std::mem::take(held);
            } else {
                return;
            }
        }
        if !flood.is_empty() {
            for h in flood {
                self.relay(topic, &h.method, &h.result);
            }
            return;
        }
        if let Some(key) = topic.subject.account.filter(|_| owned && topic.subject.follows) {
            if !self.table.get(&key).is_some_and(|e| e.base_only.get()) {
                let slot = object_field(result, "context")
                    .and_then(|c| object_field(c, "slot"))
                    .and_then(plain_u64)
                    .unwrap_or(0);
                *topic.held.borrow_mut() = Some(vec![Held {
                    method: method.to_vec(),
                    result: result.to_vec(),
                    owned: true,
                }]);
                spawn(settle_held(Rc::downgrade(self), topic.clone(), key, slot));
                return;
            }
        }
        self.relay(topic, method, result);
    }

    fn relay(&self, topic: &Rc<Topic>, method: &[u8], result: &[u8]) {
        topic.note_value(result);
        topic.fan_out(method, result);
        // A signature subscription ends with its one notification (the node drops it too); a "received"
        // notification (no `err` field) is not the end.
        if topic.subject.method == "signatureSubscribe" && plain_str(method) == Some("signatureNotification") {
            let landed = object_field(result, "value").is_some_and(|v| object_field(v, "err").is_some());
            if landed {
                self.end_signature(topic);
            }
        }
    }

    /// A signature topic has delivered its notification: every client's subscription ends with it.
    fn end_signature(&self, topic: &Rc<Topic>) {
        // The node dropped it already: nothing to release upstream.
        if let (Some(up), Some(link)) = (topic.upstream.id.take(), topic.upstream.link.borrow().as_ref()) {
            link.by_upstream.borrow_mut().remove(&up);
        }
        for s in topic.subscribers.borrow_mut().drain(..) {
            if let Some(owner) = s.owner.upgrade() {
                owner.borrow_mut().remove(&s.id);
            }
        }
        self.end(topic);
    }

    /// The upstream answered `topic`'s subscribe on `link`: `Some(id)` confirmed, `None` refused (`why`).
    pub(super) fn settle(self: &Rc<Self>, topic: &Rc<Topic>, link: &Rc<Link>, up: Option<u64>, why: &str) {
        match up {
            Some(up) => {
                topic.upstream.id.set(Some(up));
                let first = !topic.upstream.confirmed_once.replace(true);
                link.by_upstream.borrow_mut().insert(up, Rc::downgrade(topic));
                topic.upstream.settled.notify(usize::MAX);
                if topic.gap.limbo.replace(false) {
                    match topic.subject.account {
                        Some(_) => self.read_account(topic, true),
                        None => {
                            let (sol, t) = (self.clone(), topic.clone());
                            spawn(async move { signature_caught_up(&sol, &t).await });
                        }
                    }
                } else if first && topic.subject.account.is_some() {
                    // What the account is now, so a change missed in a later gap can be told from no change.
                    self.read_account(topic, false);
                }
            }
            None => {
                tracing::debug!(network = %self.net.name, method = %topic.subject.method, why, "upstream refused a subscription");
                // Only a first subscription is refused to its clients; one moved to the other side stays (its
                // next move or the socket's next reconnect retries it).
                if !topic.upstream.confirmed_once.get() {
                    *topic.upstream.refused.borrow_mut() = Some(why.to_string());
                    self.end(topic);
                }
                topic.upstream.settled.notify(usize::MAX);
            }
        }
    }
}

impl SolanaRoute {
    /// The side `key`'s account subscription goes to now: its ER when delegated to one this router serves
    /// (an ER it does not serve is the client's error), else the base layer.
    pub async fn subscription_side(self: &Rc<Self>, key: Pubkey, deadline: Instant) -> Result<Dest, ProxyError> {
        match self.status(key, deadline).await? {
            Status::Delegated { er: Some(k), .. } => Ok(Dest::Er(k)),
            Status::Delegated { er: None, .. } => Err(ProxyError::Rejected {
                code: -32602,
                message: "the account is delegated to an ephemeral rollup this router does not serve".into(),
            }),
            _ => Ok(Dest::Base),
        }
    }
}

/// Notifications one topic holds while a verdict is out (`settle_held`), at most.
const MAX_HELD: usize = 1024;

/// Tells whether the held notifications of `topic` (from `slot` on) are the account's state, then relays
/// those that are, in order, and drops the base layer's copies of a delegated account.
async fn settle_held(sol: Weak<SolanaRoute>, topic: Rc<Topic>, key: Pubkey, slot: u64) {
    let Some(s) = sol.upgrade() else { return };
    let verdict = s
        .program_owned(key, slot, Instant::now() + Duration::from_secs(5))
        .await;
    let held = topic.held.take().unwrap_or_default();
    if !topic.alive.get() {
        return;
    }
    let copy = matches!(verdict, super::base_only::ProgramOwned::DelegatedCopy(_));
    for h in held {
        if !(h.owned && copy) && topic.alive.get() {
            s.relay(&topic, &h.method, &h.result);
        }
    }
}

/// Moves an account topic whenever the delegation table changes its mind about the account. While the
/// account is in limbo (its record subscription lost) the record is read again before trusting it, at most
/// once per wait, the wait doubling from 0.5 s to 30 s while the reads fail: the base link's own reconnect
/// rereads every record, and a thousand followers must not read theirs in a loop.
async fn follow(sol: Weak<SolanaRoute>, topic: Weak<Topic>, key: Pubkey) {
    let side = |status: Status| match status {
        Status::Delegated { er: Some(k), .. } => Some(Dest::Er(k)),
        Status::Undelegated => Some(Dest::Base),
        _ => None,
    };
    let mut wait = LIMBO_READ_FIRST;
    let mut next_read = Instant::now();
    loop {
        let (Some(s), Some(t)) = (sol.upgrade(), topic.upgrade()) else {
            return;
        };
        if !t.alive.get() || s.route.life.shutdown.is_triggered() {
            return;
        }
        let entry = s.watch(key);
        let dest = match entry.trusted() {
            Some(_) => {
                wait = LIMBO_READ_FIRST;
                s.subscription_side(key, Instant::now() + Duration::from_secs(5))
                    .await
                    .ok()
            }
            None if !entry.fetching.get() && Instant::now() >= next_read => {
                let _ = s.refresh(&entry, Instant::now() + Duration::from_secs(5)).await;
                next_read = Instant::now() + wait;
                wait = (wait * 2).min(LIMBO_READ_MAX);
                side(entry.status.get())
            }
            None => None,
        };
        if let Some(d) = dest {
            s.move_topic(&t, d);
        }
        // Listening only now (the reads above notify the entry themselves): a change the table took while
        // they ran is seen here, without I/O.
        let listener = entry.changed.listen();
        if entry.trusted().and_then(side).is_some_and(|d| d != t.dest.get()) {
            continue;
        }
        // Every change of the entry notifies it, and one taken since our reads was checked above: the tick is
        // a backstop, not a poll (a thousand followers ticking every second would cost a shard ~1 % CPU).
        let tick = if entry.trusted().is_some() {
            Duration::from_secs(30)
        } else {
            next_read.saturating_duration_since(Instant::now())
        };
        let sd = s.route.life.shutdown.clone();
        drop((s, t));
        futures_lite::future::or(futures_lite::future::or(listener, sleep(tick)), sd.triggered()).await;
    }
}

/// A follower's first wait between record reads while its account is in limbo, and the longest.
const LIMBO_READ_FIRST: Duration = Duration::from_millis(500);
const LIMBO_READ_MAX: Duration = Duration::from_secs(30);

/// After a lost socket, once a signature topic is subscribed again: the signature is looked up on its side
/// and, when it landed at the subscription's commitment, delivered (once: a node that notifies on the new
/// subscription too finds the topic ended) and ended. Other topics' next notification is the truth; accounts
/// are read in batches (`subs_read`, `observed`).
async fn signature_caught_up(sol: &Rc<SolanaRoute>, topic: &Rc<Topic>) {
    if topic.subject.method != "signatureSubscribe" {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let dest = topic.dest.get();
    let Some(sig) = nth_element(&topic.subject.params, 0).and_then(plain_str) else {
        return;
    };
    let mut params = Vec::with_capacity(128);
    params.extend_from_slice(b"[[");
    prism_wire::rpc::wire::write_json_str(&mut params, sig);
    params.extend_from_slice(br#"],{"searchTransactionHistory":false}]"#);
    let out = sol
        .call_on(
            dest,
            READ,
            "getSignatureStatuses",
            Some(&params),
            &Caller::default(),
            deadline,
        )
        .await;
    let Some(result) = out.result_value() else { return };
    let slot = object_field(result, "context")
        .and_then(|c| object_field(c, "slot"))
        .and_then(plain_u64)
        .unwrap_or(0);
    let Some(status) = object_field(result, "value")
        .and_then(|v| nth_element(v, 0))
        .filter(|s| *s != b"null")
    else {
        return;
    };
    let wanted = nth_element(&topic.subject.params, 1)
        .and_then(|c| object_field(c, "commitment"))
        .and_then(plain_str)
        .unwrap_or("finalized");
    let reached = object_field(status, "confirmationStatus").and_then(plain_str);
    let rank = |c: &str| match c {
        "processed" | "recent" => 0,
        "confirmed" | "single" | "singleGossip" => 1,
        _ => 2,
    };
    if reached.is_none_or(|r| rank(r) < rank(wanted)) || !topic.alive.get() {
        return;
    }
    let err = object_field(status, "err").unwrap_or(b"null");
    let mut note = Vec::with_capacity(64 + err.len());
    note.extend_from_slice(br#"{"context":{"slot":"#);
    note.extend_from_slice(itoa::Buffer::new().format(slot).as_bytes());
    note.extend_from_slice(br#"},"value":{"err":"#);
    note.extend_from_slice(err);
    note.extend_from_slice(b"}}");
    sol.route.shard.recorder.metrics().solana(SolanaMetric::CaughtUp, 1);
    sol.deliver(topic, dest, br#""signatureNotification""#, &note);
}

impl SolanaRoute {
    /// `topic`'s account read on `dest` at `slot` (`subs_read`): a baseline is remembered; a catch-up
    /// after a lost socket delivers the value when it differs from the last one delivered (what the node
    /// would have notified in the gap). A value older than the last notification, or read for a topic
    /// that moved, ended or lost its socket again, tells nothing.
    pub(super) fn observed(self: &Rc<Self>, topic: &Rc<Topic>, dest: Dest, slot: u64, value: &[u8], catch_up: bool) {
        if !topic.alive.get() || topic.dest.get() != dest || topic.gap.limbo.get() {
            return;
        }
        let hash = value_hash(value);
        match topic.gap.last.get() {
            None => topic.gap.last.set(Some((slot, hash))),
            Some((s, h)) if s > slot || h == hash || !catch_up => {}
            Some(_) => {
                let mut note = Vec::with_capacity(48 + value.len());
                note.extend_from_slice(br#"{"context":{"slot":"#);
                note.extend_from_slice(itoa::Buffer::new().format(slot).as_bytes());
                note.extend_from_slice(br#"},"value":"#);
                note.extend_from_slice(value);
                note.push(b'}');
                self.route.shard.recorder.metrics().solana(SolanaMetric::CaughtUp, 1);
                self.deliver(topic, dest, br#""accountNotification""#, &note);
            }
        }
    }
}
