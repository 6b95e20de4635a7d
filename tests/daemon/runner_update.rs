//! A new actions-runner release rolled out in the middle of a stream of jobs: the
//! daemon fetches it beside the install in use, switches the managed install's link,
//! and removes the old version once no root links into it. No job is lost, no live
//! runner's root changes under it, and attempts made after the switch run the new
//! version. Also: `host set runner_version=` refuses what is not a version.

use super::support::*;
use runner_manager::install::managed;
use runner_manager::store::Store;
use runner_manager::timefmt::now_millis;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const OLD: &str = runner_manager::sim::control::RUNNER_VERSION;
const NEW: &str = "2.337.0";
const REPO: &str = "acme/app";

/// Where the managed install's link points, if it is one.
fn link_of(path: &Path) -> Option<PathBuf> {
    std::fs::read_link(path).ok()
}

/// A target whose sim release runs this build's simulated runner, and an install of
/// ours at the default place, as `runner install` makes it, for the profiles: its path.
fn managed_install(w: &mut World) -> PathBuf {
    w.add_target("t", REPO, true);
    w.sim
        .with_state(|st| st.runner_binary = Some(PathBuf::from(BIN)));
    w.cli_ok(&["runner", "install", "--target", "t"]);
    let install = w.dir.join("runner");
    w.runner_dir = install.clone();
    install
}

#[test]
fn a_release_mid_stream_is_switched_to_without_losing_a_job_or_touching_a_live_root() {
    let mut w = World::new("update", 4);
    let install = managed_install(&mut w);
    w.add_profile(ProfileSpec::new("p", "t", &["upd"]).max(4).idle_timeout(30));
    w.start_daemon_with(&["--runner-check", "1s"]);
    // The first check adopts the directory install into the versioned layout (no
    // attempt is live yet).
    let old_dir = managed::versions_dir(&w.dir).join(OLD);
    wait_until(SETTLE, "the install adopted", || {
        link_of(&install).as_deref() == Some(old_dir.as_path())
    });

    // Two long jobs, busy through the release, the switch and well after; short ones
    // around them.
    for i in 0..2 {
        w.enqueue(REPO, &format!("long-{i}"), &["upd"], 8_000);
    }
    for i in 0..4 {
        w.enqueue(REPO, &format!("before-{i}"), &["upd"], 1_000);
    }
    wait_until(SETTLE, "two runners busy", || {
        w.in_state(runner_manager::domain::AttemptState::Busy).len() >= 2
    });
    // What the busy runners' roots link to, before the release.
    let busy: BTreeMap<i64, Vec<PathBuf>> = w
        .in_state(runner_manager::domain::AttemptState::Busy)
        .into_iter()
        .filter_map(|a| {
            let root = runner_manager::runner::attempt_root(&w.dir, a.id);
            managed::root_links(&root).ok().map(|l| (a.id, l))
        })
        .collect();
    assert!(!busy.is_empty());
    for links in busy.values() {
        assert!(
            links.iter().all(|l| l.starts_with(&old_dir)),
            "a root links outside the old version: {links:?}"
        );
    }
    let published_at = now_millis();
    w.sim.publish_runner_release(NEW);
    for i in 0..9 {
        w.enqueue(REPO, &format!("after-{i}"), &["upd"], 1_000);
    }

    // Until every job is served: each root captured keeps its links, and what they
    // point at exists, while its attempt lives; note when the switch is seen and
    // which version each runner reported.
    let new_dir = managed::versions_dir(&w.dir).join(NEW);
    let mut switched_at = None;
    let mut versions: BTreeMap<String, String> = BTreeMap::new();
    let mut violations = std::collections::BTreeSet::new();
    let mut seen_live_after_switch = false;
    wait_until(SETTLE * 4, "every job served", || {
        if switched_at.is_none() && link_of(&install).as_deref() == Some(new_dir.as_path()) {
            switched_at = Some(now_millis());
        }
        for r in w.our_registrations() {
            if let Some(v) = r.version {
                versions.insert(r.name, v);
            }
        }
        for (id, links) in &busy {
            if !w.attempt(*id).state.is_live() {
                continue;
            }
            seen_live_after_switch |= switched_at.is_some();
            let root = runner_manager::runner::attempt_root(&w.dir, *id);
            match managed::root_links(&root) {
                Ok(now) if &now == links && now.iter().all(|l| l.exists()) => {}
                other => {
                    violations.insert(format!(
                        "attempt {id}'s root links changed or lead nowhere: {other:?}"
                    ));
                }
            }
        }
        w.all_completed(&[REPO])
    });
    assert!(violations.is_empty(), "live roots touched: {violations:?}");
    assert!(
        seen_live_after_switch,
        "no runner busy at the release was still live after the switch: the test shows nothing"
    );
    let switched_at = switched_at.expect("the install was switched to the new release");
    println!(
        "release published to install switched: {} ms (--runner-check 1s)",
        switched_at - published_at
    );

    // The old version goes once no root links into it.
    wait_until(SETTLE, "the old install removed", || !old_dir.exists());
    assert!(new_dir.join("bin/Runner.Listener").is_file());
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);

    // Attempts made after the switch ran the new version.
    let after: Vec<_> = w
        .attempts()
        .into_iter()
        .filter(|a| a.created_at > switched_at)
        .filter_map(|a| versions.get(&a.runner_name).cloned())
        .collect();
    assert!(
        !after.is_empty(),
        "no attempt made after the switch reported a version"
    );
    assert!(after.iter().all(|v| v == NEW), "{after:?}");
    // A runner told to update was an old one (GitHub offers REST JIT runners the
    // update: registration cannot disable it), and it took no job.
    let updates = w.sim.self_updates();
    println!(
        "self-updates offered to old runners before the switch: {}",
        updates.len()
    );
    assert!(updates.iter().all(|(_, v)| v == NEW), "{updates:?}");
    for j in w.sim.jobs() {
        assert!(
            !updates.iter().any(|(id, _)| j.runner_id == Some(*id)),
            "a self-updating runner took job {}",
            j.name
        );
    }
    let logs = w.daemon_logs();
    for event in [
        "msg=runner_install_adopted",
        "msg=runner_release_fetched",
        "msg=runner_install_switched",
        "msg=runner_install_removed",
    ] {
        let line = logs.lines().find(|l| l.contains(event));
        assert!(line.is_some(), "no {event} in the daemon's log");
        println!("{}", line.unwrap_or_default());
    }
    // The checks cost nothing while nothing changed: every downloads read but
    // `runner install`'s, the daemon's first and the one that saw the new release was
    // a 304, which spends no unit.
    let reads: Vec<_> = w
        .log()
        .into_iter()
        .filter(|e| e.endpoint.ends_with("/actions/runners/downloads"))
        .collect();
    let counted = reads.iter().filter(|e| e.counted).count();
    let not_modified = reads.iter().filter(|e| e.status == 304).count();
    println!(
        "downloads reads: {} ({not_modified} answered 304, {counted} spent a unit)",
        reads.len()
    );
    assert!(counted <= 3, "{counted} downloads reads spent a unit");
    // status shows the version in use and the newest seen.
    let st = w.status_json();
    assert_eq!(st["runner"]["in_use"], serde_json::json!([NEW]), "{st}");
    assert_eq!(st["runner"]["newest"], NEW, "{st}");
    assert_eq!(st["runner"]["runner_version"], "latest", "{st}");
    w.stop_daemon();
}

#[test]
fn an_operators_install_is_reported_and_never_touched() {
    // The world's install has no marker: an operator's own.
    let mut w = World::new("update-foreign", 2);
    w.add_target("t", REPO, true);
    w.add_profile(ProfileSpec::new("p", "t", &["f"]));
    w.sim.publish_runner_release(NEW);
    let before = std::fs::read_to_string(w.runner_dir.join("bin/runnerversion")).unwrap();
    w.start_daemon_with(&["--runner-check", "1s"]);
    wait_until(SETTLE, "a check ended", || {
        w.status_json()["runner"]["checked_at"].is_string()
    });
    // Nothing of ours to keep current: the downloads API is not even asked.
    assert_eq!(
        w.sim
            .count("GET", "/repos/{owner}/{repo}/actions/runners/downloads"),
        0
    );
    assert!(!managed::versions_dir(&w.dir).exists());
    assert_eq!(
        std::fs::read_to_string(w.runner_dir.join("bin/runnerversion")).unwrap(),
        before
    );
    let st = w.status_json();
    assert_eq!(st["runner"]["in_use"], serde_json::json!([OLD]), "{st}");
    let doctor = w.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("not managed"), "{text}");
    w.stop_daemon();
}

#[test]
fn a_pin_is_validated_and_shown() {
    let w = World::new("update-pin", 1);
    let bad = w.cli(&["host", "set", "runner_version=v2.x"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("runner_version"), "{err}");
    assert_eq!(w.store().host_or_create().unwrap().runner_version, None);
    w.cli_ok(&["host", "set", "runner_version=2.330.0"]);
    assert_eq!(
        w.store()
            .host_or_create()
            .unwrap()
            .runner_version
            .as_deref(),
        Some("2.330.0")
    );
    assert_eq!(w.status_json()["runner"]["runner_version"], "2.330.0");
    w.cli_ok(&["host", "set", "runner_version=latest"]);
    assert_eq!(w.store().host_or_create().unwrap().runner_version, None);
}

#[test]
fn a_runner_told_to_update_itself_makes_the_daemon_check_at_once() {
    let mut w = World::new("update-now", 2);
    let install = managed_install(&mut w);
    w.add_profile(ProfileSpec::new("p", "t", &["now"]).max(1));
    // Checked at start, then not for an hour: only the runner's exit explains another.
    w.start_daemon_with(&["--runner-check", "1h"]);
    let old_dir = managed::versions_dir(&w.dir).join(OLD);
    wait_until(SETTLE, "the first check", || {
        link_of(&install).as_deref() == Some(old_dir.as_path())
            && w.status_json()["runner"]["checked_at"].is_string()
    });
    w.sim.publish_runner_release(NEW);
    w.enqueue(REPO, "j", &["now"], 200);
    let new_dir = managed::versions_dir(&w.dir).join(NEW);
    wait_until(SETTLE, "the switch to the new release", || {
        link_of(&install).as_deref() == Some(new_dir.as_path())
    });
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    // Old runners were told to update (REST registrations cannot refuse) and went
    // until the switch: the first one's end asked for the check that made it. (One
    // or two: another may start while the release downloads.)
    let updates = w.sim.self_updates();
    assert!(!updates.is_empty());
    let updating: Vec<_> = w
        .attempts()
        .into_iter()
        .filter(|a| {
            a.reason
                .as_ref()
                .is_some_and(|r| r.kind() == runner_manager::domain::ReasonKind::RunnerUpdating)
        })
        .collect();
    assert_eq!(updating.len(), updates.len(), "{updating:?}");
    let served_by = w.attempt_of_job("j");
    assert!(updating.iter().all(|u| served_by.created_at > u.created_at));
    w.stop_daemon();
}

#[test]
fn scale_set_runners_are_never_told_to_update_themselves() {
    // The install stays behind the release (an operator's own, never switched), so
    // only the scale set's `disableUpdate` keeps its runners from updating.
    let mut w = World::new("update-ss", 2);
    w.add_target("t", "acme/ss", true);
    let store = w.store();
    let host = store.host_or_create().unwrap();
    let mut p = runner_manager::domain::ScalePolicy::new("ss-upd", "t", &host.id);
    p.set_labels("--labels", &["ss-upd".to_string()], &host.os, &host.arch)
        .unwrap();
    p.max_capacity = 2;
    p.idle_timeout_secs = 1;
    p.runner_dir = Some(w.runner_dir.clone());
    p.demand = runner_manager::domain::DemandSource::Scaleset;
    store.add_profile(&p).unwrap();
    w.sim.publish_runner_release(NEW);
    w.start_daemon();
    wait_until(SETTLE, "the scale set session", || {
        w.sim
            .scale_sets()
            .iter()
            .any(|s| s.1 == "ss-upd" && s.4 && w.sim.scaleset_sessions(s.0) == 1)
    });
    for i in 0..3 {
        w.sim
            .enqueue_job("acme/ss", &format!("j{i}"), &["ss-upd"], 200);
    }
    w.wait_settled(&["acme/ss"]);
    w.check_invariants(&["acme/ss"]);
    assert!(
        w.sim.self_updates().is_empty(),
        "{:?}",
        w.sim.self_updates()
    );
    w.stop_daemon();
}

#[test]
fn a_pinned_version_is_switched_to_and_unpinning_returns_to_the_newest() {
    let mut w = World::new("update-pinned", 1);
    let install = managed_install(&mut w);
    w.add_profile(ProfileSpec::new("p", "t", &["pin"]).max(1));
    w.cli_ok(&["host", "set", "runner_version=2.330.0"]);
    w.start_daemon_with(&["--runner-check", "1s"]);
    let pinned = managed::versions_dir(&w.dir).join("2.330.0");
    let newest = managed::versions_dir(&w.dir).join(OLD);
    wait_until(SETTLE, "the pinned version in use, the other gone", || {
        link_of(&install).as_deref() == Some(pinned.as_path()) && !newest.exists()
    });
    // GitHub would tell REST runners that old to update themselves: status says so.
    wait_until(SETTLE, "the pin's warning", || {
        w.status_json()["runner"]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("older than the newest release"))
    });
    w.cli_ok(&["host", "set", "runner_version=latest"]);
    wait_until(SETTLE, "back on the newest", || {
        link_of(&install).as_deref() == Some(newest.as_path()) && !pinned.exists()
    });
    w.stop_daemon();
    // `runner install` on a managed link fetches beside the others and switches it.
    w.cli_ok(&["runner", "install", "--target", "t", "--version", "2.331.0"]);
    assert_eq!(
        link_of(&install),
        Some(managed::versions_dir(&w.dir).join("2.331.0"))
    );
    assert!(
        newest.join("bin/Runner.Listener").is_file(),
        "the other stays"
    );
}
