//! The cluster thread's connection to Redis: one URL (`redis://`, `rediss://`) or the master Redis Sentinel
//! names, with ACL credentials, a private CA and a client certificate when configured.
//!
//! Sentinel discovery is done here rather than with the crate's `sentinel` feature: its sync client connects
//! without a timeout, and one blackholed sentinel would then stall sharing for minutes. Every connection
//! here has a connect timeout and I/O timeouts. The sentinel connection is kept and asked again every
//! [`SENTINEL_CHECK`]: after a failover the old master can take writes for seconds (until Sentinel demotes
//! it), so the nodes follow `+switch-master` from the sentinels, not from the old master's errors. TLS files are read at every connect, so a rotated CA or client
//! certificate is picked up at the next reconnect without a restart. Certificates are always verified.

use std::time::{Duration, Instant};

use redis::{Client, ClientTlsConfig, Connection, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, TlsCertificates};

use prism_config::{redact_url, Cluster};

/// Connecting, including the TLS handshake and AUTH.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
/// Each read or write on an open connection.
const IO_TIMEOUT: Duration = Duration::from_millis(500);
/// How often a connected node asks its sentinel whether the master moved.
const SENTINEL_CHECK: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("{field} {path}: {source}")]
    File {
        field: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no sentinel named a usable master for {master}: {detail}")]
    NoMaster { master: String, detail: String },
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
}

pub struct Link {
    cluster: Cluster,
    /// The sentinel that answered last is asked first next time.
    preferred: usize,
    /// The master Sentinel named last (`host:port`), so a failover is logged once.
    master: Option<String>,
    /// A connection to `sentinels[.0]`, kept to notice a failover while connected.
    sentinel: Option<(usize, Connection)>,
    checked: Option<Instant>,
}

impl Link {
    pub fn new(cluster: &Cluster) -> Link {
        Link {
            cluster: cluster.clone(),
            preferred: 0,
            master: None,
            sentinel: None,
            checked: None,
        }
    }

    /// A fresh connection to the Redis that takes writes.
    pub fn connect(&mut self) -> Result<Connection, LinkError> {
        let certs = self.certificates()?;
        match self.cluster.redis_url.as_deref() {
            Some(url) => {
                let mut info = url.into_connection_info()?;
                let settings = info.redis_settings().clone();
                let settings = match &self.cluster.username {
                    Some(u) => settings.set_username(u),
                    None => settings,
                };
                let settings = match &self.cluster.password {
                    Some(p) => settings.set_password(p),
                    None => settings,
                };
                info = info.set_redis_settings(settings);
                open(info, certs.as_ref())
            }
            None => self.via_sentinels(certs.as_ref()),
        }
    }

    /// With Sentinel, whether the sentinel now names another master than the one connected to (asked at
    /// most every [`SENTINEL_CHECK`]; a sentinel that does not answer moves nothing).
    pub fn master_moved(&mut self) -> bool {
        let Some(current) = self.master.clone() else {
            return false;
        };
        if self.checked.is_some_and(|t| t.elapsed() < SENTINEL_CHECK) {
            return false;
        }
        self.checked = Some(Instant::now());
        let name = self.cluster.sentinel_master.clone().unwrap_or_default();
        let certs = match self.certificates() {
            Ok(c) => c,
            Err(_) => return false,
        };
        match self.lookup(self.preferred, &name, certs.as_ref()) {
            Ok(Some((host, port))) if format!("{host}:{port}") != current => {
                tracing::info!(master = %name, from = %current, to = %format!("{host}:{port}"), "cluster: Sentinel moved the master (failover); reconnecting");
                true
            }
            _ => false,
        }
    }

    /// Where this link goes, for logs: the URL without its password, or the sentinels and master name.
    pub fn describe(&self) -> String {
        match &self.cluster.redis_url {
            Some(url) => redact_url(url),
            None => format!(
                "sentinel master {} (now {}) via {}",
                self.cluster.sentinel_master.as_deref().unwrap_or(""),
                self.master.as_deref().unwrap_or("unknown"),
                self.cluster.sentinels.join(",")
            ),
        }
    }

    fn certificates(&self) -> Result<Option<TlsCertificates>, LinkError> {
        let read = |field: &'static str, path: &Option<String>| -> Result<Option<Vec<u8>>, LinkError> {
            path.as_ref()
                .map(|p| {
                    std::fs::read(p).map_err(|source| LinkError::File {
                        field,
                        path: p.clone(),
                        source,
                    })
                })
                .transpose()
        };
        let root_cert = read("cluster.tls_ca_file", &self.cluster.tls_ca_file)?;
        let client_tls = match (
            read("cluster.tls_cert_file", &self.cluster.tls_cert_file)?,
            read("cluster.tls_key_file", &self.cluster.tls_key_file)?,
        ) {
            (Some(client_cert), Some(client_key)) => Some(ClientTlsConfig {
                client_cert,
                client_key,
            }),
            _ => None,
        };
        if root_cert.is_none() && client_tls.is_none() {
            return Ok(None);
        }
        Ok(Some(TlsCertificates { client_tls, root_cert }))
    }

    /// Asks each sentinel (the last one that answered first) for the master's address, and keeps the first
    /// master that says `ROLE master` (a sentinel's view can lag a failover by a moment).
    fn via_sentinels(&mut self, certs: Option<&TlsCertificates>) -> Result<Connection, LinkError> {
        let name = self.cluster.sentinel_master.clone().unwrap_or_default();
        let n = self.cluster.sentinels.len();
        let mut failures = Vec::new();
        for k in 0..n {
            let i = (self.preferred + k) % n;
            match self.ask(i, &name, certs) {
                Ok((master, conn)) => {
                    self.preferred = i;
                    if self.master.as_deref() != Some(master.as_str()) {
                        tracing::info!(master = %name, address = %master, sentinel = %self.cluster.sentinels[i], "cluster: Sentinel names the master");
                        self.master = Some(master);
                    }
                    return Ok(conn);
                }
                Err(e) => failures.push(format!("{}: {e}", self.cluster.sentinels[i])),
            }
        }
        Err(LinkError::NoMaster {
            master: name,
            detail: failures.join("; "),
        })
    }

    /// What sentinel `i` names as the master of `name` (`None`: it does not monitor it). Its connection is
    /// kept for the next question, dropped on an error.
    fn lookup(
        &mut self,
        i: usize,
        name: &str,
        certs: Option<&TlsCertificates>,
    ) -> Result<Option<(String, u16)>, LinkError> {
        if self.sentinel.as_ref().is_none_or(|(at, _)| *at != i) {
            let c = &self.cluster;
            let (host, port) = split_host_port(&c.sentinels[i]);
            let mut info = address(host, port, c.sentinel_tls);
            if let Some(p) = &c.sentinel_password {
                let mut s = info.redis_settings().clone().set_password(p);
                if let Some(u) = &c.sentinel_username {
                    s = s.set_username(u);
                }
                info = info.set_redis_settings(s);
            }
            self.sentinel = None;
            self.sentinel = Some((i, open(info, certs)?));
        }
        let (_, conn) = self.sentinel.as_mut().expect("just connected");
        let named = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(name)
            .query(conn);
        if named.is_err() {
            self.sentinel = None;
        }
        Ok(named?)
    }

    /// Sentinel `i`'s master for `name`, connected and confirmed: (`host:port`, connection).
    fn ask(
        &mut self,
        i: usize,
        name: &str,
        certs: Option<&TlsCertificates>,
    ) -> Result<(String, Connection), LinkError> {
        let Some((mhost, mport)) = self.lookup(i, name, certs)? else {
            return Err(LinkError::NoMaster {
                master: name.to_string(),
                detail: "this sentinel does not monitor it".into(),
            });
        };
        let c = &self.cluster;
        let mut info = address(&mhost, mport, c.sentinel_tls);
        let mut s = info.redis_settings().clone();
        if let Some(p) = &c.password {
            s = s.set_password(p);
        }
        if let Some(u) = &c.username {
            s = s.set_username(u);
        }
        info = info.set_redis_settings(s);
        let mut master = open(info, certs)?;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut master)?;
        let role = role
            .first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .unwrap_or_default();
        if role != "master" {
            return Err(LinkError::NoMaster {
                master: name.to_string(),
                detail: format!("{mhost}:{mport} says ROLE {role:?} (a failover in progress?)"),
            });
        }
        self.checked = Some(Instant::now());
        Ok((format!("{mhost}:{mport}"), master))
    }
}

/// `host:port` (validated by the config), with IPv6 brackets taken off the host.
fn split_host_port(s: &str) -> (&str, u16) {
    let (host, port) = s.rsplit_once(':').unwrap_or((s, "26379"));
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port.parse().unwrap_or(26379))
}

fn address(host: &str, port: u16, tls: bool) -> ConnectionInfo {
    let addr = if tls {
        ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host.to_string(), port)
    };
    addr.into_connection_info().expect("an address is connection info")
}

/// Connects with timeouts; TLS addresses use the configured CA and client certificate when given.
fn open(info: ConnectionInfo, certs: Option<&TlsCertificates>) -> Result<Connection, LinkError> {
    let client = match certs {
        Some(c) if matches!(info.addr(), ConnectionAddr::TcpTls { .. }) => Client::build_with_tls(info, c.clone())?,
        _ => Client::open(info)?,
    };
    let conn = client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_addresses_split_with_and_without_brackets() {
        assert_eq!(split_host_port("10.0.0.1:26379"), ("10.0.0.1", 26379));
        assert_eq!(split_host_port("[::1]:26380"), ("::1", 26380));
        assert_eq!(
            split_host_port("sentinel-a.internal:5000"),
            ("sentinel-a.internal", 5000)
        );
    }
}
