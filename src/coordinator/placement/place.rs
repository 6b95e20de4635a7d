//! The placing itself: each waiting job, oldest first, to the host with the most free
//! capacity that has a fitting pool profile below its max, as a lease with a fresh id;
//! and the memory of lease ids, kept until no late start can name them.

use super::protocol::{self, CoordMsg, LaunchFrame};
use super::{
    Action, ConnId, HostView, JobEntry, JobState, LATE_START_MS, LEASE_MEMORY, LeaseOf, Placement,
};
use crate::domain::labels::{extra_labels, job_fits};
use crate::timefmt::{Millis, format_rfc3339};
use std::collections::{BTreeMap, BTreeSet};

impl Placement {
    /// Places every waiting job it can, oldest first.
    pub fn place(&mut self, now: Millis) -> Vec<Action> {
        let mut out = Vec::new();
        self.settle_closed(now);
        let mut waiting: Vec<(Millis, i64, String)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == JobState::Waiting)
            .map(|(k, j)| (j.job.created_at, j.job.id, k.clone()))
            .collect();
        if waiting.is_empty() || self.hosts.is_empty() {
            return out;
        }
        waiting.sort();
        // Counted once per call: placing is then linear in waiting jobs times hosts.
        let mut open: BTreeMap<ConnId, u32> = BTreeMap::new();
        let mut per_profile: BTreeMap<(ConnId, String), u32> = BTreeMap::new();
        for j in self.jobs.values() {
            if let JobState::Leased { conn, profile, .. } = &j.state {
                *open.entry(*conn).or_default() += 1;
                *per_profile.entry((*conn, profile.clone())).or_default() += 1;
            }
        }
        let mut free: BTreeMap<ConnId, u32> = self
            .hosts
            .iter()
            .map(|(c, h)| (*c, h.free.saturating_sub(open.get(c).copied().unwrap_or(0))))
            .collect();
        // Targets whose credential has no room left in this call: looked at once each,
        // so a long queue behind a spent budget costs a lookup a job.
        let mut spent: BTreeSet<String> = BTreeSet::new();
        for (_, _, key) in waiting {
            let job = &self.jobs[&key];
            // The credential's limits first: a start they cannot pay for waits.
            if spent.contains(&job.target) {
                continue;
            }
            if self.credit.wait(&job.target, now).is_some() {
                spent.insert(job.target.clone());
                continue;
            }
            let mut best: Option<(ConnId, String, String)> = None;
            let mut best_rank = None;
            for (conn, h) in &self.hosts {
                let f = free[conn];
                if f == 0 || h.draining || !protocol::is_directable(h.version) {
                    continue;
                }
                if job.refused.get(&h.name).is_some_and(|until| *until > now) {
                    continue;
                }
                let Some((profile, host_target)) =
                    self.fitting_profile(h, job, *conn, &per_profile)
                else {
                    continue;
                };
                // Most free first; then the host with fewer open leases; then name.
                let rank = (
                    std::cmp::Reverse(f),
                    open.get(conn).copied().unwrap_or(0),
                    h.name.clone(),
                );
                if best_rank.as_ref().is_none_or(|b| rank < *b) {
                    best_rank = Some(rank);
                    best = Some((*conn, profile, host_target));
                }
            }
            let Some((conn, profile, host_target)) = best else {
                continue;
            };
            let lease_id = self.lease_ids.issue();
            let target = self.jobs[&key].target.clone();
            if self.credit.draw(&target, &lease_id, now).is_err() {
                spent.insert(target);
                continue;
            }
            let ttl = self.cfg.ttl_secs.min(protocol::MAX_TTL_SECS);
            let expires_at = now + ttl as Millis * 1000;
            *free.get_mut(&conn).expect("host listed") -= 1;
            *open.entry(conn).or_default() += 1;
            *per_profile.entry((conn, profile.clone())).or_default() += 1;
            let host = self.hosts[&conn].name.clone();
            self.remember_lease(&lease_id, &key, &host, expires_at + LATE_START_MS);
            let job = self.jobs.get_mut(&key).expect("waiting job");
            job.placements += 1;
            job.state = JobState::Leased {
                lease_id: lease_id.clone(),
                conn,
                host,
                profile: profile.clone(),
                expires_at,
                acked: false,
            };
            out.push(Action::Send(
                conn,
                CoordMsg::Launch(LaunchFrame {
                    target: host_target,
                    profile,
                    job_key: key.clone(),
                    lease_id,
                    expires_at: format_rfc3339(expires_at),
                    ttl_secs: ttl,
                }),
            ));
        }
        out
    }

    /// Leases closed since the last look stop holding the credential's budget: their
    /// points count a window from `now`.
    pub(super) fn settle_closed(&mut self, now: Millis) {
        let open = open_lease_ids(&self.jobs);
        self.credit.close_all_but(&open, now);
    }

    /// The host's most specific pool profile (fewest extra labels, then name) for the
    /// job's target whose labels the job fits, that is not unfit and below its max.
    fn fitting_profile(
        &self,
        h: &HostView,
        job: &JobEntry,
        conn: ConnId,
        per_profile: &BTreeMap<(ConnId, String), u32>,
    ) -> Option<(String, String)> {
        let pool = format!("rm-pool-{}", h.hello.host.os);
        h.hello
            .profiles
            .iter()
            .filter(|p| {
                h.covered.get(&p.target) == Some(&job.target)
                    && p.labels
                        .iter()
                        .any(|l| crate::domain::labels::same_label(l, &pool))
                    && !h.unfit.contains(&p.name)
                    && job_fits(&job.job.labels, &p.labels)
                    && per_profile
                        .get(&(conn, p.name.clone()))
                        .copied()
                        .unwrap_or(0)
                        < p.max
            })
            .min_by_key(|p| (extra_labels(&job.job.labels, &p.labels), p.name.clone()))
            .map(|p| (p.name.clone(), p.target.clone()))
    }

    pub(super) fn remember_lease(
        &mut self,
        lease_id: &str,
        key: &str,
        host: &str,
        forget_at: Millis,
    ) {
        self.lease_jobs.insert(
            lease_id.to_string(),
            LeaseOf {
                job: key.to_string(),
                host: host.to_string(),
                forget_at,
            },
        );
    }

    /// Forgets closed leases past their `forget_at` or whose job left the queue (a
    /// start naming them would change nothing), and the oldest closed ones beyond
    /// [`LEASE_MEMORY`]. An open lease is always kept.
    pub(super) fn forget_leases(&mut self, now: Millis) {
        let open = open_lease_ids(&self.jobs);
        let mut closed: Vec<(Millis, String)> = self
            .lease_jobs
            .iter()
            .filter(|(id, _)| !open.contains(id.as_str()))
            .map(|(id, l)| {
                let forget_at = if self.jobs.contains_key(&l.job) {
                    l.forget_at
                } else {
                    Millis::MIN
                };
                (forget_at, id.clone())
            })
            .collect();
        closed.sort();
        let over = self.lease_jobs.len().saturating_sub(LEASE_MEMORY);
        for (i, (forget_at, id)) in closed.into_iter().enumerate() {
            if i >= over && forget_at > now {
                break;
            }
            self.lease_jobs.remove(&id);
        }
    }

    /// How many lease ids are remembered (open, or closed without a runner lately).
    pub fn leases_remembered(&self) -> usize {
        self.lease_jobs.len()
    }
}

/// The ids of the leases open now among `jobs`.
fn open_lease_ids(jobs: &BTreeMap<String, JobEntry>) -> BTreeSet<&str> {
    jobs.values()
        .filter_map(|j| match &j.state {
            JobState::Leased { lease_id, .. } => Some(lease_id.as_str()),
            _ => None,
        })
        .collect()
}
