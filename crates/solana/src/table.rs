//! The delegation table of one shard: for every account a request touched, whether it is delegated and
//! to which ER, as of which base-layer slot, and whether that can be trusted (`limbo` = the subscription
//! that kept it fresh was lost, so the next request refetches before routing).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ahash::AHashMap;
use base64::Engine;

use super::net::SolanaNet;
use super::pubkey::Pubkey;
use super::record::DelegationRecord;
use prism_wire::jsonscan::{nth_element, object_field, plain_str, plain_u64};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Never read successfully: must be fetched; never taken to mean undelegated.
    Unknown,
    Undelegated,
    /// `er` is `None` when the record names an ER this router does not serve.
    Delegated {
        er: Option<usize>,
        record: DelegationRecord,
    },
}

pub struct Entry {
    pub account: Pubkey,
    pub record_pda: Pubkey,
    pub status: Cell<Status>,
    /// Base-layer slot of the last applied read or notification: an older one never overwrites it.
    pub slot: Cell<u64>,
    /// Read it through `trusted`; change it through `set_limbo` (which keeps `TableCounts::limbo`).
    pub limbo: Cell<bool>,
    /// Held by the table (not a one-off entry made while the table was full): only those are counted.
    pub kept: Cell<bool>,
    pub fetching: Cell<bool>,
    /// Upstream subscription id on the base link, once confirmed.
    pub sub: Cell<Option<u64>>,
    /// A subscription was asked for on the current base link (confirmed or not yet).
    pub asked: Cell<bool>,
    /// Proven one of the delegation program's own accounts (see `base_only`): its base-layer state is the
    /// truth, never a delegated account's stale copy.
    pub base_only: Cell<bool>,
    /// Fired on every change of status, fetch completion and subscription confirmation.
    pub changed: event_listener::Event,
}

impl Entry {
    /// Sets the limbo flag and moves the network's count of entries in limbo with it.
    pub fn set_limbo(&self, net: &SolanaNet, limbo: bool) {
        let old = self.limbo.replace(limbo);
        if self.kept.get() && old != limbo {
            net.counts
                .limbo
                .fetch_add(if limbo { 1 } else { -1 }, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub fn trusted(&self) -> Option<Status> {
        let s = self.status.get();
        (s != Status::Unknown && !self.limbo.get()).then_some(s)
    }

    /// Applies a record account as read at `slot` (`value` is the raw JSON account object, or `null`).
    /// Returns how the count of delegated accounts moved (+1, -1 or 0). Older reads are ignored unless
    /// `force` (a fetch made to leave limbo must count even if a notification raced ahead with the same slot).
    pub fn apply(&self, net: &SolanaNet, slot: u64, value: &[u8], force: bool) -> i64 {
        if slot < self.slot.get() && !force && self.status.get() != Status::Unknown {
            return 0;
        }
        let status = record_status(net, value);
        self.slot.set(self.slot.get().max(slot));
        let old = self.status.replace(status);
        if old != status {
            tracing::debug!(account = %self.account, ?status, slot, "delegation status");
        }
        self.changed.notify(usize::MAX);
        let delegated = |s: Status| matches!(s, Status::Delegated { .. });
        i64::from(delegated(status)) - i64::from(delegated(old))
    }
}

/// What a record account's JSON says: absent, closed (no lamports), foreign or not a record → undelegated.
pub fn record_status(net: &SolanaNet, value: &[u8]) -> Status {
    match delegation_record(&net.program, value) {
        Some(record) => Status::Delegated {
            er: net.er_for(&record.authority),
            record,
        },
        None => Status::Undelegated,
    }
}

/// The delegation record in a record account's JSON (`getAccountInfo`'s `value`, or an account
/// notification's), if it is a live account owned by `program` holding one. Pure; never panics.
pub fn delegation_record(program: &Pubkey, value: &[u8]) -> Option<DelegationRecord> {
    let lamports = object_field(value, "lamports").and_then(plain_u64)?;
    let owner = object_field(value, "owner").and_then(plain_str);
    if lamports == 0 || owner != Some(program.to_base58().as_str()) {
        return None;
    }
    DelegationRecord::parse(&object_field(value, "data").and_then(account_data)?)
}

/// Longest base58 account data decoded (base58 decoding is quadratic in length): a full address lookup
/// table (56 + 256 × 32 bytes) is about 11 300 characters. Anything longer is refused unread.
pub const MAX_BASE58_DATA: usize = 12_000;

/// An account's `data` as `["<base64>", "base64"]` (or base58), decoded.
pub fn account_data(raw: &[u8]) -> Option<Vec<u8>> {
    let text = nth_element(raw, 0).and_then(plain_str)?;
    match nth_element(raw, 1).and_then(plain_str) {
        Some("base58") if text.len() > MAX_BASE58_DATA => None,
        Some("base58") => super::base58::decode(text.as_bytes()),
        _ => base64::engine::general_purpose::STANDARD.decode(text).ok(),
    }
}

/// This shard's table. Entries are created on first touch and live as long as the shard (bounded by
/// `MAX_ACCOUNTS`: beyond it new accounts are served by a fresh fetch every time, never cached).
#[derive(Default)]
pub struct DelegationTable {
    entries: RefCell<AHashMap<Pubkey, Rc<Entry>>>,
    /// Record PDA → account, to apply notifications.
    by_record: RefCell<AHashMap<Pubkey, Pubkey>>,
}

pub const MAX_ACCOUNTS: usize = 200_000;

impl DelegationTable {
    pub fn get(&self, account: &Pubkey) -> Option<Rc<Entry>> {
        self.entries.borrow().get(account).cloned()
    }

    /// The entry for `account`, and whether it was just created (and kept: the table may be full).
    pub fn entry(&self, net: &SolanaNet, account: Pubkey) -> (Rc<Entry>, bool) {
        if let Some(e) = self.get(&account) {
            return (e, false);
        }
        let record_pda = account.delegation_record(&net.program);
        let e = Rc::new(Entry {
            account,
            record_pda,
            status: Cell::new(Status::Unknown),
            slot: Cell::new(0),
            limbo: Cell::new(false),
            kept: Cell::new(false),
            asked: Cell::new(false),
            fetching: Cell::new(false),
            sub: Cell::new(None),
            base_only: Cell::new(false),
            changed: event_listener::Event::new(),
        });
        let mut entries = self.entries.borrow_mut();
        if entries.len() >= MAX_ACCOUNTS {
            return (e, false);
        }
        e.kept.set(true);
        entries.insert(account, e.clone());
        self.by_record.borrow_mut().insert(record_pda, account);
        (e, true)
    }

    pub fn by_record(&self, pda: &Pubkey) -> Option<Rc<Entry>> {
        let account = *self.by_record.borrow().get(pda)?;
        self.get(&account)
    }

    pub fn all(&self) -> Vec<Rc<Entry>> {
        self.entries.borrow().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.borrow().is_empty()
    }
}
