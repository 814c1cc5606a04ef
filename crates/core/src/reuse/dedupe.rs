//! In-flight deduplication, one table per shard per network: identical reads that arrive while one is in
//! flight wait for it instead of going upstream again; each caller then gets the shared answer with its own
//! id. Only reads join. If the leading call is cancelled (its client went away), waiters are released and
//! go upstream themselves, so no request is ever lost to a join.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ahash::AHashMap;
use event_listener::Event;

use crate::call::outcome::{CallOutcome, ProxyError};

/// The answer one leader shares.
#[derive(Clone)]
enum LeaderAnswer {
    Answer {
        value: Rc<[u8]>,
        is_error: bool,
        /// Who answered the leader: a follower's answer is the same provider's, joined.
        provider: Option<prism_wire::rpc::ProviderId>,
    },
    Failed(ProxyError),
    /// The leader was dropped before answering.
    Abandoned,
}

#[derive(Default)]
pub struct Slot {
    result: RefCell<Option<LeaderAnswer>>,
    done: Cell<bool>,
    event: Event,
    joined: Cell<u64>,
}

impl Slot {
    /// Waits for the leader. `None` when it was abandoned: go upstream yourself.
    pub async fn wait(&self) -> Option<CallOutcome> {
        loop {
            if self.done.get() {
                break;
            }
            let listener = self.event.listen();
            if self.done.get() {
                break;
            }
            listener.await;
        }
        match self.result.borrow().clone()? {
            LeaderAnswer::Answer {
                value,
                is_error,
                provider,
            } => Some(CallOutcome::whole(value.to_vec(), is_error).with_how(|how| {
                how.provider = provider;
                how.source = crate::call::outcome::Source::Join;
            })),
            LeaderAnswer::Failed(e) => Some(CallOutcome::Failed(e)),
            LeaderAnswer::Abandoned => None,
        }
    }
}

/// One call in flight. The table is keyed by the join key's hash so a lookup hashes the bytes once and the
/// key is moved in, never copied; the key itself sits beside the slot to tell a (keyed-hash) collision from a
/// join. The slot followers wait on is only made when the first follower arrives: a call nobody joins (the
/// common case for distinct traffic) costs one table insert and one remove, no allocation.
struct Pending {
    key: Vec<u8>,
    slot: Option<Rc<Slot>>,
}

#[derive(Default)]
pub struct InFlight {
    hasher: ahash::RandomState,
    slots: RefCell<AHashMap<u64, Pending>>,
}

pub enum Role<'a> {
    /// First caller: do the work, then `finish`.
    Leader(Leader<'a>),
    /// Someone is already asking: wait on the slot.
    Follower(Rc<Slot>),
}

impl InFlight {
    pub fn join_or_lead(&self, key: Vec<u8>) -> Role<'_> {
        use std::collections::hash_map::Entry;
        let hash = self.hasher.hash_one(key.as_slice());
        match self.slots.borrow_mut().entry(hash) {
            Entry::Occupied(mut o) => {
                let pending = o.get_mut();
                if pending.key != key {
                    // Another key with the same hash is in flight: this call neither joins nor can be joined.
                    return Role::Leader(Leader {
                        table: self,
                        hash: None,
                    });
                }
                let slot = pending.slot.get_or_insert_with(Default::default).clone();
                slot.joined.set(slot.joined.get() + 1);
                Role::Follower(slot)
            }
            Entry::Vacant(v) => {
                v.insert(Pending { key, slot: None });
                Role::Leader(Leader {
                    table: self,
                    hash: Some(hash),
                })
            }
        }
    }

    pub fn len(&self) -> usize {
        self.slots.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Owned by the leading call; publishing (or dropping) it releases the followers.
pub struct Leader<'a> {
    table: &'a InFlight,
    /// Its entry in the table; `None` once published, or when a hash collision kept it out of the table.
    hash: Option<u64>,
}

impl Leader<'_> {
    /// Shares `outcome` with every follower; returns how many joined.
    pub fn finish(mut self, outcome: &CallOutcome) -> u64 {
        let Some(slot) = self.leave() else {
            return 0;
        };
        let shared = match outcome {
            CallOutcome::Answer {
                body,
                value,
                is_error,
                how,
            } => LeaderAnswer::Answer {
                value: Rc::from(&body[value.clone()]),
                is_error: *is_error,
                provider: how.provider,
            },
            CallOutcome::Failed(e) => LeaderAnswer::Failed(e.clone()),
        };
        publish(&slot, shared);
        slot.joined.get()
    }

    /// Takes the entry out of the table (no one can join after this); the slot when someone joined.
    fn leave(&mut self) -> Option<Rc<Slot>> {
        let hash = self.hash.take()?;
        self.table.slots.borrow_mut().remove(&hash)?.slot
    }
}

fn publish(slot: &Slot, shared: LeaderAnswer) {
    *slot.result.borrow_mut() = Some(shared);
    slot.done.set(true);
    slot.event.notify(usize::MAX);
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.leave() {
            publish(&slot, LeaderAnswer::Abandoned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(v: &[u8]) -> CallOutcome {
        CallOutcome::result(v.to_vec())
    }

    /// The call for `key` must lead (no identical call is in flight, or it cannot join one).
    fn lead<'a>(t: &'a InFlight, key: &[u8]) -> Leader<'a> {
        match t.join_or_lead(key.to_vec()) {
            Role::Leader(l) => l,
            Role::Follower(_) => panic!("{key:?} joined a call in flight instead of leading"),
        }
    }

    /// The call for `key` must join the one in flight.
    fn follow(t: &InFlight, key: &[u8]) -> Rc<Slot> {
        match t.join_or_lead(key.to_vec()) {
            Role::Follower(f) => f,
            Role::Leader(_) => panic!("{key:?} led instead of joining the call in flight"),
        }
    }

    #[test]
    fn followers_get_the_leaders_answer() {
        let t = InFlight::default();
        let leader = lead(&t, b"k");
        let f1 = follow(&t, b"k");
        let f2 = follow(&t, b"k");
        assert!(matches!(t.join_or_lead(b"other".to_vec()), Role::Leader(_)));
        assert_eq!(leader.finish(&answer(b"\"0x1\"")), 2);
        assert!(t.is_empty());
        for f in [f1, f2] {
            match futures_lite::future::block_on(f.wait()) {
                Some(CallOutcome::Answer { body, .. }) => assert_eq!(body, b"\"0x1\""),
                _ => panic!("expected the shared answer"),
            }
        }
        // After the leader finished, the same key leads again.
        assert!(matches!(t.join_or_lead(b"k".to_vec()), Role::Leader(_)));
    }

    #[test]
    fn an_abandoned_leader_releases_followers() {
        let t = InFlight::default();
        let leader = t.join_or_lead(b"k".to_vec());
        let f = follow(&t, b"k");
        drop(leader);
        assert!(futures_lite::future::block_on(f.wait()).is_none());
        assert!(t.is_empty());
    }

    #[test]
    fn a_call_nobody_joins_leaves_the_table_empty() {
        let t = InFlight::default();
        let leader = lead(&t, b"k");
        assert_eq!(t.len(), 1);
        assert_eq!(leader.finish(&answer(b"1")), 0);
        assert!(t.is_empty());
    }

    #[test]
    fn a_hash_collision_goes_alone_and_leaves_the_other_calls_entry() {
        let t = InFlight::default();
        let first = lead(&t, b"k");
        // Force a collision: file a different key under the hash of "k".
        let hash = t.hasher.hash_one(b"k".as_slice());
        t.slots.borrow_mut().get_mut(&hash).unwrap().key = b"other".to_vec();
        let alone = lead(&t, b"k");
        assert_eq!(alone.finish(&answer(b"2")), 0);
        assert_eq!(t.len(), 1, "the colliding call must not remove the other's entry");
        drop(first);
        assert!(t.is_empty());
    }
}
