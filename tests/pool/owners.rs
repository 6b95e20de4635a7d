//! Whose job a coordinated host's runners took (issue 35): the host reads no queue and
//! has no webhooks, so only the coordinator's own queue read names each job's runner.
//! The coordinator sends each owner to the host whose runner it is, and each host's
//! `usage --by repo` names the repository (not `-`), which `coordinator usage` adds up.

use super::support::*;
use runner_manager::domain::job_owner::OwnerSource;
use runner_manager::store::{AttemptFilter, SqliteStore, Store};
use serde_json::Value;
use std::time::Duration;

fn usage_by_repo(dir: &std::path::Path, coordinator: bool) -> Value {
    let mut args = vec!["--json"];
    if coordinator {
        args.push("coordinator");
    }
    args.extend(["usage", "--since", "1d", "--by", "repo"]);
    serde_json::from_str(&run_ok(dir, &args)).unwrap()
}

/// The jobs of `repo` in a `--by repo` report, and of every repository.
fn jobs_of(report: &Value, repo: &str) -> (u64, u64) {
    let rows = report["rows"].as_array().unwrap();
    let of = |r: &&Value| r["repo"] == repo;
    let mine = rows.iter().filter(of).map(|r| r["jobs"].as_u64().unwrap());
    (mine.sum(), report["total"]["jobs"].as_u64().unwrap())
}

#[test]
fn a_coordinated_host_learns_whose_job_its_runners_ran_from_the_coordinator() {
    const JOBS: usize = 8;
    let mut pool = Pool::new("owners", 2, 4, true);
    pool.start_coordinator();
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(Duration::from_secs(20), "every host is coordinated", || {
        pool.hosts.iter().all(|h| h.mode() == "coordinated")
    });
    // Long enough for the coordinator's one-second polls to see each job running.
    pool.enqueue(JOBS, "own", 4_000);
    wait_until(Duration::from_secs(90), "every job is done", || {
        pool.all_done()
    });
    pool.wait_quiet();

    // Every job a host ran is counted under the repository, none under `-`.
    let mut last = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let hosts = loop {
        let reports: Vec<Value> = pool
            .hosts
            .iter()
            .map(|h| usage_by_repo(&h.dir, false))
            .collect();
        let jobs: Vec<(u64, u64)> = reports.iter().map(|r| jobs_of(r, REPO)).collect();
        let all: u64 = jobs.iter().map(|j| j.1).sum();
        if all == JOBS as u64 && jobs.iter().all(|(mine, total)| mine == total) {
            break jobs;
        }
        last = format!("{reports:?}");
        assert!(
            std::time::Instant::now() < deadline,
            "the hosts never counted every job under {REPO}: {last}\n{}",
            pool.dump()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    println!("per host (jobs of {REPO}, all jobs): {hosts:?}");
    assert!(
        hosts.iter().all(|(mine, _)| *mine > 0),
        "both hosts ran jobs: {hosts:?} {last}"
    );

    // The owners came from the coordinator, and with the workflow and run attempt.
    for h in &pool.hosts {
        let s = SqliteStore::open(&h.dir).unwrap();
        let owned: Vec<_> = s
            .attempts(&AttemptFilter::default())
            .unwrap()
            .into_iter()
            .filter_map(|a| a.owner)
            .collect();
        assert!(!owned.is_empty());
        for o in owned {
            assert_eq!(o.source, OwnerSource::Coordinator, "{o:?}");
            assert_eq!(o.repo, REPO);
            assert!(o.workflow.is_some() && o.run_attempt.is_some(), "{o:?}");
        }
    }

    // The pool's report adds the hosts' up, per repository.
    wait_until(
        Duration::from_secs(30),
        "the coordinator counts every job under the repository",
        || jobs_of(&usage_by_repo(&pool.coord_dir, true), REPO) == (JOBS as u64, JOBS as u64),
    );
    let coord = usage_by_repo(&pool.coord_dir, true);
    println!("{coord}");
    // Learned from what the queue reads brought anyway: no job was asked for alone.
    let single = "/repos/{owner}/{repo}/actions/jobs/{job_id}";
    assert_eq!(pool.sim.count("GET", single), 0);
    let log = std::fs::read_to_string(pool.root.join("coordinator.log")).unwrap();
    assert!(!log.contains("unknown frame type"), "{log}");
}
