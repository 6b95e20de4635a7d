//! Targets: where runners register (a repository or an organization on github.com,
//! GHES or GHE.com) and the reference to the credentials used there.

use super::validate::{self, Invalid};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const GITHUB_API_URL: &str = "https://api.github.com";
pub const DEFAULT_POLL_INTERVAL_SECS: u64 = 5;
/// Requests a target's credential may have in flight at once, unless set otherwise.
/// A JIT config takes about 600 ms when GitHub is 120 ms away, so this bounds a burst
/// to about 40 runners a second: 24 start 60 queued jobs within 5 s (8 took 8 s).
/// It is a quarter of GitHub's 100 concurrent requests, so four targets may share a
/// credential. It does not bound requests per minute: a long burst meets GitHub's
/// secondary limits whatever this is, and their `retry-after` holds every worker.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 24;
/// GitHub's own ceiling: 100 concurrent requests per credential.
pub const MAX_IN_FLIGHT: u32 = 100;
/// The points a minute per REST endpoint github.com allows before its secondary limit
/// (`reconcile::points`), unless a GHES admin set another.
pub const DEFAULT_SECONDARY_LIMIT: u32 = 900;
/// The range `secondary_limit` takes: from a JIT config's 5 points, 6 times over, to
/// a thousand times GitHub's.
pub const SECONDARY_LIMITS: std::ops::RangeInclusive<u32> = 30..=900_000;
/// The keys `target set` accepts.
pub const SETTABLE_KEYS: &[&str] = &[
    "api_url",
    "poll_interval",
    "max_in_flight",
    "secondary_limit",
    "token_file",
    "token_env",
    "app_id",
    "app_key",
    "installation_id",
    "repos",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetScope {
    Repo { owner: String, repo: String },
    Org { org: String },
}

impl TargetScope {
    /// Whether the repository `owner/repo` is this target's (GitHub's names ignore
    /// case).
    pub fn covers(&self, repo: &str) -> bool {
        match self {
            TargetScope::Repo { owner, repo: name } => {
                repo.split_once('/').is_some_and(|(o, r)| {
                    o.eq_ignore_ascii_case(owner) && r.eq_ignore_ascii_case(name)
                })
            }
            TargetScope::Org { org } => repo
                .split_once('/')
                .is_some_and(|(o, _)| o.eq_ignore_ascii_case(org)),
        }
    }

    /// `owner/repo` or `org`, as users write it.
    pub fn display(&self) -> String {
        match self {
            TargetScope::Repo { owner, repo } => format!("{owner}/{repo}"),
            TargetScope::Org { org } => org.clone(),
        }
    }
}

/// Where the secret lives. The store keeps only this reference, never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CredentialRef {
    TokenFile {
        path: PathBuf,
    },
    TokenEnv {
        var: String,
    },
    App {
        app_id: u64,
        key_path: PathBuf,
        installation_id: Option<u64>,
    },
}

impl CredentialRef {
    /// A one-line description that names where the secret is, never what it is.
    pub fn describe(&self) -> String {
        match self {
            CredentialRef::TokenFile { path } => format!("token file {}", path.display()),
            CredentialRef::TokenEnv { var } => format!("token env ${var}"),
            CredentialRef::App {
                app_id,
                key_path,
                installation_id,
            } => match installation_id {
                Some(i) => format!("app {app_id} key {} installation {i}", key_path.display()),
                None => format!("app {app_id} key {}", key_path.display()),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub name: String,
    pub scope: TargetScope,
    /// API base without a trailing `/`: `https://api.github.com`, `https://HOST/api/v3`,
    /// `https://api.SUB.ghe.com`.
    pub api_url: String,
    pub credential: CredentialRef,
    pub poll_interval_secs: u64,
    /// For an org target: the repositories to poll for queued jobs. Empty means all
    /// repositories the credentials can see.
    pub repos: Vec<String>,
    /// Requests its credential may have in flight at once (1..=`MAX_IN_FLIGHT`),
    /// across the target's loop, its I/O workers and its scale set clients.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u32,
    /// Points a minute per REST endpoint its GitHub allows (`DEFAULT_SECONDARY_LIMIT` on
    /// github.com); `None` for a GHES whose admin turned secondary limits off. The
    /// daemon keeps its credential's requests below it.
    #[serde(default = "default_secondary_limit")]
    pub secondary_limit: Option<u32>,
}

fn default_max_in_flight() -> u32 {
    DEFAULT_MAX_IN_FLIGHT
}

fn default_secondary_limit() -> Option<u32> {
    Some(DEFAULT_SECONDARY_LIMIT)
}

/// `secondary_limit` as users write it: points a minute, or `off`.
pub fn secondary_limit_text(limit: Option<u32>) -> String {
    limit.map_or_else(|| "off".to_string(), |n| n.to_string())
}

impl Target {
    /// Applies one `KEY=VALUE` of `target set`. The caller validates nothing else: each
    /// key checks its own value here, and [`Target::validate`] checks the whole.
    pub fn apply_setting(&mut self, key: &str, value: &str) -> Result<(), Invalid> {
        match key {
            "api_url" => {
                self.api_url = if value.is_empty() {
                    GITHUB_API_URL.to_string()
                } else {
                    validate::api_url(key, value)?
                }
            }
            "poll_interval" => {
                self.poll_interval_secs =
                    validate::seconds_in(key, value, 1, validate::MAX_POLL_INTERVAL_SECS)?
            }
            "token_file" => {
                self.credential = CredentialRef::TokenFile {
                    path: validate::path(key, value)?,
                }
            }
            "token_env" => {
                self.credential = CredentialRef::TokenEnv {
                    var: validate::env_var_name(key, value)?,
                }
            }
            "app_id" | "app_key" | "installation_id" => {
                let (mut app_id, mut key_path, mut inst) = match &self.credential {
                    CredentialRef::App {
                        app_id,
                        key_path,
                        installation_id,
                    } => (Some(*app_id), Some(key_path.clone()), *installation_id),
                    _ => (None, None, None),
                };
                match key {
                    "app_id" => app_id = Some(validate::number_in(key, value, 1, u64::MAX)?),
                    "app_key" => key_path = Some(validate::path(key, value)?),
                    _ => {
                        inst = if value.is_empty() {
                            None
                        } else {
                            Some(validate::number_in(key, value, 1, u64::MAX)?)
                        }
                    }
                }
                match (app_id, key_path) {
                    (Some(app_id), Some(key_path)) => {
                        self.credential = CredentialRef::App {
                            app_id,
                            key_path,
                            installation_id: inst,
                        }
                    }
                    _ => {
                        return Err(Invalid::new(
                            key,
                            "a GitHub App needs both app_id and app_key; set them together",
                        ));
                    }
                }
            }
            "max_in_flight" => {
                self.max_in_flight =
                    validate::number_in(key, value, 1, u64::from(MAX_IN_FLIGHT))? as u32
            }
            "secondary_limit" => {
                self.secondary_limit = match value {
                    "" => Some(DEFAULT_SECONDARY_LIMIT),
                    "off" => None,
                    _ => Some(
                        validate::number_in(
                            key,
                            value,
                            u64::from(*SECONDARY_LIMITS.start()),
                            u64::from(*SECONDARY_LIMITS.end()),
                        )
                        .map_err(|_| {
                            Invalid::new(
                                key,
                                format!(
                                    "give points a minute per endpoint, {} to {} (github.com: \
                                     {DEFAULT_SECONDARY_LIMIT}), or off",
                                    SECONDARY_LIMITS.start(),
                                    SECONDARY_LIMITS.end()
                                ),
                            )
                        })? as u32,
                    ),
                }
            }
            "repos" => {
                if matches!(self.scope, TargetScope::Repo { .. }) {
                    return Err(Invalid::new(
                        key,
                        "only an organization target polls a list of repositories",
                    ));
                }
                let mut repos = Vec::new();
                for r in value.split(',').filter(|s| !s.is_empty()) {
                    let r = validate::repo_name(key, r)?;
                    if !repos.contains(&r) {
                        repos.push(r);
                    }
                }
                self.repos = repos;
            }
            _ => {
                return Err(Invalid::new(
                    key,
                    validate::unknown_key("target", key, SETTABLE_KEYS),
                ));
            }
        }
        Ok(())
    }

    /// The whole target, checked.
    pub fn validate(&self) -> Result<(), Invalid> {
        validate::name("NAME", &self.name)?;
        match &self.scope {
            TargetScope::Repo { owner, repo } => {
                validate::owner("--repo", owner)?;
                validate::repo_name("--repo", repo)?;
            }
            TargetScope::Org { org } => {
                validate::owner("--org", org)?;
            }
        }
        validate::api_url("api_url", &self.api_url)?;
        if self.poll_interval_secs == 0
            || self.poll_interval_secs > validate::MAX_POLL_INTERVAL_SECS
        {
            return Err(Invalid::new("poll_interval", "out of range"));
        }
        if !(1..=MAX_IN_FLIGHT).contains(&self.max_in_flight) {
            return Err(Invalid::new(
                "max_in_flight",
                format!("give 1 to {MAX_IN_FLIGHT}"),
            ));
        }
        if self
            .secondary_limit
            .is_some_and(|n| !SECONDARY_LIMITS.contains(&n))
        {
            return Err(Invalid::new(
                "secondary_limit",
                format!(
                    "give {} to {}, or off",
                    SECONDARY_LIMITS.start(),
                    SECONDARY_LIMITS.end()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Target {
        Target {
            name: "octo".into(),
            scope: TargetScope::Repo {
                owner: "octo".into(),
                repo: "app".into(),
            },
            api_url: GITHUB_API_URL.into(),
            credential: CredentialRef::TokenEnv {
                var: "GH_TOKEN".into(),
            },
            poll_interval_secs: DEFAULT_POLL_INTERVAL_SECS,
            repos: vec![],
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            secondary_limit: Some(900),
        }
    }

    #[test]
    fn settings_apply_and_validate() {
        let mut x = t();
        x.apply_setting("poll_interval", "10").unwrap();
        x.apply_setting("api_url", "https://ghe.corp/api/v3/")
            .unwrap();
        assert_eq!(x.api_url, "https://ghe.corp/api/v3");
        x.apply_setting("api_url", "").unwrap();
        assert_eq!(x.api_url, GITHUB_API_URL);
        x.apply_setting("token_file", "/etc/rm/token").unwrap();
        assert_eq!(x.credential.describe(), "token file /etc/rm/token");
        x.apply_setting("max_in_flight", "100").unwrap();
        assert_eq!(x.max_in_flight, 100);
        x.apply_setting("max_in_flight", "1").unwrap();
        assert_eq!(x.max_in_flight, 1);
        assert!(x.validate().is_ok());
        x.max_in_flight = 0;
        assert_eq!(x.validate().unwrap_err().arg, "max_in_flight");
    }

    #[test]
    fn app_credentials_need_both_parts() {
        let mut x = t();
        assert_eq!(x.apply_setting("app_id", "12").unwrap_err().arg, "app_id");
        x.credential = CredentialRef::App {
            app_id: 1,
            key_path: "/k.pem".into(),
            installation_id: None,
        };
        x.apply_setting("installation_id", "99").unwrap();
        assert_eq!(
            x.credential,
            CredentialRef::App {
                app_id: 1,
                key_path: "/k.pem".into(),
                installation_id: Some(99)
            }
        );
    }

    #[test]
    fn bad_settings() {
        let mut x = t();
        for (k, v) in [
            ("poll_interval", "0"),
            ("poll_interval", "x"),
            ("api_url", "ftp://x"),
            ("token_file", "rel"),
            ("token_env", "A B"),
            ("repos", "a"),
            ("max_in_flight", "0"),
            ("max_in_flight", "101"),
            ("max_in_flight", "-1"),
            ("max_in_flight", "many"),
            ("color", "red"),
        ] {
            let before = x.clone();
            assert_eq!(x.apply_setting(k, v).unwrap_err().arg, k);
            assert_eq!(x, before, "{k} changed the target although refused");
        }
    }

    #[test]
    fn describe_never_holds_a_secret_value() {
        let c = CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        };
        assert_eq!(c.describe(), "token env $GH_TOKEN");
    }
}
