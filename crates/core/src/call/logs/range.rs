//! The pure half of splitting a wide `eth_getLogs`: which block range a filter asks for, the same filter
//! over a sub-range, the limit a provider's "too large" error states, and the merged answer. No I/O, and
//! every function reads client or provider bytes, so none may panic on any input.

use prism_wire::jsonscan::{elements, hex_quantity, nth_element, plain_str, skip_string, skip_value, skip_ws};

/// The inclusive block range a filter asks for, with tags resolved to numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub from: u64,
    pub to: u64,
}

impl Span {
    /// Blocks in the range (at least 1).
    pub fn width(self) -> u64 {
        self.to - self.from + 1
    }

    /// The range an `eth_getLogs` call's params ask for, when it can be split soundly: one filter object,
    /// no `blockHash`, `fromBlock`/`toBlock` hex numbers or tags with a sure number (`earliest` = 0,
    /// `latest` and an absent bound = `head`, the pool's agreed head; none when `head` is 0). `safe`,
    /// `finalized` and `pending` move with the chain in ways this node cannot pin: such a filter is left
    /// whole, as is one whose range is empty or reversed (the node's own answer says what it means).
    pub fn of(params: Option<&[u8]>, head: u64) -> Option<Span> {
        let params = params?;
        let filter = nth_element(params, 0)?;
        if nth_element(params, 1).is_some() {
            return None;
        }
        let members = members(filter)?;
        let mut from = None;
        let mut to = None;
        for (key, value) in &members {
            match *key {
                b"blockHash" => return None,
                b"fromBlock" => from = Some(*value),
                b"toBlock" => to = Some(*value),
                _ => {}
            }
        }
        let bound = |v: Option<&[u8]>| -> Option<u64> {
            let Some(v) = v else {
                return (head > 0).then_some(head);
            };
            if let Some(n) = hex_quantity(v) {
                return Some(n);
            }
            match plain_str(v)? {
                "earliest" => Some(0),
                "latest" if head > 0 => Some(head),
                _ => None,
            }
        };
        let (from, to) = (bound(from)?, bound(to)?);
        (from <= to).then_some(Span { from, to })
    }
}

/// The members of a JSON object as (key bytes without quotes, value bytes), in order; `None` unless it is
/// a well-formed object.
fn members(object: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut p = skip_ws(object, 0);
    if object.get(p) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    p = skip_ws(object, p + 1);
    if object.get(p) == Some(&b'}') {
        return Some(out);
    }
    loop {
        let key_end = skip_string(object, p)?;
        let key = object.get(p + 1..key_end - 1)?;
        p = skip_ws(object, key_end);
        if object.get(p) != Some(&b':') {
            return None;
        }
        let v = skip_ws(object, p + 1);
        let v_end = skip_value(object, v)?;
        out.push((key, object.get(v..v_end)?));
        p = skip_ws(object, v_end);
        match object.get(p) {
            Some(b',') => p = skip_ws(object, p + 1),
            Some(b'}') => return Some(out),
            _ => return None,
        }
    }
}

/// The params of the same filter over `span`: `fromBlock`/`toBlock` as hex numbers first, every other
/// member as the client sent it. `None` when `params` is not one filter object (checked by [`Span::of`]).
pub fn sub_params(params: &[u8], span: Span) -> Option<Vec<u8>> {
    let filter = nth_element(params, 0)?;
    let members = members(filter)?;
    let mut out = Vec::with_capacity(filter.len() + 48);
    out.extend_from_slice(format!("[{{\"fromBlock\":\"0x{:x}\",\"toBlock\":\"0x{:x}\"", span.from, span.to).as_bytes());
    for (key, value) in members {
        if key == b"fromBlock" || key == b"toBlock" {
            continue;
        }
        out.extend_from_slice(b",\"");
        out.extend_from_slice(key);
        out.extend_from_slice(b"\":");
        out.extend_from_slice(value);
    }
    out.extend_from_slice(b"}]");
    Some(out)
}

/// What a provider's "too large" error says its limit is, when it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stated {
    /// At most this many blocks per call ("limited to a 10,000 range", "up to a 2K block range").
    Range(u64),
    /// At most this many logs per answer ("query returned more than 10000 results").
    Results(u64),
}

/// The limit a JSON-RPC error object (raw bytes) states, read from its `message`. Range wordings win over
/// result counts (Alchemy states both; its block range is the one to use).
pub fn stated_limit(error: &[u8]) -> Option<Stated> {
    let message = prism_wire::jsonscan::object_field(error, "message")?;
    let text = String::from_utf8_lossy(message).to_ascii_lowercase();
    let words = tokens(&text);
    let num = |i: usize| match words.get(i) {
        Some(Tok::Num(n)) => Some(*n),
        _ => None,
    };
    let word = |i: usize, w: &str| matches!(words.get(i), Some(Tok::Word(x)) if x == w);
    // "<N> range", "<N> block range", "<N> blocks range".
    for i in 0..words.len() {
        if let Some(n) = num(i) {
            if word(i + 1, "range") || ((word(i + 1, "block") || word(i + 1, "blocks")) && word(i + 2, "range")) {
                return Some(Stated::Range(n));
            }
        }
    }
    let results = text.contains("result") || text.contains("logs");
    for i in 0..words.len() {
        // "more than <N> results", "max results <N>", "limit of <N>" (logs or blocks, by the text).
        if word(i, "than") && word(i + 2, "results") {
            if let Some(n) = num(i + 1) {
                return Some(Stated::Results(n));
            }
        }
        if word(i, "results") && word(i.wrapping_sub(1), "max") {
            if let Some(n) = num(i + 1) {
                return Some(Stated::Results(n));
            }
        }
        if word(i, "limit") && word(i + 1, "of") {
            if let Some(n) = num(i + 2) {
                return Some(if results { Stated::Results(n) } else { Stated::Range(n) });
            }
        }
        // "blocks distance: <N>", "(10001 > 10000)".
        if (word(i, "distance") || matches!(words.get(i), Some(Tok::Gt))) && !results {
            if let Some(n) = num(i + 1) {
                return Some(Stated::Range(n));
            }
        }
    }
    None
}

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    /// A decimal number; `10,000` and `2k` / `1m` read as 10000, 2000, 1000000. Hex (`0x..`) is a word.
    Num(u64),
    Gt,
}

fn tokens(text: &str) -> Vec<Tok> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() && out.len() < 256 {
        let c = b[i];
        if c == b'>' {
            out.push(Tok::Gt);
            i += 1;
        } else if c.is_ascii_digit() && !(c == b'0' && b.get(i + 1) == Some(&b'x')) {
            let mut n: u64 = 0;
            while i < b.len()
                && (b[i].is_ascii_digit() || (b[i] == b',' && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
            {
                if b[i] != b',' {
                    n = n.saturating_mul(10).saturating_add(u64::from(b[i] - b'0'));
                }
                i += 1;
            }
            let scale = match b.get(i) {
                Some(b'k') if !b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) => 1_000,
                Some(b'm') if !b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) => 1_000_000,
                _ => 1,
            };
            if scale > 1 {
                i += 1;
            }
            out.push(Tok::Num(n.saturating_mul(scale)));
        } else if c.is_ascii_alphanumeric() {
            let start = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            out.push(Tok::Word(text[start..i].to_string()));
        } else {
            i += 1;
        }
    }
    out
}

/// The logs of consecutive sub-ranges, merged into the one array a node without limits would answer: each
/// part's elements as they came, joined with `,`, in range order.
#[derive(Debug, Default)]
pub struct Merged {
    /// The part's elements already joined with `,` (no brackets), by the first block of its range.
    parts: std::collections::BTreeMap<u64, Vec<u8>>,
    bytes: usize,
    /// Logs and blocks merged so far (their density sizes parts under a results limit).
    pub logs: u64,
    pub blocks: u64,
}

impl Merged {
    /// Adds the `result` array of the part starting at block `from`; returns how many logs it held, or
    /// `None` when the result is not an array.
    pub fn add(&mut self, from: u64, result: &[u8]) -> Option<u64> {
        let items = elements(result)?;
        let mut joined = Vec::with_capacity(result.len());
        for (k, item) in items.iter().enumerate() {
            if k > 0 {
                joined.push(b',');
            }
            joined.extend_from_slice(item);
        }
        self.bytes += joined.len() + 1;
        self.logs += items.len() as u64;
        self.parts.insert(from, joined);
        Some(items.len() as u64)
    }

    /// The size of the merged answer so far (within a byte per part).
    pub fn bytes(&self) -> usize {
        self.bytes + 2
    }

    /// The merged `result` array.
    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes());
        out.push(b'[');
        for part in self.parts.into_values().filter(|p| !p.is_empty()) {
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(&part);
        }
        out.push(b']');
        out
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
