//! Attempts: one runner's life, from the decision to start it to the end of its
//! cleanup. The state machine is the one table in [`AttemptState::can_step`]; recovery
//! may skip forward past missed states ([`AttemptState::can_recover`]), never back.

use super::reason::{Reason, ReasonKind};
use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptState {
    /// Decided; nothing external done yet.
    Pending,
    /// JIT config generated, process spawned, not yet listening.
    Starting,
    /// Printed `Listening for Jobs`.
    Idle,
    /// Printed `Running job:`.
    Busy,
    /// Exited after its job, or stopped cleanly while idle (scale-down).
    Finished,
    /// Exited or was stopped before finishing a job, with a reason.
    Failed,
    /// Deregistering, killing what is left, removing its root.
    Destroying,
    /// Cleanup failed; retried with backoff.
    CleanupDeferred,
}

pub const ALL_STATES: [AttemptState; 8] = [
    AttemptState::Pending,
    AttemptState::Starting,
    AttemptState::Idle,
    AttemptState::Busy,
    AttemptState::Finished,
    AttemptState::Failed,
    AttemptState::Destroying,
    AttemptState::CleanupDeferred,
];

impl AttemptState {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptState::Pending => "pending",
            AttemptState::Starting => "starting",
            AttemptState::Idle => "idle",
            AttemptState::Busy => "busy",
            AttemptState::Finished => "finished",
            AttemptState::Failed => "failed",
            AttemptState::Destroying => "destroying",
            AttemptState::CleanupDeferred => "cleanup_deferred",
        }
    }

    pub fn parse(s: &str) -> Option<AttemptState> {
        ALL_STATES.into_iter().find(|st| st.as_str() == s)
    }

    /// Counts toward the runners that can still take a job.
    pub fn is_unassigned(self) -> bool {
        matches!(
            self,
            AttemptState::Pending | AttemptState::Starting | AttemptState::Idle
        )
    }

    /// A runner process may be alive (or about to be): counts toward capacity.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            AttemptState::Pending
                | AttemptState::Starting
                | AttemptState::Idle
                | AttemptState::Busy
        )
    }

    /// The runner's life is over; only cleanup remains (or is done).
    pub fn is_ended(self) -> bool {
        !self.is_live()
    }

    /// Position along the life, for recovery's "forward only". `Finished` and `Failed`
    /// share a rank (neither follows the other), as do the two cleanup states.
    fn rank(self) -> u8 {
        match self {
            AttemptState::Pending => 0,
            AttemptState::Starting => 1,
            AttemptState::Idle => 2,
            AttemptState::Busy => 3,
            AttemptState::Finished | AttemptState::Failed => 4,
            AttemptState::Destroying | AttemptState::CleanupDeferred => 5,
        }
    }

    /// The transition table: the steps a watched attempt takes one at a time.
    pub fn can_step(self, to: AttemptState) -> bool {
        use AttemptState::*;
        matches!(
            (self, to),
            (Pending, Starting)
                | (Pending, Failed)
                | (Starting, Idle)
                | (Starting, Failed)
                | (Idle, Busy)
                | (Idle, Finished)
                | (Idle, Failed)
                | (Busy, Finished)
                | (Busy, Failed)
                | (Finished, Destroying)
                | (Failed, Destroying)
                | (Destroying, CleanupDeferred)
                | (CleanupDeferred, Destroying)
        )
    }

    /// What a recovery pass (or a watcher that missed lines) may do: any legal step, or
    /// a jump forward past missed states. Never backward, never sideways between
    /// `Finished` and `Failed`, never out of cleanup except by a legal step.
    pub fn can_recover(self, to: AttemptState) -> bool {
        self.can_step(to)
            || (self.rank() < to.rank() && self.rank() < 4)
            || (self.rank() == 4 && to.rank() == 5)
    }
}

impl fmt::Display for AttemptState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an attempt ended, once known. Why lives in `Attempt::reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    CompletedJob,
    ExitedIdleWithoutWork,
    Failed,
    /// Found without a live process or registration after a restart or a crash.
    Orphaned,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::CompletedJob => "completed_job",
            Outcome::ExitedIdleWithoutWork => "exited_idle_without_work",
            Outcome::Failed => "failed",
            Outcome::Orphaned => "orphaned",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        [
            Outcome::CompletedJob,
            Outcome::ExitedIdleWithoutWork,
            Outcome::Failed,
            Outcome::Orphaned,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }

    /// The state an attempt with this outcome ends its runner life in.
    pub fn final_state(self) -> AttemptState {
        match self {
            Outcome::CompletedJob | Outcome::ExitedIdleWithoutWork => AttemptState::Finished,
            Outcome::Failed | Outcome::Orphaned => AttemptState::Failed,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IllegalTransition {
    pub attempt: i64,
    pub from: AttemptState,
    pub to: AttemptState,
}

impl fmt::Display for IllegalTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "attempt {} cannot go from {} to {}",
            self.attempt, self.from, self.to
        )
    }
}

impl std::error::Error for IllegalTransition {}

/// One state change, kept for the attempt's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChange {
    pub state: AttemptState,
    pub at: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub id: i64,
    pub profile: String,
    pub target: String,
    pub host_id: String,
    /// `runner_name(host_id, id)`.
    pub runner_name: String,
    pub state: AttemptState,
    pub outcome: Option<Outcome>,
    /// Why it failed (or, for a clean end, what ended it: `idle_timeout`, `drain`...);
    /// before the end, what our deregistration intends.
    pub reason: Option<Reason>,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// When the runner's life ended (entered `Finished` or `Failed`).
    pub ended_at: Option<Millis>,
    pub pid: Option<i32>,
    /// The process start time (`/proc/PID/stat` field 22, clock ticks since boot),
    /// so a reused pid is never taken for our runner.
    pub pid_start: Option<u64>,
    pub exit_code: Option<i32>,
    /// GitHub's runner id, once the JIT config was generated.
    pub runner_id: Option<i64>,
    pub job_name: Option<String>,
    pub job_id: Option<i64>,
    /// When the job this attempt was started for was queued (for latency figures).
    pub job_queued_at: Option<Millis>,
    pub lease_id: Option<String>,
    pub peak_rss_bytes: Option<u64>,
    pub cpu_millis: Option<u64>,
    pub cleaned: bool,
    pub cleanup_tries: u32,
    pub next_cleanup_at: Option<Millis>,
    /// The uid and gid the runner runs under when the host gives each attempt its own
    /// (see `domain::isolation`); the handle that kills everything it left behind.
    pub runner_uid: Option<u32>,
    pub runner_gid: Option<u32>,
    /// When the host's side of its cleanup was done: every process of it gone, what
    /// its uid left removed, its slot given back, its root and cgroup gone. From then
    /// its uid is free ([`Attempt::holds_uid`]); what may still wait (GitHub letting
    /// go of a lost job's runner) is bookkeeping, and holds no uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cleaned_at: Option<Millis>,
    /// Its slot of its target: the cache slot and kept workspace it holds until it
    /// is cleaned (chosen by the store with the row).
    pub slot: Option<u32>,
    /// Whether its `_work` goes back to its slot at cleanup (`workspace=persistent`).
    pub keeps_work: bool,
    /// Whose job it ran, once a demand source said (`domain::job_owner`).
    pub owner: Option<super::job_owner::JobOwner>,
    /// The mean of its RSS samples, copied with the peak when its life ends.
    pub mean_rss_bytes: Option<u64>,
    /// Its figures were added to the daily usage roll-up (`domain::rollup`), once.
    pub rolled_up: bool,
    pub history: Vec<StateChange>,
}

impl Attempt {
    /// A new `pending` attempt. `id` comes from the store.
    pub fn new(id: i64, profile: &str, target: &str, host_id: &str, now: Millis) -> Attempt {
        Attempt {
            id,
            profile: profile.into(),
            target: target.into(),
            host_id: host_id.into(),
            runner_name: super::host::runner_name(host_id, id),
            state: AttemptState::Pending,
            outcome: None,
            reason: None,
            created_at: now,
            updated_at: now,
            ended_at: None,
            pid: None,
            pid_start: None,
            exit_code: None,
            runner_id: None,
            job_name: None,
            job_id: None,
            job_queued_at: None,
            lease_id: None,
            peak_rss_bytes: None,
            cpu_millis: None,
            cleaned: false,
            cleanup_tries: 0,
            next_cleanup_at: None,
            runner_uid: None,
            runner_gid: None,
            host_cleaned_at: None,
            slot: None,
            keeps_work: false,
            owner: None,
            mean_rss_bytes: None,
            rolled_up: false,
            history: vec![StateChange {
                state: AttemptState::Pending,
                at: now,
            }],
        }
    }

    /// One legal step of the table.
    pub fn step(&mut self, to: AttemptState, now: Millis) -> Result<(), IllegalTransition> {
        if !self.state.can_step(to) {
            return Err(self.illegal(to));
        }
        self.enter(to, now);
        Ok(())
    }

    /// A recovery move: a legal step or a jump forward past missed states.
    pub fn recover(&mut self, to: AttemptState, now: Millis) -> Result<(), IllegalTransition> {
        if !self.state.can_recover(to) {
            return Err(self.illegal(to));
        }
        self.enter(to, now);
        Ok(())
    }

    /// Ends a recorded start that will not be tried (`not_started`, saying why):
    /// nothing external was done for it.
    pub fn end_not_started(&mut self, why: &str, now: Millis) -> Result<(), IllegalTransition> {
        let reason = Reason::message(ReasonKind::NotStarted, why);
        self.end(Outcome::Failed, Some(reason), now)
    }

    /// Ends the runner's life with an outcome: moves to `Finished` or `Failed`
    /// (recovering past missed states) and records the outcome and reason.
    pub fn end(
        &mut self,
        outcome: Outcome,
        reason: Option<Reason>,
        now: Millis,
    ) -> Result<(), IllegalTransition> {
        self.recover(outcome.final_state(), now)?;
        self.outcome = Some(outcome);
        self.reason = reason;
        Ok(())
    }

    fn illegal(&self, to: AttemptState) -> IllegalTransition {
        IllegalTransition {
            attempt: self.id,
            from: self.state,
            to,
        }
    }

    fn enter(&mut self, to: AttemptState, now: Millis) {
        self.state = to;
        self.updated_at = now;
        if matches!(to, AttemptState::Finished | AttemptState::Failed) && self.ended_at.is_none() {
            self.ended_at = Some(now);
        }
        self.history.push(StateChange { state: to, at: now });
    }

    /// The word to show for where the attempt is: its state, or `cleaned` once
    /// cleanup is done (cleaned is a flag, and the state stays `destroying`). Every
    /// view (`attempts`, `attempt show`, their JSON, `top`) says this word, so the end
    /// state has one name.
    pub fn state_word(&self) -> &'static str {
        if self.cleaned {
            "cleaned"
        } else {
            self.state.as_str()
        }
    }

    /// Since when the attempt has been where [`Attempt::state_word`] says: its last
    /// state change, or its cleaning once cleaned (`updated_at` moves only then).
    pub fn state_since(&self) -> Millis {
        if self.cleaned {
            return self.updated_at;
        }
        self.history.last().map_or(self.updated_at, |h| h.at)
    }

    /// Keeps whose job the runner ran, as a demand source said it, and the job's id
    /// with it: REST and webhooks name the job by the runner that took it, so their
    /// id is the job this runner served (issue 38: `attempts --json` said `job_id:
    /// null` for served jobs). A scale set's owner has no REST id and leaves the
    /// one known alone; a launch's id gives way to what GitHub says the runner took.
    pub fn take_owner(&mut self, owner: super::job_owner::JobOwner) {
        if let Some(id) = owner.job_id {
            self.job_id = Some(id);
        }
        self.owner = Some(owner);
    }

    /// Marks the cleanup done at `now` (the record stays, for history).
    pub fn mark_cleaned(&mut self, now: Millis) {
        self.cleaned = true;
        self.next_cleanup_at = None;
        self.updated_at = now;
    }

    /// The runner uid this attempt holds: its own until the host's side of its
    /// cleanup is done (`host_cleaned_at`, or `cleaned`). No other attempt is given
    /// it meanwhile.
    pub fn holds_uid(&self) -> Option<u32> {
        if self.cleaned || self.host_cleaned_at.is_some() {
            return None;
        }
        self.runner_uid
    }

    /// Seconds since creation (or until the end, once ended).
    pub fn age_millis(&self, now: Millis) -> Millis {
        self.ended_at.unwrap_or(now).max(self.created_at) - self.created_at
    }
}

#[cfg(test)]
mod tests {
    use super::AttemptState::*;
    use super::*;
    use crate::domain::ReasonKind;

    /// The whole table, written out: every pair not listed is illegal.
    const LEGAL: &[(AttemptState, AttemptState)] = &[
        (Pending, Starting),
        (Pending, Failed),
        (Starting, Idle),
        (Starting, Failed),
        (Idle, Busy),
        (Idle, Finished),
        (Idle, Failed),
        (Busy, Finished),
        (Busy, Failed),
        (Finished, Destroying),
        (Failed, Destroying),
        (Destroying, CleanupDeferred),
        (CleanupDeferred, Destroying),
    ];

    #[test]
    fn every_pair_of_states_against_the_table() {
        for from in ALL_STATES {
            for to in ALL_STATES {
                assert_eq!(
                    from.can_step(to),
                    LEGAL.contains(&(from, to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn recovery_moves_forward_never_back() {
        assert!(Pending.can_recover(Busy));
        assert!(Starting.can_recover(Finished));
        assert!(Pending.can_recover(Destroying));
        assert!(Idle.can_recover(Failed));
        assert!(Finished.can_recover(Destroying));
        assert!(Failed.can_recover(CleanupDeferred));
        for (from, to) in [
            (Busy, Idle),
            (Idle, Starting),
            (Finished, Failed),
            (Failed, Finished),
            (Destroying, Busy),
            (Destroying, Finished),
            (CleanupDeferred, Pending),
            (Busy, Busy),
        ] {
            assert!(!from.can_recover(to), "{from} -> {to} must be refused");
        }
    }

    #[test]
    fn a_life_records_its_history_and_end() {
        let mut a = Attempt::new(7, "linux", "octo", "0123abcd89ef4567", 1_000);
        assert_eq!(a.runner_name, "rm-0123abcd-7");
        a.step(Starting, 2_000).unwrap();
        a.step(Idle, 3_000).unwrap();
        a.step(Busy, 4_000).unwrap();
        a.end(Outcome::CompletedJob, None, 9_000).unwrap();
        assert_eq!(a.state, Finished);
        assert_eq!(a.ended_at, Some(9_000));
        assert_eq!(a.age_millis(100_000), 8_000);
        a.step(Destroying, 9_500).unwrap();
        assert_eq!(a.state_since(), 9_500, "counted from entering the state");
        assert_eq!(
            a.history.iter().map(|h| h.state).collect::<Vec<_>>(),
            vec![Pending, Starting, Idle, Busy, Finished, Destroying]
        );
        a.mark_cleaned(9_800);
        assert_eq!((a.state_word(), a.state_since()), ("cleaned", 9_800));
        let err = a.step(Busy, 10_000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "attempt 7 cannot go from destroying to busy"
        );
        assert_eq!(a.state, Destroying, "a refused transition changes nothing");
    }

    #[test]
    fn end_skips_missed_states() {
        let mut a = Attempt::new(1, "p", "t", "ffffffffffffffff", 0);
        a.end(
            Outcome::Orphaned,
            Some(Reason::new(ReasonKind::ProcessGone)),
            5,
        )
        .unwrap();
        assert_eq!((a.state, a.outcome), (Failed, Some(Outcome::Orphaned)));
        let mut b = Attempt::new(2, "p", "t", "ffffffffffffffff", 0);
        b.step(Starting, 1).unwrap();
        b.end(
            Outcome::ExitedIdleWithoutWork,
            Some(Reason::new(ReasonKind::IdleTimeout)),
            2,
        )
        .unwrap();
        assert_eq!(b.state, Finished);
        assert_eq!(
            b.reason.as_ref().map(Reason::kind),
            Some(ReasonKind::IdleTimeout)
        );
    }

    #[test]
    fn names_round_trip() {
        for s in ALL_STATES {
            assert_eq!(AttemptState::parse(s.as_str()), Some(s));
        }
        assert_eq!(Outcome::parse("orphaned"), Some(Outcome::Orphaned));
        assert_eq!(AttemptState::parse("cleaned"), None);
    }

    #[test]
    fn classes() {
        assert!(Pending.is_unassigned() && Starting.is_unassigned() && Idle.is_unassigned());
        assert!(!Busy.is_unassigned() && Busy.is_live());
        assert!(Finished.is_ended() && CleanupDeferred.is_ended());
    }

    /// Issue 38: an attempt whose owner a REST or webhook source named gets that
    /// owner's job id; a scale set's owner (no REST id) keeps the one known.
    #[test]
    fn regression_38_owner_gives_the_job_id() {
        use crate::domain::job_owner::{JobOwner, OwnerSource};
        let owner = |job_id, source| JobOwner {
            repo: "o/r".into(),
            workflow: None,
            job_name: "build".into(),
            run_id: 7,
            run_attempt: None,
            job_id,
            queued_at: None,
            source,
        };
        let mut a = Attempt::new(1, "p", "t", "h", 0);
        a.take_owner(owner(Some(70), OwnerSource::Rest));
        assert_eq!(a.job_id, Some(70));
        assert_eq!(a.owner.as_ref().map(|o| o.run_id), Some(7));

        let mut launched = Attempt::new(2, "p", "t", "h", 0);
        launched.job_id = Some(5);
        launched.take_owner(owner(None, OwnerSource::ScaleSet));
        assert_eq!(launched.job_id, Some(5), "no id from a scale set: kept");
        launched.take_owner(owner(Some(71), OwnerSource::Webhook));
        assert_eq!(launched.job_id, Some(71), "the job GitHub says it took");
    }
}
