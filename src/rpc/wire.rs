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

/// Writes `s` as a JSON string literal.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(esc);
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
    }
}
