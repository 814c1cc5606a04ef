//! The little JSON reading the tool needs: a field of an object (the fake node reads calls with it) and
//! the first hex quantity after a key (the clients find a notification's block number with it, without
//! parsing the rest).

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// The end of the JSON value starting at `i` (after whitespace), or `None` if it is cut short.
fn skip(b: &[u8], i: usize) -> Option<usize> {
    let mut i = ws(b, i);
    match *b.get(i)? {
        b'"' => {
            i += 1;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
            None
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = skip(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\r' | b'\n' | b'\t') {
                i += 1;
            }
            Some(i)
        }
    }
}

/// The raw value of `key` in the top-level object `b`.
pub fn field<'a>(b: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = ws(b, i);
        if b.get(i) == Some(&b'}') {
            return None;
        }
        let k_end = skip(b, i)?;
        let k = &b[i..k_end];
        i = ws(b, k_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let v_start = ws(b, i + 1);
        let v_end = skip(b, v_start)?;
        if k.len() == key.len() + 2 && &k[1..k.len() - 1] == key.as_bytes() {
            return Some(&b[v_start..v_end]);
        }
        i = ws(b, v_end);
        match b.get(i) {
            Some(b',') => i += 1,
            _ => return None,
        }
    }
}

/// The elements of the array `b`.
pub fn elements(b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'[') {
        return out;
    }
    i = ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return out;
    }
    while let Some(end) = skip(b, i) {
        out.push(&b[ws(b, i)..end]);
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i += 1,
            _ => break,
        }
    }
    out
}

/// A string value's contents (no unescaping: the tool's strings have none).
pub fn string(v: &[u8]) -> Option<&str> {
    if v.len() >= 2 && v[0] == b'"' && v[v.len() - 1] == b'"' {
        std::str::from_utf8(&v[1..v.len() - 1]).ok()
    } else {
        None
    }
}

/// A `"0x.."` quantity.
pub fn quantity(v: &[u8]) -> Option<u64> {
    let s = string(v)?.strip_prefix("0x")?;
    u64::from_str_radix(s, 16).ok()
}

/// The hex quantity right after the first `needle` (e.g. `"number":"`) in `b`.
pub fn hex_after(b: &[u8], needle: &[u8]) -> Option<u64> {
    // Only at quotes (a few dozen in a notification): far cheaper than comparing at every byte.
    let mut from = 0;
    let at = loop {
        let q = from + b.get(from..)?.iter().position(|&c| c == needle[0])?;
        if b.get(q..q + needle.len()) == Some(needle) {
            break q + needle.len();
        }
        from = q + 1;
    };
    let rest = b.get(at..)?.strip_prefix(b"0x")?;
    let mut n: u64 = 0;
    let mut digits = 0;
    for &c in rest {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => break,
        };
        n = n.checked_mul(16)? + d as u64;
        digits += 1;
    }
    (digits > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_elements() {
        let b = br#"{"jsonrpc":"2.0","id":"a\"b","method":"eth_getBlockByNumber","params":["0x10",false]}"#;
        assert_eq!(field(b, "id"), Some(&br#""a\"b""#[..]));
        let p = field(b, "params").unwrap();
        let e = elements(p);
        assert_eq!(e.len(), 2);
        assert_eq!(quantity(e[0]), Some(16));
        assert_eq!(field(b, "nope"), None);
        assert_eq!(
            hex_after(br#"{"x":1,"number":"0x1a2b"}"#, br#""number":""#),
            Some(0x1a2b)
        );
    }
}
