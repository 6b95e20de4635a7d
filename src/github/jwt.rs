//! GitHub App JWTs: the App's RSA key from its PEM file, and RS256-signed tokens.

use crate::secret::Secret;
use crate::timefmt::Millis;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use std::fmt;

/// `iat` is set this far in the past, as GitHub advises, to absorb clock skew.
pub const JWT_BACKDATE_SECS: i64 = 60;
/// `exp` - `iat`; GitHub refuses more than 10 minutes.
pub const JWT_LIFETIME_SECS: i64 = 9 * 60;

/// An App private key. Never prints its contents.
pub struct AppKey {
    pair: RsaKeyPair,
}

impl fmt::Debug for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppKey(***)")
    }
}

impl AppKey {
    /// Parses a PEM `RSA PRIVATE KEY` (PKCS#1, what GitHub hands out) or `PRIVATE KEY`
    /// (PKCS#8, what `openssl` converts to). The error says what is wrong, never the key.
    pub fn from_pem(pem: &str) -> Result<AppKey, String> {
        let (label, der) = pem_body(pem)?;
        let pair = match label.as_str() {
            "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der),
            "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der),
            other => return Err(format!("PEM holds a {other}, not an RSA private key")),
        }
        .map_err(|e| format!("the RSA key was refused: {e}"))?;
        Ok(AppKey { pair })
    }

    /// The public key, PKCS#1 `RSAPublicKey` DER: what a verifier (tests, the
    /// simulated GitHub) checks signatures with.
    pub fn public_key_der(&self) -> Vec<u8> {
        self.pair.public().as_ref().to_vec()
    }

    /// Whether `other` is the same key (its public half: two reads of one PEM file).
    pub fn same_key(&self, other: &AppKey) -> bool {
        self.pair.public().as_ref() == other.pair.public().as_ref()
    }

    fn sign(&self, msg: &[u8]) -> Vec<u8> {
        let mut sig = vec![0u8; self.pair.public().modulus_len()];
        // Signing with a well-formed key and a right-sized buffer cannot fail; ring
        // only reports a failing system RNG, which PKCS#1 v1.5 does not even use.
        self.pair
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), msg, &mut sig)
            .expect("RSA PKCS#1 signing with a valid key");
        sig
    }
}

/// Finds the first PEM block and decodes its body.
fn pem_body(pem: &str) -> Result<(String, Vec<u8>), String> {
    let start = pem
        .find("-----BEGIN ")
        .ok_or("no PEM block (-----BEGIN ...) in the file")?;
    let after = &pem[start + 11..];
    let label_end = after.find("-----").ok_or("a broken PEM header")?;
    let label = after[..label_end].to_string();
    let body_and_rest = &after[label_end + 5..];
    let end_marker = format!("-----END {label}-----");
    let end = body_and_rest
        .find(&end_marker)
        .ok_or("the PEM block has no END line")?;
    let b64: String = body_and_rest[..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = STANDARD
        .decode(b64)
        .map_err(|_| "the PEM body is not valid base64".to_string())?;
    Ok((label, der))
}

/// A JWT for App-level calls: `iat` = now - 60 s, `exp` = `iat` + 9 min, `iss` = app id.
pub fn app_jwt(key: &AppKey, app_id: u64, now: Millis) -> Secret {
    let iat = now.div_euclid(1000) - JWT_BACKDATE_SECS;
    let exp = iat + JWT_LIFETIME_SECS;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"iat":{iat},"exp":{exp},"iss":"{app_id}"}}"#));
    let signing_input = format!("{header}.{claims}");
    let sig = URL_SAFE_NO_PAD.encode(key.sign(signing_input.as_bytes()));
    Secret::new(format!("{signing_input}.{sig}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

    fn key() -> AppKey {
        let pem = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/github/app-key.pem"
        ))
        .unwrap();
        AppKey::from_pem(&pem).unwrap()
    }

    #[test]
    fn jwt_has_the_claims_and_a_valid_signature() {
        let k = key();
        let now = 1_800_000_000_123;
        let jwt = app_jwt(&k, 4242, now);
        let parts: Vec<&str> = jwt.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "RS256");
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iat"], 1_800_000_000 - 60);
        assert_eq!(claims["exp"], 1_800_000_000 - 60 + 540);
        assert_eq!(claims["iss"], "4242");
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, k.public_key_der());
        let signed = format!("{}.{}", parts[0], parts[1]);
        public.verify(signed.as_bytes(), &sig).unwrap();
        // The signature covers the claims: a changed claim does not verify.
        let forged = format!("{}.{}", parts[0], URL_SAFE_NO_PAD.encode(r#"{"iss":"1"}"#));
        assert!(public.verify(forged.as_bytes(), &sig).is_err());
    }

    #[test]
    fn bad_pems_are_refused_without_echoing() {
        for (pem, want) in [
            ("", "no PEM block"),
            (
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                "CERTIFICATE",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\n!!!!\n-----END RSA PRIVATE KEY-----\n",
                "base64",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
                "refused",
            ),
            ("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n", "END"),
        ] {
            let err = AppKey::from_pem(pem).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
        assert_eq!(format!("{:?}", key()), "AppKey(***)");
    }
}
