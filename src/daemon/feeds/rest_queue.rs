//! A target's REST queue as the loop knows it: the queued jobs run by run as a demand
//! read brings them (so a burst's first jobs are served while the rest is read), when
//! it was read, what an organization's visibility rules left out, and the attempts that
//! took a job since the read (whose job the queue may still list). No I/O: the loop
//! sends the reads and hands their results here.

use crate::domain::{Attempt, QueuedJob, ScalePolicy};
use crate::github::QueueRead;
use crate::github::hooks::HookBook;
use crate::github::visibility::OrgRepos;
use crate::reconcile::demand;
use crate::timefmt::Millis;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct RestQueue {
    /// The queued jobs, run by run (a run read with none queued has an empty entry):
    /// a read in progress replaces each run's as it comes, and its end drops the runs
    /// no longer listed. A run the read did not read again keeps what an earlier one
    /// saw (see `GitHubClient::read_queue`).
    runs: BTreeMap<i64, Vec<QueuedJob>>,
    /// The jobs a profile may serve, from `runs`.
    pub jobs: Vec<QueuedJob>,
    /// When the queue in `jobs` was last read (when the read began).
    pub read_at: Millis,
    /// When the last read that read every listed run began: what `jobs` may still
    /// list of the attempts that ended is judged against it.
    whole_at: Millis,
    /// A read is on a worker (it holds `repos` meanwhile).
    pub reading: bool,
    repos: Option<OrgRepos>,
    /// Attempts that took a job after `read_at` and have ended (cleaned ones
    /// included): `jobs` may still list their job as queued, so demand must not count
    /// it again. Emptied as fresher queues are read.
    ended_since_read: BTreeMap<i64, Attempt>,
    /// What the last read left out for visibility, for `status`.
    pub visibility_note: Option<String>,
    /// An organization's public repositories the last read did not poll.
    not_polled: u32,
    /// Runs the last read left unread (a deep queue is read as room frees up).
    pub unread_runs: u32,
    /// The webhook book's version this queue has heard up to (`hear`).
    heard_up_to: u64,
    /// When a delivery last told of one of its runs (the book's last delivery when
    /// `hear` found news), for `HookBook::steady`.
    pub heard_at: Option<Millis>,
}

/// When the attempt took its job (entered `busy`; its last change if it never did).
pub fn took_job_at(a: &Attempt) -> Millis {
    crate::reconcile::watch::entered_at(a, crate::domain::AttemptState::Busy)
}

/// What the queue is judged against: an organization's profiles (a repository's jobs
/// are all its own), whose `allow_public` decides what of a public repository counts.
pub enum Scope<'a> {
    Repo,
    Org(&'a [ScalePolicy]),
}

impl RestQueue {
    /// Starts a read: the organization's repositories as last known go with it.
    pub fn begin_read(&mut self) -> OrgRepos {
        self.reading = true;
        self.repos.take().unwrap_or_default()
    }

    /// A read ended (whole or not): its repositories come back.
    pub fn end_read(&mut self, repos: OrgRepos) {
        self.reading = false;
        self.repos = Some(repos);
    }

    /// One run's jobs, while a read goes on.
    pub fn take_run(&mut self, run: i64, jobs: Vec<QueuedJob>, scope: Scope) {
        self.runs.insert(run, jobs);
        self.rebuild(scope);
    }

    /// A read came back: the runs it read get its jobs, the runs no longer listed go,
    /// and the rest keep what earlier reads saw. Only a whole read (every listed run
    /// read again) moves the time attempts that ended are judged against.
    /// `not_polled`: an organization's public repositories the read left out.
    pub fn take_read(&mut self, read: QueueRead, not_polled: u32, read_at: Millis, scope: Scope) {
        let whole = read.whole();
        let listed: std::collections::BTreeSet<i64> = read.listed.into_iter().collect();
        self.runs.retain(|run, _| listed.contains(run));
        for run in read.read_runs {
            self.runs.insert(run, Vec::new());
        }
        for j in read.jobs {
            self.runs.entry(j.run_id).or_default().push(j);
        }
        self.not_polled = not_polled;
        self.unread_runs = read.unread_runs;
        self.rebuild(scope);
        self.read_at = read_at;
        if whole {
            self.forget_ended_before(read_at);
        }
    }

    /// What webhook deliveries said since the queue last heard, for the runs of
    /// repositories `wanted`: a queued job joins the queue at once (a delivery starts
    /// its runner without waiting for a poll), and a job a delivery took past `queued`
    /// leaves it (its hold on capacity ends). The REST reads stay the truth: the next
    /// one replaces what it reads.
    pub fn hear(&mut self, book: &HookBook, wanted: impl Fn(&str) -> bool, scope: Scope) {
        let (version, heard) = book.heard_since(self.heard_up_to, wanted);
        self.heard_up_to = version;
        if heard.is_empty() {
            return;
        }
        self.heard_at = book.last_delivery;
        for h in heard {
            let jobs = self.runs.entry(h.run).or_default();
            jobs.retain(|j| !h.gone.contains(&j.id));
            for q in h.queued {
                if !jobs.iter().any(|j| j.id == q.id) {
                    jobs.push(q);
                }
            }
        }
        self.rebuild(scope);
    }

    /// The runs the queue holds a view of (sorted), read whole or in part before.
    pub fn held_runs(&self) -> Vec<i64> {
        self.runs.keys().copied().collect()
    }

    /// Nothing to read (the coordinator reads for the pool, or only scale sets serve
    /// the target): the queue is empty as of `now`.
    pub fn empty_at(&mut self, now: Millis) {
        self.jobs.clear();
        self.runs.clear();
        self.read_at = now;
        self.forget_ended_before(now);
    }

    /// An attempt the loop acted on: if it ended after taking a job since the read,
    /// its job must not count again while the queue still lists it.
    pub fn note(&mut self, a: &Attempt) {
        if !a.state.is_live() && a.job_name.is_some() && took_job_at(a) >= self.whole_at {
            self.ended_since_read.insert(a.id, a.clone());
        }
    }

    /// The attempts that took a job since the read and have ended.
    pub fn ended_since_read(&self) -> Vec<Attempt> {
        self.ended_since_read.values().cloned().collect()
    }

    fn forget_ended_before(&mut self, at: Millis) {
        self.whole_at = at;
        self.ended_since_read.retain(|_, a| took_job_at(a) >= at);
    }

    /// The queue from its runs (an organization's jobs judged one by one for
    /// visibility).
    fn rebuild(&mut self, scope: Scope) {
        let jobs: Vec<QueuedJob> = self.runs.values().flatten().cloned().collect();
        let Scope::Org(profiles) = scope else {
            self.jobs = jobs;
            return;
        };
        let repos = self.repos.as_ref();
        let v = demand::serveable(&jobs, profiles, |r| repos.and_then(|o| o.public(r)));
        let not_polled = self.not_polled;
        self.visibility_note = v.reason().or_else(|| {
            (not_polled > 0).then(|| {
                format!(
                    "{not_polled} public repositories of the organization not polled: a \
                     fork's pull request would run on this host; set allow_public=true \
                     on a profile only if you mean it"
                )
            })
        });
        self.jobs = v.jobs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::AttemptState;

    fn job(id: i64, run: i64) -> QueuedJob {
        QueuedJob {
            id,
            run_id: run,
            repo: "octo/app".into(),
            name: "build".into(),
            labels: vec![],
            created_at: 0,
        }
    }

    /// A read that read every run it listed (the runs of `jobs`, and `empty`).
    fn whole(jobs: Vec<QueuedJob>, empty: &[i64]) -> QueueRead {
        let mut runs: Vec<i64> = jobs.iter().map(|j| j.run_id).collect();
        runs.extend_from_slice(empty);
        runs.sort_unstable();
        runs.dedup();
        QueueRead {
            jobs,
            listed: runs.clone(),
            read_runs: runs,
            ..QueueRead::default()
        }
    }

    fn ids(q: &RestQueue) -> Vec<i64> {
        q.jobs.iter().map(|j| j.id).collect()
    }

    #[test]
    fn runs_join_the_queue_as_they_come_and_the_whole_read_replaces_them() {
        let mut q = RestQueue::default();
        let repos = q.begin_read();
        assert!(q.reading);
        q.take_run(10, vec![job(1, 10), job(2, 10)], Scope::Repo);
        assert_eq!(
            q.jobs.len(),
            2,
            "the first run is served before the read ends"
        );
        q.take_run(11, vec![job(3, 11)], Scope::Repo);
        assert_eq!(q.jobs.len(), 3);
        // The whole read says run 10 is gone.
        q.take_read(whole(vec![job(3, 11)], &[]), 0, 500, Scope::Repo);
        q.end_read(repos);
        assert!(!q.reading);
        assert_eq!(ids(&q), vec![3]);
        assert_eq!(q.read_at, 500);
        assert_eq!(q.held_runs(), vec![11]);
    }

    #[test]
    fn a_read_in_part_keeps_the_runs_it_did_not_read_and_drops_the_unlisted() {
        let mut q = RestQueue::default();
        q.take_read(
            whole(vec![job(1, 10), job(2, 11), job(3, 12)], &[13]),
            0,
            100,
            Scope::Repo,
        );
        assert_eq!(q.held_runs(), vec![10, 11, 12, 13]);
        // Run 10 is done (not listed), 11 was read again (its job taken), 12's read
        // failed or was past the cap, 13 was read and has a new job.
        let part = QueueRead {
            jobs: vec![job(4, 13)],
            listed: vec![11, 12, 13],
            read_runs: vec![11, 13],
            stale_runs: 1,
            ..QueueRead::default()
        };
        q.take_read(part, 0, 200, Scope::Repo);
        assert_eq!(ids(&q), vec![3, 4], "12 keeps its earlier view");
        assert_eq!(q.held_runs(), vec![11, 12, 13]);
        assert_eq!(q.read_at, 200);
    }

    #[test]
    fn an_ended_attempt_counts_until_a_whole_read_after_its_job_began() {
        let mut q = RestQueue::default();
        q.take_read(whole(vec![job(1, 10)], &[]), 0, 100, Scope::Repo);
        let mut a = Attempt::new(7, "linux", "t", "h", 50);
        a.job_name = Some("build".into());
        a.updated_at = 200;
        a.state = AttemptState::Destroying;
        q.note(&a);
        assert_eq!(q.ended_since_read().len(), 1);
        // A read begun before the job started may still list it.
        q.take_read(whole(vec![job(1, 10)], &[]), 0, 150, Scope::Repo);
        assert_eq!(q.ended_since_read().len(), 1);
        // A read in part begun after it may still hold a stale view of its run.
        let part = QueueRead {
            listed: vec![10],
            stale_runs: 1,
            ..QueueRead::default()
        };
        q.take_read(part, 0, 250, Scope::Repo);
        assert_eq!(q.ended_since_read().len(), 1);
        // A whole one begun after it does not: the attempt no longer needs counting.
        q.take_read(whole(vec![], &[]), 0, 260, Scope::Repo);
        assert!(q.ended_since_read().is_empty());
        // A live attempt, or one that took no job, is never noted.
        let mut live = Attempt::new(8, "linux", "t", "h", 300);
        live.job_name = Some("x".into());
        live.updated_at = 300;
        live.state = AttemptState::Busy;
        q.note(&live);
        assert!(q.ended_since_read().is_empty());
        q.empty_at(400);
        assert!(q.jobs.is_empty() && q.read_at == 400);
    }

    /// Queued jobs counted toward the profile, as the plan counts them: our live
    /// attempts and those the queue says ended since it was read take theirs out.
    fn demand(q: &RestQueue, live: &[&Attempt]) -> u32 {
        let mut profile = crate::domain::ScalePolicy::new("linux", "t", "h");
        profile.labels = vec!["self-hosted".into()];
        let jobs: Vec<QueuedJob> = q
            .jobs
            .iter()
            .map(|j| QueuedJob {
                labels: profile.labels.clone(),
                ..j.clone()
            })
            .collect();
        let mut ours: Vec<Attempt> = live.iter().map(|a| (*a).clone()).collect();
        ours.extend(q.ended_since_read());
        demand::assign(&[profile.clone()], &jobs, &ours).queued(&profile.name)
    }

    #[test]
    fn reads_capped_while_nothing_can_start_never_count_a_taken_job_twice() {
        // Three runs of one job each, all named alike (a burst of one workflow).
        let mut q = RestQueue::default();
        q.take_read(
            whole(vec![job(1, 10), job(2, 11), job(3, 12)], &[]),
            0,
            100,
            Scope::Repo,
        );
        // Our runner took job 1 (its log names the job, GitHub has not said which).
        let mut a = Attempt::new(7, "linux", "t", "h", 150);
        a.job_name = Some("build".into());
        a.state = AttemptState::Busy;
        a.updated_at = 200;
        assert_eq!(demand(&q, &[&a]), 2);
        // No start can go (the minute's JIT points spent): the next reads re-read the
        // oldest runs only, and their cap left run 10 out (its read failed, or older
        // runs filled it): its view still lists job 1 as queued.
        let capped = |read_runs: Vec<i64>| QueueRead {
            jobs: read_runs
                .iter()
                .filter(|r| **r != 10)
                .map(|r| job(*r - 9, *r))
                .collect(),
            listed: vec![10, 11, 12],
            stale_runs: 3 - read_runs.len() as u32,
            read_runs,
            ..QueueRead::default()
        };
        q.take_read(capped(vec![11]), 0, 300, Scope::Repo);
        assert_eq!(ids(&q), vec![1, 2, 3]);
        assert_eq!(demand(&q, &[&a]), 2, "the busy runner takes its job out");
        // Its job done, the attempt ends before any read saw run 10 again.
        a.state = AttemptState::Destroying;
        a.updated_at = 2_300;
        q.note(&a);
        q.take_read(capped(vec![]), 0, 2_400, Scope::Repo);
        assert_eq!(ids(&q), vec![1, 2, 3], "still the stale view");
        assert_eq!(demand(&q, &[]), 2, "the ended attempt still takes it out");
        // Room again: the read is whole, run 10 shows its job taken, and the ended
        // attempt counts no more.
        q.take_read(capped(vec![10, 11, 12]), 0, 4_400, Scope::Repo);
        assert_eq!(ids(&q), vec![2, 3]);
        assert!(q.ended_since_read().is_empty());
        assert_eq!(demand(&q, &[]), 2);
    }

    #[test]
    fn a_delivery_joins_the_queue_at_once_and_a_taken_job_leaves_it() {
        use crate::github::hooks::{HookBook, HookJob, HookStatus};
        let hook = |id: i64, run: i64, status: HookStatus| HookJob {
            id,
            run_id: run,
            repo: "octo/app".into(),
            name: "build".into(),
            labels: vec![],
            status,
            created_at: 0,
            workflow: None,
            run_attempt: None,
            runner_name: None,
        };
        let mut q = RestQueue::default();
        q.take_read(whole(vec![job(1, 10)], &[]), 0, 100, Scope::Repo);
        let mut book = HookBook::default();
        book.record(hook(2, 11, HookStatus::Queued), 150);
        book.record(hook(3, 12, HookStatus::Queued), 150);
        q.hear(&book, |r| r == "octo/app", Scope::Repo);
        assert_eq!(ids(&q), vec![1, 2, 3], "no poll needed");
        // Heard again with nothing new: unchanged; the REST job of run 10 stays.
        q.hear(&book, |r| r == "octo/app", Scope::Repo);
        assert_eq!(ids(&q), vec![1, 2, 3]);
        // Job 2 taken, job 1 (which the book never heard of queued) done.
        book.record(hook(2, 11, HookStatus::InProgress), 160);
        book.record(hook(1, 10, HookStatus::Completed), 160);
        q.hear(&book, |r| r == "octo/app", Scope::Repo);
        assert_eq!(ids(&q), vec![3]);
        // Another repository's deliveries are not this queue's.
        let mut other = hook(4, 13, HookStatus::Queued);
        other.repo = "octo/other".into();
        book.record(other, 170);
        q.hear(&book, |r| r == "octo/app", Scope::Repo);
        assert_eq!(ids(&q), vec![3]);
    }
}
