//! The demo's summary: what its jobs came to, in figures that add up, and the verdict.

use super::{DemoError, World};
use crate::store::{SqliteStore, Store};
use std::time::Duration;

/// What the demo's jobs came to: how many the simulated GitHub saw completed, of how
/// many queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub served: usize,
    pub queued: usize,
}

/// Below this many samples, percentiles say nothing a median and a maximum do not.
const FEW: usize = 20;

impl Served {
    /// The verdict on a demo that ran to its end or was quit: every queued job served,
    /// or exit 1 saying how many were not.
    pub(super) fn verdict(self) -> Result<(), DemoError> {
        if self.served >= self.queued {
            return Ok(());
        }
        Err(DemoError::Failed(format!(
            "{} of {} jobs left unserved",
            self.queued - self.served,
            self.queued
        )))
    }

    /// The verdict on a demo the user quit under `top`, where jobs keep arriving until
    /// then: quitting is a success; what was still queued is said, not failed.
    pub(super) fn quit(self) -> Result<(), DemoError> {
        if self.served < self.queued {
            say!(
                "quit with {} of {} jobs served; the rest were still queued",
                self.served,
                self.queued
            );
        }
        Ok(())
    }

    pub(super) fn interrupted(self) -> DemoError {
        DemoError::Interrupted(format!(
            "interrupted with {} of {} jobs served",
            self.served, self.queued
        ))
    }
}

/// Prints the summary and returns how many jobs were served, of how many queued.
pub(super) fn summary(world: &World, elapsed: Duration) -> Served {
    let jobs = world.sim.jobs();
    let store = SqliteStore::open(&world.state_dir).ok();
    let attempts = store
        .as_ref()
        .and_then(|s| s.attempts(&crate::store::AttemptFilter::default()).ok())
        .unwrap_or_default();
    let latencies: Vec<i64> = store
        .as_ref()
        .and_then(|s| s.latency_samples(None, 0).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|l| l.latency_ms)
        .collect();
    let units: u64 = world.sim.units_used().values().sum();
    let tally = Tally::of(&jobs, &attempts, latencies, units);
    say!("");
    say!("summary after {:.1}s:", elapsed.as_secs_f64());
    for line in tally.lines() {
        say!("  {line}");
    }
    tally.served()
}

/// The demo's figures, each counting one named thing, so that they add up: jobs by
/// their state on the simulated GitHub, who took them, and our runners by how they
/// ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Tally {
    /// Jobs queued on the simulated GitHub, in all.
    jobs: usize,
    completed: usize,
    running: usize,
    waiting: usize,
    /// Jobs that went to a runner of ours, and to any other runner.
    ours: usize,
    others: usize,
    /// Our runners (attempts), in all, and by how they ended or not yet.
    runners: usize,
    ran_a_job: usize,
    ended_without_one: usize,
    live: usize,
    /// Queue-to-spawn of each runner spawned for a job, sorted.
    latencies: Vec<i64>,
    units: u64,
}

impl Tally {
    pub(super) fn of(
        jobs: &[crate::sim::JobState],
        attempts: &[crate::domain::Attempt],
        mut latencies: Vec<i64>,
        units: u64,
    ) -> Tally {
        use crate::domain::Outcome;
        use crate::sim::JobStatus;
        let is_ours = |name: &str| attempts.iter().any(|a| a.runner_name == name);
        let count = |st: JobStatus| jobs.iter().filter(|j| j.status == st).count();
        let taken: Vec<&str> = jobs
            .iter()
            .filter_map(|j| j.runner_name.as_deref())
            .collect();
        let ended = |o: Outcome| attempts.iter().filter(|a| a.outcome == Some(o)).count();
        latencies.sort_unstable();
        Tally {
            jobs: jobs.len(),
            completed: count(JobStatus::Completed),
            running: count(JobStatus::InProgress),
            waiting: count(JobStatus::Queued) + count(JobStatus::Waiting),
            ours: taken.iter().filter(|n| is_ours(n)).count(),
            others: taken.iter().filter(|n| !is_ours(n)).count(),
            runners: attempts.len(),
            ran_a_job: ended(Outcome::CompletedJob),
            live: attempts.iter().filter(|a| a.outcome.is_none()).count(),
            ended_without_one: attempts
                .iter()
                .filter(|a| a.outcome.is_some_and(|o| o != Outcome::CompletedJob))
                .count(),
            latencies,
            units,
        }
    }

    fn pct(&self, p: f64) -> i64 {
        // (Below `FEW` samples the lines say median and max, not percentiles.)
        let i = ((self.latencies.len() as f64 - 1.0) * p).round();
        self.latencies.get(i as usize).copied().unwrap_or(0)
    }

    pub(super) fn lines(&self) -> Vec<String> {
        let mut out = vec![
            format!(
                "jobs              {} queued: {} completed, {} running, {} still queued",
                self.jobs, self.completed, self.running, self.waiting
            ),
            format!(
                "taken by          our runners {}, other runners {}",
                self.ours, self.others
            ),
            format!(
                "our runners       {} started: {} ran a job to its end, {} still live, {} ended without a job",
                self.runners, self.ran_a_job, self.live, self.ended_without_one
            ),
        ];
        let n = self.latencies.len();
        out.push(match n {
            0 => "queue-to-spawn    no runner was spawned for a job".to_string(),
            1 => format!(
                "queue-to-spawn    {} ms, the one runner spawned",
                self.latencies[0]
            ),
            // A p99 of a handful is its maximum: say what it is.
            n if n < FEW => format!(
                "queue-to-spawn    median {} ms, max {} ms, over {n} runners spawned",
                self.pct(0.5),
                self.latencies[n - 1]
            ),
            n => format!(
                "queue-to-spawn    p50 {} ms, p99 {} ms, over {n} runners spawned",
                self.pct(0.5),
                self.pct(0.99)
            ),
        });
        out.push(format!(
            "rate-limit units  {} spent, {:.1} per completed job",
            self.units,
            self.units as f64 / self.completed.max(1) as f64
        ));
        out
    }

    pub(super) fn served(&self) -> Served {
        Served {
            served: self.completed,
            queued: self.jobs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn job(id: u64, status: crate::sim::JobStatus, runner: Option<&str>) -> crate::sim::JobState {
        crate::sim::JobState {
            id,
            run_id: id,
            repo: "octo/app".into(),
            name: "build".into(),
            labels: vec![],
            duration_ms: 1,
            status,
            conclusion: None,
            runner_id: None,
            runner_name: runner.map(str::to_string),
            runner_group_id: None,
            created_at: 0,
            started_at: None,
            completed_at: None,
            script: None,
            output: None,
            renewed_at: None,
        }
    }

    fn attempt(id: i64, outcome: Option<crate::domain::Outcome>) -> crate::domain::Attempt {
        let mut a = crate::domain::Attempt::new(id, "linux", "demo", "h", 0);
        a.runner_name = format!("ours-{id}");
        a.outcome = outcome;
        a
    }

    #[test]
    fn an_interrupted_demo_summary_adds_up_and_says_what_each_figure_counts() {
        use crate::domain::Outcome;
        use crate::sim::JobStatus::*;
        // Quit mid-way: two jobs done, one running on our runner, one taken by a
        // runner not ours, one still queued; a third runner of ours ended idle.
        let jobs = [
            job(1, Completed, Some("ours-1")),
            job(2, Completed, Some("ours-2")),
            job(3, InProgress, Some("ours-3")),
            job(4, Completed, Some("someone-else")),
            job(5, Queued, None),
        ];
        let attempts = [
            attempt(1, Some(Outcome::CompletedJob)),
            attempt(2, Some(Outcome::CompletedJob)),
            attempt(3, None),
            attempt(4, Some(Outcome::ExitedIdleWithoutWork)),
        ];
        let t = Tally::of(&jobs, &attempts, vec![900, 300, 600], 40);
        assert_eq!(t.completed + t.running + t.waiting, t.jobs);
        assert_eq!(t.ours + t.others + t.waiting, t.jobs);
        assert_eq!(t.ran_a_job + t.live + t.ended_without_one, t.runners);
        assert_eq!(
            t.lines(),
            [
                "jobs              5 queued: 3 completed, 1 running, 1 still queued",
                "taken by          our runners 3, other runners 1",
                "our runners       4 started: 2 ran a job to its end, 1 still live, 1 ended without a job",
                "queue-to-spawn    median 600 ms, max 900 ms, over 3 runners spawned",
                "rate-limit units  40 spent, 13.3 per completed job",
            ]
        );
        assert_eq!(
            t.served(),
            Served {
                served: 3,
                queued: 5
            }
        );
        let none = Tally::of(&[], &[], vec![], 0);
        assert!(none.lines()[3].contains("no runner was spawned"));
        let one = Tally::of(&[], &[], vec![1734], 0);
        assert_eq!(
            one.lines()[3],
            "queue-to-spawn    1734 ms, the one runner spawned"
        );
        let many = Tally::of(&[], &[], (1..=100).collect(), 0);
        assert_eq!(
            many.lines()[3],
            "queue-to-spawn    p50 51 ms, p99 99 ms, over 100 runners spawned"
        );
    }

    #[test]
    fn every_job_served_is_success_and_fewer_is_a_failure_naming_them() {
        let all = Served {
            served: 5,
            queued: 5,
        };
        assert_eq!(all.verdict(), Ok(()));
        let some = Served {
            served: 2,
            queued: 5,
        };
        assert_eq!(
            some.verdict(),
            Err(DemoError::Failed("3 of 5 jobs left unserved".into()))
        );
        assert_eq!(
            some.interrupted(),
            DemoError::Interrupted("interrupted with 2 of 5 jobs served".into())
        );
    }
}
