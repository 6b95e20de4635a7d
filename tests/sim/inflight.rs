//! The GitHub client at a distance: a credential's requests in flight stay within its
//! `InFlight` limit however many callers share it, a demand read's jobs lists go out
//! together, and a shutdown or a rate-limit hold reaches requests waiting for a turn.
//!
//! The sim counts requests in flight per credential from arrival to answer, and the
//! client holds its permit until it has read the answer, so the sim's peak can never
//! exceed the client's bound: an equal peak shows the bound was reached, not passed.
//! Timing assertions are orderings ("fanned out in under half the serial time"), never
//! a speed.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use runner_manager::domain::{CredentialRef, QueuedJob, Target, TargetScope};
use runner_manager::github::{Credential, GhError, GitHubClient, InFlight, ReadCaps, SharedHold};
use runner_manager::secret::Secret;
use runner_manager::sim::{
    FaultAction, FaultRule, Latency, LogEntry, SimConfig, SimHandle, Trigger,
};

use super::support::*;

const REPO_PATH: &str = "/repos/{owner}/{repo}";
const JOBS_PATH: &str = "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs";

fn far(request_ms: u64) -> SimConfig {
    SimConfig {
        latency: Latency {
            request: Duration::from_millis(request_ms),
            jit: Duration::ZERO,
            jitter: 0.0,
        },
        ..SimConfig::default()
    }
}

fn target(h: &SimHandle) -> Target {
    Target {
        name: "t".into(),
        scope: TargetScope::Repo {
            owner: "octo".into(),
            repo: "app".into(),
        },
        api_url: h.url().to_string(),
        // Unused: the client is given its credential directly.
        credential: CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 8,
        secondary_limit: Some(900),
    }
}

fn client(h: &SimHandle, token: &str, limiter: &InFlight) -> GitHubClient {
    GitHubClient::new(&target(h), Credential::Token(Secret::new(token)))
        .with_in_flight(limiter.clone())
}

/// `f`'s result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

/// Runs `calls` callers of `f` at once (all released together) and returns their
/// results.
fn all_at_once<T: Send>(calls: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let start = Barrier::new(calls);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..calls)
            .map(|i| {
                let (start, f) = (&start, &f);
                s.spawn(move || {
                    start.wait();
                    f(i)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// The most requests of the log that were in flight at one instant (strictly
/// overlapping: millisecond truncation can make touching requests equal, never
/// overlapping).
fn peak_overlap(log: &[LogEntry]) -> usize {
    let mut edges: Vec<(i64, i32)> = Vec::new();
    for e in log {
        let done = e
            .done_at
            .expect("a completed request has its completion time");
        edges.push((e.at, 1));
        edges.push((done, -1));
    }
    // At one instant, leaving comes before arriving.
    edges.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        peak = peak.max(now);
    }
    peak as usize
}

#[test]
fn forty_callers_never_have_more_than_the_limit_in_flight() {
    let (h, _) = sim_with(far(50));
    let limiter = InFlight::new(4);
    let c = client(&h, PAT, &limiter);
    let results = all_at_once(40, |_| c.repository_is_public("octo", "app"));
    assert!(results.iter().all(|r| r == &Ok(false)), "{results:?}");
    assert_eq!(h.count("GET", REPO_PATH), 40);
    assert_eq!(h.peak_in_flight()["pat:0"], 4, "{:?}", h.in_flight());
    let usage = limiter.usage();
    assert_eq!((usage.peak, usage.in_use, usage.waiting), (4, 0, 0));
}

#[test]
fn a_limit_of_one_serializes() {
    let (h, _) = sim_with(far(50));
    let limiter = InFlight::new(1);
    let c = client(&h, PAT, &limiter);
    let results = all_at_once(8, |_| c.repository_is_public("octo", "app"));
    assert!(results.iter().all(|r| r == &Ok(false)), "{results:?}");
    assert_eq!(h.peak_in_flight()["pat:0"], 1);
    // Each request arrived only after the one before it was answered.
    let log: Vec<LogEntry> = h
        .request_log()
        .into_iter()
        .filter(|e| e.endpoint == REPO_PATH)
        .collect();
    assert_eq!(log.len(), 8);
    assert_eq!(peak_overlap(&log), 1, "{log:?}");
}

#[test]
fn clients_sharing_a_limiter_share_the_bound_and_other_credentials_do_not() {
    // Long enough that every caller is queued before the first answer.
    let (h, _) = sim_with(far(300));
    let other_token = "ghp_simothertoken";
    let other_id = h.add_pat(other_token);
    // The target loop's client and a scale set feed's: one credential, one limiter.
    let shared = InFlight::new(3);
    let a = client(&h, PAT, &shared);
    let b = client(&h, PAT, &shared);
    // Another target's credential, with a limiter of its own.
    let own = InFlight::new(3);
    let other = client(&h, other_token, &own);
    let results = all_at_once(27, |i| match i % 3 {
        0 => a.repository_is_public("octo", "app"),
        1 => b.repository_is_public("octo", "app"),
        _ => other.repository_is_public("octo", "app"),
    });
    assert!(results.iter().all(|r| r == &Ok(false)), "{results:?}");
    let peak = h.peak_in_flight();
    assert_eq!(peak["pat:0"], 3, "two clients, one bound: {peak:?}");
    assert_eq!(peak[&other_id], 3, "{peak:?}");
    assert_eq!((shared.peak(), own.peak()), (3, 3));
    // Both credentials were at their bound at the same moment: the other credential's
    // requests never waited for the first one's permits.
    assert_eq!(peak_overlap(&h.request_log()), 6);
}

/// `runs` runs of two jobs each in `octo/app`, queued.
fn queue_runs(h: &SimHandle, runs: usize) {
    for i in 0..runs {
        h.enqueue_run(
            "octo/app",
            "CI",
            &[
                (format!("build {i}"), vec!["self-hosted".into()], 60_000),
                (
                    format!("test {i}"),
                    vec!["self-hosted".into(), "gpu".into()],
                    60_000,
                ),
            ],
        );
    }
}

#[test]
fn a_burst_of_runs_is_read_together_with_the_same_jobs_and_then_from_etags() {
    const RUNS: usize = 30;
    const LATENCY_MS: u64 = 50;
    let (h, _) = sim_with(far(LATENCY_MS));
    queue_runs(&h, RUNS);
    // Two clients with ETag caches of their own, so both read everything.
    let serial = client(&h, PAT, &InFlight::new(1));
    let fanned_limiter = InFlight::new(8);
    let fanned = client(&h, PAT, &fanned_limiter);

    let (one_by_one, serial_took) = timed(|| serial.queued_jobs("octo", "app").unwrap());
    let (together, fanned_took) = timed(|| fanned.queued_jobs("octo", "app").unwrap());
    eprintln!(
        "{RUNS} runs at {LATENCY_MS} ms: serial {} ms, fanned out (8) {} ms",
        serial_took.as_millis(),
        fanned_took.as_millis()
    );
    assert_eq!(one_by_one.len(), 2 * RUNS);
    assert_eq!(together, one_by_one, "the same jobs, in the same order");
    // In run order: each run's jobs together, runs as the runs list gives them.
    let runs: Vec<i64> = together.iter().map(|j| j.run_id).collect();
    let mut seen: Vec<i64> = runs.clone();
    seen.dedup();
    assert_eq!(seen.len(), RUNS, "each run's jobs are next to each other");
    assert!(
        fanned_took < serial_took / 2,
        "fanned out {fanned_took:?}, one by one {serial_took:?}"
    );
    assert_eq!(fanned_limiter.peak(), 8);
    assert_eq!(h.count("GET", JOBS_PATH), 2 * RUNS);

    // Nothing changed: every request of the next read is answered 304 from its ETag.
    let before = fanned.stats();
    let again: Vec<QueuedJob> = fanned.queued_jobs("octo", "app").unwrap();
    assert_eq!(again, together);
    let after = fanned.stats();
    let sent = after.requests - before.requests;
    assert_eq!(
        sent,
        RUNS as u64 + 2,
        "two runs lists and one jobs list per run"
    );
    assert_eq!(after.not_modified - before.not_modified, sent, "all 304");
    let answers: Vec<u16> = h
        .request_log()
        .into_iter()
        .rev()
        .take(RUNS + 2)
        .map(|e| e.status)
        .collect();
    assert!(answers.iter().all(|s| *s == 304), "{answers:?}");
}

#[test]
fn several_repositories_are_read_together_in_their_order() {
    let (h, _) = sim_with(far(50));
    queue_runs(&h, 3);
    for (repo, n) in [("octo/site", 2), ("alice/tool", 4)] {
        for i in 0..n {
            h.enqueue_job(repo, &format!("{repo} {i}"), &["self-hosted"], 60_000);
        }
    }
    let repos = [("alice", "tool"), ("octo", "app"), ("octo", "site")];
    let serial = client(&h, PAT, &InFlight::new(1));
    let expected: Vec<QueuedJob> = repos
        .iter()
        .flat_map(|(o, r)| serial.queued_jobs(o, r).unwrap())
        .collect();
    let fanned = client(&h, PAT, &InFlight::new(8));
    let owned: Vec<(String, String)> = repos
        .iter()
        .map(|(o, r)| (o.to_string(), r.to_string()))
        .collect();
    let together = fanned.queued_jobs_of(&owned).unwrap();
    assert_eq!(together, expected);
    let by_repo: Vec<&str> = together.iter().map(|j| j.repo.as_str()).collect();
    assert_eq!(by_repo[0], "alice/tool");
    assert_eq!(by_repo[by_repo.len() - 1], "octo/site");
    assert_eq!(together.len(), 4 + 6 + 2);
}

#[test]
fn the_first_error_fails_the_read_and_the_rest_are_not_sent() {
    const RUNS: usize = 30;
    let (h, _) = sim_with(far(50));
    queue_runs(&h, RUNS);
    let runs: Vec<u64> = {
        let mut ids: Vec<u64> = h.jobs().iter().map(|j| j.run_id).collect();
        ids.sort();
        ids.dedup();
        ids
    };
    // A jobs list GitHub refuses outright (not retried, and not a passing failure
    // that leaves the rest of the read standing), early in the reading order (the
    // oldest runs first).
    h.add_fault(FaultRule::times(
        "GET",
        &format!("/repos/octo/app/actions/runs/{}/jobs", runs[2]),
        1,
        FaultAction::Unauthorized,
    ));
    let c = client(&h, PAT, &InFlight::new(4));
    assert_eq!(
        c.queued_jobs("octo", "app"),
        Err(GhError::Unauthorized { clock_hint: false })
    );
    let sent = h.count("GET", JOBS_PATH);
    assert!(
        sent < RUNS,
        "{sent} of {RUNS} jobs lists sent after a failure"
    );
}

#[test]
fn a_shutdown_while_waiting_for_a_permit_interrupts_at_once() {
    let (h, _) = sim_with(far(2000));
    let limiter = InFlight::new(1);
    let busy = client(&h, PAT, &limiter);
    let (stop, stop_rx) = bounded::<()>(0);
    let waiting = client(&h, PAT, &limiter).with_shutdown(stop_rx);
    std::thread::scope(|s| {
        let first = s.spawn(|| busy.repository_is_public("octo", "app"));
        wait_for(
            "the first request in flight",
            Duration::from_secs(10),
            || (limiter.in_use() == 1).then_some(()),
        );
        let second = s.spawn(|| waiting.repository_is_public("octo", "app"));
        wait_for(
            "the second request waiting",
            Duration::from_secs(10),
            || (limiter.usage().waiting == 1).then_some(()),
        );
        drop(stop);
        assert_eq!(second.join().unwrap(), Err(GhError::Interrupted));
        // Promptly: the request it waited behind is still out.
        assert_eq!(
            limiter.in_use(),
            1,
            "interrupted only after the first ended"
        );
        assert_eq!(limiter.usage().waiting, 0);
        assert_eq!(first.join().unwrap(), Ok(false));
    });
    assert_eq!(
        h.count("GET", REPO_PATH),
        1,
        "the interrupted request was not sent"
    );
}

#[test]
fn a_hold_met_while_others_wait_for_a_permit_stops_them() {
    let (h, _) = sim_with(far(300));
    h.add_fault(FaultRule::times(
        "GET",
        "/repos/octo/app",
        1,
        FaultAction::Forbidden {
            retry_after: Some(60),
        },
    ));
    // The loop's client and a scale set feed's: one credential, one hold, one limiter.
    let limiter = InFlight::new(1);
    let hold = SharedHold::default();
    let first = client(&h, PAT, &limiter).with_shared_hold(hold.clone());
    let queued = client(&h, PAT, &limiter).with_shared_hold(hold.clone());
    std::thread::scope(|s| {
        let a = s.spawn(|| first.repository_is_public("octo", "app"));
        wait_for(
            "the first request in flight",
            Duration::from_secs(10),
            || (limiter.in_use() == 1).then_some(()),
        );
        let b: Vec<_> = (0..3)
            .map(|_| s.spawn(|| queued.repository_is_public("octo", "app")))
            .collect();
        wait_for("three requests waiting", Duration::from_secs(10), || {
            (limiter.usage().waiting == 3).then_some(())
        });
        assert!(matches!(
            a.join().unwrap(),
            Err(GhError::RateLimited { .. })
        ));
        for t in b {
            assert!(
                matches!(t.join().unwrap(), Err(GhError::RateLimited { .. })),
                "a request that waited through the retry-after was refused"
            );
        }
    });
    assert_eq!(h.count("GET", REPO_PATH), 1, "nothing sent after the 403");
    assert!(hold.until() > runner_manager::timefmt::now_millis());
    assert_eq!(queued.stats().refused_while_limited, 3);
}

#[test]
fn a_hold_raised_elsewhere_while_a_request_waits_stops_it() {
    let (h, _) = sim_with(far(500));
    let limiter = InFlight::new(1);
    let hold = SharedHold::default();
    let busy = client(&h, PAT, &limiter).with_shared_hold(hold.clone());
    let waiting = client(&h, PAT, &limiter).with_shared_hold(hold.clone());
    std::thread::scope(|s| {
        let a = s.spawn(|| busy.repository_is_public("octo", "app"));
        wait_for(
            "the first request in flight",
            Duration::from_secs(10),
            || (limiter.in_use() == 1).then_some(()),
        );
        let b = s.spawn(|| waiting.repository_is_public("octo", "app"));
        wait_for(
            "the second request waiting",
            Duration::from_secs(10),
            || (limiter.usage().waiting == 1).then_some(()),
        );
        // Another client of the credential (a scale set listener) met a retry-after.
        let until = runner_manager::timefmt::now_millis() + 60_000;
        hold.raise(until);
        assert_eq!(a.join().unwrap(), Ok(false), "already sent: it completes");
        assert_eq!(b.join().unwrap(), Err(GhError::RateLimited { until }));
    });
    assert_eq!(h.count("GET", REPO_PATH), 1);
}

#[test]
fn a_client_has_a_bound_of_its_own_until_given_its_credentials() {
    let (h, _) = sim();
    let a = GitHubClient::new(&target(&h), Credential::Token(Secret::new(PAT)));
    let b = GitHubClient::new(&target(&h), Credential::Token(Secret::new(PAT)));
    assert!(!a.in_flight().same(b.in_flight()));
    assert_eq!(
        a.in_flight().limit(),
        runner_manager::domain::target::DEFAULT_MAX_IN_FLIGHT,
        "the default"
    );
    let shared = InFlight::new(target(&h).max_in_flight);
    let a = a.with_in_flight(shared.clone());
    let b = b.with_in_flight(shared.clone());
    assert!(a.in_flight().same(b.in_flight()));
    assert_eq!(a.repository_is_public("octo", "app"), Ok(false));
    assert_eq!(shared.peak(), 1);
}

/// At most `n` new runs, every known one.
fn new_only(n: usize) -> ReadCaps<'static> {
    ReadCaps {
        new: n,
        ..ReadCaps::ALL
    }
}

/// Issue 20: a deep queue is read as room frees up. A read reads the jobs of at most
/// `new_cap` runs it never read, the oldest first, and says how many it left; the next
/// read reads the known ones from their ETags (free) and the next new ones.
#[test]
fn a_deep_queue_is_read_a_few_new_runs_at_a_time_oldest_first() {
    let (h, _) = sim_with(SimConfig::default());
    queue_runs(&h, 10);
    let c = client(&h, PAT, &InFlight::new(4));
    let repos = [("octo", "app")];
    let first = c.read_queue(&repos, new_only(3), &|_, _| {}).unwrap();
    assert_eq!((first.new_runs, first.unread_runs), (3, 7));
    assert_eq!(
        first.jobs.len(),
        6,
        "two jobs in each of the three runs read"
    );
    let mut runs: Vec<i64> = first.jobs.iter().map(|j| j.run_id).collect();
    runs.dedup();
    let oldest: Vec<i64> = {
        let all = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
        let mut ids: Vec<i64> = all.jobs.iter().map(|j| j.run_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(all.new_runs, 7, "the seven left are new to this read");
        ids.into_iter().take(3).collect()
    };
    runs.sort_unstable();
    assert_eq!(runs, oldest, "the oldest runs are read first");
    let units_before = c.stats().get_units;
    let again = c.read_queue(&repos, new_only(3), &|_, _| {}).unwrap();
    assert_eq!((again.new_runs, again.unread_runs), (0, 0));
    assert_eq!(again.jobs.len(), 20);
    assert_eq!(
        c.stats().get_units,
        units_before,
        "every run known: all 304s"
    );
}

/// Issue 18: a deep queue's known runs are not all read again each poll. A read
/// re-reads at most `known` of them, first those the caller holds no view of (as
/// after a restart), then the oldest; the rest keep their earlier view.
#[test]
fn a_deep_queue_reads_again_only_the_runs_that_matter() {
    let (h, _) = sim_with(SimConfig::default());
    queue_runs(&h, 10);
    let c = client(&h, PAT, &InFlight::new(4));
    let repos = [("octo", "app")];
    let all = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
    assert!(all.whole() && all.read_runs.len() == 10);
    let runs = all.read_runs.clone();
    // The caller holds the oldest six: the four it lacks come first, then the oldest.
    let held: Vec<i64> = runs[..6].to_vec();
    let caps = ReadCaps {
        new: 10,
        known: 5,
        held: &held,
        in_progress: true,
    };
    let part = c.read_queue(&repos, caps, &|_, _| {}).unwrap();
    let mut want: Vec<i64> = runs[6..].to_vec();
    want.push(runs[0]);
    want.sort_unstable();
    assert_eq!(part.read_runs, want);
    assert_eq!(part.listed.len(), 10);
    assert_eq!((part.stale_runs, part.failed_runs), (5, 0));
    assert!(!part.whole(), "five runs keep an earlier view");
    assert_eq!(part.jobs.len(), 10, "two jobs in each run read");
}

/// Issue 18: one run's jobs list failing for a passing reason (a 503 after the
/// retries) does not fail the read: the runs read still count, the failed one keeps
/// its earlier view, and the read says it is not whole. Callers with no earlier view
/// (`queued_jobs`) still get the error.
#[test]
fn a_run_read_that_fails_in_passing_leaves_the_rest_of_the_read_standing() {
    let (h, _) = sim_with(SimConfig::default());
    queue_runs(&h, 4);
    let c = client(&h, PAT, &InFlight::new(1));
    let repos = [("octo", "app")];
    let all = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
    let victim = all.read_runs[1];
    h.add_fault(FaultRule::new(
        Some("GET"),
        &format!("/repos/octo/app/actions/runs/{victim}/jobs"),
        Trigger::Times(3),
        FaultAction::Status { status: 503 },
    ));
    let part = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
    assert_eq!(part.failed_runs, 1);
    assert!(part.failure.is_some());
    assert!(!part.read_runs.contains(&victim));
    assert_eq!(part.read_runs.len(), 3);
    assert_eq!((part.stale_runs, part.whole()), (1, false));
    h.add_fault(FaultRule::new(
        Some("GET"),
        &format!("/repos/octo/app/actions/runs/{victim}/jobs"),
        Trigger::Times(3),
        FaultAction::Status { status: 503 },
    ));
    assert!(
        c.queued_jobs("octo", "app").is_err(),
        "a caller with no earlier view gets the error"
    );
}

/// Issue 37: a read may leave out the in-progress run lists (a run reports
/// `in_progress` only once nothing in it is queued). It then sends no GET for them,
/// lists the queued runs alone, and names no runner; with them, the run a runner took
/// is listed again and its re-read names the runner that took its job.
#[test]
fn a_read_without_the_in_progress_lists_lists_the_queued_runs_alone() {
    let (h, _) = sim_with(SimConfig::default());
    for i in 0..3 {
        h.enqueue_run(
            "octo/app",
            "CI",
            &[(format!("build {i}"), vec!["self-hosted".into()], 60_000)],
        );
    }
    let c = client(&h, PAT, &InFlight::new(4));
    let repos = [("octo", "app")];
    let all = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
    assert_eq!((all.listed.len(), all.jobs.len()), (3, 3));
    let scope = runner_manager::sim::Scope::Repo("octo/app".into());
    let (rid, _) = h.register_runner(scope, "rm-took", &["self-hosted"]);
    let cred = h.with_state(|s| s.runners[&rid].credential.clone());
    let taken = h
        .with_state(|s| s.runner_take_job(rid, &cred, runner_manager::timefmt::now_millis()))
        .unwrap()
        .expect("the runner takes a job");
    let lists_before = h.request_log().len();
    let queued_only = ReadCaps {
        in_progress: false,
        ..ReadCaps::ALL
    };
    let part = c.read_queue(&repos, queued_only, &|_, _| {}).unwrap();
    let sent: Vec<LogEntry> = h.request_log()[lists_before..].to_vec();
    assert!(
        sent.iter().all(|e| !e.path.contains("status=in_progress")),
        "{sent:?}"
    );
    assert_eq!(part.listed.len(), 2, "the run in progress is not listed");
    assert!(!part.listed.contains(&(taken.run_id as i64)));
    assert_eq!(part.jobs.len(), 2);
    assert!(part.owners.is_empty(), "nothing read names a runner");
    let whole = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
    assert!(whole.listed.contains(&(taken.run_id as i64)));
    assert_eq!(whole.jobs.len(), 2, "the taken job is not queued");
    assert_eq!(
        whole
            .owners
            .iter()
            .map(|(r, _)| r.as_str())
            .collect::<Vec<_>>(),
        ["rm-took"]
    );
}
