//! The host's side of a coordinated pool, as state: the mutex-guarded launch book,
//! what the link last said (up or down, which targets it covers), the target modes
//! that follow, each target loop's last view, and the sender the reports go back on.
//! `Shared` holds it; the link that feeds it is `pool_link`'s.

use crate::coordinator::link::Report;
use crate::coordinator::protocol::{AttemptFinished, AttemptStarted, LimitReport, UsageInfo};
use crate::domain::Attempt;
use crate::reconcile::launch_book::{LaunchBook, Link, TargetMode, target_mode};
use crate::reconcile::unfit::Unfit;
use crate::timefmt::{Millis, now_millis};
use crate::{log_info, log_warn};
use crossbeam_channel::Sender;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How long the link may be down before the host reads its own demand again, unless
/// `daemon --fallback-grace` says otherwise.
pub const FALLBACK_GRACE: Millis = 30_000;

/// What one target loop last concluded, for judging offers between its passes.
#[derive(Debug, Clone, Default)]
pub struct TargetView {
    pub unfit: BTreeMap<String, Unfit>,
    /// Demand of the profiles that are not directed.
    pub demand: BTreeMap<String, u32>,
    /// What the target's credential last heard of its limits, for the coordinator.
    pub limits: Option<LimitReport>,
}

/// The most reports kept while the link cannot send them; later ones are dropped, as
/// the bounded channel this replaced did.
const REPORTS_HELD: usize = 4096;

pub struct Pool {
    pub book: Mutex<LaunchBook>,
    configured: AtomicBool,
    grace: std::sync::atomic::AtomicI64,
    /// The link, and the targets the last `hello_ack` covered (`None` before any).
    link: Mutex<(Link, Option<Vec<String>>)>,
    reports: Mutex<Option<Sender<Report>>>,
    views: Mutex<HashMap<String, TargetView>>,
}

impl Pool {
    pub fn new(now: Millis) -> Pool {
        Pool {
            book: Mutex::new(LaunchBook::new()),
            configured: AtomicBool::new(false),
            grace: std::sync::atomic::AtomicI64::new(FALLBACK_GRACE),
            link: Mutex::new((Link::Down { since: now }, None)),
            reports: Mutex::new(None),
            views: Mutex::new(HashMap::new()),
        }
    }

    /// A link is configured (or no longer): modes follow.
    pub fn configure(&self, configured: bool, reports: Option<Sender<Report>>, now: Millis) {
        self.configured.store(configured, Ordering::SeqCst);
        *lock(&self.link) = (Link::Down { since: now }, None);
        *lock(&self.reports) = reports;
        for c in lock(&self.book).link_lost() {
            log_info!(
                "launch_closed",
                lease = c.launch.launch.lease_id,
                why = format!("{:?}", c.why)
            );
        }
    }

    pub fn set_grace(&self, grace: Millis) {
        self.grace.store(grace, Ordering::SeqCst);
    }

    pub fn mode(&self, target: &str, now: Millis) -> TargetMode {
        let (link, covered) = lock(&self.link).clone();
        let covered = covered.is_none_or(|c| c.iter().any(|t| t == target));
        let grace = self.grace.load(Ordering::SeqCst);
        target_mode(
            self.configured.load(Ordering::SeqCst),
            link,
            covered,
            now,
            grace,
        )
    }

    pub fn set_view(&self, target: &str, view: TargetView) {
        lock(&self.views).insert(target.to_string(), view);
    }

    /// Unfit profiles of every target, for the `status` report.
    pub fn unfit_profiles(&self) -> Vec<String> {
        lock(&self.views)
            .values()
            .flat_map(|v| v.unfit.keys().cloned())
            .collect()
    }

    /// Every target's credential limits, for the `status` report.
    pub fn limit_reports(&self) -> Vec<LimitReport> {
        lock(&self.views)
            .values()
            .filter_map(|v| v.limits.clone())
            .collect()
    }

    pub fn report(&self, r: Report) {
        if let Some(tx) = lock(&self.reports).as_ref()
            && tx.len() < REPORTS_HELD
        {
            let _ = tx.send(r);
        }
    }

    /// An attempt of a pool profile has its process.
    pub fn started(&self, a: &Attempt) {
        self.report(Report::Started(AttemptStarted {
            lease_id: a.lease_id.clone(),
            runner_name: a.runner_name.clone(),
            target: a.target.clone(),
            profile: a.profile.clone(),
        }));
    }

    /// An attempt's runner life ended.
    pub fn finished(&self, a: &Attempt) {
        let Some(outcome) = a.outcome else { return };
        self.report(Report::Finished(AttemptFinished {
            lease_id: a.lease_id.clone(),
            runner_name: a.runner_name.clone(),
            outcome: outcome.as_str().to_string(),
            duration_secs: a
                .ended_at
                .map(|e| ((e - a.created_at).max(0) / 1000) as u64),
            usage: a.peak_rss_bytes.map(|rss| UsageInfo {
                peak_rss_bytes: rss,
                cpu_secs: a.cpu_millis.unwrap_or(0) as f64 / 1000.0,
                samples: 0,
            }),
        }));
    }

    pub(in crate::daemon) fn link_up(&self, covered: &[String]) {
        *lock(&self.link) = (
            Link::Up {
                since: now_millis(),
            },
            Some(covered.to_vec()),
        );
    }

    pub(in crate::daemon) fn link_lost(&self) {
        let closed = lock(&self.book).link_lost();
        log_warn!(
            "coordinator_link_lost",
            open_launches_dropped = closed.len()
        );
        let mut link = lock(&self.link);
        link.0 = Link::Down {
            since: now_millis(),
        };
    }

    /// The modes of all targets.
    pub fn modes(&self, targets: &[String], now: Millis) -> BTreeMap<String, TargetMode> {
        targets
            .iter()
            .map(|t| (t.clone(), self.mode(t, now)))
            .collect()
    }

    /// Every target's unfit profiles and undirected demand, merged.
    pub(in crate::daemon) fn views(&self) -> (BTreeMap<String, Unfit>, BTreeMap<String, u32>) {
        let mut unfit = BTreeMap::new();
        let mut demand = BTreeMap::new();
        for v in lock(&self.views).values() {
            unfit.extend(v.unfit.clone());
            demand.extend(v.demand.clone());
        }
        (unfit, demand)
    }
}

/// Locks a mutex, taking the data even after a panic, as `shared::lock` does; kept
/// here so that this module, which `Shared` holds, imports nothing of it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
