//! Whether and when a job lost to the host is run again (issue 34): pure rules over a
//! stored [`Rerun`] row, what GitHub showed of the job and `now`. The daemon's rerun
//! worker (`daemon::rerun`) only asks GitHub what these rules say to ask, and stores
//! what they conclude.
//!
//! The order: a profile that does not ask (`rerun_lost=off`) settles at once; then the
//! job is found (its id from a source, or by its runner's name in its run's jobs) and
//! read until GitHub concludes it (about ten minutes after the runner stopped renewing
//! it: GitHub's own verdict, which nothing documented makes sooner). Concluded
//! `failure`, it is re-run through `POST .../actions/jobs/{job_id}/rerun`; concluded
//! anything else (it succeeded after all, it was cancelled), it is left alone. A 403
//! while its run still runs ("This workflow is already running": GitHub re-runs a job
//! only in a finished run) waits; any other refusal settles the row, said once with
//! the fix. At most `rerun_lost` re-runs an hour per profile; a row waits its turn.

use crate::backoff::Backoff;
use crate::domain::rerun::{Conclusion, JobSeen, JobStatus, Rerun, RerunState, RunSeen};
use crate::domain::{Attempt, AttemptState};
use crate::reconcile::refusal::Answer;
use crate::timefmt::Millis;
use std::time::Duration;

/// How long after its loss a job is still looked after: GitHub concludes a lost job in
/// about ten minutes, but re-runs it only once its whole run has ended, which a long
/// workflow may take hours to do.
pub const GIVE_UP: Millis = 24 * 3_600_000;
/// The window of the hourly bound.
pub const HOUR: Millis = 3_600_000;
/// Asking again: 5 s, doubling to 5 minutes (about eight reads over GitHub's ten).
pub const ASK_AGAIN: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));
/// How long a job no source named yet may wait for one (the next queue read, a
/// webhook) before it is settled unknown.
pub const OWNER_GRACE: Millis = 120_000;
/// How often a row waiting for a source looks again whether one named its job (REST
/// polling reads the in-progress runs, which name each job's runner, every 10 s).
pub const OWNER_LOOK_EVERY: Millis = 10_000;
/// A job GitHub does not show (yet) is looked for this many times.
pub const NOT_FOUND_TRIES: u32 = 5;

/// What to do next with a waiting row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Ask GitHub about the job.
    Ask,
    /// Ask again at `until`.
    Wait { until: Millis, why: String },
    /// Ask GitHub to run it again.
    Rerun { job_id: i64 },
    /// Nothing more is asked: the row ends so.
    Settle { state: RerunState, detail: String },
}

/// How GitHub answered a re-run it did not accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 403 "This workflow is already running": the run has jobs still going.
    RunStillRuns,
    /// A refusal that will not change by waiting: a missing permission, a run too old
    /// (over a month), the job gone. GitHub's words.
    Refused(String),
    /// A 5xx, a timeout, a rate limit: try again later.
    Transient(String),
}

/// Before any call: settle a row no one asks for or that waited too long, hold it to
/// the hour's bound, else ask. `per_hour` is the profile's `rerun_lost` (`None`: off;
/// a profile gone is off too), `recent` when this profile's last re-runs were asked.
pub fn before(row: &Rerun, per_hour: Option<u32>, recent: &[Millis], now: Millis) -> Next {
    let Some(per_hour) = per_hour else {
        return Next::Settle {
            state: RerunState::Off,
            detail: format!(
                "profile {} does not re-run lost jobs (rerun_lost=off)",
                row.profile
            ),
        };
    };
    if now - row.lost_at > GIVE_UP {
        return Next::Settle {
            state: RerunState::GaveUp,
            detail: "GitHub did not conclude the job within a day".into(),
        };
    }
    if row.repo.is_none() && now - row.lost_at < OWNER_GRACE {
        return Next::Wait {
            until: (now + OWNER_LOOK_EVERY).min(row.lost_at + OWNER_GRACE),
            why: "waiting for a source to name the job".into(),
        };
    }
    if row.repo.is_none() {
        return Next::Settle {
            state: RerunState::Unknown,
            detail: "no source named the job's repository (webhooks do, for an organization)"
                .into(),
        };
    }
    let mut within: Vec<Millis> = recent.iter().copied().filter(|t| now - *t < HOUR).collect();
    if within.len() >= per_hour as usize {
        within.sort_unstable();
        let frees = within[within.len() - per_hour as usize] + HOUR;
        return Next::Wait {
            until: frees,
            why: format!(
                "{per_hour} re-runs an hour already asked for profile {}",
                row.profile
            ),
        };
    }
    Next::Ask
}

/// How far the host's clock may be from GitHub's when runs are told apart by their
/// times.
pub const CLOCK_SKEW: Millis = 5_000;
/// How many runs one look reads the jobs of, at most, per status (a unit each).
pub const RUNS_LOOKED_THROUGH: usize = 30;

/// A list of a repository's runs a look reads, by GitHub's `status` filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunList {
    InProgress,
    Completed,
}

impl RunList {
    /// GitHub's `status` filter for the list.
    pub fn status(self) -> &'static str {
        match self {
            RunList::InProgress => "in_progress",
            RunList::Completed => "completed",
        }
    }
}

/// Where a job no source named is looked for, in order: the runs in progress first,
/// where a lost job stays until GitHub fails it, then the completed ones.
pub const SEARCH_ORDER: [RunList; 2] = [RunList::InProgress, RunList::Completed];

/// The runs a look reads the jobs of, for a job no source named: of `runs` (GitHub's
/// newest in one status, newest first), those that can hold it. Its runner took the
/// job when the attempt turned busy (without a busy time, by the loss), so its run was
/// created before then; a `completed` run ended after then. In a deep queue the newest
/// runs were created after the job was taken, and after a host was down a while the
/// newest completed runs are others': neither can hold it. A time GitHub did not say
/// rules nothing out.
pub fn runs_to_look_through(
    runs: &[RunSeen],
    completed: bool,
    attempt: Option<&Attempt>,
    lost_at: Millis,
) -> Vec<i64> {
    let taken = attempt
        .and_then(|a| {
            a.history
                .iter()
                .find(|c| c.state == AttemptState::Busy)
                .map(|c| c.at)
        })
        .unwrap_or(lost_at)
        .min(lost_at);
    runs.iter()
        .filter(|r| r.created_at.is_none_or(|at| at <= taken + CLOCK_SKEW))
        .filter(|r| !completed || r.updated_at.is_none_or(|at| at >= taken - CLOCK_SKEW))
        .map(|r| r.id)
        .take(RUNS_LOOKED_THROUGH)
        .collect()
}

/// The job the runner ran, among its run's jobs (or runs' jobs): the one GitHub names
/// with the runner's name, the newest if a re-run made several.
pub fn find_by_runner<'a>(jobs: &'a [JobSeen], runner: &str) -> Option<&'a JobSeen> {
    jobs.iter()
        .filter(|j| j.runner_name.as_deref() == Some(runner))
        .max_by_key(|j| j.id)
}

/// Our job among its run's jobs: by its id when known, else by the runner's name.
pub fn ours<'a>(row: &Rerun, jobs: &'a [JobSeen]) -> Option<&'a JobSeen> {
    match row.job_id {
        Some(id) => jobs.iter().find(|j| j.id == id),
        None => find_by_runner(jobs, &row.runner_name),
    }
}

/// A job of the same name and run, newer than ours: the job was re-run since (by us,
/// whose answer was lost, or by anyone). GitHub lists a run's latest attempt, where
/// ours may no longer be.
fn queued_again<'a>(row: &Rerun, jobs: &'a [JobSeen]) -> Option<&'a JobSeen> {
    let (id, name) = (row.job_id?, row.job_name.as_deref()?);
    jobs.iter()
        .filter(|j| j.name == name && j.id > id)
        .max_by_key(|j| j.id)
}

/// After GitHub was asked: `jobs` are the job's run's jobs as it lists them now (empty
/// when the run was not found). Learns the job's id first (`ours`), so the caller
/// keeps it with the row.
pub fn seen(row: &Rerun, jobs: &[JobSeen], now: Millis) -> Next {
    let tries = row.tries + 1;
    if let Some(again) = queued_again(row, jobs) {
        return Next::Settle {
            state: RerunState::Rerun,
            detail: format!("the job is queued again already (job {})", again.id),
        };
    }
    let Some(job) = ours(row, jobs) else {
        if tries >= NOT_FOUND_TRIES {
            return Next::Settle {
                state: RerunState::Unknown,
                detail: format!(
                    "GitHub shows no job taken by {} (looked {tries} times)",
                    row.runner_name
                ),
            };
        }
        return wait(tries, now, "GitHub shows no job taken by the runner yet");
    };
    if let JobStatus::Unfinished(status) = &job.status {
        return wait(
            tries,
            now,
            &format!(
                "GitHub shows the job {status}: it fails it about ten minutes after the \
                 runner stopped"
            ),
        );
    }
    match &job.conclusion {
        Some(Conclusion::Failure) => Next::Rerun { job_id: job.id },
        other => Next::Settle {
            state: RerunState::NotFailed,
            detail: format!(
                "GitHub concluded the job {}: nothing to run again",
                other
                    .as_ref()
                    .map_or("without a conclusion", Conclusion::as_str)
            ),
        },
    }
}

/// A job learned only now (found by its runner's name) that another row already
/// holds: it was lost before, and is never re-run a second time.
pub fn lost_before() -> Next {
    Next::Settle {
        state: RerunState::Again,
        detail: "the job was lost before and has been looked after once: a job is re-run \
                 once, never twice"
            .into(),
    }
}

/// After the re-run was asked for.
pub fn answered(row: &Rerun, result: Result<(), Refusal>, now: Millis) -> Next {
    let tries = row.tries + 1;
    match result {
        Ok(()) => Next::Settle {
            state: RerunState::Rerun,
            detail: "GitHub queued the job again".into(),
        },
        Err(Refusal::RunStillRuns) => wait(
            tries,
            now,
            "its run still runs: GitHub re-runs a job once its whole run has ended",
        ),
        Err(Refusal::Transient(why)) => wait(tries, now, &why),
        Err(Refusal::Refused(why)) => Next::Settle {
            state: RerunState::Refused,
            detail: format!(
                "GitHub refused the re-run: {why} (the credential needs the repo scope, or \
                 Actions: write for a fine-grained token or an App)"
            ),
        },
    }
}

/// After a look at the run's jobs failed (before any re-run was asked for): a refusal
/// settles with the read's own fix, anything else waits.
pub fn unreadable(row: &Rerun, refusal: Refusal, now: Millis) -> Next {
    match refusal {
        Refusal::Refused(why) => Next::Settle {
            state: RerunState::Refused,
            detail: format!(
                "GitHub refused to show the run's jobs: {why} (the credential needs the \
                 repo scope, or Actions: read for a fine-grained token or an App)"
            ),
        },
        Refusal::RunStillRuns => wait(row.tries + 1, now, "GitHub asked to wait"),
        Refusal::Transient(why) => wait(row.tries + 1, now, &why),
    }
}

/// What a refused call means for a re-run: a 403 that says the run still runs waits
/// for it; a 403, a 404 or a 422 will not change by waiting; anything else is tried
/// again. `words` is what the row keeps (the error as it reads).
pub fn refusal(how: Answer, words: String) -> Refusal {
    match how {
        Answer::Forbidden(message) if is_run_still_running(message) => Refusal::RunStillRuns,
        Answer::Forbidden(_) | Answer::NotFound | Answer::Unprocessable => Refusal::Refused(words),
        _ => Refusal::Transient(words),
    }
}

/// The words GitHub answers a re-run of a job whose run still runs with (403).
pub fn is_run_still_running(message: &str) -> bool {
    message.contains("already running")
}

fn wait(tries: u32, now: Millis, why: &str) -> Next {
    Next::Wait {
        until: now + ASK_AGAIN.after_failures(tries).as_millis() as Millis,
        why: why.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_000_000_000;

    #[test]
    fn a_look_reads_only_runs_created_before_the_job_was_taken_and_ended_after() {
        let run = |id, created: Option<Millis>, updated: Option<Millis>| RunSeen {
            id,
            created_at: created,
            updated_at: updated,
        };
        let mut a = Attempt::new(7, "p", "t", "h", T0 - 60_000);
        a.recover(AttemptState::Busy, T0 - 30_000).unwrap();
        let taken = T0 - 30_000;
        // Newest first, as GitHub lists them.
        let runs = [
            run(6, Some(taken + 60_000), Some(taken + 61_000)), // created after: no
            run(5, Some(taken + CLOCK_SKEW), Some(taken + 70_000)), // within the skew
            run(4, None, None),                                 // no times: kept
            run(3, Some(taken - 10_000), Some(taken - 9_000)),  // ended before it was taken
            run(2, Some(taken - 20_000), Some(T0 + 600_000)),   // ours, failed later
        ];
        // Found gone by the next daemon an hour later: the busy time bounds the runs.
        assert_eq!(
            runs_to_look_through(&runs, true, Some(&a), T0 + 3_600_000),
            vec![5, 4, 2]
        );
        assert_eq!(
            runs_to_look_through(&runs, false, Some(&a), T0 + 3_600_000),
            vec![5, 4, 3, 2],
            "an in-progress run's last change says nothing"
        );
        // Never busy as far as the ledger says: the loss bounds them.
        assert_eq!(
            runs_to_look_through(&runs, false, None, taken),
            vec![5, 4, 3, 2]
        );
        let many: Vec<RunSeen> = (0..100).map(|i| run(100 - i, None, None)).collect();
        assert_eq!(
            runs_to_look_through(&many, true, None, T0).len(),
            RUNS_LOOKED_THROUGH
        );
    }

    fn row() -> Rerun {
        Rerun {
            attempt_id: 7,
            target: "t".into(),
            profile: "p".into(),
            runner_name: "rm-abc-7".into(),
            repo: Some("acme/app".into()),
            run_id: Some(40),
            job_name: Some("build".into()),
            job_id: Some(400),
            loss: "killed".into(),
            lost_at: T0,
            state: RerunState::Waiting,
            tries: 0,
            next_at: T0,
            detail: None,
            done_at: None,
        }
    }

    fn job(status: &str, conclusion: Option<&str>) -> JobSeen {
        JobSeen {
            id: 400,
            run_id: 40,
            name: "build".into(),
            status: JobStatus::from_wire(status),
            conclusion: conclusion.map(Conclusion::from_wire),
            runner_name: Some("rm-abc-7".into()),
        }
    }

    fn settled(n: &Next) -> Option<RerunState> {
        match n {
            Next::Settle { state, .. } => Some(*state),
            _ => None,
        }
    }

    #[test]
    fn a_profile_that_does_not_ask_settles_off_and_a_day_gives_up() {
        assert_eq!(
            settled(&before(&row(), None, &[], T0)),
            Some(RerunState::Off)
        );
        assert_eq!(before(&row(), Some(10), &[], T0 + 1), Next::Ask);
        assert_eq!(
            settled(&before(&row(), Some(10), &[], T0 + GIVE_UP + 1)),
            Some(RerunState::GaveUp)
        );
        let mut nameless = row();
        nameless.repo = None;
        assert_eq!(
            before(&nameless, Some(10), &[], T0 + 1),
            Next::Wait {
                until: T0 + 1 + OWNER_LOOK_EVERY,
                why: "waiting for a source to name the job".into()
            },
            "the next read of the in-progress runs may name it"
        );
        assert_eq!(
            before(&nameless, Some(10), &[], T0 + OWNER_GRACE - 1),
            Next::Wait {
                until: T0 + OWNER_GRACE,
                why: "waiting for a source to name the job".into()
            },
        );
        assert_eq!(
            settled(&before(&nameless, Some(10), &[], T0 + OWNER_GRACE)),
            Some(RerunState::Unknown)
        );
    }

    #[test]
    fn the_hours_bound_holds_a_row_until_the_oldest_rerun_in_it_is_an_hour_old() {
        let now = T0 + 5 * 60_000;
        let recent = [T0 - 50 * 60_000, T0 - 30 * 60_000, T0 - 2 * HOUR];
        match before(&row(), Some(2), &recent, now) {
            Next::Wait { until, why } => {
                assert_eq!(
                    until,
                    T0 - 50 * 60_000 + HOUR,
                    "when the older of the two frees"
                );
                assert!(why.contains("2 re-runs an hour"), "{why}");
            }
            other => panic!("expected a wait, got {other:?}"),
        }
        assert_eq!(before(&row(), Some(3), &recent, now), Next::Ask);
    }

    #[test]
    fn only_a_job_github_failed_is_rerun_and_a_running_one_is_asked_again_later() {
        assert_eq!(
            seen(&row(), &[job("completed", Some("failure"))], T0),
            Next::Rerun { job_id: 400 }
        );
        for c in [Some("success"), Some("cancelled"), None] {
            assert_eq!(
                settled(&seen(&row(), &[job("completed", c)], T0)),
                Some(RerunState::NotFailed),
                "{c:?}"
            );
        }
        match seen(&row(), &[job("in_progress", None)], T0) {
            Next::Wait { until, .. } => assert_eq!(until, T0 + 5_000, "5 s after the first ask"),
            other => panic!("{other:?}"),
        }
        let mut later = row();
        later.tries = 9;
        match seen(&later, &[job("in_progress", None)], T0) {
            Next::Wait { until, .. } => assert_eq!(until, T0 + 300_000, "capped at 5 minutes"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_job_github_does_not_show_is_looked_for_a_few_times_then_settles_unknown() {
        assert!(matches!(seen(&row(), &[], T0), Next::Wait { .. }));
        let mut r = row();
        r.tries = NOT_FOUND_TRIES - 1;
        assert_eq!(settled(&seen(&r, &[], T0)), Some(RerunState::Unknown));
    }

    #[test]
    fn a_job_queued_again_since_is_never_rerun_a_second_time() {
        // Ours failed, and a newer job of its name stands in its run (GitHub's latest
        // attempt may list only that one): our earlier ask went through, or someone
        // re-ran it. Either way nothing is asked again.
        let mut again = job("queued", None);
        again.id = 500;
        again.runner_name = None;
        for jobs in [
            vec![job("completed", Some("failure")), again.clone()],
            vec![again.clone()],
        ] {
            match seen(&row(), &jobs, T0) {
                Next::Settle { state, detail } => {
                    assert_eq!(state, RerunState::Rerun);
                    assert!(detail.contains("500"), "{detail}");
                }
                other => panic!("{other:?}"),
            }
        }
        // Without its id, ours is found by the runner's name.
        let mut nameless = row();
        nameless.job_id = None;
        assert_eq!(
            ours(&nameless, &[again, job("completed", Some("failure"))]).map(|j| j.id),
            Some(400)
        );
    }

    #[test]
    fn a_run_still_running_waits_and_a_refusal_settles_with_the_fix() {
        let w = || "GitHub's words".to_string();
        assert_eq!(
            refusal(Answer::Forbidden("This workflow is already running"), w()),
            Refusal::RunStillRuns
        );
        assert_eq!(
            refusal(Answer::Forbidden("Resource not accessible"), w()),
            Refusal::Refused(w())
        );
        assert_eq!(refusal(Answer::NotFound, w()), Refusal::Refused(w()));
        assert_eq!(refusal(Answer::Unprocessable, w()), Refusal::Refused(w()));
        assert_eq!(refusal(Answer::Server, w()), Refusal::Transient(w()));
        assert!(matches!(
            answered(&row(), Err(Refusal::RunStillRuns), T0),
            Next::Wait { .. }
        ));
        assert!(matches!(
            answered(&row(), Err(Refusal::Transient("503".into())), T0),
            Next::Wait { .. }
        ));
        match answered(
            &row(),
            Err(Refusal::Refused("Resource not accessible".into())),
            T0,
        ) {
            Next::Settle { state, detail } => {
                assert_eq!(state, RerunState::Refused);
                assert!(detail.contains("Actions: write"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            settled(&answered(&row(), Ok(()), T0)),
            Some(RerunState::Rerun)
        );
        assert!(is_run_still_running("This workflow is already running"));
        assert_eq!(
            SEARCH_ORDER.map(RunList::status),
            ["in_progress", "completed"],
            "a lost job stays in progress until GitHub fails it: looked for there first"
        );
        assert!(!is_run_still_running(
            "Resource not accessible by integration"
        ));
    }

    #[test]
    fn a_look_github_refuses_settles_with_the_reads_fix_not_the_reruns() {
        match unreadable(&row(), Refusal::Refused("Not Found".into()), T0) {
            Next::Settle { state, detail } => {
                assert_eq!(state, RerunState::Refused);
                assert!(
                    detail.contains("refused to show the run's jobs"),
                    "{detail}"
                );
                assert!(detail.contains("Actions: read"), "{detail}");
                assert!(!detail.contains("refused the re-run"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            unreadable(&row(), Refusal::Transient("503".into()), T0),
            Next::Wait { .. }
        ));
    }

    #[test]
    fn the_runners_job_is_found_by_name_the_newest_first() {
        let mut a = job("completed", Some("failure"));
        let mut b = a.clone();
        b.id = 401;
        let mut other = a.clone();
        other.id = 402;
        other.runner_name = Some("someone-else".into());
        a.id = 399;
        let jobs = [a, b, other];
        assert_eq!(find_by_runner(&jobs, "rm-abc-7").map(|j| j.id), Some(401));
        assert_eq!(find_by_runner(&jobs, "rm-none"), None);
    }
}
