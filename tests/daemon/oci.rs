//! The `oci` execution backend (issue 21) against a fake `podman`
//! (`tests/fixtures/oci/podman`, which logs its arguments): a host not ready for
//! rootless containers starts nothing and asks GitHub for no JIT config, saying why in
//! `status` and `doctor`; a ready one runs the job in a container whose `podman run`
//! carries the pinned image, five capabilities, the limits and the labels, with the
//! JIT config on stdin and in no argument; a container a crash left is removed by its
//! labels, each attempt's at its cleanup, and an OOM-killed container ends as `oom`.
//! A real Podman is not used: this machine has no cgroup v2 and no registry.

use super::support::{ProfileSpec, SETTLE, World, wait_until};
use runner_manager::domain::{AttemptState, Outcome, ReasonKind};
use std::path::{Path, PathBuf};

const JIT: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";
const IMAGE: &str = "ghcr.io/actions/actions-runner:2.330.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// What a rootless Podman on xfs answers to `info` (`rootless` as given).
fn info(rootless: bool) -> String {
    format!(
        r#"{{"host": {{"cgroupControllers": ["cpu", "memory", "pids"], "cgroupVersion": "v2",
          "idMappings": {{
            "uidmap": [{{"container_id": 0, "host_id": 1000, "size": 1}},
                       {{"container_id": 1, "host_id": 100000, "size": 65536}}],
            "gidmap": [{{"container_id": 0, "host_id": 1000, "size": 1}},
                       {{"container_id": 1, "host_id": 100000, "size": 65536}}]}},
          "security": {{"rootless": {rootless}}}}},
         "store": {{"graphDriverName": "overlay", "graphStatus": {{"Backing Filesystem": "xfs"}}}},
         "version": {{"Version": "5.0.3"}}}}"#
    )
}

fn requests(w: &World, endpoint: &str) -> usize {
    w.log().iter().filter(|e| e.endpoint == endpoint).count()
}

/// A world whose daemon and CLI find the fake `podman`, answering from `fake`, and
/// one `oci` profile `boxed`.
fn oci_world(tag: &str) -> (World, PathBuf) {
    let mut w = World::new(tag, 2);
    let fake = w.dir.join("fake-podman");
    std::fs::create_dir_all(&fake).unwrap();
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oci/podman");
    w.env = vec![
        (
            "RUNNER_MANAGER_PODMAN".into(),
            program.display().to_string(),
        ),
        ("FAKE_PODMAN_DIR".into(), fake.display().to_string()),
        (
            "FAKE_PODMAN_RUNNER".into(),
            w.runner_dir.display().to_string(),
        ),
    ];
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("boxed", "t", &["boxed"]).max(1));
    w.cli_ok(&[
        "profile",
        "set",
        "boxed",
        "execution=oci",
        &format!("image={IMAGE}"),
        "memory_max=2G",
        "cpu_max=1.5",
        // The runner install is the image's: none on the host.
        "runner_dir=",
    ]);
    (w, fake)
}

/// The fake's calls, each its arguments.
fn calls(fake: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(fake.join("argv.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            l.trim_end_matches('\t')
                .split('\t')
                .map(String::from)
                .collect()
        })
        .collect()
}

#[test]
fn a_profile_not_given_an_image_by_digest_is_refused_by_name() {
    let (w, _fake) = oci_world("oci-refused");
    let before = w.cli_ok(&["--json", "profile", "show", "boxed"]);
    for (arg, bad) in [
        ("image", "image=ghcr.io/actions/actions-runner:latest"),
        ("execution", "execution=docker"),
        ("image", "image="),
    ] {
        let out = w.cli(&["profile", "set", "boxed", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(arg), "{bad}: {err}");
    }
    assert_eq!(w.cli_ok(&["--json", "profile", "show", "boxed"]), before);
    let show = w.cli_ok(&["profile", "show", "boxed"]);
    assert!(show.contains("oci") && show.contains(IMAGE), "{show}");
}

#[test]
fn a_host_not_ready_for_containers_asks_for_no_jit_config_and_says_why() {
    let (mut w, fake) = oci_world("oci-unready");
    // Podman runs as root here: not rootless.
    std::fs::write(fake.join("info.json"), info(false)).unwrap();
    let doctor = w.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL oci:boxed") && l.contains("rootless")),
        "{text}"
    );
    let required = text.find("required (").expect("a required group");
    let recommended = text.find("\nrecommended:").unwrap_or(text.len());
    let line = text.find("FAIL oci:boxed").unwrap();
    assert!(required < line && line < recommended, "{text}");

    let jit_before = requests(&w, JIT);
    w.start_daemon_with(&["--fitness-every", "1"]);
    w.enqueue("acme/app", "in-a-box", &["boxed"], 200);
    wait_until(SETTLE, "status to show why boxed starts nothing", || {
        w.limiting("boxed").contains("required check oci:boxed")
    });
    assert!(
        w.limiting("boxed").contains("rootless"),
        "{}",
        w.limiting("boxed")
    );
    let reads = requests(&w, RUNS);
    wait_until(SETTLE, "two more queue reads while not ready", || {
        requests(&w, RUNS) >= reads + 2
    });
    assert_eq!(requests(&w, JIT), jit_before, "a JIT config was asked for");
    assert!(w.attempts().is_empty(), "{:?}", w.attempts());
    assert!(
        !calls(&fake).iter().any(|c| c[0] == "run"),
        "{:?}",
        calls(&fake)
    );

    // No Podman at all: doctor says so, plainly.
    std::fs::remove_file(fake.join("info.json")).unwrap();
    let doctor = w.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL oci:boxed") && l.contains("cannot connect to Podman")),
        "{text}"
    );
    assert!(text.contains("install Podman"), "{text}");
    w.stop_daemon();
}

#[test]
fn a_ready_host_runs_the_job_in_a_labelled_container_and_removes_what_is_left() {
    let (mut w, fake) = oci_world("oci-ready");
    std::fs::write(fake.join("info.json"), info(true)).unwrap();
    // A container a crashed daemon left, and one of another host: only ours goes.
    let short = &w.host_id[..8];
    let leftover = format!("rm-{short}-999");
    std::fs::write(fake.join("ps"), format!("{leftover} 999\n")).unwrap();

    w.start_daemon();
    wait_until(SETTLE, "the leftover container to be removed", || {
        calls(&fake)
            .iter()
            .any(|c| c[0] == "rm" && c.contains(&leftover))
    });
    let id = w.enqueue("acme/app", "in-a-box", &["boxed"], 200);
    w.finished(id);
    let a = w.attempts().into_iter().next().expect("an attempt");
    wait_until(SETTLE, "the attempt to be cleaned", || {
        w.attempt(a.id).cleaned
    });

    let all = calls(&fake);
    let run = all.iter().find(|c| c[0] == "run").expect("a podman run");
    let has = |x: &str| run.iter().any(|r| r == x);
    for want in [
        "--cap-drop=all",
        "--cap-add=CHOWN",
        "--cap-add=DAC_OVERRIDE",
        "--cap-add=FOWNER",
        "--cap-add=SETGID",
        "--cap-add=SETUID",
        "--cpus=1.500",
        "--memory=2147483648",
        &format!("--name={}", a.runner_name),
        &format!("--label=runner-manager.host={}", w.host_id),
        &format!("--label=runner-manager.attempt={}", a.id),
        IMAGE,
    ] {
        assert!(has(want), "{want} missing from {run:?}");
    }
    assert_eq!(run.iter().filter(|r| r.starts_with("--cap-add")).count(), 5);
    assert!(
        !run.iter()
            .any(|r| r.starts_with("-v") || r.starts_with("--volume") || r.starts_with("--mount")),
        "{run:?}"
    );
    // The JIT config went on stdin: the runner registered with it, and no argument
    // carries it.
    assert!(
        !run.iter()
            .any(|r| r.starts_with("--env=ACTIONS_RUNNER_INPUT_JITCONFIG")),
        "{run:?}"
    );
    assert!(!all.concat().concat().contains("eyJ"), "{all:?}");
    // Its cleanup found it by its labels and removed it.
    assert!(
        all.iter().any(|c| c[0] == "ps"
            && c.contains(&format!("--filter=label=runner-manager.attempt={}", a.id))),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|c| c[0] == "rm" && c.contains(&a.runner_name)),
        "{all:?}"
    );
    assert!(
        !std::fs::read_to_string(fake.join("ps"))
            .unwrap()
            .contains(&a.runner_name)
    );

    // A container the OOM killer ended ends its attempt as `oom`.
    std::fs::write(fake.join("oom"), "").unwrap();
    w.enqueue("acme/app", "too-big", &["boxed"], 200);
    wait_until(SETTLE, "the second attempt to end", || {
        w.attempts()
            .iter()
            .any(|b| b.id != a.id && b.ended_at.is_some())
    });
    let b = w.attempts().into_iter().find(|b| b.id != a.id).unwrap();
    assert_eq!(
        b.reason.as_ref().map(|r| r.kind()),
        Some(ReasonKind::Oom),
        "{b:?}"
    );
    w.stop_daemon();
}

#[test]
fn a_container_outlives_a_killed_daemon_and_the_next_one_adopts_and_removes_it() {
    let (mut w, fake) = oci_world("oci-adopt");
    std::fs::write(fake.join("info.json"), info(true)).unwrap();
    w.start_daemon();
    let id = w.enqueue("acme/app", "long", &["boxed"], 3_000);
    wait_until(SETTLE, "the container's runner to take the job", || {
        !w.in_state(AttemptState::Busy).is_empty()
    });
    let a = w.in_state(AttemptState::Busy).pop().unwrap();
    w.kill_daemon();
    // The container (here its `podman run`, the attempt's process) runs on.
    let pid = a.pid.expect("a recorded pid");
    assert!(Path::new(&format!("/proc/{pid}")).exists());

    w.start_daemon();
    w.finished(id);
    wait_until(SETTLE, "the adopted attempt to be cleaned", || {
        w.attempt(a.id).cleaned
    });
    let after = w.attempt(a.id);
    assert_eq!(after.outcome, Some(Outcome::CompletedJob), "{after:?}");
    assert!(
        calls(&fake)
            .iter()
            .any(|c| c[0] == "rm" && c.contains(&a.runner_name)),
        "{:?}",
        calls(&fake)
    );
    assert_eq!(
        w.attempts().len(),
        1,
        "a second runner was started: {:?}",
        w.attempts()
    );
    w.stop_daemon();
}

/// An `oci` attempt's meters are its container's cgroup's (Podman names it with
/// `inspect --format={{.State.CgroupPath}}`, under the cgroup v2 mount), never the
/// `podman run` client's: here the fake names a directory of fake cgroup files, and
/// the attempt's figures are exactly theirs.
#[test]
fn a_containers_meters_are_read_from_its_own_cgroup() {
    let (mut w, fake) = oci_world("oci-meters");
    std::fs::write(fake.join("info.json"), info(true)).unwrap();
    let root = w.dir.join("cgroupfs");
    let scope = "user.slice/user-1000.slice/user@1000.service/user.slice/libpod-fake.scope";
    let cg = root.join(scope);
    std::fs::create_dir_all(&cg).unwrap();
    std::fs::write(cg.join("memory.current"), "300000000\n").unwrap();
    std::fs::write(cg.join("memory.peak"), "412345678\n").unwrap();
    std::fs::write(
        cg.join("cpu.stat"),
        "usage_usec 7250000\nuser_usec 7000000\nsystem_usec 250000\n",
    )
    .unwrap();
    std::fs::write(cg.join("pids.current"), "9\n").unwrap();
    std::fs::write(fake.join("cgroup-path"), format!("/{scope}\n")).unwrap();
    w.env.push((
        "RUNNER_MANAGER_CGROUP_ROOT".into(),
        root.display().to_string(),
    ));
    w.start_daemon();
    let id = w.enqueue("acme/app", "metered", &["boxed"], 3_000);
    wait_until(SETTLE, "the container's runner to take the job", || {
        !w.in_state(AttemptState::Busy).is_empty()
    });
    let a = w.in_state(AttemptState::Busy).pop().unwrap();
    let mut seen = serde_json::Value::Null;
    wait_until(SETTLE, "live figures from the container's cgroup", || {
        seen = w.active_json(a.id);
        !seen["meter"].is_null()
    });
    assert_eq!(seen["meter"]["processes"], 9, "{seen:#}");
    assert_eq!(seen["meter"]["rss_bytes"], 412_345_678u64, "{seen:#}");
    w.finished(id);
    wait_until(SETTLE, "the attempt to be cleaned", || {
        w.attempt(a.id).cleaned
    });
    let done = w.attempt(a.id);
    assert_eq!(done.peak_rss_bytes, Some(412_345_678), "{done:?}");
    assert_eq!(done.cpu_millis, Some(7_250), "{done:?}");
    assert!(
        calls(&fake).iter().any(|c| c[0] == "inspect"
            && c.contains(&"--format={{.State.CgroupPath}}".to_string())
            && c.contains(&a.runner_name)),
        "{:?}",
        calls(&fake)
    );
    w.stop_daemon();
}

/// A kill by the container's memory limit inside it (a job's process, not the
/// container's init, which Podman's `OOMKilled` alone would speak of) ends the attempt
/// as `oom`: the sampler reads the container cgroup's `oom_kill` while it lives (issue
/// 31: on Debian 12, Podman said nothing of a job's 600 MB allocation it killed).
#[test]
fn a_kill_by_the_containers_memory_limit_inside_it_ends_the_attempt_as_oom() {
    let (mut w, fake) = oci_world("oci-oom-inside");
    std::fs::write(fake.join("info.json"), info(true)).unwrap();
    let root = w.dir.join("cgroupfs");
    let scope = "user.slice/user-1000.slice/user@1000.service/user.slice/libpod-oom.scope";
    let cg = root.join(scope);
    std::fs::create_dir_all(&cg).unwrap();
    std::fs::write(cg.join("memory.current"), "200000000\n").unwrap();
    std::fs::write(cg.join("cpu.stat"), "usage_usec 1000\n").unwrap();
    std::fs::write(
        cg.join("memory.events"),
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n",
    )
    .unwrap();
    std::fs::write(fake.join("cgroup-path"), format!("/{scope}\n")).unwrap();
    w.env.push((
        "RUNNER_MANAGER_CGROUP_ROOT".into(),
        root.display().to_string(),
    ));
    w.start_daemon();
    let id = w.enqueue("acme/app", "hungry", &["boxed"], 4_000);
    wait_until(SETTLE, "the container's runner to take the job", || {
        !w.in_state(AttemptState::Busy).is_empty()
    });
    let a = w.in_state(AttemptState::Busy).pop().unwrap();
    wait_until(SETTLE, "live figures from the container's cgroup", || {
        !w.active_json(a.id)["meter"].is_null()
    });
    // The limit kills a process of the job; the container and its runner go on.
    std::fs::write(
        cg.join("memory.events"),
        "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 0\n",
    )
    .unwrap();
    w.finished(id);
    wait_until(SETTLE, "the attempt to end", || {
        w.attempt(a.id).ended_at.is_some()
    });
    let done = w.attempt(a.id);
    assert_eq!(
        done.reason.as_ref().map(|r| r.kind()),
        Some(ReasonKind::Oom),
        "{done:?}"
    );
    w.stop_daemon();
}
