//! The delegation record the delegation program keeps at `["delegation", account]`: who the account is
//! delegated to. Layout: u64 LE discriminator (100), authority (the ER validator identity) at 8..40, the
//! original owner at 40..72, then the delegation slot and lamports; newer program versions append fields.

use super::pubkey::Pubkey;

pub const DISCRIMINATOR: u64 = 100;
pub const MIN_LEN: usize = 96;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelegationRecord {
    /// The ER validator identity; `Pubkey::ZERO` means "the network's default ER".
    pub authority: Pubkey,
    pub owner: Pubkey,
    pub delegation_slot: u64,
    pub lamports: u64,
}

impl DelegationRecord {
    /// Reads a record account's data; `None` when it is not a delegation record.
    pub fn parse(data: &[u8]) -> Option<DelegationRecord> {
        if data.len() < MIN_LEN || u64::from_le_bytes(data[0..8].try_into().ok()?) != DISCRIMINATOR {
            return None;
        }
        let key = |at: usize| {
            let mut k = [0u8; 32];
            k.copy_from_slice(&data[at..at + 32]);
            Pubkey(k)
        };
        Some(DelegationRecord {
            authority: key(8),
            owner: key(40),
            delegation_slot: u64::from_le_bytes(data[72..80].try_into().ok()?),
            lamports: u64::from_le_bytes(data[80..88].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_authority_and_owner_and_refuses_other_accounts() {
        let mut d = vec![0u8; 96];
        d[0] = 100;
        d[8..40].copy_from_slice(&[4; 32]);
        d[40..72].copy_from_slice(&[5; 32]);
        d[72] = 9;
        let r = DelegationRecord::parse(&d).unwrap();
        assert_eq!(r.authority, Pubkey([4; 32]));
        assert_eq!(r.owner, Pubkey([5; 32]));
        assert_eq!(r.delegation_slot, 9);
        assert!(DelegationRecord::parse(&d[..95]).is_none());
        d[0] = 101;
        assert!(DelegationRecord::parse(&d).is_none());
    }
}
