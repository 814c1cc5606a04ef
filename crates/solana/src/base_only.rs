//! Accounts that live only on the base layer, whatever any delegation record says: sysvars, native programs
//! and loaders, the delegation program, and the delegation program's own accounts (delegation records,
//! their metadata, commit state, fee vaults...). MagicBlock's SDK reads and subscribes to delegation records
//! through the router (its `Resolver`), so a record must be served from the base layer, and every
//! notification about it relayed.
//!
//! The first kind is known by address. The delegation program's own accounts are not (they are PDAs of
//! seeds Prism does not know), so they are recognised by what the base layer says: an account owned by the
//! delegation program is either the base layer's copy of a delegated account (its delegation record
//! exists) or one of the program's own accounts (no record). A delegated account's record is written in the
//! same transaction that hands the account to the program, so a record read at least as new as the answer
//! tells the two apart; the answer is then remembered (`Entry::base_only`): the program never delegates its
//! own accounts.

use std::collections::HashSet;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::pubkey::Pubkey;
use super::table::Status;
use super::SolanaRoute;

/// Sysvars, native programs and loaders: they exist on the base layer (an ER has its own clock, and copies
/// of programs, but the base layer's are the real ones).
const BY_ADDRESS: &[&str] = &[
    "Sysvar1111111111111111111111111111111111111",
    "SysvarC1ock11111111111111111111111111111111",
    "SysvarEpochRewards1111111111111111111111111",
    "SysvarEpochSchedu1e111111111111111111111111",
    "SysvarFees111111111111111111111111111111111",
    "Sysvar1nstructions1111111111111111111111111",
    "SysvarLastRestartS1ot1111111111111111111111",
    "SysvarRecentB1ockHashes11111111111111111111",
    "SysvarRent111111111111111111111111111111111",
    "SysvarRewards111111111111111111111111111111",
    "SysvarS1otHashes111111111111111111111111111",
    "SysvarS1otHistory11111111111111111111111111",
    "SysvarStakeHistory1111111111111111111111111",
    "11111111111111111111111111111111",
    "NativeLoader1111111111111111111111111111111",
    "BPFLoader1111111111111111111111111111111111",
    "BPFLoader2111111111111111111111111111111111",
    "BPFLoaderUpgradeab1e11111111111111111111111",
    "LoaderV411111111111111111111111111111111111",
    "Config1111111111111111111111111111111111111",
    "Stake11111111111111111111111111111111111111",
    "Vote111111111111111111111111111111111111111",
    "Feature111111111111111111111111111111111111",
    "ComputeBudget111111111111111111111111111111",
    "AddressLookupTab1e1111111111111111111111111",
    "Ed25519SigVerify111111111111111111111111111",
    "KeccakSecp256k11111111111111111111111111111",
    "Secp256r1SigVerify1111111111111111111111111",
];

fn known() -> &'static HashSet<Pubkey> {
    static KNOWN: OnceLock<HashSet<Pubkey>> = OnceLock::new();
    KNOWN.get_or_init(|| BY_ADDRESS.iter().filter_map(|k| Pubkey::from_base58(k)).collect())
}

/// Whether `account` is known by its address to live on the base layer only (`program`: the network's
/// delegation program).
pub fn by_address(account: &Pubkey, program: &Pubkey) -> bool {
    account == program || known().contains(account)
}

/// What a base-layer account owned by the delegation program is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramOwned {
    /// The base layer's copy of a delegated account: not its state (that is on the ER).
    DelegatedCopy(Status),
    /// The program's own account, or not proven otherwise: its state, to be served as the base layer sent it.
    Own,
}

/// How long Prism waits for a record read as new as the answer it is judging.
const SETTLE: Duration = Duration::from_secs(2);
const GAP: Duration = Duration::from_millis(100);

impl SolanaRoute {
    /// Judges a base-layer answer (at `slot`) showing `account` owned by the delegation program: rereads the
    /// account's record until the table's view is at least that new (bounded). Unproven (the base layer
    /// lagging or failing) counts as `Own`: a value is passed on rather than lost.
    pub async fn program_owned(self: &Rc<Self>, account: Pubkey, slot: u64, deadline: Instant) -> ProgramOwned {
        let entry = self.watch(account);
        if entry.base_only.get() {
            return ProgramOwned::Own;
        }
        let deadline = deadline.min(Instant::now() + SETTLE);
        loop {
            let read = self.refresh(&entry, deadline).await;
            match entry.status.get() {
                s @ Status::Delegated { .. } => return ProgramOwned::DelegatedCopy(s),
                Status::Undelegated if read.is_ok() && entry.slot.get() >= slot => {
                    entry.base_only.set(true);
                    tracing::debug!(network = %self.net.name, %account, "a delegation-program account: served from the base layer");
                    return ProgramOwned::Own;
                }
                _ => {}
            }
            if Instant::now() + GAP >= deadline {
                return ProgramOwned::Own;
            }
            prism_runtime::sleep(GAP).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysvars_programs_and_the_delegation_program_are_known() {
        let program = Pubkey::from_base58(super::super::pubkey::DELEGATION_PROGRAM).unwrap();
        assert_eq!(known().len(), BY_ADDRESS.len(), "every listed address parses");
        for k in [
            "SysvarC1ock11111111111111111111111111111111",
            "BPFLoaderUpgradeab1e11111111111111111111111",
        ] {
            assert!(by_address(&Pubkey::from_base58(k).unwrap(), &program), "{k}");
        }
        assert!(by_address(&program, &program));
        assert!(!by_address(&Pubkey([7; 32]), &program));
    }
}
