//! TLS for the coordinator link: the server's configuration from a PEM certificate
//! chain and key, and the host's client configuration (the public web PKI roots, plus
//! an optional CA file for a private pool). rustls with ring, as ureq already links it.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::Path;
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("reading certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{} holds no PEM certificate; give a PEM file with BEGIN CERTIFICATE blocks",
            path.display()
        ));
    }
    Ok(certs)
}

/// The server side: `cert` is the PEM chain (leaf first), `key` its PEM private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let chain = certs(cert)?;
    let pem = crate::secret::read_secret_file(key).map_err(|e| format!("TLS key: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(pem.expose().as_bytes())
        .map_err(|e| format!("reading the private key from {}: {e}", key.display()))?;
    let cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("the certificate and key do not make a TLS identity: {e}"))?;
    Ok(Arc::new(cfg))
}

/// The host side: web PKI roots, plus the certificates in `extra_ca` when given.
pub fn client_config(extra_ca: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(p) = extra_ca {
        for c in certs(p)? {
            roots
                .add(c)
                .map_err(|e| format!("a CA certificate in {}: {e}", p.display()))?;
        }
    }
    let cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}
