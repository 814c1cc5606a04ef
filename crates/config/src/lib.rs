//! Typed configuration: TOML in, validated types out.
//!
//! Keys follow the reference configs (`examples/robinhood.toml`, `examples/solana-magic.toml`),
//! which are a public contract: keys may be added here, none renamed.
//! Defaults come from the seeds' policy documents. Validation names the offending field so an operator can
//! fix a file without reading source.

pub mod changes;
pub mod diff;
pub mod endpoint;
mod env;
mod model;
pub mod secrets;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod validate;

pub use endpoint::{Endpoint, Scheme};
pub use env::substitute;
pub use model::*;
pub use secrets::{ProviderAuth, Secret};

use std::path::Path;

/// Why a configuration could not be used. Every variant names where the problem is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Parse(String),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl ConfigError {
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// How a config file is read: where relative paths start, an env file given on the command line, and
/// whether absent secrets are errors (`serve`, reloads) or placeholders that are named (`prism check`).
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// The config file's folder: `env_file` and secret files are relative to it.
    pub base_dir: Option<std::path::PathBuf>,
    /// `--env-file` (`prism check`): read instead of the config's `env_file`, before the process environment.
    pub env_file: Option<std::path::PathBuf>,
    pub lenient: bool,
}

/// A config as read, with the secrets `prism check` could not find (lenient reading only).
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    /// `env NAME` or `file PATH (field)` of each secret that was absent and replaced by a placeholder.
    pub missing: Vec<String>,
}

impl Config {
    /// Reads a config file as `prism serve` and reloads do: every `${NAME}` and secret file must be there.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let reading = Reading {
            base_dir: path.parent().map(Path::to_path_buf),
            ..Reading::default()
        };
        Self::read(path, &reading).map(|l| l.config)
    }

    /// Reads, substitutes, parses and validates a config file.
    pub fn read(path: &Path, reading: &Reading) -> Result<Loaded, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, reading, &|name| std::env::var(name).ok())
    }

    /// Parses and validates config text, substituting `${ENV}` references from `env_file` (relative to
    /// the working directory) and the process environment.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Self::parse(text, &Reading::default(), &|name| std::env::var(name).ok()).map(|l| l.config)
    }

    /// Like [`Config::from_toml`] with an explicit variable lookup (tests, embedded configs).
    pub fn from_toml_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        Self::parse(text, &Reading::default(), &lookup).map(|l| l.config)
    }

    /// The whole reading: TOML (syntax errors with their line and column), `${NAME}` in string values (the
    /// command line's env file, or else `env_file`, then `lookup`), the typed config (errors name the
    /// field), secret files, validation.
    pub fn parse(
        text: &str,
        reading: &Reading,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Loaded, ConfigError> {
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| syntax_error(text, &e))?;
        let mut files = Vec::new();
        if let Some(cli) = &reading.env_file {
            files.push(("--env-file".to_string(), cli.clone()));
        } else if let Some(toml::Value::String(f)) = table.get("env_file") {
            let path = match &reading.base_dir {
                Some(base) if Path::new(f).is_relative() => base.join(f),
                _ => Path::new(f).to_path_buf(),
            };
            files.push(("env_file".to_string(), path));
        }
        let mut from_files: Vec<std::collections::BTreeMap<String, String>> = Vec::new();
        let mut missing = Vec::new();
        for (field, path) in files {
            match std::fs::read_to_string(&path) {
                Ok(t) => from_files.push(
                    secrets::parse_env_file(&t)
                        .map_err(|m| ConfigError::invalid(field, format!("{}: {m}", path.display())))?,
                ),
                Err(_) if reading.lenient => missing.push(format!("file {} ({field})", path.display())),
                Err(e) => {
                    return Err(ConfigError::invalid(
                        field,
                        format!("cannot read {}: {e}", path.display()),
                    ))
                }
            }
        }
        let mut fingerprints = secrets::Fingerprints::default();
        let mut absent: Vec<String> = Vec::new();
        let mut value = toml::Value::Table(std::mem::take(&mut table));
        env::substitute_values(&mut value, "", &mut |name, field, whole| {
            let found = from_files
                .iter()
                .find_map(|m| m.get(name).cloned())
                .or_else(|| lookup(name));
            match found {
                Some(v) => {
                    fingerprints.note(&format!("env {name}"), &v);
                    Some(v)
                }
                None if reading.lenient => {
                    if !absent.iter().any(|a| a == name) {
                        absent.push(name.to_string());
                    }
                    Some(env::placeholder(name, field, whole))
                }
                None => None,
            }
        })?;
        missing.extend(absent.into_iter().map(|n| format!("env {n}")));
        let mut config: Config = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.inner().message().trim().to_string();
            if path.is_empty() || path == "." {
                ConfigError::Parse(inner)
            } else {
                ConfigError::Invalid {
                    field: path,
                    message: inner,
                }
            }
        })?;
        let mut reader = secrets::SecretReader {
            base: reading.base_dir.as_deref(),
            lenient: reading.lenient,
            missing: Vec::new(),
            fingerprints,
        };
        for (i, n) in config.networks.iter_mut().enumerate() {
            for (j, p) in n.providers.iter_mut().enumerate() {
                p.auth.resolve(&format!("networks[{i}].providers[{j}]"), &mut reader)?;
            }
        }
        config.admin.resolve(&mut reader)?;
        missing.append(&mut reader.missing);
        config.secrets = reader.fingerprints;
        config.validate()?;
        Ok(Loaded { config, missing })
    }
}

/// A TOML syntax error with its line and column (1-based) and toml's message, without the source excerpt.
fn syntax_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().trim();
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            ConfigError::Parse(format!("TOML syntax error at line {line}, column {column}: {message}"))
        }
        None => ConfigError::Parse(format!("TOML syntax error: {message}")),
    }
}

#[cfg(test)]
mod tests;
