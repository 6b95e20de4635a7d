//! The simulated runner as a real process: laid-out install, JIT config from the sim,
//! the real runner's lines, one job, exit codes, deregistration and faults.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use runner_manager::sim::{JobStatus, RunnerFault, RunnerFaultRule, SimHandle, Trigger};
use serde_json::json;

use super::support::*;

const DEADLINE: Duration = Duration::from_secs(20);

struct Proc {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
    lines: Vec<String>,
    errs: Vec<String>,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> TempDir {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("rm-sim-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

fn lines_of(r: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

/// Lays out an install, gets a JIT config from the sim's REST endpoint, starts the runner.
fn start_runner(h: &SimHandle, name: &str, labels: &[&str]) -> (Proc, u64) {
    let dir = temp_dir(name);
    runner_manager::sim::install::lay_out(
        &dir.0,
        &PathBuf::from(env!("CARGO_BIN_EXE_runner-manager")),
    )
    .unwrap();
    assert!(dir.0.join("run.sh").exists() && !dir.0.join(".runner").exists());
    let body = json!({"name": name, "runner_group_id": 1, "labels": labels});
    let r = call(
        h,
        "POST",
        "/repos/octo/app/actions/runners/generate-jitconfig",
        PAT,
        Some(&body),
        &[],
    );
    assert_eq!(r.status, 201);
    let v = r.json().unwrap();
    let id = v["runner"]["id"].as_u64().unwrap();
    let mut child = Command::new(dir.0.join("bin/Runner.Listener"))
        .arg("run")
        .current_dir(&dir.0)
        .env(
            "ACTIONS_RUNNER_INPUT_JITCONFIG",
            v["encoded_jit_config"].as_str().unwrap(),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = (
        lines_of(child.stdout.take().unwrap()),
        lines_of(child.stderr.take().unwrap()),
    );
    (
        Proc {
            child,
            out,
            err,
            lines: Vec::new(),
            errs: Vec::new(),
            _dir: dir,
        },
        id,
    )
}

impl Proc {
    fn drain(&mut self) {
        self.lines.extend(self.out.try_iter());
        self.errs.extend(self.err.try_iter());
    }

    fn wait_line(&mut self, needle: &str) {
        wait_for(needle, DEADLINE, || {
            self.drain();
            self.lines
                .iter()
                .chain(&self.errs)
                .any(|l| l.contains(needle))
                .then_some(())
        });
    }

    fn wait_exit(&mut self) -> i32 {
        let code = wait_for("exit", DEADLINE, || self.child.try_wait().unwrap());
        // The pipes close at exit; collect what is left.
        std::thread::sleep(Duration::from_millis(0));
        wait_for("pipes drained", DEADLINE, || {
            self.drain();
            (self.out.recv_timeout(Duration::from_millis(50)).is_err()).then_some(())
        });
        self.drain();
        code.code().unwrap_or(-1)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_stamped(line: &str, rest: &str) -> bool {
    line.len() > 22
        && runner_manager::timefmt::parse_rfc3339(&line[..20]).is_some()
        && &line[20..] == rest
}

#[test]
fn a_runner_takes_one_job_and_exits_zero() {
    let (h, _) = sim();
    let (mut p, id) = start_runner(&h, "rm-e2e-1", &["self-hosted", "linux"]);
    p.wait_line("Listening for Jobs");
    assert!(
        !p.lines.is_empty() && p.lines[0] == "√ Connected to GitHub",
        "{:?}",
        p.lines
    );
    assert!(
        p.lines
            .contains(&"Current runner version: '2.336.0'".to_string())
    );
    let dir = p._dir.0.clone();
    assert!(
        dir.join(".runner").exists() && dir.join(".credentials").exists(),
        "the JIT config was written out"
    );
    let runner = h.runners().into_iter().find(|r| r.id == id).unwrap();
    assert!(runner.online && !runner.busy && runner.version.as_deref() == Some("2.336.0"));
    let other = h.enqueue_job("octo/app", "gpu job", &["self-hosted", "gpu"], 10);
    let job = h.enqueue_job("octo/app", "build (ubuntu)", &["self-hosted", "linux"], 300);
    p.wait_line("Running job: build (ubuntu)");
    let j = h.job(job).unwrap();
    assert_eq!(j.status, JobStatus::InProgress);
    assert_eq!(
        (j.runner_id, j.runner_name.as_deref()),
        (Some(id), Some("rm-e2e-1"))
    );
    assert!(h.runners().iter().any(|r| r.id == id && r.busy));
    assert_eq!(p.wait_exit(), 0);
    let stamped: Vec<&String> = p
        .lines
        .iter()
        .filter(|l| {
            l.ends_with("Z: Listening for Jobs")
                || l.contains(": Running job:")
                || l.contains("completed with result")
        })
        .collect();
    assert!(
        is_stamped(stamped[0], ": Listening for Jobs"),
        "{stamped:?}"
    );
    assert!(is_stamped(stamped[1], ": Running job: build (ubuntu)"));
    assert!(is_stamped(
        stamped[2],
        ": Job build (ubuntu) completed with result: Succeeded"
    ));
    assert_eq!(h.job(job).unwrap().status, JobStatus::Completed);
    assert_eq!(h.job(job).unwrap().conclusion.as_deref(), Some("success"));
    assert_eq!(
        h.job(other).unwrap().status,
        JobStatus::Queued,
        "labels it does not carry"
    );
    assert!(
        h.runners().iter().all(|r| r.id != id),
        "an ephemeral registration goes with its job"
    );
}

#[test]
fn an_idle_runner_exits_zero_when_its_registration_is_deleted() {
    let (h, _) = sim();
    let (mut p, id) = start_runner(&h, "rm-idle", &["self-hosted"]);
    p.wait_line("Listening for Jobs");
    let r = call(
        &h,
        "DELETE",
        &format!("/repos/octo/app/actions/runners/{id}"),
        PAT,
        None,
        &[],
    );
    assert_eq!(r.status, 204);
    assert_eq!(p.wait_exit(), 0);
    assert!(
        p.errs
            .iter()
            .any(|l| l.contains("The runner no longer exists on the server")),
        "{:?}",
        p.errs
    );
}

#[test]
fn sigterm_stops_an_idle_runner() {
    let (h, _) = sim();
    let (mut p, _) = start_runner(&h, "rm-term", &["self-hosted"]);
    p.wait_line("Listening for Jobs");
    unsafe { libc::kill(p.child.id() as i32, libc::SIGTERM) };
    assert_eq!(p.wait_exit(), 0);
}

fn with_fault(h: &SimHandle, name: &str, fault: RunnerFault) {
    h.add_runner_fault(RunnerFaultRule {
        name_prefix: Some(name.into()),
        trigger: Trigger::Times(1),
        fault,
    });
}

#[test]
fn runner_faults_crash_conflict_deprecated_and_nonzero_exit() {
    let (h, _) = sim();
    with_fault(&h, "rm-crash", RunnerFault::CrashAtStart);
    let (mut p, _) = start_runner(&h, "rm-crash", &["self-hosted"]);
    assert_eq!(p.wait_exit(), 1);
    assert!(!p.lines.iter().any(|l| l.contains("Listening")));
    with_fault(&h, "rm-conflict", RunnerFault::SessionConflict);
    let (mut p, _) = start_runner(&h, "rm-conflict", &["self-hosted"]);
    assert_eq!(p.wait_exit(), 5);
    assert!(
        p.errs
            .iter()
            .any(|l| l.ends_with("A session for this runner already exists."))
    );
    with_fault(&h, "rm-old", RunnerFault::Deprecated);
    let (mut p, _) = start_runner(&h, "rm-old", &["self-hosted"]);
    assert_eq!(p.wait_exit(), 7);
    with_fault(&h, "rm-bad", RunnerFault::ExitNonZeroAfterJob);
    let (mut p, _) = start_runner(&h, "rm-bad", &["self-hosted", "bad"]);
    h.enqueue_job("octo/app", "flaky", &["bad"], 10);
    p.wait_line("Job flaky completed with result: Succeeded");
    assert_eq!(p.wait_exit(), 1);
}

#[test]
fn runner_faults_hang_and_ignore_sigterm() {
    let (h, _) = sim();
    with_fault(&h, "rm-hang", RunnerFault::HangBeforeListening);
    with_fault(&h, "rm-stubborn", RunnerFault::IgnoreSigterm);
    let (mut hung, hid) = start_runner(&h, "rm-hang", &["self-hosted"]);
    let (mut stubborn, _) = start_runner(&h, "rm-stubborn", &["self-hosted"]);
    stubborn.wait_line("Listening for Jobs");
    unsafe { libc::kill(stubborn.child.id() as i32, libc::SIGTERM) };
    // It must still be serving: a job sent now is taken and run.
    let job = h.enqueue_job("octo/app", "after term", &["self-hosted"], 10);
    wait_for("the job to be taken", DEADLINE, || {
        (h.job(job).unwrap().status != JobStatus::Queued).then_some(())
    });
    assert_eq!(stubborn.wait_exit(), 0);
    assert!(
        h.runners().iter().any(|r| r.id == hid && !r.online),
        "the hung runner never connected"
    );
    hung.drain();
    assert!(hung.lines.is_empty() && hung.child.try_wait().unwrap().is_none());
}
