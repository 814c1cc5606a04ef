//! Edge TLS termination with rustls. Each shard gets its own `ServerConfig` (a shared one would share one
//! mutex-guarded session cache); SIGHUP reloads the certificate and key from disk without dropping
//! connections: new handshakes use the new pair, open connections keep theirs.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

use prism_config::Tls;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("server.tls.cert {path}: {message}")]
    Cert { path: String, message: String },
    #[error("server.tls.key {path}: {message}")]
    Key { path: String, message: String },
    #[error("server.tls: {0}")]
    Config(String),
}

/// The current per-shard server configs, swappable as a whole on reload.
pub struct EdgeTls {
    files: Tls,
    shards: usize,
    current: ArcSwap<Vec<Arc<ServerConfig>>>,
}

impl EdgeTls {
    pub fn load(files: &Tls, shards: usize) -> Result<Arc<Self>, TlsError> {
        let configs = build(files, shards)?;
        Ok(Arc::new(EdgeTls {
            files: files.clone(),
            shards,
            current: ArcSwap::from_pointee(configs),
        }))
    }

    /// The config a shard uses for its next handshake.
    pub fn for_shard(&self, shard: usize) -> Arc<ServerConfig> {
        let all = self.current.load();
        all[shard % all.len()].clone()
    }

    /// Re-reads the files; on error the old pair stays in use.
    pub fn reload(&self) -> Result<(), TlsError> {
        let configs = build(&self.files, self.shards)?;
        self.current.store(Arc::new(configs));
        Ok(())
    }

    /// Reloads on SIGHUP (see `runtime::hangup`).
    pub fn reload_on_sighup(self: &Arc<Self>) -> std::io::Result<()> {
        prism_runtime::hangup::install()?;
        let this = self.clone();
        prism_runtime::hangup::on_hangup(move || match this.reload() {
            Ok(()) => tracing::info!("TLS certificate reloaded"),
            Err(e) => tracing::error!(error = %e, "TLS reload failed; keeping the previous certificate"),
        });
        Ok(())
    }
}

fn build(files: &Tls, shards: usize) -> Result<Vec<Arc<ServerConfig>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| TlsError::Cert {
            path: files.cert.clone(),
            message: e.to_string(),
        })?
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Cert {
            path: files.cert.clone(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Cert {
            path: files.cert.clone(),
            message: "no certificate in file".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        message: e.to_string(),
    })?;
    (0..shards.max(1))
        .map(|_| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::Config(e.to_string()))?
                .with_no_client_auth()
                .with_single_cert(certs.clone(), key.clone_key())
                .map_err(|e| TlsError::Config(e.to_string()))?;
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        })
        .collect()
}
