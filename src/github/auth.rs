//! Credentials: a PAT read from a file or the environment, or a GitHub App (id, key,
//! installation), and the installation token an App exchanges its JWT for.

use super::error::AuthError;
use super::jwt::AppKey;
use crate::domain::CredentialRef;
use crate::secret::Secret;
use crate::timefmt::Millis;
use std::fmt;
use std::sync::Arc;

/// Installation tokens are replaced this long before they expire, so no request is
/// sent with a token about to lapse in flight.
pub const TOKEN_REFRESH_MARGIN_MS: Millis = 5 * 60_000;

/// A loaded credential. The secret parts print as `***`.
#[derive(Clone)]
pub enum Credential {
    /// A personal access token (classic or fine-grained) or any bearer token.
    Token(Secret),
    App {
        app_id: u64,
        key: Arc<AppKey>,
        /// Looked up from the target when absent.
        installation_id: Option<u64>,
    },
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Token(_) => f.write_str("Token(***)"),
            Credential::App {
                app_id,
                installation_id,
                ..
            } => write!(
                f,
                "App {{ app_id: {app_id}, installation_id: {installation_id:?}, key: *** }}"
            ),
        }
    }
}

/// Reads the secret a [`CredentialRef`] points at, from the process environment.
pub fn load_credential(r: &CredentialRef) -> Result<Credential, AuthError> {
    load_credential_with(r, |var| std::env::var(var).ok())
}

/// [`load_credential`] with the environment passed in (tests, systemd credentials).
pub fn load_credential_with(
    r: &CredentialRef,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Credential, AuthError> {
    match r {
        CredentialRef::TokenFile { path } => {
            let text = crate::secret::read_secret_file(path).map_err(AuthError::TokenFile)?;
            token(text, || format!("token file {}", path.display()))
        }
        CredentialRef::TokenEnv { var } => {
            let value = env(var).ok_or_else(|| AuthError::TokenEnv { var: var.clone() })?;
            token(Secret::new(value), || {
                format!("environment variable ${var}")
            })
        }
        CredentialRef::App {
            app_id,
            key_path,
            installation_id,
        } => {
            let path = || key_path.display().to_string();
            let pem = crate::secret::read_secret_file(key_path).map_err(AuthError::KeyFile)?;
            let key = AppKey::from_pem(pem.expose()).map_err(|detail| AuthError::AppKey {
                path: path(),
                detail,
            })?;
            Ok(Credential::App {
                app_id: *app_id,
                key: Arc::new(key),
                installation_id: *installation_id,
            })
        }
    }
}

fn token(raw: Secret, source: impl Fn() -> String) -> Result<Credential, AuthError> {
    // A file written by `echo` ends in a newline; a header cannot carry it.
    let trimmed = Secret::new(raw.expose().trim());
    if trimmed.is_empty() {
        return Err(AuthError::EmptyToken { source: source() });
    }
    Ok(Credential::Token(trimmed))
}

/// An App installation token and when GitHub says it expires.
#[derive(Debug, Clone)]
pub struct InstallationToken {
    pub token: Secret,
    pub expires_at: Millis,
}

impl InstallationToken {
    /// Whether the token can still be used at `now` (with the refresh margin).
    pub fn is_fresh(&self, now: Millis) -> bool {
        now < self.expires_at - TOKEN_REFRESH_MARGIN_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tmp(name: &str, body: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rm-auth-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        std::fs::write(&p, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }

    #[test]
    fn token_file_is_trimmed() {
        let p = tmp("tok", "ghp_abc123\n");
        let c = load_credential(&CredentialRef::TokenFile { path: p }).unwrap();
        match &c {
            Credential::Token(s) => assert_eq!(s.expose(), "ghp_abc123"),
            _ => panic!("not a token"),
        }
        assert_eq!(format!("{c:?}"), "Token(***)");
    }

    #[test]
    fn token_errors_name_the_place_not_the_secret() {
        let p = tmp("empty", " \n");
        let e = load_credential(&CredentialRef::TokenFile { path: p.clone() }).unwrap_err();
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        let e = load_credential(&CredentialRef::TokenFile {
            path: "/nonexistent/rm-token".into(),
        })
        .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/rm-token"), "{e}");
        let e = load_credential_with(&CredentialRef::TokenEnv { var: "GH_T".into() }, |_| None)
            .unwrap_err();
        assert_eq!(e, AuthError::TokenEnv { var: "GH_T".into() });
        let ok = load_credential_with(&CredentialRef::TokenEnv { var: "GH_T".into() }, |v| {
            (v == "GH_T").then(|| " tok ".to_string())
        })
        .unwrap();
        assert!(matches!(ok, Credential::Token(s) if s.expose() == "tok"));
    }

    #[test]
    fn app_key_loads_and_bad_key_is_refused() {
        let pem = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/github/app-key.pem"
        ));
        let c = load_credential(&CredentialRef::App {
            app_id: 7,
            key_path: tmp("goodkey", pem),
            installation_id: None,
        })
        .unwrap();
        assert!(format!("{c:?}").contains("key: ***"));
        let bad = tmp("badkey", "not a key");
        let e = load_credential(&CredentialRef::App {
            app_id: 7,
            key_path: bad,
            installation_id: Some(1),
        })
        .unwrap_err();
        assert!(e.to_string().contains("no PEM block"), "{e}");
    }

    #[test]
    fn tokens_refresh_five_minutes_early() {
        let t = InstallationToken {
            token: Secret::new("ghs_x"),
            expires_at: 3_600_000,
        };
        assert!(t.is_fresh(0));
        assert!(t.is_fresh(3_600_000 - 300_001));
        assert!(!t.is_fresh(3_600_000 - 300_000));
    }
}
