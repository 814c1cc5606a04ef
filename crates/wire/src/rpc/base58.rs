//! Base58 (Bitcoin alphabet) decoding for transactions. Clients send `sendTransaction` base58 by default, and
//! a byte-at-a-time decoder is quadratic in bytes (≈ 20 µs for a 300-byte transaction); this one works in
//! 32-bit limbs and five digits at a time, about twenty times fewer steps, with the same results.

const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

const fn digit_table() -> [u8; 256] {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 58 {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
}

static DIGITS: [u8; 256] = digit_table();

/// 58^k for k = 0..=5.
const POW58: [u64; 6] = [1, 58, 3364, 195_112, 11_316_496, 656_356_768];

/// Decodes base58 text; `None` on a character outside the alphabet.
pub fn decode(text: &[u8]) -> Option<Vec<u8>> {
    let zeros = text.iter().take_while(|&&c| c == b'1').count();
    // Little-endian 32-bit limbs of the value; log(58)/log(2^32) ≈ 0.1830 limbs per digit.
    let mut limbs: Vec<u32> = Vec::with_capacity(text.len() * 183 / 1000 + 2);
    for chunk in text[zeros..].chunks(5) {
        let mut acc = 0u64;
        for &c in chunk {
            let d = DIGITS[c as usize];
            if d == 0xff {
                return None;
            }
            acc = acc * 58 + d as u64;
        }
        let mul = POW58[chunk.len()];
        let mut carry = acc;
        for limb in limbs.iter_mut() {
            let t = *limb as u64 * mul + carry;
            *limb = t as u32;
            carry = t >> 32;
        }
        while carry > 0 {
            limbs.push(carry as u32);
            carry >>= 32;
        }
    }
    let mut out = Vec::with_capacity(zeros + limbs.len() * 4);
    out.resize(zeros, 0);
    let mut started = false;
    for limb in limbs.iter().rev() {
        for b in limb.to_be_bytes() {
            if started || b != 0 {
                started = true;
                out.push(b);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_bs58_crate_on_random_inputs() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in 0..600 {
            let len = (next() % 400) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Leading zero bytes become leading '1's: cover them.
            for b in bytes.iter_mut().take((n % 4) as usize) {
                *b = 0;
            }
            let text = bs58::encode(&bytes).into_string();
            assert_eq!(decode(text.as_bytes()), Some(bytes), "case {n}");
        }
        assert_eq!(decode(b""), Some(vec![]));
        assert_eq!(decode(b"111"), Some(vec![0, 0, 0]));
        assert_eq!(decode(b"0OIl"), None);
        assert_eq!(decode(b"abc!"), None);
        assert_eq!(decode(&[0xff]), None);
    }
}
