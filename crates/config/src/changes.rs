//! What a config reload may change in a running node, and the provider roster it leads to.
//!
//! A reload swaps keys, providers, weights, strategies, retry policy and most limits. What is built once per
//! process stays: listeners and shards (`[server]`), the cache's size, `[cluster]`, the set of networks and
//! what each network's shared state was sized with (chain id, drift and head rules), the breaker thresholds
//! every provider's breaker holds, the upstream pools' settings, and a solana-magic network as a whole (its
//! per-shard delegation tables and base-layer links are not rebuilt). [`restart_needed`] names each such
//! change so the refusal says what to restart for.
//!
//! Providers keep their slot ([`prism_wire::rpc::ProviderId`]) for the life of the process: [`roster`] lays the
//! new providers over the running slots, a provider with the same name, URL and WebSocket URL keeps its slot
//! (its breaker, head and connections), a new one takes a new slot, and a removed one stays in its slot
//! marked `retired` (never routed to again; its in-flight calls finish).

use super::{Config, Network, NetworkKind, Provider};
use prism_wire::rpc::ProviderId;

/// Fields whose whole section is built once per process.
const RESTART_SECTIONS: &[&str] = &["server.", "cache.", "cluster.", "policy.breaker."];

/// Limits the upstream pools and the Solana links were built with.
const RESTART_LIMITS: &[&str] = &[
    "limits.upstream_connect_timeout_ms",
    "limits.upstream_idle_timeout_ms",
    "limits.upstream_max_idle",
    "limits.upstream_max_connections",
    "limits.max_response_bytes",
    "limits.record_resubscribe_per_sec",
    "limits.solana_subscriptions_per_socket",
];

/// What an EVM network's shared state was sized with.
const RESTART_NETWORK_FIELDS: &[&str] = &[
    "chain_id",
    "max_drift_blocks",
    "hwm_tolerance_blocks",
    "block_time_ms",
    "head_slack_blocks",
    "max_slot_drift",
    "slot_stall_ms",
    "slot_stall_slots",
];

/// The fields of `new` that differ from `running` and cannot change without a restart, each by its own
/// path (`server.shards`, `networks.main.chain_id`); empty: the reload may proceed.
pub fn restart_needed(running: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let names = |c: &Config| c.networks.iter().map(|n| (n.name.clone(), n.kind)).collect::<Vec<_>>();
    let topology = names(running) != names(new);
    let bare = |c: &Config| {
        let mut c = c.clone();
        for n in &mut c.networks {
            n.providers.retain(|p| !p.retired);
        }
        super::diff::flatten(&c)
    };
    let solana: Vec<&str> = running
        .networks
        .iter()
        .filter(|n| n.kind == NetworkKind::SolanaMagic)
        .map(|n| n.name.as_str())
        .collect();
    for (path, _) in super::diff::differences(&bare(running), &bare(new)) {
        let in_network = |name: &str| path.strip_prefix(&format!("networks.{name}.")).map(str::to_string);
        let restart = path.starts_with("config (")
            || RESTART_SECTIONS.iter().any(|s| path.starts_with(s))
            || (path.starts_with("cluster") && !path.contains('.'))
            || RESTART_LIMITS.contains(&path.as_str())
            || (!solana.is_empty() && (path.starts_with("policy.retry.") || path.starts_with("policy.hedge.")))
            || (!topology
                && solana
                    .iter()
                    .any(|n| in_network(n).is_some_and(|rest| !rest.contains(".auth."))))
            || (!topology
                && running
                    .networks
                    .iter()
                    .any(|n| in_network(&n.name).is_some_and(|rest| RESTART_NETWORK_FIELDS.contains(&rest.as_str()))));
        if restart {
            let why = if path.starts_with("policy.retry.") || path.starts_with("policy.hedge.") {
                " (a solana-magic network keeps its routes until a restart)"
            } else if solana.iter().any(|n| path.starts_with(&format!("networks.{n}."))) {
                " (a solana-magic network: restart to change it)"
            } else {
                ""
            };
            out.push(format!("{path}{why}"));
        }
    }
    if topology {
        out.push("networks (adding, removing, renaming or reordering a network)".into());
    }
    out
}

/// Whether `slot` is `p` (same provider as far as connections and health go).
fn same_provider(slot: &Provider, p: &Provider) -> bool {
    slot.name == p.name && slot.url == p.url && slot.ws_url == p.ws_url
}

/// The config the node runs after reloading to `new`: `new` with each network's providers laid out by slot
/// over `running`'s (removed ones kept, `retired`). Refused when a network would need more slots than a
/// process has.
pub fn roster(running: &Config, mut new: Config) -> Result<Config, String> {
    for (r, n) in running.networks.iter().zip(new.networks.iter_mut()) {
        if n.kind == NetworkKind::SolanaMagic {
            continue;
        }
        let mut slots: Vec<Provider> = r
            .providers
            .iter()
            .map(|p| Provider {
                retired: true,
                ..p.clone()
            })
            .collect();
        let mut claimed = vec![false; slots.len()];
        for p in &n.providers {
            match (0..slots.len()).find(|&j| !claimed[j] && same_provider(&slots[j], p)) {
                Some(j) => {
                    slots[j] = p.clone();
                    claimed[j] = true;
                }
                None => {
                    slots.push(p.clone());
                    claimed.push(true);
                }
            }
        }
        if slots.len() > ProviderId::MAX {
            return Err(format!(
                "networks.{}: {} provider slots needed (removed providers keep theirs until a restart); a process has {}",
                n.name,
                slots.len(),
                ProviderId::MAX
            ));
        }
        n.providers = slots;
    }
    Ok(new)
}

/// One line per provider and key change between two rosters, for the log and the reload's answer.
pub fn summary(running: &Config, next: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for (r, n) in running.networks.iter().zip(&next.networks) {
        let active = |c: &Network| -> Vec<String> {
            c.providers
                .iter()
                .filter(|p| !p.retired)
                .map(|p| format!("{} {}", p.name, p.url))
                .collect()
        };
        let (was, now) = (active(r), active(n));
        let name = |s: &String| s.split(' ').next().unwrap_or_default().to_string();
        let added: Vec<String> = now.iter().filter(|p| !was.contains(p)).map(name).collect();
        let removed: Vec<String> = was.iter().filter(|p| !now.contains(p)).map(name).collect();
        if !added.is_empty() {
            out.push(format!("networks.{}: provider(s) added: {}", n.name, added.join(", ")));
        }
        if !removed.is_empty() {
            out.push(format!(
                "networks.{}: provider(s) removed: {}",
                n.name,
                removed.join(", ")
            ));
        }
    }
    // By name, in hash maps: a node may hold ten thousand keys.
    let was: std::collections::HashMap<&str, &super::Key> = running.keys.iter().map(|k| (k.name.as_str(), k)).collect();
    let now: std::collections::HashSet<&str> = next.keys.iter().map(|k| k.name.as_str()).collect();
    let added: Vec<&String> = next
        .keys
        .iter()
        .map(|k| &k.name)
        .filter(|n| !was.contains_key(n.as_str()))
        .collect();
    let removed: Vec<&String> = running
        .keys
        .iter()
        .map(|k| &k.name)
        .filter(|n| !now.contains(n.as_str()))
        .collect();
    let changed: Vec<&String> = next
        .keys
        .iter()
        .filter(|k| {
            was.get(k.name.as_str())
                .is_some_and(|o| format!("{o:?}") != format!("{k:?}"))
        })
        .map(|k| &k.name)
        .collect();
    for (what, list) in [("added", added), ("removed", removed), ("changed", changed)] {
        if !list.is_empty() {
            // Names only (never secrets), at most 20 listed.
            let shown: Vec<&str> = list.iter().take(20).map(|s| s.as_str()).collect();
            let more = list.len().saturating_sub(shown.len());
            let tail = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            out.push(format!("keys {what}: {}{tail}", shown.join(", ")));
        }
    }
    // Everything else that changed, field by field (providers and keys are summed up above).
    let skip = |path: &str| {
        path.starts_with("keys.")
            || running.networks.iter().chain(&next.networks).any(|n| {
                let added_or_removed = |p: &super::Provider| {
                    path.starts_with(&format!("networks.{}.providers.{}.", n.name, p.name))
                        && !(r_has(running, &n.name, &p.name) && r_has(next, &n.name, &p.name))
                };
                n.providers.iter().any(added_or_removed)
            })
    };
    let bare = |c: &Config| {
        let mut c = c.clone();
        for n in &mut c.networks {
            n.providers.retain(|p| !p.retired);
        }
        super::diff::flatten(&c)
    };
    for (path, line) in super::diff::differences(&bare(running), &bare(next)) {
        if !skip(&path) {
            out.push(line);
        }
    }
    let secrets = running.secrets.changed(&next.secrets);
    if !secrets.is_empty() {
        out.push(format!("secrets changed (names only): {}", secrets.join(", ")));
    }
    out
}

/// Whether `c` has an active provider `provider` in network `network`.
fn r_has(c: &Config, network: &str, provider: &str) -> bool {
    c.networks
        .iter()
        .any(|n| n.name == network && n.providers.iter().any(|p| p.name == provider && !p.retired))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(providers: &[(&str, &str)], extra: &str) -> Config {
        let mut text = String::from("[server]\nlisten = \"127.0.0.1:1\"\n[[networks]]\nname = \"a\"\nkind = \"evm\"\n");
        for (name, url) in providers {
            text.push_str(&format!(
                "  [[networks.providers]]\n  name = \"{name}\"\n  url = \"{url}\"\n"
            ));
        }
        text.push_str(extra);
        Config::from_toml_with(&text, |_| None).unwrap()
    }

    fn slots(c: &Config) -> Vec<(String, bool)> {
        c.networks[0]
            .providers
            .iter()
            .map(|p| (p.name.clone(), p.retired))
            .collect()
    }

    #[test]
    fn providers_keep_their_slots_and_removed_ones_retire() {
        let running = config(&[("p1", "http://127.0.0.1:2"), ("p2", "http://127.0.0.1:3")], "");
        let new = config(&[("p3", "http://127.0.0.1:4"), ("p1", "http://127.0.0.1:2")], "");
        let next = roster(&running, new).unwrap();
        assert_eq!(
            slots(&next),
            [("p1".into(), false), ("p2".into(), true), ("p3".into(), false)]
        );
        // p2 back at the same URL gets its old slot again.
        let back = config(&[("p2", "http://127.0.0.1:3")], "");
        let again = roster(&next, back).unwrap();
        assert_eq!(
            slots(&again),
            [("p1".into(), true), ("p2".into(), false), ("p3".into(), true)]
        );
        assert_eq!(
            summary(&next, &again),
            [
                "networks.a: provider(s) added: p2",
                "networks.a: provider(s) removed: p1, p3"
            ]
        );
    }

    #[test]
    fn a_provider_at_a_new_url_is_a_new_slot() {
        let running = config(&[("p1", "http://127.0.0.1:2")], "");
        let new = config(&[("p1", "http://127.0.0.1:9")], "");
        let next = roster(&running, new).unwrap();
        assert_eq!(slots(&next), [("p1".into(), true), ("p1".into(), false)]);
        assert_eq!(next.networks[0].providers[1].url, "http://127.0.0.1:9");
    }

    #[test]
    fn slots_run_out_at_the_process_limit() {
        let mut running = config(&[("p0", "http://127.0.0.1:2")], "");
        for i in 1..ProviderId::MAX {
            let url = format!("http://127.0.0.1:{}", 100 + i);
            let name = format!("p{i}");
            running = roster(&running, config(&[(name.as_str(), url.as_str())], "")).unwrap();
        }
        let err = roster(&running, config(&[("late", "http://127.0.0.1:9999")], "")).unwrap_err();
        assert!(err.starts_with("networks.a:") && err.contains("restart"), "{err}");
    }

    #[test]
    fn what_needs_a_restart_is_named() {
        let running = config(&[("p1", "http://127.0.0.1:2")], "");
        assert!(restart_needed(&running, &running.clone()).is_empty());
        let weights = config(
            &[("p1", "http://127.0.0.1:2"), ("p2", "http://127.0.0.1:3")],
            "[policy.retry]\nmax_attempts = 5\n[limits]\nmax_batch = 10\n",
        );
        assert!(
            restart_needed(&running, &weights).is_empty(),
            "{:?}",
            restart_needed(&running, &weights)
        );
        let mut moved = running.clone();
        moved.server.listen = "127.0.0.1:7".into();
        moved.networks[0].chain_id = Some(5);
        moved.limits.upstream_max_idle += 1;
        moved.server.shards = 3;
        assert_eq!(
            restart_needed(&running, &moved),
            [
                "limits.upstream_max_idle",
                "networks.a.chain_id",
                "server.listen",
                "server.shards",
            ]
        );
        let mut renamed = running.clone();
        renamed.networks[0].name = "b".into();
        assert_eq!(
            restart_needed(&running, &renamed),
            ["networks (adding, removing, renaming or reordering a network)"]
        );
    }
}
