//! The two baselines every scenario runs beside the daemon: the naive poller (the
//! common script: every interval, list queued runs and their jobs without ETags over
//! plain HTTP, and start a JIT runner for each queued job not seen lately) and a fixed
//! pool of always-on runners (N runners; when one finishes its job, the next starts).
//!
//! Each lays out its runners' directories in the world's install shape (with the
//! realistic shape, thousands of files each: seconds on a slow disk) and reuses them,
//! as the scripts they stand for would: the pool one directory per slot, the naive
//! poller a directory of a runner that has exited for its next runner, unpacking a new
//! one only when none is free. Neither pays that unpacking per runner, while the daemon
//! builds a fresh root per attempt: the comparison shows what fresh roots cost.

use runner_manager::sim::install::InstallShape;
use runner_manager::timefmt::{Millis, now_millis};
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a baseline needs to reach the simulated GitHub and lay out runners.
#[derive(Clone)]
pub struct Env {
    pub url: String,
    pub token: String,
    pub repo: String,
    pub labels: Vec<String>,
    /// Where each runner's install and log go.
    pub dir: PathBuf,
    /// The runner-manager binary (the simulated runner under the runner's names).
    pub binary: PathBuf,
    /// The shape each runner directory is laid out in (the world's).
    pub install: InstallShape,
}

/// What a baseline did: when it spawned each runner (by name), and requests it sent.
#[derive(Debug, Default)]
pub struct Report {
    pub spawned_at: HashMap<String, Millis>,
    pub requests: u64,
    pub errors: u64,
}

fn get(env: &Env, path: &str) -> Option<serde_json::Value> {
    let auth = format!("Bearer {}", env.token);
    let r = runner_manager::sim::client::request(
        &env.url,
        "GET",
        path,
        &[
            ("authorization", &auth),
            ("accept", "application/vnd.github+json"),
        ],
        None,
        Duration::from_secs(10),
    )
    .ok()?;
    if r.status != 200 {
        return None;
    }
    r.json().ok()
}

/// Registers a JIT runner through GitHub's REST endpoint; returns its encoded config.
pub fn generate_jit(env: &Env, name: &str) -> Option<String> {
    let auth = format!("Bearer {}", env.token);
    let body = serde_json::json!({
        "name": name,
        "runner_group_id": 1,
        "labels": env.labels,
        "work_folder": "_work",
    })
    .to_string();
    let r = runner_manager::sim::client::request(
        &env.url,
        "POST",
        &format!("/repos/{}/actions/runners/generate-jitconfig", env.repo),
        &[
            ("authorization", &auth),
            ("accept", "application/vnd.github+json"),
            ("content-type", "application/json"),
        ],
        Some(body.as_bytes()),
        Duration::from_secs(10),
    )
    .ok()?;
    if r.status != 201 {
        return None;
    }
    r.json()
        .ok()?
        .get("encoded_jit_config")?
        .as_str()
        .map(String::from)
}

/// Starts `bin/Runner.Listener run` for runner `name` in directory `dir` (under the
/// baseline's own) with the JIT config in its environment, in its own process group.
/// The directory is laid out first when it is not there yet; one left by an earlier
/// runner loses that runner's registration files, like a slot's directory between two
/// ephemeral runners.
pub fn spawn_runner(env: &Env, name: &str, dir: &str, jit: &str) -> Option<Child> {
    let root = env.dir.join(dir);
    if root.join("bin/Runner.Listener").exists() {
        for stale in [".runner", ".credentials", ".credentials_rsaparams"] {
            let _ = std::fs::remove_file(root.join(stale));
        }
    } else {
        runner_manager::sim::install::lay_out_shaped(&root, &env.binary, env.install).ok()?;
    }
    let log = std::fs::File::create(env.dir.join(format!("{name}.log"))).ok()?;
    Command::new(root.join("bin/Runner.Listener"))
        .arg("run")
        .current_dir(&root)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("ACTIONS_RUNNER_INPUT_JITCONFIG", jit)
        .stdin(Stdio::null())
        .stdout(log.try_clone().ok()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .ok()
}

fn stop_children<'a>(children: impl IntoIterator<Item = &'a mut Child>) {
    let mut all: Vec<&mut Child> = children.into_iter().collect();
    for c in all.iter_mut() {
        let _ = c.kill();
    }
    for c in all.iter_mut() {
        let _ = c.wait();
    }
}

/// Sleeps until `until`, waking early when `stop` is set.
fn nap(stop: &AtomicBool, until: Instant) {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if stop.load(Ordering::SeqCst) || left.is_zero() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20).min(left));
    }
}

/// A baseline running on its own thread until `finish`.
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Report>>,
}

impl Running {
    pub fn finish(mut self) -> Report {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

/// The naive poller, polling every `interval`.
pub fn naive(env: Env, interval: Duration) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("naive-poller".into())
        .spawn(move || {
            let mut rep = Report::default();
            let mut seen: HashMap<u64, Instant> = HashMap::new();
            // Each runner with the directory it runs in; directories of exited runners,
            // free for the next.
            let mut children: Vec<(Child, String)> = Vec::new();
            let mut free: Vec<String> = Vec::new();
            let mut dirs = 0u64;
            let mut n = 0u64;
            while !s.load(Ordering::SeqCst) {
                let next = Instant::now() + interval;
                rep.requests += 1;
                let runs = get(
                    &env,
                    &format!("/repos/{}/actions/runs?status=queued", env.repo),
                );
                let run_ids: Vec<u64> = runs
                    .as_ref()
                    .and_then(|v| v.get("workflow_runs")?.as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|r| r.get("id")?.as_u64())
                    .collect();
                if runs.is_none() {
                    rep.errors += 1;
                }
                for run in run_ids {
                    rep.requests += 1;
                    let Some(jobs) = get(
                        &env,
                        &format!("/repos/{}/actions/runs/{run}/jobs", env.repo),
                    ) else {
                        rep.errors += 1;
                        continue;
                    };
                    for j in jobs
                        .get("jobs")
                        .and_then(|j| j.as_array())
                        .cloned()
                        .unwrap_or_default()
                    {
                        let (Some(id), Some("queued")) = (
                            j.get("id").and_then(|i| i.as_u64()),
                            j.get("status").and_then(|s| s.as_str()),
                        ) else {
                            continue;
                        };
                        // Runners take whichever queued job fits, so the runner started
                        // for this job may have taken another; a job still queued three
                        // intervals after its runner started gets another runner.
                        if seen.get(&id).is_some_and(|at| at.elapsed() < interval * 3) {
                            continue;
                        }
                        seen.insert(id, Instant::now());
                        n += 1;
                        let name = format!("naive-{n}");
                        rep.requests += 1;
                        let dir = free.pop().unwrap_or_else(|| {
                            dirs += 1;
                            format!("dir-{dirs}")
                        });
                        match generate_jit(&env, &name)
                            .and_then(|jit| spawn_runner(&env, &name, &dir, &jit))
                        {
                            Some(c) => {
                                rep.spawned_at.insert(name, now_millis());
                                children.push((c, dir));
                            }
                            None => {
                                rep.errors += 1;
                                seen.remove(&id);
                                free.push(dir);
                            }
                        }
                    }
                }
                children.retain_mut(|(c, dir)| {
                    let exited = matches!(c.try_wait(), Ok(Some(_)));
                    if exited {
                        free.push(std::mem::take(dir));
                    }
                    !exited
                });
                nap(&s, next);
            }
            stop_children(children.iter_mut().map(|(c, _)| c));
            rep
        })
        .expect("start the naive poller");
    Running {
        stop,
        thread: Some(thread),
    }
}

/// A fixed pool of `size` always-on runners: a finished runner is replaced at once.
pub fn pool(env: Env, size: usize) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("fixed-pool".into())
        .spawn(move || {
            let mut rep = Report::default();
            let mut slots: Vec<Option<Child>> = (0..size).map(|_| None).collect();
            let mut n = 0u64;
            while !s.load(Ordering::SeqCst) {
                for (i, slot) in slots.iter_mut().enumerate() {
                    let free = match slot {
                        None => true,
                        Some(c) => matches!(c.try_wait(), Ok(Some(_))),
                    };
                    if !free {
                        continue;
                    }
                    n += 1;
                    let name = format!("pool-{n}");
                    let dir = format!("slot-{i}");
                    rep.requests += 1;
                    *slot = generate_jit(&env, &name)
                        .and_then(|jit| spawn_runner(&env, &name, &dir, &jit));
                    match slot {
                        Some(_) => {
                            rep.spawned_at.insert(name, now_millis());
                        }
                        None => rep.errors += 1,
                    }
                }
                nap(&s, Instant::now() + Duration::from_millis(50));
            }
            stop_children(slots.iter_mut().flatten());
            rep
        })
        .expect("start the fixed pool");
    Running {
        stop,
        thread: Some(thread),
    }
}

/// A baseline's environment inside a world: its PAT, the world's repository, and a
/// directory of its own under the world's state directory.
pub fn env_for(w: &runner_manager::demo::World, name: &str) -> Env {
    let dir = w.state_dir.join(name);
    std::fs::create_dir_all(&dir).expect("baseline dir");
    Env {
        url: w.sim.url().to_string(),
        token: super::world_token(w),
        repo: super::REPO.into(),
        labels: super::JOB_LABELS.iter().map(|s| s.to_string()).collect(),
        dir,
        binary: w.binary.clone(),
        install: w.install,
    }
}

/// The directory a baseline's runners live in (for the caller's process scan).
pub fn runners_dir(env: &Env) -> &Path {
    &env.dir
}
