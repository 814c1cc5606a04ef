//! Why an upstream attempt gave no answer, in a bounded set of reasons ([`Reason`]: a one-byte enum, no
//! string or allocation per failure), and each provider's memory of them ([`CauseLog`]: the last reason and
//! when, how often each reason came in the last minute, and a limiter so a storm of failures is one log
//! line every few seconds). The reason is set where the failure is classified (`transport`,
//! `core::judge`, the prober); `/status`, the page, `/metrics` and the log show it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why an attempt failed (or was throttled). Stable snake_case names are metric labels and `/status` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Reason {
    /// HTTP 401: the provider refused our credentials.
    Http401 = 0,
    /// HTTP 403: forbidden (a wrong key, a key without this network, an IP or origin lock).
    Http403,
    /// HTTP 404: nothing at the URL's path (a wrong path or key segment).
    Http404,
    /// Any other 4xx.
    Http4xx,
    /// HTTP 429: rate limited.
    Http429,
    /// HTTP 5xx.
    Http5xx,
    /// A status no other reason names (1xx, 3xx).
    HttpOther,
    Timeout,
    /// The connection broke before a whole answer arrived.
    Reset,
    /// Nothing listens at the provider's address.
    Refused,
    /// Another connect error (unreachable network or host).
    Connect,
    /// The host name did not resolve.
    Dns,
    /// The TLS handshake failed.
    Tls,
    /// Not HTTP/1.1 or not JSON-RPC (an HTML page under 200, truncated or broken framing).
    Malformed,
    /// A JSON-RPC answer to another call (another id).
    WrongId,
    /// An answer over `limits.max_response_bytes` where none can be that large.
    TooLarge,
    /// `eth_chainId` answered another chain than `chain_id`.
    WrongChain,
    /// A head the chain cannot be at (beyond 2^53, or not a number).
    BadHead,
    /// A JSON-RPC error the classifier blames on the provider (internal error, unhealthy node).
    RpcError,
    /// A JSON-RPC error saying the provider rate limits us (under HTTP 200).
    Throttled,
    /// Out of quota, billing, plan exhausted.
    Quota,
    /// A verified read (`core::call::verify`): its answer disagreed with a settled quorum of the others.
    Outvoted,
}

impl Reason {
    pub const COUNT: usize = 22;
    pub const ALL: [Reason; Reason::COUNT] = [
        Reason::Http401,
        Reason::Http403,
        Reason::Http404,
        Reason::Http4xx,
        Reason::Http429,
        Reason::Http5xx,
        Reason::HttpOther,
        Reason::Timeout,
        Reason::Reset,
        Reason::Refused,
        Reason::Connect,
        Reason::Dns,
        Reason::Tls,
        Reason::Malformed,
        Reason::WrongId,
        Reason::TooLarge,
        Reason::WrongChain,
        Reason::BadHead,
        Reason::RpcError,
        Reason::Throttled,
        Reason::Quota,
        Reason::Outvoted,
    ];

    /// The label value: `http_401`, `timeout`, ...
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Http401 => "http_401",
            Reason::Http403 => "http_403",
            Reason::Http404 => "http_404",
            Reason::Http4xx => "http_4xx",
            Reason::Http429 => "http_429",
            Reason::Http5xx => "http_5xx",
            Reason::HttpOther => "http_other",
            Reason::Timeout => "timeout",
            Reason::Reset => "reset",
            Reason::Refused => "refused",
            Reason::Connect => "connect",
            Reason::Dns => "dns",
            Reason::Tls => "tls",
            Reason::Malformed => "malformed",
            Reason::WrongId => "wrong_id",
            Reason::TooLarge => "too_large",
            Reason::WrongChain => "wrong_chain",
            Reason::BadHead => "bad_head",
            Reason::RpcError => "rpc_error",
            Reason::Throttled => "throttled",
            Reason::Quota => "quota",
            Reason::Outvoted => "outvoted",
        }
    }

    /// The reason an HTTP status names, when the status alone is the cause (the body was no JSON-RPC answer).
    pub const fn of_status(status: u16) -> Reason {
        match status {
            401 => Reason::Http401,
            403 => Reason::Http403,
            404 => Reason::Http404,
            429 => Reason::Http429,
            500..=599 => Reason::Http5xx,
            400..=499 => Reason::Http4xx,
            _ => Reason::HttpOther,
        }
    }

    /// What an operator should do about it, where one short sentence helps.
    pub const fn hint(self) -> Option<&'static str> {
        match self {
            Reason::Http401 | Reason::Http403 => Some("check this provider's credentials"),
            Reason::Http404 => Some("check the path of this provider's URL"),
            Reason::Http429 | Reason::Throttled => Some("the provider is rate limiting this node"),
            Reason::Quota => Some("the provider's quota or plan is exhausted"),
            Reason::Refused => Some("nothing listens at the provider's address"),
            Reason::Dns => Some("the provider's host name does not resolve"),
            Reason::Tls => Some("TLS failed: check the URL's scheme and the provider's certificate"),
            Reason::WrongChain => Some("the provider serves another chain than the network's chain_id"),
            Reason::Outvoted => Some("its answers disagree with other providers at the same block"),
            _ => None,
        }
    }

    fn from_index(i: u8) -> Option<Reason> {
        Reason::ALL.get(i as usize).copied()
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who made the attempt: client traffic or Prism's own health probe. Counted apart, so a provider no client
/// call reaches shows no share of the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Client,
    /// A health probe; `half_open` when it is the breaker's single half-open probe.
    Probe {
        half_open: bool,
    },
}

impl Origin {
    pub const fn is_probe(self) -> bool {
        matches!(self, Origin::Probe { .. })
    }
    pub const fn half_open(self) -> bool {
        matches!(self, Origin::Probe { half_open: true })
    }
    pub const fn as_str(self) -> &'static str {
        match self {
            Origin::Client => "client",
            Origin::Probe { .. } => "probe",
        }
    }
}

/// Buckets of the one-minute count, and their width.
const BUCKETS: usize = 6;
const BUCKET_MS: u64 = 10_000;
/// A state-change WARN line per provider at most this often; the ones held back are counted in the next.
pub const LOG_EVERY_MS: u64 = 5_000;

/// One provider's failure memory, shared by every shard (relaxed atomics; written only when an attempt
/// fails, read by `/status`).
pub struct CauseLog {
    /// `(at_ms << 8) | (reason + 1)`; 0 = never failed. Bit 7 of the low byte: the last was a probe's.
    last: AtomicU64,
    /// Per reason, [`BUCKETS`] buckets of `(bucket number << 24) | count`.
    minute: [[AtomicU64; BUCKETS]; Reason::COUNT],
    /// The earliest time the next WARN line may be written, and how many were held back since the last.
    log_after_ms: AtomicU64,
    held: AtomicU64,
}

impl Default for CauseLog {
    fn default() -> Self {
        CauseLog {
            last: AtomicU64::new(0),
            minute: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            log_after_ms: AtomicU64::new(0),
            held: AtomicU64::new(0),
        }
    }
}

/// What `/status` shows of a provider's last failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastCause {
    pub reason: Reason,
    /// Process-clock ms (`telemetry::clock`).
    pub at_ms: u64,
    pub probe: bool,
    /// How often this reason came in the last minute.
    pub last_minute: u64,
}

impl CauseLog {
    /// Notes a failure for `reason` at `now_ms`. Returns whether it is news: another reason than the last
    /// one, or the first in a minute (what the WARN line is for).
    pub fn record(&self, reason: Reason, source: Origin, now_ms: u64) -> bool {
        let low = (reason as u64 + 1) | if source.is_probe() { 0x80 } else { 0 };
        let before = self.last.swap((now_ms << 8) | low, Ordering::Relaxed);
        let bucket = now_ms / BUCKET_MS;
        let cell = &self.minute[reason as usize][(bucket % BUCKETS as u64) as usize];
        let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(if v >> 24 == bucket {
                v + u64::from(v & 0xff_ffff < 0xff_ffff)
            } else {
                (bucket << 24) | 1
            })
        });
        let (was, at) = ((before & 0x7f) as u8, before >> 8);
        before == 0 || was != reason as u8 + 1 || now_ms.saturating_sub(at) >= 60_000
    }

    /// How often `reason` came in the last minute (the current bucket and the five before it).
    pub fn last_minute(&self, reason: Reason, now_ms: u64) -> u64 {
        let now = now_ms / BUCKET_MS;
        self.minute[reason as usize]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .filter(|v| now.saturating_sub(v >> 24) < BUCKETS as u64 && v >> 24 <= now)
            .map(|v| v & 0xff_ffff)
            .sum()
    }

    /// Every reason seen in the last minute, with its count.
    pub fn minute_counts(&self, now_ms: u64) -> Vec<(Reason, u64)> {
        Reason::ALL
            .iter()
            .map(|&r| (r, self.last_minute(r, now_ms)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    pub fn last(&self, now_ms: u64) -> Option<LastCause> {
        let v = self.last.load(Ordering::Relaxed);
        let reason = Reason::from_index(((v & 0x7f) as u8).checked_sub(1)?)?;
        Some(LastCause {
            reason,
            at_ms: v >> 8,
            probe: v & 0x80 != 0,
            last_minute: self.last_minute(reason, now_ms),
        })
    }

    /// Whether a WARN line may be written now (at most one per [`LOG_EVERY_MS`]); `Some(n)` carries how many
    /// were held back since the last one.
    pub fn may_log(&self, now_ms: u64) -> Option<u64> {
        let after = self.log_after_ms.load(Ordering::Relaxed);
        if now_ms >= after
            && self
                .log_after_ms
                .compare_exchange(after, now_ms + LOG_EVERY_MS, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.held.swap(0, Ordering::Relaxed));
        }
        self.held.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// Writes a provider's state change at WARN with the reason and what to do about it, at most one line per
/// [`LOG_EVERY_MS`] per provider (a storm is one line every few seconds; the next line says how many were
/// held back).
pub fn warn_change(log: &CauseLog, network: &str, provider: &str, what: &str, reason: Option<Reason>, now_ms: u64) {
    let Some(held) = log.may_log(now_ms) else {
        return;
    };
    match reason {
        Some(r) => tracing::warn!(
            network,
            provider,
            reason = r.as_str(),
            last_minute = log.last_minute(r, now_ms),
            held_back = held,
            "{what}: {}{}",
            r.as_str(),
            r.hint().map(|h| format!(" ({h})")).unwrap_or_default()
        ),
        None => tracing::warn!(network, provider, held_back = held, "{what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_reason_its_time_and_the_minute_count_are_kept() {
        let log = CauseLog::default();
        assert_eq!(log.last(1_000), None);
        assert!(log.record(Reason::Http401, Origin::Probe { half_open: false }, 1_000));
        assert!(
            !log.record(Reason::Http401, Origin::Client, 2_000),
            "the same reason again is no news"
        );
        assert!(log.record(Reason::Timeout, Origin::Client, 3_000), "another reason is");
        for t in 0..5 {
            log.record(Reason::Http401, Origin::Probe { half_open: false }, 15_000 + t);
        }
        let last = log.last(20_000).unwrap();
        assert_eq!(
            (last.reason, last.at_ms, last.probe, last.last_minute),
            (Reason::Http401, 15_004, true, 7)
        );
        assert_eq!(log.minute_counts(20_000), [(Reason::Http401, 7), (Reason::Timeout, 1)]);
        // A minute later the early ones have left the window.
        assert_eq!(log.last_minute(Reason::Http401, 65_000), 5);
        assert_eq!(log.last_minute(Reason::Http401, 200_000), 0);
        assert!(
            log.record(Reason::Http401, Origin::Client, 200_000),
            "the first in a minute is news again"
        );
    }

    #[test]
    fn a_storm_is_one_line_every_few_seconds() {
        let log = CauseLog::default();
        let lines: Vec<(u64, u64)> = (0..20_000u64)
            .step_by(10)
            .filter_map(|t| log.may_log(t).map(|held| (t, held)))
            .collect();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[0], (0, 0));
        assert_eq!(lines[1], (LOG_EVERY_MS, LOG_EVERY_MS / 10 - 1));
    }

    #[test]
    fn statuses_name_their_reason() {
        assert_eq!(Reason::of_status(401).as_str(), "http_401");
        assert_eq!(Reason::of_status(502), Reason::Http5xx);
        assert_eq!(Reason::of_status(418), Reason::Http4xx);
        assert_eq!(Reason::of_status(302), Reason::HttpOther);
        assert_eq!(Reason::Http403.hint(), Some("check this provider's credentials"));
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }
}
