//! End to end: a JIT config from the scale set endpoint starts the simulated runner
//! (a real process), which takes the scale set's job; the listener sees the job
//! assigned, started and completed, and the statistics follow.

use crate::support::*;
use runner_manager::domain::runner_name;
use runner_manager::scaleset::{JobMessage, MemoryCheckpoint, ScaleSetListener};
use runner_manager::sim::JobStatus;
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
fn a_scale_set_runner_takes_the_job_and_the_listener_sees_it_start_and_complete() {
    let e = env(300);
    let mut l = ScaleSetListener::new(
        e.client.clone(),
        listener_config("rm-e2e"),
        Box::new(MemoryCheckpoint::default()),
    );
    l.poll_once().unwrap();
    let job = e.sim.enqueue_job(REPO, "e2e", &["rm-e2e"], 50);
    let r = l.poll_once().unwrap();
    assert!(matches!(
        &r.message.as_ref().unwrap().jobs[..],
        [JobMessage::Assigned { .. }]
    ));
    let want = r.desired(0, 5).unwrap();
    assert_eq!(want, 1);

    let dir = TempDir::new("e2e");
    runner_manager::sim::install::lay_out(
        &dir.0,
        &PathBuf::from(env!("CARGO_BIN_EXE_runner-manager")),
    )
    .unwrap();
    let name = runner_name(HOST_ID, 1);
    let set = l.scale_set().unwrap().id;
    let (runner, config) = e
        .client
        .generate_jit_config_replacing_ours(set, HOST_ID, &name, "_work")
        .unwrap();
    let mut child = Command::new(dir.0.join("bin/Runner.Listener"))
        .arg("run")
        .current_dir(&dir.0)
        .env("ACTIONS_RUNNER_INPUT_JITCONFIG", config.expose())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    let mut seen = Vec::new();
    wait_for("JobStarted and JobCompleted", DEADLINE, || {
        let r = l.poll_once().unwrap();
        if let Some(m) = r.message {
            seen.extend(m.jobs);
        }
        let started = seen.iter().any(|j| {
            matches!(j, JobMessage::Started { runner_id, runner_name, .. }
            if *runner_id == runner.id && runner_name == &name)
        });
        let completed = seen.iter().any(|j| {
            matches!(j, JobMessage::Completed { result, runner_name, .. }
            if result == "succeeded" && runner_name == &name)
        });
        (started && completed).then_some(())
    });
    let code = wait_for("the runner to exit", DEADLINE, || child.try_wait().unwrap());
    assert_eq!(code.code(), Some(0));
    let j = e.sim.job(job).unwrap();
    assert_eq!(j.status, JobStatus::Completed);
    assert_eq!(j.runner_name.as_deref(), Some(name.as_str()));
    // Ephemeral: the registration went away with the job, and nothing is assigned.
    assert_eq!(e.client.runner_by_name(&name).unwrap(), None);
    let stats = e.sim.scaleset_statistics(set as u64);
    assert_eq!(stats["totalAssignedJobs"], 0);
    assert_eq!(stats["totalRegisteredRunners"], 0);
}
