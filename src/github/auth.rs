//! Credentials: a PAT read from a file or the environment, or a GitHub App (id, key,
//! installation), and the installation token an App exchanges its JWT for; and whether
//! a credential's source changed since it was read ([`CredentialSource`],
//! [`check_source`]), so a fixed token is picked up without a restart.

use super::error::AuthError;
use super::jwt::AppKey;
use crate::domain::CredentialRef;
use crate::secret::{FileStamp, Secret, SecretFileError};
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

impl Credential {
    /// Whether `other` holds the same secret (a token file read again after a 401:
    /// did someone fix it?).
    pub fn same_as(&self, other: &Credential) -> bool {
        match (self, other) {
            (Credential::Token(a), Credential::Token(b)) => a == b,
            (
                Credential::App {
                    app_id: a,
                    key: ka,
                    installation_id: ia,
                },
                Credential::App {
                    app_id: b,
                    key: kb,
                    installation_id: ib,
                },
            ) => a == b && ia == ib && ka.same_key(kb),
            _ => false,
        }
    }
}

/// Where a loaded credential came from, as it was when read: the target's reference,
/// and the stamp of the file it names (none for an environment variable, which cannot
/// change under a running process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSource {
    pub reference: CredentialRef,
    pub stamp: Option<FileStamp>,
}

/// The file a credential reference reads, if it reads one.
pub fn credential_file(r: &CredentialRef) -> Option<&std::path::Path> {
    match r {
        CredentialRef::TokenFile { path } => Some(path),
        CredentialRef::App { key_path, .. } => Some(key_path),
        CredentialRef::TokenEnv { .. } => None,
    }
}

/// The stamp of the file `r` reads (`None`: it reads none), or why a read would
/// refuse it now. A `stat`, not a read: cheap enough for every pass.
pub fn stamp_credential(r: &CredentialRef) -> Result<Option<FileStamp>, SecretFileError> {
    credential_file(r)
        .map(crate::secret::stamp_secret_file)
        .transpose()
}

/// What a look at a credential's source says, against the one the client was built
/// from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceCheck {
    /// Nothing changed.
    Same,
    /// The reference was edited, or its file written, replaced, or put right: build
    /// the client again.
    Changed,
    /// The file is one a read would refuse now (opened to others, another owner,
    /// gone): the credential read before serves on, and this is shown.
    Refused(String),
}

/// Whether the credential behind a client changed: `built` is what it was built from,
/// `reference` the target's now, `seen` what [`stamp_credential`] says of it now.
pub fn check_source(
    built: &CredentialSource,
    reference: &CredentialRef,
    seen: &Result<Option<FileStamp>, SecretFileError>,
) -> SourceCheck {
    if *reference != built.reference {
        return SourceCheck::Changed;
    }
    match seen {
        Err(e) => SourceCheck::Refused(e.to_string()),
        Ok(stamp) if *stamp == built.stamp => SourceCheck::Same,
        Ok(_) => SourceCheck::Changed,
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
    fn a_source_changes_with_its_reference_or_its_file_and_a_refused_file_is_told() {
        let stamp = |ino| FileStamp {
            dev: 1,
            ino,
            len: 40,
            mtime_ns: 5,
            ctime_ns: 5,
        };
        let file = CredentialRef::TokenFile {
            path: "/etc/rm/token".into(),
        };
        let built = CredentialSource {
            reference: file.clone(),
            stamp: Some(stamp(7)),
        };
        assert_eq!(
            check_source(&built, &file, &Ok(Some(stamp(7)))),
            SourceCheck::Same
        );
        // Written in place or renamed over: another stamp.
        assert_eq!(
            check_source(&built, &file, &Ok(Some(stamp(8)))),
            SourceCheck::Changed
        );
        let written = FileStamp {
            mtime_ns: 6,
            ..stamp(7)
        };
        assert_eq!(
            check_source(&built, &file, &Ok(Some(written))),
            SourceCheck::Changed
        );
        // `target set token_file=`: another reference, whatever its file says.
        let other = CredentialRef::TokenFile {
            path: "/etc/rm/token2".into(),
        };
        assert_eq!(
            check_source(&built, &other, &Ok(Some(stamp(7)))),
            SourceCheck::Changed
        );
        // Opened to others: told, and the client kept.
        let open = Err(SecretFileError::TooOpen {
            path: "/etc/rm/token".into(),
            mode: 0o644,
        });
        match check_source(&built, &file, &open) {
            SourceCheck::Refused(why) => assert!(why.contains("chmod 600"), "{why}"),
            other => panic!("{other:?}"),
        }
        // An environment variable has no file: it never changes under the daemon.
        let env = CredentialRef::TokenEnv { var: "GH".into() };
        let built = CredentialSource {
            reference: env.clone(),
            stamp: None,
        };
        assert_eq!(stamp_credential(&env), Ok(None));
        assert_eq!(check_source(&built, &env, &Ok(None)), SourceCheck::Same);
    }

    #[test]
    fn the_same_secret_read_again_is_the_same_credential() {
        let a = Credential::Token(Secret::new("ghp_a"));
        assert!(a.same_as(&Credential::Token(Secret::new("ghp_a"))));
        assert!(!a.same_as(&Credential::Token(Secret::new("ghp_b"))));
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
