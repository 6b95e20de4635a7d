//! Per-attempt cgroups: what the host has, an attempt's limits and meters, and killing everything it started.
//!
//! Each attempt gets a directory `att-<id>` under a base `runner-manager-<tag>` (the tag
//! names the state directory, so two daemons on one host never share a cgroup) in every
//! hierarchy we use. Where the base sits:
//! - cgroup v2, delegated to us (systemd `Delegate=yes`: the `user.delegate`/`trusted.delegate`
//!   xattr, or the directory chowned to our non-root uid): inside our own cgroup `<own>`,
//!   and `prepare` moves this process into the leaf `<own>/daemon` first, because v2 lets
//!   no cgroup both hold processes and hand controllers to its children. systemd starts
//!   the next daemon in `<own>` again, which it cannot while `<own>` hands controllers
//!   down: the unit's `ExecStopPost=` turns them off in between ([`handover`]).
//! - cgroup v2, not delegated (tests, root run by hand): at the v2 root, which is exempt
//!   from that rule.
//! - cgroup v1: under this process's own cgroup in that hierarchy (v1 has no such rule,
//!   and a container's v1 memory limit keeps applying to the runners it starts).
//!
//! Hosts differ. A pure v2 host does everything in v2. A hybrid host (v1 `memory`,
//! `pids`, `cpu` hierarchies plus a controller-less v2 mount, like the machines our tests
//! run on) uses v2 for `cgroup.kill` and `cpu.stat` and v1 for the limits. A v1-only
//! host kills by signalling every member until none is left. [`Cgroups::enforced`] says
//! which of kill, memory, cpu, pids and meters are in effect and why not.
//!
//! Paths come from the kernel (mountinfo, /proc/self/cgroup) plus names we validate;
//! cgroup file systems hold no symlinks, and every file is opened `O_NOFOLLOW`, every
//! directory checked with `lstat`, every base checked to be on a cgroup file system.
//!
//! The parts: `detect` reads the host and plans (with `v2` and `v1` for each kind of
//! hierarchy), `attempt` is one attempt's cgroup, `files` the link-refusing file
//! operations they all use, `error` what goes wrong, [`handover`] the stop between
//! two daemons, and `tests` the detection tests against fixture trees.

mod attempt;
mod detect;
mod error;
mod files;
pub mod handover;
mod v1;
mod v2;

pub use attempt::{AttemptCgroup, JoinFds};
pub use error::CgroupError;

use attempt::{AttDir, check_limits, write_limits};
use detect::{detect_with, is_delegated};
use files::{check_cgroupfs, ensure_dir, is_real_dir};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;
use v2::{enable, move_all};

/// How long [`AttemptCgroup::kill`] keeps signalling before it reports what is left.
const KILL_BOUND: Duration = Duration::from_secs(5);
/// The CFS period for `cpu.max` / `cpu.cfs_period_us`: 100 ms, the kernel's default.
const CPU_PERIOD_US: u64 = 100_000;
/// The smallest quota the kernel accepts is 1 ms per period: 0.01 CPU.
const MIN_CPU_MILLIS: u32 = 10;
const BASE_PREFIX: &str = "runner-manager-";
const ATTEMPT_PREFIX: &str = "att-";
/// The leaf a delegated daemon moves itself into.
const LEAF: &str = "daemon";
const MAX_TAG: usize = 32;
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
/// The v1 controllers we may use, and the names a v1 mount's options can carry.
const V1_CONTROLLERS: [&str; 14] = [
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "blkio",
    "perf_event",
    "net_prio",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// An attempt's limits, from its profile. `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Bytes.
    pub memory_max: Option<u64>,
    /// Thousandths of a CPU: 1500 = 1.5 CPUs.
    pub cpu_max_millis: Option<u32>,
    pub pids_max: Option<u32>,
}

/// Which cgroup layout the host has (as far as we use it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupMode {
    None,
    V2,
    Hybrid,
    V1,
}

/// What containment is in effect, and for each part that is not, why (for `doctor`).
/// The daemon keeps its own in the store (`doctor` runs in another cgroup).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Enforced {
    /// Everything an attempt starts can be killed (atomically with `cgroup.kill`,
    /// otherwise by signalling every member until none is left).
    pub kill: bool,
    pub memory: bool,
    pub cpu: bool,
    pub pids: bool,
    /// Memory and CPU time are read from the cgroup (otherwise from a /proc walk).
    pub meters: bool,
    /// One line per `false` above, naming the part.
    pub why: Vec<String>,
}

/// An attempt's consumption, read from its cgroups. `None` where the host has no meter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupUsage {
    pub memory_current: Option<u64>,
    pub memory_peak: Option<u64>,
    pub cpu_usec: Option<u64>,
    pub pids_current: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    V2,
    V1,
}

/// What one hierarchy is used for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Roles {
    memory: bool,
    pids: bool,
    cpu: bool,
    /// CPU time: v2 `cpu.stat` or v1 `cpuacct.usage`.
    cpu_time: bool,
    /// v2 `cgroup.kill`.
    kill: bool,
}

/// One hierarchy we use.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hier {
    kind: Kind,
    /// "v2", or the v1 hierarchy's controllers ("memory", "cpu,cpuacct"): for messages.
    name: String,
    /// The cgroup our base sits in.
    parent: PathBuf,
    /// `parent/runner-manager-<tag>`.
    base: PathBuf,
    roles: Roles,
    /// v2: the controllers to enable in `parent` and `base`.
    enable: Vec<&'static str>,
    /// v2 delegated: the leaf this process moves into before enabling controllers.
    leaf: Option<PathBuf>,
}

/// What the host has, detected once. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Cgroups {
    hiers: Vec<Hier>,
    /// Why there are no cgroups (when `hiers` is empty).
    why_none: String,
    /// Why each missing part is missing (`memory: ...`).
    why_missing: Vec<String>,
    /// The delegated v2 cgroup we manage, when there is one.
    delegated: Option<PathBuf>,
}

impl Cgroups {
    /// Detects the host's cgroups from /proc/self/mountinfo and /proc/self/cgroup. Never panics.
    pub fn detect(tag: &str) -> Cgroups {
        Cgroups::detect_in(Path::new("/proc/self"), Path::new("/"), tag)
    }

    /// Like [`Cgroups::detect`], from `proc_self/{mountinfo,cgroup}` and mount points
    /// taken relative to `sys_root` (fixture trees in tests; `/` for real).
    pub fn detect_in(proc_self: &Path, sys_root: &Path, tag: &str) -> Cgroups {
        detect_with(proc_self, sys_root, tag, &is_delegated)
    }

    /// No cgroups, for `why` (`isolation=none`, tests, detection failures).
    pub fn none(why: &str) -> Cgroups {
        Cgroups {
            hiers: Vec::new(),
            why_none: why.to_string(),
            why_missing: Vec::new(),
            delegated: None,
        }
    }

    pub fn is_none(&self) -> bool {
        self.hiers.is_empty()
    }

    pub fn mode(&self) -> CgroupMode {
        let v2 = self.hiers.iter().any(|h| h.kind == Kind::V2);
        let v1 = self.hiers.iter().any(|h| h.kind == Kind::V1);
        match (v2, v1) {
            (false, false) => CgroupMode::None,
            (true, false) => CgroupMode::V2,
            (true, true) => CgroupMode::Hybrid,
            (false, true) => CgroupMode::V1,
        }
    }

    /// The delegated v2 cgroup we manage (under systemd `Delegate=yes`), if any.
    pub fn delegated(&self) -> Option<&Path> {
        self.delegated.as_deref()
    }

    /// Our base in every hierarchy used (`.../runner-manager-<tag>`).
    pub fn base_dirs(&self) -> Vec<PathBuf> {
        self.hiers.iter().map(|h| h.base.clone()).collect()
    }

    /// One line for status, doctor and the daemon's start line.
    pub fn summary(&self) -> String {
        let any = |f: fn(&Roles) -> bool| self.hiers.iter().any(|h| f(&h.roles));
        let kill_word = if any(|r| r.kill) {
            "kill"
        } else {
            "kill by signal"
        };
        let limits = |kind: Kind| -> Vec<&'static str> {
            let mut v = Vec::new();
            for h in self.hiers.iter().filter(|h| h.kind == kind) {
                if h.roles.memory {
                    v.push("memory");
                }
                if h.roles.cpu {
                    v.push("cpu");
                }
                if h.roles.pids {
                    v.push("pids");
                }
            }
            let order = ["memory", "cpu", "pids"];
            v.sort_by_key(|c| order.iter().position(|o| o == c));
            v
        };
        match self.mode() {
            CgroupMode::None => format!("none: {}", self.why_none),
            CgroupMode::V2 => {
                let l = limits(Kind::V2);
                let l = if l.is_empty() {
                    "no limits".to_string()
                } else {
                    l.join(", ")
                };
                let deleg = match &self.delegated {
                    Some(_) => ", delegated",
                    None => "",
                };
                format!("cgroup v2 ({l}; {kill_word}{deleg})")
            }
            CgroupMode::V1 => {
                let l = limits(Kind::V1);
                let l = if l.is_empty() {
                    "no limits".to_string()
                } else {
                    l.join(", ")
                };
                format!("cgroup v1 ({l}; {kill_word})")
            }
            CgroupMode::Hybrid => {
                let v2 = self.hiers.iter().find(|h| h.kind == Kind::V2);
                let mut v2_parts: Vec<&str> = Vec::new();
                if v2.is_some_and(|h| h.roles.kill) {
                    v2_parts.push("kill");
                }
                if v2.is_some_and(|h| h.roles.cpu_time) {
                    v2_parts.push("cpu time");
                }
                v2_parts.extend(limits(Kind::V2));
                let mut v1_parts = limits(Kind::V1);
                if self
                    .hiers
                    .iter()
                    .any(|h| h.kind == Kind::V1 && h.roles.cpu_time)
                {
                    v1_parts.push("cpu time");
                }
                let mut line = format!("hybrid: v2 {}", and_list(&v2_parts));
                if !v1_parts.is_empty() {
                    line.push_str(&format!("; v1 {}", v1_parts.join(", ")));
                }
                if !any(|r| r.kill) {
                    line.push_str("; kill by signal");
                }
                line
            }
        }
    }

    /// Which limits and meters are in effect, and why not.
    pub fn enforced(&self) -> Enforced {
        if self.is_none() {
            return Enforced {
                why: vec![format!("no cgroups: {}", self.why_none)],
                ..Enforced::default()
            };
        }
        let any = |f: fn(&Roles) -> bool| self.hiers.iter().any(|h| f(&h.roles));
        Enforced {
            kill: true,
            memory: any(|r| r.memory),
            cpu: any(|r| r.cpu),
            pids: any(|r| r.pids),
            meters: any(|r| r.memory) && any(|r| r.cpu_time),
            why: self.why_missing.clone(),
        }
    }

    /// Once at daemon start: creates our base in every hierarchy; under v2 delegation
    /// moves this process (and anything else in our cgroup) into the leaf `daemon/` and
    /// enables the controllers for our children. Idempotent.
    pub fn prepare(&self) -> Result<(), CgroupError> {
        if self.is_none() {
            return Err(CgroupError::Unavailable {
                why: self.why_none.clone(),
            });
        }
        for h in &self.hiers {
            check_cgroupfs(&h.parent)?;
            if let Some(leaf) = &h.leaf {
                ensure_dir(leaf)?;
                move_all(&h.parent, leaf)?;
            }
            enable(&h.parent, &h.enable)?;
            ensure_dir(&h.base)?;
            enable(&h.base, &h.enable)?;
        }
        Ok(())
    }

    /// Creates (or reuses) the attempt's cgroups and writes its limits. A limit the host
    /// cannot enforce is skipped (`enforced` says so); a write that fails is an error.
    pub fn create(&self, attempt: i64, limits: &Limits) -> Result<AttemptCgroup, CgroupError> {
        if self.is_none() {
            return Err(CgroupError::Unavailable {
                why: self.why_none.clone(),
            });
        }
        if attempt < 0 {
            return Err(CgroupError::InvalidAttempt(attempt));
        }
        check_limits(limits)?;
        let cg = self.attempt(attempt);
        for d in &cg.dirs {
            let base = d.path.parent().unwrap_or(Path::new("/"));
            if !is_real_dir(base) {
                return Err(CgroupError::NotPrepared {
                    base: base.to_path_buf(),
                });
            }
            ensure_dir(&d.path)?;
            write_limits(d, limits)?;
        }
        Ok(cg)
    }

    /// A handle to the attempt's cgroups whether or not they exist (after a restart).
    pub fn attempt(&self, attempt: i64) -> AttemptCgroup {
        let dirs = if attempt < 0 {
            Vec::new()
        } else {
            self.hiers
                .iter()
                .map(|h| AttDir {
                    kind: h.kind,
                    path: h.base.join(format!("{ATTEMPT_PREFIX}{attempt}")),
                    roles: h.roles,
                })
                .collect()
        };
        AttemptCgroup { attempt, dirs }
    }

    /// Removes our base in every hierarchy where nothing is left in it (no attempt
    /// cgroup), as a daemon that stops does. Returns how many went; a base an attempt
    /// still lives in stays (`rmdir` refuses a cgroup with children).
    pub fn remove_empty_bases(&self) -> usize {
        self.hiers
            .iter()
            .filter(|h| is_real_dir(&h.base) && fs::remove_dir(&h.base).is_ok())
            .count()
    }

    /// Attempt ids whose cgroups exist under our base in any hierarchy, ascending.
    pub fn list_attempts(&self) -> Vec<i64> {
        let mut ids = BTreeSet::new();
        for h in &self.hiers {
            let Ok(entries) = fs::read_dir(&h.base) else {
                continue;
            };
            for e in entries.flatten() {
                // The entry's own type (lstat): a symlink is never a cgroup of ours.
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if let Some(id) = e.file_name().to_str().and_then(parse_attempt_name) {
                    ids.insert(id);
                }
            }
        }
        ids.into_iter().collect()
    }
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[&str]) -> String {
    match items {
        [] => "nothing".to_string(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn check_tag(tag: &str) -> Result<(), String> {
    let ok = !tag.is_empty()
        && tag.len() <= MAX_TAG
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the cgroup tag {tag:?} is not 1-{MAX_TAG} letters, digits, '-' or '_'"
        ))
    }
}

/// `att-<id>` with a canonical non-negative decimal id.
fn parse_attempt_name(name: &str) -> Option<i64> {
    let digits = name.strip_prefix(ATTEMPT_PREFIX)?;
    let id: i64 = digits.parse().ok()?;
    (id >= 0 && id.to_string() == digits).then_some(id)
}

#[cfg(test)]
mod tests;
