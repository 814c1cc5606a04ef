//! The JSON writers both sides share: a call as Prism sends it upstream, and JSON string literals. Pure
//! byte builders; params are copied as the client sent them, never re-serialised.

/// `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params bytes>}`; params omitted when absent.
pub fn write_upstream_call(out: &mut Vec<u8>, id: u64, method: &str, params: Option<&[u8]>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
    out.extend_from_slice(br#","method":"#);
    write_json_str(out, method);
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p);
    }
    out.push(b'}');
}

/// The bytes a JSON string cannot hold as they are: controls, `"`, `\\`.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Writes `s` as a JSON string literal. A string with nothing to escape (method names and the like) is
/// one pass over the table and one copy.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !NEEDS_ESCAPE[b as usize] {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_call_keeps_params_bytes() {
        let mut out = Vec::new();
        write_upstream_call(&mut out, 42, "eth_call", Some(br#"[ {"to":"0xAB"} , "latest" ]"#));
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":42,"method":"eth_call","params":[ {"to":"0xAB"} , "latest" ]}"#
        );
        out.clear();
        write_upstream_call(&mut out, 1, "we\"ird\n\u{1}", None);
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":1,"method":"we\"ird\n\u0001"}"#);
        // The plain path (nothing to escape) and the escaping one agree on what needs escaping.
        for (s, json) in [
            ("eth_call", r#""eth_call""#),
            ("a\\b", r#""a\\b""#),
            ("tab\there", r#""tab\there""#),
            ("del\u{7f} é", "\"del\u{7f} é\""),
        ] {
            let mut out = Vec::new();
            write_json_str(&mut out, s);
            assert_eq!(std::str::from_utf8(&out).unwrap(), json);
            assert_eq!(serde_json::from_slice::<String>(&out).unwrap(), s);
        }
    }
}
