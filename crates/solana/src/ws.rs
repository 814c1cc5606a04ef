//! Client WebSocket subscriptions on a solana-magic network: one `Session` per client connection, holding
//! that client's subscription ids (Prism's own, numbers as validators give, never changing) and the topic
//! each one shares in the shard's hub (`subs`), which carries every client's subscriptions over a few shared
//! upstream sockets. Where a subscription goes: `accountSubscribe` to the side its account lives on (and it
//! follows the account's delegation); `signatureSubscribe` where the signature was sent;
//! `slotSubscribe` and `rootSubscribe` to the chain that issued the caller's latest blockhash (the same rule
//! as `getBlockHeight`); `programSubscribe` is refused; the rest go to the base layer.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use ahash::AHashMap;

use super::net::Dest;
use super::pubkey::Pubkey;
use super::subs_hub::{Early, Subscriber, Topic};
use super::SolanaRoute;
use prism_core::call::outcome::{Caller, ProxyError};
use prism_core::subs::Outbox;
use prism_wire::jsonscan::{nth_element, plain_str, plain_u64};

/// Whether a WebSocket method is a Solana subscription call this module serves.
/// Only plain identifiers qualify: a client's method text never shapes an upstream frame's structure.
pub fn is_subscription_method(method: &str) -> bool {
    (method.ends_with("Subscribe") || method.ends_with("Unsubscribe"))
        && method.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// One client connection's Solana subscriptions.
pub struct Session {
    sol: Rc<SolanaRoute>,
    out: Outbox,
    caller: Caller,
    /// Unique on the shard: which of a topic's clients are this session's.
    id: u64,
    /// Client subscription id → the topic it shares. A topic that ends by itself (a signature's) takes its
    /// entry out (`Subscriber::owner`).
    subs: Rc<RefCell<AHashMap<u64, Rc<Topic>>>>,
    next: Cell<u64>,
    closed: Cell<bool>,
    /// Subscriptions answered by `handle` whose answer the edge has not sent yet (`answered`).
    answering: RefCell<Vec<Early>>,
}

impl Session {
    pub fn new(sol: Rc<SolanaRoute>, out: Outbox, caller: Caller) -> Rc<Session> {
        let id = sol.subs.session_id();
        Rc::new(Session {
            sol,
            out,
            caller,
            id,
            subs: Rc::new(RefCell::new(AHashMap::new())),
            next: Cell::new(0),
            closed: Cell::new(false),
            answering: RefCell::new(Vec::new()),
        })
    }

    /// Subscriptions this session holds (or is opening), for the edge's subscription caps.
    pub fn subscriptions(&self) -> usize {
        self.subs.borrow().len()
    }

    /// The edge has sent the answers of the calls served so far: the notifications that came for those
    /// subscriptions before their ids were given follow now, in order, and the next go straight out.
    pub fn answered(&self) {
        for early in self.answering.borrow_mut().drain(..) {
            for msg in early.borrow_mut().take().unwrap_or_default() {
                let _ = self.out.push(msg);
            }
        }
    }

    /// Releases every subscription of this session (a topic ends with its last client).
    pub fn close(&self) {
        self.closed.set(true);
        let subs: Vec<(u64, Rc<Topic>)> = self.subs.borrow_mut().drain().collect();
        for (id, topic) in subs {
            self.sol.leave(&topic, self.id, id);
        }
    }

    /// Serves a subscribe or unsubscribe call; returns the reply's `result` or an error.
    pub async fn handle(self: &Rc<Self>, method: &str, params: Option<&[u8]>) -> Result<Vec<u8>, ProxyError> {
        let params = params.unwrap_or(b"[]");
        if method.ends_with("Unsubscribe") {
            let id = nth_element(params, 0).and_then(plain_u64);
            let removed = id.and_then(|id| self.subs.borrow_mut().remove(&id).map(|t| (id, t)));
            return Ok(match removed {
                Some((id, topic)) => {
                    self.sol.leave(&topic, self.id, id);
                    b"true".to_vec()
                }
                None => b"false".to_vec(),
            });
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut account = None;
        let mut follows = false;
        let dest = match method {
            "accountSubscribe" => {
                let Some(key) = nth_element(params, 0).and_then(plain_str).and_then(Pubkey::from_base58) else {
                    return Err(invalid("accountSubscribe: params[0] must be a base58 account key"));
                };
                account = Some(key);
                // An account living on the base layer whatever any record says never moves.
                follows = !super::base_only::by_address(&key, &self.sol.net.program);
                self.sol.subscription_side(key, deadline).await?
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
        if self.closed.get() {
            return Err(ProxyError::NotServed("the connection is closing"));
        }
        let id = self.next.get() + 1;
        self.next.set(id);
        let topic = self.sol.topic(method, params, dest, account, follows);
        let early = Rc::new(RefCell::new(Some(Vec::new())));
        topic.add(Subscriber {
            session: self.id,
            id,
            id_json: itoa::Buffer::new().format(id).as_bytes().into(),
            out: self.out.clone(),
            owner: Rc::downgrade(&self.subs),
            early: early.clone(),
        });
        self.subs.borrow_mut().insert(id, topic.clone());
        if let Err(e) = topic.confirmed().await {
            if self.subs.borrow_mut().remove(&id).is_some() {
                self.sol.leave(&topic, self.id, id);
            }
            return Err(e);
        }
        // What arrived for the client meanwhile follows this answer, in order (`answered`).
        self.answering.borrow_mut().push(early);
        Ok(itoa::Buffer::new().format(id).as_bytes().to_vec())
    }
}

fn invalid(message: &str) -> ProxyError {
    ProxyError::Rejected {
        code: -32602,
        message: message.into(),
    }
}
