//! Which providers serve `eth_sendRawTransactionSync` (EIP-7966) themselves: declared per provider
//! (`sync_submit`), or learned on each shard when one answers the method "not found"/"not supported". A
//! provider that does not is sent `eth_sendRawTransaction` instead, once, and Prism waits for the receipt
//! (`core::call::submit`). What was learned is re-checked after [`RELEARN_MS`], so a provider that starts serving
//! the method is used natively again, at the cost of one refused call.

use std::cell::Cell;

use prism_config::SyncSubmit;
use prism_wire::rpc::ProviderId;

/// How long a provider that refused the method is taken to lack it.
pub const RELEARN_MS: u64 = 3_600_000;

/// Per shard and network: each provider's declared `sync_submit`, and until when it is known to lack the
/// method (0 = not learned).
#[derive(Debug, Default)]
pub struct SyncSupport {
    declared: Vec<SyncSubmit>,
    lacks_until_ms: Vec<Cell<u64>>,
}

impl SyncSupport {
    pub fn new(declared: Vec<SyncSubmit>) -> SyncSupport {
        let lacks_until_ms = declared.iter().map(|_| Cell::new(0)).collect();
        SyncSupport {
            declared,
            lacks_until_ms,
        }
    }

    /// The providers `eth_sendRawTransactionSync` is sent to as it is (bit i = provider i): all but those
    /// declared `emulate` and those that refused it within [`RELEARN_MS`].
    pub fn native(&self, now_ms: u64) -> u64 {
        let mut mask = u64::MAX;
        for (i, (d, until)) in self.declared.iter().zip(&self.lacks_until_ms).enumerate().take(64) {
            if *d == SyncSubmit::Emulate || (*d == SyncSubmit::Auto && until.get() > now_ms) {
                mask &= !(1u64 << i);
            }
        }
        mask
    }

    /// Provider `p` answered the method "not found": unless it is declared `native` (its refusal is then
    /// the client's answer), it lacks the method, and the call is emulated there. Returns whether to emulate.
    pub fn learn_lacking(&self, p: ProviderId, now_ms: u64) -> bool {
        match self.declared.get(p.index()) {
            Some(SyncSubmit::Native) => false,
            Some(_) => {
                if let Some(until) = self.lacks_until_ms.get(p.index()) {
                    until.set(now_ms + RELEARN_MS);
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_and_learned_providers_are_emulated_until_relearned() {
        let s = SyncSupport::new(vec![SyncSubmit::Auto, SyncSubmit::Emulate, SyncSubmit::Native]);
        assert_eq!(s.native(10) & 0b111, 0b101, "emulate is never sent the method");
        assert!(s.learn_lacking(ProviderId::new(0), 10));
        assert_eq!(s.native(11) & 0b111, 0b100);
        assert_eq!(s.native(10 + RELEARN_MS) & 0b111, 0b101, "asked again after an hour");
        assert!(
            !s.learn_lacking(ProviderId::new(2), 10),
            "native: its refusal is the answer"
        );
        assert_eq!(s.native(11) & 0b111, 0b100);
    }
}
