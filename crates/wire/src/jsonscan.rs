//! Byte-level JSON scanning for values Prism only needs to locate, never to rebuild: response fields,
//! the n-th param, a block tag. Works on the original bytes; nothing is copied.
//!
//! Every function here reads bytes an upstream chose, so none may panic, loop or recurse on any input:
//! indexes only go through `get`, containers are walked with an explicit stack (no recursion), and a value
//! is only "skipped" when it is well-formed JSON (RFC 8259 grammar: matched brackets, `,`/`:` where they
//! belong, valid escapes with paired surrogates, numbers by the grammar (any size: RFC 8259 sets no range, and a node's bytes pass unchanged), literals),
//! nested at most [`MAX_DEPTH`] deep, no raw control character inside strings. Not checked here: UTF-8
//! (`transport::validate::check_response` checks it for whole upstream bodies).

/// Deepest nesting a scanned value may have. A `debug_traceTransaction` call tree at the EVM's call-depth
/// limit (1024 frames, two levels each) fits; 100 000 `[` does not.
pub const MAX_DEPTH: usize = 4096;

pub fn skip_ws(b: &[u8], mut p: usize) -> usize {
    while p < b.len() && matches!(b[p], b' ' | b'\t' | b'\n' | b'\r') {
        p += 1;
    }
    p
}

/// Bytes of a string read eight at a time (SWAR) before `skip_string` hands the rest to memchr: the keys,
/// quantities, addresses and hashes of a JSON-RPC message end within it, and for those a word loop costs
/// less than memchr's setup; a long `data` or `input` string goes on with memchr.
const SHORT_STRING: usize = 72;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = ONES * 0x80;

/// High bit set in each byte of `x` that ends a plain run of string bytes: `"`, `\` or a control byte.
/// Bytes above the lowest such byte may be flagged falsely (a borrow carries upwards), so only the lowest
/// set bit is meaningful; it is exact.
#[inline]
fn string_stops(x: u64) -> u64 {
    let quote = x ^ (ONES * u64::from(b'"'));
    let backslash = x ^ (ONES * u64::from(b'\\'));
    // A zero byte z sets its high bit in (z - 1) & !z.
    let zero_quote = quote.wrapping_sub(ONES) & !quote;
    let zero_backslash = backslash.wrapping_sub(ONES) & !backslash;
    (zero_quote | zero_backslash) & HIGHS | control_bytes(x)
}

/// High bit set in each byte of `x` below 0x20 (a byte c < 0x20 sets it in (c - 0x20) & !c; exact for
/// thresholds up to 0x80), with the same borrow caveat as [`string_stops`]: the lowest set bit is exact.
#[inline]
fn control_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES * 0x20) & !x & HIGHS
}

/// End (exclusive) of the string starting at `p`; `None` unless it is closed, holds no raw control
/// character (a raw newline or NUL inside a string is not JSON) and every escape is valid (a `\u` high
/// surrogate must be followed by a `\u` low one, a low one never stands alone).
pub fn skip_string(b: &[u8], p: usize) -> Option<usize> {
    if b.get(p) != Some(&b'"') {
        return None;
    }
    let mut i = p + 1;
    let short_end = b.len().min(i + SHORT_STRING);
    while i < short_end {
        match b.get(i..i + 8) {
            Some(word) => {
                let stops = string_stops(u64::from_le_bytes(word.try_into().ok()?));
                if stops == 0 {
                    i += 8;
                    continue;
                }
                i += (stops.trailing_zeros() / 8) as usize;
            }
            // Fewer than eight bytes left in the input: one by one.
            None => {
                while i < b.len() && !matches!(b[i], b'"' | b'\\' | 0..=0x1f) {
                    i += 1;
                }
            }
        }
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i = skip_escape(b, i)?,
            _ => return None,
        }
    }
    loop {
        let run = b.get(i..)?;
        let off = memchr::memchr2(b'"', b'\\', run)?;
        if has_control(&run[..off]) {
            return None;
        }
        i += off;
        if b[i] == b'"' {
            return Some(i + 1);
        }
        i = skip_escape(b, i)?;
    }
}

/// Whether any byte is below 0x20, eight bytes at a time (a byte-wise loop would double a string's cost).
fn has_control(s: &[u8]) -> bool {
    let mut chunks = s.chunks_exact(8);
    let swar = chunks
        .by_ref()
        .any(|c| control_bytes(u64::from_le_bytes(c.try_into().unwrap_or([0xff; 8]))) != 0);
    swar || chunks.remainder().iter().any(|&c| c < 0x20)
}

/// `b[i]` is a backslash: the index after its escape sequence, if valid.
fn skip_escape(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(i + 2),
        b'u' => match hex4(b, i + 2)? {
            0xD800..=0xDBFF => {
                if b.get(i + 6) != Some(&b'\\') || b.get(i + 7) != Some(&b'u') {
                    return None;
                }
                matches!(hex4(b, i + 8)?, 0xDC00..=0xDFFF).then_some(i + 12)
            }
            0xDC00..=0xDFFF => None,
            _ => Some(i + 6),
        },
        _ => None,
    }
}

fn hex4(b: &[u8], at: usize) -> Option<u16> {
    let digits = b.get(at..at.checked_add(4)?)?;
    digits
        .iter()
        .try_fold(0u16, |acc, &c| Some(acc << 4 | (c as char).to_digit(16)? as u16))
}

/// Whether a scalar may end before `b[end]`: end of input, whitespace or a structural character.
fn ends_token(b: &[u8], end: usize) -> bool {
    matches!(
        b.get(end),
        None | Some(b',' | b'}' | b']' | b':' | b' ' | b'\t' | b'\n' | b'\r')
    )
}

/// End of the number starting at `p` (JSON grammar), if it is one. Any size is valid JSON: `1e400` or a
/// 30-digit integer from a node reach the client as they came.
fn skip_number(b: &[u8], p: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = p;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(i),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

/// End of the scalar (number or literal) starting at `p`, if it is one and ends where a token may end.
fn skip_scalar(b: &[u8], p: usize) -> Option<usize> {
    let rest = b.get(p..)?;
    let end = if rest.starts_with(b"true") || rest.starts_with(b"null") {
        p + 4
    } else if rest.starts_with(b"false") {
        p + 5
    } else {
        skip_number(b, p)?
    };
    ends_token(b, end).then_some(end)
}

/// Which containers are open, innermost last: one bit per level (1 = object), 64 levels inline.
struct Open {
    inline: u64,
    spill: Vec<u64>,
    depth: usize,
}

impl Open {
    fn push(&mut self, object: bool) {
        if self.depth > 0 && self.depth.is_multiple_of(64) {
            self.spill.push(self.inline);
            self.inline = 0;
        }
        self.inline = self.inline << 1 | u64::from(object);
        self.depth += 1;
    }

    /// The innermost container is an object.
    fn top_is_object(&self) -> bool {
        self.inline & 1 == 1
    }

    fn pop(&mut self) {
        self.inline >>= 1;
        self.depth -= 1;
        if self.depth > 0 && self.depth.is_multiple_of(64) {
            self.inline = self.spill.pop().unwrap_or(0);
        }
    }
}

/// End (exclusive) of the JSON value starting at `p` (no leading whitespace), if it is well-formed and
/// nested at most [`MAX_DEPTH`] deep. Iterative: nesting costs a bit per level, never stack.
pub fn skip_value(b: &[u8], p: usize) -> Option<usize> {
    // Most values skipped are strings and scalars (params, answer fields): no container stack for those.
    match *b.get(p)? {
        b'"' => return skip_string(b, p),
        b'{' | b'[' => {}
        _ => return skip_scalar(b, p),
    }
    let mut open = Open {
        inline: 0,
        spill: Vec::new(),
        depth: 0,
    };
    let mut i = p;
    loop {
        // A value starts at `i`.
        match *b.get(i)? {
            c @ (b'{' | b'[') => {
                if open.depth >= MAX_DEPTH {
                    return None;
                }
                let object = c == b'{';
                open.push(object);
                i = skip_ws(b, i + 1);
                let close = if object { b'}' } else { b']' };
                if b.get(i) == Some(&close) {
                    open.pop();
                    i += 1;
                } else {
                    if object {
                        i = skip_key(b, i)?;
                    }
                    continue;
                }
            }
            b'"' => i = skip_string(b, i)?,
            _ => i = skip_scalar(b, i)?,
        }
        // A value ended at `i`: close containers until one goes on with `,`.
        loop {
            if open.depth == 0 {
                return Some(i);
            }
            i = skip_ws(b, i);
            let object = open.top_is_object();
            match (b.get(i)?, object) {
                (b',', _) => {
                    i = skip_ws(b, i + 1);
                    if object {
                        i = skip_key(b, i)?;
                    }
                    break;
                }
                (b'}', true) | (b']', false) => {
                    open.pop();
                    i += 1;
                }
                _ => return None,
            }
        }
    }
}

/// A member's `"key" :` starting at `i`: the index of its value (whitespace skipped).
fn skip_key(b: &[u8], i: usize) -> Option<usize> {
    let i = skip_ws(b, skip_string(b, i)?);
    (b.get(i) == Some(&b':')).then(|| skip_ws(b, i + 1))
}

/// Whether brackets in `b` (outside strings) nest at most `limit` deep. For bytes about to go to a
/// recursive parser (simd-json builds values recursively): a deep value would exhaust the thread's stack.
pub fn depth_at_most(b: &[u8], limit: usize) -> bool {
    let (mut depth, mut i) = (0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'"' => {
                // To the closing quote, escapes skipped; an unclosed string has no brackets after it.
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return false;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    true
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

/// Parses a `0x`-prefixed hex quantity string value (`"0x1a"`) to a number: 1 to 16 hex digits and nothing
/// else (no sign, no escape, no space). Read byte by byte: every head-bearing answer passes here.
pub fn hex_quantity(raw: &[u8]) -> Option<u64> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let digits = inner.strip_prefix(b"0x").or_else(|| inner.strip_prefix(b"0X"))?;
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits
        .iter()
        .try_fold(0u64, |n, &d| Some(n << 4 | u64::from(char::from(d).to_digit(16)?)))
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
        assert_eq!(hex_quantity(br#""0XfF""#), Some(255));
        assert_eq!(hex_quantity(br#""0xffffffffffffffff""#), Some(u64::MAX));
        // What `u64::from_str_radix` let through or a scan must refuse: a sign, 17 digits, an escape,
        // spaces, non-ASCII, a lone prefix, a missing quote.
        for bad in [
            &br#""0x+1""#[..],
            br#""0x10000000000000000""#,
            br#""0x\u0031""#,
            br#"" 0x1""#,
            br#""0x1 ""#,
            "\"0x\u{663}\"".as_bytes(),
            br#""0x""#,
            br#""0x1"#,
        ] {
            assert_eq!(hex_quantity(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(plain_str(br#""a\"b""#), None);
    }

    #[test]
    fn a_trailing_backslash_is_unterminated_not_a_panic() {
        // Regression: `{"\` from a provider used to slice past the end (`i += 2` after the backslash).
        assert_eq!(skip_string(br#""\"#, 0), None);
        assert_eq!(skip_string(b"\"\\\\\\", 0), None);
        assert_eq!(skip_value(br#"{"\"#, 0), None);
        assert_eq!(object_field(br#"{"\"#, "id"), None);
        assert_eq!(nth_element(br#"["\"#, 0), None);
        assert_eq!(elements(br#"["\"#), None);
        assert_eq!(object_field(br#"{"jsonrpc":"2.0","id":1,"result":"\"#, "result"), None);
        for cut in 0..br#""a\u00e9\"b""#.len() {
            let _ = skip_string(&br#""a\u00e9\"b""#[..cut], 0);
        }
        assert_eq!(skip_string(br#""a\u00e9\"b""#, 0), Some(12));
    }

    #[test]
    fn strings_read_the_same_either_side_of_the_short_loop() {
        // `skip_string` reads the first SHORT_STRING bytes a word at a time (and the input's last few one
        // by one) and the rest with memchr: every length and every escape position across those boundaries
        // ends in the same place.
        for len in 0..2 * SHORT_STRING + 9 {
            let plain = format!("\"{}\"", "a".repeat(len));
            assert_eq!(skip_string(plain.as_bytes(), 0), Some(len + 2), "{plain}");
            assert_eq!(skip_string(&plain.as_bytes()[..len + 1], 0), None, "unterminated {len}");
            for at in 0..len {
                let escaped = format!("\"{}\\\"{}\"x", "a".repeat(at), "a".repeat(len - at));
                assert_eq!(skip_string(escaped.as_bytes(), 0), Some(len + 4), "{escaped}");
                let bad = format!("\"{}\\q{}\"", "a".repeat(at), "a".repeat(len - at));
                assert_eq!(skip_string(bad.as_bytes(), 0), None, "{bad}");
            }
        }
    }

    #[test]
    fn every_byte_value_at_every_word_position_reads_as_the_byte_loop_does() {
        // The word loop flags `"`, `\\` and control bytes with borrow tricks; bytes that differ from them
        // only in the high bit (0xa2, 0xdc, 0x80..0x9f) or sit next to them must not confuse it.
        fn reference(b: &[u8], p: usize) -> Option<usize> {
            let mut i = p + 1;
            loop {
                match *b.get(i)? {
                    b'"' => return Some(i + 1),
                    b'\\' => i = skip_escape(b, i)?,
                    0..=0x1f => return None,
                    _ => i += 1,
                }
            }
        }
        let base = b"\"0123456789abcdef0123456789abcdef\"".to_vec();
        for at in 1..base.len() {
            for c in 0..=255u8 {
                for next in [b'a', b'"', 0u8, 0xff] {
                    let mut text = base.clone();
                    text[at] = c;
                    if at + 1 < text.len() {
                        text[at + 1] = next;
                    }
                    assert_eq!(
                        skip_string(&text, 0),
                        reference(&text, 0),
                        "{c:#x} then {next:#x} at {at}"
                    );
                    assert_eq!(
                        skip_string(&text[..at + 1], 0),
                        reference(&text[..at + 1], 0),
                        "cut at {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn escapes_and_surrogates() {
        assert_eq!(skip_string(br#""\ud83d\ude00""#, 0), Some(14));
        assert_eq!(skip_string(br#""\ud800""#, 0), None, "lone high surrogate");
        assert_eq!(skip_string(br#""\udc00""#, 0), None, "lone low surrogate");
        assert_eq!(
            skip_string(br#""\ud800\u0041""#, 0),
            None,
            "high surrogate then a non-surrogate"
        );
        assert_eq!(skip_string(br#""\x41""#, 0), None);
        assert_eq!(skip_string(br#""\u12""#, 0), None);
        assert_eq!(skip_string(br#""\u12g4""#, 0), None);
        assert_eq!(skip_string(br#""\/\b\f\n\r\t\\\"""#, 0), Some(18));
        // Raw control characters are not JSON inside a string (found by fuzzing: a raw CR LF in a key).
        let long = format!("\"{}\"", "abcdefghijklmnopqrstuvwxyz".repeat(4));
        for c in 0u8..0x20 {
            for at in 1..long.len() - 1 {
                let mut text = long.as_bytes().to_vec();
                text[at] = c;
                assert_eq!(skip_string(&text, 0), None, "byte {c:#x} at {at}");
            }
        }
        assert_eq!(skip_string("\"\u{7f} é\u{1f600} !~\"".as_bytes(), 0), Some(13));
    }

    #[test]
    fn containers_must_be_well_formed() {
        for bad in [
            &b"[}"[..],
            b"{]",
            b"[1,]",
            b"[,1]",
            b"{\"a\":1,}",
            b"{\"a\" 1}",
            b"{1:2}",
            b"{\"a\"}",
            b"[1 2]",
            b"[nul]",
            b"[truee]",
            b"[01]",
            b"[1.]",
            b"[.5]",
            b"[1e]",
            b"[+1]",
            b"[--1]",
            b"[[]",
            b"]",
            b"}",
        ] {
            assert_eq!(skip_value(bad, 0), None, "{:?}", String::from_utf8_lossy(bad));
        }
        for huge in [format!("[{}]", "9".repeat(400)), "[1e999999]".to_string()] {
            assert_eq!(
                skip_value(huge.as_bytes(), 0),
                Some(huge.len()),
                "valid JSON of any size: {huge}"
            );
        }
        for good in [
            &b"[]"[..],
            b"{}",
            b"[ 1 , -0.5e-3 , true , false , null , \"x\" , { } , [ ] ]",
            b"{\"a\":{\"b\":[1,{\"c\":\"}]\"}]}}",
            b"1e308",
            b"-0",
            b"18446744073709551615",
        ] {
            assert_eq!(
                skip_value(good, 0),
                Some(good.len()),
                "{:?}",
                String::from_utf8_lossy(good)
            );
        }
        // A scalar ends at a delimiter.
        assert_eq!(skip_value(b"12,", 0), Some(2));
        assert_eq!(skip_value(b"12x", 0), None);
        // Stray closers inside an object never underflow anything.
        assert_eq!(object_field(b"{\"a\":}}}}", "a"), None);
        assert_eq!(object_field(b"{\"a\":1}}}", "a"), Some(&b"1"[..]));
    }

    #[test]
    fn nesting_is_bounded_and_costs_no_stack() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let ok = deep(MAX_DEPTH);
        assert_eq!(skip_value(ok.as_bytes(), 0), Some(ok.len()));
        assert_eq!(skip_value(deep(MAX_DEPTH + 1).as_bytes(), 0), None);
        assert_eq!(skip_value("[".repeat(100_000).as_bytes(), 0), None);
        assert_eq!(skip_value(deep(100_000).as_bytes(), 0), None);
        // Mixed kinds across the 64-level boundaries of the bit stack.
        let mut mixed = String::new();
        for i in 0..200 {
            mixed.push_str(if i % 3 == 0 { "{\"k\":" } else { "[" });
        }
        mixed.push('0');
        for i in (0..200).rev() {
            mixed.push(if i % 3 == 0 { '}' } else { ']' });
        }
        assert_eq!(skip_value(mixed.as_bytes(), 0), Some(mixed.len()));
        let swapped = mixed.replacen("]}", "}]", 1);
        assert_eq!(skip_value(swapped.as_bytes(), 0), None);
        assert!(depth_at_most(mixed.as_bytes(), 200));
        assert!(!depth_at_most(mixed.as_bytes(), 199));
        assert!(depth_at_most(br#"["[[[[\"[["]"#, 1));
        assert!(depth_at_most(br#""\"#, 0));
        assert!(!depth_at_most("[".repeat(100_000).as_bytes(), 512));
    }
}
