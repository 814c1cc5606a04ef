//! Upstream URLs parsed once at load time into the parts the transport needs.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
    Ws,
    Wss,
}

impl Scheme {
    pub fn is_tls(self) -> bool {
        matches!(self, Scheme::Https | Scheme::Wss)
    }
    fn default_port(self) -> u16 {
        if self.is_tls() {
            443
        } else {
            80
        }
    }
}

/// `scheme://host[:port][/path][?query]`, without credentials or fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub scheme: Scheme,
    /// Host name or IP literal, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// Request target sent on the wire: path plus query, at least "/".
    pub path: String,
    /// Value of the `Host` header: host, with the port when it is not the scheme's default.
    pub host_header: String,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("not a URL: {:?}", redacted(url)))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            "ws" => Scheme::Ws,
            "wss" => Scheme::Wss,
            other => return Err(format!("unsupported scheme {other:?}")),
        };
        let rest = rest.split('#').next().unwrap_or("");
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.contains('@') {
            return Err("credentials in the URL are not supported: put them in the provider's [networks.providers.auth] (basic_user, basic_password) or the API key in the path".into());
        }
        if authority.is_empty() {
            return Err(format!("no host in {:?}", redacted(url)));
        }
        let (host, port) = split_host_port(authority)?;
        let port = port.unwrap_or_else(|| scheme.default_port());
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("invalid host in {:?}", redacted(url)));
        }
        let path = if path.is_empty() {
            "/".to_string()
        } else if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!("invalid characters in the path of {:?}", redacted(url)));
        }
        let bracketed = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let host_header = if port == scheme.default_port() {
            bracketed
        } else {
            format!("{bracketed}:{port}")
        };
        Ok(Endpoint {
            scheme,
            host,
            port,
            path,
            host_header,
        })
    }
}

/// A URL for an error message: scheme and authority only, the rest elided (paths and queries often carry
/// API keys, and config errors end up in logs).
fn redacted(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = rest[..cut].rsplit('@').next().unwrap_or("");
    let tail = if cut < rest.len() { "/…" } else { "" };
    match scheme {
        Some(s) => format!("{s}://{authority}{tail}"),
        None => format!("{authority}{tail}"),
    }
}

fn split_host_port(authority: &str) -> Result<(String, Option<u16>), String> {
    let parse_port = |p: &str| p.parse::<u16>().map_err(|_| format!("invalid port {p:?}"));
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, tail) = v6.split_once(']').ok_or("unterminated IPv6 literal")?;
        let port = match tail.strip_prefix(':') {
            Some(p) => Some(parse_port(p)?),
            None if tail.is_empty() => None,
            None => return Err(format!("unexpected {tail:?} after IPv6 literal")),
        };
        return Ok((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Ok((h.to_string(), Some(parse_port(p)?))),
        None => Ok((authority.to_string(), None)),
    }
}

impl fmt::Display for Endpoint {
    /// Scheme, host and port only: paths often carry API keys, which never reach logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Ws => "ws",
            Scheme::Wss => "wss",
        };
        write!(f, "{s}://{}", self.host_header)
    }
}
