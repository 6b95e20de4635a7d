//! One identity per host (issue 48): a copied state directory (`cp -a` of a live one,
//! an image, a restore) never runs beside its original under the original's host id,
//! and once it has its own it kills, deregisters and sweeps nothing of the original's.

use super::support::*;
use runner_manager::domain::{AttemptState, Outcome};
use runner_manager::sim::JobStatus;
use runner_manager::store::Store;

const REPO: &str = "octo/app";

/// The original: target `octo`, profile `linux` (label `orig`, max 2), a daemon, and a victim job
/// busy on one of its runners until `release` appears.
fn original(
    tag: &str,
) -> (
    World,
    std::path::PathBuf,
    u64,
    runner_manager::domain::Attempt,
) {
    let mut a = World::new(tag, 2);
    a.add_target("octo", REPO, true);
    a.add_profile(ProfileSpec::new("linux", "octo", &["orig"]).max(2));
    a.start_daemon();
    let release = a.dir.join("release-victim");
    let job = a
        .sim
        .enqueue_script_job(REPO, "victim", &["self-hosted", "orig"], &victim(&release));
    let v = busy_victim(&a);
    (a, release, job, v)
}

fn alive(v: &runner_manager::domain::Attempt) -> bool {
    runner_manager::runner::process_start_time(v.pid.unwrap()) == v.pid_start
}

/// The copy serves only jobs labelled `copy` (the original only `orig`), so which
/// daemon served a job says whose it is.
fn own_jobs(b: &World) {
    b.cli_ok(&["profile", "set", "linux", "labels=copy"]);
}

#[test]
fn a_copied_state_directory_is_refused_beside_its_original_and_kills_nothing_once_reidentified() {
    let (mut a, release, victim_job, v) = original("ident-copy-orig");
    let mut b = a.copy_state("ident-copy");
    assert_eq!(b.host_id, a.host_id);

    // Started on the copy: refused before it acts, naming the original and the fix.
    let out = b.cli(&["daemon", "--once"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    for part in [
        format!("host id {}", a.host_id),
        format!("pid {}", a.daemon_pid()),
        a.dir.file_name().unwrap().to_string_lossy().to_string(),
        "host reidentify".to_string(),
    ] {
        assert!(err.contains(&part), "{part:?} not in: {err}");
    }
    let fix = err.lines().last().unwrap_or("");
    assert_eq!(
        fix,
        format!(
            "fix: runner-manager --state-dir {} host reidentify",
            b.dir.display()
        ),
        "the fix is the copy's reidentify: {err}"
    );
    assert!(
        alive(&v),
        "the refused copy killed the original's busy runner"
    );
    assert_eq!(b.attempt(v.id).state, AttemptState::Busy);

    // A new identity for the copy.
    let said = b.cli_ok(&["host", "reidentify"]);
    let new_id = b.store().host_or_create().unwrap().id;
    assert_ne!(new_id, a.host_id);
    assert!(
        said.contains(&a.host_id) && said.contains(&new_id),
        "host reidentify says what it did: {said}"
    );
    assert!(
        said.contains(&format!("pid {}", a.daemon_pid())),
        "it names the original that runs here: {said}"
    );
    b.host_id = new_id.clone();
    let handed = b.attempt(v.id);
    assert!(
        handed.cleaned
            && handed.outcome == Some(Outcome::Orphaned)
            && handed.reason.as_ref().is_some_and(|r| {
                r.to_string().starts_with("handed back") && r.to_string().contains(&a.host_id)
            }),
        "the copy's books hand the original's runner back: {handed:?}"
    );
    let status = b.status_json();
    assert!(
        status["identity"]["last_change"]
            .as_str()
            .is_some_and(|l| l.contains(&new_id) && l.contains(&a.host_id)),
        "{}",
        status["identity"]
    );

    // The copy runs beside the original: its start's sweep finds a copy of the
    // victim's root whose row names the victim's live pid, and kills nothing.
    own_jobs(&b);
    b.start_daemon();
    let pid = b.daemon_pid();
    wait_until(SETTLE, "the copy's daemon has swept and runs", || {
        b.status_json()["daemon"]["pid"].as_u64() == Some(u64::from(pid))
    });
    let job = a.enqueue(REPO, "copy-job", &["copy"], 100);
    wait_until(SETTLE, "the copy served its job", || {
        a.sim
            .jobs()
            .iter()
            .any(|j| j.id == job && j.status == JobStatus::Completed)
    });
    let served = a.sim.jobs().into_iter().find(|j| j.id == job).unwrap();
    let runner = served.runner_name.unwrap_or_default();
    assert!(
        runner.starts_with(&format!("rm-{}-", &new_id[..8])),
        "the copy's runner is named with its new id: {runner}"
    );
    assert!(alive(&v), "the copy killed the original's busy runner");
    assert!(
        !b.dir.join("attempts").join(v.id.to_string()).exists(),
        "the copy kept its copy of the original's root"
    );
    assert!(
        a.dir.join("attempts").join(v.id.to_string()).is_dir(),
        "the original's root is gone"
    );
    assert!(
        a.our_registrations()
            .iter()
            .any(|r| r.name == v.runner_name),
        "the copy deregistered the original's busy runner"
    );
    assert!(
        b.daemon_exited().is_none(),
        "the copy's daemon stopped: {}",
        b.daemon_logs()
    );

    // The original itself, its daemon gone and its runner alive: a new id would leave
    // the runner to nobody. Refused, nothing written.
    a.kill_daemon();
    let before = a.store().host_or_create().unwrap();
    let out = a.cli(&["host", "reidentify"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(13), "{out:?}");
    assert!(
        err.contains(&format!("attempts {}", v.id)) && err.contains("drain"),
        "{err}"
    );
    assert_eq!(a.store().host_or_create().unwrap(), before);
    assert_eq!(a.attempt(v.id).state, AttemptState::Busy);
    a.start_daemon();

    std::fs::write(&release, "").unwrap();
    let j = a.finished(victim_job);
    assert_eq!(j.conclusion.as_deref(), Some("success"), "{j:?}");
    assert_eq!(j.runner_name.as_deref(), Some(v.runner_name.as_str()));
    assert_eq!(b.stop_daemon().code(), Some(0));
    a.wait_settled(&[REPO]);
    b.wait_settled(&[REPO]);
    a.stop_daemon();
}

#[test]
fn a_store_copied_to_another_machine_takes_a_new_id_at_start_and_leaves_the_original_be() {
    let (mut a, release, victim_job, v) = original("ident-clone-orig");
    let mut b = a.copy_state("ident-clone");
    // The original's runner ends: on the clone, the copied attempt's process is not
    // alive, as on another machine.
    std::fs::write(&release, "").unwrap();
    let j = a.finished(victim_job);
    assert_eq!(j.conclusion.as_deref(), Some("success"), "{j:?}");
    wait_until(SETTLE, "the victim's process is gone", || !alive(&v));
    let machine = b.dir.with_extension("machine-id");
    std::fs::write(&machine, "fedcba9876543210fedcba9876543210\n").unwrap();
    b.env.push((
        "RUNNER_MANAGER_MACHINE_ID_FILE".into(),
        machine.display().to_string(),
    ));

    // Before its daemon starts, doctor and status say the id is another machine's.
    let doctor = String::from_utf8_lossy(&b.cli(&["doctor"]).stdout).to_string();
    let line = doctor
        .lines()
        .find(|l| l.contains("identity"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.contains("WARN") && line.contains("another machine"),
        "doctor: {doctor}"
    );
    assert_eq!(b.status_json()["identity"]["ok"], false);

    own_jobs(&b);
    b.start_daemon();
    let pid = b.daemon_pid();
    wait_until(SETTLE, "the clone's daemon runs", || {
        b.status_json()["daemon"]["pid"].as_u64() == Some(u64::from(pid))
    });
    let new_id = b.store().host_or_create().unwrap().id;
    assert_ne!(new_id, a.host_id, "the clone kept the original's id");
    b.host_id = new_id.clone();
    assert!(b.daemon_logs().contains("host_reidentified"));
    let status = b.status_json();
    assert_eq!(status["identity"]["ok"], true, "{}", status["identity"]);
    let handed = b.attempt(v.id);
    assert!(
        handed.cleaned && handed.outcome == Some(Outcome::Orphaned),
        "{handed:?}"
    );

    // The original goes on: a new runner of its own is not the clone's orphan.
    let job = a.enqueue(REPO, "after", &["orig"], 100);
    let after = a.finished(job);
    assert!(
        after
            .runner_name
            .as_deref()
            .is_some_and(|r| r.starts_with(&a.runner_prefix())),
        "{after:?}"
    );
    let ran = a.attempt_of_job("after");
    wait_until(SETTLE, "the original's runner ended", || {
        a.attempt(ran.id).outcome.is_some()
    });
    assert_eq!(
        a.attempt(ran.id).outcome,
        Some(Outcome::CompletedJob),
        "{:?}",
        a.attempt(ran.id)
    );
    assert_eq!(b.stop_daemon().code(), Some(0));
    a.wait_settled(&[REPO]);
    a.check_invariants(&[REPO]);
    a.stop_daemon();
}
