//! What every shard shares about one solana-magic network: which providers are the base layer and which
//! each ephemeral rollup, the delegation program, and the lock-free memories of where signatures and
//! blockhashes came from.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use super::memo::Memo;
use super::pubkey::{Pubkey, DELEGATION_PROGRAM};
use prism_config::{Network, ProviderRole};

/// Where a call goes: the base layer, or ephemeral rollup `k` (index into `SolanaNet::ers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dest {
    Base,
    Er(usize),
}

impl Dest {
    pub fn code(self) -> u8 {
        match self {
            Dest::Base => 0,
            Dest::Er(k) => k as u8 + 1,
        }
    }

    pub fn from_code(c: u8) -> Dest {
        match c {
            0 => Dest::Base,
            k => Dest::Er(k as usize - 1),
        }
    }
}

/// One ephemeral rollup: its identity (what delegation records name) and its providers.
#[derive(Debug, Clone)]
pub struct Er {
    pub name: String,
    pub identity: Pubkey,
    /// Bit i set = provider i of the network serves this ER.
    pub providers: u64,
    /// Where clients reach this ER (`public_url` of its first provider that sets one), reported as `fqdn`
    /// by `getIdentity`, `getRoutes` and `getDelegationStatus`; `None` when no provider sets it. Never an
    /// upstream URL: those often carry the operator's API key.
    pub public_url: Option<String>,
    /// What `getRoutes` reports (the first provider's settings; see `config::Provider::base_fee`).
    pub base_fee: u16,
    pub block_time_ms: u16,
    pub country_code: String,
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("networks.{network}.delegation_program: not a base58 public key")]
    Program { network: String },
    #[error("networks.{network}.providers.{provider}.identity: not a base58 public key")]
    Identity { network: String, provider: String },
    #[error("networks.{network}: a solana-magic network supports at most 63 providers")]
    TooMany { network: String },
}

/// Counts over every shard's delegation table, for the status page (read-only there). Each shard keeps its
/// own table, so an account two shards touched counts twice, as in `prism_solana_*_accounts`.
#[derive(Debug, Default)]
pub struct TableCounts {
    pub tracked: AtomicI64,
    pub delegated: AtomicI64,
    /// Entries whose subscription was lost or refused: the next request refetches before routing.
    pub limbo: AtomicI64,
}

impl TableCounts {
    /// (tracked, delegated, in limbo), never below zero.
    pub fn read(&self) -> (u64, u64, u64) {
        let get = |a: &AtomicI64| a.load(Ordering::Relaxed).max(0) as u64;
        (get(&self.tracked), get(&self.delegated), get(&self.limbo))
    }
}

pub struct SolanaNet {
    pub name: String,
    pub program: Pubkey,
    pub base: u64,
    /// The first base-layer provider index (the preferred WebSocket for delegation subscriptions).
    pub base_providers: Vec<usize>,
    pub ers: Vec<Er>,
    /// The ER for records whose authority is the default (all-zero) key.
    pub default_er: Option<usize>,
    /// signature → `Dest::code`.
    pub signatures: Memo,
    /// blockhash → `Dest::code` of the chain that issued it.
    pub blockhashes: Memo,
    /// caller → `Dest::code` of the chain that issued the caller's latest blockhash.
    pub callers: Memo,
    pub counts: TableCounts,
}

impl SolanaNet {
    pub fn new(n: &Network) -> Result<Arc<SolanaNet>, NetError> {
        if n.providers.len() > 63 {
            return Err(NetError::TooMany {
                network: n.name.clone(),
            });
        }
        let program =
            Pubkey::from_base58(n.delegation_program.as_deref().unwrap_or(DELEGATION_PROGRAM)).ok_or_else(|| {
                NetError::Program {
                    network: n.name.clone(),
                }
            })?;
        let mut base = 0u64;
        let mut base_providers = Vec::new();
        let mut ers: Vec<Er> = Vec::new();
        for (i, p) in n.providers.iter().enumerate() {
            match p.role {
                Some(ProviderRole::Ephemeral) => {
                    let identity =
                        Pubkey::from_base58(p.identity.as_deref().unwrap_or("")).ok_or_else(|| NetError::Identity {
                            network: n.name.clone(),
                            provider: p.name.clone(),
                        })?;
                    // Providers naming the same identity serve the same ER (redundant endpoints).
                    match ers.iter_mut().find(|e| e.identity == identity) {
                        Some(er) => {
                            er.providers |= 1 << i;
                            if er.public_url.is_none() {
                                er.public_url = p.public_url.clone();
                            }
                        }
                        None => ers.push(Er {
                            name: p.name.clone(),
                            identity,
                            providers: 1 << i,
                            public_url: p.public_url.clone(),
                            base_fee: p.base_fee.unwrap_or(0),
                            block_time_ms: p.block_time_ms.unwrap_or(50),
                            country_code: p.country_code.clone().unwrap_or_default(),
                        }),
                    }
                }
                _ => {
                    base |= 1 << i;
                    base_providers.push(i);
                }
            }
        }
        let default_er = n.default_er.as_ref().and_then(|name| {
            let p = n.providers.iter().find(|p| &p.name == name)?;
            let id = Pubkey::from_base58(p.identity.as_deref()?)?;
            ers.iter().position(|e| e.identity == id)
        });
        Ok(Arc::new(SolanaNet {
            name: n.name.clone(),
            program,
            base,
            base_providers,
            ers,
            default_er,
            signatures: Memo::new(1 << 16),
            blockhashes: Memo::new(1 << 14),
            callers: Memo::new(1 << 12),
            counts: TableCounts::default(),
        }))
    }

    /// The providers that serve `dest`.
    pub fn providers(&self, dest: Dest) -> u64 {
        match dest {
            Dest::Base => self.base,
            Dest::Er(k) => self.ers.get(k).map_or(0, |e| e.providers),
        }
    }

    /// The ER a record's authority names: the default key means `default_er`.
    pub fn er_for(&self, authority: &Pubkey) -> Option<usize> {
        if *authority == Pubkey::ZERO {
            return self.default_er;
        }
        self.ers.iter().position(|e| e.identity == *authority)
    }

    pub fn dest_name(&self, dest: Dest) -> &str {
        match dest {
            Dest::Base => "base layer",
            Dest::Er(k) => self.ers.get(k).map_or("?", |e| e.name.as_str()),
        }
    }
}
