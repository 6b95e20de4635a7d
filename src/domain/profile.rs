//! Pool profiles (`ScalePolicy`): one kind of runner for one target, with its ceilings,
//! timeouts and mode. Every edit goes through [`ScalePolicy::apply_setting`] and
//! [`ScalePolicy::validate`], the CLI's and the TUI's alike: both name their edits as
//! [`Change`]s, which `store::edit_profile` applies with [`ScalePolicy::apply_change`].

use super::labels;
use super::validate::{self, Invalid};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 300;
pub const DEFAULT_BOOTSTRAP_TIMEOUT_SECS: u64 = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Read demand and start runners for it.
    Autoscale,
    /// Read demand and start nothing.
    Monitor,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Autoscale => "autoscale",
            Mode::Monitor => "monitor",
        }
    }
}

/// Where a profile's demand comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DemandSource {
    /// REST polling of queued runs and jobs.
    Poll,
    /// GitHub's runner scale set long poll.
    Scaleset,
}

impl DemandSource {
    pub fn as_str(self) -> &'static str {
        match self {
            DemandSource::Poll => "poll",
            DemandSource::Scaleset => "scaleset",
        }
    }
}

/// One edit of a stored profile, as `profile set` and `top` make them; a list of them
/// is applied and validated whole by `store::edit_profile`, the one edit path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A `KEY=VALUE` as the user typed it (`profile set`), read by `apply_setting`.
    Setting(String),
    /// Resumed (`true`) or paused.
    Active(bool),
    /// A new `max`, refused by name when out of range (`top` steps it by one).
    Max(i64),
}

impl Change {
    /// Whether this change names the runner directory, which must then be checked
    /// on disk before the write.
    pub fn names_runner_dir(&self) -> bool {
        match self {
            Change::Setting(kv) => validate::key_value(kv).is_ok_and(|(k, _)| k == "runner_dir"),
            Change::Active(_) | Change::Max(_) => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalePolicy {
    pub name: String,
    pub target: String,
    /// The host that owns (runs) this profile's runners.
    pub host_id: String,
    /// The labels a runner of this profile carries, defaults included.
    pub labels: Vec<String>,
    /// Whether `self-hosted` and the OS/arch labels were added to the user's labels.
    pub default_labels: bool,
    pub min_capacity: u32,
    pub max_capacity: u32,
    /// An unpacked actions-runner release; `None` = `STATE_DIR/runner`.
    pub runner_dir: Option<PathBuf>,
    /// Runner group id or name; `None` = the Default group (id 1).
    pub runner_group: Option<String>,
    pub idle_timeout_secs: u64,
    pub bootstrap_timeout_secs: u64,
    /// Optional ceiling on one job's run time.
    pub job_timeout_secs: Option<u64>,
    pub mode: Mode,
    pub active: bool,
    pub allow_public: bool,
    /// Run the runner as this unprivileged user (daemon must be root).
    pub run_as: Option<String>,
    pub demand: DemandSource,
    /// Containment limits of each runner's cgroup: bytes, thousandths of a CPU, and
    /// processes. `None` = no limit.
    pub memory_max: Option<u64>,
    pub cpu_max: Option<u32>,
    pub pids_max: Option<u32>,
    /// Whether those limits must be in effect for its runners to start (`required`,
    /// the default) or may go unenforced where the host cannot apply them.
    #[serde(default)]
    pub limits: super::isolation::LimitsMode,
    /// Variables its runners get, over the host's (`env.NAME=VALUE`; not for secrets).
    #[serde(default)]
    pub env: super::runner_env::EnvMap,
    /// Programs its jobs need on the runner's `PATH` (`tools=git,docker`): while one
    /// is missing the profile starts nothing (`reconcile::fitness`).
    #[serde(default)]
    pub tools: Vec<String>,
    /// How its runners execute: natively (the default) or in a rootless OCI container.
    #[serde(default)]
    pub execution: super::execution::Execution,
    /// The image an `oci` runner's container runs, pinned by digest.
    #[serde(default)]
    pub image: Option<String>,
    /// The bytes an `oci` runner's container may write; `None` = the default.
    #[serde(default)]
    pub disk_max: Option<u64>,
    /// Dependency caches (`caches=on|off`); `None` is on for a repository target and
    /// off for an organization's (`domain::caches::enabled`).
    #[serde(default)]
    pub caches: Option<bool>,
    /// Whether `_work` is kept between jobs (`workspace=persistent`).
    #[serde(default)]
    pub workspace: super::workspace::Workspace,
    /// Whether a job its runner lost to the host is run again, and at most how many an
    /// hour (`rerun_lost=on|N`); `None` is off (`domain::rerun`).
    #[serde(default)]
    pub rerun_lost: Option<u32>,
    /// Incremented by every edit; an edit names the revision it read.
    pub revision: u64,
}

/// The keys `profile set` accepts, in the order `profile show` prints them.
pub const SETTABLE_KEYS: &[&str] = &[
    "target",
    "labels",
    "default_labels",
    "min",
    "max",
    "runner_dir",
    "runner_group",
    "idle_timeout",
    "bootstrap_timeout",
    "job_timeout",
    "mode",
    "active",
    "allow_public",
    "run_as",
    "demand",
    "memory_max",
    "cpu_max",
    "pids_max",
    "limits",
    "env.NAME",
    "tools",
    "execution",
    "image",
    "disk_max",
    "caches",
    "workspace",
    "rerun_lost",
];

impl ScalePolicy {
    /// A new profile with the defaults; the caller sets what the user gave.
    pub fn new(name: &str, target: &str, host_id: &str) -> ScalePolicy {
        ScalePolicy {
            name: name.into(),
            target: target.into(),
            host_id: host_id.into(),
            labels: Vec::new(),
            default_labels: true,
            min_capacity: 0,
            max_capacity: 1,
            runner_dir: None,
            runner_group: None,
            idle_timeout_secs: DEFAULT_IDLE_TIMEOUT_SECS,
            bootstrap_timeout_secs: DEFAULT_BOOTSTRAP_TIMEOUT_SECS,
            job_timeout_secs: None,
            mode: Mode::Autoscale,
            active: true,
            allow_public: false,
            run_as: None,
            demand: DemandSource::Poll,
            memory_max: None,
            cpu_max: None,
            pids_max: None,
            limits: Default::default(),
            env: Default::default(),
            tools: Vec::new(),
            execution: Default::default(),
            image: None,
            disk_max: None,
            caches: None,
            workspace: Default::default(),
            rerun_lost: None,
            revision: 0,
        }
    }

    /// The labels as the user gave them (defaults removed), for display and editing.
    pub fn user_labels(&self, os: &str, arch: &str) -> Vec<String> {
        if !self.default_labels {
            return self.labels.clone();
        }
        let defaults = labels::with_defaults(&[], os, arch);
        self.labels
            .iter()
            .filter(|l| !defaults.iter().any(|d| d.eq_ignore_ascii_case(l)))
            .cloned()
            .collect()
    }

    /// Sets the labels from the user's list, adding the defaults when `default_labels`.
    pub fn set_labels(
        &mut self,
        arg: &str,
        user: &[String],
        os: &str,
        arch: &str,
    ) -> Result<(), Invalid> {
        labels::validate(arg, user)?;
        let full = if self.default_labels {
            labels::with_defaults(user, os, arch)
        } else {
            user.to_vec()
        };
        self.labels = labels::validate(arg, &full)?;
        Ok(())
    }

    /// Applies one `KEY=VALUE` of `profile set`. `os`/`arch` are the owning host's, for
    /// the default labels.
    /// A refused setting leaves the profile as it was.
    pub fn apply_setting(
        &mut self,
        key: &str,
        value: &str,
        os: &str,
        arch: &str,
    ) -> Result<(), Invalid> {
        let mut next = self.clone();
        next.apply_one(key, value, os, arch)?;
        *self = next;
        Ok(())
    }

    /// Applies one [`Change`]; on error the profile is unchanged. Checks only the
    /// change itself: [`ScalePolicy::validate`] checks the whole afterwards.
    pub fn apply_change(&mut self, change: &Change, os: &str, arch: &str) -> Result<(), Invalid> {
        match change {
            Change::Setting(kv) => {
                let (key, value) = validate::key_value(kv)?;
                self.apply_setting(key, value, os, arch)
            }
            Change::Active(active) => {
                self.active = *active;
                Ok(())
            }
            Change::Max(max) => {
                self.max_capacity =
                    validate::whole_in("max", *max, 0, validate::MAX_CAPACITY as u64)? as u32;
                Ok(())
            }
        }
    }

    fn apply_one(&mut self, key: &str, value: &str, os: &str, arch: &str) -> Result<(), Invalid> {
        let opt = |v: &str| {
            if v.is_empty() {
                None
            } else {
                Some(v.to_string())
            }
        };
        match key {
            "target" => self.target = validate::name(key, value)?,
            "labels" => {
                let user = labels::parse_list(value);
                self.set_labels(key, &user, os, arch)?;
            }
            "default_labels" => {
                let user = self.user_labels(os, arch);
                self.default_labels = validate::boolean(key, value)?;
                self.set_labels(key, &user, os, arch)?;
            }
            "min" | "min_capacity" => {
                self.min_capacity =
                    validate::number_in(key, value, 0, validate::MAX_CAPACITY as u64)? as u32
            }
            "max" | "max_capacity" => {
                self.max_capacity =
                    validate::number_in(key, value, 0, validate::MAX_CAPACITY as u64)? as u32
            }
            "runner_dir" => {
                self.runner_dir = if value.is_empty() {
                    None
                } else {
                    Some(validate::path(key, value)?)
                }
            }
            "runner_group" => self.runner_group = runner_group(key, value)?,
            "idle_timeout" => {
                self.idle_timeout_secs =
                    validate::seconds_in(key, value, 1, validate::MAX_IDLE_TIMEOUT_SECS)?
            }
            "bootstrap_timeout" => {
                self.bootstrap_timeout_secs =
                    validate::seconds_in(key, value, 1, validate::MAX_BOOTSTRAP_TIMEOUT_SECS)?
            }
            "job_timeout" => {
                self.job_timeout_secs = match value {
                    "" | "none" | "0" | "0s" => None,
                    v => Some(validate::seconds_in(
                        key,
                        v,
                        1,
                        validate::MAX_JOB_TIMEOUT_SECS,
                    )?),
                }
            }
            "mode" => {
                self.mode = match value {
                    "autoscale" => Mode::Autoscale,
                    "monitor" => Mode::Monitor,
                    _ => {
                        return Err(Invalid::new(
                            key,
                            format!("expected autoscale or monitor (got {value:?})"),
                        ));
                    }
                }
            }
            "active" => self.active = validate::boolean(key, value)?,
            "paused" => self.active = !validate::boolean(key, value)?,
            "allow_public" => self.allow_public = validate::boolean(key, value)?,
            "run_as" => {
                self.run_as = match opt(value) {
                    None => None,
                    Some(u) => Some(user_name(key, &u)?),
                }
            }
            "demand" => {
                self.demand = match value {
                    "poll" => DemandSource::Poll,
                    "scaleset" => DemandSource::Scaleset,
                    _ => {
                        return Err(Invalid::new(
                            key,
                            format!("expected poll or scaleset (got {value:?})"),
                        ));
                    }
                }
            }
            "memory_max" => self.memory_max = super::isolation::memory_max(key, value)?,
            "cpu_max" => self.cpu_max = super::isolation::cpu_max(key, value)?,
            "pids_max" => self.pids_max = super::isolation::pids_max(key, value)?,
            "limits" => self.limits = super::isolation::LimitsMode::parse(key, value)?,
            "tools" => self.tools = super::runner_env::parse_tools(key, value)?,
            "execution" => self.execution = super::execution::Execution::parse(key, value)?,
            "image" => self.image = super::execution::image(key, value)?,
            "disk_max" => self.disk_max = super::execution::disk_max(key, value)?,
            "caches" => self.caches = super::caches::parse_setting(key, value)?,
            "workspace" => self.workspace = super::workspace::Workspace::parse(key, value)?,
            "rerun_lost" => self.rerun_lost = super::rerun::parse_setting(key, value)?,
            k if k.starts_with(super::runner_env::ENV_PREFIX) => {
                super::runner_env::apply(&mut self.env, key, value)?
            }
            "env" => {
                return Err(Invalid::new(
                    key,
                    "set one variable with env.NAME=VALUE (an empty VALUE removes it)",
                ));
            }
            _ => {
                return Err(Invalid::new(
                    key,
                    validate::unknown_key("profile", key, SETTABLE_KEYS),
                ));
            }
        }
        Ok(())
    }

    /// The whole profile, checked: what no single setting can see on its own.
    pub fn validate(&self) -> Result<(), Invalid> {
        validate::name("NAME", &self.name)?;
        validate::name("target", &self.target)?;
        labels::validate("labels", &self.labels)?;
        if self.min_capacity > self.max_capacity {
            return Err(Invalid::new(
                "min",
                format!(
                    "min ({}) must not be greater than max ({})",
                    self.min_capacity, self.max_capacity
                ),
            ));
        }
        if self.mode == Mode::Autoscale && self.max_capacity == 0 {
            return Err(Invalid::new(
                "max",
                "must be at least 1 for an autoscale profile (use mode=monitor to start nothing)",
            ));
        }
        if self.execution == super::execution::Execution::Oci && self.image.is_none() {
            return Err(Invalid::new(
                "image",
                "execution=oci needs an image pinned by digest: image=REF@sha256:<64 hex>",
            ));
        }
        if let Some(image) = &self.image {
            // A stored image from before transports were refused is refused at the
            // next edit too, naming it.
            super::execution::image("image", image)?;
        }
        super::workspace::check(self, None)?;
        if self.max_capacity > validate::MAX_CAPACITY {
            return Err(Invalid::new(
                "max",
                format!("must be at most {}", validate::MAX_CAPACITY),
            ));
        }
        Ok(())
    }

    /// The runner group its runners register in, as far as the profile alone says
    /// (`domain::runner_group` resolves it to an id).
    pub fn runner_group_ref(&self) -> RunnerGroup<'_> {
        RunnerGroup::of(self.runner_group.as_deref())
    }
}

pub use super::runner_group::{DEFAULT_RUNNER_GROUP_ID, RunnerGroup};

/// A runner group: an id (digits) or a name (1-100 printable characters).
fn runner_group(arg: &str, value: &str) -> Result<Option<String>, Invalid> {
    if value.is_empty() {
        return Ok(None);
    }
    if value.chars().count() > 100 || value.chars().any(|c| c.is_control()) || value.trim() != value
    {
        return Err(Invalid::new(
            arg,
            format!("{value:?} is not a runner group id or name"),
        ));
    }
    if value.bytes().all(|b| b.is_ascii_digit()) && value.parse::<u64>().map_or(true, |n| n == 0) {
        return Err(Invalid::new(
            arg,
            "a runner group id must be a positive number",
        ));
    }
    Ok(Some(value.to_string()))
}

/// A POSIX user name for `run_as`.
fn user_name(arg: &str, value: &str) -> Result<String, Invalid> {
    let ok = value.len() <= 32
        && value.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok && value != "root" {
        Ok(value.to_string())
    } else {
        Err(Invalid::new(
            arg,
            format!("{value:?} is not an unprivileged user name"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> ScalePolicy {
        let mut p = ScalePolicy::new("linux", "octo", "0123abcd89ef4567");
        p.set_labels("--labels", &["gpu".to_string()], "linux", "x86_64")
            .unwrap();
        p.max_capacity = 4;
        p
    }

    fn set(p: &mut ScalePolicy, k: &str, v: &str) -> Result<(), Invalid> {
        p.apply_setting(k, v, "linux", "x86_64")
    }

    #[test]
    fn every_settable_key_is_accepted() {
        let samples = [
            ("target", "other"),
            ("labels", "a,b"),
            ("default_labels", "false"),
            ("min", "1"),
            ("max", "8"),
            ("runner_dir", "/opt/actions-runner"),
            ("runner_group", "builders"),
            ("idle_timeout", "60"),
            ("bootstrap_timeout", "120"),
            ("job_timeout", "3600"),
            ("mode", "monitor"),
            ("active", "false"),
            ("allow_public", "true"),
            ("run_as", "runner"),
            ("demand", "scaleset"),
            ("memory_max", "2G"),
            ("cpu_max", "1.5"),
            ("pids_max", "512"),
            ("limits", "best-effort"),
            ("env.FOO", "bar"),
            ("tools", "git,sh"),
            ("execution", "oci"),
            (
                "image",
                "ghcr.io/acme/runner@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            ),
            ("disk_max", "20G"),
            ("caches", "on"),
            ("workspace", "disposable"),
            ("rerun_lost", "5"),
        ];
        assert_eq!(samples.len(), SETTABLE_KEYS.len());
        let mut x = p();
        for (k, v) in samples {
            set(&mut x, k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        x.validate().unwrap();
        assert_eq!(x.labels, vec!["a", "b"]);
        assert_eq!(x.mode, Mode::Monitor);
        assert_eq!(x.job_timeout_secs, Some(3600));
        assert_eq!(x.env.get("FOO").map(String::as_str), Some("bar"));
        assert_eq!(x.tools, ["git", "sh"]);
        assert_eq!(x.limits, crate::domain::isolation::LimitsMode::BestEffort);
        set(&mut x, "env.FOO", "").unwrap();
        set(&mut x, "tools", "").unwrap();
        assert!(x.env.is_empty() && x.tools.is_empty());
    }

    #[test]
    fn labels_get_defaults_unless_opted_out() {
        let mut x = p();
        assert_eq!(x.labels, vec!["self-hosted", "Linux", "X64", "gpu"]);
        assert_eq!(x.user_labels("linux", "x86_64"), vec!["gpu"]);
        set(&mut x, "default_labels", "false").unwrap();
        assert_eq!(x.labels, vec!["gpu"]);
        set(&mut x, "default_labels", "true").unwrap();
        assert_eq!(x.labels, vec!["self-hosted", "Linux", "X64", "gpu"]);
    }

    #[test]
    fn whole_profile_rules() {
        let mut x = p();
        set(&mut x, "min", "5").unwrap();
        assert_eq!(x.validate().unwrap_err().arg, "min");
        let mut x = p();
        set(&mut x, "max", "0").unwrap();
        assert_eq!(x.validate().unwrap_err().arg, "max");
        set(&mut x, "mode", "monitor").unwrap();
        x.validate().unwrap();
        let mut x = p();
        set(&mut x, "execution", "oci").unwrap();
        assert_eq!(x.validate().unwrap_err().arg, "image");
    }

    #[test]
    fn typed_changes_read_as_their_settings_do() {
        let mut a = p();
        let mut b = p();
        a.apply_change(&Change::Max(7), "linux", "x64").unwrap();
        set(&mut b, "max", "7").unwrap();
        a.apply_change(&Change::Active(false), "linux", "x64")
            .unwrap();
        set(&mut b, "active", "false").unwrap();
        a.apply_change(&Change::Setting("min=2".into()), "linux", "x64")
            .unwrap();
        set(&mut b, "min", "2").unwrap();
        assert_eq!(a, b);
        for bad in [-1, 1001] {
            let e = a
                .apply_change(&Change::Max(bad), "linux", "x64")
                .unwrap_err();
            assert_eq!(e.arg, "max");
            assert_eq!(e.reason, format!("must be from 0 to 1000 (got {bad})"));
        }
        let e = a
            .apply_change(&Change::Setting("max".into()), "linux", "x64")
            .unwrap_err();
        assert_eq!(
            (e.arg.as_str(), e.reason.as_str()),
            ("max", "expected KEY=VALUE")
        );
        assert_eq!(a, b, "a refused change leaves the profile as it was");
        assert!(Change::Setting("runner_dir=/opt/r".into()).names_runner_dir());
        assert!(!Change::Setting("runner_group=1".into()).names_runner_dir());
        assert!(!Change::Max(3).names_runner_dir());
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let cases = [
            ("min", "-1"),
            ("max", "1001"),
            ("max", "many"),
            ("labels", ""),
            ("labels", "a,,b"),
            ("labels", "a,A"),
            ("idle_timeout", "0"),
            ("bootstrap_timeout", "3601"),
            ("job_timeout", "999999999"),
            ("mode", "fast"),
            ("active", "perhaps"),
            ("runner_dir", "relative"),
            ("runner_group", "0"),
            ("runner_group", " padded"),
            ("run_as", "root"),
            ("run_as", "Bad User"),
            ("demand", "webhook"),
            ("target", "Bad"),
            ("colour", "blue"),
            ("env.RUNNER_X", "1"),
            ("env.HOME", "/tmp"),
            ("env.PATH", "relative:/bin"),
            ("env.1X", "y"),
            ("env", "FOO=bar"),
            ("tools", "/bin/sh"),
            ("execution", "docker"),
            ("image", "ghcr.io/acme/runner:latest"),
            ("disk_max", "1M"),
        ];
        for (k, v) in cases {
            let mut x = p();
            let before = x.clone();
            let e = set(&mut x, k, v).unwrap_err();
            assert_eq!(e.arg, k, "{k}={v}");
            assert_eq!(x, before, "{k}={v} changed the profile although refused");
        }
    }

    #[test]
    fn group_id() {
        let mut x = p();
        assert_eq!(x.runner_group_ref(), RunnerGroup::Default);
        assert_eq!(
            x.runner_group_ref().known_id(),
            Some(DEFAULT_RUNNER_GROUP_ID)
        );
        set(&mut x, "runner_group", "7").unwrap();
        assert_eq!(x.runner_group_ref(), RunnerGroup::Id(7));
        assert_eq!(x.runner_group_ref().known_id(), Some(7));
        set(&mut x, "runner_group", "gpu-boxes").unwrap();
        assert_eq!(x.runner_group_ref(), RunnerGroup::Name("gpu-boxes"));
        assert_eq!(x.runner_group_ref().known_id(), None);
    }
}
