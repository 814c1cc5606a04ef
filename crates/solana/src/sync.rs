//! Keeping the delegation table true: a record is read from the base layer over HTTP when first needed,
//! and one base-layer WebSocket per shard carries an `accountSubscribe` (commitment `confirmed`) for every
//! record PDA in the table. A confirmed subscription triggers a refetch (the newer slot wins) to cover the
//! gap between the first read and the subscription. When the socket drops, every account goes into limbo:
//! requests touching it refetch before routing while the link reconnects and resubscribes.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use async_tungstenite::tungstenite::Message;

use super::net::Dest;
use super::pubkey::Pubkey;
use super::table::{Entry, Status};
use super::SolanaRoute;
use prism_core::call::forward::forward_as;
use prism_core::call::outcome::{CallOutcome, Caller, ProxyError};
use prism_runtime::queue::LocalQueue;
use prism_runtime::{sleep, spawn, timeout_at};
use prism_telemetry::metrics::SolanaMetric;
use prism_transport::ws::{connect_ws, pump, PumpEnd, Reconnect};
use prism_wire::jsonscan::{nth_element, object_field, plain_str, plain_u64};
use prism_wire::rpc::methods::{Family, HeadHint, Kind, MethodId, MethodInfo};
use prism_wire::rpc::Call;

/// The longest Prism waits for a delegation record read.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

pub const READ: MethodInfo = MethodInfo {
    id: MethodId::Other,
    kind: Kind::Read,
    family: Family::Light,
    head: HeadHint::None,
    block_param: None,
    cacheable: false,
};

/// This shard's base-layer WebSocket for delegation records.
#[derive(Default)]
pub struct BaseLink {
    out: RefCell<Option<Rc<LocalQueue<Message>>>>,
    /// Request id of a pending `accountSubscribe` → account.
    pending: RefCell<AHashMap<u64, Pubkey>>,
    /// Upstream subscription id → account.
    by_sub: RefCell<AHashMap<u64, Pubkey>>,
    next_id: Cell<u64>,
    started: Cell<bool>,
    pub connected: Cell<bool>,
    /// No base-layer provider has a WebSocket: nothing will ever confirm a subscription.
    pub unavailable: Cell<bool>,
    /// Counts base-link connections: a resubscription pass belongs to one.
    generation: Cell<u64>,
}

impl BaseLink {
    fn subscribe(&self, entry: &Entry) {
        let Some(out) = self.out.borrow().clone() else { return }; // sent on connect
        if entry.asked.replace(true) {
            return;
        }
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        self.pending.borrow_mut().insert(id, entry.account);
        let msg = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"accountSubscribe","params":["{}",{{"encoding":"base64","commitment":"confirmed"}}]}}"#,
            entry.record_pda
        );
        let _ = out.push(Message::Text(msg));
    }
}

impl SolanaRoute {
    /// Reads `account` from the base layer (`getAccountInfo`, base64, `confirmed`): Prism's own reads of
    /// delegation records and address lookup tables.
    pub async fn read_base_account(self: &Rc<Self>, account: &Pubkey, deadline: Instant) -> CallOutcome {
        let params = format!(r#"["{account}",{{"encoding":"base64","commitment":"confirmed"}}]"#);
        self.call_on(
            Dest::Base,
            READ,
            "getAccountInfo",
            Some(params.as_bytes()),
            &Caller::default(),
            deadline,
        )
        .await
    }

    /// Sends `method(params)` to one side, through the normal routing path (breakers, retries, pools).
    pub async fn call_on(
        &self,
        dest: Dest,
        info: MethodInfo,
        method: &str,
        params: Option<&[u8]>,
        caller: &Caller,
        deadline: Instant,
    ) -> CallOutcome {
        let call = Call {
            id: Some(b"1"),
            method: method.into(),
            params,
        };
        // Each side keeps its own clock, and each commitment level its own view of it: the caller's mark is
        // per side and commitment, so `context.slot` never goes backwards within one.
        let config = config_object(params);
        let commitment = match config.and_then(|c| object_field(c, "commitment")).and_then(plain_str) {
            Some("processed") | Some("recent") => 0,
            Some("confirmed") | Some("single") | Some("singleGossip") => 1,
            _ => 2, // the node's default: finalized
        };
        let (lane, lanes) = self.route.live.mark_lane(dest.code(), commitment);
        let caller = Caller {
            providers: self.net.providers(dest),
            mark: caller.mark.on_side(lane, lanes),
            floor: config
                .and_then(|c| object_field(c, "minContextSlot"))
                .and_then(plain_u64)
                .unwrap_or(0),
            ..*caller
        };
        let out = forward_as(&self.route, &call, info, &caller, deadline, &self.ids).await;
        match (dest, &out) {
            (Dest::Er(k), CallOutcome::Failed(ProxyError::AllDown { .. })) => self.er_down(k),
            _ => out,
        }
    }

    /// ER `k` has no provider to route to: say which ER, and why when its slot stopped.
    fn er_down(&self, k: usize) -> CallOutcome {
        let name = self.net.ers.get(k).map_or("?", |e| e.name.as_str());
        let live = &self.route.live;
        let stalled = prism_wire::rpc::ProviderId::in_set(self.net.providers(Dest::Er(k)), self.route.upstreams.len())
            .filter(|&p| {
                live.providers()[p]
                    .slots
                    .stalled
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .map(|p| live.slot_of(p).0)
            .max();
        let message = match stalled {
            Some(slot) => format!(
                "Ephemeral rollup {name} is down (its slot stopped advancing at {slot}); its accounts cannot be served until it is back"
            ),
            _ => format!("Ephemeral rollup {name} is down; its accounts cannot be served until it is back"),
        };
        CallOutcome::Failed(ProxyError::Rejected { code: -32603, message })
    }
}

/// The config object of Solana params: the last element that is an object.
fn config_object(params: Option<&[u8]>) -> Option<&[u8]> {
    let params = params?;
    (0..8)
        .map_while(|n| nth_element(params, n))
        .filter(|v| v.first() == Some(&b'{'))
        .last()
}

impl SolanaRoute {
    /// The table entry for `account`, subscribing to its record when it is new.
    pub fn watch(self: &Rc<Self>, account: Pubkey) -> Rc<Entry> {
        let (entry, new) = self.table.entry(&self.net, account);
        if new {
            self.route
                .shard
                .recorder
                .metrics()
                .solana(SolanaMetric::TrackedAccounts, 1);
            self.net.counts.tracked.fetch_add(1, Ordering::Relaxed);
            self.ensure_link();
            self.link.subscribe(&entry);
        }
        entry
    }

    /// Whether `account` is delegated, and where: from the table when trusted, else read from the base
    /// layer (one read per shard at a time; others wait for it). A failed read is an error, never
    /// "undelegated".
    pub async fn status(self: &Rc<Self>, account: Pubkey, deadline: Instant) -> Result<Status, ProxyError> {
        if super::base_only::by_address(&account, &self.net.program) {
            return Ok(Status::Undelegated);
        }
        let entry = self.watch(account);
        let deadline = deadline.min(Instant::now() + FETCH_TIMEOUT);
        let mut waited = false;
        loop {
            if let Some(s) = entry.trusted() {
                return Ok(s);
            }
            // Touched while its subscription is not back: it goes before the resubscription pass reaches it.
            if !entry.asked.get() {
                self.link.subscribe(&entry);
            }
            if entry.fetching.get() && !waited {
                let listener = entry.changed.listen();
                if entry.fetching.get() {
                    let _ = timeout_at(deadline, listener).await;
                }
                waited = true;
                continue;
            }
            // Freshly read: good for this request even while no subscription keeps it fresh.
            self.refresh(&entry, deadline).await?;
            return Ok(entry.status.get());
        }
    }

    /// Reads `entry`'s record from the base layer and applies it.
    pub async fn refresh(self: &Rc<Self>, entry: &Rc<Entry>, deadline: Instant) -> Result<(), ProxyError> {
        entry.fetching.set(true);
        self.route.shard.recorder.metrics().solana(SolanaMetric::RecordReads, 1);
        let outcome = self.read_base_account(&entry.record_pda, deadline).await;
        entry.fetching.set(false);
        let result = match outcome {
            CallOutcome::Answer {
                body,
                value,
                is_error: false,
                ..
            } => {
                let result = &body[value];
                let slot = object_field(result, "context")
                    .and_then(|c| object_field(c, "slot"))
                    .and_then(plain_u64);
                match (slot, object_field(result, "value")) {
                    (Some(slot), Some(v)) => {
                        let moved = entry.apply(&self.net, slot, v, true);
                        self.route
                            .shard
                            .recorder
                            .metrics()
                            .solana(SolanaMetric::DelegatedAccounts, moved);
                        self.net.counts.delegated.fetch_add(moved, Ordering::Relaxed);
                        // Trusted only once a confirmed subscription keeps it fresh: a read made before the
                        // subscription is back serves this request, not the next.
                        entry.set_limbo(&self.net, entry.sub.get().is_none());
                        Ok(())
                    }
                    _ => Err(ProxyError::NotServed(
                        "delegation status unknown: the base layer's answer had no context or value",
                    )),
                }
            }
            CallOutcome::Answer { .. } => Err(ProxyError::NotServed(
                "delegation status unknown: the base layer refused the record read",
            )),
            CallOutcome::Failed(e) => {
                tracing::warn!(network = %self.net.name, account = %entry.account, error = %e.shown(&*self.route), "delegation record read failed");
                Err(ProxyError::NotServed(
                    "delegation status unknown: the base layer did not answer",
                ))
            }
        };
        entry.changed.notify(usize::MAX);
        result
    }

    /// Subscribes to `account`'s record and waits (bounded) until the base layer confirmed it: used before
    /// answering a transaction that delegates the account, so the delegation cannot slip past.
    pub async fn watch_confirmed(self: &Rc<Self>, account: Pubkey, deadline: Instant) {
        let entry = self.watch(account);
        let deadline = deadline.min(Instant::now() + Duration::from_secs(2));
        while entry.sub.get().is_none() && !self.link.unavailable.get() && Instant::now() < deadline {
            let listener = entry.changed.listen();
            if entry.sub.get().is_some() {
                break;
            }
            if timeout_at(deadline, listener).await.is_err() {
                break;
            }
        }
    }

    fn ensure_link(self: &Rc<Self>) {
        if self.link.started.replace(true) {
            return;
        }
        let weak = Rc::downgrade(self);
        spawn(async move { run_link(weak).await });
    }
}

/// Keeps the base-layer link up: connect (rotating over base providers with a WebSocket), resubscribe every
/// record, read notifications; on loss put every account in limbo and reconnect with backoff.
async fn run_link(sol: Weak<SolanaRoute>) {
    let mut backoff = Reconnect::default();
    let mut attempt = 0usize;
    loop {
        let Some(s) = sol.upgrade() else { return };
        if s.route.life.shutdown.is_triggered() {
            return;
        }
        let candidates: Vec<usize> = s
            .net
            .base_providers
            .iter()
            .copied()
            .filter(|&i| s.route.upstreams[i].ws.is_some())
            .collect();
        if candidates.is_empty() {
            s.link.unavailable.set(true);
            tracing::warn!(network = %s.net.name, "no base-layer provider has a ws_url: delegation status is read on every request");
            return;
        }
        let p = candidates[attempt % candidates.len()];
        attempt += 1;
        let ws = s.route.upstreams[p].ws.clone().expect("filtered");
        let deadline = Instant::now() + Duration::from_millis(s.route.ws.connect_timeout_ms);
        let socket = match connect_ws(
            &ws.url,
            &ws.addrs,
            s.route.ws.tls.clone(),
            &s.route.upstreams[p].pool.headers(),
            deadline,
        )
        .await
        {
            Ok(socket) => socket,
            Err(e) => {
                tracing::debug!(network = %s.net.name, provider = %s.route.upstreams[p].name, error = %e, "base-layer WebSocket connect failed");
                drop(s);
                sleep(backoff.after_failure()).await;
                continue;
            }
        };
        backoff.connected();
        tracing::info!(network = %s.net.name, provider = %s.route.upstreams[p].name, accounts = s.table.len(), "delegation subscriptions connected");
        let out: Rc<LocalQueue<Message>> = LocalQueue::new(1 << 20);
        *s.link.out.borrow_mut() = Some(out.clone());
        s.link.connected.set(true);
        s.link.pending.borrow_mut().clear();
        s.link.by_sub.borrow_mut().clear();
        let entries = s.table.all();
        for entry in &entries {
            entry.asked.set(false);
        }
        let generation = s.link.generation.get() + 1;
        s.link.generation.set(generation);
        let per_sec = s.resubscribe_per_sec;
        spawn(resubscribe(sol.clone(), entries, generation, per_sec));
        let ping = s.route.ws.ping;
        drop(s);
        let weak = sol.clone();
        let socket_done = pump(socket, out.clone(), ping, move |text| {
            let Some(s) = weak.upgrade() else { return false };
            on_message(&s, text);
            true
        });
        let shutdown = async {
            if let Some(s) = sol.upgrade() {
                let sd = s.route.life.shutdown.clone();
                drop(s);
                sd.triggered().await;
            }
            PumpEnd::Closed
        };
        let end = futures_lite::future::or(socket_done, shutdown).await;
        out.close();
        let Some(s) = sol.upgrade() else { return };
        *s.link.out.borrow_mut() = None;
        s.link.connected.set(false);
        s.route.shard.recorder.metrics().solana(SolanaMetric::LinkDrops, 1);
        if s.route.life.shutdown.is_triggered() {
            return;
        }
        let why = match end {
            PumpEnd::Unresponsive => {
                s.route.shard.recorder.metrics().ws_unresponsive();
                "stopped answering pings"
            }
            PumpEnd::Closed => "lost",
        };
        tracing::warn!(network = %s.net.name, provider = %s.route.upstreams[p].name, why, "base-layer WebSocket down: delegated accounts in limbo until refetched");
        for entry in s.table.all() {
            entry.set_limbo(&s.net, true);
            entry.sub.set(None);
            entry.asked.set(false);
            entry.changed.notify(usize::MAX);
        }
        drop(s);
        sleep(backoff.current()).await;
    }
}

/// Subscribes every tracked record again after a reconnect, `per_sec` a second in tenth-of-a-second
/// batches, skipping the ones a request already asked for (they go first, from `status`). Stops when the
/// link it was started for is gone.
async fn resubscribe(sol: Weak<SolanaRoute>, entries: Vec<Rc<Entry>>, generation: u64, per_sec: usize) {
    let batch = (per_sec / 10).max(1);
    let started = Instant::now();
    let mut sent = 0usize;
    for chunk in entries.chunks(batch) {
        {
            let Some(s) = sol.upgrade() else { return };
            if s.link.generation.get() != generation || !s.link.connected.get() {
                return;
            }
            for entry in chunk {
                if !entry.asked.get() {
                    s.link.subscribe(entry);
                    sent += 1;
                }
            }
        }
        if chunk.len() == batch {
            sleep(Duration::from_millis(100)).await;
        }
    }
    if let Some(s) = sol.upgrade() {
        tracing::info!(network = %s.net.name, records = entries.len(), sent, took_ms = started.elapsed().as_millis() as u64, "record subscriptions restored");
    }
}

/// What the record link reads in one message from the base layer's socket. Pure, so fuzzing reaches
/// every byte an upstream can send here; never panics.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFrame<'a> {
    /// `{"method":"accountNotification","params":{"result":{"context":{"slot":N},"value":...},"subscription":ID}}`
    Notification {
        subscription: u64,
        slot: u64,
        value: &'a [u8],
    },
    /// A reply to our `accountSubscribe` `id`: the subscription id, `None` when refused.
    Reply {
        id: u64,
        subscription: Option<u64>,
    },
    Ignored,
}

#[doc(hidden)]
pub fn parse_record_frame(text: &[u8]) -> RecordFrame<'_> {
    if let Some(params) = object_field(text, "params") {
        let sub = object_field(params, "subscription").and_then(plain_u64);
        let result = object_field(params, "result");
        let slot = result
            .and_then(|r| object_field(r, "context"))
            .and_then(|c| object_field(c, "slot"))
            .and_then(plain_u64);
        return match (sub, slot, result.and_then(|r| object_field(r, "value"))) {
            (Some(subscription), Some(slot), Some(value)) => RecordFrame::Notification {
                subscription,
                slot,
                value,
            },
            _ => RecordFrame::Ignored,
        };
    }
    match object_field(text, "id").and_then(plain_u64) {
        Some(id) => RecordFrame::Reply {
            id,
            subscription: object_field(text, "result").and_then(plain_u64),
        },
        None => RecordFrame::Ignored,
    }
}

fn on_message(s: &Rc<SolanaRoute>, text: &[u8]) {
    let (id, subscription) = match parse_record_frame(text) {
        RecordFrame::Notification {
            subscription,
            slot,
            value,
        } => {
            let account = s.link.by_sub.borrow().get(&subscription).copied();
            if let Some(entry) = account.and_then(|a| s.table.get(&a)) {
                let moved = entry.apply(&s.net, slot, value, false);
                s.route
                    .shard
                    .recorder
                    .metrics()
                    .solana(SolanaMetric::DelegatedAccounts, moved);
                s.net.counts.delegated.fetch_add(moved, Ordering::Relaxed);
            }
            return;
        }
        RecordFrame::Reply { id, subscription } => (id, subscription),
        RecordFrame::Ignored => return,
    };
    let Some(account) = s.link.pending.borrow_mut().remove(&id) else {
        return;
    };
    let Some(entry) = s.table.get(&account) else { return };
    match subscription {
        Some(sub) => {
            s.link.by_sub.borrow_mut().insert(sub, account);
            entry.sub.set(Some(sub));
            entry.changed.notify(usize::MAX);
            // Close the gap between the first read and the subscription: read again, the newer slot wins.
            let s = s.clone();
            spawn(async move {
                let _ = s.refresh(&entry, Instant::now() + FETCH_TIMEOUT).await;
            });
        }
        None => {
            tracing::warn!(network = %s.net.name, account = %account, "base layer refused a record subscription; reading it on every request");
            entry.set_limbo(&s.net, true);
            entry.changed.notify(usize::MAX);
        }
    }
}
