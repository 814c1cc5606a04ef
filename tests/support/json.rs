//! A tiny raw JSON scanner that hands out *byte spans* instead of values.
//!
//! Tests need to compare ids, params and results byte-for-byte (`1e400`, `-0`, `"\u00e9"` ...), which a
//! value-based parser such as serde_json would normalise or reject. This scanner only finds where a value
//! starts and ends; it validates structure loosely (enough to walk well-formed JSON and to fail on obvious
//! garbage), and decodes object keys with serde_json so escaped keys compare by their meaning.

pub type Span<'a> = &'a [u8];

/// Index of the first non-whitespace byte at or after `i`.
pub fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Index just past the JSON value starting at `i` (which must not be whitespace).
pub fn value_end(b: &[u8], i: usize) -> Result<usize, String> {
    let err = |what: &str, at: usize| Err(format!("{what} at byte {at} in {:?}", String::from_utf8_lossy(b)));
    match b.get(i) {
        None => err("unexpected end", i),
        Some(b'"') => {
            let mut j = i + 1;
            while j < b.len() {
                match b[j] {
                    b'\\' => j += 2,
                    b'"' => return Ok(j + 1),
                    _ => j += 1,
                }
            }
            err("unterminated string", i)
        }
        Some(b'{') | Some(b'[') => {
            let close = if b[i] == b'{' { b'}' } else { b']' };
            let is_obj = b[i] == b'{';
            let mut j = skip_ws(b, i + 1);
            if b.get(j) == Some(&close) {
                return Ok(j + 1);
            }
            loop {
                if is_obj {
                    if b.get(j) != Some(&b'"') {
                        return err("expected key", j);
                    }
                    j = skip_ws(b, value_end(b, j)?);
                    if b.get(j) != Some(&b':') {
                        return err("expected ':'", j);
                    }
                    j = skip_ws(b, j + 1);
                }
                j = skip_ws(b, value_end(b, j)?);
                match b.get(j) {
                    Some(b',') => j = skip_ws(b, j + 1),
                    Some(c) if *c == close => return Ok(j + 1),
                    _ => return err("expected ',' or close", j),
                }
            }
        }
        Some(b't') if b[i..].starts_with(b"true") => Ok(i + 4),
        Some(b'f') if b[i..].starts_with(b"false") => Ok(i + 5),
        Some(b'n') if b[i..].starts_with(b"null") => Ok(i + 4),
        Some(c) if *c == b'-' || c.is_ascii_digit() => {
            let mut j = i + 1;
            while j < b.len() && matches!(b[j], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                j += 1;
            }
            Ok(j)
        }
        Some(_) => err("unexpected byte", i),
    }
}

/// The single JSON value in `b` (surrounding whitespace allowed), as a span. Errors on trailing bytes.
pub fn whole(b: &[u8]) -> Result<Span<'_>, String> {
    let s = skip_ws(b, 0);
    let e = value_end(b, s)?;
    if skip_ws(b, e) != b.len() {
        return Err(format!(
            "trailing bytes after JSON value in {:?}",
            String::from_utf8_lossy(b)
        ));
    }
    Ok(&b[s..e])
}

/// The fields of a JSON object, in order (duplicates kept), keys decoded, values as raw spans.
pub fn object(b: &[u8]) -> Result<Vec<(String, Span<'_>)>, String> {
    let v = whole(b)?;
    if v.first() != Some(&b'{') {
        return Err(format!("not an object: {:?}", String::from_utf8_lossy(b)));
    }
    let mut out = Vec::new();
    let mut j = skip_ws(v, 1);
    if v.get(j) == Some(&b'}') {
        return Ok(out);
    }
    loop {
        let ke = value_end(v, j)?;
        let key: String = serde_json::from_slice(&v[j..ke]).map_err(|e| format!("bad key: {e}"))?;
        j = skip_ws(v, skip_ws(v, ke) + 1); // past ':'
        let ve = value_end(v, j)?;
        out.push((key, &v[j..ve]));
        j = skip_ws(v, ve);
        if v[j] == b'}' {
            return Ok(out);
        }
        j = skip_ws(v, j + 1); // past ','
    }
}

/// The items of a JSON array, as raw spans.
pub fn array(b: &[u8]) -> Result<Vec<Span<'_>>, String> {
    let v = whole(b)?;
    if v.first() != Some(&b'[') {
        return Err(format!("not an array: {:?}", String::from_utf8_lossy(b)));
    }
    let mut out = Vec::new();
    let mut j = skip_ws(v, 1);
    if v.get(j) == Some(&b']') {
        return Ok(out);
    }
    loop {
        let e = value_end(v, j)?;
        out.push(&v[j..e]);
        j = skip_ws(v, e);
        if v[j] == b']' {
            return Ok(out);
        }
        j = skip_ws(v, j + 1);
    }
}

/// The raw span of the first field named `key` of the object in `b`, if `b` is an object that has it.
pub fn field<'a>(b: &'a [u8], key: &str) -> Option<Span<'a>> {
    object(b).ok()?.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Lossy text of a span, for messages.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
