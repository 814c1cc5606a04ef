//! `SolanaFake`: a fake Solana base layer or MagicBlock ephemeral rollup (ER) — a real HTTP JSON-RPC server on
//! 127.0.0.1:P and a real WebSocket JSON-RPC server on P+1 (as validators and ERs do), over one state behind a
//! Mutex that the test drives by hand.
//!
//! State: accounts (pubkey → lamports, owner, data, executable, rentEpoch), slot and block height (manual, or
//! a ticker), the latest blockhash and the set of valid ones, signatures seen (→ slot, raw transaction), and
//! every call received (method + params + transport) so tests can assert which side served what.
//!
//! HTTP methods (the shapes real nodes send, `{"context":{"apiVersion":"2.2.0","slot":N},"value":...}` where
//! they wrap): getAccountInfo (encodings base64, base58, base64+zstd (one raw zstd block), binary default;
//! jsonParsed refused with -32602), getBalance, getMultipleAccounts, getProgramAccounts (filters dataSize and
//! memcmp, withContext), getTokenAccountBalance (-32602 "Invalid param: not a Token account" unless owner =
//! token program and data ≥ 165 bytes), sendTransaction, simulateTransaction, getSignatureStatuses,
//! getTransaction, getLatestBlockhash, isBlockhashValid, getBlockHeight, getEpochInfo, getSlot, getVersion,
//! getHealth, getIdentity, getGenesisHash, getMinimumBalanceForRentExemption; anything else → -32601.
//! Enough for MagicBlock's real ER validator to run against a base fake (`tests/support/real_er.rs`).
//! [`SolanaFake::fail_method`] makes one method answer a fixed error; [`SolanaFake::set_http_status`] makes
//! every HTTP request fail.
//!
//! WebSocket: accountSubscribe / accountUnsubscribe (accountNotification on every change of the account),
//! programSubscribe / programUnsubscribe (programNotification on every change of an account it owns),
//! slotSubscribe / slotUnsubscribe (slotNotification on every slot), signatureSubscribe / signatureUnsubscribe
//! (one signatureNotification when the signature lands, then the subscription ends, as real nodes do).
//! Subscription ids are numbers. Other calls over the socket are answered like HTTP ones.
//!
//! Delegation ([`SolanaFake::delegate`] / [`SolanaFake::undelegate`] on the BASE fake) writes and closes the
//! delegation record PDA exactly as the delegation program does, with notifications.
//!
//! Transactions: with [`SolanaFake::check_blockhashes`] a transaction whose recent blockhash this chain did
//! not issue is refused with -32002 "Blockhash not found" (preflight) or taken and never executed
//! (`skipPreflight`), as validators do. On an ER, a transaction that calls the magic program
//! (`Magic111...`, MagicBlock's commit) logs `ScheduledCommitSent signature: X`, and X (a transaction the ER
//! makes, landed at once) logs `ScheduledCommitSent signature[0]: Y`, Y standing for the base-layer commit
//! ([`SolanaFake::commit_of`]); `getTransaction` serves those logs as `meta.logMessages`.
//!
//! Server → client frames are written by hand under one lock per connection, so a notification is on the
//! wire when the control call that caused it returns; the per-connection thread only reads.
#![allow(dead_code)]

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

pub const DELEGATION_PROGRAM: &str = "DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh";
pub const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";
pub const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGYPxWSBsAHTWgp6DhZtEFc";
/// MagicBlock's magic program (ER only): a transaction calling it schedules a commit to the base layer.
pub const MAGIC_PROGRAM: &str = "Magic11111111111111111111111111111111111111";
/// The all-zero pubkey: a delegation record with this authority names the default ER.
pub const DEFAULT_PUBKEY: &str = SYSTEM_PROGRAM;
/// Lamports of a delegation record the fake writes.
pub const RECORD_LAMPORTS: u64 = 1_000_000;
/// rentEpoch of every account the fake serves (what real nodes send for rent-exempt accounts): a u64 that
/// does not fit an f64, so a proxy that re-encodes numbers changes it.
pub const RENT_EPOCH: u64 = u64::MAX;

// ---- keys ------------------------------------------------------------------------------------------

pub fn b58(bytes: &[u8]) -> String {
    bs58::encode(bytes).into_string()
}

/// The 32 bytes of a base58 pubkey (panics on a malformed one: test input).
pub fn pubkey_bytes(pk: &str) -> [u8; 32] {
    let v = bs58::decode(pk)
        .into_vec()
        .unwrap_or_else(|e| panic!("bad pubkey {pk:?}: {e}"));
    v.try_into()
        .unwrap_or_else(|v: Vec<u8>| panic!("pubkey {pk:?} is {} bytes", v.len()))
}

/// `Pubkey::find_program_address(seeds, program)`: the first bump from 255 down whose
/// sha256(seeds ‖ bump ‖ program ‖ "ProgramDerivedAddress") is off the ed25519 curve.
pub fn find_program_address(seeds: &[&[u8]], program: &str) -> (String, u8) {
    let program = pubkey_bytes(program);
    for bump in (0..=255u8).rev() {
        let mut h = Sha256::new();
        for s in seeds {
            h.update(s);
        }
        h.update([bump]);
        h.update(program);
        h.update(b"ProgramDerivedAddress");
        let hash: [u8; 32] = h.finalize().into();
        if curve25519_dalek::edwards::CompressedEdwardsY(hash)
            .decompress()
            .is_none()
        {
            return (b58(&hash), bump);
        }
    }
    panic!("no program address")
}

/// The delegation record PDA of `account`: `["delegation", account]` under the delegation program.
pub fn delegation_record(account: &str) -> String {
    find_program_address(&[b"delegation", &pubkey_bytes(account)], DELEGATION_PROGRAM).0
}

/// The 96-byte delegation record: u64 LE 100, authority, original owner, delegation slot, lamports, commit
/// frequency (ms).
pub fn record_data(authority: &str, owner: &str, slot: u64, lamports: u64) -> Vec<u8> {
    let mut d = Vec::with_capacity(96);
    d.extend_from_slice(&100u64.to_le_bytes());
    d.extend_from_slice(&pubkey_bytes(authority));
    d.extend_from_slice(&pubkey_bytes(owner));
    d.extend_from_slice(&slot.to_le_bytes());
    d.extend_from_slice(&lamports.to_le_bytes());
    d.extend_from_slice(&30_000u64.to_le_bytes());
    d
}

/// SPL token account data (165 bytes): mint, owner, amount (u64 LE at 64), the rest zero but `state` = 1.
pub fn token_account_data(mint: &str, owner: &str, amount: u64) -> Vec<u8> {
    let mut d = vec![0u8; 165];
    d[..32].copy_from_slice(&pubkey_bytes(mint));
    d[32..64].copy_from_slice(&pubkey_bytes(owner));
    d[64..72].copy_from_slice(&amount.to_le_bytes());
    d[108] = 1;
    d
}

fn hash_name(name: &str) -> String {
    b58(&Sha256::digest(name.as_bytes()))
}

// ---- state -----------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Base,
    Er { identity: String },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Account {
    pub lamports: u64,
    pub owner: String,
    pub data: Vec<u8>,
    pub executable: bool,
}

impl Account {
    pub fn new(lamports: u64, owner: &str, data: &[u8]) -> Account {
        Account {
            lamports,
            owner: owner.to_string(),
            data: data.to_vec(),
            executable: false,
        }
    }
    /// The JSON a node sends for this account in `encoding` (None = legacy "binary": a bare base58 string).
    pub fn to_json(&self, encoding: Option<&str>) -> Value {
        let data = match encoding {
            Some("base64") => json!([base64::engine::general_purpose::STANDARD.encode(&self.data), "base64"]),
            Some("base64+zstd") => json!([
                base64::engine::general_purpose::STANDARD.encode(zstd_raw(&self.data)),
                "base64+zstd"
            ]),
            Some("base58") => json!([b58(&self.data), "base58"]),
            _ => json!(b58(&self.data)),
        };
        json!({
            "data": data,
            "executable": self.executable,
            "lamports": self.lamports,
            "owner": self.owner,
            "rentEpoch": RENT_EPOCH,
            "space": self.data.len(),
        })
    }
}

/// One call the fake received.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub params: Value,
    /// Over the WebSocket (else HTTP).
    pub ws: bool,
}

impl Call {
    /// `params[0]` as a string (the account / the encoded transaction), "" when absent.
    pub fn first(&self) -> &str {
        self.params[0].as_str().unwrap_or("")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SubKind {
    Account {
        pubkey: String,
        encoding: Option<String>,
        commitment: Option<String>,
    },
    Slot,
    Signature {
        signature: String,
    },
    Program {
        program: String,
        encoding: Option<String>,
    },
}

#[derive(Clone, Debug)]
struct Sub {
    conn: usize,
    kind: SubKind,
}

struct WsConn {
    writer: Arc<Mutex<TcpStream>>,
}

#[derive(Clone, Debug)]
pub struct Landed {
    pub slot: u64,
    /// The transaction as sent, base64.
    pub tx_base64: String,
    pub err: Option<Value>,
    /// Whether the signature has landed (a held one is known but not yet confirmed).
    pub landed: bool,
    /// `meta.logMessages` of `getTransaction`.
    pub logs: Vec<String>,
}

struct State {
    kind: Kind,
    name: String,
    accounts: BTreeMap<String, Account>,
    slot: u64,
    block_height: u64,
    blockhash: String,
    valid_blockhashes: Vec<String>,
    signatures: HashMap<String, Landed>,
    /// When set, sent transactions are known but do not land until [`SolanaFake::land`].
    hold: bool,
    calls: Vec<Call>,
    subs: BTreeMap<u64, Sub>,
    next_sub: u64,
    conns: HashMap<usize, WsConn>,
    next_conn: usize,
    ws_accepted: usize,
    ws_refuse: bool,
    http_status: Option<u16>,
    failing: HashMap<String, Value>,
    /// Extra delay before answering each HTTP request of these methods.
    delays: HashMap<String, Duration>,
    /// When false, account changes are not announced (a notification lost or late on the wire).
    notify_accounts: bool,
    /// Single calls of these methods are answered with this HTTP status (counted all the same).
    http_failing: HashMap<String, u16>,
    /// Calls of these methods are handled (a transaction is taken) but the connection is then closed
    /// without an answer: a lost answer.
    lose_answers: std::collections::HashSet<String>,
    /// Delay before a new WebSocket connection is upgraded (a slow handshake).
    ws_accept_delay: Option<Duration>,
    /// When set, a transaction whose recent blockhash this chain never issued is refused (preflight) or
    /// taken and dropped (skipPreflight), as a validator does.
    check_blockhashes: bool,
    /// ER: (transaction signature, its ScheduledCommitSent signature, the base-layer commit signature) of
    /// every transaction that called the magic program.
    commits: Vec<(String, String, String)>,
}

impl State {
    fn ctx(&self) -> Value {
        json!({"apiVersion": "2.2.0", "slot": self.slot})
    }
    fn wrap(&self, value: Value) -> Value {
        json!({"context": self.ctx(), "value": value})
    }
    fn identity(&self) -> String {
        match &self.kind {
            Kind::Base => hash_name("base-identity"),
            Kind::Er { identity } => identity.clone(),
        }
    }

    fn notify_sub(&self, sub_id: u64, method: &str, result: Value) {
        let Some(sub) = self.subs.get(&sub_id) else { return };
        if let Some(c) = self.conns.get(&sub.conn) {
            let msg = json!({
                "jsonrpc": "2.0",
                "method": method,
                "params": {"result": result, "subscription": sub_id},
            });
            write_text(&c.writer, &msg.to_string());
        }
    }

    /// programNotification to every subscriber of the program owning `pubkey` (its state now).
    fn program_changed(&self, pubkey: &str) {
        let Some(account) = self.accounts.get(pubkey) else {
            return;
        };
        let targets: Vec<(u64, Option<String>)> = self
            .subs
            .iter()
            .filter_map(|(id, s)| match &s.kind {
                SubKind::Program { program, encoding } if *program == account.owner => Some((*id, encoding.clone())),
                _ => None,
            })
            .collect();
        for (id, enc) in targets {
            let value = json!({"pubkey": pubkey, "account": account.to_json(Some(enc.as_deref().unwrap_or("base64")))});
            self.notify_sub(
                id,
                "programNotification",
                json!({"context": {"slot": self.slot}, "value": value}),
            );
        }
    }

    /// accountNotification to every subscriber of `pubkey` with its current value (null when absent).
    fn account_changed(&self, pubkey: &str) {
        if !self.notify_accounts {
            return;
        }
        self.program_changed(pubkey);
        let targets: Vec<(u64, Option<String>)> = self
            .subs
            .iter()
            .filter_map(|(id, s)| match &s.kind {
                SubKind::Account {
                    pubkey: p, encoding, ..
                } if p == pubkey => Some((*id, encoding.clone())),
                _ => None,
            })
            .collect();
        for (id, enc) in targets {
            let value = self
                .accounts
                .get(pubkey)
                .map_or(Value::Null, |a| a.to_json(Some(enc.as_deref().unwrap_or("base64"))));
            self.notify_sub(
                id,
                "accountNotification",
                json!({"context": {"slot": self.slot}, "value": value}),
            );
        }
    }

    /// A closed account's notification (lamports 0, system program owner, no data), as real nodes send it.
    fn account_closed(&self, pubkey: &str) {
        if !self.notify_accounts {
            return;
        }
        let targets: Vec<(u64, Option<String>)> = self
            .subs
            .iter()
            .filter_map(|(id, s)| match &s.kind {
                SubKind::Account {
                    pubkey: p, encoding, ..
                } if p == pubkey => Some((*id, encoding.clone())),
                _ => None,
            })
            .collect();
        let closed = Account::new(0, SYSTEM_PROGRAM, &[]);
        for (id, enc) in targets {
            let mut v = closed.to_json(Some(enc.as_deref().unwrap_or("base64")));
            v["rentEpoch"] = json!(0);
            self.notify_sub(
                id,
                "accountNotification",
                json!({"context": {"slot": self.slot}, "value": v}),
            );
        }
    }

    fn slot_changed(&self) {
        let ids: Vec<u64> = self
            .subs
            .iter()
            .filter(|(_, s)| s.kind == SubKind::Slot)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.notify_sub(
                id,
                "slotNotification",
                json!({"parent": self.slot.saturating_sub(1), "root": self.slot.saturating_sub(32), "slot": self.slot}),
            );
        }
    }

    fn signature_landed(&mut self, sig: &str) {
        let Some(l) = self.signatures.get(sig).cloned() else {
            return;
        };
        let ids: Vec<u64> = self
            .subs
            .iter()
            .filter(|(_, s)| matches!(&s.kind, SubKind::Signature { signature } if signature == sig))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.notify_sub(
                id,
                "signatureNotification",
                json!({"context": {"slot": l.slot}, "value": {"err": l.err}}),
            );
            self.subs.remove(&id);
        }
    }

    fn kill_sockets(&mut self) -> usize {
        let conns: Vec<(usize, WsConn)> = self.conns.drain().collect();
        for (_, c) in &conns {
            let w = c.writer.lock().unwrap_or_else(|p| p.into_inner());
            let _ = w.shutdown(Shutdown::Both);
        }
        self.subs.clear();
        conns.len()
    }

    fn advance(&mut self, n: u64) {
        for _ in 0..n {
            self.slot += 1;
            self.block_height += 1;
            self.slot_changed();
        }
    }
}

struct Inner {
    state: Mutex<State>,
    shutdown: AtomicBool,
    /// While set, a started ticker does not advance the slot (a frozen validator).
    frozen: AtomicBool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct SolanaFake {
    http: SocketAddr,
    ws: SocketAddr,
    inner: Arc<Inner>,
}

/// Binds 127.0.0.1:P and 127.0.0.1:P+1.
fn bind_pair() -> (TcpListener, TcpListener) {
    for _ in 0..200 {
        let a = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = a.local_addr().unwrap().port();
        if p == u16::MAX {
            continue;
        }
        if let Ok(b) = TcpListener::bind(("127.0.0.1", p + 1)) {
            return (a, b);
        }
    }
    panic!("no free port pair P, P+1 on 127.0.0.1");
}

impl SolanaFake {
    /// A base layer: slot 350 000 000, block height 300 000 000.
    pub fn base() -> SolanaFake {
        SolanaFake::start(Kind::Base)
    }
    /// An ER whose validator identity is `identity`: slot 10 000, block height 5 000.
    pub fn er(identity: &str) -> SolanaFake {
        SolanaFake::start(Kind::Er {
            identity: identity.to_string(),
        })
    }

    pub fn start(kind: Kind) -> SolanaFake {
        let (http_l, ws_l) = bind_pair();
        let http = http_l.local_addr().unwrap();
        let ws = ws_l.local_addr().unwrap();
        let (slot, height, name) = match &kind {
            Kind::Base => (350_000_000, 300_000_000, format!("base-{}", http.port())),
            Kind::Er { .. } => (10_000, 5_000, format!("er-{}", http.port())),
        };
        let blockhash = hash_name(&format!("{name}-blockhash-0"));
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                kind,
                name,
                accounts: BTreeMap::new(),
                slot,
                block_height: height,
                valid_blockhashes: vec![blockhash.clone()],
                blockhash,
                signatures: HashMap::new(),
                hold: false,
                calls: Vec::new(),
                subs: BTreeMap::new(),
                next_sub: 1,
                conns: HashMap::new(),
                next_conn: 0,
                ws_accepted: 0,
                ws_refuse: false,
                http_status: None,
                failing: HashMap::new(),
                delays: HashMap::new(),
                lose_answers: Default::default(),
                notify_accounts: true,
                ws_accept_delay: None,
                http_failing: HashMap::new(),
                check_blockhashes: false,
                commits: Vec::new(),
            }),
            shutdown: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
        });
        let i = inner.clone();
        thread::Builder::new()
            .name(format!("solfake-http-{}", http.port()))
            .spawn(move || http_accept(http_l, i))
            .unwrap();
        let i = inner.clone();
        thread::Builder::new()
            .name(format!("solfake-ws-{}", ws.port()))
            .spawn(move || ws_accept(ws_l, i))
            .unwrap();
        SolanaFake { http, ws, inner }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.http)
    }
    /// `ws://127.0.0.1:P+1`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.ws)
    }
    pub fn port(&self) -> u16 {
        self.http.port()
    }
    /// The validator identity (`getIdentity`); an ER's is the one it was started with.
    pub fn identity(&self) -> String {
        self.lock().identity()
    }
    pub fn name(&self) -> String {
        self.lock().name.clone()
    }

    // ---- accounts ------------------------------------------------------------------------------

    /// Creates or replaces an account; notifies its subscribers.
    pub fn set_account(&self, pubkey: &str, account: Account) {
        let mut g = self.lock();
        g.accounts.insert(pubkey.to_string(), account);
        g.account_changed(pubkey);
    }
    /// A plain system-owned account with `lamports`.
    pub fn set_lamports(&self, pubkey: &str, lamports: u64) {
        self.set_account(pubkey, Account::new(lamports, SYSTEM_PROGRAM, &[]));
    }
    /// Removes an account (closed: one notification with lamports 0).
    pub fn remove_account(&self, pubkey: &str) {
        let mut g = self.lock();
        if g.accounts.remove(pubkey).is_some() {
            g.account_closed(pubkey);
        }
    }
    pub fn account(&self, pubkey: &str) -> Option<Account> {
        self.lock().accounts.get(pubkey).cloned()
    }

    /// BASE fake: delegates `account` to the ER whose identity is `authority` (`DEFAULT_PUBKEY` = the
    /// default ER), as the delegation program does: writes the record at the account's PDA (owner = the
    /// delegation program, lamports [`RECORD_LAMPORTS`], 96 bytes) and makes the delegation program the
    /// account's owner on the base layer (creating it with 1 SOL if absent); notifies both.
    pub fn delegate(&self, account: &str, authority: &str) {
        let pda = delegation_record(account);
        let mut g = self.lock();
        let slot = g.slot;
        let mut acc = g
            .accounts
            .get(account)
            .cloned()
            .unwrap_or_else(|| Account::new(1_000_000_000, SYSTEM_PROGRAM, &[]));
        let data = record_data(authority, &acc.owner, slot, acc.lamports);
        g.accounts
            .insert(pda.clone(), Account::new(RECORD_LAMPORTS, DELEGATION_PROGRAM, &data));
        g.account_changed(&pda);
        acc.owner = DELEGATION_PROGRAM.to_string();
        g.accounts.insert(account.to_string(), acc);
        g.account_changed(account);
    }

    /// BASE fake: undelegates `account`: the record is closed (one notification: lamports 0, system program
    /// owner) and removed; the account's original owner comes back.
    pub fn undelegate(&self, account: &str) {
        let pda = delegation_record(account);
        let mut g = self.lock();
        let original = g
            .accounts
            .remove(&pda)
            .and_then(|r| r.data.get(40..72).map(b58))
            .unwrap_or_else(|| SYSTEM_PROGRAM.to_string());
        g.account_closed(&pda);
        if let Some(acc) = g.accounts.get_mut(account) {
            acc.owner = original;
            g.account_changed(account);
        }
    }

    /// Writes a delegation record with arbitrary content at `account`'s PDA (malformed-record tests).
    pub fn set_record(&self, account: &str, record: Account) {
        self.set_account(&delegation_record(account), record);
    }

    // ---- clock and blockhashes -----------------------------------------------------------------

    pub fn slot(&self) -> u64 {
        self.lock().slot
    }
    pub fn block_height(&self) -> u64 {
        self.lock().block_height
    }
    pub fn set_slot(&self, slot: u64) {
        let mut g = self.lock();
        g.slot = slot;
        g.slot_changed();
    }
    pub fn set_block_height(&self, h: u64) {
        self.lock().block_height = h;
    }
    /// Advances slot and block height by `n`, announcing each slot.
    pub fn advance(&self, n: u64) {
        self.lock().advance(n);
    }
    /// One thread making a slot every `every` on each of `fakes` at once (providers of one chain, in step),
    /// while all of them live.
    pub fn start_tickers_together(fakes: &[&SolanaFake], every: Duration) {
        let inners: Vec<Arc<Inner>> = fakes.iter().map(|f| f.inner.clone()).collect();
        thread::spawn(move || {
            let origin = std::time::Instant::now();
            let mut made = 0u64;
            while inners.iter().all(|i| !i.shutdown.load(Ordering::SeqCst)) {
                thread::sleep(every);
                let due = (origin.elapsed().as_micros() / every.as_micros().max(1)) as u64;
                if due > made {
                    for i in &inners {
                        i.lock().advance(due - made);
                    }
                    made = due;
                }
            }
        });
    }

    /// A thread that makes one slot every `every` until the fake is dropped. Slots follow the wall clock, as a
    /// validator's do: a tick the thread was late for is made when it wakes, so a loaded test machine does
    /// not slow the fake's cadence. A frozen clock makes none, and starts afresh when thawed.
    pub fn start_ticker(&self, every: Duration) {
        let inner = self.inner.clone();
        thread::spawn(move || {
            let mut origin = std::time::Instant::now();
            let mut made = 0u64;
            while !inner.shutdown.load(Ordering::SeqCst) {
                thread::sleep(every);
                if inner.frozen.load(Ordering::SeqCst) {
                    (origin, made) = (std::time::Instant::now(), 0);
                    continue;
                }
                let due = (origin.elapsed().as_micros() / every.as_micros().max(1)) as u64;
                if due > made {
                    inner.lock().advance(due - made);
                    made = due;
                }
            }
        });
    }
    /// Freezes (or thaws) the slot a started ticker advances: the validator stops making slots while
    /// still answering everything, `getHealth` included.
    pub fn freeze(&self, on: bool) {
        self.inner.frozen.store(on, Ordering::SeqCst);
    }
    /// The blockhash getLatestBlockhash answers now.
    pub fn blockhash(&self) -> String {
        self.lock().blockhash.clone()
    }
    /// Makes `hash` the latest blockhash (still valid, as are the previous ones).
    pub fn set_blockhash(&self, hash: &str) {
        let mut g = self.lock();
        g.blockhash = hash.to_string();
        if !g.valid_blockhashes.iter().any(|h| h == hash) {
            g.valid_blockhashes.push(hash.to_string());
        }
    }
    /// Makes `hash` invalid (isBlockhashValid → false).
    pub fn expire_blockhash(&self, hash: &str) {
        self.lock().valid_blockhashes.retain(|h| h != hash);
    }

    // ---- signatures ----------------------------------------------------------------------------

    /// While set, sent transactions are known (getTransaction null, status null) but land only on
    /// [`SolanaFake::land`].
    pub fn hold_signatures(&self, hold: bool) {
        self.lock().hold = hold;
    }
    /// Lands a held signature: its status becomes final and signatureSubscribe subscribers hear it.
    pub fn land(&self, sig: &str) {
        let mut g = self.lock();
        let slot = g.slot;
        if let Some(l) = g.signatures.get_mut(sig) {
            l.landed = true;
            l.slot = slot;
        }
        g.signature_landed(sig);
    }
    /// Records a landed signature without a transaction (as if sent by someone else).
    pub fn add_signature(&self, sig: &str) {
        let mut g = self.lock();
        let slot = g.slot;
        g.signatures.insert(
            sig.to_string(),
            Landed {
                slot,
                tx_base64: String::new(),
                err: None,
                landed: true,
                logs: Vec::new(),
            },
        );
        g.signature_landed(sig);
    }
    pub fn signatures(&self) -> Vec<String> {
        self.lock().signatures.keys().cloned().collect()
    }
    pub fn knows_signature(&self, sig: &str) -> bool {
        self.lock().signatures.contains_key(sig)
    }
    /// How many `sendTransaction` calls carried the transaction whose signature is `sig`.
    pub fn sends_of(&self, sig: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == "sendTransaction")
            .filter(|c| decode_tx(&c.params).is_ok_and(|raw| b58(&raw[1..65]) == sig))
            .count()
    }
    /// Whether this chain issued `hash` and still takes it.
    pub fn blockhash_valid(&self, hash: &str) -> bool {
        self.lock().valid_blockhashes.iter().any(|h| h == hash)
    }
    /// While set, transactions with a recent blockhash this chain did not issue are refused (preflight)
    /// or dropped unseen (skipPreflight), as validators do.
    pub fn check_blockhashes(&self, on: bool) {
        self.lock().check_blockhashes = on;
    }
    /// ER: the (ScheduledCommitSent, base-layer commit) signatures of the transaction `sig`, when it called
    /// the magic program.
    pub fn commit_of(&self, sig: &str) -> Option<(String, String)> {
        self.lock()
            .commits
            .iter()
            .find(|(s, _, _)| s == sig)
            .map(|(_, a, b)| (a.clone(), b.clone()))
    }

    // ---- misbehaviour ----------------------------------------------------------------------------

    /// `method` answers this JSON-RPC error object until cleared with `None`.
    pub fn fail_method(&self, method: &str, error: Option<Value>) {
        let mut g = self.lock();
        match error {
            Some(e) => g.failing.insert(method.to_string(), e),
            None => g.failing.remove(method),
        };
    }
    /// Every HTTP request is answered with this status (`None` = normally).
    pub fn set_http_status(&self, status: Option<u16>) {
        self.lock().http_status = status;
    }
    /// Single HTTP calls of `method` get this status and no JSON (None = answer normally); still counted.
    pub fn fail_http(&self, method: &str, status: Option<u16>) {
        let mut g = self.lock();
        match status {
            Some(s) => g.http_failing.insert(method.to_string(), s),
            None => g.http_failing.remove(method),
        };
    }
    /// While `on`, calls of `method` are handled as usual (a transaction is taken and counted) and then the
    /// connection is closed without an answer.
    pub fn lose_answers(&self, method: &str, on: bool) {
        let mut g = self.lock();
        if on {
            g.lose_answers.insert(method.to_string());
        } else {
            g.lose_answers.remove(method);
        }
    }
    /// Delays the HTTP answer of `method` (None = no delay).
    pub fn delay_method(&self, method: &str, d: Option<Duration>) {
        let mut g = self.lock();
        match d {
            Some(d) => g.delays.insert(method.to_string(), d),
            None => g.delays.remove(method),
        };
    }
    /// While false, account changes are not announced to subscribers (as if the notification were late):
    /// a router must find out another way.
    pub fn set_notify_accounts(&self, on: bool) {
        self.lock().notify_accounts = on;
    }
    /// Kills every WebSocket connection; their subscriptions go with them. Returns how many.
    pub fn drop_websockets(&self) -> usize {
        self.lock().kill_sockets()
    }
    /// Delays the upgrade of every new WebSocket connection by `d` (a slow handshake; None = at once).
    pub fn set_ws_accept_delay(&self, d: Option<Duration>) {
        self.lock().ws_accept_delay = d;
    }
    /// While set, new WebSocket upgrades are refused (503) and closed.
    pub fn set_ws_refuse(&self, refuse: bool) {
        self.lock().ws_refuse = refuse;
    }

    // ---- observations ----------------------------------------------------------------------------

    /// Every call received so far (HTTP and WebSocket).
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }
    /// Calls of `method` so far.
    pub fn count(&self, method: &str) -> usize {
        self.lock().calls.iter().filter(|c| c.method == method).count()
    }
    /// Calls of `method` whose `params[0]` is `first` (an account, a transaction ...).
    pub fn count_for(&self, method: &str, first: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method && c.first() == first)
            .count()
    }
    /// Calls of `method` with exactly these params (tell a client's call from a router's own probe, which
    /// sends other params).
    pub fn count_params(&self, method: &str, params: &Value) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method && c.params == *params)
            .count()
    }
    /// Calls of `method` whose params mention `needle` anywhere (e.g. a key inside getMultipleAccounts).
    pub fn count_mentioning(&self, method: &str, needle: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method && c.params.to_string().contains(needle))
            .count()
    }
    /// The params of every call of `method`.
    pub fn params_of(&self, method: &str) -> Vec<Value> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.params.clone())
            .collect()
    }
    /// Live account subscriptions on `pubkey`.
    pub fn account_subs(&self, pubkey: &str) -> usize {
        self.lock()
            .subs
            .values()
            .filter(|s| matches!(&s.kind, SubKind::Account { pubkey: p, .. } if p == pubkey))
            .count()
    }
    /// The live account subscriptions (pubkey, encoding, commitment).
    pub fn account_sub_list(&self) -> Vec<SubKind> {
        self.lock()
            .subs
            .values()
            .filter(|s| matches!(s.kind, SubKind::Account { .. }))
            .map(|s| s.kind.clone())
            .collect()
    }
    pub fn slot_subs(&self) -> usize {
        self.lock().subs.values().filter(|s| s.kind == SubKind::Slot).count()
    }
    pub fn signature_subs(&self, sig: &str) -> usize {
        self.lock()
            .subs
            .values()
            .filter(|s| matches!(&s.kind, SubKind::Signature { signature } if signature == sig))
            .count()
    }
    /// WebSocket connections accepted so far / open now.
    pub fn ws_accepted(&self) -> usize {
        self.lock().ws_accepted
    }
    pub fn ws_open(&self) -> usize {
        self.lock().conns.len()
    }
}

impl Drop for SolanaFake {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        self.drop_websockets();
        let _ = TcpStream::connect_timeout(&self.http, Duration::from_millis(100));
        let _ = TcpStream::connect_timeout(&self.ws, Duration::from_millis(100));
    }
}

// ---- JSON-RPC ----------------------------------------------------------------------------------------

fn invalid(msg: &str) -> Value {
    json!({"code": -32602, "message": msg})
}

fn decode_tx(params: &Value) -> Result<Vec<u8>, Value> {
    let text = params[0]
        .as_str()
        .ok_or_else(|| invalid("Invalid params: expected a string"))?;
    let encoding = params[1]["encoding"].as_str().unwrap_or("base58");
    let raw = match encoding {
        "base58" => bs58::decode(text)
            .into_vec()
            .map_err(|e| invalid(&format!("invalid base58 encoding: {e}")))?,
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| invalid(&format!("invalid base64 encoding: {e}")))?,
        other => return Err(invalid(&format!("unsupported encoding: {other}"))),
    };
    if raw.len() < 65 || raw[0] == 0 {
        return Err(invalid("failed to deserialize transaction"));
    }
    Ok(raw)
}

/// A compact-u16 at `raw[*at..]`, advancing `at`.
fn compact_u16(raw: &[u8], at: &mut usize) -> Option<usize> {
    let mut v = 0usize;
    for shift in [0, 7, 14] {
        let b = *raw.get(*at)?;
        *at += 1;
        v |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// A wire transaction's static account keys and recent blockhash (legacy or versioned message).
pub fn message_keys(raw: &[u8]) -> Option<(Vec<[u8; 32]>, [u8; 32])> {
    let mut at = 0;
    let sigs = compact_u16(raw, &mut at)?;
    at += sigs * 64;
    if *raw.get(at)? & 0x80 != 0 {
        at += 1; // version prefix
    }
    at += 3; // header
    let n = compact_u16(raw, &mut at)?;
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        keys.push(raw.get(at..at + 32)?.try_into().ok()?);
        at += 32;
    }
    Some((keys, raw.get(at..at + 32)?.try_into().ok()?))
}

/// A wire transaction as `getTransaction` encodes it as "json": signatures and the message with its
/// header, account keys, blockhash, instructions (data base58) and address table lookups.
fn tx_json(raw: &[u8]) -> Option<Value> {
    let mut at = 0;
    let n = compact_u16(raw, &mut at)?;
    let mut signatures = Vec::with_capacity(n);
    for _ in 0..n {
        signatures.push(b58(raw.get(at..at + 64)?));
        at += 64;
    }
    let versioned = *raw.get(at)? & 0x80 != 0;
    if versioned {
        at += 1;
    }
    let header = raw.get(at..at + 3)?;
    at += 3;
    let keys = compact_u16(raw, &mut at)?;
    let mut account_keys = Vec::with_capacity(keys);
    for _ in 0..keys {
        account_keys.push(b58(raw.get(at..at + 32)?));
        at += 32;
    }
    let blockhash = b58(raw.get(at..at + 32)?);
    at += 32;
    let bytes = |at: &mut usize| -> Option<Vec<u8>> {
        let len = compact_u16(raw, at)?;
        let v = raw.get(*at..*at + len)?.to_vec();
        *at += len;
        Some(v)
    };
    let count = compact_u16(raw, &mut at)?;
    let mut instructions = Vec::with_capacity(count);
    for _ in 0..count {
        let program = *raw.get(at)?;
        at += 1;
        let accounts = bytes(&mut at)?;
        let data = bytes(&mut at)?;
        instructions
            .push(json!({"programIdIndex": program, "accounts": accounts, "data": b58(&data), "stackHeight": null}));
    }
    let mut message = json!({
        "header": {"numRequiredSignatures": header[0], "numReadonlySignedAccounts": header[1],
                   "numReadonlyUnsignedAccounts": header[2]},
        "accountKeys": account_keys,
        "recentBlockhash": blockhash,
        "instructions": instructions,
    });
    if versioned {
        let n = compact_u16(raw, &mut at)?;
        let mut lookups = Vec::with_capacity(n);
        for _ in 0..n {
            let key = b58(raw.get(at..at + 32)?);
            at += 32;
            let writable = bytes(&mut at)?;
            let readonly = bytes(&mut at)?;
            lookups.push(json!({"accountKey": key, "writableIndexes": writable, "readonlyIndexes": readonly}));
        }
        message["addressTableLookups"] = json!(lookups);
    }
    Some(json!({"signatures": signatures, "message": message}))
}

/// A one-instruction legacy transaction signed (in name) by `signer`, calling `program` with no accounts:
/// what the fake stores for a transaction it makes itself.
fn made_up_transaction(sig: &str, signer: &str, program: &str, blockhash: &str) -> Vec<u8> {
    let mut raw = vec![1];
    raw.extend_from_slice(&bs58::decode(sig).into_vec().unwrap_or_else(|_| vec![0; 64]));
    raw.extend_from_slice(&[1, 0, 1, 2]);
    raw.extend_from_slice(&pubkey_bytes(signer));
    raw.extend_from_slice(&pubkey_bytes(program));
    raw.extend_from_slice(&pubkey_bytes(blockhash));
    raw.extend_from_slice(&[1, 1, 0, 0]);
    raw
}

/// A 64-byte signature derived from another one and a tag (a transaction the fake makes up).
fn derived_signature(sig: &str, tag: &str) -> String {
    let a = Sha256::digest(format!("{tag}/0/{sig}").as_bytes());
    let b = Sha256::digest(format!("{tag}/1/{sig}").as_bytes());
    b58(&[a.as_slice(), b.as_slice()].concat())
}

/// A zstd frame holding `data` in one raw (uncompressed) block: what a node's "base64+zstd" decodes to.
pub fn zstd_raw(data: &[u8]) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0xa0]; // magic; single segment, 4-byte content size
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let header = 1 | (data.len() as u32) << 3; // last block, raw
    f.extend_from_slice(&header.to_le_bytes()[..3]);
    f.extend_from_slice(data);
    f
}

/// Whether `account` passes getProgramAccounts' `filters` (dataSize, memcmp with base58 or base64 bytes).
fn passes(account: &Account, filters: &Value) -> bool {
    filters.as_array().is_none_or(|fs| {
        fs.iter().all(|f| {
            if let Some(n) = f["dataSize"].as_u64() {
                return account.data.len() as u64 == n;
            }
            let m = &f["memcmp"];
            let at = m["offset"].as_u64().unwrap_or(0) as usize;
            let text = m["bytes"].as_str().unwrap_or("");
            let want = match m["encoding"].as_str() {
                Some("base64") => base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap_or_default(),
                _ => bs58::decode(text).into_vec().unwrap_or_default(),
            };
            account.data.get(at..at + want.len()) == Some(&want[..])
        })
    })
}

fn encoding_of(params: &Value, at: usize) -> Result<Option<String>, Value> {
    match params[at]["encoding"].as_str() {
        None => Ok(None),
        Some(e @ ("base64" | "base58" | "binary" | "base64+zstd")) => Ok(Some(e.to_string())),
        Some(e) => Err(invalid(&format!(
            "Invalid param: encoding {e} is not supported by this fake"
        ))),
    }
}

fn answer_call(g: &mut State, method: &str, params: &Value) -> Result<Value, Value> {
    if let Some(e) = g.failing.get(method) {
        return Err(e.clone());
    }
    match method {
        "getAccountInfo" => {
            let pk = params[0].as_str().ok_or_else(|| invalid("Invalid params: pubkey"))?;
            pubkey_checked(pk)?;
            let enc = encoding_of(params, 1)?;
            let v = g.accounts.get(pk).map_or(Value::Null, |a| a.to_json(enc.as_deref()));
            Ok(g.wrap(v))
        }
        "getBalance" => {
            let pk = params[0].as_str().ok_or_else(|| invalid("Invalid params: pubkey"))?;
            pubkey_checked(pk)?;
            let v = g.accounts.get(pk).map_or(0, |a| a.lamports);
            Ok(g.wrap(json!(v)))
        }
        "getMultipleAccounts" => {
            let keys = params[0].as_array().ok_or_else(|| invalid("Invalid params: keys"))?;
            if keys.len() > 100 {
                return Err(invalid("Too many inputs provided; max 100"));
            }
            let enc = encoding_of(params, 1)?;
            let mut out = Vec::new();
            for k in keys {
                let pk = k.as_str().ok_or_else(|| invalid("Invalid params: pubkey"))?;
                pubkey_checked(pk)?;
                out.push(g.accounts.get(pk).map_or(Value::Null, |a| a.to_json(enc.as_deref())));
            }
            Ok(g.wrap(Value::Array(out)))
        }
        "getProgramAccounts" => {
            let program = params[0].as_str().ok_or_else(|| invalid("Invalid params: program"))?;
            pubkey_checked(program)?;
            let enc = encoding_of(params, 1)?;
            let found: Vec<Value> = g
                .accounts
                .iter()
                .filter(|(_, a)| a.owner == program && passes(a, &params[1]["filters"]))
                .map(|(k, a)| json!({"pubkey": k, "account": a.to_json(enc.as_deref())}))
                .collect();
            Ok(match params[1]["withContext"].as_bool() {
                Some(true) => g.wrap(Value::Array(found)),
                _ => Value::Array(found),
            })
        }
        "getMinimumBalanceForRentExemption" => {
            let len = params[0].as_u64().unwrap_or(0);
            Ok(json!((128 + len) * 3480 * 2))
        }
        "getTokenAccountBalance" => {
            let pk = params[0].as_str().ok_or_else(|| invalid("Invalid params: pubkey"))?;
            pubkey_checked(pk)?;
            match g.accounts.get(pk) {
                Some(a) if a.owner == TOKEN_PROGRAM && a.data.len() >= 165 => {
                    let amount = u64::from_le_bytes(a.data[64..72].try_into().unwrap());
                    let ui = amount as f64 / 1e6;
                    Ok(g.wrap(json!({
                        "amount": amount.to_string(),
                        "decimals": 6,
                        "uiAmount": ui,
                        "uiAmountString": format!("{ui}"),
                    })))
                }
                _ => Err(invalid("Invalid param: not a Token account")),
            }
        }
        "sendTransaction" => {
            let raw = decode_tx(params)?;
            let sig = b58(&raw[1..65]);
            let slot = g.slot;
            let mut landed = !g.hold;
            let parsed = message_keys(&raw);
            if g.check_blockhashes {
                let known = parsed
                    .as_ref()
                    .is_some_and(|(_, hash)| g.valid_blockhashes.iter().any(|h| *h == b58(hash)));
                if !known {
                    if params[1]["skipPreflight"] != json!(true) {
                        return Err(json!({
                            "code": -32002,
                            "message": "Transaction simulation failed: Blockhash not found",
                            "data": {"accounts": null, "err": "BlockhashNotFound", "logs": [],
                                     "returnData": null, "unitsConsumed": 0},
                        }));
                    }
                    // Taken, never executed: it expires unseen.
                    landed = false;
                }
            }
            let calls_magic = matches!(g.kind, Kind::Er { .. })
                && parsed
                    .as_ref()
                    .is_some_and(|(keys, _)| keys.iter().any(|k| b58(k) == MAGIC_PROGRAM));
            let mut logs = Vec::new();
            if calls_magic && landed {
                // As the ER does: the commit is scheduled by its own transaction (ScheduledCommitSent),
                // whose logs name the base-layer transaction that carries the commit.
                let scheduled = derived_signature(&sig, "scheduled-commit");
                let commit = derived_signature(&sig, "base-commit");
                logs.push(format!("Program {MAGIC_PROGRAM} invoke [1]"));
                logs.push(format!("ScheduledCommitSent signature: {scheduled}"));
                logs.push(format!("Program {MAGIC_PROGRAM} success"));
                let made = made_up_transaction(&scheduled, &g.identity(), MAGIC_PROGRAM, &g.blockhash);
                g.signatures.insert(
                    scheduled.clone(),
                    Landed {
                        slot,
                        tx_base64: base64::engine::general_purpose::STANDARD.encode(made),
                        err: None,
                        landed: true,
                        logs: vec![format!("ScheduledCommitSent signature[0]: {commit}")],
                    },
                );
                g.signature_landed(&scheduled);
                g.commits.push((sig.clone(), scheduled, commit));
            }
            g.signatures.insert(
                sig.clone(),
                Landed {
                    slot,
                    tx_base64: base64::engine::general_purpose::STANDARD.encode(&raw),
                    err: None,
                    landed,
                    logs,
                },
            );
            if landed {
                g.signature_landed(&sig);
            }
            Ok(json!(sig))
        }
        "simulateTransaction" => {
            decode_tx(params)?;
            let name = g.name.clone();
            Ok(g.wrap(json!({
                "accounts": null,
                "err": null,
                "logs": [format!("Program log: simulated by {name}")],
                "returnData": null,
                "unitsConsumed": 1000,
            })))
        }
        "getSignatureStatuses" => {
            let sigs = params[0]
                .as_array()
                .ok_or_else(|| invalid("Invalid params: signatures"))?;
            let out: Vec<Value> = sigs
                .iter()
                .map(|s| match g.signatures.get(s.as_str().unwrap_or("")) {
                    Some(l) if l.landed => json!({
                        "confirmationStatus": "finalized",
                        "confirmations": null,
                        "err": l.err,
                        "slot": l.slot,
                        "status": {"Ok": null},
                    }),
                    _ => Value::Null,
                })
                .collect();
            Ok(g.wrap(Value::Array(out)))
        }
        "getTransaction" => {
            let sig = params[0].as_str().unwrap_or("");
            let encoding = params[1]["encoding"].as_str().unwrap_or("json");
            Ok(match g.signatures.get(sig) {
                Some(l) if l.landed => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(&l.tx_base64)
                        .unwrap_or_default();
                    let transaction = match encoding {
                        "base64" => json!([l.tx_base64, "base64"]),
                        "base58" => json!([b58(&raw), "base58"]),
                        "json" => tx_json(&raw).ok_or_else(|| invalid("the stored transaction does not parse"))?,
                        other => {
                            return Err(invalid(&format!(
                                "Invalid param: encoding {other} is not supported by this fake"
                            )))
                        }
                    };
                    let version = match raw.get(1 + 64 * raw.first().copied().unwrap_or(0) as usize) {
                        Some(b) if b & 0x80 != 0 => json!(b & 0x7f),
                        _ => json!("legacy"),
                    };
                    json!({
                        "blockTime": 1_700_000_000,
                        "meta": {"err": l.err, "fee": 5000, "innerInstructions": [], "logMessages": l.logs,
                                 "postBalances": [], "postTokenBalances": [], "preBalances": [],
                                 "preTokenBalances": [], "rewards": [], "status": {"Ok": null},
                                 "computeUnitsConsumed": 1000},
                        "slot": l.slot,
                        "transaction": transaction,
                        "version": version,
                    })
                }
                _ => Value::Null,
            })
        }
        "getLatestBlockhash" => Ok(g.wrap(json!({
            "blockhash": g.blockhash,
            "lastValidBlockHeight": g.block_height + 150,
        }))),
        "isBlockhashValid" => {
            let h = params[0].as_str().unwrap_or("");
            let valid = g.valid_blockhashes.iter().any(|v| v == h);
            Ok(g.wrap(json!(valid)))
        }
        "getBlockHeight" => Ok(json!(g.block_height)),
        "getEpochInfo" => Ok(json!({
            "absoluteSlot": g.slot,
            "blockHeight": g.block_height,
            "epoch": g.slot / 432_000,
            "slotIndex": g.slot % 432_000,
            "slotsInEpoch": 432_000,
            "transactionCount": 1234,
        })),
        "getSlot" => Ok(json!(g.slot)),
        "getVersion" => Ok(json!({"feature-set": 3_294_202_862u64, "solana-core": "2.2.0"})),
        "getHealth" => Ok(json!("ok")),
        "getRecentPrioritizationFees" => Ok(json!([{"slot": g.slot, "prioritizationFee": 0}])),
        "getPriorityFeeEstimate" => Ok(json!({"priorityFeeEstimate": 1000.0})),
        "getIdentity" => Ok(json!({"identity": g.identity()})),
        "getGenesisHash" => Ok(json!(hash_name(&format!("genesis-{:?}", g.kind)))),
        _ => Err(json!({"code": -32601, "message": "Method not found"})),
    }
}

fn pubkey_checked(pk: &str) -> Result<(), Value> {
    match bs58::decode(pk).into_vec() {
        Ok(v) if v.len() == 32 => Ok(()),
        _ => Err(invalid("Invalid param: Invalid")),
    }
}

fn one_call(g: &mut State, call: &Value, ws: bool) -> Value {
    let method = call["method"].as_str().unwrap_or("").to_string();
    g.calls.push(Call {
        method: method.clone(),
        params: call["params"].clone(),
        ws,
    });
    match answer_call(g, &method, &call["params"]) {
        Ok(r) => json!({"jsonrpc": "2.0", "id": call["id"], "result": r}),
        Err(e) => json!({"jsonrpc": "2.0", "id": call["id"], "error": e}),
    }
}

// ---- HTTP side -----------------------------------------------------------------------------------------

fn http_accept(listener: TcpListener, inner: Arc<Inner>) {
    for stream in listener.incoming() {
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let inner = inner.clone();
        thread::spawn(move || serve_http(stream, inner));
    }
}

fn serve_http(stream: TcpStream, inner: Arc<Inner>) {
    let _ = stream.set_nodelay(true);
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut content_length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                if first {
                    continue;
                }
                break;
            }
            first = false;
            if let Some((k, v)) = l.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-length") {
                    content_length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let delay = {
            let g = inner.lock();
            serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| g.delays.get(v["method"].as_str().unwrap_or("")).copied())
        };
        if let Some(d) = delay {
            thread::sleep(d);
        }
        let lost;
        let (status, reply) = {
            let mut g = inner.lock();
            let method = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["method"].as_str().map(str::to_string));
            lost = method.as_ref().is_some_and(|m| g.lose_answers.contains(m));
            match (g.http_status, method.and_then(|m| g.http_failing.get(&m).copied())) {
                (Some(s), _) | (None, Some(s)) => {
                    // Still counted: the request reached the node.
                    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                        let calls: Vec<Value> = match v {
                            Value::Array(a) => a,
                            one => vec![one],
                        };
                        for c in calls {
                            g.calls.push(Call {
                                method: c["method"].as_str().unwrap_or("").to_string(),
                                params: c["params"].clone(),
                                ws: false,
                            });
                        }
                    }
                    (s, b"upstream failure".to_vec())
                }
                (None, None) => (200, answer_body(&mut g, &body)),
            }
        };
        if lost {
            let _ = out.shutdown(std::net::Shutdown::Both);
            return;
        }
        let reason = if status == 200 { "OK" } else { "Error" };
        let ctype = if status == 200 {
            "application/json"
        } else {
            "text/plain"
        };
        let mut resp = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
            reply.len()
        )
        .into_bytes();
        resp.extend_from_slice(&reply);
        if out.write_all(&resp).and_then(|_| out.flush()).is_err() {
            return;
        }
    }
}

fn answer_body(g: &mut State, body: &[u8]) -> Vec<u8> {
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#.to_vec();
    };
    let v = match &req {
        Value::Array(items) => Value::Array(items.iter().map(|c| one_call(g, c, false)).collect()),
        call => one_call(g, call, false),
    };
    v.to_string().into_bytes()
}

// ---- WebSocket side -----------------------------------------------------------------------------------

/// A server frame (FIN, unmasked) with this opcode and payload.
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(payload.len() + 10);
    f.push(0x80 | opcode);
    let len = payload.len();
    if len < 126 {
        f.push(len as u8);
    } else if len <= u16::MAX as usize {
        f.push(126);
        f.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        f.push(127);
        f.extend_from_slice(&(len as u64).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

fn write_text(writer: &Mutex<TcpStream>, text: &str) -> bool {
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    w.write_all(&frame(0x1, text.as_bytes()))
        .and_then(|_| w.flush())
        .is_ok()
}

fn ws_accept(listener: TcpListener, inner: Arc<Inner>) {
    for stream in listener.incoming() {
        if inner.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let (refuse, delay) = {
            let g = inner.lock();
            (g.ws_refuse, g.ws_accept_delay)
        };
        let inner = inner.clone();
        thread::spawn(move || {
            if let Some(d) = delay {
                thread::sleep(d);
            }
            if refuse {
                let mut stream = stream;
                let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream
                    .write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = stream.shutdown(Shutdown::Both);
            } else {
                serve_ws(stream, inner);
            }
        });
    }
}

fn sub_id(params: &Value) -> u64 {
    params[0].as_u64().unwrap_or(u64::MAX)
}

fn serve_ws(stream: TcpStream, inner: Arc<Inner>) {
    let _ = stream.set_nodelay(true);
    let Ok(writer) = stream.try_clone() else { return };
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    let writer = Arc::new(Mutex::new(writer));
    let conn = {
        let mut g = inner.lock();
        let id = g.next_conn;
        g.next_conn += 1;
        g.ws_accepted += 1;
        g.conns.insert(id, WsConn { writer: writer.clone() });
        id
    };
    loop {
        let msg = match ws.read() {
            Ok(m) => m,
            Err(_) => break,
        };
        let text = match msg {
            tungstenite::Message::Text(t) => t,
            tungstenite::Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            tungstenite::Message::Close(_) => break,
            _ => continue,
        };
        let Ok(req) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let mut g = inner.lock();
        if !g.conns.contains_key(&conn) {
            break;
        }
        let items: Vec<Value> = match req {
            Value::Array(a) => a,
            one => vec![one],
        };
        for req in items {
            let method = req["method"].as_str().unwrap_or("").to_string();
            let id = req["id"].clone();
            let params = req["params"].clone();
            let mut after: Option<String> = None;
            let answer = {
                let subscribe = |g: &mut State, kind: SubKind| -> Value {
                    let sid = g.next_sub;
                    g.next_sub += 1;
                    g.subs.insert(sid, Sub { conn, kind });
                    json!(sid)
                };
                let result: Result<Value, Value> = match method.as_str() {
                    "accountSubscribe" => match params[0].as_str().map(|p| (p, pubkey_checked(p))) {
                        Some((pk, Ok(()))) => Ok(subscribe(
                            &mut g,
                            SubKind::Account {
                                pubkey: pk.to_string(),
                                encoding: params[1]["encoding"].as_str().map(str::to_string),
                                commitment: params[1]["commitment"].as_str().map(str::to_string),
                            },
                        )),
                        _ => Err(invalid("Invalid Request: Invalid pubkey provided")),
                    },
                    "slotSubscribe" => Ok(subscribe(&mut g, SubKind::Slot)),
                    "programSubscribe" => match params[0].as_str().map(|p| (p, pubkey_checked(p))) {
                        Some((program, Ok(()))) => Ok(subscribe(
                            &mut g,
                            SubKind::Program {
                                program: program.to_string(),
                                encoding: params[1]["encoding"].as_str().map(str::to_string),
                            },
                        )),
                        _ => Err(invalid("Invalid Request: Invalid pubkey provided")),
                    },
                    "signatureSubscribe" => match params[0].as_str() {
                        Some(sig) => {
                            let sid = subscribe(
                                &mut g,
                                SubKind::Signature {
                                    signature: sig.to_string(),
                                },
                            );
                            if g.signatures.get(sig).is_some_and(|l| l.landed) {
                                after = Some(sig.to_string());
                            }
                            Ok(sid)
                        }
                        None => Err(invalid("Invalid Request: signature")),
                    },
                    "accountUnsubscribe" | "slotUnsubscribe" | "signatureUnsubscribe" | "programUnsubscribe" => {
                        let sid = sub_id(&params);
                        let mine = g.subs.get(&sid).is_some_and(|s| s.conn == conn);
                        if mine {
                            g.subs.remove(&sid);
                        }
                        Ok(json!(mine))
                    }
                    _ => {
                        let r = one_call(&mut g, &req, true);
                        let _ = write_text(&writer, &r.to_string());
                        continue;
                    }
                };
                g.calls.push(Call {
                    method: method.clone(),
                    params: params.clone(),
                    ws: true,
                });
                match result {
                    Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
                    Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
                }
            };
            let _ = write_text(&writer, &answer.to_string());
            if let Some(sig) = after {
                g.signature_landed(&sig);
            }
        }
    }
    let mut g = inner.lock();
    g.conns.remove(&conn);
    g.subs.retain(|_, s| s.conn != conn);
}

// ---- fixtures --------------------------------------------------------------------------------------------

/// `tests/fixtures/solana/fixtures.json` (written by make_fixtures.py).
pub fn fixtures() -> &'static Value {
    static F: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    F.get_or_init(|| serde_json::from_str(include_str!("../fixtures/solana/fixtures.json")).expect("fixtures.json"))
}

/// The pubkey of a named fixture account ("payer", "alice", "er1_identity" ...).
pub fn pk(name: &str) -> String {
    fixtures()["accounts"][name]["pubkey"]
        .as_str()
        .unwrap_or_else(|| panic!("no fixture account {name:?}"))
        .to_string()
}

/// The delegation record PDA of a named fixture account, as solders derived it.
pub fn record_of(name: &str) -> String {
    fixtures()["accounts"][name]["delegation_record"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A named fixture transaction (`base58`, `base64`, `signature`, `account_keys`, `writable` ...).
pub fn tx(name: &str) -> &'static Value {
    let t = &fixtures()["transactions"][name];
    assert!(t.is_object(), "no fixture transaction {name:?}");
    t
}

/// Field `field` of fixture transaction `name` as a string.
pub fn tx_str(name: &str, field: &str) -> String {
    tx(name)[field]
        .as_str()
        .unwrap_or_else(|| panic!("fixture {name}.{field}"))
        .to_string()
}

/// Puts the v0 fixture's address lookup table on a (base) fake.
pub fn install_alt(base: &SolanaFake) {
    let alt = &fixtures()["alt"];
    let data = base64::engine::general_purpose::STANDARD
        .decode(alt["data_base64"].as_str().unwrap())
        .unwrap();
    let mut acc = Account::new(1_000_000, alt["owner"].as_str().unwrap(), &data);
    acc.executable = false;
    base.set_account(alt["address"].as_str().unwrap(), acc);
}

// ---- a magic-router deployment -----------------------------------------------------------------------------

/// The `[[networks]]` table of a solana-magic network: `base` as "base-1", each `(name, fake)` as an
/// ephemeral provider whose identity is the fake's; `default_er` names the ER for default-authority records.
pub fn magic_network_toml(base: &SolanaFake, ers: &[(&str, &SolanaFake)], default_er: &str) -> String {
    let mut t = format!(
        "[[networks]]\nname = \"solana\"\nkind = \"solana-magic\"\ndelegation_program = \"{DELEGATION_PROGRAM}\"\n\
         default_er = \"{default_er}\"\n\
         # The fakes' clocks move only when a test moves them: no stall check unless a test asks for one.\n\
         slot_stall_ms = 0\n\n  [[networks.providers]]\n  name = \"base-1\"\n  role = \"base\"\n  \
         url = \"{}\"\n  ws_url = \"{}\"\n",
        base.url(),
        base.ws_url()
    );
    for (name, er) in ers {
        t.push_str(&format!(
            "\n  [[networks.providers]]\n  name = \"{name}\"\n  role = \"ephemeral\"\n  identity = \"{}\"\n  \
             url = \"{}\"\n  ws_url = \"{}\"\n  public_url=\"{}\"\n",
            er.identity(),
            er.url(),
            er.ws_url(),
            er.url()
        ));
    }
    t
}

/// A base layer, ER "er-1" (identity = fixture er1_identity) and, when `two_ers`, ER "er-2" (er2_identity),
/// with Prism in front (default_er = "er-1", WebSocket on listen port + 1 as well).
pub struct Magic {
    pub base: SolanaFake,
    pub er1: SolanaFake,
    pub er2: Option<SolanaFake>,
    pub prism: super::Prism,
}

impl Magic {
    pub fn start() -> Magic {
        Magic::start_with(false, |b| b)
    }
    pub fn two_ers() -> Magic {
        Magic::start_with(true, |b| b)
    }
    /// With a hook to adjust the builder (limits, shards ...).
    pub fn start_with(two: bool, adjust: impl FnOnce(super::PrismBuilder) -> super::PrismBuilder) -> Magic {
        Magic::start_with_network(two, |net, _| net, adjust)
    }
    /// As `start_with`, with the `[[networks]]` table passed through `edit` (given the ER 1 fake) first.
    pub fn start_with_network(
        two: bool,
        edit: impl FnOnce(String, &SolanaFake) -> String,
        adjust: impl FnOnce(super::PrismBuilder) -> super::PrismBuilder,
    ) -> Magic {
        let base = SolanaFake::base();
        let er1 = SolanaFake::er(&pk("er1_identity"));
        let er2 = two.then(|| SolanaFake::er(&pk("er2_identity")));
        install_alt(&base);
        let mut ers = vec![("er-1", &er1)];
        if let Some(e) = &er2 {
            ers.push(("er-2", e));
        }
        let net = edit(magic_network_toml(&base, &ers, "er-1"), &er1);
        let builder = adjust(super::Prism::builder().listen_pair().extra_toml(&net));
        let prism = builder.start();
        Magic { base, er1, er2, prism }
    }
    pub fn er2(&self) -> &SolanaFake {
        self.er2.as_ref().expect("started without er-2")
    }
    /// POSTs one call to `/` and returns the whole response object (panics unless HTTP 200 + JSON).
    pub fn call(&self, method: &str, params: Value) -> Value {
        self.call_at("/", method, params)
    }
    pub fn call_at(&self, path: &str, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let r = self.prism.rpc_at(path, body.as_bytes());
        assert_eq!(r.status, 200, "{method}: {}", r.describe());
        r.json()
    }
    /// The `result` of one call (panics, with the answer, on an error).
    pub fn result(&self, method: &str, params: Value) -> Value {
        let v = self.call(method, params.clone());
        assert!(
            v.get("error").is_none() && v.get("result").is_some(),
            "{method} {params}: expected a result, got {v}"
        );
        v["result"].clone()
    }
    /// The `error` of one call (panics, with the answer, when it succeeded).
    pub fn error(&self, method: &str, params: Value) -> Value {
        let v = self.call(method, params.clone());
        assert!(
            v.get("error").is_some(),
            "{method} {params}: expected an error, got {v}"
        );
        v["error"].clone()
    }
    /// The raw response body of one call.
    pub fn raw(&self, method: &str, params: Value) -> Vec<u8> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let r = self.prism.rpc(body.as_bytes());
        assert_eq!(r.status, 200, "{method}: {}", r.describe());
        r.body
    }
}

// ---- a Solana WebSocket client --------------------------------------------------------------------------------

/// A blocking Solana PubSub client (tungstenite) for a Prism or fake WebSocket address.
pub struct SolWs {
    ws: tungstenite::WebSocket<TcpStream>,
    /// Notifications read while waiting for a reply.
    pending: std::collections::VecDeque<Value>,
    next_id: u64,
}

pub const WS_WAIT: Duration = Duration::from_secs(10);

impl SolWs {
    /// Connects to `ws://ADDR/PATH`.
    pub fn connect(addr: SocketAddr, path: &str) -> SolWs {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_read_timeout(Some(WS_WAIT)).unwrap();
        let url = format!("ws://{addr}{path}");
        let (ws, _) = tungstenite::client(url.as_str(), stream).unwrap_or_else(|e| panic!("upgrade {url}: {e}"));
        ws.get_ref().set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        SolWs {
            ws,
            pending: Default::default(),
            next_id: 1,
        }
    }

    pub fn send(&mut self, v: &Value) {
        self.ws
            .send(tungstenite::Message::Text(v.to_string()))
            .expect("send over WebSocket");
    }

    /// The next JSON message within `within`; None when silent. Panics when the socket closes.
    pub fn next(&mut self, within: Duration) -> Option<Value> {
        let deadline = std::time::Instant::now() + within;
        loop {
            match self.ws.read() {
                Ok(tungstenite::Message::Text(t)) => {
                    return Some(serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}): {t}")))
                }
                Ok(tungstenite::Message::Close(f)) => panic!("the WebSocket closed: {f:?}"),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    if std::time::Instant::now() >= deadline {
                        return None;
                    }
                }
                Err(e) => panic!("WebSocket read: {e}"),
            }
        }
    }

    /// Sends a call and returns the whole response object; notifications read meanwhile are kept.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = std::time::Instant::now() + WS_WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next(left) {
                Some(v) if v.get("method").is_some() => self.pending.push_back(v),
                Some(v) if v["id"] == json!(id) => return v,
                Some(v) => panic!("{method}: unexpected message {v}"),
                None => panic!("{method}: no answer within {WS_WAIT:?}"),
            }
        }
    }

    /// `xSubscribe` → the subscription id (a number, as real nodes send it).
    pub fn subscribe(&mut self, method: &str, params: Value) -> u64 {
        let r = self.call(method, params.clone());
        r["result"]
            .as_u64()
            .unwrap_or_else(|| panic!("{method} {params}: expected a numeric subscription id, got {r}"))
    }

    /// The next notification of `method` ("accountNotification" ...) within `within`, as its `params`.
    pub fn notification(&mut self, method: &str, within: Duration) -> Option<Value> {
        if let Some(i) = self.pending.iter().position(|v| v["method"] == method) {
            return self.pending.remove(i).map(|v| v["params"].clone());
        }
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next(left) {
                Some(v) if v["method"] == method => return Some(v["params"].clone()),
                Some(v) if v.get("method").is_some() => self.pending.push_back(v),
                Some(v) => panic!("unexpected message while waiting for {method}: {v}"),
                None => return None,
            }
        }
    }

    /// Reads `method` notifications until one satisfies `pred` (within `within`); returns it.
    pub fn notification_where(
        &mut self,
        method: &str,
        within: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let n = self.notification(method, left)?;
            if pred(&n) {
                return Some(n);
            }
        }
    }

    /// Drops queued notifications.
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    pub fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }
}
