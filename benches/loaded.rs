//! The webhook run on a loaded machine (issue 36): two busy loops take the cores while
//! the real daemon starts with its `workflow_job` listener on and half of every
//! delivery lost; a target and its profile are added the moment the listener answers,
//! then eight more one every 150 ms (a slow start once lost a target added in its
//! window), and their 19 jobs, announced partly or not at all, must all be served
//! within 30 s, by webhooks or by polling, the backstop.
//! `cargo bench --bench loaded [-- --small]` (3 runs, or 1 with `--small`; under a
//! minute either way); exit 1 when a run leaves a job unserved. The figures printed
//! (time to the first job taken, to the last served) are a loaded debug or release
//! build's, never asserted.

#[path = "support/mod.rs"]
mod support;

use runner_manager::demo::{repo_scope, sim_profile, sim_target, stop_child};
use runner_manager::sim::JobStatus;
use runner_manager::store::{SqliteStore, Store};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "bench-webhook-secret";
const REPO: &str = "acme/late";
/// Targets added one after another across the daemon's start.
const STAGGERED: usize = 8;
/// Every job served within this, or the run fails (the e2e test's bound).
const SERVED_WITHIN: Duration = Duration::from_secs(30);

/// Busy loops, one per core the issue names, killed when dropped; each also dies with
/// this process (PR_SET_PDEATHSIG), so a bench that aborts leaves none spinning.
struct BusyLoops(Vec<Child>);

impl BusyLoops {
    fn start(n: usize) -> BusyLoops {
        let loops = (0..n)
            .map(|_| {
                let mut c = Command::new("sh");
                c.args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null());
                // SAFETY: prctl is async-signal-safe; nothing else runs before exec.
                unsafe {
                    c.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    });
                }
                c.spawn().expect("start a busy loop")
            })
            .collect();
        BusyLoops(loops)
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What one run came to.
struct Run {
    served: usize,
    queued: usize,
    first_taken: Option<Duration>,
    all_served: Option<Duration>,
    hooks_dropped: u64,
}

fn cli(state: &std::path::Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new(support::daemon_binary())
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn one_run() -> Result<Run, String> {
    let w = support::world(1, 3, 4, 5);
    let result = run_in(&w);
    support::discard(w);
    result
}

fn run_in(w: &runner_manager::demo::World) -> Result<Run, String> {
    let secret = w.state_dir.join("webhook-secret");
    std::fs::write(&secret, format!("{SECRET}\n")).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    cli(
        &w.state_dir,
        &[
            "host",
            "set",
            &format!("webhook_listen=127.0.0.1:{port}"),
            &format!("webhook_secret_file={}", secret.display()),
        ],
    )?;
    let base = format!("http://127.0.0.1:{port}");
    w.sim
        .set_webhook(Some((&format!("{base}/webhook"), SECRET)));
    w.sim.set_webhook_drop(0.5);
    w.sim.add_repo(REPO, true);

    let mut daemon = w.spawn_daemon(&w.state_dir.join("daemon.log"))?;
    let started = Instant::now();
    let listening = support::wait_until(SERVED_WITHIN, || {
        runner_manager::sim::client::request(
            &base,
            "GET",
            "/webhook",
            &[],
            None,
            Duration::from_secs(2),
        )
        .is_ok_and(|r| r.status == 405)
    });
    let outcome = if listening {
        // The moment the listener answers: the target, its profile and the jobs.
        let store = SqliteStore::open(&w.state_dir).map_err(|e| e.to_string())?;
        let host = store.host_or_create().map_err(|e| e.to_string())?;
        let target = sim_target(
            &w.sim,
            "late",
            repo_scope(REPO),
            w.state_dir.join("demo-token"),
            1,
        );
        store.add_target(&target).map_err(|e| e.to_string())?;
        let mut p = sim_profile(
            "late",
            "late",
            &host,
            &["late".to_string()],
            &w.state_dir.join("runner"),
        )?;
        p.max_capacity = 3;
        store.add_profile(&p).map_err(|e| e.to_string())?;
        let labels = vec!["self-hosted".to_string(), "late".to_string()];
        let mut ids = Vec::new();
        for r in 0..5 {
            let jobs: Vec<(String, Vec<String>, u64)> = (0..2)
                .map(|j| (format!("run{r}-job{j}"), labels.clone(), 200))
                .collect();
            ids.extend(w.sim.enqueue_run(REPO, "CI", &jobs).1);
        }
        w.sim.set_webhook_drop(1.0);
        ids.extend(
            w.sim
                .enqueue_run(REPO, "unheard", &[("unheard".into(), labels, 200)])
                .1,
        );
        w.sim.set_webhook_drop(0.5);
        // More targets, one every 150 ms across the daemon's start, each with a
        // profile and a job: one of them lands wherever the start is slow, the window
        // a target once went unseen in. The wait paces the adds; it synchronises
        // nothing.
        for k in 0..STAGGERED {
            let repo = format!("{REPO}-{k}");
            let name = format!("late{k}");
            w.sim.add_repo(&repo, true);
            let target = sim_target(
                &w.sim,
                &name,
                repo_scope(&repo),
                w.state_dir.join("demo-token"),
                1,
            );
            store.add_target(&target).map_err(|e| e.to_string())?;
            let p = sim_profile(
                &name,
                &name,
                &host,
                std::slice::from_ref(&name),
                &w.state_dir.join("runner"),
            )?;
            store.add_profile(&p).map_err(|e| e.to_string())?;
            let labels = vec!["self-hosted".to_string(), name.clone()];
            ids.extend(
                w.sim
                    .enqueue_run(&repo, "CI", &[(name.clone(), labels, 200)])
                    .1,
            );
            std::thread::sleep(Duration::from_millis(150));
        }
        let mut first_taken = None;
        let mut served = 0;
        let all = support::wait_until(SERVED_WITHIN, || {
            let jobs: Vec<_> = w
                .sim
                .jobs()
                .into_iter()
                .filter(|j| ids.contains(&j.id))
                .collect();
            if first_taken.is_none() && jobs.iter().any(|j| j.status != JobStatus::Queued) {
                first_taken = Some(started.elapsed());
            }
            served = jobs
                .iter()
                .filter(|j| j.status == JobStatus::Completed)
                .count();
            served == ids.len()
        });
        Ok(Run {
            served,
            queued: ids.len(),
            first_taken,
            all_served: all.then(|| started.elapsed()),
            hooks_dropped: w.sim.webhook_stats().dropped,
        })
    } else {
        Err(format!(
            "the webhook listener did not answer within {SERVED_WITHIN:?}"
        ))
    };
    let _ = stop_child(&mut daemon, Duration::from_secs(20));
    outcome
}

fn main() {
    let small = std::env::args().any(|a| a == "--small");
    let runs = if small { 1 } else { 3 };
    let loops = BusyLoops::start(2);
    println!(
        "loaded: {runs} run(s), two busy loops, half of every delivery lost, targets added as the daemon starts ({} build)",
        support::profile()
    );
    let mut failed = false;
    for i in 1..=runs {
        match one_run() {
            Ok(r) => {
                let secs = |d: Option<Duration>| {
                    d.map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64()))
                };
                println!(
                    "run {i}: {}/{} served; first job taken {}, all served {}; {} deliveries dropped",
                    r.served,
                    r.queued,
                    secs(r.first_taken),
                    secs(r.all_served),
                    r.hooks_dropped
                );
                failed |= r.all_served.is_none();
            }
            Err(e) => {
                println!("run {i}: failed: {e}");
                failed = true;
            }
        }
    }
    drop(loops);
    if failed {
        eprintln!("loaded: a run left jobs unserved for {SERVED_WITHIN:?}");
        std::process::exit(1);
    }
}
