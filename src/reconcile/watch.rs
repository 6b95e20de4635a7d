//! Watching one attempt: from what a pass observed (new runner lines, the process,
//! GitHub's registration), the profile's timeouts, whether the runner is still wanted
//! and `now`, the actions the loop carries out, in order.
//!
//! The loop records each `Transition` in the store before it acts on what follows it
//! (intent first). Every transition returned is one `AttemptState::can_step` or
//! `can_recover` allows from the state the previous actions left; anything else is
//! simply not emitted. Never is a busy runner stopped to scale down: only idle ones are
//! deregistered, and only GitHub's 204/404 lets the process be stopped
//! ([`after_deregister`]).

use super::lines::RunnerEvent;
use crate::domain::{
    Attempt, AttemptState, Outcome, Reason, ReasonKind, RegisteredRunner, ScalePolicy,
    parse_runner_name,
};
use crate::timefmt::Millis;
use std::fmt;

/// The runner process as the loop found it this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessStatus {
    /// Running, and its start time matches the one recorded.
    Alive,
    /// Exited and reaped by us, with its code (a death by signal N as 128 + N).
    Exited { code: i32 },
    /// No such process, or the pid now belongs to another process (start time
    /// mismatch): what a restarted daemon, which cannot reap, sees of a dead runner.
    Gone,
}

/// The attempt's runner in GitHub's runner list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    Absent,
    Present {
        busy: bool,
    },
    /// The list was not read this pass.
    Unknown,
}

/// Whether GitHub's list shows the attempt's runner. A read that began before the
/// runner was started (its JIT config comes just before `starting`) may have missed
/// its registration: its absence there says nothing (issue 34's chaos caught a
/// runner judged a ghost 38 ms after it started, its first job lost with it).
pub fn registration(a: &Attempt, runners: Option<(&[RegisteredRunner], Millis)>) -> Registration {
    let Some((list, read_at)) = runners else {
        return Registration::Unknown;
    };
    if let Some(r) = list.iter().find(|r| r.name == a.runner_name) {
        return Registration::Present { busy: r.busy };
    }
    let started = a
        .history
        .iter()
        .find(|c| c.state == AttemptState::Starting)
        .map(|c| c.at);
    match started {
        Some(t) if t < read_at => Registration::Absent,
        _ => Registration::Unknown,
    }
}

/// Whether the allocator still wants this runner if it is idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Demand (or `min_capacity`, or a launch) needs it: keep it however long it idles.
    Needed,
    /// Beyond demand: deregister once idle for `idle_timeout`.
    Surplus,
    /// The host or profile is draining (or paused): deregister now if idle.
    Draining,
}

/// The profile's timeouts in milliseconds, and how long a stopped runner gets to go
/// before what is left of it is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub bootstrap: Millis,
    pub idle: Millis,
    pub job: Option<Millis>,
    pub stop_grace: Millis,
}

impl Timeouts {
    pub fn of(p: &ScalePolicy, stop_grace: Millis) -> Timeouts {
        let ms = |secs: u64| (secs as Millis).saturating_mul(1000);
        Timeouts {
            bootstrap: ms(p.bootstrap_timeout_secs),
            idle: ms(p.idle_timeout_secs),
            job: p.job_timeout_secs.map(ms),
            stop_grace,
        }
    }
}

/// What one pass saw of an attempt.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// Lines read from its log since the last pass, in order, parsed.
    pub events: &'a [RunnerEvent],
    pub process: ProcessStatus,
    pub registration: Registration,
    /// The attempt's memory limit killed something in it (its cgroup's `oom_kill`
    /// count is above zero). Whenever the life ends, it ends `failed` with reason
    /// `oom`, whatever the job's result said.
    pub oom_killed: bool,
}

/// What the loop does, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record the new state (with outcome and reason when the life ends) first.
    Transition {
        to: AttemptState,
        outcome: Option<Outcome>,
        reason: Option<Reason>,
    },
    /// Record the job the runner took (its display name).
    RecordJob { name: String },
    /// Record `reason` as the attempt's reason (intent), then DELETE the registration
    /// and hand the answer to [`after_deregister`].
    Deregister { reason: Reason },
    /// Signal the runner's process group; what is left after `grace` is killed.
    StopProcess { signal: i32, grace: Millis },
    /// SIGKILL what is left of the runner's session.
    Kill,
    /// Kill what is left of the session, deregister if still registered, remove the
    /// root; then hand the result to [`after_cleanup`].
    Cleanup,
    /// Cleanup succeeded: set the attempt's `cleaned` flag.
    MarkCleaned,
    /// Cleanup failed: count the try and retry at this time.
    RetryCleanupAt(Millis),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Transition {
                to,
                outcome,
                reason,
            } => {
                write!(f, "-> {to}")?;
                if let Some(o) = outcome {
                    write!(f, " {}", o.as_str())?;
                }
                if let Some(r) = reason {
                    write!(f, " ({r})")?;
                }
                Ok(())
            }
            Action::RecordJob { name } => write!(f, "job {name}"),
            Action::Deregister { reason } => write!(f, "deregister ({reason})"),
            Action::StopProcess { signal, grace } => write!(f, "stop {signal} {grace}ms"),
            Action::Kill => f.write_str("kill"),
            Action::Cleanup => f.write_str("cleanup"),
            Action::MarkCleaned => f.write_str("cleaned"),
            Action::RetryCleanupAt(t) => write!(f, "retry cleanup at {t}"),
        }
    }
}

/// What GitHub answered to the DELETE of a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeregisterResult {
    /// 204.
    Deleted,
    /// 404: already gone, as good as deleted.
    NotFound,
    /// 422: the runner took a job in the meantime.
    Busy,
    /// Anything else (5xx, timeout): nothing changed; a later pass tries again.
    Failed,
}

/// When the attempt last entered `state` (its last change if it never did).
pub fn entered_at(a: &Attempt, state: AttemptState) -> Millis {
    a.history
        .iter()
        .rev()
        .find(|h| h.state == state)
        .map_or(a.updated_at, |h| h.at)
}

/// The runner's exit codes that name a cause (`Constants.cs` in actions/runner).
fn exit_cause(code: i32) -> Option<ReasonKind> {
    match code {
        3 | 4 => Some(ReasonKind::RunnerUpdating),
        5 => Some(ReasonKind::SessionConflict),
        7 => Some(ReasonKind::VersionDeprecated),
        _ => None,
    }
}

/// The actions decided so far and the state they leave the attempt in.
struct Plan<'a> {
    attempt: &'a Attempt,
    state: AttemptState,
    /// Set when the life ended earlier or in this plan.
    ended_at: Option<Millis>,
    now: Millis,
    actions: Vec<Action>,
    /// See [`Observation::oom_killed`].
    oom: bool,
}

impl<'a> Plan<'a> {
    fn new(attempt: &'a Attempt, now: Millis) -> Plan<'a> {
        Plan {
            attempt,
            state: attempt.state,
            ended_at: attempt.ended_at,
            now,
            actions: Vec::new(),
            oom: false,
        }
    }

    /// Emits the transition when the table allows it; says whether it did.
    fn go(&mut self, to: AttemptState, outcome: Option<Outcome>, reason: Option<Reason>) -> bool {
        if !(self.state.can_step(to) || self.state.can_recover(to)) {
            return false;
        }
        self.state = to;
        if matches!(to, AttemptState::Finished | AttemptState::Failed) && self.ended_at.is_none() {
            self.ended_at = Some(self.now);
        }
        self.actions.push(Action::Transition {
            to,
            outcome,
            reason,
        });
        true
    }

    fn end(&mut self, outcome: Outcome, reason: Reason) -> bool {
        if self.oom {
            return self.go(
                AttemptState::Failed,
                Some(Outcome::Failed),
                Some(Reason::new(ReasonKind::Oom)),
            );
        }
        self.go(outcome.final_state(), Some(outcome), Some(reason))
    }

    /// The reason our own deregistration recorded as intent, or `fallback`.
    fn intent_or(&self, fallback: Reason) -> Reason {
        self.attempt.reason.clone().unwrap_or(fallback)
    }

    /// When the attempt entered its current state (now, if this plan moved it).
    fn since(&self) -> Millis {
        if self.state == self.attempt.state {
            entered_at(self.attempt, self.state)
        } else {
            self.now
        }
    }

    fn stop(&mut self, t: &Timeouts) {
        self.actions.push(Action::StopProcess {
            signal: libc::SIGTERM,
            grace: t.stop_grace,
        });
    }
}

/// Records the job's name once: not when the attempt has one, nor twice in a pass.
fn record_job(p: &mut Plan, a: &Attempt, name: &str) {
    let recorded = p
        .actions
        .iter()
        .any(|x| matches!(x, Action::RecordJob { .. }));
    if a.job_name.is_none() && !recorded {
        p.actions.push(Action::RecordJob {
            name: name.to_string(),
        });
    }
}

/// One pass's decisions for one attempt. See the module documentation.
pub fn watch(a: &Attempt, obs: &Observation, t: &Timeouts, want: Want, now: Millis) -> Vec<Action> {
    if a.cleaned {
        return Vec::new();
    }
    let mut p = Plan::new(a, now);
    p.oom = obs.oom_killed;
    let alive = obs.process == ProcessStatus::Alive;

    for ev in obs.events {
        if !p.state.is_live() {
            break;
        }
        match ev {
            RunnerEvent::Connected | RunnerEvent::Error { .. } => {}
            RunnerEvent::Listening => {
                if matches!(p.state, AttemptState::Pending | AttemptState::Starting) {
                    p.go(AttemptState::Idle, None, None);
                }
            }
            // The job's name is recorded whatever made the attempt busy: GitHub's list
            // can say `busy` a pass before the runner's own line does.
            RunnerEvent::RunningJob { name } => {
                record_job(&mut p, a, name);
                if p.state.is_unassigned() {
                    p.go(AttemptState::Busy, None, None);
                }
            }
            RunnerEvent::JobCompleted { name, result } => {
                record_job(&mut p, a, name);
                p.end(Outcome::CompletedJob, Reason::job(result.as_str()));
            }
            RunnerEvent::NoLongerExists => {
                if p.state.is_unassigned() {
                    let why = p.intent_or(Reason::new(ReasonKind::NoLongerExists));
                    p.end(Outcome::ExitedIdleWithoutWork, why);
                }
            }
            RunnerEvent::SessionConflict | RunnerEvent::VersionDeprecated => {
                // Neither heals by itself, but a busy runner is left to its job: its
                // exit code will say the rest.
                if p.state.is_unassigned() {
                    let why = if *ev == RunnerEvent::SessionConflict {
                        ReasonKind::SessionConflict
                    } else {
                        ReasonKind::VersionDeprecated
                    };
                    if p.end(Outcome::Failed, Reason::new(why)) && alive {
                        p.stop(t);
                    }
                }
            }
        }
    }

    // GitHub's list, for what the lines missed.
    if p.state.is_unassigned() {
        match obs.registration {
            Registration::Present { busy: true } => {
                p.go(AttemptState::Busy, None, None);
            }
            Registration::Absent if p.state == AttemptState::Idle && alive => {
                // A ghost: listening with no registration, so it can never get a job.
                let why = p.intent_or(Reason::new(ReasonKind::RegistrationVanished));
                if p.end(Outcome::ExitedIdleWithoutWork, why) {
                    p.stop(t);
                }
            }
            _ => {}
        }
    }

    // The process.
    if p.state.is_live() {
        match obs.process {
            ProcessStatus::Exited { code } => exited(&mut p, code),
            ProcessStatus::Gone => {
                p.end(Outcome::Orphaned, Reason::new(ReasonKind::ProcessGone));
            }
            ProcessStatus::Alive => timeouts(&mut p, t, want, alive),
        }
    }

    // After the life: give a stopping process its grace, then clean up.
    match p.state {
        AttemptState::Finished | AttemptState::Failed => {
            let ended = p.ended_at.unwrap_or(now);
            if !(alive && now < ended.saturating_add(t.stop_grace)) {
                if alive {
                    p.actions.push(Action::Kill);
                }
                if p.go(AttemptState::Destroying, None, None) {
                    p.actions.push(Action::Cleanup);
                }
            }
        }
        // At the start of a pass this is a cleanup a crash interrupted: it is
        // idempotent, so do it again.
        AttemptState::Destroying if p.state == a.state => p.actions.push(Action::Cleanup),
        AttemptState::CleanupDeferred if now >= a.next_cleanup_at.unwrap_or(0) => {
            // Always a legal step (the table has cleanup_deferred -> destroying).
            p.go(AttemptState::Destroying, None, None);
            p.actions.push(Action::Cleanup);
        }
        _ => {}
    }
    p.actions
}

/// A live attempt's process exited with `code`.
fn exited(p: &mut Plan, code: i32) {
    let cause = exit_cause(code).map(|c| Reason::exit(c, code));
    match p.state {
        AttemptState::Pending | AttemptState::Starting => {
            p.end(
                Outcome::Failed,
                cause.unwrap_or_else(|| Reason::exit(ReasonKind::CrashedAtStart, code)),
            );
        }
        AttemptState::Idle => match (code, cause) {
            (0, _) => {
                let why = p.intent_or(Reason::exit(ReasonKind::ExitedIdle, 0));
                p.end(Outcome::ExitedIdleWithoutWork, why);
            }
            (_, Some(c)) => {
                p.end(Outcome::Failed, c);
            }
            (_, None) => {
                p.end(
                    Outcome::Failed,
                    Reason::exit(ReasonKind::ExitedWhileIdle, code),
                );
            }
        },
        AttemptState::Busy => match (code, cause) {
            // The completion line was missed; an ephemeral runner exits 0 after its job.
            (0, _) => {
                p.end(Outcome::CompletedJob, Reason::job("ended (exit 0)"));
            }
            (_, Some(c)) => {
                p.end(Outcome::Failed, c);
            }
            (_, None) => {
                p.end(
                    Outcome::Failed,
                    Reason::exit(ReasonKind::ExitedDuringJob, code),
                );
            }
        },
        _ => {}
    }
}

/// Timeouts and scale-down of a live attempt whose process runs (or is yet to be
/// spawned).
fn timeouts(p: &mut Plan, t: &Timeouts, want: Want, alive: bool) {
    let now = p.now;
    match p.state {
        // Counted from the decision to start it: "never reached idle".
        AttemptState::Pending | AttemptState::Starting
            if now - p.attempt.created_at >= t.bootstrap =>
        {
            let ended = p.end(Outcome::Failed, Reason::new(ReasonKind::BootstrapTimeout));
            if ended && alive {
                p.stop(t);
            }
        }
        AttemptState::Idle => {
            let reason = match want {
                Want::Needed => None,
                Want::Draining => Some(ReasonKind::Drain),
                Want::Surplus => (now - p.since() >= t.idle).then_some(ReasonKind::IdleTimeout),
            };
            if let Some(r) = reason {
                p.actions.push(Action::Deregister {
                    reason: Reason::new(r),
                });
            }
        }
        AttemptState::Busy => {
            // Never stopped to scale down; only the job's own ceiling ends it.
            if let Some(job) = t.job
                && now - p.since() >= job
                && p.end(Outcome::Failed, Reason::new(ReasonKind::JobTimeout))
            {
                p.stop(t);
            }
        }
        _ => {}
    }
}

/// The answer to a [`Action::Deregister`]: only 204/404 stop the process.
pub fn after_deregister(
    a: &Attempt,
    result: DeregisterResult,
    t: &Timeouts,
    now: Millis,
) -> Vec<Action> {
    let mut p = Plan::new(a, now);
    match result {
        DeregisterResult::Deleted | DeregisterResult::NotFound => {
            if p.state.is_unassigned() {
                let why = p.intent_or(Reason::new(ReasonKind::Deregistered));
                if p.end(Outcome::ExitedIdleWithoutWork, why) {
                    p.stop(t);
                }
            }
        }
        // 422: it took a job; it is busy now and runs to the end. Anything else: a
        // later pass decides again.
        DeregisterResult::Busy | DeregisterResult::Failed => {}
    }
    p.actions
}

/// The result of a [`Action::Cleanup`]. `jitter` in `[0, 1]` spreads retries.
pub fn after_cleanup(a: &Attempt, ok: bool, jitter: f64, now: Millis) -> Vec<Action> {
    if ok {
        return vec![Action::MarkCleaned];
    }
    let mut p = Plan::new(a, now);
    if p.go(AttemptState::CleanupDeferred, None, None) {
        p.actions.push(Action::RetryCleanupAt(
            now + cleanup_backoff(a.cleanup_tries, jitter),
        ));
    }
    p.actions
}

/// What the host's side of one cleanup got done, each step only after the one before
/// it: every process of the attempt gone (its cgroup, its uid, its session), what its
/// uid left in the shared directories and SysV IPC removed, its root (and slot) and its
/// cgroup removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostSide {
    pub processes_gone: bool,
    pub leftovers_removed: bool,
    pub root_removed: bool,
    pub cgroup_removed: bool,
}

/// Pure: whether the host's side of the cleanup is done, so the attempt's uid may go
/// to another runner (`Attempt::holds_uid`). Never while a process of it may live or
/// anything it left may remain; never waiting on GitHub: a lost job's registration,
/// which GitHub keeps until it fails the job (ten minutes), is the attempt's
/// bookkeeping, deregistered by the retries that follow, and holds no uid.
pub fn host_cleaned(h: &HostSide) -> bool {
    h.processes_gone && h.leftovers_removed && h.root_removed && h.cgroup_removed
}

/// Pure: whether the host's side of a cleanup goes before its deregistration. With a
/// uid of its own, yes: the kill found no process of the uid left, so no runner the
/// daemon lost track of can be running there, and its uid need not wait for GitHub.
/// Without one, no: a 422 may come from a runner still running that the daemon lost
/// (its pid never recorded), and its root stays until GitHub lets go.
pub fn host_side_first(a: &Attempt) -> bool {
    a.runner_uid.is_some()
}

/// First retry after about 5 s, doubling per failed try up to 10 min; "equal jitter":
/// half the delay fixed, half spread by `jitter` in `[0, 1]`.
pub fn cleanup_backoff(tries: u32, jitter: f64) -> Millis {
    const STEPS: crate::backoff::Backoff = crate::backoff::Backoff::new(
        std::time::Duration::from_secs(5),
        std::time::Duration::from_secs(600),
    );
    STEPS.equal(tries, jitter).as_millis() as Millis
}

/// Registrations GitHub lists under this host's runner names that no attempt
/// explains (no such attempt, or one already cleaned): ours to delete. Runners of
/// other hosts and foreign runners are never returned. A 422 to the DELETE leaves a
/// busy one alone, as everywhere.
pub fn unexplained_registrations<'a>(
    host_id: &str,
    runners: &'a [RegisteredRunner],
    attempts: &[Attempt],
) -> Vec<&'a RegisteredRunner> {
    runners
        .iter()
        .filter(|r| {
            parse_runner_name(host_id, &r.name)
                .is_some_and(|id| !attempts.iter().any(|a| a.id == id && !a.cleaned))
        })
        .collect()
}

/// Whether a cleaned-up attempt's runner may still be registered with GitHub, so its
/// cleanup must deregister it. An ephemeral runner that finished its job, or that
/// GitHub already confirmed deleted (idle past its timeout, drained), has no
/// registration left: asking again would only spend rate limit. Anything else may
/// still be registered (the orphan sweep is the second net), even without a
/// registration id: its JIT answer was lost after GitHub registered the runner (a
/// cut connection, a 5xx), or the daemon stopped during the call. Only a start
/// refused before any JIT call (`not_started`, `runner_group`, `host`) is known not
/// to be.
pub fn may_be_registered(a: &Attempt) -> bool {
    if a.runner_id.is_none() {
        return !a.reason.as_ref().is_some_and(|r| {
            matches!(
                r.kind(),
                ReasonKind::NotStarted | ReasonKind::RunnerGroup | ReasonKind::Host
            )
        });
    }
    let deleted_idle = a.outcome == Some(Outcome::ExitedIdleWithoutWork)
        && a.reason
            .as_ref()
            .is_some_and(|r| matches!(r.kind(), ReasonKind::IdleTimeout | ReasonKind::Drain));
    !matches!(a.outcome, Some(Outcome::CompletedJob)) && !deleted_idle
}
