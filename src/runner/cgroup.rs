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
//!   down: the unit's `ExecStopPost=` turns them off in between (`cgroup_handover`).
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

use std::collections::BTreeSet;
use std::ffi::{CString, OsString};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

#[derive(Debug)]
pub enum CgroupError {
    /// The host has no usable cgroups (`Cgroups::none`).
    Unavailable { why: String },
    /// A limit the kernel would refuse.
    InvalidLimit { name: &'static str, why: String },
    /// Attempt ids are non-negative.
    InvalidAttempt(i64),
    /// The base does not exist: `prepare` was not run (or the base was removed).
    NotPrepared { base: PathBuf },
    /// Something we would write to is not a directory on a cgroup file system.
    NotACgroup { path: PathBuf },
    /// A file operation failed.
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// Enabling a controller for our children failed.
    Enable {
        path: PathBuf,
        controller: &'static str,
        source: io::Error,
    },
    /// `prepare` could not move every process out of the delegated cgroup.
    NotLeaf { path: PathBuf, pids: Vec<i32> },
    /// rmdir found processes still in the cgroup: kill first, retry later.
    Busy { path: PathBuf },
    /// `kill` signalled for its whole bound and these processes are still there.
    Survivors { path: PathBuf, pids: Vec<i32> },
}

impl fmt::Display for CgroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CgroupError::Unavailable { why } => {
                write!(f, "no cgroups to contain runners in: {why}")
            }
            CgroupError::InvalidLimit { name, why } => write!(f, "{name}: {why}"),
            CgroupError::InvalidAttempt(id) => {
                write!(f, "attempt id {id} cannot name a cgroup (ids are >= 0)")
            }
            CgroupError::NotPrepared { base } => write!(
                f,
                "{} does not exist: Cgroups::prepare must run at daemon start (it creates the base)",
                base.display()
            ),
            CgroupError::NotACgroup { path } => write!(
                f,
                "{} is not a directory on a cgroup file system: refusing to use it (check the host's cgroup mounts)",
                path.display()
            ),
            CgroupError::Io {
                action,
                path,
                source,
            } => {
                write!(f, "{action} {} failed: {source}", path.display())?;
                match source.raw_os_error() {
                    Some(libc::EACCES | libc::EPERM) => f.write_str(
                        " (the daemon must run as root, or under systemd with Delegate=yes)",
                    ),
                    Some(libc::ENOENT) => f.write_str(" (the cgroup or its file is gone)"),
                    _ => Ok(()),
                }
            }
            CgroupError::Enable {
                path,
                controller,
                source,
            } => {
                write!(
                    f,
                    "enabling the {controller} controller in {}/cgroup.subtree_control failed: {source}",
                    path.display()
                )?;
                if source.raw_os_error() == Some(libc::EBUSY) {
                    f.write_str(
                        " (that cgroup still holds processes; v2 allows controllers only for cgroups whose processes live in leaves)",
                    )?;
                }
                Ok(())
            }
            CgroupError::NotLeaf { path, pids } => write!(
                f,
                "processes {pids:?} stay in {} after moving them to its leaf {LEAF}/: controllers cannot be enabled there; stop whatever keeps adding them",
                path.display()
            ),
            CgroupError::Busy { path } => write!(
                f,
                "{} still has processes: kill the attempt, then retry the removal later",
                path.display()
            ),
            CgroupError::Survivors { path, pids } => write!(
                f,
                "after {} s of SIGKILL, processes {pids:?} remain in {} (stuck in the kernel?): retry later",
                KILL_BOUND.as_secs(),
                path.display()
            ),
        }
    }
}

impl std::error::Error for CgroupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CgroupError::Io { source, .. } | CgroupError::Enable { source, .. } => Some(source),
            _ => None,
        }
    }
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
    tag: String,
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
            tag: String::new(),
            hiers: Vec::new(),
            why_none: why.to_string(),
            why_missing: Vec::new(),
            delegated: None,
        }
    }

    /// The tag naming our base (empty for `none`).
    pub fn tag(&self) -> &str {
        &self.tag
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

/// Detection with the delegation probe injected (tests give fixture trees a probe).
fn detect_with(
    proc_self: &Path,
    sys_root: &Path,
    tag: &str,
    delegated: &dyn Fn(&Path) -> bool,
) -> Cgroups {
    if let Err(why) = check_tag(tag) {
        return Cgroups::none(&why);
    }
    let read = |name: &str| {
        fs::read_to_string(proc_self.join(name))
            .map_err(|e| format!("cannot read {}: {e}", proc_self.join(name).display()))
    };
    let mountinfo = match read("mountinfo") {
        Ok(t) => t,
        Err(why) => return Cgroups::none(&why),
    };
    let own = match read("cgroup") {
        Ok(t) => t,
        Err(why) => return Cgroups::none(&why),
    };
    let osrelease = proc_self
        .parent()
        .map(|p| p.join("sys/kernel/osrelease"))
        .and_then(|p| fs::read_to_string(p).ok());
    plan(
        &parse_mountinfo(&mountinfo),
        &parse_proc_cgroup(&own),
        sys_root,
        tag,
        osrelease.as_deref(),
        delegated,
    )
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

fn check_limits(l: &Limits) -> Result<(), CgroupError> {
    if l.memory_max == Some(0) {
        return Err(CgroupError::InvalidLimit {
            name: "memory_max",
            why: "0 bytes would stop the runner from starting; leave it unset for no limit".into(),
        });
    }
    if let Some(m) = l.cpu_max_millis
        && m < MIN_CPU_MILLIS
    {
        return Err(CgroupError::InvalidLimit {
            name: "cpu_max",
            why: format!(
                "{m} thousandths of a CPU is below the kernel's smallest quota ({MIN_CPU_MILLIS}, 1 ms per 100 ms)"
            ),
        });
    }
    if l.pids_max == Some(0) {
        return Err(CgroupError::InvalidLimit {
            name: "pids_max",
            why: "0 would stop the runner from starting; leave it unset for no limit".into(),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Detection: pure parsing, then a plan from the parsed facts and a few files.

/// A cgroup mount from /proc/self/mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MountEntry {
    /// The hierarchy's path mounted here ("/" unless a bind mount or a namespace).
    root: String,
    mount_point: PathBuf,
    /// "cgroup" or "cgroup2".
    fstype: String,
    /// v1: the controllers among the super options.
    controllers: Vec<String>,
}

/// The cgroup and cgroup2 mounts of a mountinfo text; other lines are skipped.
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            // Optional fields end at "-"; it comes after the 6 fixed fields.
            let sep = 6 + fields.get(6..)?.iter().position(|f| *f == "-")?;
            let fstype = *fields.get(sep + 1)?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            let root = String::from_utf8(unescape(fields.get(3)?)).ok()?;
            let mount_point = PathBuf::from(OsString::from_vec(unescape(fields.get(4)?)));
            let controllers = fields
                .get(sep + 3)
                .unwrap_or(&"")
                .split(',')
                .filter(|o| V1_CONTROLLERS.contains(o))
                .map(String::from)
                .collect();
            Some(MountEntry {
                root,
                mount_point,
                fstype: fstype.to_string(),
                controllers,
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            // Only bytes are escaped; a larger value is not an escape mountinfo writes.
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// A line of /proc/self/cgroup: `id:controllers:path`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Membership {
    id: u32,
    /// Empty for v2; `name=systemd` style names are kept too.
    controllers: Vec<String>,
    path: String,
}

fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let id = parts.next()?.parse().ok()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
            let path = parts.next()?.to_string();
            Some(Membership {
                id,
                controllers,
                path,
            })
        })
        .collect()
}

/// The components of `path` below the mount's `root`, validated: absolute, no `.`/`..`
/// (a cgroup outside our namespace shows as `/..`), no NUL.
fn relative_components(root: &str, path: &str) -> Result<Vec<String>, String> {
    let comps = |p: &str| -> Result<Vec<String>, String> {
        if !p.starts_with('/') {
            return Err(format!("cgroup path {p:?} is not absolute"));
        }
        p.split('/')
            .filter(|c| !c.is_empty())
            .map(|c| {
                if c == "." || c == ".." || c.contains('\0') {
                    Err(format!(
                        "cgroup path {p:?} leaves its namespace or is malformed"
                    ))
                } else {
                    Ok(c.to_string())
                }
            })
            .collect()
    };
    let root = comps(root)?;
    let path = comps(path)?;
    if path.len() < root.len() || path[..root.len()] != root[..] {
        return Err(format!(
            "this process's cgroup /{} is outside the mounted part /{}",
            path.join("/"),
            root.join("/")
        ));
    }
    Ok(path[root.len()..].to_vec())
}

/// Where our v2 cgroups go, as components below the v2 mount.
#[derive(Clone, Debug, PartialEq, Eq)]
struct V2Layout {
    /// The cgroup we create our base in and enable controllers for.
    managed: Vec<String>,
    /// The leaf this process must live in so `managed` may enable controllers.
    leaf: Option<Vec<String>>,
    base: Vec<String>,
    delegated: bool,
}

/// Pure: where our v2 base goes, given this process's cgroup `own` (below the mount),
/// whether `own` (or, when `own` is a `daemon` leaf, its parent) is delegated to us, and
/// whether the mount's top is the real root (exempt from the no-internal-processes rule)
/// rather than a namespace's root.
///
/// Started in a delegated cgroup itself (systemd before 254 has no
/// `DelegateSubgroup=`), the daemon moves into the leaf `daemon` and enables
/// controllers in the cgroup the service manager started it in, the delegation pattern
/// systemd documents. systemd then cannot start the next daemon in that cgroup while
/// it hands controllers down (`219/CGROUP`), so the packaged unit's `ExecStopPost=`
/// turns them off between two lives (`runner::cgroup_handover`), and each daemon writes
/// its live attempts' limits again at start.
fn v2_layout(
    own: &[String],
    own_delegated: bool,
    parent_delegated: bool,
    top_is_real_root: bool,
    tag: &str,
) -> V2Layout {
    let leaf_of = |c: &[String]| {
        let mut l = c.to_vec();
        l.push(LEAF.to_string());
        l
    };
    let (managed, leaf, delegated): (Vec<String>, Option<Vec<String>>, bool) =
        if own.last().map(String::as_str) == Some(LEAF) && parent_delegated {
            // Already in the leaf (a restart of this process, or a second detect).
            (own[..own.len() - 1].to_vec(), Some(own.to_vec()), true)
        } else if own_delegated && !own.is_empty() {
            // Started in the delegated cgroup itself: move into its leaf.
            (own.to_vec(), Some(leaf_of(own)), true)
        } else if !top_is_real_root && (own.is_empty() || own == [LEAF.to_string()]) {
            // A cgroup namespace's root (a container): it is ours, but not exempt.
            (Vec::new(), Some(vec![LEAF.to_string()]), true)
        } else {
            (Vec::new(), None, false)
        };
    let mut base = managed.clone();
    base.push(format!("{BASE_PREFIX}{tag}"));
    V2Layout {
        managed,
        leaf,
        base,
        delegated,
    }
}

fn join_components(top: &Path, comps: &[String]) -> PathBuf {
    let mut p = top.to_path_buf();
    for c in comps {
        p.push(c);
    }
    p
}

/// The mount point as a path under `sys_root`.
fn under_root(sys_root: &Path, mount_point: &Path) -> PathBuf {
    sys_root.join(mount_point.strip_prefix("/").unwrap_or(mount_point))
}

/// systemd marks a delegated cgroup with an xattr; older versions only chown it to the
/// unit's (non-root) user.
fn is_delegated(dir: &Path) -> bool {
    for name in ["trusted.delegate", "user.delegate"] {
        if read_xattr(dir, name).as_deref() == Some(b"1".as_slice()) {
            return true;
        }
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    euid != 0 && fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == euid)
}

fn read_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let cpath = CString::new(path.as_os_str().as_bytes()).ok()?;
    let cname = CString::new(name).ok()?;
    let mut buf = [0u8; 16];
    // SAFETY: valid NUL-terminated strings and a buffer of the length given.
    let n = unsafe {
        libc::lgetxattr(
            cpath.as_ptr(),
            cname.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}

/// Whether we may create cgroups in `dir`; the reason when not.
fn unwritable(dir: &Path) -> Option<String> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if rc == 0 {
        return None;
    }
    let e = io::Error::last_os_error();
    Some(if e.raw_os_error() == Some(libc::EROFS) {
        format!(
            "{} is mounted read-only (a container without a writable cgroup mount)",
            dir.display()
        )
    } else {
        format!(
            "{} is not writable by uid {} (run as root, or under systemd with Delegate=yes)",
            dir.display(),
            euid()
        )
    })
}

/// Kernel 5.14 added `cgroup.kill`.
fn release_has_cgroup_kill(release: &str) -> bool {
    let mut it = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let major = it.next().unwrap_or(0);
    let minor = it.next().unwrap_or(0);
    (major, minor) >= (5, 14)
}

/// Whether v2 cgroups under `top` have `cgroup.kill` (absent from the real root, so look
/// at a non-root cgroup near us, else go by the kernel's version).
fn has_cgroup_kill(top: &Path, own: &Path, osrelease: Option<&str>) -> bool {
    if own.join("cgroup.kill").exists() || top.join("cgroup.kill").exists() {
        return true;
    }
    if let Ok(entries) = fs::read_dir(top) {
        for e in entries.flatten().take(64) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                return e.path().join("cgroup.kill").exists();
            }
        }
    }
    osrelease.is_some_and(release_has_cgroup_kill)
}

fn read_controllers(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("cgroup.controllers"))
        .map(|t| t.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The plan: which hierarchy serves which role, and where our bases go.
fn plan(
    mounts: &[MountEntry],
    members: &[Membership],
    sys_root: &Path,
    tag: &str,
    osrelease: Option<&str>,
    is_delegated: &dyn Fn(&Path) -> bool,
) -> Cgroups {
    let mut v2 = plan_v2(mounts, members, sys_root, tag, osrelease, is_delegated);
    let mut hiers: Vec<Hier> = v2.hier.take().into_iter().collect();
    let v2_roles = hiers.first().map(|h| h.roles).unwrap_or_default();
    let v1_missing = plan_v1(mounts, members, sys_root, tag, v2_roles, &mut hiers);
    if hiers.is_empty() {
        return Cgroups::none(&why_none(mounts, v2.place, &v1_missing));
    }
    let notes = missing_notes(&hiers, &v2, &v1_missing);
    Cgroups {
        tag: tag.to_string(),
        hiers,
        why_none: String::new(),
        why_missing: notes,
        delegated: v2.delegated,
    }
}

/// What the v2 search found: its hierarchy when we may use it, and for the notes its
/// controllers and where it is (or why it is not used).
struct V2Found {
    hier: Option<Hier>,
    controllers: Vec<String>,
    place: String,
    /// The delegated cgroup we manage, when v2 is delegated to us.
    delegated: Option<PathBuf>,
}

impl V2Found {
    fn missing(place: String) -> V2Found {
        V2Found {
            hier: None,
            controllers: Vec::new(),
            place,
            delegated: None,
        }
    }
}

/// v2: the cgroup2 mount that shows this process's v2 cgroup.
fn plan_v2(
    mounts: &[MountEntry],
    members: &[Membership],
    sys_root: &Path,
    tag: &str,
    osrelease: Option<&str>,
    is_delegated: &dyn Fn(&Path) -> bool,
) -> V2Found {
    let Some(m) = members
        .iter()
        .find(|m| m.id == 0 && m.controllers.is_empty())
    else {
        return V2Found::missing("no cgroup2 file system is mounted".into());
    };
    let found = mounts
        .iter()
        .filter(|e| e.fstype == "cgroup2")
        .find_map(|e| {
            relative_components(&e.root, &m.path)
                .ok()
                .map(|own| (e, own))
        });
    let Some((e, own)) = found else {
        return V2Found::missing(if mounts.iter().any(|e| e.fstype == "cgroup2") {
            format!("no cgroup2 mount shows this process's cgroup {}", m.path)
        } else {
            "no cgroup2 file system is mounted".into()
        });
    };
    let top = under_root(sys_root, &e.mount_point);
    v2_hier(&top, &own, tag, osrelease, is_delegated)
}

/// The v2 hierarchy for this process's cgroup `own` below the mount's `top`.
fn v2_hier(
    top: &Path,
    own: &[String],
    tag: &str,
    osrelease: Option<&str>,
    is_delegated: &dyn Fn(&Path) -> bool,
) -> V2Found {
    let own_dir = join_components(top, own);
    let own_deleg = !own.is_empty() && is_delegated(&own_dir);
    let parent_deleg = own.len() >= 2 && own_dir.parent().is_some_and(is_delegated);
    // Only a non-root cgroup has cgroup.type.
    let real_root = !top.join("cgroup.type").exists();
    let layout = v2_layout(own, own_deleg, parent_deleg, real_root, tag);
    let managed = join_components(top, &layout.managed);
    if !is_real_dir(&managed) {
        return V2Found::missing(format!("{} does not exist", managed.display()));
    }
    if let Some(why) = unwritable(&managed) {
        return V2Found::missing(why);
    }
    let place = format!("cgroup v2 at {}", managed.display());
    let controllers = read_controllers(&managed);
    let has = |c: &str| controllers.iter().any(|x| x == c);
    let roles = Roles {
        memory: has("memory"),
        pids: has("pids"),
        cpu: has("cpu"),
        cpu_time: managed.join("cpu.stat").exists() || own_dir.join("cpu.stat").exists(),
        kill: has_cgroup_kill(top, &own_dir, osrelease),
    };
    let enable = ["memory", "pids", "cpu"]
        .into_iter()
        .filter(|c| has(c))
        .collect();
    let delegated = layout.delegated.then(|| managed.clone());
    let hier = Hier {
        kind: Kind::V2,
        name: "v2".into(),
        parent: managed,
        base: join_components(top, &layout.base),
        roles,
        enable,
        leaf: layout.leaf.map(|l| join_components(top, &l)),
    };
    V2Found {
        hier: Some(hier),
        controllers,
        place,
        delegated,
    }
}

/// v1, for what v2 does not serve: adds the hierarchies to `hiers` and returns, for
/// each controller wanted and not found, why.
fn plan_v1(
    mounts: &[MountEntry],
    members: &[Membership],
    sys_root: &Path,
    tag: &str,
    v2_roles: Roles,
    hiers: &mut Vec<Hier>,
) -> Vec<(&'static str, String)> {
    let wants: [(&str, bool); 4] = [
        ("memory", !v2_roles.memory),
        ("pids", !v2_roles.pids),
        ("cpu", !v2_roles.cpu),
        ("cpuacct", !v2_roles.cpu_time),
    ];
    let mut missing: Vec<(&str, String)> = Vec::new();
    for (ctl, want) in wants {
        if !want {
            continue;
        }
        let (name, parent) = match v1_parent(ctl, mounts, members, sys_root) {
            Ok(found) => found,
            Err(why) => {
                missing.push((ctl, why));
                continue;
            }
        };
        let idx = match hiers
            .iter()
            .position(|h| h.kind == Kind::V1 && h.name == name)
        {
            Some(i) => i,
            None => {
                hiers.push(Hier {
                    kind: Kind::V1,
                    name,
                    base: parent.join(format!("{BASE_PREFIX}{tag}")),
                    parent,
                    roles: Roles::default(),
                    enable: Vec::new(),
                    leaf: None,
                });
                hiers.len() - 1
            }
        };
        let r = &mut hiers[idx].roles;
        match ctl {
            "memory" => r.memory = true,
            "pids" => r.pids = true,
            "cpu" => r.cpu = true,
            _ => r.cpu_time = true,
        }
    }
    missing
}

/// This process's cgroup in the v1 hierarchy with `ctl`, with the hierarchy's name
/// (its controllers, joined), or why we cannot use one.
fn v1_parent(
    ctl: &str,
    mounts: &[MountEntry],
    members: &[Membership],
    sys_root: &Path,
) -> Result<(String, PathBuf), String> {
    let Some(m) = members
        .iter()
        .find(|m| m.id != 0 && m.controllers.iter().any(|c| c == ctl))
    else {
        return Err(format!("no v1 {ctl} hierarchy"));
    };
    let mut set: Vec<&str> = m.controllers.iter().map(String::as_str).collect();
    set.sort_unstable();
    let found = mounts
        .iter()
        .filter(|e| e.fstype == "cgroup")
        .filter(|e| {
            let mut s: Vec<&str> = e.controllers.iter().map(String::as_str).collect();
            s.sort_unstable();
            s == set
        })
        .find_map(|e| {
            relative_components(&e.root, &m.path)
                .ok()
                .map(|own| (e, own))
        });
    let Some((e, own)) = found else {
        return Err(format!(
            "the v1 {ctl} hierarchy is not mounted where this process's cgroup shows"
        ));
    };
    let parent = join_components(&under_root(sys_root, &e.mount_point), &own);
    if !is_real_dir(&parent) {
        return Err(format!("{} does not exist", parent.display()));
    }
    if let Some(why) = unwritable(&parent) {
        return Err(why);
    }
    Ok((m.controllers.join(","), parent))
}

/// Why no hierarchy serves us, in one line: what kept v2 out, then what kept the first
/// v1 hierarchy out.
fn why_none(mounts: &[MountEntry], v2_place: String, v1_missing: &[(&str, String)]) -> String {
    if mounts.is_empty() {
        return "no cgroup file system is mounted".to_string();
    }
    let mut why = v2_place;
    let mut v1: Vec<&String> = v1_missing.iter().map(|(_, w)| w).collect();
    v1.dedup();
    if let Some(first) = v1.first() {
        why.push_str("; ");
        why.push_str(first);
        if v1.len() > 1 {
            why.push_str(&format!(" (and {} more v1 hierarchies)", v1.len() - 1));
        }
    }
    why
}

/// The `why_missing` notes: each limit no hierarchy serves, and meters that fall back
/// to /proc.
fn missing_notes(hiers: &[Hier], v2: &V2Found, v1_missing: &[(&str, String)]) -> Vec<String> {
    let v1_why = |ctl: &str| {
        v1_missing
            .iter()
            .find(|(c, _)| *c == ctl)
            .map(|(_, w)| w.clone())
            .unwrap_or_default()
    };
    let v2_lacks = |ctl: &str| {
        if hiers.iter().any(|h| h.kind == Kind::V2) {
            let (place, ctls) = (&v2.place, &v2.controllers);
            format!("{place} has no {ctl} controller (cgroup.controllers: {ctls:?})")
        } else {
            v2.place.clone()
        }
    };
    let any = |f: fn(&Roles) -> bool| hiers.iter().any(|h| f(&h.roles));
    type Served = fn(&Roles) -> bool;
    let limits: [(&str, Served); 3] = [
        ("memory", |r| r.memory),
        ("cpu", |r| r.cpu),
        ("pids", |r| r.pids),
    ];
    let mut notes: Vec<String> = limits
        .into_iter()
        .filter(|(_, served)| !any(*served))
        .map(|(ctl, _)| format!("{ctl}: not limited: {}; {}", v2_lacks(ctl), v1_why(ctl)))
        .collect();
    if !(any(|r| r.memory) && any(|r| r.cpu_time)) {
        notes.push(
            "meters: memory or CPU time cannot be read from the cgroup: metered from /proc instead"
                .into(),
        );
    }
    notes
}

// ---------------------------------------------------------------------------------
// File operations: never following a link, one write per value.

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> CgroupError {
    let path = path.to_path_buf();
    move |source| CgroupError::Io {
        action,
        path,
        source,
    }
}

fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// mkdir, accepting an existing directory (never a link).
fn ensure_dir(p: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if is_real_dir(p) {
                Ok(())
            } else {
                Err(CgroupError::NotACgroup {
                    path: p.to_path_buf(),
                })
            }
        }
        Err(e) => Err(io_err("creating", p)(e)),
    }
}

fn check_cgroupfs(dir: &Path) -> Result<(), CgroupError> {
    let not = || CgroupError::NotACgroup {
        path: dir.to_path_buf(),
    };
    if !is_real_dir(dir) {
        return Err(not());
    }
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| not())?;
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io_err("checking", dir)(io::Error::last_os_error()));
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets
    let magic = st.f_type as i64;
    if magic == CGROUP_SUPER_MAGIC || magic == CGROUP2_SUPER_MAGIC {
        Ok(())
    } else {
        Err(not())
    }
}

fn open_nofollow(path: &Path, write: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    if write {
        o.write(true);
    } else {
        o.read(true);
    }
    o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// One write(2) of the whole value, as cgroup files want.
fn write_value(path: &Path, value: &str) -> io::Result<()> {
    let mut f = open_nofollow(path, true)?;
    f.write_all(value.as_bytes())
}

fn read_value(path: &Path) -> Option<String> {
    let mut s = String::new();
    open_nofollow(path, false)
        .ok()?
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

fn read_u64(path: &Path) -> Option<u64> {
    read_value(path)?.trim().parse().ok()
}

/// `key N` from a flat-keyed file (cpu.stat, memory.events, memory.oom_control).
fn read_keyed(path: &Path, key: &str) -> Option<u64> {
    read_value(path)?.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn read_pids(procs: &Path) -> Vec<i32> {
    read_value(procs)
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Enables `ctls` for `dir`'s children, skipping those already enabled.
fn enable(dir: &Path, ctls: &[&'static str]) -> Result<(), CgroupError> {
    if ctls.is_empty() {
        return Ok(());
    }
    let file = dir.join("cgroup.subtree_control");
    let on: Vec<String> = read_value(&file)
        .map(|t| t.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    for c in ctls {
        if on.iter().any(|x| x == c) {
            continue;
        }
        write_value(&file, &format!("+{c}")).map_err(|source| CgroupError::Enable {
            path: dir.to_path_buf(),
            controller: c,
            source,
        })?;
    }
    Ok(())
}

/// Moves every process in `from` into `leaf` (v2 moves a whole process per write).
fn move_all(from: &Path, leaf: &Path) -> Result<(), CgroupError> {
    let procs = from.join("cgroup.procs");
    let dest = leaf.join("cgroup.procs");
    // A few rounds: a process being forked while we move may appear once more.
    for _ in 0..10 {
        let pids = read_pids(&procs);
        if pids.is_empty() {
            return Ok(());
        }
        for pid in pids {
            match write_value(&dest, &pid.to_string()) {
                Ok(()) => {}
                // It exited meanwhile.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(io_err("moving a process into", &dest)(e)),
            }
        }
    }
    let pids = read_pids(&procs);
    if pids.is_empty() {
        Ok(())
    } else {
        Err(CgroupError::NotLeaf {
            path: from.to_path_buf(),
            pids,
        })
    }
}

fn write_file(dir: &Path, name: &str, value: &str) -> Result<(), CgroupError> {
    let p = dir.join(name);
    write_value(&p, value).map_err(io_err("writing", &p))
}

/// Writes `limits` for the roles this hierarchy serves; unlimited writes "max"/-1, so a
/// reused cgroup loses a limit its profile dropped.
fn write_limits(d: &AttDir, l: &Limits) -> Result<(), CgroupError> {
    let dir = &d.path;
    match d.kind {
        Kind::V2 => {
            if d.roles.memory {
                let v = l.memory_max.map_or("max".to_string(), |b| b.to_string());
                write_file(dir, "memory.max", &v)?;
                // Without this a limited job would page out to swap: a limit is a limit.
                if dir.join("memory.swap.max").exists() {
                    let s = if l.memory_max.is_some() { "0" } else { "max" };
                    write_file(dir, "memory.swap.max", s)?;
                }
            }
            if d.roles.pids {
                let v = l.pids_max.map_or("max".to_string(), |n| n.to_string());
                write_file(dir, "pids.max", &v)?;
            }
            if d.roles.cpu {
                let v = match l.cpu_max_millis {
                    Some(m) => format!("{} {CPU_PERIOD_US}", cpu_quota_us(m)),
                    None => format!("max {CPU_PERIOD_US}"),
                };
                write_file(dir, "cpu.max", &v)?;
            }
        }
        Kind::V1 => {
            if d.roles.memory {
                let v = l.memory_max.map_or("-1".to_string(), |b| b.to_string());
                write_v1_memory(dir, &v)?;
            }
            if d.roles.pids {
                let v = l.pids_max.map_or("max".to_string(), |n| n.to_string());
                write_file(dir, "pids.max", &v)?;
            }
            if d.roles.cpu {
                write_file(dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                let v = l
                    .cpu_max_millis
                    .map_or("-1".to_string(), |m| cpu_quota_us(m).to_string());
                write_file(dir, "cpu.cfs_quota_us", &v)?;
            }
        }
    }
    Ok(())
}

fn cpu_quota_us(millis: u32) -> u64 {
    u64::from(millis) * CPU_PERIOD_US / 1000
}

/// v1 keeps `memory.memsw.limit_in_bytes` (memory + swap) >= `memory.limit_in_bytes`
/// and refuses a write that breaks it, so the order depends on the direction. Setting
/// both to the same value forbids swap: a limit is a limit.
fn write_v1_memory(dir: &Path, value: &str) -> Result<(), CgroupError> {
    let mem = "memory.limit_in_bytes";
    let memsw = "memory.memsw.limit_in_bytes";
    if !dir.join(memsw).exists() {
        return write_file(dir, mem, value);
    }
    if value == "-1" {
        write_file(dir, memsw, value)?;
        return write_file(dir, mem, value);
    }
    let p = dir.join(mem);
    match write_value(&p, value) {
        Ok(()) => write_file(dir, memsw, value),
        // Raising above the current memsw limit: raise memsw first.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            write_file(dir, memsw, value)?;
            write_file(dir, mem, value)
        }
        Err(e) => Err(io_err("writing", &p)(e)),
    }
}

// ---------------------------------------------------------------------------------
// An attempt's cgroups.

#[derive(Clone, Debug, PartialEq, Eq)]
struct AttDir {
    kind: Kind,
    path: PathBuf,
    roles: Roles,
}

/// One attempt's cgroup in every hierarchy we use (none when the host has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptCgroup {
    attempt: i64,
    dirs: Vec<AttDir>,
}

/// The open `cgroup.procs` files of an attempt, for a child to join between fork and exec.
#[derive(Debug)]
pub struct JoinFds {
    fds: Vec<OwnedFd>,
}

impl JoinFds {
    /// Moves the calling process into the attempt's cgroups: `write(fd, "0")` per
    /// hierarchy. Async-signal-safe (no allocation), for `Command::pre_exec`. The files
    /// were opened by the daemon, whose credentials the kernel checks, so this works
    /// before or after the child drops to the runner's uid.
    pub fn join_self(&self) -> Result<(), io::Error> {
        for fd in &self.fds {
            // SAFETY: writing one byte from a static buffer to a descriptor we own.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if n != 1 {
                let errno = if n < 0 {
                    // SAFETY: reading errno has no preconditions.
                    unsafe { *libc::__errno_location() }
                } else {
                    libc::EIO
                };
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        Ok(())
    }

    /// How many hierarchies a child joins (0 when the host has no cgroups).
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

impl AttemptCgroup {
    pub fn attempt(&self) -> i64 {
        self.attempt
    }

    /// The attempt's directory in each hierarchy.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.path.clone()).collect()
    }

    pub fn exists(&self) -> bool {
        self.dirs.iter().any(|d| is_real_dir(&d.path))
    }

    /// Opens each hierarchy's `cgroup.procs` (`O_WRONLY|O_CLOEXEC`), in the daemon,
    /// before the fork.
    pub fn join_fds(&self) -> Result<JoinFds, CgroupError> {
        let mut fds = Vec::with_capacity(self.dirs.len());
        for d in &self.dirs {
            let p = d.path.join("cgroup.procs");
            let f = open_nofollow(&p, true).map_err(io_err("opening", &p))?;
            fds.push(OwnedFd::from(f));
        }
        Ok(JoinFds { fds })
    }

    fn with_role(&self, f: fn(&Roles) -> bool) -> Option<&AttDir> {
        self.dirs.iter().find(|d| f(&d.roles))
    }

    /// Memory, CPU time and pids as the cgroups count them; `None` if the cgroups are gone.
    pub fn usage(&self) -> Option<CgroupUsage> {
        if !self.exists() {
            return None;
        }
        let mut u = CgroupUsage::default();
        if let Some(d) = self.with_role(|r| r.memory) {
            let (cur, peak) = match d.kind {
                Kind::V2 => ("memory.current", "memory.peak"),
                Kind::V1 => ("memory.usage_in_bytes", "memory.max_usage_in_bytes"),
            };
            u.memory_current = read_u64(&d.path.join(cur));
            u.memory_peak = read_u64(&d.path.join(peak));
        }
        if let Some(d) = self.with_role(|r| r.cpu_time) {
            u.cpu_usec = match d.kind {
                Kind::V2 => read_keyed(&d.path.join("cpu.stat"), "usage_usec"),
                Kind::V1 => read_u64(&d.path.join("cpuacct.usage")).map(|ns| ns / 1000),
            };
        }
        if let Some(d) = self.with_role(|r| r.pids) {
            u.pids_current = read_u64(&d.path.join("pids.current"));
        }
        Some(u)
    }

    /// Processes the OOM killer killed in this attempt (0 if unknown).
    pub fn oom_kills(&self) -> u64 {
        let Some(d) = self.with_role(|r| r.memory) else {
            return 0;
        };
        let file = match d.kind {
            Kind::V2 => "memory.events",
            Kind::V1 => "memory.oom_control",
        };
        read_keyed(&d.path.join(file), "oom_kill").unwrap_or(0)
    }

    /// Forks refused because the attempt was at `pids_max` (0 if unknown).
    pub fn pids_refused(&self) -> u64 {
        self.with_role(|r| r.pids)
            .and_then(|d| read_keyed(&d.path.join("pids.events"), "max"))
            .unwrap_or(0)
    }

    /// Every process in the attempt's cgroups (union over hierarchies), ascending.
    pub fn pids(&self) -> Vec<i32> {
        let mut all = BTreeSet::new();
        for d in &self.dirs {
            all.extend(read_pids(&d.path.join("cgroup.procs")));
        }
        all.into_iter().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.dirs
            .iter()
            .all(|d| read_pids(&d.path.join("cgroup.procs")).is_empty())
    }

    /// Kills everything in the attempt: `cgroup.kill` where the host has it (atomic, so a
    /// double-forked or `setsid` process cannot escape), then SIGKILL to every member
    /// still listed, repeated until none is, for at most a few seconds.
    pub fn kill(&self) -> Result<(), CgroupError> {
        let deadline = Instant::now() + KILL_BOUND;
        let kill_file = self
            .dirs
            .iter()
            .filter(|d| d.kind == Kind::V2)
            .map(|d| d.path.join("cgroup.kill"))
            .find(|p| p.exists());
        let mut round = 0u32;
        loop {
            if let Some(k) = &kill_file {
                match write_value(k, "1") {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(io_err("writing", k)(e)),
                }
            }
            // After cgroup.kill, members are dying; signal one by one only if some linger
            // (or a v1 hierarchy holds a process the v2 cgroup does not).
            if kill_file.is_none() || round > 0 {
                for d in &self.dirs {
                    signal_members(&d.path.join("cgroup.procs"));
                }
            }
            // Dying takes microseconds to milliseconds: poll briefly, then signal again.
            let round_end = (Instant::now() + Duration::from_millis(50)).min(deadline);
            let mut pause = Duration::from_micros(100);
            loop {
                if self.is_empty() {
                    return Ok(());
                }
                if Instant::now() >= round_end {
                    break;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            if Instant::now() >= deadline {
                let d = self
                    .dirs
                    .iter()
                    .find(|d| !read_pids(&d.path.join("cgroup.procs")).is_empty());
                return Err(CgroupError::Survivors {
                    path: d.map(|d| d.path.clone()).unwrap_or_default(),
                    pids: self.pids(),
                });
            }
            round += 1;
        }
    }

    /// Removes the attempt's cgroups in every hierarchy (absent is success). A cgroup
    /// with processes left is `Busy`: kill, and retry later.
    pub fn remove(&self) -> Result<(), CgroupError> {
        let mut first_err = None;
        for d in &self.dirs {
            if let Err(e) = remove_tree(&d.path, 0)
                && first_err.is_none()
            {
                first_err = Some(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// SIGKILLs every process listed in `procs`, exactly: each pid is pinned with a pidfd
/// and signalled only if it is still listed afterwards, so a pid reused by a process
/// outside the cgroup is never hit. Never signals this process.
fn signal_members(procs: &Path) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let pids: Vec<i32> = read_pids(procs).into_iter().filter(|&p| p != me).collect();
    if pids.is_empty() {
        return;
    }
    let mut pinned = Vec::with_capacity(pids.len());
    let mut no_pidfd = false;
    for &pid in &pids {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd >= 0 {
            // SAFETY: the kernel just returned this descriptor to us.
            pinned.push((pid, unsafe { OwnedFd::from_raw_fd(fd as i32) }));
        } else if io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            no_pidfd = true;
        }
    }
    let still: BTreeSet<i32> = read_pids(procs).into_iter().collect();
    for (pid, fd) in &pinned {
        if still.contains(pid) {
            // SAFETY: signalling through a pidfd we own; no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            }
        }
    }
    if no_pidfd {
        // Kernels before 5.3: plain kill(2), with the small pid-reuse window that implies.
        for pid in pids.iter().filter(|p| still.contains(p)) {
            if !pinned.iter().any(|(q, _)| q == pid) {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
        }
    }
}

/// rmdir `dir` after any child cgroups (depth-bounded; `read_dir` types are lstat's, so
/// no link is followed).
fn remove_tree(dir: &Path, depth: u32) -> Result<(), CgroupError> {
    if depth < 8
        && let Ok(entries) = fs::read_dir(dir)
    {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path(), depth + 1)?;
            }
        }
    }
    match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(CgroupError::Busy {
            path: dir.to_path_buf(),
        }),
        Err(e) => Err(io_err("removing", dir)(e)),
    }
}

#[path = "cgroup_handover.rs"]
pub mod handover;

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
