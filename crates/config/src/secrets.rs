//! Secrets in the config: provider credentials (`[networks.providers.auth]`: extra headers, a bearer token,
//! basic auth, each from the environment or a file), the [`Secret`] type that never prints its value, and
//! [`Fingerprints`] of every secret read, so a reload can say which ones changed by name only.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sha2::Digest;

use super::ConfigError;

/// A value that never appears in `{:?}` output (logs, panics, errors): `***` is shown instead.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

/// Serialized (for `config::diff`) as a short fingerprint: a change shows, the value never does.
impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let digest = sha2::Sha256::digest(self.0.as_bytes());
        s.serialize_str(&format!(
            "secret:{:02x}{:02x}{:02x}{:02x}",
            digest[0], digest[1], digest[2], digest[3]
        ))
    }
}

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The value itself: only to put it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

/// `[networks.providers.auth]`: what a provider needs besides its URL. Values may be `${NAME}` (from the
/// environment or `env_file`) or come from files (`*_file`, read at start-up and on every reload; a
/// trailing newline is dropped; relative paths start at the config file's folder).
#[derive(Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderAuth {
    /// Extra request headers, name to value (`"x-api-key" = "${KEY}"`).
    pub headers: BTreeMap<String, Secret>,
    /// Extra request headers whose values are read from files, name to path.
    pub header_files: BTreeMap<String, String>,
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer: Option<Secret>,
    pub bearer_file: Option<String>,
    /// HTTP basic auth: `Authorization: Basic base64(user:password)`.
    pub basic_user: Option<String>,
    pub basic_password: Option<Secret>,
    pub basic_password_file: Option<String>,
    /// Not a config key: the header lines sent, files read (set when the config is read).
    #[serde(skip)]
    pub resolved: Vec<(String, Secret)>,
}

/// Names only: header names, the basic-auth user and which files are read, never a value.
impl std::fmt::Debug for ProviderAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderAuth")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("header_files", &self.header_files)
            .field("bearer", &self.bearer.is_some())
            .field("bearer_file", &self.bearer_file)
            .field("basic_user", &self.basic_user)
            .field("basic_password", &self.basic_password.is_some())
            .field("basic_password_file", &self.basic_password_file)
            .finish()
    }
}

/// Headers Prism writes itself: a provider's `auth.headers` may not set them.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "upgrade",
    "accept",
    "user-agent",
    "te",
    "trailer",
    "expect",
];

/// How absent secrets are treated while reading: `serve` and reloads refuse them; `prism check` puts a
/// placeholder in and names them.
pub(crate) struct SecretReader<'a> {
    pub base: Option<&'a Path>,
    pub lenient: bool,
    pub missing: Vec<String>,
    pub fingerprints: Fingerprints,
}

impl SecretReader<'_> {
    /// A secret file's contents without the trailing newline; in lenient mode an unreadable file is noted
    /// and read as a placeholder.
    pub fn file(&mut self, field: &str, path: &str) -> Result<Secret, ConfigError> {
        let full = match self.base {
            Some(base) if Path::new(path).is_relative() => base.join(path),
            _ => Path::new(path).to_path_buf(),
        };
        match std::fs::read_to_string(&full) {
            Ok(text) => {
                let value = text.trim_end_matches(['\n', '\r']).to_string();
                self.fingerprints.note(&format!("file {}", full.display()), &value);
                Ok(Secret(value))
            }
            Err(_) if self.lenient => {
                self.missing.push(format!("file {} ({field})", full.display()));
                Ok(Secret("unset-file-placeholder".into()))
            }
            Err(e) => Err(ConfigError::invalid(
                field,
                format!("cannot read {}: {e}", full.display()),
            )),
        }
    }
}

impl ProviderAuth {
    pub fn is_empty(&self) -> bool {
        *self == ProviderAuth::default()
    }

    /// The header lines to send, in order: set by [`ProviderAuth::resolve`].
    pub fn header_lines(&self) -> &[(String, Secret)] {
        &self.resolved
    }

    /// Checks names and values and reads the files: `at` is the provider's field path. The steps run in
    /// this order, so the first problem in a file is the one named: the headers, the Authorization line
    /// (bearer or basic), then every line's name and value.
    pub(crate) fn resolve(&mut self, at: &str, reader: &mut SecretReader<'_>) -> Result<(), ConfigError> {
        let mut lines = self.named_headers(at, reader)?;
        if let Some(a) = self.authorization(at, reader)? {
            if lines.iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization")) {
                return Err(ConfigError::invalid(
                    format!("{at}.auth.headers"),
                    "sets Authorization, and so does auth.bearer / auth.basic_user: give one",
                ));
            }
            lines.push(("Authorization".into(), a));
        }
        check_header_lines(at, &lines)?;
        self.resolved = lines;
        Ok(())
    }

    /// `auth.headers`, then `auth.header_files` read (a name may be given in one of them only).
    fn named_headers(&self, at: &str, reader: &mut SecretReader<'_>) -> Result<Vec<(String, Secret)>, ConfigError> {
        let mut lines: Vec<(String, Secret)> = Vec::new();
        for (name, value) in &self.headers {
            lines.push((name.clone(), value.clone()));
        }
        for (name, path) in &self.header_files {
            if self.headers.contains_key(name) {
                return Err(ConfigError::invalid(
                    format!("{at}.auth.header_files.{name}"),
                    "also set in auth.headers: give it in one place",
                ));
            }
            lines.push((
                name.clone(),
                reader.file(&format!("{at}.auth.header_files.{name}"), path)?,
            ));
        }
        Ok(lines)
    }

    /// The `Authorization` value the bearer token or basic auth makes, if either is set (not both).
    fn authorization(&self, at: &str, reader: &mut SecretReader<'_>) -> Result<Option<Secret>, ConfigError> {
        let bearer = match (&self.bearer, &self.bearer_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    format!("{at}.auth.bearer_file"),
                    "give auth.bearer or auth.bearer_file, not both",
                ))
            }
            (Some(t), None) => Some(t.clone()),
            (None, Some(path)) => Some(reader.file(&format!("{at}.auth.bearer_file"), path)?),
            (None, None) => None,
        };
        let basic = self.basic(at, reader)?;
        Ok(match (bearer, basic) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    format!("{at}.auth"),
                    "a bearer token and basic auth both set Authorization: give one",
                ))
            }
            (Some(t), None) => Some(Secret(format!("Bearer {}", t.expose()))),
            (None, b) => b,
        })
    }

    /// `Basic base64(user:password)` from `basic_user` and the password (given, or read from its file).
    fn basic(&self, at: &str, reader: &mut SecretReader<'_>) -> Result<Option<Secret>, ConfigError> {
        let password = match (&self.basic_password, &self.basic_password_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    format!("{at}.auth.basic_password_file"),
                    "give auth.basic_password or auth.basic_password_file, not both",
                ))
            }
            (Some(p), None) => Some(p.clone()),
            (None, Some(path)) => Some(reader.file(&format!("{at}.auth.basic_password_file"), path)?),
            (None, None) => None,
        };
        match (&self.basic_user, password) {
            (Some(user), password) => {
                if user.contains(':') {
                    return Err(ConfigError::invalid(
                        format!("{at}.auth.basic_user"),
                        "must not contain ':' (basic auth joins user and password with it)",
                    ));
                }
                let pair = format!("{user}:{}", password.as_ref().map_or("", |p| p.expose()));
                use base64::Engine as _;
                Ok(Some(Secret(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                ))))
            }
            (None, Some(_)) => Err(ConfigError::invalid(
                format!("{at}.auth.basic_password"),
                "needs auth.basic_user",
            )),
            (None, None) => Ok(None),
        }
    }
}

/// Every header line a provider's auth makes is one Prism may send: a valid name, not one Prism writes
/// itself, a value without line breaks, and no name twice (names differing only in case would be sent
/// twice).
fn check_header_lines(at: &str, lines: &[(String, Secret)]) -> Result<(), ConfigError> {
    for (name, value) in lines {
        let field = format!("{at}.auth.headers.{name}");
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(ConfigError::invalid(field, "is not a valid HTTP header name"));
        }
        let lower = name.to_ascii_lowercase();
        if RESERVED.contains(&lower.as_str()) || lower.starts_with("sec-websocket-") {
            return Err(ConfigError::invalid(field, "is a header Prism writes itself"));
        }
        // A value is data: a CR or LF in it would start another header (or a body).
        if value.expose().bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(ConfigError::invalid(
                field,
                "the value holds a line break or NUL, which no header value may",
            ));
        }
    }
    // Two names differing only in case would be sent twice.
    for (i, (a, _)) in lines.iter().enumerate() {
        if lines[..i].iter().any(|(b, _)| b.eq_ignore_ascii_case(a)) {
            return Err(ConfigError::invalid(format!("{at}.auth.headers.{a}"), "is set twice"));
        }
    }
    Ok(())
}

/// `[admin]`: a token every mutating admin endpoint (`POST /reload`, cordon, uncordon) requires as
/// `Authorization: Bearer <token>`. Without one they answer only loopback peers. Re-read on every reload.
#[derive(Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminAccess {
    pub token: Option<Secret>,
    pub token_file: Option<String>,
    /// Not a config key: the token in force (the file read).
    #[serde(skip)]
    pub resolved: Option<Secret>,
}

impl std::fmt::Debug for AdminAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminAccess")
            .field("token", &self.token.is_some())
            .field("token_file", &self.token_file)
            .finish()
    }
}

impl AdminAccess {
    pub(crate) fn resolve(&mut self, reader: &mut SecretReader<'_>) -> Result<(), ConfigError> {
        self.resolved = match (&self.token, &self.token_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    "admin.token_file",
                    "give admin.token or admin.token_file, not both",
                ))
            }
            (Some(t), None) => Some(t.clone()),
            (None, Some(path)) => Some(reader.file("admin.token_file", path)?),
            (None, None) => None,
        };
        if self.resolved.as_ref().is_some_and(|t| t.expose().len() < 16) {
            return Err(ConfigError::invalid("admin.token", "must be at least 16 characters"));
        }
        Ok(())
    }

    /// Whether `presented` (the request's bearer token) is the token, compared in constant time.
    pub fn accepts(&self, presented: Option<&[u8]>) -> bool {
        let (Some(want), Some(got)) = (&self.resolved, presented) else {
            return false;
        };
        let want = want.expose().as_bytes();
        want.len() == got.len() && want.iter().zip(got).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// A short fingerprint of each secret read, by name (`env NAME`, `file PATH`): enough to tell that one
/// changed, never enough to show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprints(BTreeMap<String, [u8; 8]>);

impl Fingerprints {
    pub fn note(&mut self, name: &str, value: &str) {
        let digest = sha2::Sha256::digest(value.as_bytes());
        let mut short = [0u8; 8];
        short.copy_from_slice(&digest[..8]);
        self.0.insert(name.to_string(), short);
    }

    /// The names whose value differs in `next`, or that only one of the two has.
    pub fn changed(&self, next: &Fingerprints) -> Vec<String> {
        let mut out: Vec<String> = next
            .0
            .iter()
            .filter(|(k, v)| self.0.get(*k) != Some(v))
            .map(|(k, _)| k.clone())
            .collect();
        out.extend(self.0.keys().filter(|k| !next.0.contains_key(*k)).cloned());
        out.sort();
        out
    }
}

/// `NAME=value` lines of an env file (systemd's `EnvironmentFile` and Docker's `--env-file` syntax: `#`
/// comments, blank lines, an optional `export `, values optionally in matching quotes).
pub fn parse_env_file(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("line {}: expected NAME=value", n + 1));
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("line {}: {name:?} is not a variable name", n + 1));
        }
        let value = value.trim();
        let value = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|(a, b)| value.strip_prefix(*a).and_then(|v| v.strip_suffix(*b)))
            .unwrap_or(value);
        out.insert(name.to_string(), value.to_string());
    }
    Ok(out)
}
