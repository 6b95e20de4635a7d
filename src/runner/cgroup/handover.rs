//! Between two lives of a daemon under systemd: its delegated cgroup stops handing controllers down, so systemd can start the next daemon there.
//!
//! A daemon started in the root of its delegated cgroup (systemd before 254, which has
//! no `DelegateSubgroup=`) moves into the leaf `daemon/` and enables `memory`, `pids`
//! and `cpu` for its children: that is what gives each attempt its limits. systemd
//! starts the next daemon in that root again, and the kernel refuses a process in a
//! cgroup that hands controllers down (`EBUSY`; the unit fails with `219/CGROUP` and
//! never comes back while a runner lives). Runners outlive the daemon on purpose
//! (`KillMode=process`), so the cgroup cannot simply be emptied.
//!
//! So the packaged unit runs `runner-manager daemon --release-cgroups` as
//! `ExecStopPost=+` (in systemd's `.control` leaf, after every stop, crash or
//! restart): it turns the controllers off in our bases (`runner-manager-<tag>`) and
//! then in the root. Live attempts keep running, without their limits until the next
//! daemon, which enables the controllers again and writes every live attempt's limits
//! back at its start (`daemon::host::contain::restore_limits`). Measured on Debian 12: the
//! gap is the restart itself, about a second for `systemctl restart`, and `RestartSec=`
//! more after a failure.
//!
//! Only cgroups we made are touched: the release finds the unit's cgroup from its own
//! membership, requires it to be delegated, and writes only `cgroup.subtree_control`
//! of the `runner-manager-*` directories in it and of the root, each opened without
//! following a link.

use super::detect::{
    is_delegated, parse_mountinfo, parse_proc_cgroup, relative_components, under_root,
};
use super::files::{check_cgroupfs, is_real_dir, read_value, write_value};
use super::{BASE_PREFIX, CgroupError, LEAF};
use std::fs;
use std::path::{Path, PathBuf};

/// systemd's leaf for a delegated unit's control processes (`ExecStopPost=` and the
/// like), where the release runs.
const CONTROL_LEAF: &str = ".control";

/// What the release turned off, cgroup by cgroup, deepest first.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// The delegated cgroup: the unit's.
    pub cgroup: PathBuf,
    pub turned_off: Vec<(PathBuf, Vec<String>)>,
}

/// Pure: the delegated cgroup's components given this process's own, below the v2
/// mount: a trailing `.control` (systemd's control leaf) or `daemon` (ours) is not it.
pub fn unit_components(own: &[String]) -> &[String] {
    match own.last().map(String::as_str) {
        Some(CONTROL_LEAF) | Some(LEAF) => &own[..own.len() - 1],
        _ => own,
    }
}

/// Turns off the controllers of the delegated cgroup this process runs in (or whose
/// leaf it runs in), as the unit's `ExecStopPost=` does.
pub fn release() -> Result<Released, CgroupError> {
    release_in(
        Path::new("/proc/self"),
        Path::new("/"),
        &is_delegated,
        &check_cgroupfs,
    )
}

/// [`release`] with the process's `/proc` entry, the root the mounts are under, the
/// delegation probe and the file system check given (tests give a fixture tree).
pub fn release_in(
    proc_self: &Path,
    sys_root: &Path,
    delegated: &dyn Fn(&Path) -> bool,
    on_cgroupfs: &dyn Fn(&Path) -> Result<(), CgroupError>,
) -> Result<Released, CgroupError> {
    let unavailable = |why: String| CgroupError::Unavailable { why };
    let read = |name: &str| {
        fs::read_to_string(proc_self.join(name)).map_err(|e| {
            unavailable(format!(
                "cannot read {}: {e}",
                proc_self.join(name).display()
            ))
        })
    };
    let mounts = parse_mountinfo(&read("mountinfo")?);
    let members = parse_proc_cgroup(&read("cgroup")?);
    let own = members
        .iter()
        .find(|m| m.id == 0 && m.controllers.is_empty())
        .ok_or_else(|| unavailable("this process is in no cgroup v2".into()))?;
    let (mount, comps) = mounts
        .iter()
        .filter(|e| e.fstype == "cgroup2")
        .find_map(|e| relative_components(&e.root, &own.path).ok().map(|c| (e, c)))
        .ok_or_else(|| unavailable(format!("no cgroup2 mount shows {}", own.path)))?;
    let unit = unit_components(&comps);
    if unit.is_empty() {
        return Err(unavailable(
            "this process runs in the cgroup root, not in a unit's delegated cgroup".into(),
        ));
    }
    let mut dir = under_root(sys_root, &mount.mount_point);
    dir.extend(unit);
    if !is_real_dir(&dir) || !delegated(&dir) {
        return Err(unavailable(format!(
            "{} is not a cgroup delegated to us (the unit needs Delegate=yes)",
            dir.display()
        )));
    }
    on_cgroupfs(&dir)?;
    let mut out = Released {
        cgroup: dir.clone(),
        turned_off: Vec::new(),
    };
    let mut bases: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| unavailable(format!("cannot list {}: {e}", dir.display())))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(BASE_PREFIX))
        })
        .map(|e| e.path())
        .collect();
    bases.sort();
    bases.push(dir);
    for d in bases {
        if let Some(off) = turn_off(&d)? {
            out.turned_off.push((d, off));
        }
    }
    Ok(out)
}

/// Turns off every controller `dir` hands its children, in one write (the kernel
/// takes all of them or none). `None` when it handed none.
fn turn_off(dir: &Path) -> Result<Option<Vec<String>>, CgroupError> {
    let file = dir.join("cgroup.subtree_control");
    let on: Vec<String> = read_value(&file)
        .map(|t| t.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    if on.is_empty() {
        return Ok(None);
    }
    let words: Vec<String> = on.iter().map(|c| format!("-{c}")).collect();
    write_value(&file, &words.join(" ")).map_err(|source| CgroupError::Io {
        action: "turning controllers off in",
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(Some(on))
}

#[cfg(test)]
mod tests {
    use super::super::tests::comps;
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_unit_is_the_cgroup_above_a_control_or_daemon_leaf() {
        let unit = comps("/system.slice/runner-manager.service");
        for own in [
            "/system.slice/runner-manager.service/.control",
            "/system.slice/runner-manager.service/daemon",
        ] {
            assert_eq!(unit_components(&comps(own)), unit.as_slice(), "{own}");
        }
        assert_eq!(unit_components(&unit), unit.as_slice());
    }

    /// A fixture: `/proc/self` saying we are in the unit's `.control` leaf, and the
    /// unit's cgroup with our base (handing memory and pids to its attempts), another
    /// base of ours that hands nothing, an attempt, and a directory not ours.
    fn fixture(dir: &Path) -> PathBuf {
        let proc_self = dir.join("proc/self");
        fs::create_dir_all(&proc_self).unwrap();
        fs::write(
            proc_self.join("mountinfo"),
            "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
        )
        .unwrap();
        fs::write(
            proc_self.join("cgroup"),
            "0::/system.slice/runner-manager.service/.control\n",
        )
        .unwrap();
        let unit = dir.join("sys/fs/cgroup/system.slice/runner-manager.service");
        for (d, on) in [
            ("", "cpu memory pids"),
            ("runner-manager-a1b2c3d4", "memory pids"),
            ("runner-manager-a1b2c3d4/att-7", ""),
            ("runner-manager-ffff0000", ""),
            ("daemon", ""),
            ("other", "memory"),
        ] {
            fs::create_dir_all(unit.join(d)).unwrap();
            fs::write(unit.join(d).join("cgroup.subtree_control"), on).unwrap();
        }
        unit
    }

    #[test]
    fn turns_off_our_bases_then_the_root_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("rm-handover-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let unit = fixture(&dir);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        let is_unit = |p: &Path| p == unit;
        let r = release_in(&dir.join("proc/self"), &dir, &is_unit, &|_| Ok(())).unwrap();
        assert_eq!(r.cgroup, unit);
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            r.turned_off,
            vec![
                (
                    unit.join("runner-manager-a1b2c3d4"),
                    words(&["memory", "pids"])
                ),
                (unit.clone(), words(&["cpu", "memory", "pids"])),
            ]
        );
        let written =
            |d: &str| fs::read_to_string(unit.join(d).join("cgroup.subtree_control")).unwrap();
        // A fixture's files keep what was written: the kernel would read back the rest.
        assert_eq!(written("runner-manager-a1b2c3d4"), "-memory -pids");
        assert_eq!(written(""), "-cpu -memory -pids");
        assert_eq!(written("other"), "memory");
        assert_eq!(written("runner-manager-a1b2c3d4/att-7"), "");

        // Not delegated: nothing is written.
        fs::write(unit.join("cgroup.subtree_control"), "memory").unwrap();
        let e = release_in(&dir.join("proc/self"), &dir, &|_| false, &|_| Ok(())).unwrap_err();
        assert!(
            e.to_string().contains("not a cgroup delegated to us"),
            "{e}"
        );
        assert_eq!(written(""), "memory");
        fs::remove_dir_all(&dir).unwrap();
    }
}
