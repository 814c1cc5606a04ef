//! The status page's one-word verdict per provider, computed server-side so `/status`, `prism status` and
//! the page agree: green only when the breaker is closed and the last minute was clean and not slow next to
//! its peers; amber when it serves but something is off; red when routing leaves it out.

use super::snapshot::Figures;

/// Below this success ratio over the last minute a serving provider is amber.
pub const MIN_SUCCESS: f64 = 0.99;
/// A p99 this many times the median p99 of the network's other providers is amber...
pub const SLOW_FACTOR: f64 = 3.0;
/// ...when it is also above this floor, so loopback-fast microsecond noise never trips it.
pub const SLOW_FLOOR_US: u64 = 25_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Badge {
    Green,
    Amber,
    Red,
}

impl Badge {
    pub fn name(self) -> &'static str {
        match self {
            Badge::Green => "green",
            Badge::Amber => "amber",
            Badge::Red => "red",
        }
    }
}

/// The badge and why. `state` is `NetworkLive::describe`; `minute` the provider's last-minute figures;
/// `peer_p99_us` the last-minute p99 of the network's other providers that had calls.
pub fn badge(state: &str, minute: &Figures, peer_p99_us: &[u64]) -> (Badge, String) {
    match state {
        "closed" => {}
        "parked" => return (Badge::Amber, "rate-limited by the provider (parked)".into()),
        "unverified" => return (Badge::Amber, "chain id not confirmed yet".into()),
        "open" => return (Badge::Red, "breaker open".into()),
        "half-open" => return (Badge::Red, "breaker half-open: one probe decides".into()),
        "open-drift" => return (Badge::Red, "excluded: head lags the pool".into()),
        "outlier" => return (Badge::Red, "excluded: implausible head".into()),
        "stalled" => return (Badge::Red, "excluded: slot stalled".into()),
        "wrong-chain" => return (Badge::Red, "excluded: wrong chain".into()),
        "cordoned" => return (Badge::Red, "cordoned by an operator".into()),
        other => return (Badge::Red, format!("not serving: {other}")),
    }
    if minute.calls == 0 {
        return (Badge::Green, "closed; no calls over 1 min".into());
    }
    let success = 1.0 - minute.error_rate();
    if success < MIN_SUCCESS {
        return (
            Badge::Amber,
            format!(
                "success {:.1} % over 1 min ({} of {} failed)",
                success * 100.0,
                minute.failures,
                minute.calls
            ),
        );
    }
    if let Some(median) = median(peer_p99_us) {
        let p99 = minute.p99_us;
        if p99 > SLOW_FLOOR_US && p99 as f64 > SLOW_FACTOR * median as f64 {
            return (
                Badge::Amber,
                format!(
                    "p99 {:.1} ms over 1 min, {:.1}x the median of its peers ({:.1} ms)",
                    p99 as f64 / 1000.0,
                    p99 as f64 / median.max(1) as f64,
                    median as f64 / 1000.0
                ),
            );
        }
    }
    (
        Badge::Green,
        format!("healthy: success {:.1} % over 1 min", success * 100.0),
    )
}

/// The median (the lower one of an even count); `None` when empty.
fn median(values: &[u64]) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    Some(v[(v.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(calls: u64, failures: u64, p99_us: u64) -> Figures {
        Figures {
            p50_us: p99_us / 2,
            p99_us,
            p95_us: p99_us,
            calls,
            failures,
            probes: 0,
        }
    }

    #[test]
    fn green_only_when_closed_clean_and_not_slow() {
        let (b, why) = badge("closed", &minute(1000, 5, 2_000), &[2_000, 3_000]);
        assert_eq!(b, Badge::Green, "{why}");
        assert_eq!(
            badge("closed", &minute(0, 0, 0), &[]).0,
            Badge::Green,
            "idle is not a fault"
        );
    }

    #[test]
    fn failures_over_one_percent_make_a_closed_provider_amber_with_the_figure() {
        let (b, why) = badge("closed", &minute(200, 100, 1_000), &[1_000]);
        assert_eq!(b, Badge::Amber);
        assert!(why.contains("success 50.0 % over 1 min"), "{why}");
        // 99.0 % exactly is still green; just below is not.
        assert_eq!(badge("closed", &minute(1000, 10, 1_000), &[]).0, Badge::Green);
        assert_eq!(badge("closed", &minute(1000, 11, 1_000), &[]).0, Badge::Amber);
    }

    #[test]
    fn slow_next_to_its_peers_is_amber_but_only_above_the_floor() {
        // 3.5x the peers' median, above the floor.
        let (b, why) = badge("closed", &minute(100, 0, 140_000), &[40_000, 30_000, 50_000]);
        assert_eq!(b, Badge::Amber, "{why}");
        assert!(why.contains("median of its peers (40.0 ms)"), "{why}");
        // Exactly 3x is not far above.
        assert_eq!(badge("closed", &minute(100, 0, 120_000), &[40_000]).0, Badge::Green);
        // 20x the peers, but microseconds: noise.
        assert_eq!(badge("closed", &minute(100, 0, 4_000), &[200]).0, Badge::Green);
        // No peer with calls: nothing to compare with.
        assert_eq!(badge("closed", &minute(100, 0, 900_000), &[]).0, Badge::Green);
    }

    #[test]
    fn open_or_excluded_is_red_parked_is_amber() {
        for s in ["open", "half-open", "open-drift", "outlier", "stalled", "wrong-chain"] {
            assert_eq!(badge(s, &minute(100, 0, 1_000), &[]).0, Badge::Red, "{s}");
        }
        assert_eq!(badge("parked", &minute(100, 0, 1_000), &[]).0, Badge::Amber);
        assert_eq!(badge("unverified", &minute(0, 0, 0), &[]).0, Badge::Amber);
    }
}
