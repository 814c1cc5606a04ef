//! Field-by-field differences between two configs, for what a reload changed (the summary it logs and
//! answers) and what it cannot change (`changes::restart_needed` names `server.shards`, not `server`).
//! Paths name networks, providers and keys by their `name` (`networks.main.providers.alchemy.weight`).
//! Values are shown only for numbers and booleans: strings may be URLs with API keys, key values or
//! secrets (those serialize as a short fingerprint, so a change shows and the value never does).

use std::collections::BTreeMap;

use super::Config;

/// One leaf: its comparable form, and what may be shown of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    raw: String,
    shown: Option<String>,
}

/// Every leaf of `config` by path. A config that cannot be flattened (never seen: every field serializes)
/// yields one leaf that differs from everything, so nothing is taken as unchanged.
pub fn flatten(config: &Config) -> BTreeMap<String, Leaf> {
    let mut out = BTreeMap::new();
    match toml::Value::try_from(config) {
        Ok(v) => walk(&v, "", &mut out),
        Err(e) => {
            let raw = format!("{e} {:p}", config);
            out.insert(
                "config (cannot be compared field by field)".into(),
                Leaf { raw, shown: None },
            );
        }
    }
    out
}

fn walk(v: &toml::Value, at: &str, out: &mut BTreeMap<String, Leaf>) {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                walk(v, &join(k), out);
            }
        }
        // Arrays of named tables (networks, providers, keys) by name; any other array is one leaf.
        toml::Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| i.get("name").and_then(|n| n.as_str()).is_some()) =>
        {
            for item in items {
                let name = item.get("name").and_then(|n| n.as_str()).unwrap_or_default();
                walk(item, &format!("{at}.{name}"), out);
            }
        }
        other => {
            let shown = match other {
                toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => Some(other.to_string()),
                _ => None,
            };
            out.insert(
                at.to_string(),
                Leaf {
                    raw: other.to_string(),
                    shown,
                },
            );
        }
    }
}

/// One line per leaf that differs: `path: old -> new` for numbers and booleans, `path changed` otherwise,
/// `path added` / `path removed` when only one side has it.
pub fn differences(a: &BTreeMap<String, Leaf>, b: &BTreeMap<String, Leaf>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, old) in a {
        match b.get(k) {
            Some(new) if new == old => {}
            Some(new) => {
                let line = match (&old.shown, &new.shown) {
                    (Some(o), Some(n)) => format!("{k}: {o} -> {n}"),
                    _ => format!("{k} changed"),
                };
                out.push((k.clone(), line));
            }
            None => out.push((k.clone(), format!("{k} removed"))),
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        let line = match &b[k].shown {
            Some(v) => format!("{k} = {v} added"),
            None => format!("{k} added"),
        };
        out.push((k.clone(), line));
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:1\"\n{extra}\n[[networks]]\nname = \"main\"\nkind = \"evm\"\n  [[networks.providers]]\n  name = \"alchemy\"\n  url = \"http://127.0.0.1:2/v2/SECRETKEY\"\n"
        );
        Config::from_toml_with(&text, |_| None).unwrap()
    }

    #[test]
    fn leaves_are_named_by_path_and_strings_never_shown() {
        let a = flatten(&config("shards = 1"));
        let mut b = config("shards = 2\n[limits]\nmax_batch = 7");
        b.networks[0].providers[0].weight = 2.0;
        b.networks[0].providers[0].url = "http://127.0.0.1:2/v2/OTHERKEY".into();
        let lines: Vec<String> = differences(&a, &flatten(&b)).into_iter().map(|(_, l)| l).collect();
        assert_eq!(
            lines,
            [
                "limits.max_batch: 100 -> 7",
                "networks.main.providers.alchemy.url changed",
                "networks.main.providers.alchemy.weight: 1.0 -> 2.0",
                "server.shards: 1 -> 2",
            ]
        );
        assert!(!format!("{lines:?}").contains("KEY"));
    }
}
