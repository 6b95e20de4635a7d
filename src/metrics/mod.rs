//! The daemon's metrics: a small registry of labelled counters, gauges and histograms
//! (`Metrics`), its Prometheus text exposition (`exposition`), and the optional loopback
//! listener serving `/metrics` and `/healthz` (`serve`).
//!
//! Our own rather than a crate: the whole need is a map of labelled numbers behind one
//! mutex and a text format of a few lines; the registry crates bring global state and
//! macros we would then have to work around.

mod exposition;
mod serve;
pub mod usage;

pub use serve::{serve, serve_on};

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// A metric's kind, as its `# TYPE` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Label pairs in a fixed (sorted) order, so `{a,b}` and `{b,a}` are one series.
pub type Labels = Vec<(String, String)>;

/// One histogram series: counts per upper bound (not cumulative; the exposition sums).
#[derive(Debug, Clone, Default)]
pub struct HistogramValue {
    pub counts: Vec<u64>,
    /// Observations above the largest bound (the `+Inf` bucket's own share).
    pub over: u64,
    pub sum: f64,
    pub count: u64,
}

#[derive(Debug, Clone)]
pub(crate) enum Series {
    Scalar(f64),
    Histogram(HistogramValue),
}

#[derive(Debug)]
pub(crate) struct Family {
    pub help: &'static str,
    pub kind: Kind,
    /// Histogram bucket upper bounds, increasing; empty for the others.
    pub buckets: &'static [f64],
    pub series: BTreeMap<Labels, Series>,
}

/// Metric names the daemon updates, so callers and tests share one spelling.
pub mod names {
    pub const BUILD_INFO: &str = "runner_manager_build_info";
    pub const RUNNERS: &str = "runner_manager_runners";
    pub const DEMAND: &str = "runner_manager_demand";
    pub const STARTS: &str = "runner_manager_runner_starts_total";
    pub const FAILURES: &str = "runner_manager_runner_failures_total";
    pub const JOBS_LOST: &str = "runner_manager_jobs_lost_total";
    pub const JOBS_RERUN: &str = "runner_manager_jobs_rerun_total";
    pub const QUEUE_TO_START: &str = "runner_manager_queue_to_start_seconds";
    pub const GITHUB_REQUESTS: &str = "runner_manager_github_requests_total";
    pub const RATE_LIMIT_REMAINING: &str = "runner_manager_github_rate_limit_remaining";
    pub const LINK_MODE: &str = "runner_manager_link_mode";
    pub const STARTS_HELD: &str = "runner_manager_starts_held";
    pub const LIMITED_BY: &str = "runner_manager_limited_by";
    pub const RATE_LIMIT_LIMIT: &str = "runner_manager_github_rate_limit_limit";
    pub const RATE_LIMIT_RESET: &str = "runner_manager_github_rate_limit_reset_seconds";
    pub const POLL_INTERVAL: &str = "runner_manager_poll_interval_seconds";
    pub const ISOLATION: &str = "runner_manager_isolation";
    pub const RSS_BYTES: &str = "runner_manager_runner_rss_bytes";
    pub const CPU_SECONDS: &str = "runner_manager_runner_cpu_seconds";
    pub const CPU_PERCENT: &str = "runner_manager_runner_cpu_percent";
    pub const PROCESSES: &str = "runner_manager_runner_processes";
    pub const SESSION_HELD: &str = "runner_manager_scaleset_session_held";
    pub const SINCE_MESSAGE: &str = "runner_manager_scaleset_seconds_since_message";
    pub const SINCE_POLL: &str = "runner_manager_scaleset_seconds_since_poll";
    pub const STATE_DIR_FREE: &str = "runner_manager_state_dir_free_bytes";
    pub const DISK_STARTS_HELD: &str = "runner_manager_disk_starts_held";
    pub const FITNESS_STARTS_HELD: &str = "runner_manager_fitness_starts_held";
    pub const PASS_CPU: &str = "runner_manager_pass_cpu_seconds";
    pub const STARTS_PACED: &str = "runner_manager_starts_paced";
    pub const SECONDARY_LIMITS: &str = "runner_manager_github_secondary_limits_total";
    pub const USAGE_CPU: &str = "runner_manager_usage_cpu_seconds_total";
    pub const USAGE_RUNNER_SECONDS: &str = "runner_manager_usage_runner_seconds_total";
    pub const USAGE_JOBS: &str = "runner_manager_usage_jobs_total";
    pub const USAGE_GIB_SECONDS: &str = "runner_manager_usage_memory_gib_seconds_total";
    pub const USAGE_LOST: &str = "runner_manager_usage_jobs_lost_total";
    pub const USAGE_RERUN: &str = "runner_manager_usage_jobs_rerun_total";
}

/// Queue-to-start latency buckets, in seconds: a warm pool starts in seconds, a cold
/// one in tens of seconds; anything past ten minutes is a problem whatever its size.
pub const LATENCY_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// CPU time per target loop pass, in seconds: a pass over a quiet target takes well
/// under a millisecond, a busy one a few; tens of milliseconds would mean the pass
/// does work that grows (with history, with the queue).
pub const PASS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// The link modes of a target (`reconcile::target_mode`); one of them is 1 at a time.
pub const LINK_MODES: &[&str] = &["standalone", "coordinated", "fallback"];

/// The containment words (`domain::InEffect::word`); one of them is 1 at a time.
pub const ISOLATION_MODES: &[&str] = &["uids", "none", "refused"];

/// The words of what limits a profile's starts (`domain::Limit::as_str`), the `by`
/// label of `runner_manager_limited_by`.
pub const LIMITS: &[&str] = &[
    "demand",
    "min_capacity",
    "max_capacity",
    "host_capacity",
    "monitor_only",
    "not_reconciling",
    "foreign_host",
    "rate_limited",
    "credentials_refused",
    "paced",
];

/// One family the daemon registers: its name, kind, HELP text and (for a histogram)
/// bucket bounds.
struct Definition {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    buckets: &'static [f64],
}

const fn counter(name: &'static str, help: &'static str) -> Definition {
    Definition {
        name,
        kind: Kind::Counter,
        help,
        buckets: &[],
    }
}

const fn gauge(name: &'static str, help: &'static str) -> Definition {
    Definition {
        name,
        kind: Kind::Gauge,
        help,
        buckets: &[],
    }
}

const fn histogram(name: &'static str, help: &'static str, buckets: &'static [f64]) -> Definition {
    Definition {
        name,
        kind: Kind::Histogram,
        help,
        buckets,
    }
}

/// The daemon's metrics, as `Metrics::new` registers them, in this order.
const DEFINITIONS: &[Definition] = {
    use names::*;
    &[
        gauge(BUILD_INFO, "The running runner-manager's version; always 1"),
        gauge(
            RUNNERS,
            "Live runners (attempts not yet cleaned) by profile and attempt state",
        ),
        gauge(
            DEMAND,
            "Runners a profile needs now: matching queued jobs plus min_capacity",
        ),
        counter(STARTS, "Runners started, by profile"),
        counter(
            FAILURES,
            "Attempts that ended failed or orphaned, by profile and reason",
        ),
        counter(
            JOBS_LOST,
            "Jobs lost to the host (the runner killed, crashed or gone mid-job), by profile and reason",
        ),
        counter(
            JOBS_RERUN,
            "Jobs lost to the host, by profile and what became of them: rerun (GitHub queued \
             them again), off, not_failed, refused, unknown or gave_up",
        ),
        histogram(
            QUEUE_TO_START,
            "Seconds from a job being queued to its runner being started",
            LATENCY_BUCKETS,
        ),
        counter(
            GITHUB_REQUESTS,
            "GitHub API responses by target, endpoint template and HTTP status",
        ),
        gauge(
            RATE_LIMIT_REMAINING,
            "GitHub primary rate limit remaining, as last reported, by target",
        ),
        gauge(
            LINK_MODE,
            "A target's link mode: 1 for the current one of standalone, coordinated, fallback",
        ),
        gauge(
            STARTS_HELD,
            "1 while a profile's starts are held after a start failed for a host reason",
        ),
        gauge(
            LIMITED_BY,
            "What limits a profile's starts: 1 for the current one of the words `status` \
             shows (demand, max_capacity, rate_limited...), by profile",
        ),
        gauge(
            STARTS_PACED,
            "Starts of a profile waiting for GitHub's per-minute points for JIT configs \
             (its secondary rate limit), by profile",
        ),
        counter(
            SECONDARY_LIMITS,
            "Secondary rate limits GitHub answered anyway (403 or 429 saying so), by \
             target; the goal is 0",
        ),
        gauge(
            RATE_LIMIT_LIMIT,
            "GitHub primary rate limit per window, as last reported, by target",
        ),
        gauge(
            RATE_LIMIT_RESET,
            "Seconds until GitHub's rate-limit window resets, as last reported, by target",
        ),
        gauge(
            POLL_INTERVAL,
            "Seconds between a target's queue reads now: its poll_interval, stretched by \
             the rate-limit budget governor when the budget thins",
        ),
        gauge(
            ISOLATION,
            "The containment runners start with: 1 for the current one of uids, none, refused",
        ),
        gauge(
            RSS_BYTES,
            "Resident memory of a profile's live runners now, summed, by profile",
        ),
        gauge(
            CPU_SECONDS,
            "CPU time used so far by a profile's live runners, summed, by profile \
             (falls when a runner ends)",
        ),
        gauge(
            CPU_PERCENT,
            "CPU use of a profile's live runners over the last sampling interval, \
             summed (100 is one core), by profile",
        ),
        gauge(
            PROCESSES,
            "Processes of a profile's live runners, summed, by profile",
        ),
        gauge(
            SESSION_HELD,
            "1 while this host holds a scale set profile's message session, by profile",
        ),
        gauge(
            SINCE_MESSAGE,
            "Seconds since a scale set profile's last message arrived, by profile \
             (no series before the first)",
        ),
        gauge(
            SINCE_POLL,
            "Seconds since a scale set profile's last long poll came back, by profile \
             (no series before the first)",
        ),
        gauge(
            STATE_DIR_FREE,
            "Free bytes on the state directory's filesystem, as last read \
             (no series while it cannot be read)",
        ),
        gauge(
            DISK_STARTS_HELD,
            "1 while no runner starts because the state directory's filesystem is under \
             the host's disk_reserve (until it has twice that free)",
        ),
        gauge(
            FITNESS_STARTS_HELD,
            "1 while no runner of the profile starts because a required fitness check \
             fails (doctor's required checks: its tools, the host's runner users)",
        ),
        counter(
            USAGE_CPU,
            "CPU-seconds of ended runners, by repository (the usage_metrics_top most \
             used by name, the rest `other`, jobs no source named `unknown`)",
        ),
        counter(
            USAGE_RUNNER_SECONDS,
            "Runner-seconds of ended runners, by repository and state (busy with its job, \
             or idle before it)",
        ),
        counter(USAGE_JOBS, "Jobs run by ended runners, by repository"),
        counter(
            USAGE_GIB_SECONDS,
            "Memory held by ended runners over their lives (mean RSS times runner time), \
             in GiB-seconds, by repository",
        ),
        counter(USAGE_LOST, "Jobs lost to the host, by repository"),
        counter(USAGE_RERUN, "Lost jobs run again, by repository"),
        histogram(
            PASS_CPU,
            "CPU time a target loop's thread spent per pass (with the worker results \
             handled before it), by target",
            PASS_BUCKETS,
        ),
    ]
};

/// One scale set profile's session, as [`Metrics::set_sessions`] takes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionFigures<'a> {
    pub profile: &'a str,
    /// This host holds the profile's message session now.
    pub held: bool,
    /// Seconds since its last message arrived; `None` before the first.
    pub since_message: Option<f64>,
    /// Seconds since its last long poll came back; `None` before the first.
    pub since_poll: Option<f64>,
}

type FreshnessHook = Box<dyn Fn() -> bool + Send + Sync>;

/// The registry. `Send + Sync`; every method takes `&self`. Updates are a map lookup
/// under one mutex, cheap next to a pass that makes HTTP calls.
pub struct Metrics {
    families: Mutex<BTreeMap<&'static str, Family>>,
    fresh: Mutex<Option<FreshnessHook>>,
    /// The runner uids the listener refuses (`serve::refused`), while per-attempt
    /// uids are in effect.
    closed_to: Mutex<Option<crate::domain::UidRange>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another thread must not take the metrics down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    let mut l: Labels = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    l
}

impl Metrics {
    /// A registry with the daemon's metrics registered (HELP and TYPE known, no series
    /// yet except `runner_manager_build_info`).
    pub fn new() -> Metrics {
        let m = Metrics {
            families: Mutex::new(BTreeMap::new()),
            fresh: Mutex::new(None),
            closed_to: Mutex::new(None),
        };
        for d in DEFINITIONS {
            m.register(d.name, d.kind, d.help, d.buckets);
        }
        m.gauge_set(
            names::BUILD_INFO,
            &[("version", env!("CARGO_PKG_VERSION"))],
            1.0,
        );
        m
    }

    /// Declares a family. Registering a name twice keeps the first declaration.
    pub fn register(
        &self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
        buckets: &'static [f64],
    ) {
        lock(&self.families).entry(name).or_insert(Family {
            help,
            kind,
            buckets,
            series: BTreeMap::new(),
        });
    }

    fn with_series(&self, name: &str, pairs: &[(&str, &str)], f: impl FnOnce(&mut Family, Labels)) {
        let mut fams = lock(&self.families);
        // An unregistered name is a programming error; dropping the update keeps the
        // exposition valid (no samples without HELP/TYPE) and a unit test catches it.
        debug_assert!(fams.contains_key(name), "metric {name} is not registered");
        if let Some(fam) = fams.get_mut(name) {
            f(fam, labels(pairs));
        }
    }

    /// Adds `v` (>= 0) to a counter.
    pub fn counter_add(&self, name: &str, pairs: &[(&str, &str)], v: f64) {
        if v.is_nan() || v < 0.0 {
            return; // counters only go up; NaN and negatives are dropped
        }
        self.with_series(name, pairs, |fam, l| {
            let e = fam.series.entry(l).or_insert(Series::Scalar(0.0));
            if let Series::Scalar(x) = e {
                *x += v;
            }
        });
    }

    pub fn gauge_set(&self, name: &str, pairs: &[(&str, &str)], v: f64) {
        self.with_series(name, pairs, |fam, l| {
            fam.series.insert(l, Series::Scalar(v));
        });
    }

    /// Replaces every series of a gauge family at once, so a series that is no longer
    /// reported (a profile with no runners in some state) disappears instead of
    /// keeping its last value.
    pub fn gauge_replace(&self, name: &str, rows: &[(Vec<(&str, &str)>, f64)]) {
        let mut fams = lock(&self.families);
        debug_assert!(fams.contains_key(name), "metric {name} is not registered");
        if let Some(fam) = fams.get_mut(name) {
            fam.series = rows
                .iter()
                .map(|(p, v)| (labels(p), Series::Scalar(*v)))
                .collect();
        }
    }

    pub fn observe(&self, name: &str, pairs: &[(&str, &str)], v: f64) {
        if v.is_nan() {
            return;
        }
        self.with_series(name, pairs, |fam, l| {
            let n = fam.buckets.len();
            let e = fam.series.entry(l).or_insert_with(|| {
                Series::Histogram(HistogramValue {
                    counts: vec![0; n],
                    ..Default::default()
                })
            });
            if let Series::Histogram(h) = e {
                match fam.buckets.iter().position(|b| v <= *b) {
                    Some(i) => h.counts[i] += 1,
                    None => h.over += 1,
                }
                h.sum += v;
                h.count += 1;
            }
        });
    }

    // The daemon's vocabulary, on top of the generic calls.

    /// Runner counts per (profile, state); replaces the previous pass's figures.
    pub fn set_runners(&self, counts: &[(&str, &str, u64)]) {
        let rows: Vec<(Vec<(&str, &str)>, f64)> = counts
            .iter()
            .map(|(p, s, n)| (vec![("profile", *p), ("state", *s)], *n as f64))
            .collect();
        self.gauge_replace(names::RUNNERS, &rows);
    }

    /// The live meters' per-profile totals; replaces the previous figures, so a
    /// profile with no live runner left shows 0 (one series per profile and family).
    pub fn set_meters(&self, totals: &[(&str, crate::meter::Totals)]) {
        let rows = |f: &dyn Fn(&crate::meter::Totals) -> f64| -> Vec<(Vec<(&str, &str)>, f64)> {
            totals
                .iter()
                .map(|(p, t)| (vec![("profile", *p)], f(t)))
                .collect()
        };
        self.gauge_replace(names::RSS_BYTES, &rows(&|t| t.rss_bytes as f64));
        self.gauge_replace(names::CPU_SECONDS, &rows(&|t| t.cpu_millis as f64 / 1000.0));
        self.gauge_replace(names::CPU_PERCENT, &rows(&|t| t.cpu_percent));
        self.gauge_replace(names::PROCESSES, &rows(&|t| t.processes as f64));
    }

    /// The scale set profiles' sessions; replaces the previous figures, so a profile
    /// no longer served here loses its series.
    pub fn set_sessions(&self, rows: &[SessionFigures]) {
        let held: Vec<(Vec<(&str, &str)>, f64)> = rows
            .iter()
            .map(|r| (vec![("profile", r.profile)], if r.held { 1.0 } else { 0.0 }))
            .collect();
        let ages = |f: fn(&SessionFigures) -> Option<f64>| -> Vec<(Vec<(&str, &str)>, f64)> {
            rows.iter()
                .filter_map(|r| f(r).map(|v| (vec![("profile", r.profile)], v)))
                .collect()
        };
        self.gauge_replace(names::SESSION_HELD, &held);
        self.gauge_replace(names::SINCE_MESSAGE, &ages(|r| r.since_message));
        self.gauge_replace(names::SINCE_POLL, &ages(|r| r.since_poll));
    }

    pub fn set_demand(&self, profile: &str, demand: u64) {
        self.gauge_set(names::DEMAND, &[("profile", profile)], demand as f64);
    }

    pub fn runner_started(&self, profile: &str) {
        self.counter_add(names::STARTS, &[("profile", profile)], 1.0);
    }

    pub fn runner_failed(&self, profile: &str, reason: &str) {
        self.counter_add(
            names::FAILURES,
            &[("profile", profile), ("reason", reason)],
            1.0,
        );
    }

    pub fn job_lost(&self, profile: &str, reason: &str) {
        self.counter_add(
            names::JOBS_LOST,
            &[("profile", profile), ("reason", reason)],
            1.0,
        );
    }

    /// A lost job's row settled: `result` is its `domain::rerun::RerunState` word.
    pub fn job_rerun(&self, profile: &str, result: &str) {
        self.counter_add(
            names::JOBS_RERUN,
            &[("profile", profile), ("result", result)],
            1.0,
        );
    }

    /// What the usage roll-up gained per repository label (`usage::UsageCounters`).
    pub fn usage_gained(&self, gains: &[(String, crate::domain::rollup::UsageFigures)]) {
        use names::*;
        for (repo, f) in gains {
            let r = [("repo", repo.as_str())];
            self.counter_add(USAGE_CPU, &r, f.cpu_ms as f64 / 1000.0);
            for (state, ms) in [("busy", f.busy_ms), ("idle", f.idle_ms)] {
                let l = [("repo", repo.as_str()), ("state", state)];
                self.counter_add(USAGE_RUNNER_SECONDS, &l, ms as f64 / 1000.0);
            }
            self.counter_add(USAGE_JOBS, &r, f.jobs as f64);
            self.counter_add(USAGE_GIB_SECONDS, &r, f.gib_secs());
            self.counter_add(USAGE_LOST, &r, f.lost as f64);
            self.counter_add(USAGE_RERUN, &r, f.reruns as f64);
        }
    }

    pub fn queue_to_start(&self, profile: &str, seconds: f64) {
        self.observe(names::QUEUE_TO_START, &[("profile", profile)], seconds);
    }

    pub fn pass_cpu(&self, target: &str, seconds: f64) {
        self.observe(names::PASS_CPU, &[("target", target)], seconds);
    }

    /// One GitHub response; `endpoint` is the path template (bounded cardinality), never
    /// the concrete path.
    pub fn github_request(&self, target: &str, endpoint: &str, status: u16) {
        self.counter_add(
            names::GITHUB_REQUESTS,
            &[
                ("target", target),
                ("endpoint", endpoint),
                ("status", &status.to_string()),
            ],
            1.0,
        );
    }

    pub fn set_rate_limit_remaining(&self, target: &str, remaining: u64) {
        self.gauge_set(
            names::RATE_LIMIT_REMAINING,
            &[("target", target)],
            remaining as f64,
        );
    }

    /// Sets `mode` (one of [`LINK_MODES`]) to 1 and the target's other modes to 0.
    pub fn set_link_mode(&self, target: &str, mode: &str) {
        for m in LINK_MODES {
            let v = if *m == mode { 1.0 } else { 0.0 };
            self.gauge_set(names::LINK_MODE, &[("target", target), ("mode", m)], v);
        }
    }

    pub fn set_starts_held(&self, profile: &str, held: bool) {
        let v = if held { 1.0 } else { 0.0 };
        self.gauge_set(names::STARTS_HELD, &[("profile", profile)], v);
    }

    /// Sets `by` (one of [`LIMITS`]) to 1 for the profile and its other words to 0.
    pub fn set_limited_by(&self, profile: &str, by: &str) {
        for w in LIMITS {
            let v = if *w == by { 1.0 } else { 0.0 };
            self.gauge_set(names::LIMITED_BY, &[("profile", profile), ("by", w)], v);
        }
    }

    /// Sets `mode` (one of [`ISOLATION_MODES`]) to 1 and the others to 0.
    /// The runner uids whose connections the listener refuses: the host's
    /// `runner_uids` while they are in effect, else none.
    pub fn close_to(&self, runner_uids: Option<crate::domain::UidRange>) {
        *lock(&self.closed_to) = runner_uids;
    }

    /// See [`Metrics::close_to`].
    pub fn closed_to(&self) -> Option<crate::domain::UidRange> {
        *lock(&self.closed_to)
    }

    pub fn set_isolation(&self, mode: &str) {
        for m in ISOLATION_MODES {
            let v = if *m == mode { 1.0 } else { 0.0 };
            self.gauge_set(names::ISOLATION, &[("mode", m)], v);
        }
    }

    /// The state directory's free space (`None`: unreadable, no series) and whether
    /// starts are held for want of it.
    pub fn set_disk(&self, free: Option<u64>, held: bool) {
        let rows: Vec<(Vec<(&str, &str)>, f64)> =
            free.map(|f| (Vec::new(), f as f64)).into_iter().collect();
        self.gauge_replace(names::STATE_DIR_FREE, &rows);
        let v = if held { 1.0 } else { 0.0 };
        self.gauge_set(names::DISK_STARTS_HELD, &[], v);
    }

    /// Each profile, 1 while a required fitness check stops its starts; profiles no
    /// longer judged have no series.
    pub fn set_fitness_held(&self, profiles: &[(String, bool)]) {
        let rows: Vec<(Vec<(&str, &str)>, f64)> = profiles
            .iter()
            .map(|(p, held)| (vec![("profile", p.as_str())], if *held { 1.0 } else { 0.0 }))
            .collect();
        self.gauge_replace(names::FITNESS_STARTS_HELD, &rows);
    }

    /// The `/healthz` freshness check: true while the daemon's last pass is recent.
    /// Without one, `/healthz` answers ok whenever the listener is up.
    pub fn set_freshness_check(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        *lock(&self.fresh) = Some(Box::new(check));
    }

    pub fn is_fresh(&self) -> bool {
        lock(&self.fresh).as_ref().is_none_or(|f| f())
    }

    /// The Prometheus text exposition of everything registered.
    pub fn render(&self) -> String {
        exposition::render(&lock(&self.families))
    }

    /// A scalar series' value, for tests and `status`.
    pub fn value(&self, name: &str, pairs: &[(&str, &str)]) -> Option<f64> {
        match lock(&self.families).get(name)?.series.get(&labels(pairs))? {
            Series::Scalar(v) => Some(*v),
            Series::Histogram(h) => Some(h.count as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_gauges_histograms() {
        let m = Metrics::new();
        m.runner_started("gpu");
        m.runner_started("gpu");
        m.counter_add(names::STARTS, &[("profile", "gpu")], -5.0);
        assert_eq!(m.value(names::STARTS, &[("profile", "gpu")]), Some(2.0));
        m.set_runners(&[("gpu", "idle", 2), ("gpu", "busy", 1)]);
        m.set_runners(&[("gpu", "busy", 3)]);
        assert_eq!(
            m.value(names::RUNNERS, &[("profile", "gpu"), ("state", "idle")]),
            None
        );
        assert_eq!(
            m.value(names::RUNNERS, &[("state", "busy"), ("profile", "gpu")]),
            Some(3.0)
        );
        m.queue_to_start("gpu", 0.5);
        m.queue_to_start("gpu", 7000.0);
        m.queue_to_start("gpu", f64::NAN);
        assert_eq!(
            m.value(names::QUEUE_TO_START, &[("profile", "gpu")]),
            Some(2.0)
        );
        m.set_link_mode("t", "fallback");
        assert_eq!(
            m.value(names::LINK_MODE, &[("target", "t"), ("mode", "fallback")]),
            Some(1.0)
        );
        assert_eq!(
            m.value(names::LINK_MODE, &[("target", "t"), ("mode", "standalone")]),
            Some(0.0)
        );
        let figures = |profile, held, since_message, since_poll| SessionFigures {
            profile,
            held,
            since_message,
            since_poll,
        };
        m.set_sessions(&[
            figures("ss", true, Some(5.0), Some(1.5)),
            figures("ss2", false, None, None),
        ]);
        assert_eq!(
            m.value(names::SESSION_HELD, &[("profile", "ss")]),
            Some(1.0)
        );
        assert_eq!(
            m.value(names::SESSION_HELD, &[("profile", "ss2")]),
            Some(0.0)
        );
        assert_eq!(
            m.value(names::SINCE_MESSAGE, &[("profile", "ss")]),
            Some(5.0)
        );
        assert_eq!(m.value(names::SINCE_POLL, &[("profile", "ss2")]), None);
        m.set_sessions(&[figures("ss2", true, None, Some(0.5))]);
        assert_eq!(m.value(names::SESSION_HELD, &[("profile", "ss")]), None);
        assert_eq!(m.value(names::SINCE_POLL, &[("profile", "ss2")]), Some(0.5));
        assert!(m.is_fresh());
        m.set_freshness_check(|| false);
        assert!(!m.is_fresh());
    }
}
