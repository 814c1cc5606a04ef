//! Canonical request keys for deduplication and caching: two calls get the same key exactly when they ask
//! the same question. Object keys are sorted, hex strings lower-cased, the block parameter written in one
//! form (a missing one becomes `"latest"`, `"0x0a"` becomes `"0xa"`). The method is length-prefixed and the
//! params are re-emitted as canonical JSON, which is unambiguous, so distinct params never collide.

use prism_wire::jsonscan::{skip_string, skip_value, skip_ws};

use prism_wire::rpc::methods::MethodInfo;

/// Deepest params nesting we canonicalise; deeper calls are simply not deduplicated or cached.
const MAX_DEPTH: usize = 32;

/// Builds the key for `method(params)`, or `None` when the params are not something we can canonicalise.
pub fn canonical_key(method: &str, info: &MethodInfo, params: Option<&[u8]>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(16 + method.len() + params.map_or(0, <[u8]>::len));
    let m = method.as_bytes();
    out.extend_from_slice(&(m.len() as u32).to_le_bytes());
    out.extend_from_slice(m);
    let params = params.unwrap_or(b"[]");
    let p = skip_ws(params, 0);
    match params.get(p) {
        Some(b'[') => {
            // Arrays: canonical elements, with the block parameter normalised (and filled in if absent).
            out.push(b'[');
            let mut i = skip_ws(params, p + 1);
            let mut index = 0;
            if params.get(i) != Some(&b']') {
                loop {
                    if index > 0 {
                        out.push(b',');
                    }
                    // Each element is read once: canon_value returns where it ended.
                    let end = if info.block_param == Some(index) {
                        let end = skip_value(params, i)?;
                        canon_block(&params[i..end], &mut out)?;
                        end
                    } else {
                        canon_value(params, i, &mut out, 0)?
                    };
                    index += 1;
                    i = skip_ws(params, end);
                    match params.get(i) {
                        Some(b',') => i = skip_ws(params, i + 1),
                        Some(b']') => break,
                        _ => return None,
                    }
                }
            }
            if let Some(b) = info.block_param {
                if index == b {
                    if index > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"\"latest\"");
                }
            }
            out.push(b']');
        }
        Some(b'{') => {
            canon_value(params, p, &mut out, 0)?;
        }
        _ => return None,
    }
    Some(out)
}

/// An answer's value (a result or an error) in the same canonical form: members sorted, no whitespace, hex
/// lower-cased. Two providers' answers with the same data compare equal whatever their nodes' member order
/// and spacing (verified reads, `core::call::verify`). `None` past [`MAX_DEPTH`] or for malformed JSON.
pub fn canonical_answer(value: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(value.len());
    canon_value(value, skip_ws(value, 0), &mut out, 0)?;
    Some(out)
}

/// Writes the canonical JSON for the value at `p` and returns where the value ends.
fn canon_value(b: &[u8], p: usize, out: &mut Vec<u8>, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    match *b.get(p)? {
        b'"' => {
            let end = skip_string(b, p)?;
            let s = &b[p..end];
            let start = out.len();
            out.extend_from_slice(s);
            if is_hex(s) {
                out[start..].make_ascii_lowercase();
            }
            Some(end)
        }
        b'[' => {
            out.push(b'[');
            let mut i = skip_ws(b, p + 1);
            let mut first = true;
            if b.get(i) != Some(&b']') {
                loop {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    i = skip_ws(b, canon_value(b, i, out, depth + 1)?);
                    match b.get(i) {
                        Some(b',') => i = skip_ws(b, i + 1),
                        Some(b']') => break,
                        _ => return None,
                    }
                }
            }
            out.push(b']');
            Some(i + 1)
        }
        b'{' => {
            // Members are found first (their order is the sort's), then written in key order.
            let mut members: Vec<(&[u8], usize, usize)> = Vec::new();
            let mut i = skip_ws(b, p + 1);
            if b.get(i) != Some(&b'}') {
                loop {
                    let key_end = skip_string(b, i)?;
                    let key = &b[i..key_end];
                    i = skip_ws(b, key_end);
                    if b.get(i) != Some(&b':') {
                        return None;
                    }
                    let v = skip_ws(b, i + 1);
                    let v_end = skip_value(b, v)?;
                    members.push((key, v, v_end));
                    i = skip_ws(b, v_end);
                    match b.get(i) {
                        Some(b',') => i = skip_ws(b, i + 1),
                        Some(b'}') => break,
                        _ => return None,
                    }
                }
            }
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (k, &(key, v, v_end)) in members.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(key);
                out.push(b':');
                if matches!(key, b"\"blockNumber\"" | b"\"fromBlock\"" | b"\"toBlock\"") {
                    canon_block(&b[v..v_end], out)?;
                } else {
                    canon_value(b, v, out, depth + 1)?;
                }
            }
            out.push(b'}');
            Some(i + 1)
        }
        _ => {
            let end = skip_value(b, p)?;
            out.extend_from_slice(&b[p..end]);
            Some(end)
        }
    }
}

/// One form per block reference: a missing or null block is `"latest"`, `{"blockNumber": X}` is `X`, hex is
/// lower-cased. Tags keep their case (a node rejects `"Latest"`; so must the deduplicated answer) and
/// quantities keep their digits (leading zeros are an error at some nodes).
fn canon_block(raw: &[u8], out: &mut Vec<u8>) -> Option<()> {
    if raw.first() == Some(&b'{') {
        if let Some(n) = prism_wire::jsonscan::object_field(raw, "blockNumber") {
            if object_len(raw) == Some(1) {
                return canon_block(n, out);
            }
        }
        return canon_value(raw, 0, out, 1).map(drop);
    }
    if raw == b"null" {
        out.extend_from_slice(b"\"latest\"");
        return Some(());
    }
    canon_value(raw, 0, out, 1).map(drop)
}

/// Number of members of a JSON object.
fn object_len(b: &[u8]) -> Option<usize> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(0);
    }
    let mut n = 0;
    loop {
        i = skip_ws(b, skip_string(b, i)?);
        i = skip_ws(b, skip_value(b, skip_ws(b, i + 1))?);
        n += 1;
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Some(n),
            _ => return None,
        }
    }
}

/// `"0x..."` with only hex digits: addresses, hashes and data, where case carries no meaning. The digits are
/// checked without an early exit, so the loop has no branch per byte.
fn is_hex(s: &[u8]) -> bool {
    let hex_digit = |c: u8| (c.wrapping_sub(b'0') < 10) | ((c | 0x20).wrapping_sub(b'a') < 6);
    s.len() >= 4
        && (s[1..3] == *b"0x" || s[1..3] == *b"0X")
        && s[3..s.len() - 1].iter().fold(true, |all, &c| all & hex_digit(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prism_wire::rpc::methods::lookup;

    fn key(method: &str, params: &str) -> Vec<u8> {
        canonical_key(method, &lookup(method), Some(params.as_bytes())).unwrap()
    }

    #[test]
    fn equivalent_forms_share_a_key() {
        let a = key(
            "eth_call",
            r#"[{"to":"0xABCdef0000000000000000000000000000000001","data":"0x70a0"},"latest"]"#,
        );
        let b = key(
            "eth_call",
            r#"[ { "data" : "0x70A0", "to":"0xabcdef0000000000000000000000000000000001" } ]"#,
        );
        assert_eq!(a, b);
        assert_eq!(
            key("m", r#"[ ["0xAB" , {"b":["0xCD"],"a":1}] ,"0xEF" ]"#),
            key("m", r#"[["0xab",{"a":1,"b":["0xcd"]}],"0xef"]"#)
        );
        assert_eq!(
            key("eth_getBalance", r#"["0xAA","0xA"]"#),
            key("eth_getBalance", r#"["0xaa","0xa"]"#)
        );
        assert_eq!(
            key("eth_getBalance", r#"["0xaa", null]"#),
            key("eth_getBalance", r#"["0xaa"]"#)
        );
        assert_eq!(
            key("eth_getBalance", r#"["0xaa", {"blockNumber":"0x10"}]"#),
            key("eth_getBalance", r#"["0xaa","0x10"]"#)
        );
        assert_eq!(
            key(
                "eth_getLogs",
                r#"[{"fromBlock":"0x10","toBlock":"0x20","address":"0xAB"}]"#
            ),
            key(
                "eth_getLogs",
                r#"[{"address":"0xab","toBlock":"0x20","fromBlock":"0x10"}]"#
            )
        );
    }

    #[test]
    fn distinct_questions_never_collide() {
        let keys = [
            key("eth_getBalance", r#"["0xaa","latest"]"#),
            key("eth_getBalance", r#"["0xaa","pending"]"#),
            key("eth_getBalance", r#"["0xaa","0x1"]"#),
            key("eth_getBalance", r#"["0xab","latest"]"#),
            key("eth_getCode", r#"["0xaa","latest"]"#),
            key("eth_call", r#"[{"data":"0x1"},"latest"]"#),
            key("eth_call", r#"[{"data":"0x1","to":null},"latest"]"#),
            key("eth_call", r#"[{"data":"0x1"},"latest",{}]"#),
            key("eth_call", r#"["a,b"]"#),
            key("m", r#"[["0xab"],"q"]"#),
            key("m", r#"[["0xab","q"]]"#),
            key("m", r#"[["0xab"]]"#),
            key("eth_call", r#"["a","b"]"#),
            key("some_method", r#"["Latest"]"#),
            key("some_method", r#"["latest"]"#),
            key("eth_getBalance", r#"["0xaa","Latest"]"#),
            key("eth_getBalance", r#"["0xaa","0x010"]"#),
            key("eth_getBalance", r#"["0xaa","0x10"]"#),
            key("eth_getBalance", r#"["0xaa",{"blockHash":"0x10"}]"#),
            key("eth_getBlockByNumber", r#"["0x1",true]"#),
            key("eth_getBlockByNumber", r#"["0x1",false]"#),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b, "{} vs {}", String::from_utf8_lossy(a), String::from_utf8_lossy(b));
            }
        }
        // A method name cannot bleed into params.
        assert_ne!(
            key("ab", "[]"),
            canonical_key("a", &lookup("a"), Some(b"[]"))
                .map(|mut k| {
                    k.push(b'b');
                    k
                })
                .unwrap()
        );
    }

    #[test]
    fn non_hex_strings_keep_their_case() {
        assert_ne!(key("m", r#"["Hello"]"#), key("m", r#"["hello"]"#));
        assert_ne!(key("m", r#"["0xZZ"]"#), key("m", r#"["0xzz"]"#));
    }
}
