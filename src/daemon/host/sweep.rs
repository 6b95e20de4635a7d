//! The host-wide orphan sweep: attempt roots on disk and attempt cgroups that no open
//! attempt explains (left by a crash) are removed, and what runs in them is killed.
//!
//! The sweep acts only on what the daemon itself created, identified by what it
//! recorded, never by where a path leads: a root is found by its name under
//! `attempts/` and never through a link (a job could plant one pointing anywhere); a
//! process is killed only through the attempt's own cgroup, its own uid (when no open
//! attempt holds that uid), or its recorded pid when the pid's start time and owner
//! still match the record.
//!
//! With a `runtime_root`, the sweep lists only this host's own directory in it
//! (`runner::root::host_runtime`): another host given the same `runtime_root` has its
//! own, which is never listed. Roots left in the old shared layout (`RUNTIME/attempts`,
//! before the directory per host) are removed only when they are provably this host's:
//! the store has the attempt, it is closed, and the root is a real directory owned by
//! the runner uid the attempt ran as (claimed host-wide, so no other host's); anything
//! else there is left alone.

use super::contain::Containment;
use crate::domain::{Attempt, Host};
use crate::runner::{self, RootKind};
use crate::store::Store;
use crate::{log_info, log_warn};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

pub fn sweep(store: &dyn Store, host: &Host, state_dir: &Path, contain: &Containment) {
    // Roots first, attempts second: an attempt row is always written before its root,
    // so any root listed here whose attempt is not open is truly an orphan.
    let roots = match runner::list_attempt_roots(contain.runtime_dir(state_dir)) {
        Ok(r) => r,
        Err(e) => {
            log_warn!("sweep_failed", error = e);
            return;
        }
    };
    let cgroups = contain.cgroups.list_attempts();
    let open: HashMap<i64, Attempt> = match store.open_attempts(&host.id) {
        Ok(a) => a.into_iter().map(|a| (a.id, a)).collect(),
        Err(e) => {
            log_warn!("sweep_failed", error = e);
            return;
        }
    };
    let held_uids: HashSet<u32> = open.values().filter_map(|a| a.runner_uid).collect();
    let mut killed: HashSet<i64> = HashSet::new();
    for r in roots {
        if open.contains_key(&r.attempt) {
            continue;
        }
        if r.kind != RootKind::Dir {
            // Not something the daemon made (a link, a file): unlinked, never followed.
            match std::fs::remove_file(&r.path) {
                Ok(()) => log_warn!("foreign_entry_removed", path = r.path.display()),
                Err(e) => log_warn!("foreign_entry_kept", path = r.path.display(), error = e),
            }
            continue;
        }
        kill_orphan(store, contain, &host.id, r.attempt, &held_uids);
        killed.insert(r.attempt);
        match runner::remove_root(&r.path) {
            Ok(()) => log_info!("orphan_root_removed", attempt = r.attempt),
            Err(e) => log_warn!("orphan_root_kept", attempt = r.attempt, error = e),
        }
    }
    if let Some(old) = &contain.legacy_runtime {
        sweep_legacy(store, &host.id, old, &open);
    }
    for id in cgroups {
        if open.contains_key(&id) {
            continue;
        }
        if !killed.contains(&id) {
            kill_orphan(store, contain, &host.id, id, &held_uids);
        }
        if let Err(e) = contain.cgroups.attempt(id).remove() {
            log_warn!("orphan_cgroup_kept", attempt = id, error = e);
        }
    }
}

/// Removes this host's closed attempts' roots (its own host id's) from the old shared
/// layout (see the module's description); never kills: their attempts are closed, so what ran in them
/// was killed at their cleanup or by the cgroup and uid passes.
fn sweep_legacy(store: &dyn Store, host_id: &str, runtime: &Path, open: &HashMap<i64, Attempt>) {
    let Ok(roots) = runner::list_attempt_roots(runtime) else {
        return;
    };
    for r in roots {
        if open.contains_key(&r.attempt) || r.kind != RootKind::Dir {
            continue;
        }
        let Ok(a) = store.attempt(r.attempt) else {
            continue;
        };
        let owner = std::fs::symlink_metadata(&r.path).map(|m| m.uid()).ok();
        // Another host id's row (a copy's handed-back attempt) may name a root the
        // original host still uses.
        if a.host_id != host_id || a.runner_uid.is_none() || owner != a.runner_uid {
            continue;
        }
        match runner::remove_root(&r.path) {
            Ok(()) => log_info!("legacy_root_removed", attempt = r.attempt),
            Err(e) => log_warn!("legacy_root_kept", attempt = r.attempt, error = e),
        }
    }
}

/// Kills what a closed (or unknown) attempt left, by the identities the daemon
/// recorded: its cgroup, its own uid unless an open attempt holds it now, and its
/// pid's session when pid, start time and owner all match the record. An attempt of
/// another host id is not this daemon's to kill: a copied state directory that took a
/// new id (`host reidentify`) still has the original's rows and copies of its roots,
/// and their pids are the original's live runners.
fn kill_orphan(
    store: &dyn Store,
    contain: &Containment,
    host_id: &str,
    id: i64,
    held_uids: &HashSet<u32>,
) {
    if !contain.cgroups.is_none() {
        let cg = contain.cgroups.attempt(id);
        if cg.exists() && !cg.is_empty() {
            log_info!("orphan_cgroup_killed", attempt = id);
            if let Err(e) = cg.kill() {
                log_warn!("orphan_cgroup_kill_failed", attempt = id, error = e);
            }
        }
    }
    let Ok(a) = store.attempt(id) else {
        return;
    };
    if a.host_id != host_id {
        log_info!(
            "orphan_of_another_host_spared",
            attempt = id,
            host = a.host_id
        );
        return;
    }
    if let (Some(u), Some(g)) = (a.runner_uid, a.runner_gid)
        && !held_uids.contains(&u)
        && !runner::uid::processes_of_uid(u).is_empty()
    {
        log_info!("orphan_uid_killed", attempt = id, uid = u);
        if let Err(e) = super::contain::kill_uid_if_ours(contain, u, g) {
            log_warn!("orphan_uid_kill_failed", attempt = id, error = e);
        }
    }
    if let (Some(pid), Some(start)) = (a.pid, a.pid_start)
        && runner::process_start_time(pid) == Some(start)
        && a.runner_uid
            .is_none_or(|u| runner::uid::processes_of_uid(u).contains(&pid))
    {
        log_info!("orphan_process_killed", attempt = id, pid = pid);
        runner::kill_session(pid, libc::SIGKILL);
    }
}
