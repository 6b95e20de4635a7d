//! Attacks from inside a job, each of which must fail: reading the manager's secrets
//! and books, another runner's root and environment, signalling the daemon or another
//! runner, changing the install for later runners, outliving the attempt, and
//! exhausting the host's processes or memory.

use super::setup::*;
use crate::support::*;
use runner_manager::domain::{Outcome, Reason, ReasonKind};
use runner_manager::runner::uid::processes_of_uid;
use std::time::Duration;

#[test]
fn a_job_reaches_no_secret_no_book_and_no_other_runner() {
    let Some((mut w, _uids)) = contained_world("hostile-secrets", 4, 3) else {
        return;
    };
    w.start_daemon();
    let release = w.dir.join("release-victim");
    let victim_job = run_script(&w, "victim", &victim(&release));
    let v = busy_victim(&w);
    let vpid = v.pid.unwrap();
    let daemon = w.daemon_pid();
    let d = w.dir.display();
    let vroot = format!("{d}/attempts/{}", v.id);
    let mut script = String::new();
    for (what, cmd) in [
        ("token", format!("cat {d}/token-octo")),
        ("store", format!("cat {d}/state.db")),
        ("store-journal", format!("cat {d}/state.db-wal")),
        ("logs", format!("ls {d}/logs")),
        ("victim-log", format!("cat {d}/logs/{}.log", v.id)),
        ("attempts", format!("ls {d}/attempts")),
        ("victim-root", format!("ls {vroot}")),
        ("victim-registration", format!("cat {vroot}/.runner")),
        ("victim-home", format!("ls {vroot}/_home")),
        ("victim-work", format!("ls {vroot}/_work")),
        ("victim-environ", format!("cat /proc/{vpid}/environ")),
        ("daemon-environ", format!("cat /proc/{daemon}/environ")),
        ("signal-daemon", format!("kill -0 {daemon}")),
        ("signal-victim", format!("kill -0 {vpid}")),
        ("write-state-dir", format!("touch {d}/planted")),
        ("plant-root", format!("mkdir {d}/attempts/999999")),
        ("plant-link", format!("ln -s / {d}/attempts/999998")),
    ] {
        script.push_str(&attempt(what, &cmd));
    }
    // Its own runner's environment is its own business, but the JIT variable never
    // reaches the job's.
    script.push_str("if env | grep -q ACTIONS_RUNNER_INPUT_JITCONFIG; then echo 'REACHED jit-env'; else echo 'DENIED jit-env'; fi\n");
    let attacker = run_script(&w, "attacker", &script);
    let j = finished(&w, attacker);
    assert_denied(
        &j,
        &[
            "token",
            "store",
            "store-journal",
            "logs",
            "victim-log",
            "attempts",
            "victim-root",
            "victim-registration",
            "victim-home",
            "victim-work",
            "victim-environ",
            "daemon-environ",
            "signal-daemon",
            "signal-victim",
            "write-state-dir",
            "plant-root",
            "plant-link",
            "jit-env",
        ],
    );
    assert!(!w.dir.join("planted").exists());
    // The two ran under different uids of the block, neither the daemon's.
    let a = w.attempt_of_job("attacker");
    assert_ne!(a.runner_uid, v.runner_uid);
    assert!(a.runner_uid.is_some_and(|u| u != 0));

    std::fs::write(&release, "").unwrap();
    let vj = finished(&w, victim_job);
    assert!(output(&vj).contains(&"victim-done".to_string()), "{vj:?}");
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
}

#[test]
fn a_job_cannot_change_the_install_and_has_its_own_user_and_home() {
    let Some((mut w, uids)) = contained_world("hostile-install", 2, 1) else {
        return;
    };
    let listener = w.runner_dir.join("bin/Runner.Listener");
    let before = std::fs::read(&listener).unwrap();
    w.start_daemon();
    let install = w.runner_dir.display();
    // (Its own root is its own: moving its bin/ aside only changes what it already
    // runs. What must hold is that nothing reaches the install itself.)
    let mut script = String::from(
        "echo user=$(id -un) uid=$(id -u) home=$HOME tmp=$TMPDIR\n\
         touch \"$HOME/.profile-of-this-job\" && echo home-writable\n\
         touch \"$TMPDIR/scratch\" && echo tmp-writable\n",
    );
    for (what, cmd) in [
        (
            "append-listener",
            "sh -c 'printf x >> ../bin/Runner.Listener'".to_string(),
        ),
        (
            "chmod-listener",
            "chmod 777 ../bin/Runner.Listener".to_string(),
        ),
        (
            "replace-listener",
            "ln -sf /bin/true ../bin/Runner.Listener".to_string(),
        ),
        (
            "remove-listener",
            "rm -f ../bin/Runner.Listener".to_string(),
        ),
        ("write-externals", "touch ../externals/planted".to_string()),
        ("write-install", format!("touch {install}/bin/planted")),
        ("write-install-root", format!("touch {install}/planted")),
    ] {
        script.push_str(&attempt(what, &cmd));
    }
    let j = finished(&w, run_script(&w, "tamper", &script));
    assert_denied(
        &j,
        &[
            "append-listener",
            "chmod-listener",
            "replace-listener",
            "remove-listener",
            "write-externals",
            "write-install",
            "write-install-root",
        ],
    );
    let out = output(&j);
    let a = w.attempt_of_job("tamper");
    let uid = a.runner_uid.expect("a runner uid");
    assert!(uids.range().contains(uid));
    let user_line = out.iter().find(|l| l.starts_with("user=")).unwrap();
    assert!(
        user_line.starts_with(&format!("user={} uid={uid} ", crate::users::user_name(uid))),
        "{user_line}"
    );
    let home = format!("home={}/attempts/{}/_home", w.dir.display(), a.id);
    assert!(user_line.contains(&home), "{user_line} (want {home})");
    assert!(out.contains(&"home-writable".to_string()), "{out:#?}");
    assert!(out.contains(&"tmp-writable".to_string()), "{out:#?}");
    assert_eq!(
        std::fs::read(&listener).unwrap(),
        before,
        "the install changed"
    );
    assert!(!w.runner_dir.join("externals/planted").exists());
    // A later runner runs the install as it was.
    let again = finished(&w, run_script(&w, "after", "echo fine\n"));
    assert_eq!(again.conclusion.as_deref(), Some("success"), "{again:?}");
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
}

#[test]
fn nothing_a_job_leaves_behind_outlives_its_attempt() {
    let Some((mut w, _uids)) = contained_world("hostile-leftovers", 2, 1) else {
        return;
    };
    w.start_daemon();
    let script = "setsid sleep 300 </dev/null >/dev/null 2>&1 &\n\
                  (sleep 301 </dev/null >/dev/null 2>&1 &)\n\
                  nohup sh -c 'trap \"\" TERM HUP; exec sleep 302' </dev/null >/dev/null 2>&1 &\n\
                  echo left-three";
    let j = finished(&w, run_script(&w, "leaver", script));
    assert!(output(&j).contains(&"left-three".to_string()), "{j:?}");
    let a = w.attempt_of_job("leaver");
    let uid = a.runner_uid.expect("a runner uid");
    wait_until(SETTLE, "the attempt is cleaned", || w.attempt(a.id).cleaned);
    let left = processes_of_uid(uid);
    assert!(
        left.is_empty(),
        "processes of uid {uid} outlived the attempt: {left:?}"
    );
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
}

#[test]
fn a_fork_bomb_stops_at_pids_max_and_the_host_carries_on() {
    let Some((mut w, uids)) = contained_world("hostile-forks", 2, 2) else {
        return;
    };
    w.cli_ok(&["profile", "set", "linux", "pids_max=40"]);
    w.start_daemon();
    let bomb = run_script(
        &w,
        "bomb",
        // `wait` (a builtin: no fork needed past pids_max) keeps the job, and so the
        // bomb's processes, alive until its sleeps end: a bomb whose forks fail at
        // once would otherwise end before a loaded host's sampling saw it.
        "i=0; while [ $i -lt 400 ]; do sleep 8 & i=$((i+1)); done; echo tried=$i; wait\n",
    );
    // While it forks, count what runs under each uid of the block (only our runners
    // run under them, and the bomb's is the only busy one).
    let mut most = 0usize;
    wait_until(Duration::from_secs(60), "the bomb's job ends", || {
        for u in uids.uids() {
            most = most.max(processes_of_uid(u).len());
        }
        w.sim
            .jobs()
            .iter()
            .any(|j| j.id == bomb && j.conclusion.is_some())
    });
    assert!(
        most <= 40,
        "{most} processes under the bomb's uid, past pids_max 40"
    );
    assert!(most >= 10, "the bomb never got going ({most} processes)");
    let a = w.attempt_of_job("bomb");
    wait_until(SETTLE, "the bomb's attempt is cleaned", || {
        w.attempt(a.id).cleaned
    });
    assert!(processes_of_uid(a.runner_uid.unwrap()).is_empty());
    // The host carries on.
    let next = finished(&w, run_script(&w, "next", "echo fine\n"));
    assert_eq!(next.conclusion.as_deref(), Some("success"), "{next:?}");
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
}

#[test]
fn a_job_past_memory_max_ends_oom_and_the_others_carry_on() {
    let Some((mut w, _uids)) = contained_world("hostile-memory", 3, 2) else {
        return;
    };
    w.cli_ok(&["profile", "set", "linux", "memory_max=64M"]);
    w.start_daemon();
    let release = w.dir.join("release-neighbour");
    let neighbour = run_script(&w, "neighbour", &victim(&release));
    let hog = run_script(
        &w,
        "hog",
        "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}\n",
    );
    let j = finished(&w, hog);
    assert!(
        !output(&j).iter().any(|l| l.starts_with("survived")),
        "the hog was not stopped: {j:?}"
    );
    let a = w.attempt_of_job("hog");
    wait_until(SETTLE, "the hog's attempt ends", || {
        w.attempt(a.id).state.is_ended()
    });
    let a = w.attempt(a.id);
    assert_eq!(
        (a.outcome, a.reason.as_ref().map(Reason::kind)),
        (Some(Outcome::Failed), Some(ReasonKind::Oom)),
        "{a:?}"
    );
    std::fs::write(&release, "").unwrap();
    let n = finished(&w, neighbour);
    assert_eq!(n.conclusion.as_deref(), Some("success"), "{n:?}");
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
}

#[test]
fn a_job_reads_no_other_targets_cache_live_or_ended() {
    let Some((mut w, _uids)) = contained_world("hostile-caches", 4, 2) else {
        return;
    };
    w.add_target("other", "octo/other", true);
    w.add_profile(ProfileSpec::new("other", "other", &["other"]).max(1));
    w.start_daemon();
    // A job of `octo` leaves something in its cache and ends: its slot is the
    // manager's again, whichever uid runs next.
    let filler = run_script(
        &w,
        "filler",
        "echo private > \"$npm_config_cache/left\" && echo \"CACHE=$npm_config_cache\"",
    );
    let out = output(&finished(&w, filler));
    let ended = out
        .iter()
        .find_map(|l| l.strip_prefix("CACHE="))
        .unwrap_or_else(|| panic!("no cache in {out:#?}"))
        .to_string();
    assert!(ended.contains("/caches/octo-"), "{ended}");
    w.wait_settled(&[REPO]);
    // The next job, of another target, runs under the uid that wrote that cache.
    let mut script = String::new();
    for (what, cmd) in [
        ("ended-cache-file", format!("cat {ended}/left")),
        ("ended-cache-list", format!("ls {ended}")),
    ] {
        script.push_str(&attempt(what, &cmd));
    }
    let first = w.sim.enqueue_script_job(
        "octo/other",
        "attacker-1",
        &["self-hosted", "other"],
        &script,
    );
    let j = finished(&w, first);
    assert_denied(&j, &["ended-cache-file", "ended-cache-list"]);
    assert_eq!(
        w.attempt_of_job("attacker-1").runner_uid,
        w.attempt_of_job("filler").runner_uid,
        "the attack is meant to run under the uid that filled the cache"
    );
    w.wait_settled(&["octo/other"]);
    // A victim of `octo` holds a slot while the attacker runs.
    let release = w.dir.join("release-victim");
    let victim_job = run_script(
        &w,
        "victim",
        &format!(
            "echo live > \"$npm_config_cache/live\"; {}",
            victim(&release)
        ),
    );
    let v = busy_victim(&w);
    let octo = runner_manager::store::Store::target(&w.store(), "octo").unwrap();
    let key = runner_manager::domain::caches::target_key(&octo);
    let d = w.dir.display();
    let live = format!("{d}/caches/{key}/slot-{}", v.slot.unwrap());
    let mut script = String::from("echo \"OWN=$npm_config_cache\"\n");
    for (what, cmd) in [
        ("live-cache-file", format!("cat {live}/npm/live")),
        ("live-cache-write", format!("touch {live}/npm/planted")),
        ("target-caches-list", format!("ls {d}/caches/{key}")),
        ("all-caches-list", format!("ls {d}/caches")),
    ] {
        script.push_str(&attempt(what, &cmd));
    }
    let attacker =
        w.sim
            .enqueue_script_job("octo/other", "attacker", &["self-hosted", "other"], &script);
    let j = finished(&w, attacker);
    assert_denied(
        &j,
        &[
            "live-cache-file",
            "live-cache-write",
            "target-caches-list",
            "all-caches-list",
        ],
    );
    let own = output(&j)
        .iter()
        .find_map(|l| l.strip_prefix("OWN=").map(str::to_string))
        .unwrap_or_default();
    assert!(own.contains("/caches/other-"), "its own cache: {own}");
    std::fs::write(&release, "").unwrap();
    finished(&w, victim_job);
    w.wait_settled(&[REPO, "octo/other"]);
    w.check_invariants(&[REPO, "octo/other"]);
}
