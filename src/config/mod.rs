//! Typed configuration: TOML in, validated types out.
//!
//! Keys follow the reference configs (`tests/fixtures/robinhood.toml`, `tests/fixtures/solana-magic.toml`),
//! which are a public contract: keys may be added here, none renamed.
//! Defaults come from the seeds' policy documents. Validation names the offending field so an operator can
//! fix a file without reading source.

pub mod changes;
pub mod endpoint;
mod env;
mod model;
#[cfg(test)]
pub mod testing;
mod validate;

pub use endpoint::{Endpoint, Scheme};
pub use env::substitute_env;
pub use model::*;

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
    Env(String),
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

impl Config {
    /// Reads, substitutes `${ENV}` references, parses and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// Parses and validates config text, substituting `${ENV}` references from the process environment.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Self::from_toml_with(text, |name| std::env::var(name).ok())
    }

    /// Like [`Config::from_toml`] with an explicit variable lookup (tests, embedded configs).
    pub fn from_toml_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let text = substitute_env(text, lookup)?;
        let de = toml::Deserializer::new(&text);
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = describe_toml_error(e.inner());
            if path.is_empty() || path == "." {
                ConfigError::Parse(inner)
            } else {
                ConfigError::Invalid {
                    field: path,
                    message: inner,
                }
            }
        })?;
        config.validate()?;
        Ok(config)
    }
}

impl Config {
    /// For `prism check`: like [`Config::from_toml`], but unset `${ENV}` variables become placeholders and are
    /// returned by name, so a config can be validated on a machine that does not hold its secrets.
    pub fn from_toml_lenient(text: &str) -> Result<(Config, Vec<String>), ConfigError> {
        let missing = std::cell::RefCell::new(Vec::new());
        let config = Self::from_toml_with(text, |name| {
            std::env::var(name).ok().or_else(|| {
                let mut missing = missing.borrow_mut();
                if !missing.iter().any(|m| m == name) {
                    missing.push(name.to_string());
                }
                Some(format!("unset-{name}"))
            })
        })?;
        Ok((config, missing.into_inner()))
    }
}

/// The toml message without its multi-line source excerpt; the field path is added by the caller.
fn describe_toml_error(e: &toml::de::Error) -> String {
    e.message().trim().to_string()
}

#[cfg(test)]
mod tests;
