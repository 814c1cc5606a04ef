//! Blame needs evidence: what one shard remembers about JSON-RPC errors no rule of the classifier knows.
//!
//! An unknown error in a well-formed answer to a read is asked once of another provider (a second opinion,
//! see `forward`). Its verdict, the client's call or the provider's fault, is remembered here per
//! (method, error code, message shape) for [`VERDICT_TTL_MS`], so a tenant's stream of the same bad call
//! costs one second opinion rather than one per call. The message shape is the message with every token
//! that holds a digit left out ("block numbers must be in order: 144 <= 154" and "...: 155 <= 155" are one
//! shape), so one `-32000` (geth's code for almost everything) does not stand for all others.
//!
//! One table per network per shard (it hangs on `NetworkRoute`): no lock, fixed capacity, no allocation.
//! When full, the entry closest to expiry is evicted.

use prism_wire::rpc::ProviderId;
use std::cell::Cell;

/// How long a verdict is believed.
pub const VERDICT_TTL_MS: u64 = 60_000;
/// How long a second opinion in flight stands for its verdict: identical errors meanwhile are answered
/// without blame (and without asking again).
pub const PENDING_TTL_MS: u64 = 5_000;
/// Entries per table.
pub const CAPACITY: usize = 64;
/// How much of a message shapes the key.
const SHAPE_BYTES: usize = 256;

/// Whose fault an unknown error was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// Another provider answered the same (or the call was refused there as a user error): the call's.
    Client,
    /// Another provider answered the call with a result: the fault of this provider (by index), and of no
    /// other that later answers the same.
    Provider(ProviderId),
    /// A second opinion is in flight.
    Pending,
}

/// What identifies "the same error" for the memory: the method, the error code, the message's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlameKey {
    hash: u64,
    code: i64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(h: u64, b: u8) -> u64 {
    (h ^ b as u64).wrapping_mul(FNV_PRIME)
}

impl BlameKey {
    /// The key of `error` (a JSON-RPC error object, raw bytes) answering `method`.
    pub fn of(method: &str, error: &[u8]) -> BlameKey {
        let mut hash = method.bytes().fold(FNV_OFFSET, fnv);
        hash = fnv(hash, 0xff);
        let code = prism_wire::jsonscan::object_field(error, "code")
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.trim().parse::<i64>().ok())
            .unwrap_or(i64::MIN);
        let message = prism_wire::jsonscan::object_field(error, "message").unwrap_or_default();
        let message = &message[..message.len().min(SHAPE_BYTES)];
        // Tokens are runs of ASCII letters and digits (and bytes >= 0x80); a token with a digit is a number,
        // an address or a hash, and is left out. Tokens are separated by one space in the hash.
        for token in message
            .split(|b| !(b.is_ascii_alphanumeric() || *b >= 0x80))
            .filter(|t| !t.is_empty() && !t.iter().any(u8::is_ascii_digit))
        {
            hash = token.iter().map(u8::to_ascii_lowercase).fold(hash, fnv);
            hash = fnv(hash, b' ');
        }
        BlameKey { hash, code }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    key: BlameKey,
    blame: Blame,
    /// Expiry; 0 for an empty slot.
    until_ms: u64,
}

const EMPTY: Entry = Entry {
    key: BlameKey { hash: 0, code: 0 },
    blame: Blame::Pending,
    until_ms: 0,
};

/// One shard's verdicts for one network.
pub struct BlameMemory {
    slots: [Cell<Entry>; CAPACITY],
}

impl Default for BlameMemory {
    fn default() -> Self {
        BlameMemory {
            slots: std::array::from_fn(|_| Cell::new(EMPTY)),
        }
    }
}

impl BlameMemory {
    pub fn new() -> BlameMemory {
        BlameMemory::default()
    }

    /// The verdict on `key`, while it stands.
    pub fn recall(&self, key: BlameKey, now_ms: u64) -> Option<Blame> {
        self.slots
            .iter()
            .map(Cell::get)
            .find(|e| e.key == key && e.until_ms > now_ms)
            .map(|e| e.blame)
    }

    /// A second opinion on `key` is being asked.
    pub fn begin(&self, key: BlameKey, now_ms: u64) {
        self.put(key, Blame::Pending, now_ms + PENDING_TTL_MS, now_ms);
    }

    /// The second opinion on `key` came back: remember `blame`, or forget the key when it settled nothing.
    pub fn settle(&self, key: BlameKey, blame: Option<Blame>, now_ms: u64) {
        match blame {
            Some(b) => self.put(key, b, now_ms + VERDICT_TTL_MS, now_ms),
            None => {
                if let Some(slot) = self.slots.iter().find(|s| s.get().key == key) {
                    slot.set(EMPTY);
                }
            }
        }
    }

    /// Live entries (for tests and diagnostics).
    pub fn len(&self, now_ms: u64) -> usize {
        self.slots.iter().filter(|s| s.get().until_ms > now_ms).count()
    }

    pub fn is_empty(&self, now_ms: u64) -> bool {
        self.len(now_ms) == 0
    }

    fn put(&self, key: BlameKey, blame: Blame, until_ms: u64, now_ms: u64) {
        // The key's own slot, else a free or expired one, else the one closest to expiry.
        let slot = self
            .slots
            .iter()
            .find(|s| s.get().key == key && s.get().until_ms > 0)
            .or_else(|| self.slots.iter().find(|s| s.get().until_ms <= now_ms))
            .unwrap_or_else(|| {
                self.slots
                    .iter()
                    .min_by_key(|s| s.get().until_ms)
                    .expect("capacity > 0")
            });
        slot.set(Entry { key, blame, until_ms });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(method: &str, error: &str) -> BlameKey {
        BlameKey::of(method, error.as_bytes())
    }

    #[test]
    fn numbers_addresses_and_hashes_do_not_change_the_shape() {
        let a = key(
            "eth_simulateV1",
            r#"{"code":-38020,"message":"block numbers must be in order: 144 \u003c= 154"}"#,
        );
        let b = key(
            "eth_simulateV1",
            r#"{"code":-38020,"message":"block numbers must be in order: 155 \u003c= 155"}"#,
        );
        assert_eq!(a, b);
        let c = key(
            "eth_simulateV1",
            r#"{"message":"block numbers must be in order: 1 <= 2","code":-38020}"#,
        );
        assert_eq!(a, c, "member order and escapes of digits do not matter");
        assert_ne!(
            a,
            key(
                "eth_call",
                r#"{"code":-38020,"message":"block numbers must be in order: 1"}"#
            ),
            "another method"
        );
        assert_ne!(
            a,
            key(
                "eth_simulateV1",
                r#"{"code":-38021,"message":"block numbers must be in order: 1"}"#
            ),
            "another code"
        );
        assert_ne!(
            key("eth_call", r#"{"code":-32000,"message":"leveldb: closed"}"#),
            key("eth_call", r#"{"code":-32000,"message":"execution timeout"}"#),
            "another message under the same code"
        );
        assert_eq!(
            key(
                "eth_call",
                r#"{"code":-32000,"message":"account 0xC100 is not a precompile"}"#
            ),
            key(
                "eth_call",
                r#"{"code":-32000,"message":"account 0x0100 is not a precompile"}"#
            ),
        );
    }

    #[test]
    fn verdicts_expire_and_pending_gives_way_to_the_verdict() {
        let m = BlameMemory::new();
        let k = key("eth_call", r#"{"code":-32000,"message":"odd"}"#);
        assert_eq!(m.recall(k, 0), None);
        m.begin(k, 1_000);
        assert_eq!(m.recall(k, 1_001), Some(Blame::Pending));
        assert_eq!(
            m.recall(k, 1_000 + PENDING_TTL_MS),
            None,
            "a lost second opinion does not stick"
        );
        m.settle(k, Some(Blame::Client), 2_000);
        assert_eq!(m.recall(k, 2_001), Some(Blame::Client));
        assert_eq!(m.len(2_001), 1, "one slot per key");
        assert_eq!(m.recall(k, 2_000 + VERDICT_TTL_MS), None);
        m.settle(k, Some(Blame::Provider(ProviderId::new(1))), 3_000);
        assert_eq!(m.recall(k, 3_001), Some(Blame::Provider(ProviderId::new(1))));
        m.settle(k, None, 3_002);
        assert_eq!(m.recall(k, 3_003), None);
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_entry_closest_to_expiry() {
        let m = BlameMemory::new();
        let k = |n: usize| key(&format!("m{n}"), r#"{"code":1,"message":"x"}"#);
        for n in 0..CAPACITY * 3 {
            m.settle(k(n), Some(Blame::Client), n as u64);
        }
        assert_eq!(m.len(CAPACITY as u64 * 3), CAPACITY);
        // The newest ones are there, the oldest were evicted.
        assert_eq!(m.recall(k(CAPACITY * 3 - 1), CAPACITY as u64 * 3), Some(Blame::Client));
        assert_eq!(m.recall(k(0), CAPACITY as u64 * 3), None);
    }
}
