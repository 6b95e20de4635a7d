//! Keeping the managed runner installs current. GitHub releases a new actions runner
//! every few weeks and stops sending jobs to runners far behind; a runner left to
//! update itself would do it in its own root, for every job. So the daemon does it,
//! once per release, beside the install in use (`install::managed`).
//!
//! A check runs on a target's I/O worker (`io::Task::RunnerRelease`), at most one per
//! host at a time (`host::runner_book::UpdateBook`, in `Shared`): at start, then every `--runner-check`
//! (6 h by default), and at once when an attempt ends because its runner was
//! deprecated or tried to update itself. It asks the target's downloads API (a
//! conditional GET: a 304 while nothing changed costs nothing), and for each managed
//! install path (the default `STATE_DIR/runner` or a `runner_dir` of ours, see
//! `managed::Kind`) fetches and verifies the version `install::versions::wanted` names
//! beside the others, then switches the path's link to it. With no managed install
//! the check asks nothing. Old versions go (`versions::removable`) once no open
//! attempt's root links into them; that part needs no network and runs every
//! `runner_book::GC_EVERY` while a version is left to remove.
//!
//! What it found is kept in the store's key-value rows (`store::daemon_facts`'s
//! `RunnerCheck`) for `status`, `doctor` and `top`.

use crate::daemon::host::runner_book::{Job, UpdateBook};
use crate::daemon::shared::Shared;
use crate::domain::{Attempt, ReasonKind, Target};
use crate::github::GitHubClient;
use crate::install::{self, managed, versions};
use crate::store::{Store, daemon_facts};
use crate::timefmt::{Millis, now_millis};
use crate::{log_info, log_warn};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Whether an attempt's end says the install is behind: GitHub deprecated its
/// version, or the runner tried to update itself (exit 3/4).
pub fn prompts_check(a: &Attempt) -> bool {
    a.state.is_ended()
        && a.reason.as_ref().is_some_and(|r| {
            matches!(
                r.kind(),
                ReasonKind::VersionDeprecated | ReasonKind::RunnerUpdating
            )
        })
}

/// Called for each attempt the loop acted on: a deprecated or self-updating runner
/// makes the next check happen at once.
pub fn note_attempt(shared: &Shared, a: &Attempt) {
    if prompts_check(a) {
        shared.host.runner_update.prompt(a.id);
    }
}

/// What a pin below the newest release costs: GitHub tells a REST (JIT) runner older
/// than the newest to update itself (its registration cannot refuse), so each one
/// exits to update instead of taking its job. Scale set runners are registered with
/// updates disabled.
pub fn pin_warning(pin: Option<&str>, newest: &str, rest_profiles: bool) -> Option<String> {
    let pin = pin?;
    (rest_profiles && install::compare_versions(pin, newest).is_lt()).then(|| {
        format!(
            "runner_version {pin} is older than the newest release, {newest}: GitHub tells \
             REST (JIT) runners that old to update themselves, so they exit instead of \
             taking jobs; pin only scale set profiles' hosts, or set runner_version=latest"
        )
    })
}

/// Whether an open attempt without a complete root keeps every old version: only one
/// made before the last switch (its start may have resolved the old install).
pub fn root_unknown(live: bool, has_root: bool, created_at: Millis, switched_at: Millis) -> bool {
    live && !has_root && created_at <= switched_at
}

/// What one check did, for the worker's log and the loop.
#[derive(Debug, Default)]
pub struct Outcome {
    pub switched: Vec<(PathBuf, String)>,
    pub removed: Vec<String>,
    pub problem: Option<String>,
}

/// The managed install paths of the host's profiles, and what stands there.
fn managed_paths(
    shared: &Shared,
    store: &dyn Store,
) -> Result<Vec<(PathBuf, managed::Kind)>, String> {
    let profiles = store.profiles().map_err(|e| e.to_string())?;
    let paths: BTreeSet<PathBuf> = profiles
        .iter()
        .map(|p| super::starter::runner_dir(&shared.state_dir, p))
        .collect();
    let mut out = Vec::new();
    for p in paths {
        match managed::kind(&p, &shared.state_dir) {
            Ok(k @ (managed::Kind::Linked { .. } | managed::Kind::InPlace)) => out.push((p, k)),
            Ok(_) => {}
            Err(e) => return Err(format!("looking at {}: {e}", p.display())),
        }
    }
    Ok(out)
}

/// Gives the claim back if a job ends without saying how (a panic).
struct Claim<'a>(&'a UpdateBook, bool);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.finished(false, true);
        }
    }
}

/// Runs one claimed job on a worker; gives the claim back however it ends.
pub fn run(shared: &Shared, store: &dyn Store, client: &GitHubClient, target: &Target, job: Job) {
    let mut claim = Claim(&shared.host.runner_update, false);
    let mut out = Outcome::default();
    let result = match job {
        Job::Check => check(shared, store, client, target, &mut out),
        Job::Collect => Ok(()),
    };
    if let Err(e) = result {
        out.problem = Some(e);
    }
    let left = match collect(shared, store, &mut out) {
        Ok(left) => left,
        Err(e) => {
            out.problem.get_or_insert(e);
            true
        }
    };
    if let Ok(profiles) = store.profiles() {
        let paths: Vec<PathBuf> = profiles
            .iter()
            .map(|p| super::starter::runner_dir(&shared.state_dir, p))
            .collect();
        let _ = daemon_facts::put_runner_in_use(store, &crate::facts::runner_check::in_use(&paths));
    }
    if job == Job::Check {
        if let Some(p) = &out.problem {
            log_warn!("runner_check_failed", target = target.name, problem = p);
        }
        let _ = daemon_facts::put_runner_checked(store, now_millis(), out.problem.as_deref());
    }
    claim.1 = true;
    shared
        .host
        .runner_update
        .finished(!out.switched.is_empty(), left);
}

fn check(
    shared: &Shared,
    store: &dyn Store,
    client: &GitHubClient,
    target: &Target,
    out: &mut Outcome,
) -> Result<(), String> {
    let paths = managed_paths(shared, store)?;
    if paths.is_empty() {
        // Nothing of ours to keep current: nothing to ask.
        return Ok(());
    }
    let (os, arch) = install::platform().ok_or("GitHub builds no runner for this machine")?;
    let downloads = client
        .runner_downloads(&target.scope)
        .map_err(|e| format!("asking {} for runner downloads: {e}", target.name))?;
    let newest = install::choose(&downloads, os, arch, None).map_err(|e| e.to_string())?;
    let seen = daemon_facts::runner_check(store)
        .ok()
        .and_then(|c| c.newest);
    if seen.as_deref() != Some(newest.version.as_str()) {
        log_info!("runner_release_seen", version = newest.version);
        daemon_facts::put_runner_newest(store, &newest.version).map_err(|e| e.to_string())?;
    }
    let pin = store
        .host_or_create()
        .map_err(|e| e.to_string())?
        .runner_version;
    let mut problems = Vec::new();
    let rest = store
        .profiles()
        .map_err(|e| e.to_string())?
        .iter()
        .any(|p| p.demand != crate::domain::DemandSource::Scaleset);
    if let Some(w) = pin_warning(pin.as_deref(), &newest.version, rest) {
        problems.push(w);
    }
    for (path, kind) in paths {
        if let Err(e) = keep_current(
            shared,
            store,
            &path,
            kind,
            pin.as_deref(),
            &downloads,
            &newest,
            out,
        ) {
            problems.push(format!("{}: {e}", path.display()));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[allow(clippy::too_many_arguments)]
fn keep_current(
    shared: &Shared,
    store: &dyn Store,
    path: &Path,
    kind: managed::Kind,
    pin: Option<&str>,
    downloads: &[crate::github::RunnerDownload],
    newest: &install::Release,
    out: &mut Outcome,
) -> Result<(), String> {
    let current = install::installed_version(path);
    if kind == managed::Kind::InPlace {
        // Adopted only while nothing is live: moving it and linking it are two steps.
        let _guard = shared.alloc_lock.lock().unwrap_or_else(|p| p.into_inner());
        let host = store.host_or_create().map_err(|e| e.to_string())?;
        let open = store.open_attempts(&host.id).map_err(|e| e.to_string())?;
        if open.iter().any(|a| a.state.is_live()) {
            return Err("a directory install waits for no runner to be live before it is moved into the versioned layout".into());
        }
        let v = current
            .clone()
            .ok_or("its bin/runnerversion cannot be read")?;
        managed::adopt(path, &v, &shared.state_dir).map_err(|e| e.to_string())?;
        log_info!("runner_install_adopted", path = path.display(), version = v);
    }
    let Some(want) = versions::wanted(pin, Some(&newest.version), current.as_deref()) else {
        return Ok(());
    };
    let (os, arch) = install::platform().ok_or("GitHub builds no runner for this machine")?;
    let release = install::choose(downloads, os, arch, Some(&want)).map_err(|e| e.to_string())?;
    let (dir, fetched) = managed::fetch(&release, &shared.state_dir, &mut Stopping(shared))
        .map_err(|e| e.to_string())?;
    if fetched {
        log_info!(
            "runner_release_fetched",
            version = release.version,
            verified = release.sha256.is_some()
        );
    }
    managed::switch(path, &dir).map_err(|e| e.to_string())?;
    log_info!(
        "runner_install_switched",
        path = path.display(),
        from = crate::logging::Opt(&current),
        to = want
    );
    out.switched.push((path.to_path_buf(), want));
    Ok(())
}

/// Gives a download up when the daemon stops (SIGTERM must not wait for a release).
struct Stopping<'a>(&'a Shared);

impl install::Progress for Stopping<'_> {
    fn update(&mut self, _: u64, _: Option<u64>) {}
    fn finish(&mut self) {}
    fn cancelled(&self) -> bool {
        self.0.stopping()
    }
}

/// Removes the versions no managed path and no open attempt's root uses; says
/// whether one is left for later.
fn collect(shared: &Shared, store: &dyn Store, out: &mut Outcome) -> Result<bool, String> {
    let installed = managed::installed(&shared.state_dir);
    if installed.len() <= 1 {
        return Ok(false);
    }
    let paths = managed_paths(shared, store)?;
    let mut keep: BTreeSet<String> = paths
        .iter()
        .filter_map(|(_, k)| match k {
            managed::Kind::Linked { version } => Some(version.clone()),
            _ => None,
        })
        .collect();
    if let Some(pin) = store
        .host_or_create()
        .map_err(|e| e.to_string())?
        .runner_version
    {
        keep.insert(pin);
    }
    // Roots link to resolved paths (`runner::root` canonicalizes the install): compare
    // with resolved ones.
    let vd = managed::versions_dir(&shared.state_dir);
    let vd = std::fs::canonicalize(&vd).unwrap_or(vd);
    let resolved: Vec<PathBuf> = paths
        .iter()
        .map(|(p, _)| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let path_refs: Vec<&Path> = resolved.iter().map(PathBuf::as_path).collect();
    let switched_at = shared.host.runner_update.switched_at();
    // Read under the allocation lock: no intent is recorded while the roots are read.
    let _guard = shared.alloc_lock.lock().unwrap_or_else(|p| p.into_inner());
    let host = store.host_or_create().map_err(|e| e.to_string())?;
    let mut in_use = versions::InUse::default();
    for a in store.open_attempts(&host.id).map_err(|e| e.to_string())? {
        let root = shared.containment().attempt_root(&shared.state_dir, &a);
        match managed::root_links(&root) {
            Ok(links) => {
                for l in links {
                    in_use.note_link(&l, &vd, &path_refs);
                }
            }
            Err(_) => {
                if root_unknown(a.state.is_live(), false, a.created_at, switched_at) {
                    in_use.unknown = true;
                }
            }
        }
    }
    let gone = versions::removable(&installed, &keep, &in_use);
    for v in &gone {
        managed::remove(&shared.state_dir, v).map_err(|e| e.to_string())?;
        log_info!("runner_install_removed", version = v);
        out.removed.push(v.clone());
    }
    Ok(installed
        .iter()
        .any(|v| !gone.contains(v) && !keep.contains(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Outcome as End, Reason};

    #[test]
    fn a_deprecated_or_self_updating_runner_prompts_a_check() {
        let mut a = Attempt::new(1, "p", "t", "0123abcd89ef4567", 0);
        assert!(!prompts_check(&a));
        let mut dep = a.clone();
        dep.end(
            End::Failed,
            Some(Reason::exit(ReasonKind::VersionDeprecated, 7)),
            5,
        )
        .unwrap();
        assert!(prompts_check(&dep));
        let mut upd = a.clone();
        upd.end(
            End::Failed,
            Some(Reason::exit(ReasonKind::RunnerUpdating, 4)),
            5,
        )
        .unwrap();
        assert!(prompts_check(&upd));
        a.end(
            End::Failed,
            Some(Reason::exit(ReasonKind::CrashedAtStart, 1)),
            5,
        )
        .unwrap();
        assert!(!prompts_check(&a));
    }

    #[test]
    fn a_pin_below_the_newest_warns_for_rest_runners() {
        assert!(pin_warning(Some("2.330.0"), "2.336.0", true).is_some());
        assert!(
            pin_warning(Some("2.330.0"), "2.336.0", false).is_none(),
            "scale sets only"
        );
        assert!(pin_warning(Some("2.336.0"), "2.336.0", true).is_none());
        assert!(pin_warning(None, "2.336.0", true).is_none());
    }

    #[test]
    fn only_attempts_from_before_a_switch_without_a_root_hold_old_installs() {
        assert!(root_unknown(true, false, 100, 200));
        assert!(
            !root_unknown(true, false, 300, 200),
            "made after the switch"
        );
        assert!(!root_unknown(true, true, 100, 200), "its root is read");
        assert!(!root_unknown(false, false, 100, 200), "not live");
    }
}
