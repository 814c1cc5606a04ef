//! What `prism check` warns about: a config that loads but will not do what its author meant. An allowlist
//! entry that names no method Prism knows (with the closest one it does: `eth_getLog` -> `eth_getLogs`),
//! and a key whose `burst` is below `limits.max_batch` (a full batch could never be served with it).
//! Warnings, not errors: a provider may serve methods Prism's tables do not list.

use prism_config::Config;
use prism_wire::rpc::methods::{Kind, KNOWN_METHODS};

/// Method names offered as suggestions beyond [`KNOWN_METHODS`] (EVM) : Solana's and MagicBlock's.
const SOLANA_NAMES: &[&str] = &[
    "sendTransaction",
    "simulateTransaction",
    "getAccountInfo",
    "getBalance",
    "getBlock",
    "getBlockHeight",
    "getBlockTime",
    "getBlocks",
    "getEpochInfo",
    "getFeeForMessage",
    "getGenesisHash",
    "getHealth",
    "getIdentity",
    "getLatestBlockhash",
    "getMinimumBalanceForRentExemption",
    "getMultipleAccounts",
    "getProgramAccounts",
    "getRecentPrioritizationFees",
    "getSignatureStatuses",
    "getSignaturesForAddress",
    "getSlot",
    "getSupply",
    "getTokenAccountBalance",
    "getTokenAccountsByOwner",
    "getTransaction",
    "getVersion",
    "isBlockhashValid",
    "getDelegationStatus",
    "getRoutes",
    "getBlockhashForAccounts",
    "accountSubscribe",
    "signatureSubscribe",
    "slotSubscribe",
];

/// Whether some method table (EVM, Solana) or the config's own declarations know `method`.
fn known(config: &Config, method: &str) -> bool {
    prism_wire::rpc::methods::lookup(method).kind != Kind::Unknown
        || prism_solana::methods::lookup(method).kind != Kind::Unknown
        || SOLANA_NAMES.contains(&method)
        || config
            .networks
            .iter()
            .any(|n| n.methods.read.iter().chain(&n.methods.write).any(|m| m == method))
}

fn candidates(config: &Config) -> Vec<&str> {
    let mut out: Vec<&str> = KNOWN_METHODS.iter().chain(SOLANA_NAMES).copied().collect();
    for n in &config.networks {
        out.extend(n.methods.read.iter().chain(&n.methods.write).map(String::as_str));
    }
    out
}

/// Edit distance (insertions, deletions, substitutions), for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The closest known name, when it is close enough to be a typo.
fn closest<'a>(config: &'a Config, entry: &str) -> Option<&'a str> {
    candidates(config)
        .into_iter()
        .map(|c| (distance(&entry.to_ascii_lowercase(), &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len() / 4).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Every warning for `config`, each naming its field.
pub fn warnings(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for (i, k) in config.keys.iter().enumerate() {
        for (j, entry) in k.allow.iter().enumerate() {
            let ok = match entry.strip_suffix('*') {
                Some(prefix) => {
                    candidates(config).iter().any(|c| c.starts_with(prefix)) || known(config, &format!("{prefix}x"))
                }
                None => known(config, entry),
            };
            if !ok {
                let hint = closest(config, entry.trim_end_matches('*'))
                    .map(|c| format!("; did you mean {c:?}?"))
                    .unwrap_or_default();
                out.push(format!(
                    "keys[{i}].allow[{j}]: {entry:?} is not a method Prism knows{}{hint}",
                    if entry.ends_with('*') { " the prefix of" } else { "" }
                ));
            }
        }
        let burst = k.burst.or(k.rate_per_s.map(|r| r.ceil() as u32));
        if let Some(b) = burst {
            if (b as usize) < config.limits.max_batch {
                out.push(format!(
                    "keys[{i}].burst: {b} is below limits.max_batch ({}): a batch of more than {b} calls is always refused for key {:?} (a batch takes one token per call)",
                    config.limits.max_batch, k.name
                ));
            }
        }
    }
    if let Some(addr) = config
        .server
        .admin_listen
        .as_deref()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
    {
        if !addr.ip().is_loopback() && config.admin.resolved.is_none() {
            out.push(format!(
                "server.admin_listen: {addr} is not loopback and [admin] token is unset: /metrics and /status are open to the network (reload and cordon still answer only loopback peers)"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:1\"\n[[networks]]\nname = \"a\"\nkind = \"evm\"\n  [[networks.providers]]\n  name = \"p\"\n  url = \"http://127.0.0.1:2\"\n{extra}"
        );
        Config::from_toml_with(&text, |_| None).unwrap()
    }

    #[test]
    fn a_typo_in_an_allowlist_is_named_with_the_closest_method() {
        let c = config("[[keys]]\nname = \"k\"\nkey = \"secret-1\"\nallow = [\"eth_getLog\", \"eth_call\", \"debug_*\", \"eht_*\", \"getSlot\"]\n");
        let w = warnings(&c);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("keys[0].allow[0]: \"eth_getLog\"") && w[0].contains("did you mean \"eth_getLogs\"?"),
            "{w:?}"
        );
        assert!(
            w[1].starts_with("keys[0].allow[3]: \"eht_*\" is not a method Prism knows the prefix of"),
            "{w:?}"
        );
    }

    #[test]
    fn a_burst_below_the_batch_limit_is_named() {
        let c = config(
            "[limits]\nmax_batch = 50\n[[keys]]\nname = \"k\"\nkey = \"secret-1\"\nrate_per_s = 100\nburst = 20\n",
        );
        let w = warnings(&c);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("keys[0].burst: 20 is below limits.max_batch (50)"),
            "{w:?}"
        );
        assert!(warnings(&config("[[keys]]\nname = \"k\"\nkey = \"s\"\nrate_per_s = 100\n")).is_empty());
    }
}
