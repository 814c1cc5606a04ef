//! Byte-level JSON scanning for values Prism only needs to locate, never to rebuild: response fields,
//! the n-th param, a block tag. Works on the original bytes; nothing is copied.

pub fn skip_ws(b: &[u8], mut p: usize) -> usize {
    while p < b.len() && matches!(b[p], b' ' | b'\t' | b'\n' | b'\r') {
        p += 1;
    }
    p
}

/// End (exclusive) of the string starting at `p`.
pub fn skip_string(b: &[u8], p: usize) -> Option<usize> {
    if b.get(p) != Some(&b'"') {
        return None;
    }
    let mut i = p + 1;
    loop {
        let off = memchr::memchr2(b'"', b'\\', &b[i..])?;
        i += off;
        if b[i] == b'\\' {
            i += 2;
        } else {
            return Some(i + 1);
        }
    }
}

/// End (exclusive) of the JSON value starting at `p`. Containers are matched with string awareness;
/// scalars run to the next delimiter.
pub fn skip_value(b: &[u8], p: usize) -> Option<usize> {
    match *b.get(p)? {
        b'"' => skip_string(b, p),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = p;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = skip_string(b, i)?;
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
            let end = b[p..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(b.len(), |o| p + o);
            let token = &b[p..end];
            let ok = matches!(token, b"true" | b"false" | b"null")
                || (!token.is_empty() && token.iter().all(|c| c.is_ascii_digit() || b"+-.eE".contains(c)));
            ok.then_some(end)
        }
    }
}

/// The `n`-th element of a JSON array (raw bytes), if `array` is an array with that many elements.
pub fn nth_element(array: &[u8], n: usize) -> Option<&[u8]> {
    let mut p = skip_ws(array, 0);
    if array.get(p) != Some(&b'[') {
        return None;
    }
    p = skip_ws(array, p + 1);
    if array.get(p) == Some(&b']') {
        return None;
    }
    let mut i = 0;
    loop {
        let end = skip_value(array, p)?;
        if i == n {
            return Some(&array[p..end]);
        }
        p = skip_ws(array, end);
        match array.get(p) {
            Some(b',') => p = skip_ws(array, p + 1),
            _ => return None,
        }
        i += 1;
    }
}

/// The raw value of `key` in a JSON object (keys compared as raw bytes, so escaped keys never match).
pub fn object_field<'a>(object: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut p = skip_ws(object, 0);
    if object.get(p) != Some(&b'{') {
        return None;
    }
    p = skip_ws(object, p + 1);
    if object.get(p) == Some(&b'}') {
        return None;
    }
    loop {
        let key_end = skip_string(object, p)?;
        let k = &object[p + 1..key_end - 1];
        p = skip_ws(object, key_end);
        if object.get(p) != Some(&b':') {
            return None;
        }
        let v = skip_ws(object, p + 1);
        let v_end = skip_value(object, v)?;
        if k == key.as_bytes() {
            return Some(&object[v..v_end]);
        }
        p = skip_ws(object, v_end);
        match object.get(p) {
            Some(b',') => p = skip_ws(object, p + 1),
            _ => return None,
        }
    }
}

/// The contents of a JSON string without escapes (`"0x1f"` → `0x1f`); `None` for anything else.
pub fn plain_str(raw: &[u8]) -> Option<&str> {
    let inner = raw.strip_prefix(b"\"").and_then(|r| r.strip_suffix(b"\""))?;
    if inner.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(inner).ok()
}

/// Parses a `0x`-prefixed hex quantity string value (`"0x1a"`) to a number.
pub fn hex_quantity(raw: &[u8]) -> Option<u64> {
    let s = plain_str(raw)?;
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// A plain non-negative JSON integer (`42`, surrounding whitespace allowed); `None` for anything else.
pub fn plain_u64(raw: &[u8]) -> Option<u64> {
    std::str::from_utf8(raw).ok()?.trim().parse().ok()
}

/// Every element of a JSON array (raw bytes); `None` if `array` is not a well-formed array.
pub fn elements(array: &[u8]) -> Option<Vec<&[u8]>> {
    let mut p = skip_ws(array, 0);
    if array.get(p) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    p = skip_ws(array, p + 1);
    if array.get(p) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = skip_value(array, p)?;
        out.push(&array[p..end]);
        p = skip_ws(array, end);
        match array.get(p) {
            Some(b',') => p = skip_ws(array, p + 1),
            Some(b']') => return Some(out),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_fields_and_quantities() {
        let params = br#" [ {"to":"0x1","data":"0x]"} , "latest" ,[1,2]] "#;
        assert_eq!(nth_element(params, 0), Some(&br#"{"to":"0x1","data":"0x]"}"#[..]));
        assert_eq!(nth_element(params, 1), Some(&br#""latest""#[..]));
        assert_eq!(nth_element(params, 2), Some(&b"[1,2]"[..]));
        assert_eq!(nth_element(params, 3), None);
        assert_eq!(nth_element(b"[]", 0), None);
        let block = br#"{"hash":"0xab","number" : "0x10","x":{"number":"0x99"}}"#;
        assert_eq!(object_field(block, "number"), Some(&br#""0x10""#[..]));
        assert_eq!(object_field(block, "missing"), None);
        assert_eq!(hex_quantity(br#""0x10""#), Some(16));
        assert_eq!(hex_quantity(br#""10""#), None);
        assert_eq!(hex_quantity(b"16"), None);
        assert_eq!(plain_str(br#""a\"b""#), None);
    }
}
