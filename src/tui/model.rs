//! The model the views draw: one read of the store at a given `now`, prepared for
//! every view, so rendering and key handling are tested without a terminal (scale set
//! profiles carry their session). Loading
//! is a handful of short read transactions; the store is never written here.

use crate::domain::{Attempt, DemandSource, Host, Reported, ScalePolicy, SessionState, TargetMode};
use crate::meter::LiveMeter;
use crate::reconcile::allocate::Counts;
use crate::store::{
    AttemptFilter, Heartbeat, LatencySample, ProfileStatus, QueueSample, SqliteStore, Store,
    StoreError, TargetStatus, daemon_facts,
};
use crate::timefmt::Millis;
use std::collections::BTreeMap;

/// A heartbeat older than this means the daemon is gone; the same figure `status` uses.
pub use crate::store::HEARTBEAT_STALE_MS;

/// How far back the pictures look.
pub const PICTURE_WINDOW_MS: Millis = 10 * 60_000;

/// Ended attempts shown besides the live ones: enough to see what just happened.
pub const RECENT_ATTEMPTS: u32 = 200;

/// One profile as the overview shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRow {
    pub policy: ScalePolicy,
    /// The labels the user gave (the default ones left out: every profile has them).
    pub user_labels: Vec<String>,
    /// Its target's mode as the daemon last reported it (`standalone`, `coordinated`,
    /// `fallback`), `None` before the daemon's first pass.
    pub mode: Option<Reported<TargetMode>>,
    pub status: Option<ProfileStatus>,
    /// Its open attempts by state, counted as the allocator counts them.
    pub counts: Counts,
    /// A `demand=scaleset` profile's session as the daemon last recorded it; `None`
    /// for other profiles, and before (or without) a listener on this host.
    pub session: Option<SessionState>,
}

/// One target's name and what the daemon last said about it.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetRow {
    pub name: String,
    /// Its `poll_interval`, against which a paced poll shows.
    pub poll_interval_ms: i64,
    pub status: Option<TargetStatus>,
    /// GitHub's runner list for it as the daemon last published it; `None` before
    /// the daemon's first list (the TUI never asks GitHub itself).
    pub runners: Option<daemon_facts::RunnersSeen>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub now: Millis,
    /// The store's `data_version` when read: unchanged means nothing to reload.
    pub data_version: i64,
    /// `None` until something created the host (the TUI never creates it).
    pub host: Option<Host>,
    pub heartbeat: Option<Heartbeat>,
    /// The daemon's containment word (`uids`, `none`, `refused`) as it last recorded it.
    pub isolation: Option<String>,
    /// The runner installs' versions and the newest release, as the daemon last saw.
    pub runner: daemon_facts::RunnerCheck,
    pub targets: Vec<TargetRow>,
    pub profiles: Vec<ProfileRow>,
    /// Every live attempt and the most recent others, newest first.
    pub attempts: Vec<Attempt>,
    /// Within [`PICTURE_WINDOW_MS`] of `now`, oldest first.
    pub queue: Vec<QueueSample>,
    pub latency: Vec<LatencySample>,
    /// The live meter of each attempt whose runner may still run, by attempt id; the
    /// peak RSS and CPU time of `attempts` already include it.
    pub meters: BTreeMap<i64, LiveMeter>,
    /// A coordinator's pool, when the store has coordinator hosts (the Pool pane is
    /// shown only then). Filled by [`Snapshot::with_pool`].
    pub pool: Option<super::pool::PoolSnapshot>,
    /// A coordinated host's link as the daemon last recorded it.
    pub link: Option<daemon_facts::LinkSeen>,
    /// The newest jobs lost to the host and what became of their re-runs.
    pub reruns: Vec<crate::domain::rerun::Rerun>,
    /// The daily usage roll-up's rows of the last [`super::usage::CHART_DAYS`] days.
    pub usage: Vec<crate::store::UsageRow>,
}

/// How many lost jobs the Activity pane shows.
pub const RECENT_RERUNS: usize = 50;

impl Snapshot {
    /// Reads everything the views need. `data_version` is read first, so a commit made
    /// while loading shows as a change next time and is read then.
    pub fn load(store: &dyn Store, now: Millis) -> Result<Snapshot, StoreError> {
        let data_version = store.data_version()?;
        let host = store.host()?;
        let heartbeat = store.heartbeat()?;
        let isolation = daemon_facts::isolation(store)?;
        let runner = daemon_facts::runner_check(store)?;
        let tstat = store.target_statuses()?;
        let targets: Vec<TargetRow> = store
            .targets()?
            .into_iter()
            .map(|t| -> Result<TargetRow, StoreError> {
                Ok(TargetRow {
                    status: tstat.iter().find(|s| s.target == t.name).cloned(),
                    runners: daemon_facts::runners_seen(store, &t.name)?,
                    poll_interval_ms: t.poll_interval_secs as i64 * 1000,
                    name: t.name,
                })
            })
            .collect::<Result<_, _>>()?;
        let recent = AttemptFilter {
            limit: Some(RECENT_ATTEMPTS),
            ..AttemptFilter::default()
        };
        let mut by_id: BTreeMap<i64, Attempt> = store
            .attempts(&recent)?
            .into_iter()
            .map(|a| (a.id, a))
            .collect();
        // Usually every live attempt is among the newest; read the live ones apart
        // only when some are older, rather than reading (and their histories) twice.
        let live_total: u32 = store.live_counts()?.values().sum();
        let live_seen = by_id.values().filter(|a| a.state.is_live()).count() as u32;
        if live_seen < live_total {
            let live = AttemptFilter {
                active_only: true,
                ..AttemptFilter::default()
            };
            by_id.extend(store.attempts(&live)?.into_iter().map(|a| (a.id, a)));
        }
        let mut meters = store.live_meters()?;
        let mut attempts: Vec<Attempt> = by_id.into_values().rev().collect();
        // A live runner's figures come from its meter row until its end writes them
        // into the attempt's own.
        for a in attempts.iter_mut() {
            if let Some(m) = meters.get(&a.id) {
                a.peak_rss_bytes = Some(a.peak_rss_bytes.unwrap_or(0).max(m.peak_rss_bytes));
                a.cpu_millis = Some(a.cpu_millis.unwrap_or(0).max(m.cpu_millis));
            }
        }
        let live_ids: std::collections::BTreeSet<i64> = attempts
            .iter()
            .filter(|a| a.state.is_live() && !a.cleaned)
            .map(|a| a.id)
            .collect();
        meters.retain(|id, _| live_ids.contains(id));
        let pstat = store.profile_statuses()?;
        let sessions = store.session_statuses()?;
        let counts = Counts::of(&attempts);
        let profiles = store
            .profiles()?
            .into_iter()
            .map(|p| {
                let (os, arch) = host
                    .as_ref()
                    .map(|h| (h.os.as_str(), h.arch.as_str()))
                    .unwrap_or(("", ""));
                ProfileRow {
                    user_labels: p.user_labels(os, arch),
                    mode: targets
                        .iter()
                        .find(|t| t.name == p.target)
                        .and_then(|t| t.status.as_ref())
                        .map(|s| s.mode.clone()),
                    status: pstat.iter().find(|s| s.profile == p.name).cloned(),
                    counts: counts.get(&p.name).copied().unwrap_or_default(),
                    session: sessions
                        .iter()
                        .find(|s| s.profile == p.name && p.demand == DemandSource::Scaleset)
                        .map(|s| s.session.clone()),
                    policy: p,
                }
            })
            .collect();
        let since = now - PICTURE_WINDOW_MS;
        Ok(Snapshot {
            now,
            data_version,
            host,
            heartbeat,
            isolation,
            runner,
            targets,
            profiles,
            attempts,
            queue: store.queue_samples(None, since)?,
            latency: store.latency_samples(None, since)?,
            meters,
            pool: None,
            link: daemon_facts::LinkSeen::read(store),
            reruns: store.recent_reruns(RECENT_RERUNS)?,
            usage: {
                let today = crate::domain::rollup::day_of(now);
                store.usage_rows(today - super::usage::CHART_DAYS + 1, today)?
            },
        }
        .names_escaped())
    }

    /// Every name from outside that `top` may draw (jobs' repository, workflow and job
    /// names, GitHub's runner names and labels, the coordinator's jobs) with its control
    /// and bidirectional characters escaped as the CLI prints them
    /// (`printable::escape`: a line break as `\u{a}`), at the one read all panes
    /// draw from. `ui::defuse` still strips whatever else reaches a cell.
    fn names_escaped(mut self) -> Snapshot {
        use crate::printable::escape_in_place as esc;
        let opt = |s: &mut Option<String>| {
            if let Some(s) = s {
                esc(s);
            }
        };
        for a in &mut self.attempts {
            opt(&mut a.job_name);
            if let Some(o) = &mut a.owner {
                esc(&mut o.repo);
                opt(&mut o.workflow);
                esc(&mut o.job_name);
            }
        }
        for r in &mut self.usage {
            esc(&mut r.host);
            esc(&mut r.key.repo);
            esc(&mut r.key.workflow);
            esc(&mut r.key.job);
        }
        for r in &mut self.reruns {
            opt(&mut r.repo);
            opt(&mut r.job_name);
        }
        for t in &mut self.targets {
            for r in t.runners.iter_mut().flat_map(|s| s.runners.iter_mut()) {
                esc(&mut r.name);
                r.labels.iter_mut().for_each(esc);
            }
        }
        if let Some(p) = &mut self.pool {
            for j in p
                .leases
                .iter_mut()
                .chain(&mut p.running)
                .chain(&mut p.queued)
            {
                esc(&mut j.repo);
                esc(&mut j.name);
                j.labels.iter_mut().for_each(esc);
                opt(&mut j.runner_name);
            }
        }
        self
    }

    /// Adds the coordinator's pool from the same store file (its tables are not part
    /// of the `Store` trait: only a coordinator writes them).
    pub fn with_pool(mut self, coord: Option<&SqliteStore>) -> Result<Snapshot, StoreError> {
        self.pool = match coord {
            Some(s) => super::pool::PoolSnapshot::load(s)?,
            None => None,
        };
        Ok(self.names_escaped())
    }

    /// The daemon beat less than [`HEARTBEAT_STALE_MS`] ago.
    pub fn daemon_alive(&self) -> bool {
        self.heartbeat
            .as_ref()
            .is_some_and(|b| b.alive_at(self.now))
    }

    /// Runners that may be alive, across all profiles: what counts against capacity.
    pub fn live_total(&self) -> u32 {
        self.attempts.iter().filter(|a| a.state.is_live()).count() as u32
    }

    pub fn capacity(&self) -> u32 {
        self.host.as_ref().map_or(0, |h| h.capacity)
    }

    pub fn attempt(&self, id: i64) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.id == id)
    }

    pub fn profile(&self, name: &str) -> Option<&ProfileRow> {
        self.profiles.iter().find(|p| p.policy.name == name)
    }
}
