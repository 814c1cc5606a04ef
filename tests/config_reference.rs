//! docs/CONFIGURATION.md lists every key of the typed config (`prism::config::Config`), and nothing else:
//! the keys are read from the config type itself (a serde deserializer that records every field a struct
//! asks for), so adding a key without a line in the reference fails here, and so does documenting a key
//! that does not exist.

use std::collections::BTreeSet;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// Records every struct field reachable from the type it deserializes, as dotted paths
/// (`networks.providers.auth.headers`). Arrays are one element deep, options are present, maps are empty,
/// enums take their first variant, numbers are 1 and strings empty: only the shape is visited.
struct Tracer<'a> {
    path: String,
    seen: &'a mut Seen,
}

/// Every field path, and those whose value is itself a table (a section such as `server` or
/// `networks.providers`: documented by its heading, not a line).
#[derive(Default)]
struct Seen {
    keys: BTreeSet<String>,
    sections: BTreeSet<String>,
}

#[derive(Debug)]
struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Error {}
impl de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

macro_rules! leaf {
    ($($name:ident => $visit:ident($v:expr)),* $(,)?) => {
        $(fn $name<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.$visit($v)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Tracer<'_> {
    type Error = Error;

    leaf! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(1), deserialize_i16 => visit_i64(1), deserialize_i32 => visit_i64(1),
        deserialize_i64 => visit_i64(1), deserialize_u8 => visit_u64(1), deserialize_u16 => visit_u64(1),
        deserialize_u32 => visit_u64(1), deserialize_u64 => visit_u64(1), deserialize_f32 => visit_f64(1.0),
        deserialize_f64 => visit_f64(1.0), deserialize_char => visit_char('x'), deserialize_str => visit_str(""),
        deserialize_string => visit_str(""), deserialize_bytes => visit_bytes(b""),
        deserialize_byte_buf => visit_bytes(b""), deserialize_identifier => visit_str(""),
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(OneElement(Some(self)))
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(Fields {
            fields: &[],
            next: 0,
            tracer: self,
        })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.seen.sections.insert(self.path.clone());
        visitor.visit_map(Fields {
            fields,
            next: 0,
            tracer: self,
        })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(variants[0].into_deserializer())
    }
}

struct OneElement<'a>(Option<Tracer<'a>>);

impl<'de> SeqAccess<'de> for OneElement<'_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        match self.0.take() {
            Some(t) => seed.deserialize(t).map(Some),
            None => Ok(None),
        }
    }
}

struct Fields<'a> {
    fields: &'static [&'static str],
    next: usize,
    tracer: Tracer<'a>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some(name) = self.fields.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize(name.into_deserializer()).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let name = self.fields[self.next];
        self.next += 1;
        let path = if self.tracer.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.tracer.path)
        };
        self.tracer.seen.keys.insert(path.clone());
        seed.deserialize(Tracer {
            path,
            seen: self.tracer.seen,
        })
    }
}

/// Every key of the typed config.
fn config_keys() -> BTreeSet<String> {
    let mut seen = Seen::default();
    let tracer = Tracer {
        path: String::new(),
        seen: &mut seen,
    };
    <prism::config::Config as serde::Deserialize>::deserialize(tracer).expect("the config type can be traced");
    seen.keys.difference(&seen.sections).cloned().collect()
}

/// Every key the reference documents: the first column of its tables, `` `section.key` ``.
fn documented_keys() -> BTreeSet<String> {
    let text = include_str!("../docs/CONFIGURATION.md");
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
fn every_config_key_has_a_line_in_the_reference_and_every_line_is_a_key() {
    let keys = config_keys();
    // The tracer works: a few keys from each corner of the config.
    for k in [
        "server.listen",
        "limits.max_batch",
        "policy.breaker.cooldown_ms",
        "networks.providers.url",
        "networks.providers.auth.headers",
        "keys.weights.latency",
        "cluster.redis_url",
        "admin.token",
        "env_file",
    ] {
        assert!(keys.contains(k), "the tracer missed {k}: {keys:?}");
    }
    let documented = documented_keys();
    let missing: Vec<&String> = keys.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&keys).collect();
    assert!(
        missing.is_empty(),
        "keys of the typed config with no line in docs/CONFIGURATION.md (add `| `key` | default | meaning |`): {missing:?}"
    );
    assert!(
        unknown.is_empty(),
        "docs/CONFIGURATION.md documents keys the config does not have: {unknown:?}"
    );
}
