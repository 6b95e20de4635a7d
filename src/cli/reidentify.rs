//! `host reidentify`: a new host id for a copied state directory, what it did and
//! what is left to do (its live-runner look and its report are functions of their own).

use super::output::{Out, time};
use super::{CliError, CliResult};
use crate::store::Store;
use crate::timefmt::now_millis;
use serde_json::json;

/// `host reidentify`: a new host id for a copied state directory, under the daemon
/// lock (refused, exit 7, while a daemon runs on it), with what it did and what is
/// left to do.
pub fn reidentify(
    store: &crate::store::SqliteStore,
    dir: &std::path::Path,
    out: &mut Out,
) -> CliResult {
    use crate::facts::lock::{DaemonLock, HostClaim, LockError};
    use crate::runner::claim;
    let locked = |e: LockError| {
        let message = match &e {
            LockError::Held { holder, .. } => format!(
                "a daemon runs on this state directory ({holder}): stop it first; a running \
                 daemon acts on its runners under the id it started with"
            ),
            other => other.to_string(),
        };
        CliError::classed(super::exit::Failure::of_lock(&e), message)
    };
    let _lock = DaemonLock::acquire(dir).map_err(locked)?;
    let before = store.host_or_create()?;
    // Who runs with the id now, if a daemon on this machine does: the original.
    let original = match HostClaim::take(&claim::lock_dir(), &before.id, dir) {
        Err(LockError::HostId { holder, .. }) => Some(holder),
        _ => None,
    };
    let own_live = live_in_here(store, &before, dir)?;
    crate::domain::identity::may_reidentify(&own_live, original.is_some())
        .map_err(|why| CliError::classed(super::exit::Failure::Conflict, why))?;
    let now = now_millis();
    let r = store.reidentify(crate::runner::machine::current().as_deref(), now)?;
    let why = match &original {
        Some(h) => format!("host reidentify; the original runs here ({h})"),
        None => "host reidentify".to_string(),
    };
    crate::store::daemon_facts::put_identity_change(store, &r.line(&time(now), &why))?;
    if r.left_pool.is_some() {
        crate::store::daemon_facts::LinkSeen::clear(store)?;
    }
    let after = store.host_or_create()?;
    // The copy's runner uids are the original's too: a daemon would be refused them.
    let uids_held = after.runner_uids.filter(|range| {
        matches!(
            claim::check(&claim::lock_dir(), dir, *range),
            Err(claim::ClaimError::Held { .. })
        )
    });
    let mut next: Vec<String> = Vec::new();
    if let Some(url) = &r.left_pool {
        next.push(format!(
            "it left the pool at {url} (its token is the original's): add it as a new host \
             (coordinator host add NAME on the coordinator), then host set coordinator={url} \
             coordinator_token_file=PATH"
        ));
    }
    if let Some(range) = &uids_held {
        next.push(format!(
            "runner_uids {range} are the original's, and another daemon holds them: give this \
             host its own range (host set runner_uids=START-END) before its daemon starts"
        ));
    }
    out.emit(
        || reidentified_text(&r, original.as_deref(), &next),
        || {
            json!({
                "old_id": r.old_id,
                "new_id": r.new_id,
                "profiles": r.profiles,
                "handed_back": r.handed_back,
                "reruns_dropped": r.reruns_dropped,
                "left_pool": r.left_pool,
                "original": original,
                "machine_id": r.machine_id,
                "next": next,
            })
        },
    );
    Ok(())
}

/// The open attempts of the host's id whose runners live here, with their roots in
/// this directory's own runtime directory: this directory's, unless another daemon runs
/// with the id.
fn live_in_here(
    store: &crate::store::SqliteStore,
    host: &crate::domain::Host,
    dir: &std::path::Path,
) -> Result<Vec<i64>, CliError> {
    let runtime = crate::runner::root::host_runtime(host).unwrap_or_else(|| dir.into());
    let in_here = crate::runner::processes_with_cwd_or_exe_under(&runtime.join("attempts"));
    Ok(store
        .open_attempts(&host.id)?
        .iter()
        .filter(|a| match (a.pid, a.pid_start) {
            (Some(pid), Some(start)) => {
                crate::runner::is_alive(pid, start) == crate::runner::ProcessStatus::Alive
                    && in_here.contains(&pid)
            }
            _ => false,
        })
        .map(|a| a.id)
        .collect())
}

/// What `host reidentify` did and what is left, as a person reads it.
fn reidentified_text(
    r: &crate::store::Reidentified,
    original: Option<&str>,
    next: &[String],
) -> String {
    let mut s = format!(
        "host id {} -> {}\n\
             profiles moved to the new id: {}\n\
             open attempts handed back to host {} (their runners are the original's: \
             never killed or deregistered from here): {}\n",
        r.old_id,
        r.new_id,
        r.profiles,
        r.old_id,
        if r.handed_back.is_empty() {
            "none".to_string()
        } else {
            r.handed_back
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    if r.reruns_dropped > 0 {
        s.push_str(&format!(
            "lost jobs left for the original to re-run: {}\n",
            r.reruns_dropped
        ));
    }
    if let Some(h) = original {
        s.push_str(&format!("the original runs here: {h}\n"));
    }
    s.push_str(&format!(
        "new runners are named rm-{}-N\n",
        crate::domain::host::short_id(&r.new_id)
    ));
    for n in next {
        s.push_str(&format!("next: {n}\n"));
    }
    s
}
