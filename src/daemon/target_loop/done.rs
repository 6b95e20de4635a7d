//! A worker's result: what it brought is kept by the loop (the queue, the runner
//! list, the attempt), and what it means for the target is the pass's (`Event::Done`).

use super::*;

impl TargetLoop {
    /// A worker's result: what it brought is kept here (the queue, the runner list,
    /// the attempt), and what it means for the target is the pass's.
    pub(super) fn on_done(&mut self, d: Done) {
        if let Done::DemandRun { run, jobs } = d {
            // Part of a read still going on: not the end of a task.
            let profiles = self.org_profiles();
            self.inbound.queue.take_run(run, jobs, scope(&profiles));
            return;
        }
        self.io.received();
        let now = now_millis();
        let outcome = match d {
            Done::DemandRun { .. } => return,
            Done::Started { attempt, outcome } => {
                self.after_attempt(&attempt);
                let end = match outcome {
                    Started::Spawned => StartEnd::Spawned,
                    Started::GitHub(e) => StartEnd::GitHub(target_error(&e)),
                    Started::Host(why) => StartEnd::Host(why),
                    Started::Skipped => StartEnd::Skipped,
                };
                Outcome::Started {
                    attempt: attempt.id,
                    profile: attempt.profile.clone(),
                    end,
                }
            }
            Done::Applied { attempt } => {
                lock(&self.shared.pool.book).left(attempt.id);
                self.after_attempt(&attempt);
                Outcome::Applied {
                    attempt: attempt.id,
                }
            }
            Done::Demand {
                repos,
                read_at,
                result,
                units,
            } => self.took_demand(repos, read_at, result, units),
            Done::Runners { result, read_at } => Outcome::Runners {
                result: match result {
                    Ok(list) => {
                        self.inbound.fresh_runners = Some((list, read_at));
                        Ok(())
                    }
                    Err(e) => Err(target_error(&e)),
                },
            },
            Done::Guard { result } => Outcome::Guard {
                result: result.map_err(|e| target_error(&e)),
            },
            Done::Reruns { result } => {
                // The look settled or put off rows: ask the store again.
                self.inbound.reruns.seen = None;
                Outcome::Reruns {
                    result: result.map_err(|e| target_error(&e)),
                }
            }
            Done::RunnersDeleted => Outcome::RunnersDeleted,
            Done::RunnerRelease => {
                self.persist_etags();
                Outcome::RunnerRelease
            }
            Done::Failed { attempt, error } => {
                log_error!("io_failed", target = self.name, error = error);
                if let Some(id) = attempt {
                    lock(&self.shared.pool.book).left(id);
                }
                Outcome::Failed { attempt }
            }
        };
        self.feed(Event::Done(outcome), None, now);
    }

    /// A demand read came back: its jobs become the queue (what it did not read again
    /// keeps its earlier view), and its time the queue's. A new run's first read is
    /// part of what its jobs cost (like their JIT configs); polling is the rest: the
    /// runs lists and re-reads of runs that changed. That is what the pace follows.
    pub(super) fn took_demand(
        &mut self,
        repos: crate::github::visibility::OrgRepos,
        read_at: Millis,
        result: Result<crate::daemon::workers::io::DemandRead, GhError>,
        units: u64,
    ) -> Outcome {
        self.inbound.queue.end_read(repos);
        let first_reads = result.as_ref().map_or(0, |r| r.read.new_runs as u64);
        let list_units = result.as_ref().map_or(units, |r| r.read.list_units);
        self.persist_etags();
        let result = match result {
            Ok(read) => {
                if read.read.failed_runs > 0 {
                    log_warn!(
                        "queue_read_failed_in_part",
                        target = self.name,
                        failed_runs = read.read.failed_runs
                    );
                }
                if read.read.unread_runs > 0 || !read.read.whole() {
                    // A deep queue: what was read fills the room; the rest waits.
                    log_debug!(
                        "queue_read_in_part",
                        target = self.name,
                        unread_runs = read.read.unread_runs,
                        whole = read.read.whole()
                    );
                }
                let profiles = self.org_profiles();
                self.inbound
                    .queue
                    .take_read(read.read, read.not_polled, read_at, scope(&profiles));
                Ok(())
            }
            Err(e) => Err(target_error(&e)),
        };
        Outcome::Demand {
            units,
            list_units,
            first_reads,
            result,
        }
    }

    /// The target's profiles if it is an organization (whose jobs are judged for
    /// visibility), `None` for a repository.
    pub(super) fn org_profiles(&self) -> Option<Vec<ScalePolicy>> {
        let org = self
            .store
            .target(&self.name)
            .is_ok_and(|t| matches!(t.scope, TargetScope::Org { .. }));
        org.then(|| {
            self.store
                .profiles()
                .unwrap_or_default()
                .into_iter()
                .filter(|p| p.target == self.name)
                .collect()
        })
    }
}

/// A GitHub error as the pass holds the target for it.
pub(super) fn target_error(e: &GhError) -> TargetError {
    crate::reconcile::refusal::target_error(e.answer(), e.to_string())
}

/// How the queue judges its jobs: by the organization's profiles, or not at all.
pub(super) fn scope(org_profiles: &Option<Vec<ScalePolicy>>) -> Scope<'_> {
    match org_profiles {
        Some(p) => Scope::Org(p),
        None => Scope::Repo,
    }
}
