//! The config types. Field names are the TOML keys; defaults are the seeds' policy defaults. `Config` is the
//! whole file; each section's types live in a file of their own below `model/`, re-exported here (and from
//! the crate root), so `prism_config::Limits` and the rest keep their paths.

use serde::{Deserialize, Serialize};

mod cache;
mod cluster;
mod keys;
mod limits;
mod network;
mod policy;
mod provider;
mod server;

pub use cache::*;
pub use cluster::*;
pub use keys::*;
pub use limits::*;
pub use network::*;
pub use policy::*;
pub use provider::*;
pub use server::*;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: Server,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub policy: Policy,
    pub networks: Vec<Network>,
    #[serde(default)]
    pub keys: Vec<Key>,
    #[serde(default)]
    pub cluster: Option<Cluster>,
    #[serde(default)]
    pub cache: CacheConfig,
    /// `[admin]`: who may use the admin listener's mutating endpoints (reload, cordon).
    #[serde(default)]
    pub admin: super::secrets::AdminAccess,
    /// `NAME=value` lines read for `${NAME}` before the process environment, on start-up and on every
    /// reload (so a secret rotated in the file is picked up by a reload). Relative to the config file.
    #[serde(default)]
    pub env_file: Option<String>,
    /// Not a config key: a fingerprint of every secret the config read (`${NAME}` values and secret files),
    /// by name, so a reload can say which ones changed without holding or showing them.
    #[serde(skip)]
    pub secrets: super::secrets::Fingerprints,
}
