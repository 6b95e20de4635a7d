//! Usage across a pool (issue 35, item 6): each host reports its daily roll-up to the
//! coordinator, and `coordinator usage` adds them up: its totals equal the sum of the
//! hosts' own `usage`, host by host, and stay so when the coordinator restarts and
//! the hosts send their rows again.

use super::support::*;
use runner_manager::domain::job_owner::{JobOwner, OwnerSource};
use runner_manager::domain::{AttemptState, Outcome};
use runner_manager::store::{NewAttempt, SqliteStore, Store};
use serde_json::Value;
use std::time::Duration;

/// Jobs each host ran yesterday, each of its own repository: more rows than one
/// status frame carries, so they reach the coordinator over several.
const SEEDED: usize = 150;

/// Writes `SEEDED` ended and cleaned attempts into a host's store, as its daemon
/// would have, each rolled up into a row of its own repository.
fn seed_history(dir: &std::path::Path, tag: &str) {
    let s = SqliteStore::open(dir).unwrap();
    let host = s.host_or_create().unwrap();
    let at = runner_manager::timefmt::now_millis() - 86_400_000;
    for i in 0..SEEDED {
        let new = NewAttempt {
            profile: "pool".into(),
            target: "app".into(),
            host_id: host.id.clone(),
            ..NewAttempt::default()
        };
        let mut a = s.create_attempt(&new, at).unwrap();
        for (n, state) in [
            AttemptState::Starting,
            AttemptState::Idle,
            AttemptState::Busy,
        ]
        .into_iter()
        .enumerate()
        {
            a.step(state, at + n as i64 * 1_000).unwrap();
        }
        a.owner = Some(JobOwner {
            repo: format!("seeded/{tag}-{i}"),
            workflow: Some("CI".into()),
            job_name: "test".into(),
            run_id: i as i64,
            run_attempt: Some(1),
            job_id: None,
            queued_at: Some(at - 5_000),
            source: OwnerSource::Webhook,
        });
        a.cpu_millis = Some(20_000 + i as u64);
        a.mean_rss_bytes = Some(256 << 20);
        a.end(Outcome::CompletedJob, None, at + 90_000).unwrap();
        a.step(AttemptState::Destroying, at + 91_000).unwrap();
        a.mark_cleaned(at + 92_000);
        s.save_attempt(&a).unwrap();
    }
}

const EXACT: [&str; 9] = [
    "jobs",
    "runners",
    "busy_seconds",
    "idle_seconds",
    "cpu_seconds",
    "gib_seconds",
    "peak_rss_bytes",
    "lost",
    "reruns",
];

fn usage(dir: &std::path::Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&run_ok(dir, &all)).unwrap()
}

/// Each host's own `usage` total, in host order.
fn host_totals(pool: &Pool) -> Vec<Value> {
    pool.hosts
        .iter()
        .map(|h| usage(&h.dir, &["usage", "--since", "2d"])["total"].clone())
        .collect()
}

fn coord(pool: &Pool, by: &str) -> Value {
    usage(
        &pool.coord_dir,
        &["coordinator", "usage", "--since", "2d", "--by", by],
    )
}

/// Whether the coordinator holds exactly what each host holds: its `--by host` line
/// of each host equals that host's own total, figure by figure, and its total is the
/// sum of theirs.
fn adds_up(pool: &Pool, hosts: &[Value]) -> Result<(), String> {
    let by_host = coord(pool, "host");
    let rows = by_host["rows"].as_array().unwrap();
    for (i, own) in hosts.iter().enumerate() {
        let name = format!("host{i}");
        let kept = rows.iter().find(|r| r["host"] == name.as_str());
        let same = |f: &str| kept.is_some_and(|k| k[f] == own[f]);
        let all_same = EXACT.iter().all(|f| same(f)) && same("wait_histogram");
        if own["runners"] != 0 && !all_same {
            return Err(format!("{name}: own {own}\ncoordinator {kept:?}"));
        }
    }
    let total = &by_host["total"];
    let sum = |f: &str| hosts.iter().map(|h| h[f].as_u64().unwrap()).sum::<u64>();
    for f in ["jobs", "runners", "lost", "reruns"] {
        if total[f].as_u64() != Some(sum(f)) {
            return Err(format!("total {f}: {} vs {}", total[f], sum(f)));
        }
    }
    // Seconds are each host's milliseconds rounded down: the pool's may be one more
    // per host.
    for f in ["busy_seconds", "idle_seconds"] {
        let t = total[f].as_u64().unwrap();
        if !(sum(f)..=sum(f) + hosts.len() as u64).contains(&t) {
            return Err(format!("total {f}: {t} vs {}", sum(f)));
        }
    }
    let cpu: f64 = hosts
        .iter()
        .map(|h| h["cpu_seconds"].as_f64().unwrap())
        .sum();
    if (total["cpu_seconds"].as_f64().unwrap() - cpu).abs() > 1e-6 {
        return Err(format!("total cpu {} vs {cpu}", total["cpu_seconds"]));
    }
    Ok(())
}

fn wait_adds_up(pool: &Pool, jobs: u64, what: &str) {
    let mut last;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let hosts = host_totals(pool);
        let done = hosts
            .iter()
            .map(|h| h["jobs"].as_u64().unwrap())
            .sum::<u64>()
            == jobs;
        match adds_up(pool, &hosts) {
            Ok(()) if done => return,
            Ok(()) => last = format!("the hosts count fewer than {jobs} jobs: {hosts:?}"),
            Err(e) => last = e,
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the coordinator's usage never added up to the hosts': {last}\n{}",
            pool.dump()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_coordinator_adds_up_the_usage_each_host_reports() {
    const JOBS: usize = 8;
    let mut pool = Pool::new("usage", 2, 4, true);
    for (i, h) in pool.hosts.iter().enumerate() {
        seed_history(&h.dir, &format!("h{i}"));
    }
    let seeded = 2 * SEEDED as u64;
    pool.start_coordinator();
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(Duration::from_secs(20), "every host is coordinated", || {
        pool.hosts.iter().all(|h| h.mode() == "coordinated")
    });
    pool.enqueue(JOBS, "u", 1_500);
    wait_until(Duration::from_secs(60), "every job is done", || {
        pool.all_done()
    });
    pool.wait_quiet();
    wait_adds_up(&pool, seeded + JOBS as u64, "first jobs");
    let hosts = host_totals(&pool);
    assert!(
        hosts
            .iter()
            .all(|h| h["jobs"].as_u64() > Some(SEEDED as u64)),
        "both hosts ran jobs: {hosts:?}"
    );
    let by_repo = coord(&pool, "repo");
    assert_eq!(by_repo["total"]["jobs"], seeded + JOBS as u64);
    let repos = by_repo["rows"].as_array().unwrap();
    assert!(repos.len() > 2 * SEEDED, "{} repositories", repos.len());

    // Restarted, the coordinator says where each host's rows resume: nothing is
    // counted twice, and what the hosts do meanwhile joins the sums.
    pool.stop_coordinator();
    pool.start_coordinator();
    wait_until(
        Duration::from_secs(40),
        "every host is coordinated again",
        || pool.hosts.iter().all(|h| h.mode() == "coordinated"),
    );
    pool.enqueue(2, "again", 1_500);
    wait_until(Duration::from_secs(60), "the new jobs are done", || {
        pool.all_done()
    });
    pool.wait_quiet();
    wait_adds_up(&pool, seeded + JOBS as u64 + 2, "after a restart");
    let log = std::fs::read_to_string(pool.root.join("coordinator.log")).unwrap();
    assert!(!log.contains("usage rows were not kept"), "{log}");

    // The same report as a table and CSV, with the hosts' names.
    let table = run_ok(&pool.coord_dir, &["coordinator", "usage", "--by", "host"]);
    println!("{table}");
    assert!(table.starts_with("pool usage "), "{table}");
    assert!(
        table.contains("host0") && table.contains("host1"),
        "{table}"
    );
    let csv = run_ok(
        &pool.coord_dir,
        &["coordinator", "usage", "--by", "host,profile", "--csv"],
    );
    assert!(csv.starts_with("HOST,PROFILE,JOBS,"), "{csv}");
    let last = format!("total,,{},", seeded + 10);
    assert!(csv.lines().last().unwrap().starts_with(&last), "{csv}");
}
