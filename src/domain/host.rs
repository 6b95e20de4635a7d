//! This machine as the store knows it, and the runner names that mark runners as ours.

use serde::{Deserialize, Serialize};

/// The host. Its `id` is generated once per state directory (never the hostname), so
/// two daemons with their own state directories never take each other's runners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// 16 lowercase hex digits.
    pub id: String,
    pub name: String,
    pub os: String,
    pub arch: String,
    /// How many runners may live here at once, across all profiles.
    pub capacity: u32,
    /// `ws://` or `wss://` URL of the coordinator; `None` = standalone.
    pub coordinator: Option<String>,
    /// File holding this host's coordinator token (never the token itself).
    pub coordinator_token_file: Option<std::path::PathBuf>,
    /// PEM CA certificates trusted for a `wss://` coordinator, besides the web PKI
    /// roots (a private pool's own CA).
    pub coordinator_ca_file: Option<std::path::PathBuf>,
    /// The owner's opt-in to plain `ws://` off loopback (`coordinator_insecure=true`).
    pub coordinator_insecure: bool,
    /// Set by `drain`: start nothing new, let busy runners finish.
    pub draining: bool,
    /// How runners are contained (see `isolation::effective`).
    pub isolation: super::Isolation,
    /// The uids this host owns for its runners, one per live attempt.
    pub runner_uids: Option<super::UidRange>,
    /// How long ended attempts, their samples and their logs are kept.
    pub retention_secs: u64,
    /// The most the logs directory may hold; the oldest logs of ended attempts go
    /// first.
    pub logs_max_bytes: u64,
    /// Free space the state directory's filesystem keeps: under it the daemon starts
    /// no runners, and it starts them again above twice it (`reconcile::disk`); 0
    /// never holds starts.
    pub disk_reserve_bytes: u64,
    /// Variables every runner of this host gets unless its profile sets them too
    /// (`env.NAME=VALUE`; not for secrets).
    #[serde(default)]
    pub env: super::runner_env::EnvMap,
    /// The actions-runner version the daemon keeps its managed installs at
    /// (`host set runner_version=2.330.0`); `None` is the newest the downloads API
    /// lists (`runner_version=latest`).
    pub runner_version: Option<String>,
    /// Where runner roots, caches and kept workspaces live (`host set
    /// runtime_root=PATH`); `None` is the state directory.
    #[serde(default)]
    pub runtime_root: Option<std::path::PathBuf>,
    /// The most the dependency caches may hold; the least recently used slots go
    /// first (`host set cache_cap=SIZE`).
    #[serde(default = "default_cache_cap")]
    pub cache_cap_bytes: u64,
}

fn default_cache_cap() -> u64 {
    super::caches::DEFAULT_CACHE_CAP_BYTES
}

/// Ended attempts, their samples and logs are kept this long unless `host set
/// retention=` says otherwise.
pub const DEFAULT_RETENTION_SECS: u64 = 14 * 86_400;
/// The logs directory's cap unless `host set logs_max=` says otherwise.
pub const DEFAULT_LOGS_MAX_BYTES: u64 = 1 << 30;
/// The free space kept unless `host set disk_reserve=` says otherwise: room for the
/// store to record every runner's end and for cleanups to run, which is also where
/// `doctor`'s disk check fails.
pub const DEFAULT_DISK_RESERVE_BYTES: u64 = 256 << 20;

/// The `host set` keys `top` edits in place, in the order `host show` prints them:
/// their values need nothing but themselves to check. The others name files, users,
/// releases or addresses, which [`crate::store::edit_host`]'s probe checks on the disk.
pub const PLAIN_KEYS: &[&str] = &[
    "capacity",
    "coordinator_insecure",
    "isolation",
    "retention",
    "logs_max",
    "disk_reserve",
    "cache_cap",
];

/// Every key `host set` takes: the host row's ([`Host::apply_setting`]) and those kept
/// beside it (`host_settings::Beside`).
pub const SETTABLE_KEYS: &[&str] = &[
    "capacity",
    "coordinator",
    "coordinator_token_file",
    "coordinator_ca_file",
    "coordinator_insecure",
    "isolation",
    "runner_uids",
    "retention",
    "logs_max",
    "disk_reserve",
    "env.NAME",
    "runner_version",
    "runtime_root",
    "cache_cap",
    "release_source",
    "webhook_listen",
    "webhook_secret_file",
    "usage_retention",
    "cost_per_cpu_hour",
    "cost_per_gib_hour",
    "usage_metrics_top",
];

/// The longest retention `host set retention=` takes: a year.
const MAX_RETENTION_SECS: u64 = 365 * 86_400;
/// The smallest logs cap: below it a busy host would drop logs of attempts ended
/// minutes ago.
const MIN_LOGS_MAX: u64 = 16 << 20;
/// The longest coordinator URL `host set` takes: far past any real one (a host name
/// is at most 253 characters), short enough that the books never hold a page of it.
const MAX_URL_LEN: usize = 2048;

impl Host {
    /// A host with every setting at its default: what a new store records (with this
    /// machine's facts), and the tests' hosts. A new setting gets its default here,
    /// once.
    pub fn new(id: String, name: String, os: &str, arch: &str, capacity: u32) -> Host {
        Host {
            id,
            name,
            os: os.into(),
            arch: arch.into(),
            capacity,
            coordinator: None,
            coordinator_token_file: None,
            coordinator_ca_file: None,
            coordinator_insecure: false,
            draining: false,
            isolation: super::Isolation::Auto,
            runner_uids: None,
            retention_secs: DEFAULT_RETENTION_SECS,
            logs_max_bytes: DEFAULT_LOGS_MAX_BYTES,
            disk_reserve_bytes: DEFAULT_DISK_RESERVE_BYTES,
            env: Default::default(),
            runner_version: None,
            runtime_root: None,
            cache_cap_bytes: super::caches::DEFAULT_CACHE_CAP_BYTES,
        }
    }

    /// Applies one `host set` key of the host row (or an `env.NAME`), checking its
    /// value as far as the value alone tells; an empty value unsets an optional one.
    /// The one validation of these keys, shared by `host set` and `top` through
    /// `store::edit_host` (which checks the disk after). Any other key is refused.
    pub fn apply_setting(&mut self, key: &str, value: &str) -> Result<(), super::Invalid> {
        use super::validate;
        let path = |value: &str| -> Result<_, super::Invalid> {
            match value {
                "" => Ok(None),
                v => validate::path(key, v).map(Some),
            }
        };
        match key {
            "capacity" => {
                self.capacity =
                    validate::number_in(key, value, 1, validate::MAX_CAPACITY as u64)? as u32
            }
            "coordinator_insecure" => self.coordinator_insecure = validate::boolean(key, value)?,
            "isolation" => self.isolation = super::Isolation::parse(key, value)?,
            "retention" => {
                self.retention_secs = validate::seconds_in(key, value, 3_600, MAX_RETENTION_SECS)?
            }
            "logs_max" => {
                let b = super::isolation::parse_bytes(key, value)?;
                if b < MIN_LOGS_MAX {
                    return Err(super::Invalid::new(
                        key,
                        format!("is {value}; the logs need at least 16 MiB"),
                    ));
                }
                self.logs_max_bytes = b;
            }
            "disk_reserve" => self.disk_reserve_bytes = super::isolation::parse_bytes(key, value)?,
            "cache_cap" => self.cache_cap_bytes = super::isolation::parse_bytes(key, value)?,
            "coordinator" => self.coordinator = coordinator_url(key, value)?,
            "coordinator_token_file" => self.coordinator_token_file = path(value)?,
            "coordinator_ca_file" => self.coordinator_ca_file = path(value)?,
            "runtime_root" => {
                self.runtime_root = match value {
                    "" => None,
                    v => Some(super::workspace::runtime_root(key, v)?),
                }
            }
            "runner_version" => self.runner_version = validate::runner_version(key, value)?,
            "runner_uids" => {
                self.runner_uids = match value {
                    "" => None,
                    v => Some(super::UidRange::parse_arg(key, v)?),
                }
            }
            k if k.starts_with(super::runner_env::ENV_PREFIX) => {
                super::runner_env::apply(&mut self.env, key, value)?
            }
            _ => {
                return Err(super::Invalid::new(
                    key,
                    super::validate::unknown_key("host", key, SETTABLE_KEYS),
                ));
            }
        }
        Ok(())
    }

    /// The rules across the host row's keys, which need no disk: `isolation=uids`
    /// needs its uids; a coordinator needs the host's token, and plain `ws://` off
    /// loopback needs the owner's `coordinator_insecure=true`.
    pub fn check(&self) -> Result<(), super::Invalid> {
        use super::Invalid;
        if self.isolation == super::Isolation::Uids && self.runner_uids.is_none() {
            return Err(Invalid::new(
                "isolation",
                "isolation=uids needs runner_uids=START-END (uids with passwd entries the host owns)",
            ));
        }
        if let Some(url) = &self.coordinator
            && !self.coordinator_insecure
            && super::validate::is_plain_off_loopback(url)
        {
            return Err(Invalid::new(
                "coordinator",
                format!(
                    "plain ws:// to {url} is off loopback: {}; use wss:// (with \
                     coordinator_ca_file=PATH for a private CA), or accept the risk with \
                     coordinator_insecure=true",
                    super::validate::PLAIN_TEXT_RISK
                ),
            ));
        }
        if self.coordinator.is_some() && self.coordinator_token_file.is_none() {
            return Err(Invalid::new(
                "coordinator_token_file",
                "a coordinator needs coordinator_token_file=PATH (the host's token)",
            ));
        }
        Ok(())
    }

    /// The first 8 hex digits of the id: what runner names carry.
    pub fn short_id(&self) -> &str {
        short_id(&self.id)
    }

    /// The pool label a profile carries to be directed by a coordinator.
    pub fn pool_label(&self) -> String {
        format!("rm-pool-{}", self.os)
    }
}

/// `coordinator=`: `ws://` or `wss://` with a host and no credentials; empty leaves
/// the pool.
fn coordinator_url(key: &str, value: &str) -> Result<Option<String>, super::Invalid> {
    use super::Invalid;
    if value.is_empty() {
        return Ok(None);
    }
    if value.len() > MAX_URL_LEN {
        return Err(Invalid::new(
            key,
            format!(
                "is {} characters long; a coordinator URL has at most {MAX_URL_LEN}",
                value.len()
            ),
        ));
    }
    let ok = (value.starts_with("ws://") || value.starts_with("wss://"))
        && value.split("://").nth(1).is_some_and(|r| {
            !r.is_empty()
                && !r.contains(char::is_whitespace)
                && !r.contains(char::is_control)
                && !r.contains('@')
        });
    if !ok {
        return Err(Invalid::new(
            key,
            format!("expected ws://HOST:PORT or wss://HOST:PORT (got {value:?})"),
        ));
    }
    Ok(Some(value.to_string()))
}

pub fn short_id(host_id: &str) -> &str {
    &host_id[..host_id.len().min(8)]
}

/// The runner name of an attempt: `rm-<host short id>-<attempt id>`.
pub fn runner_name(host_id: &str, attempt_id: i64) -> String {
    format!("rm-{}-{attempt_id}", short_id(host_id))
}

/// The attempt id in a runner name, if the runner is this host's (its name carries
/// this host's short id). Foreign runners, other hosts' included, give `None`.
pub fn parse_runner_name(host_id: &str, name: &str) -> Option<i64> {
    let rest = name
        .strip_prefix("rm-")?
        .strip_prefix(short_id(host_id))?
        .strip_prefix('-')?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) || rest.starts_with('0') {
        return None;
    }
    rest.parse().ok()
}

/// This machine's OS as runner-manager and GitHub's download names spell it.
pub fn current_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "macos",
        "windows" => "windows",
        _ => "linux",
    }
}

pub fn current_arch() -> &'static str {
    std::env::consts::ARCH
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123abcd89ef4567";

    #[test]
    fn names_round_trip_and_refuse_foreign_runners() {
        let n = runner_name(ID, 42);
        assert_eq!(n, "rm-0123abcd-42");
        assert_eq!(parse_runner_name(ID, &n), Some(42));
        for foreign in [
            "rm-ffffffff-42",
            "rm-0123abcd-",
            "rm-0123abcd-4x",
            "rm-0123abcd-042",
            "my-runner",
            "rm-0123abcd42",
            "rm-0123abcd-42-x",
        ] {
            assert_eq!(parse_runner_name(ID, foreign), None, "{foreign}");
        }
    }

    #[test]
    fn pool_label() {
        let h = Host::new(ID.into(), "h".into(), "linux", "x86_64", 4);
        assert_eq!(h.pool_label(), "rm-pool-linux");
        assert_eq!(h.short_id(), "0123abcd");
    }
}
