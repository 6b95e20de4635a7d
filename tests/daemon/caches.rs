//! Dependency caches and kept workspaces, seen from inside the jobs: each job prints
//! its environment's cache variables and its working directory, and the tests compare
//! what two jobs of one target saw, and what another target's saw.

use super::support::*;
use std::os::unix::fs::PermissionsExt;

/// Runs `script` as a job of `repo` with `labels` and returns its output's lines.
fn run(w: &World, repo: &str, name: &str, labels: &[&str], script: &str) -> Vec<String> {
    let id = w.sim.enqueue_script_job(repo, name, labels, script);
    let j = w.finished(id);
    w.wait_settled(&[repo]);
    j.output
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// The value a job printed as `NAME=value`.
fn printed(out: &[String], name: &str) -> String {
    let p = format!("{name}=");
    out.iter()
        .find_map(|l| l.strip_prefix(&p).map(str::to_string))
        .unwrap_or_else(|| panic!("no {name} in {out:#?}"))
}

const DUMP: &str = "echo \"NPM=$npm_config_cache\"; echo \"XDG=$XDG_CACHE_HOME\"; \
                    echo \"TOOLS=$RUNNER_TOOL_CACHE\"; echo \"PWD=$(pwd)\"; \
                    echo x > \"$XDG_CACHE_HOME/touched\" && echo WROTE";

#[test]
fn a_targets_jobs_share_its_cache_another_target_has_its_own_and_the_operator_wins() {
    let mut w = World::new("caches-env", 2);
    w.add_target("t", "acme/app", true);
    w.add_target("u", "acme/lib", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(1));
    w.add_profile(ProfileSpec::new("lib", "u", &["lib"]).max(1));
    // Roots and caches under a runtime root of the owner's choosing.
    let rt = w.dir.join("runtime");
    std::fs::create_dir(&rt).unwrap();
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o711)).unwrap();
    let rt = std::fs::canonicalize(&rt).unwrap();
    let before = w.cli_ok(&["--json", "host", "show"]);
    for (bad, why) in [
        ("runtime_root=runtime", "absolute"),
        ("runtime_root=/", "/"),
        ("runtime_root=/no/such/dir", "cannot be read"),
        ("cache_cap=lots", "cache_cap"),
    ] {
        let out = w.cli(&["host", "set", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{bad}: {err}");
    }
    assert_eq!(w.cli_ok(&["--json", "host", "show"]), before);
    w.cli_ok(&[
        "host",
        "set",
        &format!("runtime_root={}", rt.display()),
        "cache_cap=1G",
    ]);
    // The operator's own variable takes npm's cache for `lib`; the rest stays ours.
    w.cli_ok(&["profile", "set", "lib", "env.npm_config_cache=/srv/npm"]);
    w.start_daemon();

    let one = run(&w, "acme/app", "one", &["self-hosted", "linux"], DUMP);
    let two = run(&w, "acme/app", "two", &["self-hosted", "linux"], DUMP);
    let lib = run(&w, "acme/lib", "lib", &["self-hosted", "lib"], DUMP);
    let npm = printed(&one, "NPM");
    // This host's own directory in the runtime root, so hosts sharing it never collide.
    let mine = rt.join(format!("host-{}", &w.host_id[..8]));
    assert!(
        npm.starts_with(&format!("{}/caches/t-", mine.display())),
        "{one:#?}"
    );
    assert!(one.contains(&"WROTE".to_string()), "{one:#?}");
    assert_eq!(printed(&two, "NPM"), npm, "two jobs of one target");
    assert_eq!(printed(&two, "XDG"), printed(&one, "XDG"));
    assert!(printed(&one, "TOOLS").ends_with("/tool-cache"), "{one:#?}");
    assert!(
        printed(&one, "PWD").starts_with(&format!("{}/attempts/", mine.display())),
        "{one:#?}"
    );
    assert_eq!(printed(&lib, "NPM"), "/srv/npm", "the operator's variable");
    let lib_xdg = printed(&lib, "XDG");
    assert!(lib_xdg.contains("/caches/u-"), "{lib:#?}");
    assert_ne!(lib_xdg, printed(&one, "XDG"), "another target's cache");
    assert!(
        std::path::Path::new(&printed(&one, "XDG"))
            .join("touched")
            .exists()
    );
    w.stop_daemon();
    w.check_invariants(&["acme/app", "acme/lib"]);
    let left: Vec<_> = std::fs::read_dir(mine.join("attempts"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "roots left under the runtime root: {left:?}"
    );
}

#[test]
fn an_organizations_profile_gets_no_caches_unless_asked() {
    let mut w = World::new("caches-org", 2);
    w.add_org_target("org", "acme", &[("app", false)]);
    w.add_profile(ProfileSpec::new("linux", "org", &["linux"]).max(1));
    let show = w.cli_ok(&["profile", "show", "linux"]);
    assert!(show.contains("default"), "{show}");
    w.start_daemon();
    let out = run(&w, "acme/app", "one", &["self-hosted", "linux"], DUMP);
    assert_eq!(printed(&out, "NPM"), "", "{out:#?}");
    w.cli_ok(&["profile", "set", "linux", "caches=on"]);
    let out = run(&w, "acme/app", "two", &["self-hosted", "linux"], DUMP);
    assert!(printed(&out, "NPM").contains("/caches/org-"), "{out:#?}");
    w.stop_daemon();
    w.check_invariants(&["acme/app"]);
}

const KEEP: &str = "echo \"PWD=$(pwd)\"; if [ -e kept ]; then echo FOUND; else echo NONE; fi; \
                    echo here > kept";

#[test]
fn a_persistent_workspace_keeps_work_between_a_repositorys_jobs_and_a_disposable_one_does_not() {
    let mut w = World::new("caches-workspace", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(1));
    w.add_org_target("org", "acme-org", &[]);
    w.add_profile(ProfileSpec::new("orgp", "org", &["orgp"]).max(1));
    // Refused, and nothing written: with allow_public, and for an organization.
    let before = w.cli_ok(&["--json", "profile", "list"]);
    for args in [
        vec![
            "profile",
            "set",
            "linux",
            "workspace=persistent",
            "allow_public=true",
        ],
        vec!["profile", "set", "orgp", "workspace=persistent"],
        vec!["profile", "set", "linux", "workspace=kept"],
    ] {
        let out = w.cli(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("workspace"));
    }
    assert_eq!(w.cli_ok(&["--json", "profile", "list"]), before);
    w.start_daemon();
    let labels = ["self-hosted", "linux"];
    // Disposable (the default): the second job finds nothing.
    let a = run(&w, "acme/app", "a", &labels, KEEP);
    let b = run(&w, "acme/app", "b", &labels, KEEP);
    assert!(a.contains(&"NONE".to_string()) && b.contains(&"NONE".to_string()));
    // Persistent: the next job of the repository finds what the last one left, in
    // another root.
    w.cli_ok(&["profile", "set", "linux", "workspace=persistent"]);
    let c = run(&w, "acme/app", "c", &labels, KEEP);
    let d = run(&w, "acme/app", "d", &labels, KEEP);
    assert!(c.contains(&"NONE".to_string()), "{c:#?}");
    assert!(d.contains(&"FOUND".to_string()), "{d:#?}");
    assert_ne!(printed(&c, "PWD"), printed(&d, "PWD"));
    // `status` and `doctor` show the kept workspace and the target's cache against
    // the host's cap.
    wait_until(SETTLE, "status to show the kept workspace", || {
        let c = &w.status_json()["caches"];
        c["workspaces"] == 1
            && c["cache_targets"] == 1
            && c["workspaces_bytes"].as_u64() > Some(0)
            && c["cap_bytes"].as_u64() > Some(0)
    });
    let status = w.cli_ok(&["status"]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("caches") && l.contains("(1 target), workspaces")),
        "{status}"
    );
    let doctor = String::from_utf8(w.cli(&["doctor"]).stdout).unwrap();
    assert!(
        doctor
            .lines()
            .any(|l| l.starts_with("ok   caches") && l.contains("(1 target), workspaces ")),
        "{doctor}"
    );
    // A job that replaces its `_work` with a link keeps nothing.
    let e = run(
        &w,
        "acme/app",
        "e",
        &labels,
        "cd .. && mv _work _old && ln -s _old _work && echo LINKED",
    );
    assert!(e.contains(&"LINKED".to_string()), "{e:#?}");
    let f = run(&w, "acme/app", "f", &labels, KEEP);
    assert!(f.contains(&"NONE".to_string()), "{f:#?}");
    assert!(w.daemon_logs().contains("workspace_refused"));
    w.stop_daemon();
    w.check_invariants(&["acme/app"]);
}

#[test]
fn a_slot_is_held_across_a_daemon_restart_and_its_work_comes_back_after() {
    let mut w = World::new("caches-restart", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(2));
    w.cli_ok(&["profile", "set", "linux", "workspace=persistent"]);
    w.start_daemon();
    let labels = ["self-hosted", "linux"];
    let release = w.dir.join("release-long");
    let long = w.sim.enqueue_script_job(
        "acme/app",
        "long",
        &labels,
        &format!(
            "echo long > from-long; while [ ! -e {} ]; do sleep 0.05; done; echo done",
            release.display()
        ),
    );
    wait_until(SETTLE, "the long job runs", || {
        !w.in_state(runner_manager::domain::AttemptState::Busy)
            .is_empty()
    });
    w.kill_daemon();
    w.start_daemon();
    // The restarted daemon reads the lease from the store: the next job gets the
    // next slot, and none of what the long job is writing.
    let second = w.sim.enqueue_script_job(
        "acme/app",
        "second",
        &labels,
        "if [ -e from-long ]; then echo FOUND; else echo NONE; fi",
    );
    let out = w.finished(second).output.unwrap_or_default();
    assert!(out.contains("NONE"), "{out}");
    assert_eq!(w.attempt_of_job("long").slot, Some(0));
    assert_eq!(w.attempt_of_job("second").slot, Some(1));
    std::fs::write(&release, "").unwrap();
    w.finished(long);
    w.wait_settled(&["acme/app"]);
    // Cleaned after the restart, the long job's `_work` went back to slot 0.
    let third = run(
        &w,
        "acme/app",
        "third",
        &labels,
        "cat from-long || echo NONE",
    );
    assert_eq!(w.attempt_of_job("third").slot, Some(0));
    assert!(third.contains(&"long".to_string()), "{third:#?}");
    w.stop_daemon();
    w.check_invariants(&["acme/app"]);
}

#[test]
fn the_runtime_root_is_not_moved_while_an_attempt_is_not_yet_cleaned() {
    use runner_manager::store::{NewAttempt, Store};
    let mut w = World::new("caches-rt-open", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(1));
    let rt = w.dir.join("runtime");
    std::fs::create_dir(&rt).unwrap();
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o711)).unwrap();
    let rt = std::fs::canonicalize(&rt).unwrap();
    let store = w.store();
    let host = store.host_or_create().unwrap();
    let mut a = store
        .create_attempt(
            &NewAttempt {
                profile: "linux".into(),
                target: "t".into(),
                host_id: host.id.clone(),
                ..NewAttempt::default()
            },
            1,
        )
        .unwrap();
    let set = format!("runtime_root={}", rt.display());
    let out = w.cli(&["host", "set", &set]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("runtime_root") && err.contains("cleaned"),
        "{err}"
    );
    assert_eq!(store.host_or_create().unwrap().runtime_root, None);
    let _ = a.end(
        runner_manager::domain::Outcome::Failed,
        Some(runner_manager::domain::Reason::message(
            runner_manager::domain::ReasonKind::Host,
            "test".to_string(),
        )),
        2,
    );
    a.cleaned = true;
    store.save_attempt(&a).unwrap();
    w.cli_ok(&["host", "set", &set]);
    assert_eq!(
        store.host_or_create().unwrap().runtime_root.as_deref(),
        Some(rt.as_path())
    );
}

/// The daemon's prune (at its start, then hourly) holds the caches and the kept
/// workspaces together to `cache_cap`: over a 1 KiB cap, an unleased workspace goes as
/// a cache slot does, and `status` then shows what is left.
#[test]
fn the_prune_holds_kept_workspaces_to_the_cap_with_the_caches() {
    let mut w = World::new("caches-prune", 1);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(1));
    w.cli_ok(&["host", "set", "cache_cap=1K"]);
    let t = runner_manager::store::Store::target(&w.store(), "t").unwrap();
    let key = runner_manager::domain::caches::target_key(&t);
    let work = w.dir.join(format!("workspaces/{key}/slot-5/_work"));
    let cache = w.dir.join(format!("caches/{key}/slot-6/npm"));
    for d in [&work, &cache] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("blob"), vec![7u8; 64 * 1024]).unwrap();
    }
    let before = w.status_json()["caches"].clone();
    assert_eq!(before["workspaces"], 1, "{before:#}");
    assert_eq!(before["cache_targets"], 1, "{before:#}");
    w.start_daemon();
    // The slots go first and the log line after them: wait for both.
    wait_until(SETTLE, "the prune to remove both slots and say so", || {
        !work.exists() && !cache.exists() && w.daemon_logs().contains("caches_pruned")
    });
    let logs = w.daemon_logs();
    assert!(logs.contains(&format!("workspaces/{key}/slot-5")), "{logs}");
    let after = w.status_json()["caches"].clone();
    assert_eq!(after["workspaces"], 0, "{after:#}");
    assert_eq!(after["cache_targets"], 0, "{after:#}");
    w.stop_daemon();
}
