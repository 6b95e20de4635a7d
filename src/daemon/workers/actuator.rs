//! Carrying out what `reconcile::watch` decided for one attempt: each transition is
//! written to the store before the action it announces (intent first); deregistering,
//! signalling and cleanup are the only I/O, and each is safe to repeat.

use crate::daemon::shared::Shared;
use crate::domain::{Attempt, AttemptState, TargetScope};
use crate::github::{Deleted, GitHubClient};
use crate::reconcile::watch::{self, Action, DeregisterResult, Timeouts};
use crate::runner::{self, SignalOutcome};
use crate::store::Store;
use crate::timefmt::Millis;
use crate::{log_debug, log_info, log_warn};

/// How big a runner log may grow; the head and the tail are kept.
pub const MAX_LOG_BYTES: u64 = 1 << 20;

/// Everything an action needs besides the attempt.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub store: &'a dyn Store,
    pub client: Option<&'a GitHubClient>,
    pub scope: &'a TargetScope,
    pub timeouts: Timeouts,
    pub jitter: f64,
    pub now: Millis,
    /// A `demand=scaleset` profile's client: its runners are removed from the scale set.
    pub scaleset: Option<&'a crate::scaleset::ScaleSetClient>,
}

/// Applies `actions` to `a` in order, saving every state change first. Follow-up
/// decisions (after a DELETE, after a cleanup) are applied in the same call.
pub fn apply(
    cx: &Ctx,
    a: &mut Attempt,
    actions: Vec<Action>,
) -> Result<(), crate::store::StoreError> {
    let mut queue: std::collections::VecDeque<Action> = actions.into();
    while let Some(action) = queue.pop_front() {
        match action {
            Action::Transition {
                to,
                outcome,
                reason,
            } => {
                let res = match outcome {
                    Some(o) => a.end(o, reason.clone(), cx.now),
                    None => a.recover(to, cx.now),
                };
                if let Err(e) = res {
                    // The table refused: the decision was made on a stale view. The
                    // next pass decides again from the stored state.
                    log_warn!("transition_refused", attempt = a.id, error = e);
                    return Ok(());
                }
                copy_meter(cx.shared, a);
                cx.store.save_attempt(a)?;
                if outcome.is_some() {
                    cx.shared.pool.finished(a);
                    crate::daemon::feeds::metrics_feed::ended(&cx.shared.metrics, a);
                }
                log_info!(
                    "attempt_state",
                    attempt = a.id,
                    runner = a.runner_name,
                    state = a.state,
                    outcome = crate::logging::Opt(&a.outcome.map(|o| o.as_str())),
                    reason = crate::logging::Opt(&a.reason),
                );
            }
            Action::RecordJob { name } => {
                a.job_name = Some(name);
                cx.store.save_attempt(a)?;
            }
            Action::Deregister { reason } => {
                // Intent first: the reason is on record before GitHub hears of it.
                a.reason = Some(reason);
                cx.store.save_attempt(a)?;
                let result = deregister(cx, a);
                log_info!(
                    "deregister",
                    attempt = a.id,
                    runner = a.runner_name,
                    result = format!("{result:?}")
                );
                queue.extend(watch::after_deregister(a, result, &cx.timeouts, cx.now));
            }
            Action::StopProcess { signal, .. } => signal_runner(a, signal),
            Action::Kill => signal_runner(a, libc::SIGKILL),
            Action::Cleanup => {
                let ok = cleanup(cx, a)?;
                queue.extend(watch::after_cleanup(a, ok, cx.jitter, cx.now));
            }
            Action::MarkCleaned => {
                a.mark_cleaned(cx.now);
                cx.store.save_attempt(a)?;
                cx.shared.forget_meter(a.id);
                log_info!("attempt_cleaned", attempt = a.id, runner = a.runner_name);
            }
            Action::RetryCleanupAt(at) => {
                if a.state == AttemptState::Destroying {
                    let _ = a.step(AttemptState::CleanupDeferred, cx.now);
                }
                a.cleanup_tries += 1;
                a.next_cleanup_at = Some(at);
                cx.store.save_attempt(a)?;
                log_warn!(
                    "cleanup_deferred",
                    attempt = a.id,
                    tries = a.cleanup_tries,
                    retry_at = crate::timefmt::format_rfc3339(at)
                );
            }
        }
    }
    Ok(())
}

fn copy_meter(shared: &Shared, a: &mut Attempt) {
    if let Some(p) = shared.peak(a.id) {
        a.peak_rss_bytes = Some(a.peak_rss_bytes.unwrap_or(0).max(p.rss_bytes));
        a.cpu_millis = Some(a.cpu_millis.unwrap_or(0).max(p.cpu_millis));
        if p.mean_rss_bytes > 0 {
            a.mean_rss_bytes = Some(p.mean_rss_bytes);
        }
    }
}

/// DELETEs the attempt's registration, from the scale set for a scale set profile;
/// only a removal or a 404 lets its process be stopped.
fn deregister(cx: &Ctx, a: &Attempt) -> DeregisterResult {
    if let Some(ss) = cx.scaleset {
        return remove_registration(
            a,
            |name| ss.runner_by_name(name).map(|r| r.map(|r| r.id)),
            |id| crate::daemon::feeds::scaleset_feed::remove(ss, id),
        );
    }
    let Some(client) = cx.client else {
        return DeregisterResult::Failed;
    };
    remove_registration(
        a,
        |name| {
            client
                .runner_by_name(cx.scope, name)
                .map(|r| r.map(|r| r.id))
        },
        |id| {
            client.delete_runner(cx.scope, id).map(|d| match d {
                Deleted::Removed => DeregisterResult::Deleted,
                Deleted::AlreadyGone => DeregisterResult::NotFound,
                Deleted::Busy { .. } => DeregisterResult::Busy,
            })
        },
    )
}

/// The one deregistration, over either API: the attempt's runner id (looked up by its
/// name when the JIT call's answer was lost to a crash), then its removal. No
/// registration under that name is `NotFound`; an error is `Failed`, logged once.
fn remove_registration<E: std::fmt::Display>(
    a: &Attempt,
    by_name: impl FnOnce(&str) -> Result<Option<i64>, E>,
    remove: impl FnOnce(i64) -> Result<DeregisterResult, E>,
) -> DeregisterResult {
    let removed = match a.runner_id {
        Some(id) => remove(id),
        None => match by_name(&a.runner_name) {
            Ok(Some(id)) => remove(id),
            Ok(None) => return DeregisterResult::NotFound,
            Err(e) => Err(e),
        },
    };
    removed.unwrap_or_else(|e| {
        log_warn!("deregister_failed", attempt = a.id, error = e);
        DeregisterResult::Failed
    })
}

/// Signals the runner's session, after checking that the pid is still our runner.
fn signal_runner(a: &Attempt, signal: i32) {
    if let (Some(pid), Some(start)) = (a.pid, a.pid_start) {
        match runner::signal_session(pid, start, signal) {
            SignalOutcome::PidReused => log_warn!("pid_reused", attempt = a.id, pid = pid),
            other => log_debug!(
                "signalled",
                attempt = a.id,
                signal = signal,
                outcome = format!("{other:?}")
            ),
        }
    }
}

/// Kills what is left of the attempt (its cgroup and its own uid first: nothing a job
/// forked or detached survives them; then its session), removes what its uid left,
/// its slot, root and cgroup, and then frees its uid (`watch::host_cleaned`, saved
/// before anything else happens); deregisters if still registered, and bounds the log. True
/// when all of it is done; anything still running defers cleanup. A deregistration
/// GitHub refuses (a lost job's runner, until GitHub fails the job) defers only the
/// bookkeeping: the uid is already free, and the retries never touch it again. An
/// attempt without a uid of its own is deregistered first (`watch::host_side_first`).
fn cleanup(cx: &Ctx, a: &mut Attempt) -> Result<bool, crate::store::StoreError> {
    let contain = cx.shared.containment();
    // A container first: removing it kills all that runs in it (and ends its
    // `podman run`, the attempt's process).
    let all_gone = super::oci::remove(&cx.shared.state_dir, a);
    let all_gone = crate::daemon::host::contain::kill_all(&contain, a) && all_gone;
    signal_runner(a, libc::SIGKILL);
    if let (Some(pid), Some(start)) = (a.pid, a.pid_start) {
        // Stragglers that left the process group but not the session.
        if runner::process_start_time(pid) == Some(start)
            || runner::process_start_time(pid).is_none()
        {
            runner::kill_session(pid, libc::SIGKILL);
        }
        // Reap it if it was our child, so no zombie is left behind.
        let _ = runner::reap_child(pid);
    }
    if !all_gone {
        log_warn!("cleanup_survivors", attempt = a.id);
        return Ok(false);
    }
    let first = watch::host_side_first(a);
    if first && a.host_cleaned_at.is_none() {
        let host = host_side(cx, &contain, a);
        if !watch::host_cleaned(&host) {
            return Ok(false);
        }
        // Saved before GitHub is asked anything: from here the uid is another
        // runner's to have, and no later cleanup of this attempt touches it.
        a.host_cleaned_at = Some(cx.now);
        cx.store.save_attempt(a)?;
        log_info!(
            "runner_uid_freed",
            attempt = a.id,
            uid = crate::logging::Opt(&a.runner_uid),
            after_end_ms = cx.now - a.ended_at.unwrap_or(cx.now)
        );
    }
    if watch::may_be_registered(a) {
        match deregister(cx, a) {
            DeregisterResult::Deleted | DeregisterResult::NotFound => {}
            other => {
                log_warn!(
                    "cleanup_deregister",
                    attempt = a.id,
                    result = format!("{other:?}")
                );
                return Ok(false);
            }
        }
    }
    if !first && !watch::host_cleaned(&host_side(cx, &contain, a)) {
        return Ok(false);
    }
    let _ = runner::bound_log(
        &runner::attempt_log(&cx.shared.state_dir, a.id),
        MAX_LOG_BYTES,
    );
    let _ = std::fs::remove_file(runner::attempt_pid_file(&cx.shared.state_dir, a.id));
    Ok(true)
}

/// The host's side of a cleanup, once nothing of the attempt runs: what its uid left
/// in the shared directories and SysV IPC, its slot, its root, its cgroup. Each step
/// runs only when the one before it succeeded (a step that failed is tried again at
/// the next cleanup, from the start: each is idempotent).
fn host_side(
    cx: &Ctx,
    contain: &crate::daemon::host::contain::Containment,
    a: &Attempt,
) -> watch::HostSide {
    let mut h = watch::HostSide {
        processes_gone: true,
        ..watch::HostSide::default()
    };
    // What its uid left in the shared directories and SysV IPC, now that nothing of
    // it runs: the uid is handed out again only once this is done.
    h.leftovers_removed = crate::daemon::host::contain::remove_leftovers(contain, a);
    if !h.leftovers_removed {
        return h;
    }
    let root = contain.attempt_root(&cx.shared.state_dir, a);
    // Its slot back: the kept `_work` to the slot, the caches to the manager. A cache
    // slot still its uid's is not given up (that uid may run another target's job next).
    if !super::slots::release(cx.store, contain, &cx.shared.state_dir, a, &root) {
        return h;
    }
    if let Err(e) = runner::remove_root(&root) {
        log_warn!("cleanup_root", attempt = a.id, error = e);
        return h;
    }
    h.root_removed = true;
    h.cgroup_removed = crate::daemon::host::contain::remove_cgroup(contain, a.id);
    h
}
