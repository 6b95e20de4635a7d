//! The admin connection to the Actions service: its URL and JWT, when to renew it
//! (the `exp` claim, decoded, never verified), and the target's config URL that the
//! `runner-registration` exchange names.

use crate::domain::TargetScope;
use crate::secret::Secret;
use crate::timefmt::Millis;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Renew the admin token when its expiry is closer than this.
pub const RENEW_BEFORE_MS: Millis = 60_000;

/// The Actions service URL and the admin token `runner-registration` returned.
#[derive(Debug, Clone)]
pub struct AdminConnection {
    /// Base of every Actions service call, ending in `/`.
    pub url: String,
    pub token: Secret,
    /// The token's `exp`, or `None` when it carries none (then it is used until a 401).
    pub expires_at: Option<Millis>,
}

impl AdminConnection {
    pub fn new(url: &str, token: Secret) -> AdminConnection {
        let expires_at = jwt_exp(token.expose());
        let mut url = url.trim().to_string();
        if !url.ends_with('/') {
            url.push('/');
        }
        AdminConnection {
            url,
            token,
            expires_at,
        }
    }

    /// Whether the token must be renewed before the next call.
    pub fn needs_renewal(&self, now: Millis) -> bool {
        self.expires_at
            .is_some_and(|exp| exp.saturating_sub(now) < RENEW_BEFORE_MS)
    }

    /// `<url><path>` with `api-version=6.0-preview` added to its query.
    pub fn endpoint(&self, path: &str) -> String {
        with_api_version(&format!("{}{}", self.url, path.trim_start_matches('/')))
    }
}

/// Adds the preview API version to a URL's query.
pub fn with_api_version(url: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}api-version=6.0-preview")
}

/// The `exp` claim of a JWT, in milliseconds; `None` when the token is not a JWT or
/// has no numeric `exp`. The signature is not checked: only the issuer can, and the
/// expiry is only used to renew early.
pub fn jwt_exp(token: &str) -> Option<Millis> {
    let mut parts = token.split('.');
    let (_header, payload, _sig) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = v.get("exp")?.as_f64()?;
    Some((exp * 1000.0) as Millis)
}

/// The web URL of the target that `runner-registration` expects, derived from the API
/// base: `https://api.github.com` → `https://github.com/...`, `https://HOST/api/v3` →
/// `https://HOST/...`, `https://api.SUB.ghe.com` → `https://SUB.ghe.com/...`; any other
/// base (the simulation on loopback) is used as it is.
pub fn config_url(api_url: &str, scope: &TargetScope) -> String {
    let base = api_url.trim_end_matches('/');
    let web = if let Some(b) = base.strip_suffix("/api/v3") {
        b.to_string()
    } else if let Some((scheme, rest)) = base.split_once("://")
        && let Some(host) = rest.strip_prefix("api.")
    {
        format!("{scheme}://{host}")
    } else {
        base.to_string()
    };
    format!("{web}/{}", scope.display())
}

/// The `runner-registration` endpoint on the API base.
pub fn registration_url(api_url: &str) -> String {
    format!(
        "{}/actions/runner-registration",
        api_url.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(payload: &str) -> String {
        format!(
            "{}.{}.sig",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256"}"#),
            URL_SAFE_NO_PAD.encode(payload)
        )
    }

    #[test]
    fn exp_is_decoded_and_renewal_is_a_minute_early() {
        let t = jwt(r#"{"exp": 1000, "iss": "x"}"#);
        assert_eq!(jwt_exp(&t), Some(1_000_000));
        let c = AdminConnection::new("http://x/abc", Secret::new(t));
        assert_eq!(c.url, "http://x/abc/");
        assert!(!c.needs_renewal(1_000_000 - 60_000));
        assert!(c.needs_renewal(1_000_000 - 59_999));
        assert!(c.needs_renewal(2_000_000));
        for bad in ["", "a.b", "a.b.c.d", "not-a-jwt", &jwt(r#"{"nbf":1}"#)] {
            assert_eq!(jwt_exp(bad), None, "{bad}");
        }
        let opaque = AdminConnection::new("http://x/", Secret::new("opaque"));
        assert!(!opaque.needs_renewal(i64::MAX));
    }

    #[test]
    fn endpoints_carry_the_api_version() {
        let c = AdminConnection::new("http://x/t/", Secret::new("t"));
        assert_eq!(
            c.endpoint("/_apis/runtime/runnerscalesets?name=a"),
            "http://x/t/_apis/runtime/runnerscalesets?name=a&api-version=6.0-preview"
        );
    }

    #[test]
    fn config_urls() {
        let repo = TargetScope::Repo {
            owner: "o".into(),
            repo: "r".into(),
        };
        let org = TargetScope::Org { org: "acme".into() };
        assert_eq!(
            config_url("https://api.github.com", &repo),
            "https://github.com/o/r"
        );
        assert_eq!(
            config_url("https://ghes.example/api/v3", &org),
            "https://ghes.example/acme"
        );
        assert_eq!(
            config_url("https://api.sub.ghe.com/", &org),
            "https://sub.ghe.com/acme"
        );
        assert_eq!(
            config_url("http://127.0.0.1:9", &repo),
            "http://127.0.0.1:9/o/r"
        );
        assert_eq!(
            registration_url("https://api.github.com/"),
            "https://api.github.com/actions/runner-registration"
        );
    }
}
