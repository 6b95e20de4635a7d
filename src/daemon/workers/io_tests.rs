//! The I/O workers: how many run for the tasks outstanding, when one retires, and what
//! a demand read keeps before the loop hears of it.

use super::*;
use crate::domain::target::{CredentialRef, TargetScope};
use crate::github::auth::Credential;
use crate::secret::Secret;
use crate::store::tests::TempDir;
use std::time::Instant;

fn target() -> Target {
    Target {
        name: "t".into(),
        scope: TargetScope::Repo {
            owner: "octo".into(),
            repo: "app".into(),
        },
        // Nothing here is ever asked: the tasks below need no GitHub.
        api_url: "http://127.0.0.1:9".into(),
        credential: CredentialRef::TokenEnv { var: "NONE".into() },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 4,
        secondary_limit: Some(900),
    }
}

/// A task that needs neither GitHub nor the disk: an attempt with nothing to do.
fn nothing(pool: &mut IoPool, client: &Arc<GitHubClient>, id: i64) {
    let task = Task::Apply {
        attempt: Attempt::new(id, "p", "t", "h", 0),
        actions: vec![],
        timeouts: Timeouts {
            bootstrap: 1,
            idle: 1,
            job: None,
            stop_grace: 1,
        },
        scaleset: None,
        jitter: 0.0,
    };
    pool.send(task, client.clone(), &target());
}

fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

#[test]
fn workers_grow_with_the_tasks_to_the_limit_and_retire_to_none() {
    let dir = TempDir::new("io-elastic");
    std::fs::create_dir_all(&dir.0).unwrap();
    // The daemon creates and migrates its store before any worker opens it; workers
    // that first met an empty directory at once would race to create the schema.
    drop(SqliteStore::open(&dir.0).unwrap());
    let shared = Arc::new(Shared::new(dir.0.clone()));
    let client = Arc::new(GitHubClient::new(
        &target(),
        Credential::Token(Secret::new("x")),
    ));
    let mut pool = IoPool::start_with(&shared, "t", 4, Duration::from_millis(20));
    assert_eq!(pool.workers(), 0, "a quiet target keeps no worker");

    for id in 1..=3 {
        nothing(&mut pool, &client, id);
    }
    assert!(pool.workers() >= 3, "a worker for each outstanding task");
    for id in 4..=9 {
        nothing(&mut pool, &client, id);
    }
    assert!(pool.workers() <= 4, "never more than the limit");
    for _ in 1..=9 {
        let d = pool.done().recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(matches!(*d, Done::Applied { .. }));
        pool.received();
    }
    assert_eq!(pool.outstanding(), 0);
    until("idle workers to retire", || pool.workers() == 0);

    // A lowered limit holds what grows next; a raised one lets it grow again.
    pool.set_limit(2);
    for id in 10..=15 {
        nothing(&mut pool, &client, id);
    }
    assert!(pool.workers() <= 2);
    for _ in 10..=15 {
        pool.done().recv_timeout(Duration::from_secs(10)).unwrap();
        pool.received();
    }
    pool.stop();
}

#[test]
fn the_last_worker_retires_too_and_none_retires_while_tasks_wait() {
    let (tx, rx) = unbounded::<Box<Work>>();
    let (_utx, urx) = unbounded::<Box<Work>>();
    let common = Common {
        shared: Arc::new(Shared::new(std::env::temp_dir())),
        group_ids: GroupIds::default(),
        stopping: AtomicBool::new(false),
        live: AtomicUsize::new(1),
        idle_retire: IDLE_RETIRE,
        withdrawn: Mutex::new(HashMap::new()),
    };
    assert!(retire(&common, &urx, &rx), "the last worker ends too");
    assert_eq!(common.live.load(Ordering::SeqCst), 0);

    common.live.store(2, Ordering::SeqCst);
    let client = Arc::new(GitHubClient::new(
        &target(),
        Credential::Token(Secret::new("x")),
    ));
    tx.send(Box::new(Work {
        task: Task::ListRunners,
        client,
        target: target(),
    }))
    .unwrap();
    assert!(!retire(&common, &urx, &rx), "a task waits: stay for it");
    assert_eq!(common.live.load(Ordering::SeqCst), 2);

    rx.try_recv().unwrap();
    assert!(retire(&common, &urx, &rx));
    assert_eq!(common.live.load(Ordering::SeqCst), 1);
}

#[test]
fn one_worker_per_outstanding_task_within_the_limit() {
    assert_eq!(wanted_workers(0, 8), 0);
    assert_eq!(wanted_workers(3, 8), 3);
    assert_eq!(wanted_workers(30, 8), 8);
    assert_eq!(wanted_workers(5, 0), 1);
}

/// A demand read's answers are in the store as each run's jobs reach the loop, and
/// the runs lists' when the whole result does: a daemon killed before the loop took
/// them must not pay a unit for each run again.
#[test]
fn a_demand_read_keeps_each_runs_answer_before_the_loop_hears_of_it() {
    let sim = crate::sim::SimGitHub::start(crate::sim::SimConfig::default()).unwrap();
    sim.add_pat("ghp_io");
    sim.add_repo("octo/app", true);
    for _ in 0..3 {
        sim.enqueue_job("octo/app", "build", &["self-hosted"], 60_000);
    }
    let dir = TempDir::new("io-etags");
    std::fs::create_dir_all(&dir.0).unwrap();
    drop(SqliteStore::open(&dir.0).unwrap());
    let shared = Arc::new(Shared::new(dir.0.clone()));
    let mut t = target();
    t.api_url = sim.url().to_string();
    let client = Arc::new(
        GitHubClient::new(&t, Credential::Token(Secret::new("ghp_io"))).with_etag_journal(),
    );
    let mut pool = IoPool::start_with(&shared, "t", 4, Duration::from_millis(20));
    let read = Task::ReadDemand {
        repos: Default::default(),
        any_public: false,
        caps: DemandCaps {
            new_runs: 10,
            known_runs: 10,
            in_progress: true,
        },
        held: vec![],
    };
    pool.send(read, client.clone(), &t);
    let kept_urls = || -> Vec<String> {
        let kept = SqliteStore::open(&dir.0).unwrap().etags("t").unwrap();
        kept.into_iter().map(|e| e.url).collect()
    };
    let mut runs_heard = 0;
    loop {
        let d = pool.done().recv_timeout(Duration::from_secs(10)).unwrap();
        match *d {
            Done::DemandRun { run, .. } => {
                runs_heard += 1;
                let urls = kept_urls();
                assert!(
                    urls.iter()
                        .any(|u| u.contains(&format!("/actions/runs/{run}/jobs"))),
                    "run {run}'s jobs list is kept before the loop hears of it: {urls:?}"
                );
            }
            Done::Demand { result, .. } => {
                assert_eq!(result.unwrap().read.jobs.len(), 3);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(runs_heard, 3, "each run's jobs reached the loop");
    // Nothing but the worker has written: the loop never took the result.
    let urls = kept_urls();
    assert!(
        urls.iter()
            .any(|u| u.contains("/actions/runs?") || u.ends_with("/actions/runs")),
        "the runs list is kept: {urls:?}"
    );
    assert!(
        client.take_etag_changes().is_empty(),
        "and taken from the journal"
    );
    pool.stop();
}
