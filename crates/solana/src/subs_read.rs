//! The account reads the subscription hub (`subs`) makes: a baseline once an account topic is first live
//! upstream, and after a lost socket the read that tells whether a change was missed while it was down.
//! Reads are queued and made in batches (`getMultipleAccounts`, up to [`BATCH`] accounts per call, one call
//! per side and subscription config), so a socket of 1 000 accounts coming back costs ten calls, not a
//! thousand, and a thousand new subscriptions ten more.

use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use ahash::AHashMap;

use super::net::Dest;
use super::subs_hub::Topic;
use super::sync::READ;
use super::SolanaRoute;
use prism_core::call::outcome::{CallOutcome, Caller};
use prism_runtime::{sleep, spawn};
use prism_wire::jsonscan::{nth_element, object_field, plain_u64};

/// Accounts per `getMultipleAccounts` (the method's own limit).
pub const BATCH: usize = 100;

/// How long reads wait to be batched with others.
const GATHER: Duration = Duration::from_millis(20);

impl SolanaRoute {
    /// Queues a read of `topic`'s account (see the module doc).
    pub(super) fn read_account(self: &Rc<Self>, topic: &Rc<Topic>, catch_up: bool) {
        self.subs.reads.queue.borrow_mut().push((topic.clone(), catch_up));
        if !self.subs.reads.running.replace(true) {
            let sol = Rc::downgrade(self);
            spawn(async move { drain(sol).await });
        }
    }
}

/// Topics to read with one call each [`BATCH`], and whether each read is a catch-up.
type Batch = Vec<(Rc<Topic>, bool)>;

/// Makes the queued reads, batch by batch, until the queue is empty.
async fn drain(sol: Weak<SolanaRoute>) {
    loop {
        sleep(GATHER).await;
        let Some(s) = sol.upgrade() else { return };
        let queued: Vec<(Rc<Topic>, bool)> = s.subs.reads.queue.borrow_mut().drain(..).collect();
        if queued.is_empty() || s.route.life.shutdown.is_triggered() {
            s.subs.reads.running.set(false);
            return;
        }
        // By side and subscription config: one call answers a whole group (up to `BATCH`).
        let mut groups: AHashMap<(u8, Vec<u8>), Batch> = AHashMap::new();
        for (topic, catch_up) in queued {
            if !topic.alive.get() || topic.subject.account.is_none() {
                continue;
            }
            let config = nth_element(&topic.subject.params, 1).unwrap_or_default().to_vec();
            groups
                .entry((topic.dest.get().code(), config))
                .or_default()
                .push((topic, catch_up));
        }
        for ((side, config), topics) in groups {
            for chunk in topics.chunks(BATCH) {
                read_batch(&s, Dest::from_code(side), &config, chunk).await;
            }
        }
    }
}

/// One `getMultipleAccounts` on `dest` for `topics` (all with subscription config `config`).
async fn read_batch(s: &Rc<SolanaRoute>, dest: Dest, config: &[u8], topics: &[(Rc<Topic>, bool)]) {
    let mut params = Vec::with_capacity(48 * topics.len() + config.len() + 8);
    params.extend_from_slice(b"[[");
    for (i, (topic, _)) in topics.iter().enumerate() {
        if i > 0 {
            params.push(b',');
        }
        let key = topic.subject.account.map(|k| k.to_base58()).unwrap_or_default();
        prism_wire::rpc::wire::write_json_str(&mut params, &key);
    }
    params.push(b']');
    if !config.is_empty() {
        params.push(b',');
        params.extend_from_slice(config);
    }
    params.push(b']');
    let deadline = Instant::now() + Duration::from_secs(5);
    let out = s
        .call_on(
            dest,
            READ,
            "getMultipleAccounts",
            Some(&params),
            &Caller::default(),
            deadline,
        )
        .await;
    let CallOutcome::Answer {
        body,
        value,
        is_error: false,
        ..
    } = out
    else {
        tracing::debug!(network = %s.net.name, side = s.net.dest_name(dest), accounts = topics.len(), "subscription account read failed");
        return;
    };
    let result = &body[value];
    let Some(slot) = object_field(result, "context")
        .and_then(|c| object_field(c, "slot"))
        .and_then(plain_u64)
    else {
        return;
    };
    let Some(values) = object_field(result, "value") else {
        return;
    };
    for (i, (topic, catch_up)) in topics.iter().enumerate() {
        if let Some(v) = nth_element(values, i) {
            s.observed(topic, dest, slot, v, *catch_up);
        }
    }
}
