//! `EnvelopeParser` on arbitrary bytes: it must never panic, and wherever serde_json accepts the body it
//! must agree with it: the same shape (single / batch / not a request), the same verdict per call, and for
//! a valid call the same method, the id's exact text and params that parse to the same value. Where Prism
//! refuses on purpose (duplicate keys, nesting deeper than `max_depth`, empty or oversized batches) it
//! must refuse with an error, not answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prism::edge::envelope::{Envelope, EnvelopeError, EnvelopeLimits, EnvelopeParser, Item};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::cell::RefCell;
use std::fmt;

const LIMITS: EnvelopeLimits = EnvelopeLimits {
    max_batch: 20,
    max_depth: 16,
};

thread_local! {
    // One parser reused across inputs, as a shard does: state must not leak from one body to the next.
    static PARSER: RefCell<EnvelopeParser> = RefCell::new(EnvelopeParser::new(LIMITS));
}

/// An object's members in order, duplicates kept, values as raw text.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Box<RawValue>>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// What serde_json says one call should be: `Ok((method, id text, params value))` or `Err(reason)`.
fn expected(raw: &RawValue) -> Result<(String, Option<String>, Option<Value>), &'static str> {
    let Ok(Members(members)) = serde_json::from_str::<Members>(raw.get()) else {
        return Err("not an object");
    };
    for (i, (k, _)) in members.iter().enumerate() {
        if members[..i].iter().any(|(k2, _)| k2 == k) {
            return Err("duplicate key");
        }
    }
    let get = |key: &str| members.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let value = |r: &RawValue| serde_json::from_str::<Value>(r.get()).expect("a raw value parses");
    let id = match get("id") {
        None => None,
        Some(r) => match value(r) {
            Value::String(_) | Value::Number(_) | Value::Null => Some(r.get().to_string()),
            _ => return Err("bad id"),
        },
    };
    if get("jsonrpc").map(|r| value(r)) != Some(Value::String("2.0".into())) {
        return Err("bad version");
    }
    let method = match get("method").map(|r| value(r)) {
        Some(Value::String(m)) => m,
        _ => return Err("bad method"),
    };
    let params = match get("params").map(|r| value(r)) {
        None => None,
        Some(p @ (Value::Array(_) | Value::Object(_))) => Some(p),
        Some(_) => return Err("bad params"),
    };
    Ok((method, id, params))
}

fn check_item(raw: &RawValue, item: &Item<'_>, input: &[u8]) {
    match (expected(raw), item) {
        (Ok((method, id, params)), Ok(call)) => {
            assert_eq!(call.method, method, "method of {:?}", String::from_utf8_lossy(input));
            let got_id = call.id.map(|b| String::from_utf8_lossy(b).into_owned());
            assert_eq!(got_id, id, "id text of {:?}", String::from_utf8_lossy(input));
            let got_params = call.params.map(|p| {
                serde_json::from_slice::<Value>(p).unwrap_or_else(|e| {
                    panic!(
                        "params span {:?} is not JSON ({e}) in {:?}",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(input)
                    )
                })
            });
            assert_eq!(got_params, params, "params of {:?}", String::from_utf8_lossy(input));
        }
        (Err(_), Err(_)) => {}
        (Ok(_), Err(rejected)) => panic!(
            "Prism rejects ({:?}) a call serde_json finds valid: {}\nin {:?}",
            rejected.why,
            raw.get(),
            String::from_utf8_lossy(input)
        ),
        (Err(why), Ok(call)) => panic!(
            "Prism accepts {call:?} but serde_json says {why}: {}\nin {:?}",
            raw.get(),
            String::from_utf8_lossy(input)
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let parsed = PARSER.with(|p| p.borrow_mut().parse(data));
    // The reference: serde_json. Where it refuses (not JSON, numbers out of f64 range, which Prism takes
    // on purpose, nesting past its own limit) only "no panic" is checked.
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let raw: Box<RawValue> = serde_json::from_slice(data).expect("serde_json parsed it once");
    let text = || String::from_utf8_lossy(data).into_owned();
    if matches!(value, Value::Object(_) | Value::Array(_)) && depth(&value) > LIMITS.max_depth {
        assert!(
            matches!(parsed, Err(EnvelopeError::TooDeep { .. })),
            "depth {} > {}: want TooDeep, got {parsed:?} for {:?}",
            depth(&value),
            LIMITS.max_depth,
            text()
        );
        return;
    }
    match &value {
        Value::Object(_) => match &parsed {
            Ok(Envelope::Single(item)) => check_item(&raw, item, data),
            other => panic!("an object must parse as a single call, got {other:?} for {:?}", text()),
        },
        Value::Array(a) if a.is_empty() => {
            assert_eq!(parsed, Err(EnvelopeError::EmptyBatch), "for {:?}", text())
        }
        Value::Array(a) if a.len() > LIMITS.max_batch => assert!(
            matches!(parsed, Err(EnvelopeError::BatchTooLarge { len, .. }) if len == a.len()),
            "batch of {}: got {parsed:?}",
            a.len()
        ),
        Value::Array(_) => {
            let elements: Vec<Box<RawValue>> = serde_json::from_str(raw.get()).expect("an array of raw values");
            match &parsed {
                Ok(Envelope::Batch(items)) => {
                    assert_eq!(items.len(), elements.len(), "batch length for {:?}", text());
                    for (el, item) in elements.iter().zip(items) {
                        check_item(el, item, data);
                    }
                }
                other => panic!("an array must parse as a batch, got {other:?} for {:?}", text()),
            }
        }
        _ => assert_eq!(parsed, Err(EnvelopeError::NotARequest), "for {:?}", text()),
    }
});
