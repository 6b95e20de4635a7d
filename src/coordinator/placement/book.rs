//! The placement book as the store keeps it, and taken up again by a restarted
//! coordinator: one [`CoordJobRow`] per job, with its phase and its lease or runner.

use super::{JobEntry, JobState, LATE_START_MS, NO_CONN, Placement};
use crate::domain::QueuedJob;
use crate::domain::job_phase::Phase;
use crate::store::CoordJobRow;
use crate::timefmt::Millis;
use std::collections::BTreeMap;

impl Placement {
    /// The book as the store keeps it: one row per job, with its lease or runner.
    /// [`Placement::restore`] reads it back.
    pub fn book_rows(&self, now: Millis) -> Vec<CoordJobRow> {
        self.jobs
            .iter()
            .map(|(k, j)| {
                let mut row = CoordJobRow {
                    job_key: k.clone(),
                    target: j.target.clone(),
                    repo: j.job.repo.clone(),
                    name: j.job.name.clone(),
                    labels: j.job.labels.clone(),
                    queued_at: j.job.created_at,
                    phase: j.state.phase().into(),
                    placements: j.placements,
                    updated_at: now,
                    ..Default::default()
                };
                match &j.state {
                    JobState::Leased {
                        lease_id,
                        host,
                        profile,
                        expires_at,
                        ..
                    } => {
                        row.lease_id = Some(lease_id.clone());
                        row.host = Some(host.clone());
                        row.profile = Some(profile.clone());
                        row.expires_at = Some(*expires_at);
                    }
                    JobState::Started {
                        host, runner_name, ..
                    } => {
                        row.host = Some(host.clone());
                        row.runner_name = Some(runner_name.clone());
                    }
                    JobState::Waiting | JobState::Held { .. } => {}
                }
                row
            })
            .collect()
    }

    /// A restarted coordinator takes up the book its last life wrote (the server
    /// writes it before it sends a launch), so a job whose runner was asked for or
    /// started before the crash is not placed again beside it:
    /// - a lease, offered or accepted, waits `away_grace_ms` for its host, as the
    ///   accepted leases of a host whose link dropped do (an offer may have been
    ///   accepted in the frame the crash cut off);
    /// - a started runner serves its job for `orphan_grace_ms`, or until its host
    ///   says hello;
    /// - a held job waits for a fresh snapshot, and a waiting one waits.
    ///
    /// Jobs no longer queued leave with their target's first snapshot; rows of
    /// targets this coordinator no longer serves, or that cannot be read, are dropped.
    pub fn restore(&mut self, rows: &[CoordJobRow], now: Millis) {
        for r in rows {
            if !self.targets.iter().any(|t| t.name == r.target) {
                continue;
            }
            let Ok(id) = r.job_key.parse::<i64>() else {
                continue;
            };
            let state = match (r.phase.known(), &r.lease_id, &r.host, &r.runner_name) {
                (Some(p), Some(lease_id), Some(host), _) if p.is_leased() => {
                    let forget_at = r.expires_at.unwrap_or(now) + LATE_START_MS;
                    self.remember_lease(lease_id, &r.job_key, host, forget_at);
                    // Its start may be under way: it holds the credential's points.
                    self.credit.carry(&r.target, lease_id, now);
                    JobState::Leased {
                        lease_id: lease_id.clone(),
                        conn: NO_CONN,
                        host: host.clone(),
                        profile: r.profile.clone().unwrap_or_default(),
                        expires_at: r
                            .expires_at
                            .unwrap_or(now)
                            .min(now + self.cfg.away_grace_ms),
                        acked: true,
                    }
                }
                (Some(Phase::Started), _, Some(host), Some(runner_name)) => JobState::Started {
                    host: host.clone(),
                    runner_name: runner_name.clone(),
                    orphan_at: Some(now + self.cfg.orphan_grace_ms),
                },
                (Some(Phase::Held), ..) => JobState::Held { since: now },
                _ => JobState::Waiting,
            };
            let job = QueuedJob {
                id,
                run_id: 0,
                repo: r.repo.clone(),
                name: r.name.clone(),
                labels: r.labels.clone(),
                created_at: r.queued_at,
            };
            self.jobs.insert(
                r.job_key.clone(),
                JobEntry {
                    target: r.target.clone(),
                    job,
                    state,
                    refused: BTreeMap::new(),
                    placements: r.placements,
                    seen_at: now,
                },
            );
        }
    }
}
