//! Solana public keys: 32 bytes, written base58; program-derived addresses for the delegation records.

use sha2::{Digest, Sha256};

/// A Solana account address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Pubkey(pub [u8; 32]);

impl Pubkey {
    /// The all-zero key (the system program; "no authority" in a delegation record).
    pub const ZERO: Pubkey = Pubkey([0; 32]);

    /// Parses base58 text; `None` unless it decodes to exactly 32 bytes.
    pub fn from_base58(text: &str) -> Option<Pubkey> {
        if text.is_empty() || text.len() > 44 {
            return None;
        }
        let mut out = [0u8; 32];
        match bs58::decode(text).onto(&mut out[..]) {
            Ok(32) => Some(Pubkey(out)),
            _ => None,
        }
    }

    pub fn to_base58(&self) -> String {
        bs58::encode(self.0).into_string()
    }

    /// Whether these bytes are a point on ed25519: program-derived addresses must not be (no private key
    /// can sign for them).
    pub fn is_on_curve(&self) -> bool {
        curve25519_dalek::edwards::CompressedEdwardsY(self.0)
            .decompress()
            .is_some()
    }

    /// `find_program_address`: the first bump from 255 down whose derived address is off the curve.
    pub fn find_program_address(seeds: &[&[u8]], program: &Pubkey) -> Option<(Pubkey, u8)> {
        (0..=255u8).rev().find_map(|bump| {
            let mut h = Sha256::new();
            for s in seeds {
                h.update(s);
            }
            h.update([bump]);
            h.update(program.0);
            h.update(b"ProgramDerivedAddress");
            let key = Pubkey(h.finalize().into());
            (!key.is_on_curve()).then_some((key, bump))
        })
    }

    /// The delegation record PDA of `account` under the delegation program: seeds `["delegation", account]`.
    pub fn delegation_record(&self, delegation_program: &Pubkey) -> Pubkey {
        Pubkey::find_program_address(&[b"delegation", &self.0], delegation_program)
            .map(|(k, _)| k)
            .unwrap_or(Pubkey::ZERO)
    }
}

impl std::fmt::Debug for Pubkey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_base58())
    }
}

impl std::fmt::Display for Pubkey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_base58())
    }
}

/// The MagicBlock delegation program.
pub const DELEGATION_PROGRAM: &str = "DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base58_round_trip_and_rejects_wrong_lengths() {
        let k = Pubkey::from_base58(DELEGATION_PROGRAM).unwrap();
        assert_eq!(k.to_base58(), DELEGATION_PROGRAM);
        assert_eq!(
            Pubkey::from_base58("11111111111111111111111111111111"),
            Some(Pubkey::ZERO)
        );
        assert!(Pubkey::from_base58("abc").is_none());
        assert!(Pubkey::from_base58("0OIl").is_none());
        assert!(Pubkey::from_base58("").is_none());
    }

    #[test]
    fn derived_addresses_are_off_curve_and_deterministic() {
        let program = Pubkey::from_base58(DELEGATION_PROGRAM).unwrap();
        let account = Pubkey::from_base58("9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin").unwrap();
        let a = account.delegation_record(&program);
        assert_eq!(a, account.delegation_record(&program));
        assert!(!a.is_on_curve());
        assert_ne!(a, account);
    }
}
