//! `runner-manager update` against a local release directory: the binary a daemon runs
//! is replaced by a verified copy, the daemon drains for it (no new runner, its busy
//! ones finish) and exits 75; a daemon started from the new binary serves the jobs
//! left queued, each exactly once. A checksum mismatch, `--check` and an up-to-date
//! binary change nothing.

use super::support::*;
use runner_manager::domain::AttemptState;
use runner_manager::domain::host_settings::Beside;
use runner_manager::selfupdate::release;
use runner_manager::sim::JobStatus;
use runner_manager::store::Store;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const CURRENT: &str = env!("CARGO_PKG_VERSION");

fn sha256(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A copy of the test binary at `dir/bin/runner-manager`, as an operator drops it.
pub(super) fn installed_copy(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join("runner-manager");
    std::fs::copy(BIN, &path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A release directory offering `version`: the test binary stamped to say it is that
/// version (`runner_manager::version`), with a trailer (so its bytes differ from the
/// running copy's and it still runs), and SHA256SUMS, whose sum is `sum` when given,
/// else the true one. Returns the directory and the bytes.
pub(super) fn release_dir(dir: &Path, version: &str, sum: Option<&str>) -> (PathBuf, Vec<u8>) {
    release_dir_saying(dir, version, version, sum)
}

/// [`release_dir`] whose binary, listed as `version`, says it is `says`.
fn release_dir_saying(
    dir: &Path,
    version: &str,
    says: &str,
    sum: Option<&str>,
) -> (PathBuf, Vec<u8>) {
    let rel = dir.join("release");
    std::fs::create_dir_all(&rel).unwrap();
    let bin = std::fs::read(BIN).unwrap();
    let mut bytes = runner_manager::version::stamped(&bin, says).expect("the version slot");
    bytes.extend_from_slice(format!("\nrelease {version}\n").as_bytes());
    let name = release::asset_name(version, &release::target());
    std::fs::write(rel.join(&name), &bytes).unwrap();
    let sum = sum.map_or_else(|| sha256(&bytes), str::to_string);
    std::fs::write(
        rel.join(release::SUMS),
        format!(
            "{sum}  {name}\n{}  runner-manager-0.0.1-{}\n",
            "0".repeat(64),
            release::target()
        ),
    )
    .unwrap();
    (rel, bytes)
}

pub(super) fn update(bin: &Path, w: &World, args: &[&str]) -> Output {
    Command::new(bin)
        .arg("--state-dir")
        .arg(&w.dir)
        .arg("update")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

pub(super) fn text(o: &Output) -> String {
    format!(
        "{}\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Files beside the binary other than the binary: a staged update left behind.
fn leftovers(bin: &Path) -> Vec<String> {
    std::fs::read_dir(bin.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "runner-manager")
        .collect()
}

#[test]
fn a_binary_that_is_not_the_version_its_name_says_is_refused_and_nothing_changes() {
    let w = World::new("selfupdate-liar", 1);
    let bin = installed_copy(&w.dir);
    let before = std::fs::read(&bin).unwrap();
    // Listed (and named) 99.0.0, its checksum true, but it says it is this version.
    let (rel, _) = release_dir_saying(&w.dir, "99.0.0", CURRENT, None);
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    let out = update(&bin, &w, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("listed as 99.0.0") && err.contains(&format!("runner-manager {CURRENT}")),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        before,
        "the binary was replaced"
    );
    assert!(leftovers(&bin).is_empty(), "{:?}", leftovers(&bin));
}

#[test]
fn update_mid_stream_hands_the_daemon_over_and_loses_no_job() {
    let mut w = World::new("selfupdate", 3);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(2).idle_timeout(60));
    w.add_profile(ProfileSpec::new("q", "t", &["q"]).max(1).idle_timeout(60));
    let bin = installed_copy(&w.dir);
    let (rel, new_bytes) = release_dir(&w.dir, "99.0.0", None);
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    let jobs: Vec<u64> = (0..8)
        .map(|i| w.enqueue("acme/app", &format!("job{i}"), &["p"], 1500))
        .collect();
    w.start_daemon_from(&bin, &[]);
    wait_until(SETTLE, "two busy runners", || {
        w.in_state(AttemptState::Busy).len() == 2
    });
    let before = std::fs::metadata(&bin).unwrap();

    let out = update(&bin, &w, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("{CURRENT} -> 99.0.0")), "{said}");
    assert!(said.contains("exits 75"), "{said}");
    // Replaced by rename: a new inode with the release's bytes and the old mode.
    let after = std::fs::metadata(&bin).unwrap();
    assert_ne!(before.ino(), after.ino());
    assert_eq!(after.mode() & 0o7777, 0o755);
    assert_eq!(std::fs::read(&bin).unwrap(), new_bytes);
    assert!(leftovers(&bin).is_empty(), "{:?}", leftovers(&bin));

    // A job queued once the daemon drains is left for the next daemon: only a new
    // runner of `q`, for which the host has room, could take it.
    wait_until(SETTLE, "the handover drain", || {
        w.daemon_logs().contains("reason=handover")
    });
    let late = w.enqueue("acme/app", "late", &["q"], 500);
    let mut status = None;
    wait_until(SETTLE, "the daemon to drain and exit", || {
        status = w.daemon_exited();
        status.is_some()
    });
    let status = status.unwrap();
    assert_eq!(status.code(), Some(75), "{}", w.daemon_logs());
    // It let its busy runners finish and started no new one: no runner is alive, and
    // the late job is still queued, with no runner of `q` ever started for it.
    assert!(w.live_attempts().is_empty(), "{:?}", w.live_attempts());
    assert!(w.runner_pids().is_empty());
    let late_job = w.sim.jobs().into_iter().find(|j| j.id == late).unwrap();
    assert_eq!(late_job.status, JobStatus::Queued, "{}", w.daemon_logs());
    assert!(w.attempts().iter().all(|a| a.profile != "q"));

    // The new binary's daemon takes the rest; the old request is not for it.
    w.start_daemon_from(&bin, &[]);
    for id in jobs.into_iter().chain([late]) {
        w.finished(id);
    }
    w.wait_settled(&["acme/app"]);
    assert!(
        w.daemon_exited().is_none(),
        "the new daemon handed over again"
    );
    let st = w.stop_daemon();
    assert!(st.success(), "{st}");
    w.check_invariants(&["acme/app"]);
}

#[test]
fn a_checksum_mismatch_leaves_the_binary_as_it_was() {
    let w = World::new("selfupdate-sum", 1);
    let bin = installed_copy(&w.dir);
    let old = std::fs::read(&bin).unwrap();
    let ino = std::fs::metadata(&bin).unwrap().ino();
    let (rel, _) = release_dir(&w.dir, "99.0.0", Some(&"ab".repeat(32)));
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);

    let out = update(&bin, &w, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SHA-256"),
        "{}",
        text(&out)
    );
    // Issue 50: the fix names the file to check and where, not `doctor`.
    let err = String::from_utf8_lossy(&out.stderr);
    let fix = err.lines().last().unwrap_or("");
    assert!(
        fix.starts_with(&format!(
            "fix: sha256sum {} in {} ",
            release::asset_name("99.0.0", &release::target()),
            rel.display()
        )) && fix.contains(release::SUMS)
            && fix.ends_with("runner-manager update"),
        "{}",
        text(&out)
    );
    assert!(out.stdout.is_empty(), "{}", text(&out));
    assert_eq!(std::fs::read(&bin).unwrap(), old, "the binary changed");
    assert_eq!(std::fs::metadata(&bin).unwrap().ino(), ino);
    assert!(leftovers(&bin).is_empty(), "{:?}", leftovers(&bin));
    let handover = runner_manager::store::daemon_facts::handover_request(&w.store()).unwrap();
    assert_eq!(handover, None, "the daemon was asked to hand over");
}

#[test]
fn check_and_an_up_to_date_binary_change_nothing() {
    let w = World::new("selfupdate-check", 1);
    let bin = installed_copy(&w.dir);
    let ino = std::fs::metadata(&bin).unwrap().ino();
    let (rel, _) = release_dir(&w.dir, "99.0.0", None);
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    // A newer release: exit 14 (update-available), so a script can tell it from 0.
    let out = update(&bin, &w, &["--check"]);
    assert_eq!(out.status.code(), Some(14), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("current {CURRENT}")), "{said}");
    assert!(said.contains("newest  99.0.0"), "{said}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("fix: runner-manager update"));
    assert_eq!(std::fs::metadata(&bin).unwrap().ino(), ino);

    let out = update(&bin, &w, &["--check", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));

    // A release of this very version: nothing to do without --force.
    std::fs::remove_dir_all(&rel).unwrap();
    release_dir(&w.dir, CURRENT, None);
    let out = update(&bin, &w, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to do"));
    assert_eq!(std::fs::metadata(&bin).unwrap().ino(), ino);
    assert!(leftovers(&bin).is_empty());
    let out = update(&bin, &w, &["--check"]);
    assert_eq!(out.status.code(), Some(0), "up to date: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("up to date"));

    // A release source that is not a directory is refused, naming it.
    let out = w.cli(&["host", "set", "release_source=/nonexistent/releases"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("release_source"));
}

#[test]
fn sigterm_during_a_handover_is_a_plain_drain() {
    let mut w = World::new("selfupdate-term", 1);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1).idle_timeout(60));
    let bin = installed_copy(&w.dir);
    let (rel, _) = release_dir(&w.dir, "99.0.0", None);
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    let long = w.enqueue("acme/app", "long", &["p"], 8000);
    w.start_daemon_from(&bin, &[]);
    wait_until(SETTLE, "a busy runner", || {
        w.in_state(AttemptState::Busy).len() == 1
    });
    let out = update(&bin, &w, &[]);
    assert!(out.status.success(), "{}", text(&out));
    // The handover waits for the busy runner; SIGTERM turns it into a plain drain,
    // which leaves the busy runner to the next daemon and exits 0 (no restart).
    wait_until(SETTLE, "the handover drain", || {
        w.daemon_logs().contains("reason=handover")
    });
    let st = w.stop_daemon();
    assert!(st.success(), "{st}\n{}", w.daemon_logs());
    w.start_daemon_from(&bin, &[]);
    w.finished(long);
    w.wait_settled(&["acme/app"]);
    w.stop_daemon();
    w.check_invariants(&["acme/app"]);
}

#[test]
fn a_daemon_running_another_binary_is_not_asked_to_hand_over() {
    let mut w = World::new("selfupdate-other", 1);
    let bin = installed_copy(&w.dir);
    let (rel, _) = release_dir(&w.dir, "99.0.0", None);
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    // The daemon runs the test binary itself; `update` replaces the copy.
    w.start_daemon();
    wait_until(SETTLE, "the daemon's heartbeat", || {
        w.store().heartbeat().unwrap().is_some()
    });
    let out = update(&bin, &w, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("not asked to hand over"), "{said}");
    let handover = runner_manager::store::daemon_facts::handover_request(&w.store()).unwrap();
    assert_eq!(handover, None);
    let st = w.stop_daemon();
    assert!(st.success(), "{st}");
}

#[test]
fn a_binary_that_does_not_run_here_is_refused_and_removed() {
    let w = World::new("selfupdate-probe", 1);
    let bin = installed_copy(&w.dir);
    let old = std::fs::read(&bin).unwrap();
    // Its sum is right, but it is no program this machine runs.
    let rel = w.dir.join("release");
    std::fs::create_dir_all(&rel).unwrap();
    let name = release::asset_name("99.0.0", &release::target());
    let bytes = b"\x7fELF not really".to_vec();
    std::fs::write(rel.join(&name), &bytes).unwrap();
    std::fs::write(
        rel.join(release::SUMS),
        format!("{}  {name}\n", sha256(&bytes)),
    )
    .unwrap();
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    let out = update(&bin, &w, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not run here"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&bin).unwrap(), old, "the binary changed");
    assert!(leftovers(&bin).is_empty(), "{:?}", leftovers(&bin));
}

/// A release directory that a canary stands in for: `runner-manager-99.0.0-TARGET` is a
/// script that leaves `ran` beside it when anything runs it (as `update`'s `--version`
/// probe would), listed in SHA256SUMS with its true sum.
fn canary_release(dir: &Path) -> (PathBuf, PathBuf) {
    let rel = dir.join("hostile-release");
    let _ = std::fs::remove_dir_all(&rel);
    std::fs::create_dir_all(&rel).unwrap();
    let ran = dir.join("ran");
    let name = release::asset_name("99.0.0", &release::target());
    let script = format!(
        "#!/bin/sh\ntouch {}\necho runner-manager 99.0.0\n",
        ran.display()
    );
    std::fs::write(rel.join(&name), &script).unwrap();
    std::fs::set_permissions(rel.join(&name), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        rel.join(release::SUMS),
        format!("{}  {name}\n", sha256(script.as_bytes())),
    )
    .unwrap();
    (rel, ran)
}

/// Issue 33, items 2 and 3: a release directory others can write, files another uid
/// owns, a FIFO for SHA256SUMS and a linked binary are refused by `host set` (exit 2,
/// naming release_source, nothing written) and again by `update` (for a source stored
/// before the check, or changed since), which runs nothing from them and leaves the
/// binary as it was.
#[test]
fn a_release_source_others_can_write_is_refused_and_nothing_in_it_runs() {
    use std::os::unix::fs::symlink;
    let w = World::new("selfupdate-hostile", 1);
    let bin = installed_copy(&w.dir);
    let old = std::fs::read(&bin).unwrap();
    let name = release::asset_name("99.0.0", &release::target());
    let root = nix_geteuid() == 0;
    type Spoil = Box<dyn Fn(&Path)>;
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let mut cases: Vec<(&str, &str, Spoil)> = vec![
        ("mode 1777", "1777", Box::new(move |rel| chmod(rel, 0o1777))),
        ("group-writable sums", "0664", {
            Box::new(move |rel| chmod(&rel.join(release::SUMS), 0o664))
        }),
        ("others-writable binary", "0757", {
            let name = name.clone();
            Box::new(move |rel| chmod(&rel.join(&name), 0o757))
        }),
        ("ancestor others can write", "0777", {
            Box::new(move |rel| {
                // The release directory inside a world-writable (not sticky) one.
                let open = rel.parent().unwrap().join("open");
                std::fs::create_dir_all(&open).unwrap();
                chmod(&open, 0o777);
                std::fs::rename(rel, open.join("r")).unwrap();
                symlink(open.join("r"), rel).unwrap();
            })
        }),
        ("a FIFO for SHA256SUMS", "FIFO", {
            Box::new(move |rel| {
                let sums = rel.join(release::SUMS);
                std::fs::remove_file(&sums).unwrap();
                let c = std::ffi::CString::new(sums.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            })
        }),
        ("a linked binary", "symbolic link", {
            let name = name.clone();
            Box::new(move |rel| {
                let elsewhere = rel.parent().unwrap().join("elsewhere");
                std::fs::rename(rel.join(&name), &elsewhere).unwrap();
                symlink(&elsewhere, rel.join(&name)).unwrap();
            })
        }),
    ];
    if root {
        cases.push(("binary another uid owns", "uid 65534", {
            let name = name.clone();
            Box::new(move |rel| {
                std::os::unix::fs::chown(rel.join(&name), Some(65534), None).unwrap()
            })
        }));
        cases.push(("directory another uid owns", "uid 65534", {
            Box::new(move |rel| std::os::unix::fs::chown(rel, Some(65534), None).unwrap())
        }));
    } else {
        eprintln!("not root: the cases of files another uid owns are left to the unit tests");
    }
    for (case, said, spoil) in &cases {
        let (rel, ran) = canary_release(&w.dir);
        spoil(&rel);
        // The ancestor case names the release through a link; the check must see the
        // real path, so it is given as such.
        let rel = std::fs::canonicalize(&rel).unwrap_or(rel);
        let before = w.store().kv_get(Beside::ReleaseSource.kv_key()).unwrap();
        let out = w.cli(&["host", "set", &format!("release_source={}", rel.display())]);
        assert_eq!(out.status.code(), Some(2), "{case}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("release_source") && err.contains(said),
            "{case}: {err}"
        );
        assert_eq!(
            w.store().kv_get(Beside::ReleaseSource.kv_key()).unwrap(),
            before,
            "{case}: host set wrote the source"
        );
        // Stored anyway (set before the check existed, or spoiled after): update
        // refuses it too, with and without --check.
        w.store()
            .kv_put(Beside::ReleaseSource.kv_key(), &rel.display().to_string())
            .unwrap();
        for args in [&["--check"][..], &[][..]] {
            let out = update(&bin, &w, args);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{case} {args:?}: {}",
                text(&out)
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("not trusted") && err.contains(said),
                "{case}: {err}"
            );
        }
        assert!(!ran.exists(), "{case}: the release's binary ran");
        assert_eq!(
            std::fs::read(&bin).unwrap(),
            old,
            "{case}: the binary changed"
        );
        assert!(leftovers(&bin).is_empty(), "{case}: {:?}", leftovers(&bin));
        w.store().kv_delete(Beside::ReleaseSource.kv_key()).unwrap();
        let _ = std::fs::remove_dir_all(w.dir.join("open"));
        let _ = std::fs::remove_file(w.dir.join("elsewhere"));
    }
}

fn nix_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}
