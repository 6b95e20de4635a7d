//! cgroup v2: where our base goes (the delegation layout), which controllers and `cgroup.kill` the host has, and making `<own>` hand controllers down.

use super::attempt::cpu_quota_us;
use super::detect::{
    Membership, MountEntry, join_components, relative_components, under_root, unwritable,
};
use super::files::{io_err, is_real_dir, read_pids, read_value, write_file, write_value};
use super::{BASE_PREFIX, CPU_PERIOD_US, CgroupError, Hier, Kind, LEAF, Limits, Roles};
use std::fs;
use std::path::{Path, PathBuf};

/// Where our v2 cgroups go, as components below the v2 mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct V2Layout {
    /// The cgroup we create our base in and enable controllers for.
    pub(super) managed: Vec<String>,
    /// The leaf this process must live in so `managed` may enable controllers.
    pub(super) leaf: Option<Vec<String>>,
    pub(super) base: Vec<String>,
    pub(super) delegated: bool,
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
/// turns them off between two lives (`runner::cgroup::handover`), and each daemon writes
/// its live attempts' limits again at start.
pub(super) fn v2_layout(
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

/// Kernel 5.14 added `cgroup.kill`.
pub(super) fn release_has_cgroup_kill(release: &str) -> bool {
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
pub(super) fn has_cgroup_kill(top: &Path, own: &Path, osrelease: Option<&str>) -> bool {
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

pub(super) fn read_controllers(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("cgroup.controllers"))
        .map(|t| t.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// What the v2 search found: its hierarchy when we may use it, and for the notes its
/// controllers and where it is (or why it is not used).
pub(super) struct V2Found {
    pub(super) hier: Option<Hier>,
    pub(super) controllers: Vec<String>,
    pub(super) place: String,
    /// The delegated cgroup we manage, when v2 is delegated to us.
    pub(super) delegated: Option<PathBuf>,
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
pub(super) fn plan_v2(
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
pub(super) fn v2_hier(
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

/// Enables `ctls` for `dir`'s children, skipping those already enabled.
pub(super) fn enable(dir: &Path, ctls: &[&'static str]) -> Result<(), CgroupError> {
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
pub(super) fn move_all(from: &Path, leaf: &Path) -> Result<(), CgroupError> {
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

/// Writes `l` in the v2 files of the roles `dir`'s hierarchy serves (`attempt::write_limits`).
pub(super) fn write_limits(dir: &Path, roles: Roles, l: &Limits) -> Result<(), CgroupError> {
    if roles.memory {
        let v = l.memory_max.map_or("max".to_string(), |b| b.to_string());
        write_file(dir, "memory.max", &v)?;
        // Without this a limited job would page out to swap: a limit is a limit.
        if dir.join("memory.swap.max").exists() {
            let s = if l.memory_max.is_some() { "0" } else { "max" };
            write_file(dir, "memory.swap.max", s)?;
        }
    }
    if roles.pids {
        let v = l.pids_max.map_or("max".to_string(), |n| n.to_string());
        write_file(dir, "pids.max", &v)?;
    }
    if roles.cpu {
        let v = match l.cpu_max_millis {
            Some(m) => format!("{} {CPU_PERIOD_US}", cpu_quota_us(m)),
            None => format!("max {CPU_PERIOD_US}"),
        };
        write_file(dir, "cpu.max", &v)?;
    }
    Ok(())
}
