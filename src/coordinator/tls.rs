//! TLS for the coordinator link: the server's configuration from a PEM certificate
//! chain and key, and the host's client configuration (the public web PKI roots, plus
//! an optional CA file for a private pool). When plain text is exposed (`ws://` off
//! loopback) is judged in `domain::validate`. rustls with ring, as ureq already links it.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::Path;
use std::sync::Arc;

/// The plain-text rule is the domain's (`host set` checks it there); said here too by
/// `coordinator serve` and the warnings both log at every start.
pub use crate::domain::validate::{PLAIN_TEXT_RISK, is_plain_off_loopback};

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

/// Reads a CA file as the host side will (PEM certificates that make trust anchors),
/// so a wrong file is refused when it is named, not at the daemon's first dial.
pub fn check_ca_file(path: &Path) -> Result<(), String> {
    client_config(Some(path)).map(drop)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_exposed_off_loopback_only() {
        for url in [
            "ws://127.0.0.1:7700",
            "ws://127.9.0.1:7700/pool",
            "ws://localhost:7700",
            "ws://[::1]:7700/",
            "wss://8.8.8.8:7700",
            "wss://coord.example",
        ] {
            assert!(!is_plain_off_loopback(url), "{url}");
        }
        for url in [
            "ws://8.8.8.8:7700",
            "ws://10.0.0.5:7700",
            "ws://0.0.0.0:7700",
            "ws://coord.example:7700",
            "ws://localhost.evil.example",
            "ws://127.0.0.1.nip.io",
            "ws://[2001:db8::1]:7700",
            "WS://8.8.8.8",
            "ws://",
        ] {
            assert!(is_plain_off_loopback(url), "{url}");
        }
    }

    #[test]
    fn a_ca_file_must_hold_pem_certificates() {
        let dir = std::env::temp_dir().join(format!("rm-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        assert!(
            check_ca_file(&junk)
                .unwrap_err()
                .contains("no PEM certificate")
        );
        assert!(check_ca_file(&dir.join("missing.pem")).is_err());
        let ca = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/coord_tls/ca.pem");
        check_ca_file(&ca).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
