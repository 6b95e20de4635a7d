//! What the daemon tells its metrics registry (`Shared::metrics`): runner counts from
//! the open attempts, demand, starts and failures, GitHub responses, rate limit and
//! link mode per target, the pass times `/healthz` judges freshness by and the CPU time
//! each pass took. Kept apart
//! so each loop carries one call per fact and the loops stay about reconciling.

use crate::daemon::shared::{Shared, lock};
use crate::domain::{Attempt, AttemptState, DemandSource, Outcome, Reason};
use crate::github::{GitHubClient, Observer};
use crate::metrics::{Metrics, SessionFigures};
use crate::reconcile::allocate::Allocation;
use crate::store::Store;
use crate::timefmt::{Millis, now_millis};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// `/healthz` answers 503 once a target loop has not finished a pass (or the main
/// thread has not ticked) for this long. A healthy pass takes well under a second; a
/// pass waiting on GitHub is bounded by the client's call timeout and retries (three
/// tries of at most 60 s), so two minutes means something is wedged, not slow.
pub const STALE_AFTER: Millis = 120_000;

/// The live states every profile reports, as 0 when empty, so a dashboard sees a
/// profile's zeroes instead of missing series.
const ZERO_FILLED: [AttemptState; 4] = [
    AttemptState::Pending,
    AttemptState::Starting,
    AttemptState::Idle,
    AttemptState::Busy,
];

/// Replaces the runner counts: every open attempt by (profile, state), plus zeroes for
/// the live states of every configured profile. Called on the main thread's tick.
pub fn runners(m: &Metrics, store: &dyn Store, open: &[Attempt]) {
    let mut counts: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    for p in store.profiles().unwrap_or_default() {
        for s in ZERO_FILLED {
            counts.insert((p.name.clone(), s.as_str()), 0);
        }
    }
    for a in open.iter().filter(|a| !a.cleaned) {
        *counts
            .entry((a.profile.clone(), a.state.as_str()))
            .or_insert(0) += 1;
    }
    let rows: Vec<(&str, &str, u64)> = counts
        .iter()
        .map(|((p, s), n)| (p.as_str(), *s, *n))
        .collect();
    m.set_runners(&rows);
}

/// The live meters' totals per profile: every profile gets a series (0 with no
/// live runner), so label cardinality is the number of profiles.
pub fn meters(m: &Metrics, store: &dyn Store, open: &[Attempt], book: &crate::meter::LiveBook) {
    let by_profile = live_totals(open, book);
    let mut rows: BTreeMap<String, crate::meter::Totals> = store
        .profiles()
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.name, crate::meter::Totals::default()))
        .collect();
    rows.extend(by_profile);
    let rows: Vec<(&str, crate::meter::Totals)> =
        rows.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    m.set_meters(&rows);
}

/// Each profile's live attempts' latest meters, added up.
pub fn live_totals(
    open: &[Attempt],
    book: &crate::meter::LiveBook,
) -> BTreeMap<String, crate::meter::Totals> {
    let live: BTreeMap<i64, &str> = open
        .iter()
        .filter(|a| a.state.is_live())
        .map(|a| (a.id, a.profile.as_str()))
        .collect();
    crate::meter::totals(
        book.latest()
            .filter_map(|lm| live.get(&lm.attempt).map(|p| (*p, lm))),
    )
}

/// The same totals as the coordinator's status report carries them (at most as many
/// profiles as a frame may name).
pub fn pool_meters(
    open: &[Attempt],
    book: &crate::meter::LiveBook,
) -> BTreeMap<String, crate::coordinator::protocol::ProfileMeters> {
    live_totals(open, book)
        .into_iter()
        .take(crate::coordinator::protocol::MAX_PROFILES)
        .map(|(p, t)| {
            let m = crate::coordinator::protocol::ProfileMeters {
                runners: t.metered,
                rss_bytes: t.rss_bytes,
                cpu_millis: t.cpu_millis,
                cpu_percent: t.cpu_percent.round().clamp(0.0, u32::MAX as f64) as u32,
                processes: t.processes,
            };
            (p, m)
        })
        .collect()
}

/// The scale set sessions as the target loops last recorded them, for this host's
/// `demand=scaleset` profiles (one series per profile): held or not, and the seconds
/// since the last message and poll. Called on the main thread's tick.
pub fn sessions(m: &Metrics, store: &dyn Store, host_id: &str, now: Millis) {
    let ours: Vec<String> = store
        .profiles()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.demand == DemandSource::Scaleset && p.host_id == host_id)
        .map(|p| p.name)
        .collect();
    let rows = store.session_statuses().unwrap_or_default();
    let secs = |t: Option<Millis>| t.map(|t| (now - t).max(0) as f64 / 1000.0);
    let figures: Vec<SessionFigures> = ours
        .iter()
        .map(|p| {
            let st = rows.iter().find(|r| &r.profile == p).map(|r| &r.session);
            SessionFigures {
                profile: p,
                held: st.is_some_and(|s| s.is_held()),
                since_message: secs(st.and_then(|s| s.last_message_at)),
                since_poll: secs(st.and_then(|s| s.last_poll_at)),
            }
        })
        .collect();
    m.set_sessions(&figures);
}

/// A pass's demand per profile (queued jobs plus `min_capacity`), and what limits
/// each profile's starts, in the word `status` shows.
pub fn demand(m: &Metrics, alloc: &Allocation) {
    for pa in &alloc.profiles {
        m.set_demand(&pa.profile, pa.demand as u64);
        m.set_limited_by(&pa.profile, pa.limit.as_str());
        let paced = match pa.limit {
            crate::domain::Limit::Paced { waiting, .. } => waiting,
            _ => 0,
        };
        m.gauge_set(
            crate::metrics::names::STARTS_PACED,
            &[("profile", &pa.profile)],
            paced as f64,
        );
    }
}

/// A runner process was spawned: count it and, when its job's queue time is known,
/// observe the queue-to-start latency.
pub fn started(m: &Metrics, a: &Attempt, now: Millis) {
    m.runner_started(&a.profile);
    if let Some(q) = a.job_queued_at {
        m.queue_to_start(&a.profile, (now - q).max(0) as f64 / 1000.0);
    }
}

/// An attempt ended: counted as a failure when its outcome is failed or orphaned, and
/// as a job lost when its job was lost to the host (`domain::loss`).
pub fn ended(m: &Metrics, a: &Attempt) {
    if matches!(a.outcome, Some(Outcome::Failed | Outcome::Orphaned)) {
        m.runner_failed(&a.profile, reason_label(a.reason.as_ref()));
    }
    if let Some(l) = crate::domain::loss::loss(a) {
        m.job_lost(&a.profile, l.as_str());
    }
}

/// Adds what the daily usage roll-up gained since the last read to the usage counters
/// (`metrics::usage`). The first read names the repositories that used the most CPU
/// over the kept days and sets the baseline; a failed read is tried at the next.
pub fn usage(
    m: &Metrics,
    store: &crate::store::SqliteStore,
    counters: &mut Option<crate::metrics::usage::UsageCounters>,
    now: Millis,
) {
    use crate::domain::host_settings::UsageSettings;
    use crate::domain::rollup::{day_of, first_kept_day};
    use crate::metrics::usage::UsageCounters;
    let Ok(settings) = crate::store::read_host_settings(store).map(|s| UsageSettings::of(&s))
    else {
        return;
    };
    let top = settings.metrics_top;
    let today = day_of(now);
    let c = match counters {
        Some(c) => c,
        None => {
            let from = first_kept_day(now, settings.retention_secs);
            let Ok(ranked) = store.usage_repos_by_cpu(from, top) else {
                return;
            };
            counters.insert(UsageCounters::new(&ranked, top))
        }
    };
    if let Ok(rows) = store.usage_by_day_and_repo(UsageCounters::from_day(today)) {
        m.usage_gained(&c.step(&rows, today, top));
    }
}

/// The usage counters with their baseline read at `now` ([`usage`]); none when the
/// roll-up could not be read (the first minute's read sets it then).
pub fn usage_baseline(
    m: &Metrics,
    store: &crate::store::SqliteStore,
    now: Millis,
) -> Option<crate::metrics::usage::UsageCounters> {
    let mut counters = None;
    usage(m, store, &mut counters, now);
    counters
}

/// A bounded label for a reason: its kind's word (`jit_config: 422 ...` is
/// `jit_config`, `exited_during_job (exit 3)` is `exited_during_job`), so error
/// messages and exit codes never multiply the series; text from another build is
/// `other`, and no reason at all `unknown`.
pub fn reason_label(reason: Option<&Reason>) -> &'static str {
    reason.map_or("unknown", Reason::as_str)
}

/// The observer a target's GitHub client reports every response to.
pub fn github_observer(m: &Arc<Metrics>, target: &str) -> Observer {
    let m = m.clone();
    let target = target.to_string();
    Arc::new(move |endpoint: &str, status: u16| m.github_request(&target, endpoint, status))
}

/// A target's per-pass gauges: the rate limit as GitHub last said (remaining, size,
/// and the seconds left until its window resets, as of `now`), how often the queue is
/// read now (`poll_every_ms`, when it reads one), and the link mode (standalone until
/// the coordinator link reports otherwise).
pub fn target(
    m: &Metrics,
    name: &str,
    client: Option<&GitHubClient>,
    poll_every_ms: Option<i64>,
    now: crate::timefmt::Millis,
) {
    let rate = client.map(|c| c.rate_limit_snapshot()).unwrap_or_default();
    if let Some(r) = rate.remaining {
        m.set_rate_limit_remaining(name, r);
    }
    let t = [("target", name)];
    if let Some(l) = rate.limit {
        m.gauge_set(crate::metrics::names::RATE_LIMIT_LIMIT, &t, l as f64);
    }
    if let Some(r) = rate.reset {
        m.gauge_set(
            crate::metrics::names::RATE_LIMIT_RESET,
            &t,
            ((r - now).max(0) / 1000) as f64,
        );
    }
    if let Some(p) = poll_every_ms {
        m.gauge_set(crate::metrics::names::POLL_INTERVAL, &t, p as f64 / 1000.0);
    }
    m.set_link_mode(name, crate::domain::TargetMode::Standalone.as_str());
    if let Some(c) = client {
        // The credential's book outlives its clients: the counter follows its count.
        let hits = c.points().hits() as f64;
        let seen = m
            .value(crate::metrics::names::SECONDARY_LIMITS, &t)
            .unwrap_or(0.0);
        if hits > seen {
            m.counter_add(crate::metrics::names::SECONDARY_LIMITS, &t, hits - seen);
        }
    }
}

/// A profile's starts were held after a host failure, or are no longer.
pub fn start_held(m: &Metrics, profile: &str, held: bool) {
    m.set_starts_held(profile, held);
}

/// A target loop finished a pass (or started): `/healthz` counts from here. Called on
/// the loop's own thread, so the thread's CPU clock since its previous call is what
/// the pass took (with the worker results handled before it; waiting costs none):
/// `runner_manager_pass_cpu_seconds`. The first call of a thread only sets the mark.
pub fn passed(shared: &Shared, target: &str) {
    lock(&shared.beats.passes).insert(target.to_string(), now_millis());
    let now = thread_cpu_nanos();
    let prev = LAST_PASS_CPU.with(|c| c.replace(now));
    if let Some(secs) = cpu_between(prev, now) {
        shared.metrics.pass_cpu(target, secs);
    }
}

thread_local! {
    /// The calling loop thread's CPU clock at its last [`passed`], in nanoseconds.
    static LAST_PASS_CPU: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// The calling thread's CPU time in nanoseconds; None where the clock is unavailable.
fn thread_cpu_nanos() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Seconds of CPU between two readings of one thread's clock; nothing without both.
pub fn cpu_between(prev: Option<u64>, now: Option<u64>) -> Option<f64> {
    let (prev, now) = (prev?, now?);
    Some(now.saturating_sub(prev) as f64 / 1e9)
}

/// The main thread ticked.
pub fn ticked(shared: &Shared) {
    shared
        .beats
        .last_tick
        .store(now_millis(), Ordering::Relaxed);
}

/// Points `/healthz` at this daemon's pass times. Holds the shared state weakly: the
/// registry lives inside it.
pub fn install_freshness(shared: &Arc<Shared>) {
    let weak: Weak<Shared> = Arc::downgrade(shared);
    shared.metrics.set_freshness_check(move || {
        let Some(s) = weak.upgrade() else {
            return false;
        };
        let running: Vec<String> = s.loops.names();
        let passes = lock(&s.beats.passes);
        // A loop that has a thread but no recorded pass yet is judged by its start,
        // which `passed` records first; missing means it just appeared.
        let times = running.iter().filter_map(|n| passes.get(n).copied());
        is_fresh(
            now_millis(),
            s.beats.last_tick.load(Ordering::Relaxed),
            times,
        )
    });
}

/// Starts the `--metrics-listen` listener on `listen`, stopped when every sender of
/// `shutdown` is gone. A bind failure is the daemon's startup error.
pub fn serve(
    listen: std::net::SocketAddr,
    shared: &Arc<Shared>,
    shutdown: &crossbeam_channel::Receiver<()>,
) -> Result<std::thread::JoinHandle<()>, String> {
    install_freshness(shared);
    let (addr, thread) = crate::metrics::serve_on(listen, shared.metrics.clone(), shutdown.clone())
        .map_err(|e| format!("cannot serve metrics: {e}"))?;
    crate::log_info!("metrics_listening", addr = addr);
    Ok(thread)
}

/// Fresh when the main thread ticked and every running loop passed within
/// [`STALE_AFTER`] of `now`.
pub fn is_fresh(now: Millis, last_tick: Millis, passes: impl IntoIterator<Item = Millis>) -> bool {
    now - last_tick < STALE_AFTER && passes.into_iter().all(|p| now - p < STALE_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_has_its_series_and_one_is_set_at_a_time() {
        use crate::domain::{Limit, NotReconciling};
        let all = [
            Limit::Demand,
            Limit::MinCapacity,
            Limit::MaxCapacity,
            Limit::HostCapacity,
            Limit::MonitorOnly,
            Limit::NotReconciling(NotReconciling::Paused),
            Limit::ForeignHost,
            Limit::RateLimited(0),
            Limit::CredentialsRefused(0),
            Limit::Paced {
                waiting: 1,
                next: 0,
            },
        ];
        for l in &all {
            assert!(crate::metrics::LIMITS.contains(&l.as_str()), "{l}");
        }
        let m = Metrics::new();
        m.set_limited_by("linux", "max_capacity");
        m.set_limited_by("linux", "rate_limited");
        let v = |by| {
            m.value(
                crate::metrics::names::LIMITED_BY,
                &[("profile", "linux"), ("by", by)],
            )
        };
        assert_eq!(
            (v("rate_limited"), v("max_capacity")),
            (Some(1.0), Some(0.0))
        );
    }

    #[test]
    fn freshness_needs_the_tick_and_every_loop() {
        let now = 1_000_000;
        assert!(is_fresh(now, now - 1_000, [now - 500, now - 119_000]));
        assert!(is_fresh(now, now, []));
        assert!(!is_fresh(now, now - STALE_AFTER, []));
        assert!(!is_fresh(now, now, [now - 10, now - STALE_AFTER - 1]));
    }

    #[test]
    fn a_pass_costs_the_cpu_since_the_last_mark() {
        assert_eq!(cpu_between(None, Some(5)), None);
        assert_eq!(cpu_between(Some(5), None), None);
        assert_eq!(cpu_between(Some(1_000_000), Some(3_500_000)), Some(0.0025));
        // A clock never runs back; if it seemed to, the pass cost nothing.
        assert_eq!(cpu_between(Some(9), Some(3)), Some(0.0));
    }

    #[test]
    fn reasons_become_bounded_labels() {
        use crate::domain::ReasonKind::*;
        for (reason, want) in [
            (
                Some(Reason::message(JitConfig, "422 Validation failed")),
                "jit_config",
            ),
            (Some(Reason::exit(ExitedDuringJob, 3)), "exited_during_job"),
            (
                Some(Reason::message(Orphaned, "no runner process after restart")),
                "orphaned",
            ),
            (Some(Reason::new(BootstrapTimeout)), "bootstrap_timeout"),
            (Some(Reason::job("Failed")), "job"),
            (None, "unknown"),
            // Another build's text never becomes a label of its own.
            (Some(Reason::parse("\"quoted\" text")), "other"),
            (Some(Reason::parse(&"x".repeat(100))), "other"),
        ] {
            assert_eq!(reason_label(reason.as_ref()), want, "{reason:?}");
        }
    }
}
