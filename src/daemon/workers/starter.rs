//! Starting one runner: the intent is recorded first (`pending`, with the runner's own
//! uid when the host gives each attempt one), then the attempt is readied on the host
//! (identity, cgroup, root: `contain::ready`), then the JIT config (named for the
//! attempt) is asked for, `starting` is recorded, and the process spawned, and its pid
//! and start time are recorded. Readying comes before the JIT call, so a start that
//! fails for a host reason costs GitHub nothing; for an `oci` profile readying is the
//! readiness gate (`oci::ready`) and the process is its container's `podman run`.

use crate::daemon::host::contain;
use crate::daemon::shared::Shared;
use crate::domain::runner_group::GroupIds;
use crate::domain::{
    Attempt, AttemptState, Host, Outcome, Reason, ReasonKind, ScalePolicy, Target, TargetScope,
};
use crate::github::{GhError, GitHubClient};
use crate::reconcile::jit::{AfterRefusal, Refused};
use crate::runner;
use crate::secret::Secret;
use crate::store::{LatencySample, NewAttempt, Store, StoreError};
use crate::timefmt::Millis;
use crate::{log_info, log_warn};
use std::path::{Path, PathBuf};

/// The runner install of a profile: its `runner_dir`, or `STATE_DIR/runner`.
pub fn runner_dir(state_dir: &Path, p: &ScalePolicy) -> PathBuf {
    p.runner_dir
        .clone()
        .unwrap_or_else(|| state_dir.join("runner"))
}

/// Records the decision to start a runner: a `pending` attempt, before anything
/// external happens (the store gives it its slot of the target).
#[allow(clippy::too_many_arguments)]
pub fn record_intent(
    store: &dyn Store,
    host: &Host,
    profile: &str,
    target: &str,
    job_queued_at: Option<Millis>,
    runner_ids: Option<(u32, u32)>,
    keeps_work: bool,
    now: Millis,
) -> Result<Attempt, StoreError> {
    store.create_attempt(
        &NewAttempt {
            profile: profile.into(),
            target: target.into(),
            host_id: host.id.clone(),
            job_queued_at,
            runner_uid: runner_ids.map(|(u, _)| u),
            runner_gid: runner_ids.map(|(_, g)| g),
            keeps_work,
            ..NewAttempt::default()
        },
        now,
    )
}

/// How a start ended, for the loop: spawned, ended by a GitHub error (held as its
/// class says), or ended by a host failure (holds the profile's starts).
#[derive(Debug)]
pub enum Started {
    Spawned,
    GitHub(GhError),
    Host(String),
    /// The attempt could not move on (a stale view); the next pass decides again.
    Skipped,
}

pub struct StartCx<'a> {
    pub shared: &'a Shared,
    pub store: &'a dyn Store,
    pub client: &'a GitHubClient,
    pub target: &'a Target,
    pub policy: &'a ScalePolicy,
    pub group_ids: &'a GroupIds,
    pub now: Millis,
    /// A `demand=scaleset` profile's client and scale set: the JIT config comes from
    /// the scale set instead of REST.
    pub scaleset: Option<(&'a crate::scaleset::ScaleSetClient, i64)>,
}

/// Carries a `pending` attempt to a spawned runner. A failure ends the attempt with
/// its reason (its cleanup follows in the next pass) and says what kind it was, so the
/// loop can hold further starts.
pub fn start(cx: &mut StartCx, a: &mut Attempt) -> Result<Started, StoreError> {
    // An `oci` profile's container starts only on a host last found ready for it: no
    // JIT config is asked for otherwise. It needs no root, uid or cgroup of ours.
    let oci = cx.policy.execution == crate::domain::Execution::Oci;
    let mut ready = if oci {
        if let Err(why) = super::oci::ready(cx.shared, &cx.policy.name) {
            fail(cx, a, Reason::message(ReasonKind::Host, why.clone()))?;
            return Ok(Started::Host(why));
        }
        None
    } else {
        let contain = cx.shared.containment();
        let install = runner_dir(&cx.shared.state_dir, cx.policy);
        match contain::ready(&contain, &cx.shared.state_dir, &install, cx.policy, a) {
            Ok(r) => Some(r),
            Err(e) => {
                // `Host` marks a start refused before any JIT call (see the actuator).
                fail(cx, a, Reason::message(ReasonKind::Host, e.to_string()))?;
                return Ok(Started::Host(e.0));
            }
        }
    };
    // The runner's environment: the host's variables, the profile's over them. Read
    // at each start, so an edit reaches the next runner without a restart.
    let host_env = cx.store.host()?.map(|h| h.env).unwrap_or_default();
    let env = crate::domain::runner_env::merged(&host_env, &cx.policy.env);
    if let Some(r) = ready.as_mut() {
        r.env = env.clone();
        // The target's slot: its caches (after the operator's variables, which win) and
        // its kept `_work`. Native runners only: an oci container mounts nothing.
        if let Some(host) = cx.store.host()? {
            let contain = cx.shared.containment();
            super::slots::lease(
                &contain,
                &cx.shared.state_dir,
                &host,
                cx.target,
                cx.policy,
                a,
                r,
            );
        }
    }
    let (runner_id, jit) = match jit_config(cx, a) {
        Ok(r) => r,
        Err((what, e)) => {
            fail(cx, a, Reason::message(what, e.to_string()))?;
            return Ok(Started::GitHub(e));
        }
    };
    // Intent first: `starting`, with the registration's id, is on record before the
    // process exists, so a crash here leaves a record cleanup can finish. Its time is
    // the JIT answer's, not the start's: a runner list read after it must hold the
    // registration (`daemon::observe`), and one read while the JIT call was on its way
    // (seconds, far from GitHub) made a listening runner look like a ghost.
    a.runner_id = Some(runner_id);
    let answered = crate::timefmt::now_millis();
    if a.step(AttemptState::Starting, answered).is_err() {
        return Ok(Started::Skipped);
    }
    cx.store.save_attempt(a)?;
    match &ready {
        Some(r) => launch(cx, a, &jit, r),
        None => {
            let quota = crate::daemon::shared::lock(&cx.shared.host.fitness).oci_quota;
            let spawned = super::oci::spawn(&cx.shared.state_dir, cx.policy, a, &env, &jit, quota);
            after_spawn(cx, a, spawned)
        }
    }
}

/// Ends an attempt that could not be started, with its reason.
fn fail(cx: &StartCx, a: &mut Attempt, reason: Reason) -> Result<(), StoreError> {
    let (store, now) = (cx.store, cx.now);
    log_warn!(
        "start_failed",
        attempt = a.id,
        runner = a.runner_name,
        reason = reason
    );
    let _ = a.end(Outcome::Failed, Some(reason), now);
    crate::daemon::feeds::metrics_feed::ended(&cx.shared.metrics, a);
    store.save_attempt(a)
}

/// The runner's registration id and JIT config: from the profile's scale set, or from
/// REST (in the profile's runner group). The error names the step that failed
/// (`JitConfig` or `RunnerGroup`).
fn jit_config(cx: &mut StartCx, a: &Attempt) -> Result<(i64, Secret), (ReasonKind, GhError)> {
    if let Some((ss, scale_set_id)) = cx.scaleset {
        return crate::daemon::feeds::scaleset_feed::jit(ss, scale_set_id, a)
            .map_err(|e| (ReasonKind::JitConfig, e));
    }
    let group = group_id(cx).map_err(|e| (ReasonKind::RunnerGroup, e))?;
    let generate = || {
        cx.client.generate_jitconfig(
            &cx.target.scope,
            &a.runner_name,
            &cx.policy.labels,
            group,
            Some("_work"),
        )
    };
    let mut replaced = false;
    let began = crate::timefmt::now_millis();
    let (registered, jit) = loop {
        let e = match generate() {
            Ok(r) => break r,
            Err(e) => e,
        };
        let refused = match e {
            GhError::Conflict { .. } => Refused::Conflict,
            GhError::RateLimited { until } => Refused::Limited(until),
            _ => Refused::Other,
        };
        match crate::reconcile::jit::after_refusal(refused, replaced, began) {
            AfterRefusal::ReplaceTaken => {
                if let Ok(Some(old)) = cx.client.runner_by_name(&cx.target.scope, &a.runner_name) {
                    let _ = cx.client.delete_runner(&cx.target.scope, old.id);
                }
                replaced = true;
            }
            AfterRefusal::WaitUntil(until) => {
                // Not failed: the start waits for the limit to pass (the target's
                // status shows the hold meanwhile), then asks again.
                log_info!(
                    "start_waits",
                    attempt = a.id,
                    runner = a.runner_name,
                    until = crate::timefmt::format_rfc3339(until),
                    why = "GitHub rate limit"
                );
                let wait = (until - crate::timefmt::now_millis()).max(1) as u64;
                cx.client
                    .wait_interruptibly(std::time::Duration::from_millis(wait))
                    .map_err(|e| (ReasonKind::JitConfig, e))?;
            }
            AfterRefusal::Fail => return Err((ReasonKind::JitConfig, e)),
        }
    };
    Ok((registered.id, jit))
}

/// Spawns the runner of a `starting`, readied attempt with `jit`.
fn launch(
    cx: &mut StartCx,
    a: &mut Attempt,
    jit: &Secret,
    ready: &contain::Ready,
) -> Result<Started, StoreError> {
    let log = runner::attempt_log(&cx.shared.state_dir, a.id);
    let pid_file = runner::attempt_pid_file(&cx.shared.state_dir, a.id);
    let spec = ready.spawn_spec(&log, jit, Some(&pid_file));
    let spawned = runner::spawn_runner(&spec);
    after_spawn(cx, a, spawned)
}

/// Records a spawn's pid (or its failure), a runner's or a container's alike.
fn after_spawn(
    cx: &mut StartCx,
    a: &mut Attempt,
    spawned: Result<runner::Spawned, runner::SpawnError>,
) -> Result<Started, StoreError> {
    match spawned {
        Ok(sp) => {
            a.pid = Some(sp.pid);
            a.pid_start = Some(sp.start_time);
            cx.store.save_attempt(a)?;
            crate::daemon::feeds::metrics_feed::started(&cx.shared.metrics, a, cx.now);
            if let Some(q) = a.job_queued_at {
                // The spawn happened now, not at the pass's start.
                let spawned = crate::timefmt::now_millis();
                cx.store.add_latency_sample(&LatencySample {
                    profile: a.profile.clone(),
                    at: spawned,
                    latency_ms: (spawned - q).max(0),
                })?;
            }
            cx.shared.pool.started(a);
            log_info!(
                "runner_started",
                attempt = a.id,
                runner = a.runner_name,
                profile = a.profile,
                pid = sp.pid,
                uid = crate::logging::Opt(&a.runner_uid)
            );
            Ok(Started::Spawned)
        }
        Err(e) => {
            let why = Reason::message(ReasonKind::Spawn, e.to_string());
            // The profile's hold shows the same text as the attempt.
            let held = why.to_string();
            fail(cx, a, why)?;
            Ok(Started::Host(held))
        }
    }
}

/// The runner group to register in (`domain::runner_group`): a name is looked up in
/// an organization's groups; a repository's runners join the Default group only.
fn group_id(cx: &mut StartCx) -> Result<i64, GhError> {
    let (client, scope) = (cx.client, &cx.target.scope);
    let found = cx
        .group_ids
        .resolve(cx.policy.runner_group_ref(), |name| match scope {
            TargetScope::Org { org } => client.runner_group_id_by_name(org, name),
            TargetScope::Repo { .. } => Err(GhError::Unprocessable {
                message: "runner groups by name need an organization target".into(),
            }),
        })?;
    found.ok_or(GhError::NotFound)
}
