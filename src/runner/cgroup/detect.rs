//! Detection: parse mountinfo and /proc/self/cgroup, probe delegation and writability, and plan which hierarchy serves which role.

use super::v1::plan_v1;
use super::v2::{V2Found, plan_v2};
use super::{Cgroups, Hier, Kind, Roles, V1_CONTROLLERS, check_tag};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Detection with the delegation probe injected (tests give fixture trees a probe).
pub(super) fn detect_with(
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

/// A cgroup mount from /proc/self/mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct MountEntry {
    /// The hierarchy's path mounted here ("/" unless a bind mount or a namespace).
    pub(super) root: String,
    pub(super) mount_point: PathBuf,
    /// "cgroup" or "cgroup2".
    pub(super) fstype: String,
    /// v1: the controllers among the super options.
    pub(super) controllers: Vec<String>,
}

/// The cgroup and cgroup2 mounts of a mountinfo text; other lines are skipped.
pub(super) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    crate::runner::mountinfo::parse(text)
        .into_iter()
        .filter(|m| m.fstype == "cgroup" || m.fstype == "cgroup2")
        .filter_map(|m| {
            Some(MountEntry {
                root: String::from_utf8(m.root).ok()?,
                controllers: m
                    .super_opts
                    .split(',')
                    .filter(|o| V1_CONTROLLERS.contains(o))
                    .map(String::from)
                    .collect(),
                mount_point: m.point,
                fstype: m.fstype,
            })
        })
        .collect()
}

/// A line of /proc/self/cgroup: `id:controllers:path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Membership {
    pub(super) id: u32,
    /// Empty for v2; `name=systemd` style names are kept too.
    pub(super) controllers: Vec<String>,
    pub(super) path: String,
}

pub(super) fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
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
pub(super) fn relative_components(root: &str, path: &str) -> Result<Vec<String>, String> {
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

pub(super) fn join_components(top: &Path, comps: &[String]) -> PathBuf {
    let mut p = top.to_path_buf();
    for c in comps {
        p.push(c);
    }
    p
}

/// The mount point as a path under `sys_root`.
pub(super) fn under_root(sys_root: &Path, mount_point: &Path) -> PathBuf {
    sys_root.join(mount_point.strip_prefix("/").unwrap_or(mount_point))
}

/// systemd marks a delegated cgroup with an xattr; older versions only chown it to the
/// unit's (non-root) user.
pub(super) fn is_delegated(dir: &Path) -> bool {
    for name in ["trusted.delegate", "user.delegate"] {
        if read_xattr(dir, name).as_deref() == Some(b"1".as_slice()) {
            return true;
        }
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    euid != 0 && fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == euid)
}

pub(super) fn read_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
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
pub(super) fn unwritable(dir: &Path) -> Option<String> {
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

pub(super) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The plan: which hierarchy serves which role, and where our bases go.
pub(super) fn plan(
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
        hiers,
        why_none: String::new(),
        why_missing: notes,
        delegated: v2.delegated,
    }
}

/// Why no hierarchy serves us, in one line: what kept v2 out, then what kept the first
/// v1 hierarchy out.
pub(super) fn why_none(
    mounts: &[MountEntry],
    v2_place: String,
    v1_missing: &[(&str, String)],
) -> String {
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
pub(super) fn missing_notes(
    hiers: &[Hier],
    v2: &V2Found,
    v1_missing: &[(&str, String)],
) -> Vec<String> {
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
