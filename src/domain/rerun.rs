//! A job lost to the host, and whether it was run again (issue 34): one row per job
//! (its repository, run and name: a re-run keeps all three, so one job is never re-run
//! twice), written when the attempt that lost it ends (`domain::loss`) and carried by
//! the target loop to GitHub's own "re-run a job" endpoint once GitHub has failed it.
//! The rules that move a row are `reconcile::rerun`'s; this is what is kept.

use crate::timefmt::Millis;

/// Re-runs a profile may ask for in an hour when `rerun_lost=on`.
pub const DEFAULT_RERUNS_PER_HOUR: u32 = 10;
/// The most `rerun_lost=N` may say.
pub const MAX_RERUNS_PER_HOUR: u32 = 1_000;

/// Where a lost job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerunState {
    /// Waiting: for GitHub's verdict on the job (about ten minutes after its runner
    /// stopped renewing it), for its run to end, or for the hour's bound.
    Waiting,
    /// GitHub accepted the re-run: the job is queued again.
    Rerun,
    /// Not re-run: the profile does not ask for it (`rerun_lost=off`).
    Off,
    /// Not re-run: GitHub concluded the job other than failed (it succeeded after
    /// all, or was cancelled), so there is nothing to run again.
    NotFailed,
    /// GitHub refused the re-run (a missing permission, a run too old): said once.
    Refused,
    /// No source named the job, and it could not be found by its runner.
    Unknown,
    /// GitHub never concluded it within the window (`reconcile::rerun::GIVE_UP`).
    GaveUp,
    /// The same job (repository, run and name) was lost before and has its own row:
    /// a job is re-run once, never twice.
    Again,
}

impl RerunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RerunState::Waiting => "waiting",
            RerunState::Rerun => "rerun",
            RerunState::Off => "off",
            RerunState::NotFailed => "not_failed",
            RerunState::Refused => "refused",
            RerunState::Unknown => "unknown",
            RerunState::GaveUp => "gave_up",
            RerunState::Again => "again",
        }
    }

    /// A stored word; an unknown one (a newer build's) reads as `Unknown`, which
    /// nothing acts on.
    pub fn parse(s: &str) -> RerunState {
        match s {
            "waiting" => RerunState::Waiting,
            "rerun" => RerunState::Rerun,
            "off" => RerunState::Off,
            "not_failed" => RerunState::NotFailed,
            "refused" => RerunState::Refused,
            "gave_up" => RerunState::GaveUp,
            "again" => RerunState::Again,
            _ => RerunState::Unknown,
        }
    }

    /// Whether the row is settled: nothing more is asked of GitHub for it.
    pub fn is_final(self) -> bool {
        self != RerunState::Waiting
    }
}

/// One lost job and its re-run, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    /// The attempt that lost it.
    pub attempt_id: i64,
    pub target: String,
    pub profile: String,
    pub runner_name: String,
    /// `owner/repo`, its run and the job's name, where a source said them.
    pub repo: Option<String>,
    pub run_id: Option<i64>,
    pub job_name: Option<String>,
    /// GitHub's REST job id, once known (a source said it, or it was found by the
    /// runner's name in its run's jobs).
    pub job_id: Option<i64>,
    /// How it was lost (`domain::loss::Loss::as_str`).
    pub loss: String,
    pub lost_at: Millis,
    pub state: RerunState,
    /// How many times GitHub was asked about it.
    pub tries: u32,
    /// When to ask again, while waiting.
    pub next_at: Millis,
    /// What GitHub said last, or why the row settled as it did.
    pub detail: Option<String>,
    pub done_at: Option<Millis>,
}

/// A job as GitHub shows it when asked whether it can be re-run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSeen {
    pub id: i64,
    pub run_id: i64,
    pub name: String,
    pub status: JobStatus,
    /// Once completed: `success`, `failure`, `cancelled`, ...
    pub conclusion: Option<Conclusion>,
    pub runner_name: Option<String>,
}

/// A job's `status` as GitHub writes it: only `completed` decides anything; any
/// other word (`queued`, `in_progress`, `waiting`, ...) is kept to be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    Completed,
    Unfinished(String),
}

impl JobStatus {
    pub fn from_wire(word: &str) -> JobStatus {
        match word {
            "completed" => JobStatus::Completed,
            other => JobStatus::Unfinished(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            JobStatus::Completed => "completed",
            JobStatus::Unfinished(word) => word,
        }
    }
}

/// A completed job's `conclusion`: only `failure` can be re-run; any other word
/// (`success`, `cancelled`, `skipped`, ...) is kept to be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conclusion {
    Failure,
    Other(String),
}

impl Conclusion {
    pub fn from_wire(word: &str) -> Conclusion {
        match word {
            "failure" => Conclusion::Failure,
            other => Conclusion::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Conclusion::Failure => "failure",
            Conclusion::Other(word) => word,
        }
    }
}

/// A workflow run as GitHub lists it when a lost job is looked for: when it was created
/// and last changed (ended, for a completed run), where GitHub said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSeen {
    pub id: i64,
    pub created_at: Option<Millis>,
    pub updated_at: Option<Millis>,
}

/// `rerun_lost` as `profile set` reads it: `off` (or empty, `0`), `on` (the default
/// bound), or a number of re-runs an hour. `None` is off.
pub fn parse_setting(key: &str, value: &str) -> Result<Option<u32>, super::Invalid> {
    match value {
        "" | "off" | "0" | "false" | "no" => Ok(None),
        "on" | "true" | "yes" => Ok(Some(DEFAULT_RERUNS_PER_HOUR)),
        v => match v.parse::<u32>() {
            Ok(n) if (1..=MAX_RERUNS_PER_HOUR).contains(&n) => Ok(Some(n)),
            _ => Err(super::Invalid::new(
                key,
                format!(
                    "expected off, on ({DEFAULT_RERUNS_PER_HOUR} an hour) or re-runs an hour \
                     1..={MAX_RERUNS_PER_HOUR} (got {v:?})"
                ),
            )),
        },
    }
}

/// How `profile show` and `top` say it, in the words `profile set` takes back: `off`,
/// `on` (the default bound) or the bound.
pub fn setting_text(per_hour: Option<u32>) -> String {
    match per_hour {
        None => "off".into(),
        Some(DEFAULT_RERUNS_PER_HOUR) => "on".into(),
        Some(n) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_reads_off_on_and_a_bound_and_refuses_the_rest_by_name() {
        assert_eq!(parse_setting("rerun_lost", "off").unwrap(), None);
        assert_eq!(parse_setting("rerun_lost", "").unwrap(), None);
        assert_eq!(
            parse_setting("rerun_lost", "on").unwrap(),
            Some(DEFAULT_RERUNS_PER_HOUR)
        );
        assert_eq!(parse_setting("rerun_lost", "3").unwrap(), Some(3));
        for bad in ["maybe", "-1", "1001", "1.5"] {
            let e = parse_setting("rerun_lost", bad).unwrap_err();
            assert!(e.to_string().contains("rerun_lost"), "{e}");
        }
        assert_eq!(setting_text(None), "off");
        assert_eq!(setting_text(Some(10)), "on");
        assert_eq!(setting_text(Some(3)), "3");
    }

    #[test]
    fn states_round_trip_and_only_waiting_is_open() {
        for s in [
            RerunState::Waiting,
            RerunState::Rerun,
            RerunState::Off,
            RerunState::NotFailed,
            RerunState::Refused,
            RerunState::Unknown,
            RerunState::GaveUp,
            RerunState::Again,
        ] {
            assert_eq!(RerunState::parse(s.as_str()), s);
            assert_eq!(s.is_final(), s != RerunState::Waiting);
        }
        assert_eq!(RerunState::parse("later"), RerunState::Unknown);
    }
}
