//! In-flight deduplication, one table per shard per network: identical reads that arrive while one is in
//! flight wait for it instead of going upstream again; each caller then gets the shared answer with its own
//! id. Only reads join. If the leading call is cancelled (its client went away), waiters are released and
//! go upstream themselves, so no request is ever lost to a join.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ahash::AHashMap;
use event_listener::Event;

use super::outcome::{CallOutcome, ProxyError};

/// The answer one leader shares.
#[derive(Clone)]
enum LeaderAnswer {
    Answer {
        value: Rc<[u8]>,
        is_error: bool,
        /// Who answered the leader: a follower's answer is the same provider's, joined.
        provider: Option<crate::rpc::ProviderId>,
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
                how.source = crate::core::outcome::Source::Join;
            })),
            LeaderAnswer::Failed(e) => Some(CallOutcome::Failed(e)),
            LeaderAnswer::Abandoned => None,
        }
    }
}

#[derive(Default)]
pub struct InFlight {
    slots: RefCell<AHashMap<Vec<u8>, Rc<Slot>>>,
}

pub enum Role<'a> {
    /// First caller: do the work, then `finish`.
    Leader(Leader<'a>),
    /// Someone is already asking: wait on the slot.
    Follower(Rc<Slot>),
}

impl InFlight {
    pub fn join_or_lead(&self, key: Vec<u8>) -> Role<'_> {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get(&key) {
            slot.joined.set(slot.joined.get() + 1);
            return Role::Follower(slot.clone());
        }
        let slot = Rc::new(Slot::default());
        slots.insert(key.clone(), slot.clone());
        Role::Leader(Leader {
            table: self,
            key: Some(key),
            slot,
        })
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
    key: Option<Vec<u8>>,
    slot: Rc<Slot>,
}

impl Leader<'_> {
    /// Shares `outcome` with every follower; returns how many joined.
    pub fn finish(mut self, outcome: &CallOutcome) -> u64 {
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
        self.publish(shared);
        self.slot.joined.get()
    }

    fn publish(&mut self, shared: LeaderAnswer) {
        if let Some(key) = self.key.take() {
            self.table.slots.borrow_mut().remove(&key);
            *self.slot.result.borrow_mut() = Some(shared);
            self.slot.done.set(true);
            self.slot.event.notify(usize::MAX);
        }
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        self.publish(LeaderAnswer::Abandoned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(v: &[u8]) -> CallOutcome {
        CallOutcome::result(v.to_vec())
    }

    #[test]
    fn followers_get_the_leaders_answer() {
        let t = InFlight::default();
        let Role::Leader(leader) = t.join_or_lead(b"k".to_vec()) else {
            panic!()
        };
        let Role::Follower(f1) = t.join_or_lead(b"k".to_vec()) else {
            panic!()
        };
        let Role::Follower(f2) = t.join_or_lead(b"k".to_vec()) else {
            panic!()
        };
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
        let Role::Follower(f) = t.join_or_lead(b"k".to_vec()) else {
            panic!()
        };
        drop(leader);
        assert!(futures_lite::future::block_on(f.wait()).is_none());
        assert!(t.is_empty());
    }
}
