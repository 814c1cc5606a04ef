//! Who a request is from and whether it is served: its network and key from the path and headers, the key
//! checks (known, allowed on this network, from this origin), CORS preflights, and the caller routing sees.
//! Pure functions of the request head and the generation, kept apart from the connection loop in `server.rs`.

use super::http::{Method, RequestHead};
use super::keys::{KeyEntry, KeyRing};
use super::shard::Gen;
use prism_config::{Strategy, Weights};
use prism_core::live::marks::MarkKey;
use prism_core::Caller;

/// Why a request is refused before it is served (always with the `UNAUTHORIZED` JSON-RPC code).
pub(super) struct Refusal {
    pub status: u16,
    pub message: &'static str,
    /// Whether the answer echoes the request's Origin: not when the origin itself is what is refused.
    pub echo_origin: bool,
}

/// With keys configured, every request but a preflight needs a known key that may use network `route`
/// from the request's origin.
#[inline]
pub(super) fn admit(keys: &KeyRing, key: Option<&KeyEntry>, route: usize, head: &RequestHead) -> Result<(), Refusal> {
    if keys.is_open() || head.method == Some(Method::Options) {
        return Ok(());
    }
    let Some(entry) = key else {
        return Err(Refusal {
            status: 401,
            message: "Unauthorized: missing or unknown API key",
            echo_origin: true,
        });
    };
    if !entry.may_use(route) {
        return Err(Refusal {
            status: 403,
            message: "Forbidden: this API key may not use this network",
            echo_origin: true,
        });
    }
    if !entry.origin_ok(head.origin.as_deref()) {
        return Err(Refusal {
            status: 403,
            message: "Forbidden: origin not allowed for this API key",
            echo_origin: false,
        });
    }
    Ok(())
}

/// Preflights carry no credentials but a path key; answer per that key's origin lock, or per whether any
/// key would accept this origin.
pub(super) fn preflight_allowed(keys: &KeyRing, key: Option<&KeyEntry>, origin: Option<&[u8]>) -> bool {
    match (key, origin) {
        (Some(k), o) => k.origin_ok(o),
        (None, None) => true,
        (None, Some(o)) => keys.is_open() || keys.entries().iter().any(|k| k.origin_ok(Some(o))),
    }
}

/// Who is asking, as routing cares: the key's strategy and weights, and whose high-water mark applies
/// (the session's when `x-prism-session` is sent, else the key's).
#[inline]
pub(super) fn caller(key: Option<&KeyEntry>, head: &RequestHead) -> Caller {
    Caller {
        strategy: key.map_or(Strategy::Score, |k| k.strategy),
        weights: key.map_or_else(Weights::default, |k| k.weights),
        mark: match head.session {
            Some(h) => MarkKey::Session(h),
            None => key.map_or(MarkKey::Key(0), |k| k.mark()),
        },
        providers: u64::MAX,
        floor: 0,
        verify: key.map_or(prism_core::call::verify::VerifyRule::OFF, |k| k.verify),
        key: key.map_or(0, |k| k.index as u32),
    }
}

/// `/` when one network is configured, `/{network}`, `/{network}/{key}`, or `/{key}` with one network.
/// Returns the route and the key segment, if any.
#[inline]
pub(super) fn find_route<'p>(gen: &Gen, path: &'p str) -> Option<(usize, Option<&'p str>)> {
    let routes = &gen.networks;
    let mut segments = path.trim_start_matches('/').split('/').filter(|s| !s.is_empty());
    let Some(first) = segments.next() else {
        return (routes.len() == 1).then_some((0, None));
    };
    let open = gen.keys.is_open();
    match routes.iter().position(|r| r.name() == first) {
        Some(i) if routes[i].takes_sdk_suffixes() => Some((i, segments.next().filter(|_| !open))),
        Some(i) => Some((i, segments.next_back())),
        None if routes.len() == 1 && routes[0].takes_sdk_suffixes() => Some((0, (!open).then_some(first))),
        None if routes.len() == 1 && segments.next().is_none() && !open => Some((0, Some(first))),
        None => None,
    }
}
