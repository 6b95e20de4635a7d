//! Two daemons on one host: a second one never takes the first one's runner uids
//! (`host set` exit 2, daemon start exit 7), never kills its runners even when the
//! claim is bypassed, and two hosts given one `runtime_root` keep their roots and
//! cache slots apart.

use super::setup::*;
use crate::support::*;
use runner_manager::store::Store;

#[test]
fn a_second_daemon_never_takes_or_kills_the_first_ones_runner_uids() {
    let Some((mut first, uids)) = contained_world("hostile-two-first", 2, 1) else {
        return;
    };
    first.start_daemon();
    let release = first.dir.join("release-victim");
    let victim_job = run_script(&first, "victim", &victim(&release));
    let v = busy_victim(&first);
    let range = uids.range();
    let set = format!("runner_uids={}-{}", range.start, range.end);

    // `host set` on another state directory: refused, naming the holder; nothing written.
    let mut second = World::new("hostile-two-second", 2);
    second.add_target("octo", REPO, true);
    second.add_profile(ProfileSpec::new("linux", "octo", &["linux"]).max(1));
    let before = second.cli_ok(&["--json", "host", "show"]);
    // Part of the block only: uids past it are other tests' (and their daemons').
    let overlapping = format!("runner_uids={}-{}", range.end, range.end);
    for bad in [set.as_str(), overlapping.as_str()] {
        let out = second.cli(&["host", "set", bad, "isolation=uids"]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("runner_uids")
                && err.contains(&format!("pid {}", first.daemon_pid()))
                && err.contains(&first.dir.file_name().unwrap().to_string_lossy().to_string()),
            "{bad}: {err}"
        );
    }
    assert_eq!(second.cli_ok(&["--json", "host", "show"]), before);
    // The first daemon's own state directory may set its own range again.
    first.cli_ok(&["host", "set", &set]);

    // Written behind the CLI's back (an older binary, a copied store): the daemon
    // refuses to start, exit 7, naming the holder, before it signals anything.
    let store = second.store();
    let mut h = store.host_or_create().unwrap();
    h.runner_uids = Some(range);
    h.isolation = runner_manager::domain::Isolation::Uids;
    store.update_host(&h).unwrap();
    let out = second.cli(&["daemon", "--once"]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("pid {}", first.daemon_pid())),
        "{err}"
    );
    assert!(
        runner_manager::runner::process_start_time(v.pid.unwrap()) == v.pid_start,
        "the refused daemon killed the first one's busy runner"
    );

    // The claim bypassed (another lock directory): the second daemon's books say the
    // uid is free, but the process under it lives in the first daemon's cgroup. It is
    // not signalled; the start fails for a host reason instead.
    let cg = std::fs::read_to_string(format!("/proc/{}/cgroup", v.pid.unwrap())).unwrap();
    let in_cgroup = cg.contains(&format!("runner-manager-{}", &first.host_id[..8]));
    if in_cgroup {
        let locks = second.dir.join("other-locks");
        second.env.push((
            "RUNNER_MANAGER_LOCK_DIR".into(),
            locks.display().to_string(),
        ));
        second.start_daemon();
        second.enqueue(REPO, "intruder", &["linux"], 100);
        let mut why = String::new();
        wait_until(SETTLE, "the second daemon's start is held", || {
            why = second.limiting("linux");
            why.contains("starts held")
        });
        assert!(why.contains("another daemon's cgroup"), "{why}");
        second.stop_daemon();
    } else {
        eprintln!("(bypassed claim not tried: the runner is in no cgroup of ours here)");
    }
    assert!(
        runner_manager::runner::process_start_time(v.pid.unwrap()) == v.pid_start,
        "the second daemon killed the first one's busy runner"
    );
    std::fs::write(&release, "").unwrap();
    let j = finished(&first, victim_job);
    assert_eq!(j.conclusion.as_deref(), Some("success"), "{j:?}");
    assert!(output(&j).contains(&"victim-done".to_string()), "{j:?}");
    first.wait_settled(&[REPO]);
    first.check_invariants(&[REPO]);
}

#[test]
fn two_hosts_given_one_runtime_root_keep_their_roots_and_slots_apart() {
    let Some((mut a, _ua)) = contained_world("hostile-rt-a", 2, 1) else {
        return;
    };
    let Some((mut b, _ub)) = contained_world("hostile-rt-b", 2, 1) else {
        return;
    };
    let rt = std::env::temp_dir().join(format!("rm-shared-runtime-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&rt);
    std::fs::create_dir_all(&rt).unwrap();
    std::fs::set_permissions(
        &rt,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o711),
    )
    .unwrap();
    for w in [&a, &b] {
        w.cli_ok(&["host", "set", &format!("runtime_root={}", rt.display())]);
    }
    // Both hosts' first attempt is attempt 1: in one shared `attempts/` they were one
    // root, and each sweep took the other's for an orphan.
    a.start_daemon();
    let release_a = a.dir.join("release");
    let job_a = run_script(
        &a,
        "victim-a",
        &format!(
            "echo \"NPM=$npm_config_cache\"; echo \"PWD=$PWD\"; {}",
            victim(&release_a)
        ),
    );
    let va = busy_victim(&a);
    b.start_daemon();
    let release_b = b.dir.join("release");
    let job_b = run_script(
        &b,
        "victim-b",
        &format!(
            "echo \"NPM=$npm_config_cache\"; echo \"PWD=$PWD\"; {}",
            victim(&release_b)
        ),
    );
    let vb = busy_victim(&b);
    assert_eq!(
        va.id, vb.id,
        "the collision needs one attempt id on both hosts"
    );
    let root = |w: &World, id: i64| {
        rt.join(format!("host-{}", &w.host_id[..8]))
            .join("attempts")
            .join(id.to_string())
    };
    assert!(root(&a, va.id).is_dir() && root(&b, vb.id).is_dir());
    // Each daemon sweeps at start and every minute: restarted, each sweeps at once
    // while the other's root of the same id is live.
    // (SIGKILL: a drain would wait for the busy runners.) The heartbeat is written
    // after the start's sweep.
    for w in [&mut a, &mut b] {
        w.kill_daemon();
        w.start_daemon();
        let pid = w.daemon_pid();
        wait_until(SETTLE, "the daemon has swept and runs", || {
            w.status_json()["daemon"]["pid"].as_u64() == Some(u64::from(pid))
        });
    }
    assert!(root(&a, va.id).is_dir(), "b's sweep removed a's live root");
    assert!(root(&b, vb.id).is_dir(), "a's sweep removed b's live root");
    std::fs::write(&release_a, "").unwrap();
    std::fs::write(&release_b, "").unwrap();
    let (ja, jb) = (finished(&a, job_a), finished(&b, job_b));
    assert_eq!(ja.conclusion.as_deref(), Some("success"), "{ja:?}");
    assert_eq!(jb.conclusion.as_deref(), Some("success"), "{jb:?}");
    let printed = |j: &runner_manager::sim::JobState, k: &str| {
        output(j)
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{k}=")).map(str::to_string))
            .unwrap_or_default()
    };
    let (na, nb) = (printed(&ja, "NPM"), printed(&jb, "NPM"));
    assert!(!na.is_empty() && na != nb, "cache slots collide: {na} {nb}");
    assert!(na.contains(&format!("host-{}", &a.host_id[..8])), "{na}");
    assert!(nb.contains(&format!("host-{}", &b.host_id[..8])), "{nb}");
    a.wait_settled(&[REPO]);
    b.wait_settled(&[REPO]);
    a.check_invariants(&[REPO]);
    b.check_invariants(&[REPO]);
    a.stop_daemon();
    b.stop_daemon();
    let _ = std::fs::remove_dir_all(&rt);
}

/// Upgrading from roots shared in `runtime_root/attempts/` to a directory per host: a
/// busy runner whose root and cache slot are in the old layout is re-adopted, its job
/// ends well, and its cleanup removes its old root and takes its cache slot back.
#[test]
fn an_attempt_rooted_in_the_old_layout_is_readopted_and_cleaned_where_it_is() {
    use std::os::unix::fs::MetadataExt;
    let Some((mut w, _uids)) = contained_world("hostile-rt-upgrade", 2, 1) else {
        return;
    };
    let rt = std::env::temp_dir().join(format!("rm-upgrade-runtime-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&rt);
    std::fs::create_dir_all(&rt).unwrap();
    w.cli_ok(&["host", "set", &format!("runtime_root={}", rt.display())]);
    w.start_daemon();
    let release = w.dir.join("release");
    let job = run_script(&w, "victim", &victim(&release));
    let v = busy_victim(&w);
    let mine = rt.join(format!("host-{}", &w.host_id[..8]));
    // Its script runs (busy comes a moment before): moving the root from under a job
    // that is still starting fails the job, which is not what this test is about.
    let output = mine
        .join("attempts")
        .join(v.id.to_string())
        .join("_work/_job_output.txt");
    wait_until(SETTLE, "the victim's script runs", || {
        std::fs::read_to_string(&output).is_ok_and(|o| o.contains("victim-up"))
    });
    // The old layout, as the daemon before the upgrade left it.
    w.kill_daemon();
    std::fs::create_dir_all(rt.join("attempts")).unwrap();
    let old_root = rt.join("attempts").join(v.id.to_string());
    std::fs::rename(mine.join("attempts").join(v.id.to_string()), &old_root).unwrap();
    std::fs::rename(mine.join("caches"), rt.join("caches")).unwrap();
    w.start_daemon();
    let pid = w.daemon_pid();
    wait_until(SETTLE, "the new daemon runs", || {
        w.status_json()["daemon"]["pid"].as_u64() == Some(u64::from(pid))
    });
    assert_eq!(
        runner_manager::runner::process_start_time(v.pid.unwrap()),
        v.pid_start,
        "the upgrade's daemon killed the runner"
    );
    assert!(
        old_root.is_dir(),
        "the sweep removed a live root in the old layout"
    );
    std::fs::write(&release, "").unwrap();
    let j = finished(&w, job);
    assert_eq!(j.conclusion.as_deref(), Some("success"), "{j:?}");
    wait_until(SETTLE, "the attempt is cleaned", || w.attempt(v.id).cleaned);
    assert!(
        std::fs::symlink_metadata(&old_root).is_err(),
        "its old root outlived it"
    );
    let octo = w.store().target("octo").unwrap();
    let key = runner_manager::domain::caches::target_key(&octo);
    let slot = rt
        .join("caches")
        .join(key)
        .join(format!("slot-{}", v.slot.unwrap()));
    let m = std::fs::metadata(&slot).unwrap();
    assert_eq!(
        (m.uid(), m.mode() & 0o777),
        (0, 0o700),
        "its cache slot was not taken back from its uid"
    );
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    w.stop_daemon();
    let _ = std::fs::remove_dir_all(&rt);
}
