//! Semantic checks serde cannot express. Each error names the field as `section[index].key`.

use super::{Cluster, Config, ConfigError, NetworkKind};
use std::collections::HashSet;
use std::net::SocketAddr;

type R = Result<(), ConfigError>;

mod providers;
use providers::{provider, solana_network};

/// Providers one network may have: routing tracks them in 64-bit masks (tried, excluded, stalled).
pub const MAX_PROVIDERS: usize = prism_wire::rpc::ProviderId::MAX;

fn positive(field: &str, v: u64) -> R {
    if v == 0 {
        return Err(ConfigError::invalid(field, "must be greater than 0"));
    }
    Ok(())
}

impl Config {
    pub(crate) fn validate(&self) -> R {
        self.server
            .listen
            .parse::<SocketAddr>()
            .map_err(|e| ConfigError::invalid("server.listen", format!("not a socket address: {e}")))?;
        if let Some(admin) = &self.server.admin_listen {
            admin
                .parse::<SocketAddr>()
                .map_err(|e| ConfigError::invalid("server.admin_listen", format!("not a socket address: {e}")))?;
        }
        if let Some(ws) = self.server.ws_listen.as_deref().filter(|w| *w != "off") {
            ws.parse::<SocketAddr>().map_err(|e| {
                ConfigError::invalid("server.ws_listen", format!("not a socket address (or \"off\"): {e}"))
            })?;
        }
        if let Some(tls) = &self.server.tls {
            if tls.cert.is_empty() {
                return Err(ConfigError::invalid("server.tls.cert", "must name a PEM file"));
            }
            if tls.key.is_empty() {
                return Err(ConfigError::invalid("server.tls.key", "must name a PEM file"));
            }
        }
        if self.server.io_memory_kib < 64 {
            return Err(ConfigError::invalid("server.io_memory_kib", "must be at least 64"));
        }
        self.validate_limits()?;
        self.validate_policy()?;
        self.validate_networks()?;
        self.validate_keys()?;
        if let Some(c) = &self.cluster {
            validate_cluster(c)?;
        }
        Ok(())
    }

    fn validate_limits(&self) -> R {
        let l = &self.limits;
        for (name, v) in [
            ("limits.max_body_bytes", l.max_body_bytes as u64),
            ("limits.max_header_bytes", l.max_header_bytes as u64),
            ("limits.max_batch", l.max_batch as u64),
            ("limits.max_depth", l.max_depth as u64),
            ("limits.max_connections", l.max_connections as u64),
            ("limits.request_deadline_ms", l.request_deadline_ms),
            ("limits.idle_timeout_ms", l.idle_timeout_ms),
            ("limits.client_timeout_ms", l.client_timeout_ms),
            ("limits.drain_timeout_ms", l.drain_timeout_ms),
            ("limits.upstream_connect_timeout_ms", l.upstream_connect_timeout_ms),
            ("limits.upstream_idle_timeout_ms", l.upstream_idle_timeout_ms),
            ("limits.max_response_bytes", l.max_response_bytes as u64),
            ("limits.ws_max_queue", l.ws_max_queue as u64),
            ("limits.close_timeout_ms", l.close_timeout_ms),
            ("limits.upstream_max_connections", l.upstream_max_connections as u64),
            ("limits.record_resubscribe_per_sec", l.record_resubscribe_per_sec as u64),
            (
                "limits.solana_subscriptions_per_socket",
                l.solana_subscriptions_per_socket as u64,
            ),
            ("limits.max_answer_bytes", l.max_answer_bytes as u64),
            (
                "limits.max_subscriptions_per_connection",
                l.max_subscriptions_per_connection as u64,
            ),
            (
                "limits.max_subscriptions_per_shard",
                l.max_subscriptions_per_shard as u64,
            ),
            ("limits.sync_submit_timeout_ms", l.sync_submit_timeout_ms),
            ("limits.sync_submit_max_ms", l.sync_submit_max_ms),
            ("limits.logs_split_concurrency", l.logs_split_concurrency as u64),
        ] {
            positive(name, v)?;
        }
        if l.sync_submit_timeout_ms > l.sync_submit_max_ms {
            return Err(ConfigError::invalid(
                "limits.sync_submit_timeout_ms",
                "must not exceed limits.sync_submit_max_ms",
            ));
        }
        if l.max_header_bytes < 256 {
            return Err(ConfigError::invalid("limits.max_header_bytes", "must be at least 256"));
        }
        if l.max_subscriptions_per_shard < l.max_subscriptions_per_connection {
            return Err(ConfigError::invalid(
                "limits.max_subscriptions_per_shard",
                format!(
                    "must be at least limits.max_subscriptions_per_connection ({})",
                    l.max_subscriptions_per_connection
                ),
            ));
        }
        if l.max_body_bytes > u32::MAX as usize {
            return Err(ConfigError::invalid("limits.max_body_bytes", "must be below 4 GiB"));
        }
        Ok(())
    }

    fn validate_policy(&self) -> R {
        let r = &self.policy.retry;
        positive("policy.retry.max_attempts", r.max_attempts as u64)?;
        if r.base_delay_ms > r.max_delay_ms {
            return Err(ConfigError::invalid(
                "policy.retry.base_delay_ms",
                format!("must not exceed policy.retry.max_delay_ms ({})", r.max_delay_ms),
            ));
        }
        let h = &self.policy.hedge;
        if !(h.budget_percent.is_finite() && (0.0..=100.0).contains(&h.budget_percent)) {
            return Err(ConfigError::invalid(
                "policy.hedge.budget_percent",
                "must be a number from 0 to 100",
            ));
        }
        for (i, f) in h.families.iter().enumerate() {
            if !["light", "execute", "logs", "trace"].contains(&f.as_str()) {
                return Err(ConfigError::invalid(
                    format!("policy.hedge.families[{i}]"),
                    format!("{f:?} is not a read family: light, execute, logs or trace (submissions are never hedged)"),
                ));
            }
        }
        let b = &self.policy.breaker;
        positive("policy.breaker.failure_threshold", b.failure_threshold as u64)?;
        positive("policy.breaker.window_ms", b.window_ms)?;
        positive("policy.breaker.cooldown_ms", b.cooldown_ms)?;
        positive("policy.breaker.half_open_probes", b.half_open_probes as u64)?;
        if !(b.backoff_multiplier.is_finite() && b.backoff_multiplier >= 1.0) {
            return Err(ConfigError::invalid(
                "policy.breaker.backoff_multiplier",
                "must be a number >= 1",
            ));
        }
        if b.max_cooldown_ms < b.cooldown_ms {
            return Err(ConfigError::invalid(
                "policy.breaker.max_cooldown_ms",
                format!("must be at least policy.breaker.cooldown_ms ({})", b.cooldown_ms),
            ));
        }
        Ok(())
    }

    fn validate_networks(&self) -> R {
        if self.networks.is_empty() {
            return Err(ConfigError::invalid(
                "networks",
                "at least one [[networks]] entry is required",
            ));
        }
        let mut names = HashSet::new();
        for (i, n) in self.networks.iter().enumerate() {
            let at = format!("networks[{i}]");
            if n.name.is_empty()
                || !n
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(ConfigError::invalid(
                    format!("{at}.name"),
                    "must be non-empty and use only letters, digits, '-' and '_' (it is a URL path segment)",
                ));
            }
            if !names.insert(n.name.as_str()) {
                return Err(ConfigError::invalid(
                    format!("{at}.name"),
                    format!("duplicate network {:?}", n.name),
                ));
            }
            positive(&format!("{at}.probe_interval_ms"), n.probe_interval_ms)?;
            positive(&format!("{at}.block_time_ms"), n.block_time_ms)?;
            positive(&format!("{at}.max_slot_drift"), n.max_slot_drift)?;
            if n.providers.is_empty() {
                return Err(ConfigError::invalid(
                    format!("{at}.providers"),
                    "at least one provider is required",
                ));
            }
            if n.providers.len() > MAX_PROVIDERS {
                return Err(ConfigError::invalid(
                    format!("{at}.providers"),
                    format!(
                        "{} providers; a network may have at most {MAX_PROVIDERS} (routing keeps one bit per provider)",
                        n.providers.len()
                    ),
                ));
            }
            let mut pnames = HashSet::new();
            for (j, p) in n.providers.iter().enumerate() {
                let pat = format!("{at}.providers[{j}]");
                if p.name.is_empty() {
                    return Err(ConfigError::invalid(format!("{pat}.name"), "must not be empty"));
                }
                if !pnames.insert(p.name.as_str()) {
                    return Err(ConfigError::invalid(
                        format!("{pat}.name"),
                        format!("duplicate provider {:?}", p.name),
                    ));
                }
                provider(n, &pat, p)?;
            }
            if n.kind == NetworkKind::SolanaMagic {
                solana_network(n, &at)?;
            }
        }
        Ok(())
    }

    fn validate_keys(&self) -> R {
        let mut names = HashSet::new();
        let mut secrets = HashSet::new();
        for (i, k) in self.keys.iter().enumerate() {
            let at = format!("keys[{i}]");
            if k.name.is_empty() {
                return Err(ConfigError::invalid(format!("{at}.name"), "must not be empty"));
            }
            if !names.insert(k.name.as_str()) {
                return Err(ConfigError::invalid(
                    format!("{at}.name"),
                    format!("duplicate key name {:?}", k.name),
                ));
            }
            if k.key.is_empty() {
                return Err(ConfigError::invalid(format!("{at}.key"), "must not be empty"));
            }
            if !secrets.insert(k.key.as_str()) {
                return Err(ConfigError::invalid(
                    format!("{at}.key"),
                    "the same key value is used twice",
                ));
            }
            for (j, net) in k.networks.iter().enumerate() {
                if !self.networks.iter().any(|n| &n.name == net) {
                    return Err(ConfigError::invalid(
                        format!("{at}.networks[{j}]"),
                        format!("no network named {net:?}"),
                    ));
                }
            }
            if let Some(rate) = k.rate_per_s {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(ConfigError::invalid(format!("{at}.rate_per_s"), "must be a number > 0"));
                }
            }
            if k.burst == Some(0) {
                return Err(ConfigError::invalid(
                    format!("{at}.burst"),
                    "must be greater than 0 when set",
                ));
            }
            if !(k.quota_weight.is_finite() && k.quota_weight > 0.0 && k.quota_weight <= 1e6) {
                return Err(ConfigError::invalid(
                    format!("{at}.quota_weight"),
                    "must be a number > 0 (at most 1e6)",
                ));
            }
            if let Some(v) = &k.verify {
                if !(2..=8).contains(&v.quorum) {
                    return Err(ConfigError::invalid(
                        format!("{at}.verify.quorum"),
                        "must be between 2 and 8 (providers that must agree)",
                    ));
                }
                if v.methods.is_empty() {
                    return Err(ConfigError::invalid(
                        format!("{at}.verify.methods"),
                        "must name at least one method or family",
                    ));
                }
                if let Err((j, why)) = prism_wire::rpc::methods::verified_set(&v.methods) {
                    return Err(ConfigError::invalid(format!("{at}.verify.methods[{j}]"), why));
                }
            }
            let w = &k.weights;
            for (name, v) in [
                ("latency", w.latency),
                ("error", w.error),
                ("quota", w.quota),
                ("affinity", w.affinity),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(ConfigError::invalid(
                        format!("{at}.weights.{name}"),
                        "must be a number >= 0",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `[cluster]`: one way to find Redis, TLS settings only where TLS is used, credentials that can be sent.
/// Messages never repeat a URL's userinfo.
fn validate_cluster(c: &Cluster) -> R {
    let tls = match (&c.redis_url, c.sentinels.is_empty()) {
        (None, true) => {
            return Err(ConfigError::invalid(
                "cluster.redis_url",
                "required (or cluster.sentinels with cluster.sentinel_master)",
            ))
        }
        (Some(_), false) => {
            return Err(ConfigError::invalid(
                "cluster.sentinels",
                "give cluster.redis_url or cluster.sentinels, not both",
            ))
        }
        (Some(url), true) => validate_redis_url(c, url)?,
        (None, false) => validate_sentinels(c)?,
    };
    if c.sentinels.is_empty() {
        for (field, set) in [
            ("cluster.sentinel_master", c.sentinel_master.is_some()),
            ("cluster.sentinel_tls", c.sentinel_tls),
            ("cluster.sentinel_username", c.sentinel_username.is_some()),
            ("cluster.sentinel_password", c.sentinel_password.is_some()),
        ] {
            if set {
                return Err(ConfigError::invalid(field, "only used with cluster.sentinels"));
            }
        }
    }
    if c.username.is_some() && c.password.is_none() {
        return Err(ConfigError::invalid("cluster.username", "needs cluster.password"));
    }
    if c.sentinel_username.is_some() && c.sentinel_password.is_none() {
        return Err(ConfigError::invalid(
            "cluster.sentinel_username",
            "needs cluster.sentinel_password",
        ));
    }
    let files = [
        ("cluster.tls_ca_file", &c.tls_ca_file),
        ("cluster.tls_cert_file", &c.tls_cert_file),
        ("cluster.tls_key_file", &c.tls_key_file),
    ];
    for (field, file) in files {
        let Some(path) = file else { continue };
        if !tls {
            return Err(ConfigError::invalid(
                field,
                "needs TLS: a rediss:// cluster.redis_url (or cluster.sentinel_tls = true)",
            ));
        }
        std::fs::metadata(path).map_err(|e| ConfigError::invalid(field, format!("cannot read {path}: {e}")))?;
    }
    match (&c.tls_cert_file, &c.tls_key_file) {
        (Some(_), None) => Err(ConfigError::invalid(
            "cluster.tls_key_file",
            "needed with cluster.tls_cert_file",
        )),
        (None, Some(_)) => Err(ConfigError::invalid(
            "cluster.tls_cert_file",
            "needed with cluster.tls_key_file",
        )),
        _ => positive("cluster.ttl_ms", c.ttl_ms),
    }
}

/// Whether the URL asks for TLS.
fn validate_redis_url(c: &Cluster, url: &str) -> Result<bool, ConfigError> {
    const FIELD: &str = "cluster.redis_url";
    let (tls, rest) = if let Some(rest) = url.strip_prefix("rediss://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("redis://") {
        (false, rest)
    } else {
        return Err(ConfigError::invalid(
            FIELD,
            "must start with redis:// or rediss:// (TLS)",
        ));
    };
    if rest.contains('#') {
        // The Redis client reads `#insecure` as "skip certificate checks": never accepted here.
        return Err(ConfigError::invalid(
            FIELD,
            "a #fragment (#insecure) is not accepted: certificates are always verified; trust a private CA with cluster.tls_ca_file",
        ));
    }
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if host.is_empty() || host.starts_with(':') {
        return Err(ConfigError::invalid(FIELD, "names no host"));
    }
    if let Some(u) = userinfo {
        if c.password.is_some() && u.contains(':') {
            return Err(ConfigError::invalid(
                "cluster.password",
                "cluster.redis_url has a password too: give it in one place",
            ));
        }
        if c.username.is_some() && !u.starts_with(':') {
            return Err(ConfigError::invalid(
                "cluster.username",
                "cluster.redis_url has a user too: give it in one place",
            ));
        }
    }
    Ok(tls)
}

/// Whether the sentinels (and the master they name) are reached over TLS.
fn validate_sentinels(c: &Cluster) -> Result<bool, ConfigError> {
    for (i, s) in c.sentinels.iter().enumerate() {
        let field = format!("cluster.sentinels[{i}]");
        let Some((host, port)) = s.rsplit_once(':') else {
            return Err(ConfigError::invalid(field, "must be host:port"));
        };
        if host.is_empty() || host.contains('/') || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(ConfigError::invalid(
                field,
                "must be host:port (no scheme, a port 1-65535)",
            ));
        }
    }
    match c.sentinel_master.as_deref() {
        None => Err(ConfigError::invalid(
            "cluster.sentinel_master",
            "required with cluster.sentinels: the name in `sentinel monitor NAME ...`",
        )),
        Some(m) if m.is_empty() || m.contains(char::is_whitespace) => Err(ConfigError::invalid(
            "cluster.sentinel_master",
            "must be a master name without spaces",
        )),
        Some(_) => Ok(c.sentinel_tls),
    }
}
