//! cgroup v1: the hierarchies that serve what v2 does not, and v1's memory-with-swap limit.

use super::attempt::cpu_quota_us;
use super::detect::{
    Membership, MountEntry, join_components, relative_components, under_root, unwritable,
};
use super::files::{io_err, is_real_dir, write_file, write_value};
use super::{BASE_PREFIX, CPU_PERIOD_US, CgroupError, Hier, Kind, Limits, Roles};
use std::path::{Path, PathBuf};

/// v1, for what v2 does not serve: adds the hierarchies to `hiers` and returns, for
/// each controller wanted and not found, why.
pub(super) fn plan_v1(
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
pub(super) fn v1_parent(
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

/// v1 keeps `memory.memsw.limit_in_bytes` (memory + swap) >= `memory.limit_in_bytes`
/// and refuses a write that breaks it, so the order depends on the direction. Setting
/// both to the same value forbids swap: a limit is a limit.
pub(super) fn write_v1_memory(dir: &Path, value: &str) -> Result<(), CgroupError> {
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

/// Writes `l` in the v1 files of the roles `dir`'s hierarchy serves (`attempt::write_limits`).
pub(super) fn write_limits(dir: &Path, roles: Roles, l: &Limits) -> Result<(), CgroupError> {
    if roles.memory {
        let v = l.memory_max.map_or("-1".to_string(), |b| b.to_string());
        write_v1_memory(dir, &v)?;
    }
    if roles.pids {
        let v = l.pids_max.map_or("max".to_string(), |n| n.to_string());
        write_file(dir, "pids.max", &v)?;
    }
    if roles.cpu {
        write_file(dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
        let v = l
            .cpu_max_millis
            .map_or("-1".to_string(), |m| cpu_quota_us(m).to_string());
        write_file(dir, "cpu.cfs_quota_us", &v)?;
    }
    Ok(())
}
