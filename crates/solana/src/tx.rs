//! The Solana transaction wire format, as far as routing needs it: signatures, the message header that
//! decides writability, static account keys, the recent blockhash, instructions (to spot delegation) and,
//! for v0 messages, address-table lookups. Parsing never trusts a length: every read is bounds-checked.

use base64::Engine;

use super::pubkey::Pubkey;

/// Largest serialized transaction a validator accepts (IPv6 MTU minus headers).
pub const MAX_WIRE_BYTES: usize = 1232;
/// The same cap after base64 encoding, and after base58 encoding (what clients send).
pub const MAX_BASE64_BYTES: usize = 1644;
pub const MAX_BASE58_BYTES: usize = 1683;

/// How a client encoded a transaction in `sendTransaction` / `simulateTransaction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Base58,
    Base64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    #[error("transaction too large: {len} bytes {what} (max {max})")]
    TooLarge { len: usize, max: usize, what: &'static str },
    #[error("invalid {0} encoding of the transaction")]
    Encoding(&'static str),
    #[error("malformed transaction: {0}")]
    Malformed(&'static str),
    #[error("v{0} transactions are not supported by this router (legacy and v0 are)")]
    UnsupportedVersion(u8),
}

/// Decodes a client's encoded transaction, enforcing the size caps before and after decoding.
pub fn decode_payload(text: &[u8], encoding: Encoding) -> Result<Vec<u8>, TxError> {
    let (max, what) = match encoding {
        Encoding::Base58 => (MAX_BASE58_BYTES, "as base58"),
        Encoding::Base64 => (MAX_BASE64_BYTES, "as base64"),
    };
    if text.len() > max {
        return Err(TxError::TooLarge {
            len: text.len(),
            max,
            what,
        });
    }
    let wire = match encoding {
        Encoding::Base58 => super::base58::decode(text).ok_or(TxError::Encoding("base58"))?,
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| TxError::Encoding("base64"))?,
    };
    if wire.len() > MAX_WIRE_BYTES {
        return Err(TxError::TooLarge {
            len: wire.len(),
            max: MAX_WIRE_BYTES,
            what: "on the wire",
        });
    }
    Ok(wire)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Legacy,
    V0,
}

/// The three counts that decide which static keys sign and which are writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub required_signatures: u8,
    pub readonly_signed: u8,
    pub readonly_unsigned: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Index into the full account list (static keys, then looked-up writable, then looked-up readonly).
    pub program: u8,
    pub accounts: Vec<u8>,
    pub data: Vec<u8>,
}

/// One v0 address-table lookup: indexes into the table's address list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    pub table: Pubkey,
    pub writable: Vec<u8>,
    pub readonly: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transaction {
    pub signatures: Vec<[u8; 64]>,
    pub version: Version,
    pub header: Header,
    pub static_keys: Vec<Pubkey>,
    pub blockhash: [u8; 32],
    pub instructions: Vec<Instruction>,
    pub lookups: Vec<Lookup>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TxError> {
        let end = self.at.checked_add(n).ok_or(TxError::Malformed("length overflow"))?;
        let s = self.bytes.get(self.at..end).ok_or(TxError::Malformed("truncated"))?;
        self.at = end;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, TxError> {
        Ok(self.take(1)?[0])
    }

    /// Solana's compact-u16 ("shortvec"): 1–3 bytes, 7 bits each, canonical form only.
    fn compact_u16(&mut self) -> Result<usize, TxError> {
        let mut value = 0usize;
        for i in 0..3 {
            let b = self.byte()?;
            value |= ((b & 0x7f) as usize) << (7 * i);
            if b & 0x80 == 0 {
                if i > 0 && b == 0 {
                    return Err(TxError::Malformed("non-canonical length"));
                }
                if value > u16::MAX as usize {
                    return Err(TxError::Malformed("length overflow"));
                }
                return Ok(value);
            }
            if i == 2 {
                break;
            }
        }
        Err(TxError::Malformed("length overflow"))
    }

    fn pubkey(&mut self) -> Result<Pubkey, TxError> {
        let mut k = [0u8; 32];
        k.copy_from_slice(self.take(32)?);
        Ok(Pubkey(k))
    }

    fn bytes_vec(&mut self) -> Result<Vec<u8>, TxError> {
        let n = self.compact_u16()?;
        Ok(self.take(n)?.to_vec())
    }
}

impl Transaction {
    /// Parses a serialized transaction (signatures then message). Trailing bytes are an error.
    pub fn parse(wire: &[u8]) -> Result<Transaction, TxError> {
        let mut r = Reader { bytes: wire, at: 0 };
        let count = r.compact_u16()?;
        if count.saturating_mul(64) > wire.len() {
            return Err(TxError::Malformed("truncated"));
        }
        let mut signatures = Vec::with_capacity(count);
        for _ in 0..count {
            let mut s = [0u8; 64];
            s.copy_from_slice(r.take(64)?);
            signatures.push(s);
        }
        let first = *wire.get(r.at).ok_or(TxError::Malformed("truncated"))?;
        let version = if first & 0x80 != 0 {
            r.at += 1;
            match first & 0x7f {
                0 => Version::V0,
                v => return Err(TxError::UnsupportedVersion(v)),
            }
        } else {
            Version::Legacy
        };
        let header = Header {
            required_signatures: r.byte()?,
            readonly_signed: r.byte()?,
            readonly_unsigned: r.byte()?,
        };
        let nkeys = r.compact_u16()?;
        let mut static_keys = Vec::with_capacity(nkeys.min(wire.len() / 32));
        for _ in 0..nkeys {
            static_keys.push(r.pubkey()?);
        }
        if header.readonly_signed >= header.required_signatures && header.required_signatures > 0
            || header.required_signatures as usize > nkeys
            || (header.required_signatures as usize + header.readonly_unsigned as usize) > nkeys
        {
            return Err(TxError::Malformed("header does not fit the account keys"));
        }
        let mut blockhash = [0u8; 32];
        blockhash.copy_from_slice(r.take(32)?);
        let nix = r.compact_u16()?;
        let mut instructions = Vec::with_capacity(nix.min(wire.len()));
        for _ in 0..nix {
            let program = r.byte()?;
            let accounts = r.bytes_vec()?;
            let data = r.bytes_vec()?;
            instructions.push(Instruction {
                program,
                accounts,
                data,
            });
        }
        let mut lookups = Vec::new();
        if version == Version::V0 {
            let n = r.compact_u16()?;
            for _ in 0..n {
                let table = r.pubkey()?;
                let writable = r.bytes_vec()?;
                let readonly = r.bytes_vec()?;
                lookups.push(Lookup {
                    table,
                    writable,
                    readonly,
                });
            }
        }
        if r.at != wire.len() {
            return Err(TxError::Malformed("trailing bytes"));
        }
        let total = static_keys.len()
            + lookups
                .iter()
                .map(|l| l.writable.len() + l.readonly.len())
                .sum::<usize>();
        for ix in &instructions {
            if ix.program as usize >= total || ix.accounts.iter().any(|&a| a as usize >= total) {
                return Err(TxError::Malformed(
                    "instruction names an account that is not in the message",
                ));
            }
        }
        Ok(Transaction {
            signatures,
            version,
            header,
            static_keys,
            blockhash,
            instructions,
            lookups,
        })
    }

    /// The transaction's id: its first signature, base58.
    pub fn signature(&self) -> Option<String> {
        self.signatures.first().map(|s| bs58::encode(s).into_string())
    }

    pub fn blockhash_base58(&self) -> String {
        bs58::encode(self.blockhash).into_string()
    }

    /// Whether static key `i` is writable, by the header's counts.
    pub fn is_static_writable(&self, i: usize) -> bool {
        let h = self.header;
        let signed = h.required_signatures as usize;
        if i < signed {
            i < signed - h.readonly_signed as usize
        } else {
            i < self.static_keys.len().saturating_sub(h.readonly_unsigned as usize)
        }
    }

    /// The full account list once lookups are resolved: static keys, then every table's writable picks,
    /// then every table's readonly picks, each with its writability. `tables[i]` are the addresses of
    /// `lookups[i].table`. `None` when an index is beyond its table.
    pub fn accounts(&self, tables: &[&[Pubkey]]) -> Option<Vec<(Pubkey, bool)>> {
        let mut out: Vec<(Pubkey, bool)> = (0..self.static_keys.len())
            .map(|i| (self.static_keys[i], self.is_static_writable(i)))
            .collect();
        for writable in [true, false] {
            for (l, table) in self.lookups.iter().zip(tables) {
                let picks = if writable { &l.writable } else { &l.readonly };
                for &ix in picks {
                    out.push((*table.get(ix as usize)?, writable));
                }
            }
        }
        Some(out)
    }
}

/// The address list stored in an address lookup table account: a 56-byte header, then 32-byte keys.
pub fn lookup_table_addresses(data: &[u8]) -> Option<Vec<Pubkey>> {
    const META: usize = 56;
    let body = data.get(META..)?;
    if body.len() % 32 != 0 {
        return None;
    }
    Some(
        body.chunks_exact(32)
            .map(|c| {
                let mut k = [0u8; 32];
                k.copy_from_slice(c);
                Pubkey(k)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shortvec(n: usize, out: &mut Vec<u8>) {
        let mut v = n;
        loop {
            let mut b = (v & 0x7f) as u8;
            v >>= 7;
            if v != 0 {
                b |= 0x80;
            }
            out.push(b);
            if v == 0 {
                break;
            }
        }
    }

    /// A hand-built legacy message: payer (signer, writable), alice (writable), program (readonly).
    fn legacy() -> Vec<u8> {
        let mut w = vec![1];
        w.extend_from_slice(&[7u8; 64]);
        w.extend_from_slice(&[1, 0, 1]);
        shortvec(3, &mut w);
        for k in [1u8, 2, 3] {
            w.extend_from_slice(&[k; 32]);
        }
        w.extend_from_slice(&[9u8; 32]);
        shortvec(1, &mut w);
        w.push(2);
        shortvec(2, &mut w);
        w.extend_from_slice(&[0, 1]);
        shortvec(4, &mut w);
        w.extend_from_slice(&[2, 0, 0, 0]);
        w
    }

    #[test]
    fn parses_a_legacy_message_and_its_writability() {
        let tx = Transaction::parse(&legacy()).unwrap();
        assert_eq!(tx.version, Version::Legacy);
        assert_eq!(tx.static_keys.len(), 3);
        assert!(tx.is_static_writable(0));
        assert!(tx.is_static_writable(1));
        assert!(!tx.is_static_writable(2));
        assert_eq!(tx.signature().unwrap(), bs58::encode([7u8; 64]).into_string());
        assert_eq!(tx.instructions[0].data, vec![2, 0, 0, 0]);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let w = legacy();
        for n in 0..w.len() {
            assert!(Transaction::parse(&w[..n]).is_err(), "prefix of {n} bytes parsed");
        }
        let mut extra = w.clone();
        extra.push(0);
        assert!(Transaction::parse(&extra).is_err());
    }

    #[test]
    fn versions_and_lookups() {
        let mut w = vec![1];
        w.extend_from_slice(&[7u8; 64]);
        w.push(0x80);
        w.extend_from_slice(&[1, 0, 0]);
        shortvec(2, &mut w);
        w.extend_from_slice(&[1u8; 32]);
        w.extend_from_slice(&[3u8; 32]);
        w.extend_from_slice(&[9u8; 32]);
        shortvec(1, &mut w);
        w.push(1);
        shortvec(2, &mut w);
        w.extend_from_slice(&[0, 2]);
        shortvec(0, &mut w);
        shortvec(1, &mut w);
        w.extend_from_slice(&[5u8; 32]);
        shortvec(1, &mut w);
        w.push(1);
        shortvec(1, &mut w);
        w.push(0);
        let tx = Transaction::parse(&w).unwrap();
        assert_eq!(tx.version, Version::V0);
        let table = [Pubkey([10; 32]), Pubkey([11; 32])];
        let all = tx.accounts(&[&table]).unwrap();
        assert_eq!(all[2], (Pubkey([11; 32]), true));
        assert_eq!(all[3], (Pubkey([10; 32]), false));
        assert!(tx.accounts(&[&table[..1]]).is_none());
        w[65] = 0x81;
        assert_eq!(Transaction::parse(&w), Err(TxError::UnsupportedVersion(1)));
    }

    #[test]
    fn size_caps_apply_before_and_after_decoding() {
        let big = vec![b'A'; MAX_BASE64_BYTES + 4];
        assert!(matches!(
            decode_payload(&big, Encoding::Base64),
            Err(TxError::TooLarge { .. })
        ));
        let wire = vec![1u8; MAX_WIRE_BYTES + 1];
        let text = bs58::encode(&wire).into_string();
        assert!(matches!(
            decode_payload(text.as_bytes(), Encoding::Base58),
            Err(TxError::TooLarge { .. })
        ));
        assert_eq!(
            decode_payload(b"!!", Encoding::Base58),
            Err(TxError::Encoding("base58"))
        );
    }

    #[test]
    fn compact_u16_rejects_non_canonical_and_overflow() {
        let mut r = Reader {
            bytes: &[0x80, 0x00],
            at: 0,
        };
        assert!(r.compact_u16().is_err());
        let mut r = Reader {
            bytes: &[0xff, 0xff, 0x04],
            at: 0,
        };
        assert!(r.compact_u16().is_err());
        let mut r = Reader {
            bytes: &[0xff, 0xff, 0x03],
            at: 0,
        };
        assert_eq!(r.compact_u16().unwrap(), 0xffff);
    }
}
