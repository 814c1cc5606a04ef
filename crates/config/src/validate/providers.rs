//! One network's providers, and a solana-magic network's own rules (`validate_networks` walks the networks
//! and calls these); every error names the field (`networks[i].providers[j].url`).

use super::R;
use crate::endpoint::{Endpoint, Scheme};
use crate::{ConfigError, Network, NetworkKind, Provider, ProviderRole, SyncSubmit};

/// One provider's own settings (`pat` names it: `networks[i].providers[j]`).
pub(super) fn provider(n: &Network, pat: &str, p: &Provider) -> R {
    let ep = Endpoint::parse(&p.url).map_err(|m| ConfigError::invalid(format!("{pat}.url"), m))?;
    if !matches!(ep.scheme, Scheme::Http | Scheme::Https) {
        return Err(ConfigError::invalid(
            format!("{pat}.url"),
            "must be an http:// or https:// URL",
        ));
    }
    if let Some(ws) = &p.ws_url {
        let ep = Endpoint::parse(ws).map_err(|m| ConfigError::invalid(format!("{pat}.ws_url"), m))?;
        if !matches!(ep.scheme, Scheme::Ws | Scheme::Wss) {
            return Err(ConfigError::invalid(
                format!("{pat}.ws_url"),
                "must be a ws:// or wss:// URL",
            ));
        }
    }
    if !(p.weight.is_finite() && p.weight > 0.0) {
        return Err(ConfigError::invalid(format!("{pat}.weight"), "must be a number > 0"));
    }
    for (key, v) in [
        ("max_logs_range", p.max_logs_range),
        ("max_logs_results", p.max_logs_results),
    ] {
        if v == Some(0) {
            return Err(ConfigError::invalid(
                format!("{pat}.{key}"),
                "must be greater than 0 when set",
            ));
        }
    }
    if p.quota_rps == Some(0) {
        return Err(ConfigError::invalid(
            format!("{pat}.quota_rps"),
            "must be greater than 0 when set",
        ));
    }
    if p.floor_block > 0 && n.kind == NetworkKind::SolanaMagic {
        return Err(ConfigError::invalid(
            format!("{pat}.floor_block"),
            "only applies to evm networks (a block height; Solana counts slots)",
        ));
    }
    if let Some(c) = &p.credits {
        if c.default == 0 {
            return Err(ConfigError::invalid(
                format!("{pat}.credits.default"),
                "must be at least 1 (every call costs something)",
            ));
        }
        for (m, v) in &c.methods {
            if *v == 0 {
                return Err(ConfigError::invalid(
                    format!("{pat}.credits.methods.{m}"),
                    "must be at least 1",
                ));
            }
        }
    }
    if p.sync_submit != SyncSubmit::Auto && n.kind == NetworkKind::SolanaMagic {
        return Err(ConfigError::invalid(
            format!("{pat}.sync_submit"),
            "only applies to evm networks (eth_sendRawTransactionSync)",
        ));
    }
    if p.floor_block > 1 << 53 {
        return Err(ConfigError::invalid(
            format!("{pat}.floor_block"),
            "must be at most 2^53 (a block height)",
        ));
    }
    if n.kind == NetworkKind::SolanaMagic {
        solana_provider(pat, p)
    } else if p.role.is_some() {
        Err(ConfigError::invalid(
            format!("{pat}.role"),
            "only applies to solana-magic networks",
        ))
    } else {
        Ok(())
    }
}

/// A solana-magic network's provider: its role and what the role needs.
fn solana_provider(pat: &str, p: &Provider) -> R {
    match p.role {
        None => {
            return Err(ConfigError::invalid(
                format!("{pat}.role"),
                "is required on a solana-magic network (\"base\" or \"ephemeral\")",
            ))
        }
        Some(ProviderRole::Ephemeral) if p.identity.as_deref().unwrap_or("").is_empty() => {
            return Err(ConfigError::invalid(
                format!("{pat}.identity"),
                "is required for an ephemeral provider (the ER validator identity)",
            ))
        }
        // `check` fills unset variables with an `unset-NAME` placeholder: only `serve` can tell.
        Some(ProviderRole::Ephemeral)
            if p.identity.as_deref().is_some_and(|id| {
                !id.starts_with("unset-") && prism_wire::rpc::pubkey::Pubkey::from_base58(id).is_none()
            }) =>
        {
            return Err(ConfigError::invalid(
                format!("{pat}.identity"),
                "is not a base58 public key (32 bytes)",
            ))
        }
        _ => {}
    }
    if let Some(public) = &p.public_url {
        if p.role != Some(ProviderRole::Ephemeral) {
            return Err(ConfigError::invalid(
                format!("{pat}.public_url"),
                "only applies to role = \"ephemeral\" (the address clients reach the ER at)",
            ));
        }
        let ok = ["http://", "https://", "ws://", "wss://"]
            .iter()
            .any(|s| public.starts_with(s) && public.len() > s.len());
        if !ok {
            return Err(ConfigError::invalid(
                format!("{pat}.public_url"),
                "must be an http(s) or ws(s) URL",
            ));
        }
    }
    let listed = [
        ("base_fee", p.base_fee.is_some()),
        ("block_time_ms", p.block_time_ms.is_some()),
        ("country_code", p.country_code.is_some()),
    ];
    if let Some((key, _)) = listed.iter().find(|(_, set)| *set) {
        if p.role != Some(ProviderRole::Ephemeral) {
            return Err(ConfigError::invalid(
                format!("{pat}.{key}"),
                "only applies to role = \"ephemeral\" (what getRoutes reports for the ER)",
            ));
        }
    }
    if let Some(cc) = &p.country_code {
        if !(cc.is_empty() || cc.len() == 2 && cc.bytes().all(|b| b.is_ascii_uppercase())) {
            return Err(ConfigError::invalid(
                format!("{pat}.country_code"),
                "must be an ISO 3166-1 alpha-2 code such as \"DE\" (or empty)",
            ));
        }
    }
    Ok(())
}

/// A solana-magic network as a whole: a base layer, the delegation program, the default ER.
pub(super) fn solana_network(n: &Network, at: &str) -> R {
    if !n.providers.iter().any(|p| p.role == Some(ProviderRole::Base)) {
        return Err(ConfigError::invalid(
            format!("{at}.providers"),
            "needs at least one role = \"base\"",
        ));
    }
    let program = n
        .delegation_program
        .as_deref()
        .unwrap_or(prism_wire::rpc::pubkey::DELEGATION_PROGRAM);
    if !program.starts_with("unset-") && prism_wire::rpc::pubkey::Pubkey::from_base58(program).is_none() {
        return Err(ConfigError::invalid(
            format!("{at}.delegation_program"),
            "is not a base58 public key (32 bytes)",
        ));
    }
    if let Some(er) = &n.default_er {
        if !n
            .providers
            .iter()
            .any(|p| &p.name == er && p.role == Some(ProviderRole::Ephemeral))
        {
            return Err(ConfigError::invalid(
                format!("{at}.default_er"),
                format!("names no ephemeral provider of this network: {er:?}"),
            ));
        }
    }
    Ok(())
}
