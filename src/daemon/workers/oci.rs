//! The daemon's side of `oci` attempts: the readiness gate the plan (`add_unjudged`)
//! and the starter (`ready`) pass before any JIT request (the fitness watch's last
//! verdict: a profile not found ready starts nothing), the attempt's container line and start, its OOM read when its life ends,
//! its removal at cleanup, the container the meter sampler reads (`container_of`), and the sweep of containers labelled for this host that no
//! open attempt explains. An attempt is known to be a container's by its marker,
//! `logs/<id>.oci`, written before `podman run` (intent first), removed with it.

use crate::daemon::shared::{Shared, lock};
use crate::domain::{Attempt, ScalePolicy};
use crate::runner::oci::{Podman, command};
use crate::runner::spawn::{SpawnError, Spawned};
use crate::secret::Secret;
use crate::store::Store;
use crate::{log_info, log_warn};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// `STATE_DIR/logs/<id>.oci`: this attempt runs (or ran) in a container.
pub fn marker(state_dir: &Path, attempt: i64) -> PathBuf {
    state_dir.join("logs").join(format!("{attempt}.oci"))
}

/// Whether the last look found the host ready for `profile`'s containers; `Err` says
/// why not (the fitness reason, or that no look has judged it yet).
pub fn ready(shared: &Shared, profile: &str) -> Result<(), String> {
    let f = lock(&shared.host.fitness);
    if f.oci_ready.contains(profile) {
        return Ok(());
    }
    Err(f
        .unfit
        .get(profile)
        .cloned()
        .unwrap_or_else(|| not_checked(profile)))
}

/// Adds to `unfit` each `oci` profile of `profiles` no look has judged yet (made
/// `oci` since the last look), so the plan starts none of them until one has.
pub fn add_unjudged(
    shared: &Shared,
    profiles: &[ScalePolicy],
    unfit: &mut std::collections::BTreeMap<String, String>,
) {
    let f = lock(&shared.host.fitness);
    for p in profiles {
        if p.execution == crate::domain::Execution::Oci
            && !f.oci_ready.contains(&p.name)
            && !unfit.contains_key(&p.name)
        {
            unfit.insert(p.name.clone(), not_checked(&p.name));
        }
    }
}

fn not_checked(profile: &str) -> String {
    format!("oci readiness of {profile} not yet checked: no container is started before it")
}

/// Starts the attempt's container: the marker first, then `podman run` with the JIT
/// config on its stdin. `quota`: whether a container size holds here (the last
/// fitness look's `oci_quota`).
pub fn spawn(
    state_dir: &Path,
    policy: &ScalePolicy,
    a: &Attempt,
    env: &[(String, String)],
    jit: &Secret,
    quota: bool,
) -> Result<Spawned, SpawnError> {
    let podman = Podman::locate().map_err(|why| SpawnError::Spawn {
        program: "podman".into(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, why),
    })?;
    let image = policy.image.as_deref().unwrap_or_default();
    // Checked again here: a store written before `image=` refused Podman transports
    // (issue 33) may still hold one, and a local archive defeats the digest pin.
    crate::domain::execution::image("image", image).map_err(|i| SpawnError::Spawn {
        program: "podman".into(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, i.to_string()),
    })?;
    let args = command::run_args(&command::RunSpec {
        host_id: &a.host_id,
        attempt: a.id,
        runner_name: &a.runner_name,
        image,
        cpu_max: policy.cpu_max,
        memory_max: policy.memory_max,
        pids_max: policy.pids_max,
        disk_size: command::disk_size(policy.disk_max, quota),
        env,
    });
    let mark = marker(state_dir, a.id);
    let log = crate::runner::attempt_log(state_dir, a.id);
    crate::runner::spawn::open_log(&log)?;
    std::fs::write(&mark, &a.runner_name).map_err(|source| SpawnError::LogFile {
        path: mark.clone(),
        source,
    })?;
    let pid_file = crate::runner::attempt_pid_file(state_dir, a.id);
    podman.spawn_run(&args, &log, Some(&pid_file), jit)
}

/// The file beside the marker that says the meter sampler saw the container's memory
/// limit kill something in it (`note_oom`).
fn oom_note(state_dir: &Path, attempt: i64) -> PathBuf {
    state_dir.join("logs").join(format!("{attempt}.oci-oom"))
}

/// Remembers that the container's memory limit killed something in it, as the meter
/// sampler read from its cgroup while it lived: Podman's `OOMKilled` speaks only of
/// the container's init, and the cgroup is gone when the attempt ends, so this is what
/// `oom_killed` finds then. Only for an attempt that runs in a container.
pub fn note_oom(state_dir: &Path, attempt: i64) {
    let note = oom_note(state_dir, attempt);
    if marker(state_dir, attempt).exists()
        && !note.exists()
        && let Err(e) = std::fs::write(&note, b"")
    {
        log_warn!("oom_not_noted", attempt = attempt, error = e);
    }
}

/// The attempt's container's name when it runs in one (its marker names it), for the
/// meter sampler, which reads the container's own cgroup.
pub fn container_of(state_dir: &Path, a: &Attempt) -> Option<String> {
    marker(state_dir, a.id)
        .exists()
        .then(|| a.runner_name.clone())
}

/// Whether the kernel's OOM killer ended the attempt's container (false for a native
/// attempt, and when Podman cannot say).
pub fn oom_killed(state_dir: &Path, a: &Attempt) -> bool {
    if !marker(state_dir, a.id).exists() {
        return false;
    }
    if oom_note(state_dir, a.id).exists() {
        return true;
    }
    Podman::locate()
        .ok()
        .and_then(|p| p.quick().oom_killed(&a.runner_name))
        .unwrap_or(false)
}

/// Removes the attempt's container (found by its labels) and then its marker. True
/// when nothing of it is left, or it never ran in one; false keeps the cleanup
/// pending, to be tried again.
pub fn remove(state_dir: &Path, a: &Attempt) -> bool {
    let mark = marker(state_dir, a.id);
    if !mark.exists() {
        return true;
    }
    let podman = match Podman::locate() {
        Ok(p) => p,
        Err(why) => {
            // No Podman, no container of it can run.
            log_warn!("container_not_removed", attempt = a.id, error = why);
            let _ = std::fs::remove_file(oom_note(state_dir, a.id));
            let _ = std::fs::remove_file(&mark);
            return true;
        }
    };
    let found = podman.containers(&a.host_id, Some(a.id)).and_then(|c| {
        let names: Vec<String> = c.into_iter().map(|(n, _)| n).collect();
        podman.remove(&names).map(|()| names.len())
    });
    match found {
        Ok(n) => {
            if n > 0 {
                log_info!("container_removed", attempt = a.id, count = n);
            }
            let _ = std::fs::remove_file(oom_note(state_dir, a.id));
            let _ = std::fs::remove_file(&mark);
            true
        }
        Err(e) => {
            log_warn!("container_not_removed", attempt = a.id, error = e);
            false
        }
    }
}

/// The containers of `listed` (name, attempt) that no open attempt explains.
pub fn orphans(listed: &[(String, i64)], open: &HashSet<i64>) -> Vec<String> {
    listed
        .iter()
        .filter(|(_, id)| !open.contains(id))
        .map(|(n, _)| n.clone())
        .collect()
}

/// Removes this host's containers that no open attempt explains (a crash between
/// `podman run` and the attempt's cleanup): only when a profile runs `oci` and Podman
/// is there. The attempts are read after the listing, so a container started since
/// is explained.
pub fn sweep(store: &dyn Store, host_id: &str, profiles: &[ScalePolicy]) {
    if !profiles
        .iter()
        .any(|p| p.execution == crate::domain::Execution::Oci)
    {
        return;
    }
    // On the main thread: quick calls, so its heartbeat keeps its beat.
    let Ok(podman) = Podman::locate().map(Podman::quick) else {
        return;
    };
    let listed = match podman.containers(host_id, None) {
        Ok(l) => l,
        Err(e) => {
            log_warn!("container_sweep_failed", error = e);
            return;
        }
    };
    let open: HashSet<i64> = match store.open_attempts(host_id) {
        Ok(a) => a.into_iter().map(|a| a.id).collect(),
        Err(e) => {
            log_warn!("container_sweep_failed", error = e);
            return;
        }
    };
    let gone = orphans(&listed, &open);
    if gone.is_empty() {
        return;
    }
    match podman.remove(&gone) {
        Ok(()) => log_info!("orphan_containers_removed", names = gone.join(",")),
        Err(e) => log_warn!("orphan_containers_kept", error = e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_containers_of_no_open_attempt_are_orphans() {
        let listed = vec![("rm-h-1".to_string(), 1), ("rm-h-2".to_string(), 2)];
        let open: HashSet<i64> = [2].into_iter().collect();
        assert_eq!(orphans(&listed, &open), ["rm-h-1"]);
        assert!(orphans(&listed, &[1, 2].into_iter().collect()).is_empty());
    }

    #[test]
    fn no_verdict_is_not_ready_and_the_fitness_reason_is_the_refusal() {
        let shared = Shared::new(std::env::temp_dir());
        assert!(
            ready(&shared, "boxed")
                .unwrap_err()
                .contains("not yet checked")
        );
        lock(&shared.host.fitness)
            .unfit
            .insert("boxed".into(), "required check oci:boxed: no podman".into());
        assert_eq!(
            ready(&shared, "boxed").unwrap_err(),
            "required check oci:boxed: no podman"
        );
        lock(&shared.host.fitness).oci_ready.insert("boxed".into());
        assert!(ready(&shared, "boxed").is_ok());
    }

    #[test]
    fn an_oci_profile_no_look_has_judged_is_unfit_for_the_plan() {
        let shared = Shared::new(std::env::temp_dir());
        let mut boxed = ScalePolicy::new("boxed", "t", "0123abcd89ef4567");
        boxed.execution = crate::domain::Execution::Oci;
        let plain = ScalePolicy::new("plain", "t", "0123abcd89ef4567");
        let mut unfit = Default::default();
        add_unjudged(&shared, &[boxed.clone(), plain], &mut unfit);
        assert_eq!(unfit.keys().collect::<Vec<_>>(), ["boxed"]);
        assert!(unfit["boxed"].contains("not yet checked"));
        lock(&shared.host.fitness).oci_ready.insert("boxed".into());
        let mut unfit = Default::default();
        add_unjudged(&shared, &[boxed], &mut unfit);
        assert!(unfit.is_empty());
    }
}
