//! Who is calling: PATs, installation tokens (with expiry) and GitHub App JWTs (RS256,
//! checked for signature, `iat` and `exp` the way GitHub checks them).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};

use super::state::State;
use crate::timefmt::Millis;

/// An authenticated caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Pat(usize),
    Installation(u64),
    App(u64),
}

impl Caller {
    /// The id the request log and the rate-limit buckets use.
    pub fn id(&self) -> String {
        match self {
            Caller::Pat(n) => format!("pat:{n}"),
            Caller::Installation(id) => format!("installation:{id}"),
            Caller::App(id) => format!("app:{id}"),
        }
    }
}

/// Why a caller was refused (all 401s, with GitHub's messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    Missing,
    BadCredentials,
    Jwt(String),
}

impl AuthError {
    pub fn message(&self) -> String {
        match self {
            AuthError::Missing => "Requires authentication".into(),
            AuthError::BadCredentials => "Bad credentials".into(),
            AuthError::Jwt(m) => m.clone(),
        }
    }
}

/// Identifies the caller from an `Authorization` header (`Bearer X` or `token X`).
pub fn identify(
    state: &State,
    authorization: Option<&str>,
    now: Millis,
) -> Result<Caller, AuthError> {
    let header = authorization.ok_or(AuthError::Missing)?;
    let (scheme, token) = header
        .trim()
        .split_once(' ')
        .ok_or(AuthError::BadCredentials)?;
    if !(scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token")) {
        return Err(AuthError::BadCredentials);
    }
    let token = token.trim();
    if let Some(n) = state.pats.get(token) {
        return Ok(Caller::Pat(*n));
    }
    if let Some(t) = state.tokens.get(token) {
        return if t.expires_at > now {
            Ok(Caller::Installation(t.installation_id))
        } else {
            Err(AuthError::BadCredentials)
        };
    }
    if token.split('.').count() == 3 {
        return verify_jwt(state, token, now)
            .map(Caller::App)
            .map_err(AuthError::Jwt);
    }
    Err(AuthError::BadCredentials)
}

/// Checks an App JWT; returns the app id or GitHub's 401 message.
pub fn verify_jwt(state: &State, jwt: &str, now: Millis) -> Result<u64, String> {
    let undecodable = || "A JSON web token could not be decoded".to_string();
    let mut parts = jwt.split('.');
    let (Some(h), Some(p), Some(s)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(undecodable());
    };
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).map_err(|_| undecodable())?)
            .map_err(|_| undecodable())?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("RS256") {
        return Err(undecodable());
    }
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).map_err(|_| undecodable())?)
            .map_err(|_| undecodable())?;
    let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| undecodable())?;
    // `iss` is the app id (number or string) or the App's client id.
    let iss = match claims.get("iss") {
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        _ => return Err("'Issuer' claim ('iss') must be an Integer".into()),
    };
    let app = state
        .apps
        .values()
        .find(|a| a.app_id.to_string() == iss || a.client_id == iss)
        .ok_or_else(|| format!("Integration not found for issuer {iss}"))?;
    let key = RsaPublicKeyComponents {
        n: &app.n,
        e: &app.e,
    };
    key.verify(
        &RSA_PKCS1_2048_8192_SHA256,
        format!("{h}.{p}").as_bytes(),
        &sig,
    )
    .map_err(|_| undecodable())?;
    let now_s = now / 1000;
    let iat = claims
        .get("iat")
        .and_then(|v| v.as_i64())
        .ok_or("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued")?;
    let exp = claims.get("exp").and_then(|v| v.as_i64()).ok_or(
        "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
    )?;
    // GitHub allows a little skew on iat, refuses a JWT issued in the future beyond it,
    // and refuses lifetimes over ten minutes.
    if iat > now_s + 60 {
        return Err("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued".into());
    }
    if exp <= now_s {
        return Err("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires".into());
    }
    if exp - iat > 600 || exp > now_s + 600 + 60 {
        return Err("'Expiration time' claim ('exp') is too far in the future".into());
    }
    Ok(app.app_id)
}

/// The public components of an RSA private key in PKCS#1 PEM (`RSA PRIVATE KEY`), so a
/// test can register an App by the key it signs with.
pub fn public_components_from_private_pem(pem: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    let der = pem_body(pem, "RSA PRIVATE KEY")?;
    let pair = ring::rsa::KeyPair::from_der(&der)
        .map_err(|e| format!("the key is not a usable RSA key ({e})"))?;
    let c: ring::rsa::PublicKeyComponents<Vec<u8>> = pair.public().into();
    Ok((c.n, c.e))
}

/// The DER inside a PEM block with this label.
pub fn pem_body(pem: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = pem
        .find(&begin)
        .ok_or_else(|| format!("no {begin} block: use a PKCS#1 key"))?
        + begin.len();
    let stop = pem[start..]
        .find(&end)
        .ok_or_else(|| format!("no {end} line"))?
        + start;
    let b64: String = pem[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("the PEM body is not base64 ({e})"))
}
