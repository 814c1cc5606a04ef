//! JSON-RPC 2.0 envelope parsing without re-serialising anything.
//!
//! simd-json validates the body (grammar, UTF-8) on a scratch copy and gives us a tape with unescaped keys
//! and the method name; its structural index gives byte offsets into the *original* body, from which we
//! take the spans of `id`, `params` and each batch element. Params are never rebuilt: the bytes the client
//! sent are the bytes the upstream gets.

use std::borrow::Cow;
use std::fmt;

use simd_json::{Node, StaticNode, Tape};

/// Limits the parser enforces, from `[limits]`.
#[derive(Debug, Clone, Copy)]
pub struct EnvelopeLimits {
    pub max_batch: usize,
    pub max_depth: usize,
}

pub use prism_wire::rpc::Call;

/// Why a single call (or batch element) is not a valid request; answered with -32600.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    NotAnObject,
    MissingVersion,
    BadVersion,
    MissingMethod,
    MethodNotString,
    BadParams,
    BadId,
    DuplicateKey(KnownKey),
    DuplicateOtherKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownKey {
    Jsonrpc,
    Method,
    Params,
    Id,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Invalid::NotAnObject => "a request must be a JSON object",
            Invalid::MissingVersion => "missing \"jsonrpc\": \"2.0\"",
            Invalid::BadVersion => "\"jsonrpc\" must be exactly \"2.0\"",
            Invalid::MissingMethod => "missing \"method\"",
            Invalid::MethodNotString => "\"method\" must be a string",
            Invalid::BadParams => "\"params\" must be an array or an object",
            Invalid::BadId => "\"id\" must be a string, a number or null",
            Invalid::DuplicateKey(KnownKey::Jsonrpc) => "duplicate key \"jsonrpc\"",
            Invalid::DuplicateKey(KnownKey::Method) => "duplicate key \"method\"",
            Invalid::DuplicateKey(KnownKey::Params) => "duplicate key \"params\"",
            Invalid::DuplicateKey(KnownKey::Id) => "duplicate key \"id\"",
            Invalid::DuplicateOtherKey => "duplicate key",
        };
        f.write_str(s)
    }
}

/// A batch element or single request that failed validation, with its id when one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected<'a> {
    pub id: Option<&'a [u8]>,
    pub why: Invalid,
}

pub type Item<'a> = Result<Call<'a>, Rejected<'a>>;

#[derive(Debug, PartialEq)]
pub enum Envelope<'a> {
    Single(Item<'a>),
    Batch(Vec<Item<'a>>),
}

/// Whole-body failures: answered with one error object (id null).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvelopeError {
    /// Not JSON at all → -32700.
    Parse(String),
    /// Valid JSON that is neither an object nor an array, or `[]` → -32600.
    NotARequest,
    EmptyBatch,
    BatchTooLarge {
        len: usize,
        max: usize,
    },
    TooDeep {
        max: usize,
    },
    /// Valid JSON with more numbers out of simd-json's range (`1e400`) than Prism masks → -32600.
    TooManyHugeNumbers {
        max: usize,
    },
}

impl fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvelopeError::Parse(m) => write!(f, "Parse error: {m}"),
            EnvelopeError::NotARequest => f.write_str("Invalid Request: expected an object or an array"),
            EnvelopeError::EmptyBatch => f.write_str("Invalid Request: empty batch"),
            EnvelopeError::BatchTooLarge { len, max } => {
                write!(f, "Invalid Request: batch of {len} calls exceeds the limit of {max}")
            }
            EnvelopeError::TooDeep { max } => {
                write!(f, "Invalid Request: JSON nested deeper than {max} levels")
            }
            EnvelopeError::TooManyHugeNumbers { max } => write!(
                f,
                "Invalid Request: more than {max} numbers too large for a double (like 1e400) in one request"
            ),
        }
    }
}

impl EnvelopeError {
    pub fn code(&self) -> i32 {
        match self {
            EnvelopeError::Parse(_) => -32700,
            _ => -32600,
        }
    }
}

/// A reusable parser: one per shard, so the scratch buffers are allocated once.
pub struct EnvelopeParser {
    limits: EnvelopeLimits,
    scratch: Vec<u8>,
    buffers: simd_json::Buffers,
    tape: Option<Tape<'static>>,
}

impl EnvelopeParser {
    pub fn new(limits: EnvelopeLimits) -> Self {
        EnvelopeParser {
            limits,
            scratch: Vec::with_capacity(4096),
            buffers: simd_json::Buffers::new(4096),
            tape: Some(Tape::null().reset()),
        }
    }

    /// Parses a request body. Spans in the result borrow `body`; nothing else is retained.
    pub fn parse<'a>(&mut self, body: &'a [u8]) -> Result<Envelope<'a>, EnvelopeError> {
        let first = body.iter().position(|b| !is_ws(*b));
        // Cheap pre-checks so garbage and scalars never reach the SIMD path.
        match first.map(|i| body[i]) {
            None => return Err(EnvelopeError::Parse("empty body".into())),
            Some(b'{') | Some(b'[') => {}
            Some(_) => {
                // A lone number is valid JSON whatever its size (simd-json refuses 1e400).
                let trimmed = trim_ws(body);
                if scalar_ok(trimmed) {
                    return Err(EnvelopeError::NotARequest);
                }
                if trimmed.first() != Some(&b'"') {
                    return Err(EnvelopeError::Parse(
                        "invalid JSON: not a number, string, true, false or null".into(),
                    ));
                }
                return Err(match simd_json::to_borrowed_value(&mut body.to_vec()) {
                    Ok(_) => EnvelopeError::NotARequest,
                    Err(e) => EnvelopeError::Parse(e.to_string()),
                });
            }
        }
        // Numbers simd-json cannot represent (1e400) are valid JSON: mask them in the scratch copy and
        // parse again; only their original bytes are ever forwarded.
        let mut masked: Vec<(usize, usize)> = Vec::new();
        loop {
            self.scratch.clear();
            self.scratch.extend_from_slice(body);
            for &(at, len) in &masked {
                self.scratch[at] = b'0';
                self.scratch[at + 1..at + len].fill(b' ');
            }
            let mut tape: Tape<'_> = self.tape.take().unwrap_or_else(|| Tape::null().reset()).reset();
            let parsed = simd_json::fill_tape(&mut self.scratch, &mut self.buffers, &mut tape);
            let result = match parsed {
                Ok(()) => Walker {
                    body,
                    nodes: &tape.0,
                    idx: self.buffers.structural_indexes(),
                    limits: self.limits,
                }
                .envelope(),
                Err(e) => {
                    // simd-json may point inside the number: walk back to where its token starts.
                    let mut at = e.index().min(body.len());
                    while at > 0 && matches!(body[at - 1], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                        at -= 1;
                    }
                    let retry =
                        matches!(e.error(), simd_json::ErrorType::InvalidNumber) && !masked.iter().any(|m| m.0 == at);
                    // Only a whole, well-formed number is masked: what follows it must end the token.
                    let whole = |len: &usize| body.get(at + len).is_none_or(|&b| ends_token(b));
                    match number_len(&body[at..]).filter(|_| retry).filter(whole) {
                        // No more masks: whether the rest is valid JSON decides the error (jsonscan reads
                        // numbers of any size; simd-json has checked UTF-8 up to here, not beyond).
                        Some(_) if masked.len() == MAX_MASKED => Err(if is_json(body) {
                            EnvelopeError::TooManyHugeNumbers { max: MAX_MASKED }
                        } else {
                            EnvelopeError::Parse(e.to_string())
                        }),
                        Some(len) => {
                            masked.push((at, len));
                            self.tape = Some(tape.reset());
                            continue;
                        }
                        None => Err(EnvelopeError::Parse(e.to_string())),
                    }
                }
            };
            self.tape = Some(tape.reset());
            return result;
        }
    }
}

/// How many out-of-range numbers one body may carry before it is refused (each one is a parse more).
const MAX_MASKED: usize = 16;

/// Whether `body` is one JSON value (any number size; nesting up to `jsonscan::MAX_DEPTH`), for the rare
/// body simd-json could not read whole.
fn is_json(body: &[u8]) -> bool {
    let start = prism_wire::jsonscan::skip_ws(body, 0);
    std::str::from_utf8(body).is_ok()
        && prism_wire::jsonscan::skip_value(body, start)
            .is_some_and(|end| prism_wire::jsonscan::skip_ws(body, end) == body.len())
}

/// Length of a JSON number (RFC 8259 grammar) at the start of `b`, if one is there.
fn number_len(b: &[u8]) -> Option<usize> {
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut i = usize::from(b.first() == Some(&b'-'));
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i += digits(i),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let n = digits(i + 1);
        if n == 0 {
            return None;
        }
        i += 1 + n;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(i);
        if n == 0 {
            return None;
        }
        i += n;
    }
    Some(i)
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Whether `b` may follow a scalar token: whitespace or a structural character.
fn ends_token(b: u8) -> bool {
    is_ws(b) || matches!(b, b',' | b']' | b'}' | b':')
}

fn trim_ws(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !is_ws(*c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !is_ws(*c)).map_or(start, |e| e + 1);
    &b[start..end]
}

/// Whether a scalar token (number or literal) is exactly one well-formed JSON scalar. simd-json stops a
/// number or literal at the first byte it does not expect (a NUL, or anything after a number it parses on
/// its slow path) and does not always refuse what follows; Prism forwards original bytes, so it checks.
fn scalar_ok(token: &[u8]) -> bool {
    matches!(token, b"true" | b"false" | b"null") || number_len(token) == Some(token.len())
}

/// Walks the tape and the structural index side by side. Tape position `t` and structural position `s`
/// always point at the same JSON value.
struct Walker<'a, 't, 'i> {
    body: &'a [u8],
    nodes: &'t [Node<'t>],
    idx: &'i [u32],
    limits: EnvelopeLimits,
}

impl<'a> Walker<'a, '_, '_> {
    fn envelope(&self) -> Result<Envelope<'a>, EnvelopeError> {
        self.check_depth()?;
        match self.nodes.first() {
            Some(Node::Object { .. }) => Ok(Envelope::Single(self.call(0, 0).0)),
            Some(Node::Array { len, .. }) => {
                let len = *len;
                if len == 0 {
                    return Err(EnvelopeError::EmptyBatch);
                }
                if len > self.limits.max_batch {
                    return Err(EnvelopeError::BatchTooLarge {
                        len,
                        max: self.limits.max_batch,
                    });
                }
                let mut items = Vec::with_capacity(len);
                let (mut t, mut s) = (1, 1);
                for _ in 0..len {
                    let (item, next_s) = self.call(t, s);
                    items.push(item);
                    t += node_span(&self.nodes[t]);
                    s = next_s + 1; // past the ',' or the closing ']'
                }
                Ok(Envelope::Batch(items))
            }
            _ => Err(EnvelopeError::NotARequest),
        }
    }

    /// Depth over the structural index (only brackets outside strings appear there), and every scalar
    /// token is whole: from its start to the next structural position there is one number or literal.
    fn check_depth(&self) -> Result<(), EnvelopeError> {
        let mut depth = 0usize;
        for (n, &i) in self.idx.iter().enumerate() {
            match self.body.get(i as usize) {
                Some(b'"') | Some(b',') | Some(b':') => {}
                Some(b'{') | Some(b'[') | Some(b'}') | Some(b']') => {}
                Some(_) => {
                    let end = self.idx.get(n + 1).map_or(self.body.len(), |&e| e as usize);
                    let token = self.body.get(i as usize..end.max(i as usize)).unwrap_or(&[]);
                    if !scalar_ok(trim_ws(token)) {
                        return Err(EnvelopeError::Parse(format!(
                            "invalid JSON value at byte {i}: not a number, true, false or null"
                        )));
                    }
                }
                None => {}
            }
            match self.body.get(i as usize) {
                Some(b'{') | Some(b'[') => {
                    depth += 1;
                    if depth > self.limits.max_depth {
                        return Err(EnvelopeError::TooDeep {
                            max: self.limits.max_depth,
                        });
                    }
                }
                Some(b'}') | Some(b']') => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        Ok(())
    }

    /// Byte span of the value starting at structural `s`, and the structural position just after it.
    fn value_span(&self, s: usize) -> (&'a [u8], usize) {
        let start = self.idx[s] as usize;
        match self.body[start] {
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut j = s;
                loop {
                    let p = self.idx[j] as usize;
                    match self.body[p] {
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return (&self.body[start..=p], j + 1);
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
            }
            _ => {
                let mut end = self.idx.get(s + 1).map_or(self.body.len(), |&e| e as usize);
                while end > start && is_ws(self.body[end - 1]) {
                    end -= 1;
                }
                (&self.body[start..end], s + 1)
            }
        }
    }

    /// Validates one call object at tape `t` / structural `s`. Returns the item and the structural
    /// position after the value.
    fn call(&self, t: usize, s: usize) -> (Item<'a>, usize) {
        let len = match self.nodes[t] {
            Node::Object { len, .. } => len,
            _ => {
                let (_, next) = self.value_span(s);
                return (
                    Err(Rejected {
                        id: None,
                        why: Invalid::NotAnObject,
                    }),
                    next,
                );
            }
        };
        let mut id: Option<&'a [u8]> = None;
        let mut id_ok = true;
        let mut method: Option<Result<Cow<'a, str>, ()>> = None;
        let mut params: Option<Result<&'a [u8], ()>> = None;
        let mut version: Option<bool> = None;
        let mut others = OtherKeys::default();
        let mut problem: Option<Invalid> = None;

        let (mut t, mut s) = (t + 1, s + 1);
        for _ in 0..len {
            let key = match self.nodes[t] {
                Node::String(k) => k,
                _ => unreachable!("simd-json tape: object keys are strings"),
            };
            let value_node = &self.nodes[t + 1];
            let (raw, next) = self.value_span(s + 2); // key, ':', value
            t += 1 + node_span(value_node);
            s = next + 1; // past ',' or '}'
            match key {
                "jsonrpc" => {
                    note_dup(&mut problem, version.is_some(), KnownKey::Jsonrpc);
                    version = Some(matches!(value_node, Node::String("2.0")));
                }
                "method" => {
                    note_dup(&mut problem, method.is_some(), KnownKey::Method);
                    method = Some(method_name(value_node, raw));
                }
                "params" => {
                    note_dup(&mut problem, params.is_some(), KnownKey::Params);
                    params = Some(match value_node {
                        Node::Object { .. } | Node::Array { .. } => Ok(raw),
                        _ => Err(()),
                    });
                }
                "id" => {
                    note_dup(&mut problem, id.is_some(), KnownKey::Id);
                    id_ok = !matches!(
                        value_node,
                        Node::Object { .. } | Node::Array { .. } | Node::Static(StaticNode::Bool(_))
                    );
                    id = Some(raw);
                }
                other => {
                    if !others.insert(other) && problem.is_none() {
                        problem = Some(Invalid::DuplicateOtherKey);
                    }
                }
            }
        }
        // `s` now points just past the closing '}' (for `{}` it still points at it).
        let end = if len == 0 { s + 1 } else { s };
        let reply_id = if id_ok { id } else { None };
        let reject = |why| (Err(Rejected { id: reply_id, why }), end);
        if let Some(why) = problem {
            return reject(why);
        }
        if !id_ok {
            return reject(Invalid::BadId);
        }
        match version {
            None => return reject(Invalid::MissingVersion),
            Some(false) => return reject(Invalid::BadVersion),
            Some(true) => {}
        }
        let method = match method {
            None => return reject(Invalid::MissingMethod),
            Some(Err(())) => return reject(Invalid::MethodNotString),
            Some(Ok(m)) => m,
        };
        let params = match params {
            None => None,
            Some(Err(())) => return reject(Invalid::BadParams),
            Some(Ok(p)) => Some(p),
        };
        (Ok(Call { id, method, params }), end)
    }
}

/// A call's `method` value: borrowed from the request's bytes when no escape changed it (the raw span is
/// `"name"`), owned when one did, `Err` when it is not a string.
#[inline]
fn method_name<'a>(value: &Node<'_>, raw: &'a [u8]) -> Result<Cow<'a, str>, ()> {
    match value {
        Node::String(m) if raw.len() == m.len() + 2 && &raw[1..raw.len() - 1] == m.as_bytes() => {
            // SAFETY: these bytes equal those of `m`, a `str`, so they are valid UTF-8. The compare is ~20
            // instructions on a method name where `from_utf8` took ~150.
            Ok(Cow::Borrowed(unsafe {
                std::str::from_utf8_unchecked(&raw[1..raw.len() - 1])
            }))
        }
        Node::String(m) => Ok(Cow::Owned((*m).to_string())),
        _ => Err(()),
    }
}

/// Keys other than the four JSON-RPC ones, to refuse duplicates in time linear in the object's size: the
/// first few are compared in place (no allocation for any ordinary call), past that a hash set takes over,
/// so 80 000 distinct keys cost 80 000 hash inserts instead of 3.2 billion string comparisons.
#[derive(Default)]
struct OtherKeys<'t> {
    inline: [&'t str; INLINE_KEYS],
    len: usize,
    set: Option<ahash::AHashSet<&'t str>>,
}

/// Other keys compared by linear scan before switching to a hash set.
const INLINE_KEYS: usize = 16;

impl<'t> OtherKeys<'t> {
    /// Records `key`; false when it was already there.
    fn insert(&mut self, key: &'t str) -> bool {
        if let Some(set) = &mut self.set {
            return set.insert(key);
        }
        if self.inline[..self.len].contains(&key) {
            return false;
        }
        if self.len < INLINE_KEYS {
            self.inline[self.len] = key;
            self.len += 1;
            return true;
        }
        let mut set = ahash::AHashSet::with_capacity(4 * INLINE_KEYS);
        set.extend(self.inline.iter().copied());
        set.insert(key);
        self.set = Some(set);
        true
    }
}

fn note_dup(problem: &mut Option<Invalid>, seen: bool, key: KnownKey) {
    if seen && problem.is_none() {
        *problem = Some(Invalid::DuplicateKey(key));
    }
}

/// Number of tape nodes a value occupies.
fn node_span(n: &Node<'_>) -> usize {
    match n {
        Node::Object { count, .. } | Node::Array { count, .. } => 1 + count,
        _ => 1,
    }
}

#[cfg(test)]
mod tests;
