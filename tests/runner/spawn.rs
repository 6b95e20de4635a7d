//! Spawning: the JIT only in the environment, a scrubbed environment, own session,
//! no inherited descriptors, output in the log, exit codes while we are the parent.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;

use runner_manager::runner::{
    self, ExitInfo, Reap, SpawnError, SpawnSpec, proc::read_stat, reap_child, spawn_runner,
};
use runner_manager::secret::Secret;

use super::util::{FakeRunner, TempDir, WAIT, contains, proc_file, wait_until};

const WAITING: &str =
    "#!/bin/sh\necho \"listener started $1\"\necho 'to stderr' >&2\nsleep 1000 &\nwait\n";

#[test]
fn jit_is_in_the_environment_only_and_the_rest_is_scrubbed() {
    let jit = "eyJ-test-jit-config-value-5b1f";
    let r = FakeRunner::start("jit", WAITING, jit);
    r.wait_log("listener started run");
    r.wait_log("to stderr");

    let environ = proc_file(r.pid(), "environ");
    let vars: BTreeSet<String> = environ
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| {
            String::from_utf8_lossy(v)
                .split('=')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(contains(
        &environ,
        format!("{}={jit}", runner::spawn::JIT_ENV).as_bytes()
    ));
    assert!(!contains(&proc_file(r.pid(), "cmdline"), jit.as_bytes()));
    assert!(!contains(
        &proc_file(std::process::id() as i32, "cmdline"),
        jit.as_bytes()
    ));

    // Every variable of ours that is not on the allow-list stays behind.
    let allowed = [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LC_ALL",
        "TZ",
        "RUNNER_ALLOW_RUNASROOT",
        "RM_EXTRA",
        runner::spawn::JIT_ENV,
    ];
    let canary = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .find(|k| !allowed.contains(&k.as_str()))
        .expect("the test process has some variable outside the allow-list");
    assert!(!vars.contains(&canary), "{canary} leaked into the runner");
    for v in &vars {
        assert!(allowed.contains(&v.as_str()), "unexpected variable {v}");
    }
    assert!(vars.contains("PATH") && vars.contains("HOME") && vars.contains("RM_EXTRA"));

    // Own session and process group; cwd is the root; the log is private.
    let stat = read_stat(r.pid()).unwrap();
    assert_eq!((stat.session, stat.pgrp), (r.pid(), r.pid()));
    assert_eq!(
        fs::read_link(format!("/proc/{}/cwd", r.pid())).unwrap(),
        fs::canonicalize(&r.root).unwrap()
    );
    assert_eq!(
        fs::metadata(&r.log).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!r.log.starts_with(&r.root));
}

#[test]
fn no_descriptor_is_inherited_beyond_stdio() {
    // A descriptor without O_CLOEXEC, as a careless library in the daemon might leave.
    let leaked = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
    assert!(leaked > 2);
    let r = FakeRunner::start("fds", "#!/bin/sh\necho ready\nexec sleep 1000\n", "jit");
    unsafe { libc::close(leaked) };
    // After exec the shell's own (close-on-exec) descriptors are gone too. The kernel
    // shows the new command line a moment before it closes those, so the set is read
    // until it settles: a descriptor that really leaked never goes, and the wait fails.
    assert!(wait_until(WAIT, || proc_file(r.pid(), "cmdline").starts_with(b"sleep")));
    let mut fds = BTreeSet::new();
    let settled = wait_until(WAIT, || {
        fds = fs::read_dir(format!("/proc/{}/fd", r.pid()))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .collect();
        fds == BTreeSet::from([0, 1, 2])
    });
    assert!(
        settled,
        "the runner holds descriptors {fds:?}, not only stdio"
    );
    assert_eq!(
        fs::read_link(format!("/proc/{}/fd/0", r.pid())).unwrap(),
        std::path::Path::new("/dev/null")
    );
    assert_eq!(
        fs::read_link(format!("/proc/{}/fd/1", r.pid())).unwrap(),
        fs::canonicalize(&r.log).unwrap()
    );
}

#[test]
fn exit_code_is_known_while_we_are_the_parent() {
    let r = FakeRunner::start("exit", "#!/bin/sh\necho bye\nexit 3\n", "jit");
    // The exited child is a zombie until reaped: it already counts as gone.
    assert!(wait_until(WAIT, || runner::is_alive(
        r.pid(),
        r.spawned.start_time
    ) == runner::ProcessStatus::Gone));
    assert_eq!(r.wait_reaped(), Reap::Exited(ExitInfo::Code(3)));
    // Reaped once: from now on it is as unknowable as a re-adopted runner's.
    assert_eq!(reap_child(r.pid()), Reap::NotOurChild);
    assert!(r.log_text().contains("bye"));
}

#[test]
fn run_as_drops_to_the_user() {
    let nobody = runner::lookup_user("nobody").unwrap();
    let r = FakeRunner::start_with(
        "runas",
        "#!/bin/sh\necho \"uid=$(id -u) home=$HOME\"\ntouch .written-by-runner && echo wrote\nexec sleep 1000\n",
        "jit",
        Some(&nobody),
    );
    r.wait_log(&format!(
        "uid={} home={}",
        nobody.uid,
        nobody.home.display()
    ));
    // The root's directories were given to the user, so it can write its files.
    r.wait_log("wrote");
    let status = String::from_utf8(proc_file(r.pid(), "status")).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line
            .split_whitespace()
            .skip(1)
            .all(|u| u == nobody.uid.to_string())
    );
}

#[test]
fn refuses_a_root_without_a_listener() {
    let dir = TempDir::new("nolistener");
    let secret = Secret::new("jit");
    let err = spawn_runner(&SpawnSpec {
        root: dir.path(),
        log_path: &dir.path().join("x.log"),
        jit_config: &secret,
        run_as: None,
        extra_env: &[],
        home: None,
        tmp: None,
        cgroup: None,
        contain: false,
        pid_file: None,
    })
    .unwrap_err();
    assert!(matches!(err, SpawnError::Install(_)), "{err}");
    assert!(err.to_string().contains("bin/Runner.Listener is missing"));
    assert!(!dir.path().join("x.log").exists());
}
