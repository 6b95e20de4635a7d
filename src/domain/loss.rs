//! Whether an attempt's job was lost to the host (issue 34): the runner's life ended
//! while it ran a job, for a reason that is the host's and not the job's. GitHub then
//! fails the job some ten minutes later ("The self-hosted runner: NAME lost
//! communication with the server"). Pure: judged from what the ledger keeps of the
//! attempt (its history and its end's reason), so the same answer comes back from any
//! later read.
//!
//! Lost: the runner killed by a signal we did not send (we end an attempt before we
//! signal it, so our own stops never read as an exit during a job), the runner exiting
//! non-zero mid-job (it exits 0 after a failed job: a failing step is not its exit),
//! or the runner found gone (a host or daemon that died under it). Never lost: a job
//! that ended by itself (`job Failed` is the runner's report, exit 0), its own OOM under
//! `memory_max`, its `job_timeout`, or anything that ended before it took a job.

use super::attempt::{Attempt, AttemptState, Outcome};
use super::reason::ReasonKind;

/// How a job was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// The runner died of a signal we did not send (an OOM killer outside its cgroup,
    /// a `kill -9`, a host shutting down).
    Killed { signal: i32 },
    /// The runner exited non-zero in the middle of the job.
    Crashed { code: i32 },
    /// The runner was found gone: the daemon (or the host) was down while it ran.
    Vanished,
}

impl Loss {
    /// The bounded word, for metrics and `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Loss::Killed { .. } => "killed",
            Loss::Crashed { .. } => "crashed",
            Loss::Vanished => "vanished",
        }
    }

    /// What happened, in words.
    pub fn describe(self) -> String {
        match self {
            Loss::Killed { signal } => format!("the runner was killed by signal {signal} mid-job"),
            Loss::Crashed { code } => format!("the runner exited {code} mid-job"),
            Loss::Vanished => "the runner was found gone while it ran the job".into(),
        }
    }
}

/// The loss, if `a`'s job was lost to the host.
pub fn loss(a: &Attempt) -> Option<Loss> {
    let took_a_job = a.history.iter().any(|c| c.state == AttemptState::Busy);
    if !took_a_job || !matches!(a.outcome, Some(Outcome::Failed | Outcome::Orphaned)) {
        return None;
    }
    let reason = a.reason.as_ref()?;
    match reason.kind() {
        ReasonKind::ExitedDuringJob => match reason.exit_code()? {
            code if code > 128 => Some(Loss::Killed { signal: code - 128 }),
            0 => None,
            code => Some(Loss::Crashed { code }),
        },
        ReasonKind::ProcessGone | ReasonKind::Orphaned => Some(Loss::Vanished),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::reason::Reason;

    fn busy() -> Attempt {
        let mut a = Attempt::new(1, "linux", "t", "h", 0);
        a.recover(AttemptState::Busy, 10).unwrap();
        a
    }

    fn ended(mut a: Attempt, outcome: Outcome, reason: Reason) -> Attempt {
        a.end(outcome, Some(reason), 20).unwrap();
        a
    }

    #[test]
    fn a_job_is_lost_only_to_the_host_and_only_once_taken() {
        let killed = ended(
            busy(),
            Outcome::Failed,
            Reason::exit(ReasonKind::ExitedDuringJob, 137),
        );
        assert_eq!(loss(&killed), Some(Loss::Killed { signal: 9 }));
        let crashed = ended(
            busy(),
            Outcome::Failed,
            Reason::exit(ReasonKind::ExitedDuringJob, 1),
        );
        assert_eq!(loss(&crashed), Some(Loss::Crashed { code: 1 }));
        let gone = ended(
            busy(),
            Outcome::Orphaned,
            Reason::new(ReasonKind::ProcessGone),
        );
        assert_eq!(loss(&gone), Some(Loss::Vanished));
        assert_eq!(
            gone.reason.as_ref().map(Reason::kind),
            Some(ReasonKind::ProcessGone)
        );
        // The job's own end: its failure (reported, exit 0), its OOM, its timeout.
        for (o, r) in [
            (Outcome::CompletedJob, Reason::job("Failed")),
            (Outcome::Failed, Reason::new(ReasonKind::Oom)),
            (Outcome::Failed, Reason::new(ReasonKind::JobTimeout)),
        ] {
            assert_eq!(loss(&ended(busy(), o, r.clone())), None, "{r}");
        }
        // Never busy: no job to lose.
        let mut idle = Attempt::new(2, "linux", "t", "h", 0);
        idle.recover(AttemptState::Idle, 10).unwrap();
        let idle = ended(
            idle,
            Outcome::Failed,
            Reason::exit(ReasonKind::ExitedWhileIdle, 137),
        );
        assert_eq!(loss(&idle), None);
        assert_eq!(Loss::Killed { signal: 9 }.as_str(), "killed");
        assert!(Loss::Crashed { code: 1 }.describe().contains("exited 1"));
    }
}
