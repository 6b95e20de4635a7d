//! The daily usage roll-up: what one ended attempt adds to its day's row (per
//! repository, workflow, job name and profile), and how rows add up. Pure arithmetic;
//! the store writes the rows as attempts end and keeps them past the attempts'
//! retention.
//!
//! Queue waits are kept as a histogram over fixed buckets ([`WAIT_BOUNDS_SECS`]), so
//! any days (and hosts) merge by adding counts, and p50/p95 are read off the merged
//! histogram (as the bucket's upper bound: an estimate no finer than the buckets).

use super::{Attempt, AttemptState, Outcome};
use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};

/// A day, as days since the Unix epoch (UTC).
pub type Day = i64;

pub const DAY_MS: Millis = 86_400_000;

/// The queue-wait buckets' upper bounds in seconds; one more bucket holds the rest.
pub const WAIT_BOUNDS_SECS: [u64; 12] = [1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600];
pub const WAIT_BUCKETS: usize = WAIT_BOUNDS_SECS.len() + 1;

/// The day `at` falls on (UTC).
pub fn day_of(at: Millis) -> Day {
    at.div_euclid(DAY_MS)
}

/// The oldest day a roll-up kept for `retention_secs` still holds at `now`.
pub fn first_kept_day(now: Millis, retention_secs: u64) -> Day {
    let keep = (retention_secs as Millis).saturating_mul(1000);
    day_of(now.saturating_sub(keep))
}

/// One roll-up row's key. An attempt whose job's owner is unknown (an idle runner
/// that took none, or a job no source named) has empty texts, shown as `-`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct UsageKey {
    pub day: Day,
    pub repo: String,
    pub workflow: String,
    pub job: String,
    pub profile: String,
}

/// Queue waits, counted per bucket. Read from a list leniently, as from the store's
/// text: a peer with fewer buckets leaves the rest 0, extra counts are dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<u64>")]
pub struct WaitHistogram(pub [u64; WAIT_BUCKETS]);

impl From<Vec<u64>> for WaitHistogram {
    fn from(counts: Vec<u64>) -> WaitHistogram {
        let mut h = WaitHistogram::default();
        for (slot, v) in h.0.iter_mut().zip(counts) {
            *slot = v;
        }
        h
    }
}

impl WaitHistogram {
    pub fn add_wait(&mut self, wait_ms: Millis) {
        let ms = wait_ms.max(0) as u64;
        let i = WAIT_BOUNDS_SECS
            .iter()
            .position(|b| ms <= b * 1000)
            .unwrap_or(WAIT_BOUNDS_SECS.len());
        self.0[i] += 1;
    }

    pub fn merge(&mut self, other: &WaitHistogram) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    pub fn count(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The wait (seconds) under which a share `q` (0..=1) of the jobs waited: the upper
    /// bound of the bucket that reaches it (the last bound for the open bucket).
    /// `None` with no waits.
    pub fn quantile_secs(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let want = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(WAIT_BOUNDS_SECS[i.min(WAIT_BOUNDS_SECS.len() - 1)]);
            }
        }
        None
    }

    /// As kept in the store: the counts, comma-separated.
    pub fn to_text(&self) -> String {
        self.0
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Read leniently: missing or unreadable counts are 0 (a row from a build with
    /// other buckets is never an error).
    pub fn from_text(s: &str) -> WaitHistogram {
        let mut h = WaitHistogram::default();
        for (slot, v) in h.0.iter_mut().zip(s.split(',')) {
            *slot = v.trim().parse().unwrap_or(0);
        }
        h
    }
}

/// What a row (or a sum of rows) holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageFigures {
    /// Runner lives that ended (with or without a job).
    pub runners: u64,
    /// Of them, those that took a job.
    pub jobs: u64,
    pub busy_ms: u64,
    pub idle_ms: u64,
    pub cpu_ms: u64,
    pub peak_rss_bytes: u64,
    /// Mean RSS times runner time: the memory held over time (GiB-seconds once
    /// divided); the rows' mean RSS is this over their runner time.
    pub rss_byte_secs: u64,
    pub wait: WaitHistogram,
    /// Jobs lost to the host (`domain::loss`), and jobs run again for it (0 until a
    /// lost job is run again).
    pub lost: u64,
    pub reruns: u64,
}

impl UsageFigures {
    pub fn merge(&mut self, o: &UsageFigures) {
        self.runners += o.runners;
        self.jobs += o.jobs;
        self.busy_ms += o.busy_ms;
        self.idle_ms += o.idle_ms;
        self.cpu_ms += o.cpu_ms;
        self.peak_rss_bytes = self.peak_rss_bytes.max(o.peak_rss_bytes);
        self.rss_byte_secs = self.rss_byte_secs.saturating_add(o.rss_byte_secs);
        self.wait.merge(&o.wait);
        self.lost += o.lost;
        self.reruns += o.reruns;
    }

    pub fn runner_ms(&self) -> u64 {
        self.busy_ms + self.idle_ms
    }

    /// The time-weighted mean RSS.
    pub fn mean_rss_bytes(&self) -> u64 {
        match self.runner_ms() / 1000 {
            0 => 0,
            secs => self.rss_byte_secs / secs,
        }
    }

    pub fn gib_secs(&self) -> f64 {
        self.rss_byte_secs as f64 / (1u64 << 30) as f64
    }

    pub fn cpu_secs(&self) -> f64 {
        self.cpu_ms as f64 / 1000.0
    }

    /// What the figures cost at these prices per CPU-hour and per GiB-hour.
    pub fn cost(&self, per_cpu_hour: f64, per_gib_hour: f64) -> f64 {
        self.cpu_secs() / 3600.0 * per_cpu_hour + self.gib_secs() / 3600.0 * per_gib_hour
    }
}

/// When the attempt took its job (its first `busy`), if it did.
fn took_job_at(a: &Attempt) -> Option<Millis> {
    a.history
        .iter()
        .find(|h| h.state == AttemptState::Busy)
        .map(|h| h.at)
}

/// Whether the attempt ran a job: it went busy, or its log said which job it ran.
pub fn took_a_job(a: &Attempt) -> bool {
    took_job_at(a).is_some() || a.job_name.is_some() || a.outcome == Some(Outcome::CompletedJob)
}

/// Whether the roll-up may take the attempt now: its life ended, and either its owner
/// is known, it took no job (no owner will ever come), or it is cleaned (no pass will
/// look for one again).
pub fn ready(a: &Attempt) -> bool {
    a.ended_at.is_some() && (a.owner.is_some() || !took_a_job(a) || a.cleaned)
}

/// What an ended attempt adds to its day's row; `None` while its life goes on.
/// Runner time is idle from the decision to start it until it took a job, busy from
/// then to its end; its queue wait runs from the job's queueing to that same moment.
pub fn contribution(a: &Attempt) -> Option<(UsageKey, UsageFigures)> {
    let end = a.ended_at?;
    let start = a.created_at.min(end);
    let took = took_job_at(a).map(|t| t.clamp(start, end));
    let (idle_ms, busy_ms) = match took {
        Some(t) => (t - start, end - t),
        None => (end - start, 0),
    };
    let owner = a.owner.as_ref();
    let mut wait = WaitHistogram::default();
    let queued = owner.and_then(|o| o.queued_at).or(a.job_queued_at);
    if let (Some(t), Some(q)) = (took, queued) {
        wait.add_wait(t - q);
    }
    let runner_secs = (end - start) as u64 / 1000;
    let key = UsageKey {
        day: day_of(end),
        repo: owner.map(|o| o.repo.clone()).unwrap_or_default(),
        workflow: owner.and_then(|o| o.workflow.clone()).unwrap_or_default(),
        job: owner
            .map(|o| o.job_name.clone())
            .or_else(|| a.job_name.clone())
            .unwrap_or_default(),
        profile: a.profile.clone(),
    };
    let figures = UsageFigures {
        runners: 1,
        jobs: took_a_job(a) as u64,
        busy_ms: busy_ms as u64,
        idle_ms: idle_ms as u64,
        cpu_ms: a.cpu_millis.unwrap_or(0),
        peak_rss_bytes: a.peak_rss_bytes.unwrap_or(0),
        rss_byte_secs: a.mean_rss_bytes.unwrap_or(0).saturating_mul(runner_secs),
        wait,
        lost: super::loss::loss(a).is_some() as u64,
        reruns: 0,
    };
    Some((key, figures))
}

/// A job no source named (a REST job that ended before a queue read saw it in
/// progress), run on a repository's target, was that repository's: the runner could
/// take no other's. `target_repo` is `owner/name` for such a target, else `None`.
pub fn attribute_to_target(key: &mut UsageKey, f: &UsageFigures, target_repo: Option<&str>) {
    if let (true, Some(repo)) = (key.repo.is_empty() && f.jobs > 0, target_repo) {
        key.repo = repo.to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job_owner::{JobOwner, OwnerSource};

    #[test]
    fn a_job_no_source_named_is_its_repository_targets() {
        let (mut key, f) = contribution(&ended_with_job()).unwrap();
        key.repo.clear();
        attribute_to_target(&mut key, &f, None);
        assert_eq!(key.repo, "", "an organization's target names no repository");
        attribute_to_target(&mut key, &f, Some("octo/app"));
        assert_eq!(key.repo, "octo/app");
        let idle = UsageFigures::default();
        let mut k = key.clone();
        k.repo.clear();
        attribute_to_target(&mut k, &idle, Some("octo/app"));
        assert_eq!(k.repo, "", "a runner that took no job is no one's");
    }

    fn ended_with_job() -> Attempt {
        let mut a = Attempt::new(1, "linux", "octo", "0123abcd89ef4567", 10_000);
        a.step(AttemptState::Starting, 11_000).unwrap();
        a.step(AttemptState::Idle, 12_000).unwrap();
        a.step(AttemptState::Busy, 20_000).unwrap();
        a.end(Outcome::CompletedJob, None, 80_000).unwrap();
        a.job_name = Some("build".into());
        a.cpu_millis = Some(45_000);
        a.peak_rss_bytes = Some(3 << 30);
        a.mean_rss_bytes = Some(1 << 30);
        a
    }

    #[test]
    fn an_attempt_adds_its_idle_busy_cpu_memory_and_wait() {
        let mut a = ended_with_job();
        a.owner = Some(JobOwner {
            repo: "octo/app".into(),
            workflow: Some("CI".into()),
            job_name: "build (linux)".into(),
            run_id: 5,
            run_attempt: Some(1),
            job_id: Some(50),
            queued_at: Some(5_000),
            source: OwnerSource::Rest,
        });
        let (k, f) = contribution(&a).unwrap();
        assert_eq!(
            (k.repo.as_str(), k.workflow.as_str(), k.job.as_str(), k.day),
            ("octo/app", "CI", "build (linux)", 0)
        );
        assert_eq!(
            (f.runners, f.jobs, f.idle_ms, f.busy_ms),
            (1, 1, 10_000, 60_000)
        );
        assert_eq!(f.cpu_ms, 45_000);
        assert_eq!(f.rss_byte_secs, 70 << 30, "1 GiB for 70 s");
        assert_eq!(f.mean_rss_bytes(), 1 << 30);
        assert_eq!(f.wait.quantile_secs(0.5), Some(20), "waited 15 s");
        assert!(ready(&a));
    }

    #[test]
    fn an_idle_runner_is_all_idle_and_ready_without_an_owner() {
        let mut a = Attempt::new(2, "linux", "octo", "0123abcd89ef4567", 0);
        a.step(AttemptState::Starting, 1_000).unwrap();
        assert!(contribution(&a).is_none() && !ready(&a));
        a.end(Outcome::ExitedIdleWithoutWork, None, 301_000)
            .unwrap();
        let (k, f) = contribution(&a).unwrap();
        assert_eq!(
            (k.repo.as_str(), f.jobs, f.idle_ms, f.busy_ms),
            ("", 0, 301_000, 0)
        );
        assert_eq!(f.wait.count(), 0);
        assert!(ready(&a));
    }

    #[test]
    fn a_job_waits_for_its_owner_until_cleaned() {
        let mut a = ended_with_job();
        assert!(!ready(&a));
        a.mark_cleaned(90_000);
        assert!(ready(&a));
        let (k, _) = contribution(&a).unwrap();
        assert_eq!(
            (k.repo.as_str(), k.job.as_str()),
            ("", "build"),
            "the log's job name"
        );
    }

    #[test]
    fn histograms_merge_and_read_quantiles() {
        let mut h = WaitHistogram::default();
        for ms in [
            0, 500, 1_000, 3_000, 3_000, 4_000, 7_000, 9_000, 50_000, 7_200_000,
        ] {
            h.add_wait(ms);
        }
        assert_eq!(h.0[..4], [3, 0, 3, 2]);
        assert_eq!(h.quantile_secs(0.5), Some(5));
        assert_eq!(
            h.quantile_secs(0.95),
            Some(3600),
            "the open bucket reads as its floor"
        );
        let mut sum = WaitHistogram::from_text(&h.to_text());
        assert_eq!(sum, h);
        sum.merge(&h);
        assert_eq!(sum.count(), 20);
        assert_eq!(sum.quantile_secs(0.5), Some(5));
        assert_eq!(WaitHistogram::from_text("1,x").0[..2], [1, 0]);
        assert_eq!(WaitHistogram::default().quantile_secs(0.5), None);
    }

    #[test]
    fn figures_add_up_and_cost() {
        let mut f = UsageFigures {
            cpu_ms: 3_600_000,
            rss_byte_secs: 3600 << 30,
            busy_ms: 1_000,
            peak_rss_bytes: 5,
            ..Default::default()
        };
        let g = UsageFigures {
            peak_rss_bytes: 9,
            busy_ms: 2_000,
            ..Default::default()
        };
        f.merge(&g);
        assert_eq!((f.busy_ms, f.peak_rss_bytes), (3_000, 9));
        assert!((f.cost(0.5, 0.25) - 0.75).abs() < 1e-9);
        assert_eq!(day_of(-1), -1);
        assert_eq!(first_kept_day(400 * DAY_MS + 5, 400 * 86_400), 0);
    }
}
