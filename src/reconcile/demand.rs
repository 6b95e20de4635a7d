//! Demand: which profile each queued job counts toward. A job counts toward exactly
//! one profile (the most specific fit), so two profiles never both start a runner
//! for it; jobs no profile fits are kept so `status` can say why they wait.
//!
//! How jobs our runners already serve are taken out: GitHub keeps a job `queued`
//! until a runner picks it up, and our poll (cached, conditional) can show it queued
//! a little longer than that. A queued job is dropped from demand when one of our
//! attempts has left the unassigned states with it:
//!
//! - an attempt that is `busy` or ended and whose `job_id` is the job's id, or
//! - a `busy` attempt whose job id we do not know but whose `job_name` (the display
//!   name the runner printed in `Running job:`) equals the job's name; each such
//!   attempt takes at most one queued job, and only among the jobs its profile fits.
//!
//! Unassigned attempts (`pending`, `starting`, `idle`) are not subtracted here even
//! when they carry a `job_id` (a coordinator launch): the allocator subtracts every
//! unassigned runner from demand, and doing it here as well would count it twice.
//! A job already `in_progress` on GitHub is not listed as queued, so it is no demand.

use crate::domain::labels;
use crate::domain::{Attempt, QueuedJob, ScalePolicy};
use std::collections::{BTreeMap, BTreeSet};

/// The queued jobs counted toward one profile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProfileDemand {
    pub profile: String,
    /// GitHub job ids, in the order the jobs were given.
    pub jobs: Vec<i64>,
}

impl ProfileDemand {
    pub fn queued(&self) -> u32 {
        self.jobs.len() as u32
    }
}

/// A queued job that no active profile fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfitJob {
    pub id: i64,
    pub name: String,
    pub labels: Vec<String>,
    /// A paused profile that would take it (the same rule as [`best_profile`]): the
    /// job waits because that profile is paused, not because nothing fits.
    pub paused: Option<String>,
}

/// Every queued job of a pass, assigned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Demand {
    /// One entry per active profile given, sorted by profile name, jobs or not.
    pub profiles: Vec<ProfileDemand>,
    /// Jobs no active profile fits.
    pub unfit: Vec<UnfitJob>,
    /// Jobs left out because one of our attempts already serves them.
    pub taken: Vec<i64>,
}

impl Demand {
    /// Queued jobs counted toward `profile` (0 for a profile not given).
    pub fn queued(&self, profile: &str) -> u32 {
        self.profiles
            .iter()
            .find(|p| p.profile == profile)
            .map_or(0, |p| p.queued())
    }

    /// Queued jobs per profile: the shape [`super::allocate`] takes.
    pub fn counts(&self) -> BTreeMap<String, u32> {
        self.profiles
            .iter()
            .map(|p| (p.profile.clone(), p.queued()))
            .collect()
    }

    /// One line per distinct label set nobody fits, e.g.
    /// `no profile fits labels [self-hosted, gpu] (2 jobs)`, or, when a paused
    /// profile would take them, `paused: 2 jobs wait (profile resume gpu)`.
    pub fn unfit_reasons(&self) -> Vec<String> {
        self.grouped_unfit()
            .into_iter()
            .map(|(_, reason)| reason)
            .collect()
    }

    /// What to show as the last error of `profile`: why its jobs wait if it is a
    /// paused profile they would go to, else the first label set nobody fits (jobs
    /// that wait for another paused profile are that profile's to explain).
    pub fn unfit_reason_for(&self, profile: &str) -> Option<String> {
        let grouped = self.grouped_unfit();
        grouped
            .iter()
            .find(|(paused, _)| paused.as_deref() == Some(profile))
            .or_else(|| grouped.iter().find(|(paused, _)| paused.is_none()))
            .map(|(_, reason)| reason.clone())
    }

    fn grouped_unfit(&self) -> Vec<(Option<String>, String)> {
        let mut by_labels: BTreeMap<(&Option<String>, &Vec<String>), u32> = BTreeMap::new();
        for j in &self.unfit {
            *by_labels.entry((&j.paused, &j.labels)).or_default() += 1;
        }
        by_labels
            .into_iter()
            .map(|((paused, l), n)| {
                let reason = match paused {
                    Some(p) => {
                        let wait = if n == 1 {
                            "1 job waits".to_string()
                        } else {
                            format!("{n} jobs wait")
                        };
                        format!("paused: {wait} (profile resume {p})")
                    }
                    None => {
                        let jobs = if n == 1 { "job" } else { "jobs" };
                        format!("no profile fits labels [{}] ({n} {jobs})", l.join(", "))
                    }
                };
                (paused.clone(), reason)
            })
            .collect()
    }
}

/// The profile a job counts toward: among the active profiles whose labels carry
/// every job label, the one with the fewest extra labels, then the smallest name.
pub fn best_profile<'a>(job: &QueuedJob, profiles: &'a [ScalePolicy]) -> Option<&'a ScalePolicy> {
    best_fit(job, profiles.iter().filter(|p| p.active))
}

/// Among `profiles`, the one whose labels carry every job label with the fewest
/// extra labels, then the smallest name.
fn best_fit<'a>(
    job: &QueuedJob,
    profiles: impl Iterator<Item = &'a ScalePolicy>,
) -> Option<&'a ScalePolicy> {
    profiles
        .filter(|p| labels::job_fits(&job.labels, &p.labels))
        .min_by(|a, b| {
            let ka = (labels::extra_labels(&job.labels, &a.labels), &a.name);
            let kb = (labels::extra_labels(&job.labels, &b.labels), &b.name);
            ka.cmp(&kb)
        })
}

/// What [`serveable`] kept and why it left the rest out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Visible {
    pub jobs: Vec<QueuedJob>,
    /// Jobs of public repositories whose profile does not say `allow_public=true`.
    pub public_skipped: u32,
    /// Jobs of repositories whose visibility is not known yet (treated as public).
    pub unknown_skipped: u32,
}

/// The jobs this host may serve: a job of a public repository (or one whose
/// visibility is not known yet) is left out unless the profile it would count toward
/// says `allow_public=true`. A fork's pull request runs on whatever serves the
/// repository's jobs, so a public repository is never served by accident.
/// `public(repo)` is `Some(true)` for a public repository, `None` when unknown.
pub fn serveable(
    jobs: &[QueuedJob],
    profiles: &[ScalePolicy],
    public: impl Fn(&str) -> Option<bool>,
) -> Visible {
    let mut out = Visible::default();
    for j in jobs {
        let allowed = best_profile(j, profiles).is_some_and(|p| p.allow_public);
        match public(&j.repo) {
            Some(false) => out.jobs.push(j.clone()),
            _ if allowed => out.jobs.push(j.clone()),
            Some(true) => out.public_skipped += 1,
            None => out.unknown_skipped += 1,
        }
    }
    out
}

impl Visible {
    /// The line `status` shows for what was left out, if anything was.
    pub fn reason(&self) -> Option<String> {
        match (self.public_skipped, self.unknown_skipped) {
            (0, 0) => None,
            (p, 0) => Some(format!(
                "{} of public repositories not served: a fork's pull request would run on \
                 this host; set allow_public=true on the profile only if you mean it",
                crate::units::count(p, "queued job")
            )),
            (p, u) => Some(format!(
                "{} not served: {p} of public repositories, {u} of repositories whose \
                 visibility is not known yet",
                crate::units::count(p + u, "queued job")
            )),
        }
    }
}

/// Assigns queued jobs to profiles. `profiles` are the profiles the jobs may go to
/// (this host's or the whole pool's: the caller decides); paused ones are skipped, so
/// a job the paused profile would have taken goes to the next best fit, or waits as
/// unfit. Monitor profiles take jobs like any other (they show demand, start nothing).
/// `attempts` are our attempts, any state.
pub fn assign(profiles: &[ScalePolicy], jobs: &[QueuedJob], attempts: &[Attempt]) -> Demand {
    let mut out = Demand {
        profiles: profiles
            .iter()
            .filter(|p| p.active)
            .map(|p| ProfileDemand {
                profile: p.name.clone(),
                jobs: Vec::new(),
            })
            .collect(),
        ..Demand::default()
    };
    out.profiles.sort_by(|a, b| a.profile.cmp(&b.profile));
    out.profiles.dedup_by(|a, b| a.profile == b.profile);

    let served_ids: BTreeSet<i64> = attempts
        .iter()
        .filter(|a| !a.state.is_unassigned())
        .filter_map(|a| a.job_id)
        .collect();
    // Attempts known only by the job's display name: each may take one job. Ended
    // ones count too: the queue the caller read may predate their job (a poll
    // interval is longer than a short job); the caller passes ended attempts only
    // while its queue is that stale.
    let mut by_name: Vec<(&str, &str)> = attempts
        .iter()
        .filter(|a| !a.state.is_unassigned() && a.job_id.is_none())
        .filter_map(|a| Some((a.profile.as_str(), a.job_name.as_deref()?)))
        .collect();

    for job in jobs {
        if served_ids.contains(&job.id) {
            out.taken.push(job.id);
            continue;
        }
        let Some(best) = best_profile(job, profiles) else {
            out.unfit.push(UnfitJob {
                id: job.id,
                name: job.name.clone(),
                labels: job.labels.clone(),
                paused: best_fit(job, profiles.iter().filter(|p| !p.active))
                    .map(|p| p.name.clone()),
            });
            continue;
        };
        let fits_attempt = |profile: &str| {
            profiles
                .iter()
                .find(|p| p.name == profile)
                .is_some_and(|p| labels::job_fits(&job.labels, &p.labels))
        };
        if let Some(i) = by_name
            .iter()
            .position(|(profile, name)| *name == job.name && fits_attempt(profile))
        {
            by_name.swap_remove(i);
            out.taken.push(job.id);
            continue;
        }
        if let Some(pd) = out.profiles.iter_mut().find(|p| p.profile == best.name) {
            pd.jobs.push(job.id);
        }
    }
    out
}

/// Whether a demand read reads a repository's queue: a repository target's always;
/// an organization's only when it is known private, or some profile may serve public
/// repositories (`allow_public`), since their jobs would be left out anyway.
pub fn polls_repository(org: bool, any_public: bool, public: Option<bool>) -> bool {
    !org || any_public || public == Some(false)
}

#[cfg(test)]
mod visibility_tests {
    use super::*;

    #[test]
    fn an_organization_reads_a_public_or_unknown_repository_only_if_a_profile_may_serve_it() {
        for public in [None, Some(true), Some(false)] {
            assert!(
                polls_repository(false, false, public),
                "a repository target"
            );
            assert!(polls_repository(true, true, public), "allow_public");
        }
        assert!(polls_repository(true, false, Some(false)));
        assert!(!polls_repository(true, false, Some(true)));
        assert!(!polls_repository(true, false, None));
    }

    fn job(id: i64, repo: &str, labels: &[&str]) -> QueuedJob {
        QueuedJob {
            id,
            run_id: id,
            repo: repo.into(),
            name: format!("j{id}"),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            created_at: 0,
        }
    }

    fn profile(name: &str, labels: &[&str], allow_public: bool) -> ScalePolicy {
        let mut p = ScalePolicy::new(name, "t", "h");
        p.labels = labels.iter().map(|l| l.to_string()).collect();
        p.allow_public = allow_public;
        p
    }

    #[test]
    fn public_repositories_are_served_only_where_a_profile_allows_it() {
        let profiles = [
            profile("linux", &["self-hosted", "linux"], false),
            profile("oss", &["self-hosted", "oss"], true),
        ];
        let jobs = [
            job(1, "o/private", &["self-hosted", "linux"]),
            job(2, "o/public", &["self-hosted", "linux"]),
            job(3, "o/public", &["self-hosted", "oss"]),
            job(4, "o/unknown", &["self-hosted", "linux"]),
            job(5, "o/unknown", &["self-hosted", "oss"]),
        ];
        let public = |r: &str| match r {
            "o/private" => Some(false),
            "o/public" => Some(true),
            _ => None,
        };
        let v = serveable(&jobs, &profiles, public);
        let ids: Vec<i64> = v.jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![1, 3, 5]);
        assert_eq!((v.public_skipped, v.unknown_skipped), (1, 1));
        assert!(v.reason().unwrap().contains("1 of public repositories"));
        let none = serveable(&jobs[..1], &profiles, public);
        assert_eq!(none.reason(), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::AttemptState;
    use crate::domain::profile::Mode;

    const HOST: &str = "0123abcd89ef4567";

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn prof(name: &str, labels: &[&str]) -> ScalePolicy {
        let mut p = ScalePolicy::new(name, "octo", HOST);
        p.labels = v(labels);
        p.max_capacity = 4;
        p
    }

    fn job(id: i64, name: &str, labels: &[&str]) -> QueuedJob {
        QueuedJob {
            id,
            run_id: 1,
            repo: "o/r".into(),
            name: name.into(),
            labels: v(labels),
            created_at: 0,
        }
    }

    fn profiles() -> Vec<ScalePolicy> {
        vec![
            prof("linux", &["self-hosted", "Linux", "X64"]),
            prof("gpu", &["self-hosted", "Linux", "X64", "gpu"]),
            prof("gpu2", &["self-hosted", "Linux", "X64", "gpu"]),
            prof("big", &["self-hosted", "Linux", "X64", "gpu", "big"]),
        ]
    }

    /// Which profile one job with these labels goes to (`None` = unfit).
    #[track_caller]
    fn check(labels: &[&str], want: Option<&str>) {
        let ps = profiles();
        let j = job(1, "j", labels);
        assert_eq!(
            best_profile(&j, &ps).map(|p| p.name.as_str()),
            want,
            "{labels:?}"
        );
        let d = assign(&ps, &[j], &[]);
        match want {
            Some(p) => assert_eq!(d.queued(p), 1),
            None => assert_eq!(d.unfit.len(), 1),
        }
        assert_eq!(d.counts().values().sum::<u32>() + d.unfit.len() as u32, 1);
    }

    #[test]
    fn most_specific_profile_then_name() {
        check(&["self-hosted"], Some("linux"));
        check(&["self-hosted", "linux"], Some("linux"));
        check(&["GPU"], Some("gpu")); // gpu and gpu2 tie on extra labels: name decides
        check(&["gpu", "big"], Some("big"));
        check(&["gpu", "arm64"], None);
        check(&[], None);
    }

    #[test]
    fn paused_profiles_pass_their_jobs_on_and_monitor_profiles_keep_them() {
        let mut ps = profiles();
        ps[1].active = false; // gpu paused: gpu2 is next
        let d = assign(&ps, &[job(1, "j", &["gpu"])], &[]);
        assert_eq!((d.queued("gpu"), d.queued("gpu2")), (0, 1));
        assert!(d.profiles.iter().all(|p| p.profile != "gpu"));
        ps[2].mode = Mode::Monitor;
        let d = assign(&ps, &[job(1, "j", &["gpu"])], &[]);
        assert_eq!(d.queued("gpu2"), 1);
        ps[2].active = false;
        let d = assign(&ps, &[job(1, "j", &["gpu"])], &[]);
        assert_eq!(d.queued("big"), 1, "the least specific remaining fit");
    }

    #[test]
    fn jobs_a_paused_profile_would_take_say_it_is_paused() {
        let mut ps = vec![
            prof("linux", &["self-hosted", "Linux", "X64"]),
            prof("mac", &["self-hosted", "macOS", "ARM64"]),
        ];
        ps[0].active = false;
        let jobs = vec![
            job(1, "a", &["self-hosted", "linux"]),
            job(2, "b", &["self-hosted", "linux"]),
            job(3, "c", &["riscv"]),
        ];
        let d = assign(&ps, &jobs, &[]);
        assert_eq!(
            d.unfit_reasons(),
            vec![
                "no profile fits labels [riscv] (1 job)",
                "paused: 2 jobs wait (profile resume linux)",
            ]
        );
        assert_eq!(
            d.unfit_reason_for("linux").as_deref(),
            Some("paused: 2 jobs wait (profile resume linux)")
        );
        assert_eq!(
            d.unfit_reason_for("mac").as_deref(),
            Some("no profile fits labels [riscv] (1 job)"),
            "another profile's pause is not this one's error"
        );
        let d = assign(&ps, &jobs[..1], &[]);
        assert_eq!(d.unfit_reason_for("mac"), None);
        assert_eq!(
            d.unfit_reason_for("linux").as_deref(),
            Some("paused: 1 job waits (profile resume linux)")
        );
    }

    #[test]
    fn every_job_counts_once_and_unfit_jobs_are_explained() {
        let jobs = vec![
            job(1, "a", &["self-hosted"]),
            job(2, "b", &["gpu"]),
            job(3, "c", &["gpu"]),
            job(4, "d", &["arm64"]),
            job(5, "e", &["arm64"]),
            job(6, "f", &["macOS"]),
        ];
        let d = assign(&profiles(), &jobs, &[]);
        assert_eq!(d.queued("linux"), 1);
        assert_eq!(d.queued("gpu"), 2);
        assert_eq!(d.queued("gpu2") + d.queued("big"), 0);
        assert_eq!(
            d.unfit_reasons(),
            vec![
                "no profile fits labels [arm64] (2 jobs)",
                "no profile fits labels [macOS] (1 job)"
            ]
        );
        assert_eq!(
            d.profiles
                .iter()
                .map(|p| p.profile.as_str())
                .collect::<Vec<_>>(),
            vec!["big", "gpu", "gpu2", "linux"]
        );
    }

    fn attempt(id: i64, profile: &str, state: AttemptState) -> Attempt {
        let mut a = Attempt::new(id, profile, "octo", HOST, 0);
        a.state = state;
        a
    }

    #[test]
    fn jobs_our_runners_serve_are_not_demand() {
        let jobs = vec![
            job(1, "build", &["gpu"]),
            job(2, "build", &["gpu"]),
            job(3, "test", &["gpu"]),
            job(4, "lint", &["gpu"]),
        ];
        let mut by_id = attempt(1, "gpu", AttemptState::Busy);
        by_id.job_id = Some(3);
        let mut by_name = attempt(2, "gpu", AttemptState::Busy);
        by_name.job_name = Some("build".into());
        let mut done = attempt(3, "gpu", AttemptState::Finished);
        done.job_id = Some(4);
        // A launch's runner still starting for job 1 is unassigned: the allocator
        // subtracts it, so the job is not dropped here (it is taken by name instead).
        let mut starting = attempt(4, "gpu", AttemptState::Starting);
        starting.job_id = Some(1);
        let d = assign(&profiles(), &jobs, &[by_id, by_name, done, starting]);
        assert_eq!(d.taken, vec![1, 3, 4]);
        assert_eq!(
            d.profiles.iter().find(|p| p.profile == "gpu").unwrap().jobs,
            vec![2]
        );
    }

    #[test]
    fn a_finished_runner_takes_its_job_out_of_a_stale_queue() {
        // The queue was read before the runner took its job and finished it: the job
        // still shows as queued and must not start a second runner.
        let mut done = attempt(1, "gpu", AttemptState::Finished);
        done.job_name = Some("build".into());
        let d = assign(
            &profiles(),
            &[job(1, "build", &["gpu"]), job(2, "test", &["gpu"])],
            &[done],
        );
        assert_eq!(d.taken, vec![1]);
        assert_eq!(d.queued("gpu"), 1);
    }

    #[test]
    fn a_busy_runner_takes_only_a_job_its_profile_fits() {
        let mut a = attempt(1, "linux", AttemptState::Busy);
        a.job_name = Some("build".into());
        let d = assign(&profiles(), &[job(1, "build", &["gpu"])], &[a]);
        assert!(d.taken.is_empty());
        assert_eq!(d.queued("gpu"), 1);
    }
}
