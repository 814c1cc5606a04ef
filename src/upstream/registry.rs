//! Provider registry: config providers with parsed endpoints and resolved addresses.
//!
//! DNS runs here, on the main thread before shards start, because a blocking lookup on a shard would
//! stall every connection it owns.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use prism_config::{Config, Endpoint, NetworkKind, ProviderRole};
use prism_transport::ExtraHeaders;

#[derive(Debug, Clone)]
pub struct ProviderSpec {
    pub name: String,
    pub endpoint: Endpoint,
    pub addrs: Arc<[SocketAddr]>,
    pub ws_endpoint: Option<Endpoint>,
    pub ws_addrs: Arc<[SocketAddr]>,
    pub region: Option<String>,
    pub weight: f64,
    pub overflow: bool,
    pub quota_rps: Option<u32>,
    pub role: Option<ProviderRole>,
    /// Its credentials as header lines, written once (`[networks.providers.auth]`).
    pub headers: ExtraHeaders,
}

#[derive(Debug, Clone)]
pub struct NetworkSpec {
    pub name: String,
    pub kind: NetworkKind,
    pub chain_id: Option<u64>,
    pub providers: Vec<ProviderSpec>,
}

/// Immutable after start-up; shared by every shard behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Registry {
    pub networks: Vec<NetworkSpec>,
}

impl Registry {
    /// Builds the registry, resolving host names. A name that does not resolve leaves that provider with
    /// no addresses (its calls fail fast as `Unresolved`) and is logged, rather than failing start-up.
    pub fn resolve(config: &Config) -> Registry {
        let networks = config
            .networks
            .iter()
            .map(|n| NetworkSpec {
                name: n.name.clone(),
                kind: n.kind,
                chain_id: n.chain_id,
                providers: n
                    .providers
                    .iter()
                    .map(|p| {
                        let endpoint = Endpoint::parse(&p.url).expect("validated at load");
                        let addrs = resolve(&n.name, &p.name, &endpoint);
                        let ws_endpoint = p
                            .ws_url
                            .as_deref()
                            .map(|u| Endpoint::parse(u).expect("validated at load"));
                        let ws_addrs = ws_endpoint
                            .as_ref()
                            .map_or_else(|| Arc::from(Vec::new()), |e| resolve(&n.name, &p.name, e));
                        ProviderSpec {
                            name: p.name.clone(),
                            endpoint,
                            addrs,
                            ws_endpoint,
                            ws_addrs,
                            region: p.region.clone(),
                            weight: p.weight,
                            overflow: p.overflow,
                            quota_rps: p.quota_rps,
                            role: p.role,
                            headers: ExtraHeaders::new(
                                p.auth
                                    .header_lines()
                                    .iter()
                                    .map(|(n, v)| (n.clone(), v.expose().to_string()))
                                    .collect(),
                            ),
                        }
                    })
                    .collect(),
            })
            .collect();
        Registry { networks }
    }
}

fn resolve(network: &str, provider: &str, endpoint: &Endpoint) -> Arc<[SocketAddr]> {
    match (endpoint.host.as_str(), endpoint.port).to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>().into(),
        Err(e) => {
            tracing::warn!(%network, %provider, upstream = %endpoint, error = %e, "provider host does not resolve");
            Arc::from(Vec::new())
        }
    }
}
