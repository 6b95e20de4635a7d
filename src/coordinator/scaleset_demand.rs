//! Scale set demand for the coordinator: `coordinator serve --scaleset TARGET=NAME`
//! holds the one message session of scale set NAME (in the Default runner group of
//! TARGET) and reports the jobs assigned to it and not yet started as the target's
//! queue, so placement launches one runner per job on the pool's hosts.
//!
//! The waiting jobs are kept in the coordinator's store (kv
//! `scaleset:<target>:<id>:waiting`) before the message that changed them is
//! acknowledged (the listener acknowledges at the next poll), so a restarted
//! coordinator neither loses an assigned job nor places a started one again: applying
//! a repeated message is idempotent.

use super::demand::{DemandSource, coord_target};
use super::placement::{CoordTarget, Taken, job_key};
use crate::domain::job_owner::JobOwner;
use crate::domain::{QueuedJob, Target};
use crate::github::{GitHubClient, load_credential};
use crate::scaleset::{
    JobInfo, JobMessage, ListenerConfig, ScaleSetClient, ScaleSetListener, ScaleSetSpec,
    SessionCloser, Statistics, StoreCheckpoint,
};
use crate::store::{SqliteStore, Store};
use crate::timefmt::now_millis;
use crossbeam_channel::Receiver;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Sent as `X-ScaleSetMaxCapacity`: the coordinator does not know the pool's ceiling
/// (each host's profiles bound their own starts), so it asks for every job.
pub const MAX_CAPACITY: u32 = 10_000;

/// The spec the coordinator keeps its scale set at, in the Default runner group:
/// the hosts' `demand=scaleset` profile of the same name registers its runners there
/// with the same spec (`ScaleSetSpec::named`).
pub fn spec(name: &str) -> ScaleSetSpec {
    ScaleSetSpec::named(name, crate::domain::DEFAULT_RUNNER_GROUP_ID)
}

/// Parses one `--scaleset TARGET=NAME`.
pub fn parse_option(v: &str) -> Result<(String, String), String> {
    match v.split_once('=') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok((t.to_string(), n.to_string())),
        _ => Err(format!("expected TARGET=SCALESET_NAME (got {v:?})")),
    }
}

fn waiting_key(target: &str, scale_set_id: i64) -> String {
    format!("scaleset:{target}:{scale_set_id}:waiting")
}

pub struct ScaleSetDemand {
    target: CoordTarget,
    name: String,
    /// `None` only once dropped.
    listener: Option<ScaleSetListener>,
    store: SqliteStore,
    waiting: Waiting,
    /// The scale set whose waiting jobs were loaded from the store.
    loaded_for: i64,
    /// Runners seen taking jobs since placement last asked.
    taken: Vec<Taken>,
    /// Whose job those runners took (`JobStarted` says), until `owners` takes them.
    owners: Vec<(String, JobOwner)>,
}

impl ScaleSetDemand {
    /// No I/O towards GitHub here: the first `queued` finds or creates the scale set
    /// and opens the session. `dir` is the coordinator's state directory.
    pub fn new(
        t: &Target,
        name: &str,
        dir: &Path,
        shutdown: Receiver<()>,
    ) -> Result<ScaleSetDemand, String> {
        let cred = load_credential(&t.credential).map_err(|e| format!("target {}: {e}", t.name))?;
        let gh = GitHubClient::new(t, cred).with_shutdown(shutdown.clone());
        let client = Arc::new(ScaleSetClient::new(Arc::new(gh)));
        let open = || SqliteStore::open(dir).map_err(|e| format!("store: {e}"));
        let owner = format!("runner-manager-coordinator@{}", hostname());
        let cfg = ListenerConfig::new(&t.name, &owner, spec(name), MAX_CAPACITY);
        // The demand thread may be in a long poll when the coordinator stops: the session
        // is ended from here at once, so a restarted coordinator need not wait it out.
        let closer = SessionCloser::new(client.clone());
        let watcher = closer.clone();
        std::thread::Builder::new()
            .name(format!("coord-scaleset-close-{}", t.name))
            .spawn(move || {
                let _ = shutdown.recv();
                if let Err(e) = watcher.close() {
                    crate::log_warn!("scaleset_session_not_closed", error = e);
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let listener = ScaleSetListener::new(client, cfg, Box::new(StoreCheckpoint(open()?)))
            .closed_by(&closer);
        Ok(ScaleSetDemand {
            target: coord_target(t),
            name: name.to_string(),
            listener: Some(listener),
            store: open()?,
            waiting: Waiting::default(),
            loaded_for: 0,
            taken: Vec::new(),
            owners: Vec::new(),
        })
    }

    fn load(&mut self, scale_set_id: i64) -> Result<(), String> {
        let key = waiting_key(&self.target.name, scale_set_id);
        self.waiting =
            Waiting::loaded(match self.store.kv_get(&key).map_err(|e| e.to_string())? {
                None => BTreeMap::new(),
                Some(v) => serde_json::from_str(&v).map_err(|e| format!("{key}: {e}"))?,
            });
        self.loaded_for = scale_set_id;
        Ok(())
    }

    fn save(&self) -> Result<(), String> {
        let key = waiting_key(&self.target.name, self.loaded_for);
        let v = serde_json::to_string(&self.waiting.jobs).map_err(|e| e.to_string())?;
        self.store.kv_put(&key, &v).map_err(|e| e.to_string())
    }
}

/// A job of the scale set as placement sees it; a job without labels carries the scale
/// set's name, its one label.
fn queued_job(scale_set: &str, j: &JobInfo) -> QueuedJob {
    let labels = if j.labels.is_empty() {
        vec![scale_set.to_string()]
    } else {
        j.labels.clone()
    };
    QueuedJob {
        // The runner request id is the service's number for this job.
        id: j.runner_request_id,
        run_id: j.workflow_run_id,
        repo: format!("{}/{}", j.owner, j.repository),
        name: j.display_name.clone(),
        labels,
        created_at: j.queued_at.unwrap_or_else(now_millis),
    }
}

/// The jobs assigned to the scale set and not started, by the service's job id, and
/// which of them the statistics may prune: the "suspects", known from before the
/// current session (loaded from the store, or carried over a new session), whose start
/// may have gone to another holder's messages. A job assigned within the session is
/// never pruned: its start arrives as a message, and the statistics may count a start
/// whose message is still on its way, so pruning by them would drop a job still waiting
/// instead of the one started.
#[derive(Debug, Default)]
pub struct Waiting {
    pub jobs: BTreeMap<String, QueuedJob>,
    suspects: BTreeSet<String>,
    /// The listener's session count when last seen.
    sessions: u64,
}

impl Waiting {
    /// A list read back from the store: every job in it is a suspect.
    pub fn loaded(jobs: BTreeMap<String, QueuedJob>) -> Waiting {
        Waiting {
            suspects: jobs.keys().cloned().collect(),
            jobs,
            sessions: 0,
        }
    }

    /// One poll: the listener's session count, the message's jobs (if a message came)
    /// and statistics at least as fresh as them (if known). Returns whether the list
    /// changed, and the runners the message saw taking jobs.
    pub fn update(
        &mut self,
        sessions_opened: u64,
        message: Option<&[JobMessage]>,
        fresh: Option<&Statistics>,
        to_job: impl Fn(&JobInfo) -> QueuedJob,
    ) -> (bool, Vec<Taken>) {
        if sessions_opened != self.sessions {
            self.sessions = sessions_opened;
            self.suspects = self.jobs.keys().cloned().collect();
        }
        let mut changed = false;
        let mut taken = Vec::new();
        if let Some(jobs) = message {
            taken = apply(&mut self.jobs, jobs, to_job);
            changed = true;
        }
        if !self.suspects.is_empty()
            && let Some(stats) = fresh
        {
            let suspects = &self.suspects;
            changed |= prune(&mut self.jobs, stats, |k| suspects.contains(k)) > 0;
        }
        let jobs = &self.jobs;
        self.suspects.retain(|k| jobs.contains_key(k));
        (changed, taken)
    }
}

/// Applies one message's jobs to the waiting set; idempotent, so a message delivered
/// again after a restart changes nothing. Returns the runners the message saw taking
/// jobs (placement moves a lease when a runner took another job than its own).
pub fn apply(
    waiting: &mut BTreeMap<String, QueuedJob>,
    jobs: &[JobMessage],
    to_job: impl Fn(&JobInfo) -> QueuedJob,
) -> Vec<Taken> {
    let mut taken = Vec::new();
    for m in jobs {
        match m {
            JobMessage::Assigned { job } => {
                waiting.insert(job.job_id.clone(), to_job(job));
            }
            JobMessage::Started {
                job, runner_name, ..
            } => {
                waiting.remove(&job.job_id);
                if !runner_name.is_empty() {
                    taken.push(Taken {
                        job_key: job_key(&to_job(job)),
                        runner_name: runner_name.clone(),
                    });
                }
            }
            JobMessage::Completed { job, .. } => {
                waiting.remove(&job.job_id);
            }
            JobMessage::Available { .. } | JobMessage::Unknown { .. } => {}
        }
    }
    taken
}

/// Keeps no more waiting jobs than the statistics say are assigned and not running,
/// dropping the oldest of those `may_drop` allows: a job whose start this coordinator
/// never heard of (a host in fallback held the session meanwhile and acknowledged its
/// messages) must not be placed again. The statistics must be at least as fresh as the
/// newest message applied. Returns how many were dropped.
pub fn prune(
    waiting: &mut BTreeMap<String, QueuedJob>,
    stats: &Statistics,
    may_drop: impl Fn(&str) -> bool,
) -> usize {
    let keep = stats
        .total_assigned_jobs
        .saturating_sub(stats.total_running_jobs) as usize;
    let extra = waiting.len().saturating_sub(keep);
    if extra == 0 {
        return 0;
    }
    let mut by_age: Vec<(i64, String)> = waiting
        .iter()
        .filter(|(k, _)| may_drop(k))
        .map(|(k, j)| (j.created_at, k.clone()))
        .collect();
    by_age.sort();
    by_age.truncate(extra);
    for (_, k) in &by_age {
        waiting.remove(k);
    }
    by_age.len()
}

impl DemandSource for ScaleSetDemand {
    fn target(&self) -> &CoordTarget {
        &self.target
    }

    /// A scale set's JIT configs come from the Actions service, not the REST API.
    fn jit_points_limit(&self) -> Option<u32> {
        None
    }

    /// None between reads: `queued` is a long poll that waits for news itself.
    fn interval(&self) -> Duration {
        Duration::ZERO
    }

    fn queued(&mut self) -> Result<Vec<QueuedJob>, String> {
        let listener = self
            .listener
            .as_mut()
            .ok_or_else(|| "the scale set listener is closed".to_string())?;
        let r = listener
            .poll_once()
            .map_err(|e| format!("scale set {}: {e}", self.name))?;
        let sessions = listener.sessions_opened();
        if r.scale_set_id != self.loaded_for {
            self.load(r.scale_set_id)?;
        }
        // Statistics as fresh as the jobs: those of this message, or of the newest
        // one (a poll without news).
        let fresh = r.message.as_ref().is_none_or(|m| m.statistics.is_some());
        let started = r.message.iter().flat_map(|m| &m.jobs);
        self.owners.extend(started_owners(started));
        let name = &self.name;
        let (changed, taken) = self.waiting.update(
            sessions,
            r.message.as_ref().map(|m| m.jobs.as_slice()),
            r.statistics.as_ref().filter(|_| fresh),
            |j| queued_job(name, j),
        );
        self.taken.extend(taken);
        if changed {
            // Kept before the next poll acknowledges the message.
            self.save()?;
        }
        Ok(self.waiting.jobs.values().cloned().collect())
    }

    fn taken(&mut self) -> Vec<Taken> {
        std::mem::take(&mut self.taken)
    }

    fn owners(&mut self) -> Vec<(String, JobOwner)> {
        std::mem::take(&mut self.owners)
    }
}

/// The owners of the jobs a message saw runners take, by runner name.
fn started_owners<'a>(
    jobs: impl Iterator<Item = &'a JobMessage>,
) -> impl Iterator<Item = (String, JobOwner)> {
    jobs.filter_map(|m| match m {
        JobMessage::Started {
            job, runner_name, ..
        } if !runner_name.is_empty() => Some((runner_name.clone(), job.owner())),
        _ => None,
    })
}

impl Drop for ScaleSetDemand {
    /// Ends the session so a restarted coordinator can open one at once.
    fn drop(&mut self) {
        if let Some(l) = self.listener.take()
            && let Err(e) = l.close()
        {
            crate::log_warn!(
                "scaleset_session_not_closed",
                scale_set = self.name,
                error = e
            );
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "coordinator".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: i64) -> JobInfo {
        JobInfo {
            runner_request_id: id,
            repository: "r".into(),
            owner: "o".into(),
            job_id: id.to_string(),
            display_name: "j".into(),
            workflow_run_id: 7,
            labels: vec!["ss".into()],
            queued_at: Some(5),
            workflow_file: None,
        }
    }

    fn to_job(j: &JobInfo) -> QueuedJob {
        QueuedJob {
            id: j.runner_request_id,
            run_id: j.workflow_run_id,
            repo: format!("{}/{}", j.owner, j.repository),
            name: j.display_name.clone(),
            labels: j.labels.clone(),
            created_at: 0,
        }
    }

    fn stats(assigned: u32, running: u32) -> Statistics {
        Statistics::assigned_running(assigned, running)
    }

    #[test]
    fn prune_drops_the_oldest_beyond_what_the_statistics_count() {
        let mut w = BTreeMap::new();
        let msg: Vec<JobMessage> = (1..=4)
            .map(|i| JobMessage::Assigned { job: info(i) })
            .collect();
        apply(&mut w, &msg, |j| QueuedJob {
            created_at: j.runner_request_id * 10,
            ..to_job(j)
        });
        // All four still assigned, one of them running: one too many waits.
        let any = |_: &str| true;
        assert_eq!(prune(&mut w, &stats(4, 1), any), 1);
        assert_eq!(w.keys().cloned().collect::<Vec<_>>(), ["2", "3", "4"]);
        // As many as counted: nothing dropped; more counted than known: nothing added.
        assert_eq!(prune(&mut w, &stats(3, 0), any), 0);
        assert_eq!(prune(&mut w, &stats(9, 0), any), 0);
        assert_eq!(w.len(), 3);
        // Only those it may drop, oldest first.
        assert_eq!(prune(&mut w, &stats(2, 1), |k| k != "2"), 2);
        assert_eq!(w.keys().cloned().collect::<Vec<_>>(), ["2"]);
        // Nothing assigned any more: nothing waits.
        assert_eq!(prune(&mut w, &stats(2, 2), any), 1);
        assert!(w.is_empty());
    }

    #[test]
    fn statistics_prune_only_jobs_known_from_before_the_session() {
        let assigned = |ids: std::ops::RangeInclusive<i64>| -> Vec<JobMessage> {
            ids.map(|i| JobMessage::Assigned { job: info(i) }).collect()
        };
        let oldest_first = |j: &JobInfo| QueuedJob {
            created_at: j.runner_request_id,
            ..to_job(j)
        };
        let keys = |w: &Waiting| w.jobs.keys().cloned().collect::<Vec<_>>();
        let mut w = Waiting::default();
        let (changed, _) = w.update(1, Some(&assigned(1..=4)), Some(&stats(4, 0)), oldest_first);
        assert!(changed);
        // Same session, statistics ahead of the messages (a start still on its way):
        // every job keeps waiting until its own start arrives.
        let (_, taken) = w.update(1, Some(&assigned(5..=5)), Some(&stats(5, 2)), oldest_first);
        assert!(taken.is_empty());
        assert_eq!(w.jobs.len(), 5);
        let started = [JobMessage::Started {
            job: info(3),
            runner_id: 9,
            runner_name: "rm-h-9".into(),
        }];
        let (_, taken) = w.update(1, Some(&started), Some(&stats(5, 2)), oldest_first);
        assert_eq!(
            taken,
            vec![Taken {
                job_key: "3".into(),
                runner_name: "rm-h-9".into()
            }]
        );
        assert_eq!(keys(&w), ["1", "2", "4", "5"]);
        // A new session: another holder may have had the messages of the jobs known
        // so far. Pruned by fresh statistics only, oldest first, and only those.
        let (changed, _) = w.update(2, Some(&[]), None, oldest_first);
        assert!(changed);
        assert_eq!(w.jobs.len(), 4);
        w.update(2, Some(&assigned(6..=6)), Some(&stats(6, 3)), oldest_first);
        assert_eq!(keys(&w), ["4", "5", "6"]);
        w.update(2, None, Some(&stats(6, 5)), oldest_first);
        assert_eq!(keys(&w), ["6"], "job 6 was assigned in this session");
        // A list read back from the store is suspect as a whole.
        let mut w = Waiting::loaded(w.jobs.clone());
        w.update(1, None, Some(&stats(6, 6)), oldest_first);
        assert!(w.jobs.is_empty());
    }

    #[test]
    fn assigned_jobs_wait_until_started_or_completed_and_repeats_change_nothing() {
        let mut w = BTreeMap::new();
        let msg = vec![
            JobMessage::Assigned { job: info(1) },
            JobMessage::Assigned { job: info(2) },
        ];
        apply(&mut w, &msg, to_job);
        apply(&mut w, &msg, to_job);
        assert_eq!(w.len(), 2);
        let started = vec![JobMessage::Started {
            job: info(1),
            runner_id: 3,
            runner_name: "x".into(),
        }];
        apply(&mut w, &started, to_job);
        apply(&mut w, &started, to_job);
        assert_eq!(w.keys().collect::<Vec<_>>(), vec!["2"]);
        apply(
            &mut w,
            &[JobMessage::Completed {
                job: info(2),
                result: "succeeded".into(),
                runner_id: 4,
                runner_name: "y".into(),
            }],
            to_job,
        );
        assert!(w.is_empty());
    }

    #[test]
    fn the_option_names_a_target_and_a_scale_set() {
        assert_eq!(
            parse_option("pool=ss").unwrap(),
            ("pool".to_string(), "ss".to_string())
        );
        assert!(parse_option("pool").is_err());
        assert!(parse_option("=ss").is_err());
        assert!(parse_option("pool=").is_err());
    }
}
