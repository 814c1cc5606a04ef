//! Upstream TLS: rustls with the ring provider, webpki roots plus the system's.

use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

/// Builds a client config. Call once per shard: a shared config shares one mutex-guarded session cache.
pub fn client_config() -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        let _ = roots.add(cert);
    }
    client_config_with_roots(roots)
}

/// A client config trusting exactly `roots` (tests use a private CA).
pub fn client_config_with_roots(roots: RootCertStore) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}
