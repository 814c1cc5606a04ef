//! The hash of a raw transaction, computed locally: keccak256 of its bytes. A submission whose outcome is
//! unknown (timed out after sending) carries it so the client can poll for a receipt instead of resending.

use tiny_keccak::{Hasher, Keccak};

use prism_wire::jsonscan::{nth_element, plain_str};

/// `0x`-prefixed keccak256 of the hex-encoded transaction in `params[0]`, if that is what params hold.
pub fn raw_tx_hash(params: Option<&[u8]>) -> Option<String> {
    let hex = plain_str(nth_element(params?, 0)?)?;
    let digits = hex.strip_prefix("0x").or_else(|| hex.strip_prefix("0X"))?;
    if digits.len() % 2 != 0 {
        return None;
    }
    let mut k = Keccak::v256();
    let mut chunk = [0u8; 256];
    for block in digits.as_bytes().chunks(512) {
        let n = block.len() / 2;
        for (i, pair) in block.chunks(2).enumerate() {
            chunk[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        k.update(&chunk[..n]);
    }
    let mut out = [0u8; 32];
    k.finalize(&mut out);
    let mut s = String::with_capacity(66);
    s.push_str("0x");
    for b in out {
        s.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        s.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    Some(s)
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keccak_of_raw_bytes() {
        // keccak256("") and keccak256(0x00) are well known.
        assert_eq!(
            super::raw_tx_hash(Some(br#"["0x"]"#)).unwrap(),
            "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
        assert_eq!(
            super::raw_tx_hash(Some(br#"["0x00"]"#)).unwrap(),
            "0xbc36789e7a1e281436464229828f817d6612f7b477d66591ff96a9e064bcc98a"
        );
        assert_eq!(super::raw_tx_hash(Some(br#"["0x0"]"#)), None);
        assert_eq!(super::raw_tx_hash(Some(br#"["zz"]"#)), None);
    }
}
