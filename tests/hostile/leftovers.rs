//! Attacks through what outlives a job outside its root: files in `/tmp`, `/var/tmp`,
//! `/dev/shm` and `/run/lock` (and any other directory a runner can write in), and
//! SysV IPC objects, read by the next job that runs under the same
//! uid (of another target), or planted for it to take as its own.

use super::setup::*;
use crate::support::*;
use runner_manager::runner::leftovers;
use std::os::unix::fs::PermissionsExt;

/// What the first job leaves, each mode 600 under its uid, and what it plants: every
/// name carries `tag` so parallel tests never meet.
fn leave(tag: &str, shared: &std::path::Path, elsewhere: &std::path::Path) -> String {
    let mut s = String::from("umask 077\n");
    for d in ["/tmp", "/var/tmp", "/dev/shm", "/run/lock"] {
        s.push_str(&format!("echo DEPLOY_KEY=secret > {d}/{tag}-key\n"));
    }
    // A FIFO in /run/lock (mode 1777, on / or its own tmpfs): issue 48's leak_61000.
    s.push_str(&format!("mkfifo -m 600 /run/lock/{tag}-fifo\n"));
    s.push_str(&format!(
        "echo DEPLOY_KEY=secret > {}/{tag}-key\n",
        elsewhere.display()
    ));
    s.push_str(&format!(
        "mkdir -p /tmp/{tag}-dir/deep/er && echo DEPLOY_KEY=secret > /tmp/{tag}-dir/deep/er/key\n\
         echo DEPLOY_KEY=secret > {shared}/{tag}-key\n\
         ln -s /etc/passwd /tmp/{tag}-link\n\
         printf '#!/bin/sh\\necho PLANTED\\n' > /tmp/{tag}-tool && chmod 700 /tmp/{tag}-tool\n\
         ipcmk -M 4096 && ipcmk -S 1 && ipcmk -Q && echo made-ipc\n\
         ls -l /tmp/{tag}-key /dev/shm/{tag}-key /run/lock/{tag}-key /run/lock/{tag}-fifo \
         && echo left-all\n",
        shared = shared.display()
    ));
    s
}

#[test]
fn the_next_job_on_a_uid_finds_nothing_the_last_one_left_or_planted() {
    // One uid: every job runs under it, one after the other.
    let Some((mut w, uids)) = contained_world("hostile-tmp-leftovers", 1, 1) else {
        return;
    };
    w.add_target("evil", "evil/fork", true);
    w.add_profile(ProfileSpec::new("evil", "evil", &["evil"]).max(1));
    let uid = uids.range().start;
    let tag = format!("rm-left-{}-{uid}", std::process::id());
    // A shared directory anyone can write in (as /tmp/.ICE-unix is): the job's file in
    // it is the job's all the same.
    let shared = std::env::temp_dir().join(format!("{tag}-shared"));
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // Someone else's file in it, and in /tmp: never the walk's to remove.
    let bystander = shared.join("bystander");
    std::fs::write(&bystander, "keep").unwrap();
    // One no list names: a world-writable directory an operator made on the root
    // filesystem, found when the daemon starts.
    let elsewhere = std::path::PathBuf::from(format!("/var/lib/{tag}-drop"));
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o1777)).unwrap();
    w.start_daemon();

    let first = finished(
        &w,
        run_script(&w, "leaver", &leave(&tag, &shared, &elsewhere)),
    );
    let out = output(&first);
    assert!(out.contains(&"left-all".to_string()), "{out:#?}");
    assert!(out.contains(&"made-ipc".to_string()), "{out:#?}");
    let a = w.attempt_of_job("leaver");
    assert_eq!(a.runner_uid, Some(uid));
    wait_until(SETTLE, "the leaver's attempt is cleaned", || {
        w.attempt(a.id).cleaned
    });
    // Seen from outside: nothing of the uid's is left where jobs can write.
    for p in [
        format!("/tmp/{tag}-key"),
        format!("/var/tmp/{tag}-key"),
        format!("/dev/shm/{tag}-key"),
        format!("/run/lock/{tag}-key"),
        format!("/run/lock/{tag}-fifo"),
        format!("/tmp/{tag}-dir"),
        format!("/tmp/{tag}-link"),
        format!("/tmp/{tag}-tool"),
        format!("{}/{tag}-key", shared.display()),
        format!("{}/{tag}-key", elsewhere.display()),
    ] {
        assert!(
            std::fs::symlink_metadata(&p).is_err(),
            "{p} outlived its attempt"
        );
    }
    assert!(
        leftovers::ipc_of(uid).is_empty(),
        "SysV IPC of uid {uid} outlived its attempt: {:?}",
        leftovers::ipc_of(uid)
    );
    assert!(bystander.exists(), "the walk removed someone else's file");
    assert!(std::path::Path::new("/etc/passwd").exists());

    // The next job, of another target, on the same uid: it finds nothing to read and
    // nothing planted to run.
    let mut script = String::new();
    for (what, cmd) in [
        ("tmp-key", format!("cat /tmp/{tag}-key")),
        ("var-tmp-key", format!("cat /var/tmp/{tag}-key")),
        ("shm-key", format!("cat /dev/shm/{tag}-key")),
        ("run-lock-key", format!("cat /run/lock/{tag}-key")),
        ("run-lock-fifo", format!("[ -p /run/lock/{tag}-fifo ]")),
        ("deep-key", format!("cat /tmp/{tag}-dir/deep/er/key")),
        ("shared-key", format!("cat {}/{tag}-key", shared.display())),
        (
            "elsewhere-key",
            format!("cat {}/{tag}-key", elsewhere.display()),
        ),
        ("planted-tool", format!("/tmp/{tag}-tool")),
        (
            "sysv-ipc",
            "[ -n \"$(ipcs -m -s -q | awk -v u=$(id -un) '$3 == u')\" ]".to_string(),
        ),
    ] {
        script.push_str(&attempt(what, &cmd));
    }
    script.push_str("echo uid=$(id -u)\n");
    let next = w
        .sim
        .enqueue_script_job("evil/fork", "reader", &["self-hosted", "evil"], &script);
    let j = finished(&w, next);
    assert!(
        output(&j).contains(&format!("uid={uid}")),
        "the attack is meant to run under the leaver's uid: {j:?}"
    );
    assert_denied(
        &j,
        &[
            "tmp-key",
            "var-tmp-key",
            "shm-key",
            "run-lock-key",
            "run-lock-fifo",
            "deep-key",
            "shared-key",
            "elsewhere-key",
            "planted-tool",
            "sysv-ipc",
        ],
    );
    let logs = w.daemon_logs();
    let said = logs
        .lines()
        .find(|l| l.contains("attempt_leftovers_removed"))
        .unwrap_or_else(|| panic!("the cleanup said nothing of what it removed"));
    eprintln!("{said}");
    let found = logs
        .lines()
        .find(|l| l.contains("shared_dirs_found"))
        .unwrap_or_else(|| panic!("the daemon said nothing of the shared directories"));
    eprintln!("{found}");
    w.wait_settled(&[REPO, "evil/fork"]);
    w.check_invariants(&[REPO, "evil/fork"]);
    let _ = std::fs::remove_dir_all(&shared);
    let _ = std::fs::remove_dir_all(&elsewhere);
}

/// A leftover the cleanup cannot remove (made immutable here) defers the cleanup, and
/// the uid stays held: no other job runs under it until its leftovers are gone.
#[test]
fn a_leftover_that_cannot_be_removed_keeps_the_uid_held() {
    use runner_manager::domain::AttemptState;
    use std::time::Duration;
    let test = "a_leftover_that_cannot_be_removed_keeps_the_uid_held";
    let Some((mut w, uids)) = contained_world("hostile-stuck-leftover", 1, 1) else {
        return;
    };
    let uid = uids.range().start;
    let stuck = format!("/tmp/rm-stuck-{}-{uid}", std::process::id());
    let release = w.dir.join("release");
    w.start_daemon();
    let first = run_script(
        &w,
        "stuck",
        &format!(
            "echo DEPLOY_KEY=secret > {stuck}; echo up; while [ ! -e {} ]; do sleep 0.05; done\n",
            release.display()
        ),
    );
    wait_until(SETTLE, "the job left its file", || {
        std::path::Path::new(&stuck).exists()
    });
    let immutable = |on: bool| {
        std::process::Command::new("chattr")
            .arg(if on { "+i" } else { "-i" })
            .arg(&stuck)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !immutable(true) {
        std::fs::write(&release, "").unwrap();
        let _ = std::fs::remove_file(&stuck);
        return crate::users::skip(test, "chattr +i is not available on /tmp here");
    }
    std::fs::write(&release, "").unwrap();
    finished(&w, first);
    let a = w.attempt_of_job("stuck");
    wait_until(SETTLE, "the cleanup is deferred", || {
        w.attempt(a.id).state == AttemptState::CleanupDeferred
    });
    // The next job waits for the uid: it is not handed out while the cleanup is not done.
    let next = run_script(&w, "next", &attempt("stuck-file", &format!("cat {stuck}")));
    let started = poll_until(Duration::from_secs(2), || w.attempts().len() > 1);
    assert!(!started, "a second attempt started on the held uid");
    assert!(!w.attempt(a.id).cleaned);
    assert!(immutable(false));
    wait_until(Duration::from_secs(60), "the cleanup finishes", || {
        w.attempt(a.id).cleaned
    });
    let j = finished(&w, next);
    assert_denied(&j, &["stuck-file"]);
    assert!(std::fs::symlink_metadata(&stuck).is_err());
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
}
