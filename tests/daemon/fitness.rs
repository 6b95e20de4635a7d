//! The fitness gate and the runner's environment (issues 21 and 22): a profile whose
//! required tool is not on its runners' `PATH` starts nothing, says why in `status`
//! and a metric, and starts once a later look finds the tool; the host's and the
//! profile's variables reach the runner, the profile's winning.

use super::metrics::{get, metrics_addr_in};
use super::support::{ProfileSpec, SETTLE, World, wait_until};
use std::os::unix::fs::PermissionsExt;

const JIT: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";
const TOOL: &str = "rm-fitness-probe-tool";

fn requests(w: &World, endpoint: &str) -> usize {
    w.log().iter().filter(|e| e.endpoint == endpoint).count()
}

/// `runner_manager_fitness_starts_held{profile="..."}` as `/metrics` serves it.
fn held_gauge(addr: &str, profile: &str) -> Option<f64> {
    let (status, text) = get(addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    let series = format!("runner_manager_fitness_starts_held{{profile=\"{profile}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map(|v| v.trim().parse().unwrap())
}

#[test]
fn a_missing_required_tool_starts_nothing_and_says_why_until_the_tool_appears() {
    let mut w = World::new("fitness-tools", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(1));
    let tools_dir = w.dir.join("runner-tools");
    std::fs::create_dir_all(&tools_dir).unwrap();
    let path = format!("{}:/usr/bin:/bin", tools_dir.display());
    w.cli_ok(&[
        "profile",
        "set",
        "linux",
        &format!("tools={TOOL},sh"),
        &format!("env.PATH={path}"),
    ]);
    // doctor sees what the daemon will: the runner's PATH, not its own.
    let doctor = w.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL tools:linux") && l.contains(TOOL)),
        "{text}"
    );
    assert!(
        text.find("required (").unwrap() < text.find("FAIL tools:linux").unwrap(),
        "{text}"
    );

    // doctor's target check asks for a JIT config of its own (and removes it).
    let jit_before = requests(&w, JIT);
    w.start_daemon_with(&["--metrics-listen", "127.0.0.1:0", "--fitness-every", "1"]);
    let addr = metrics_addr_in(&w.daemon_log_path(1));
    w.enqueue("acme/app", "needs-the-tool", &["linux"], 200);
    wait_until(
        SETTLE,
        "status to show the missing tool limiting linux",
        || w.limiting("linux").contains("required check tools:linux"),
    );
    let why = w.limiting("linux");
    assert!(
        why.contains(TOOL) && why.contains(&path) && !why.contains(", sh"),
        "{why}"
    );
    let reads = requests(&w, RUNS);
    wait_until(SETTLE, "two more queue reads while unfit", || {
        requests(&w, RUNS) >= reads + 2
    });
    assert_eq!(
        requests(&w, JIT),
        jit_before,
        "a runner was asked for on an unfit host"
    );
    assert!(w.attempts().is_empty(), "{:?}", w.attempts());
    assert_eq!(held_gauge(&addr, "linux"), Some(1.0));
    let text = w.cli_ok(&["status"]);
    assert!(text.contains("tools:linux"), "{text}");

    // The tool appears on the runner's PATH: the next look finds it, and the job runs.
    let tool = tools_dir.join(TOOL);
    std::fs::write(&tool, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    wait_until(SETTLE, "the job to complete once the tool exists", || {
        w.all_completed(&["acme/app"])
    });
    assert_eq!(held_gauge(&addr, "linux"), Some(0.0));
    assert!(requests(&w, JIT) > jit_before);
    assert!(w.daemon_logs().contains("starts_resumed_fit"));
    w.wait_settled(&["acme/app"]);
    w.stop_daemon();
    w.check_invariants(&["acme/app"]);
}

#[test]
fn the_runner_gets_the_hosts_and_the_profiles_variables_the_profiles_winning() {
    let mut w = World::new("fitness-env", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(1));
    w.cli_ok(&[
        "host",
        "set",
        "env.RM_HOST_ONLY=from host",
        "env.RM_BOTH=host",
    ]);
    w.cli_ok(&[
        "profile",
        "set",
        "linux",
        "env.RM_BOTH=profile",
        "env.RM_PROFILE_ONLY=p",
    ]);
    let show = w.cli_ok(&["profile", "show", "linux"]);
    assert!(show.contains("RM_BOTH=profile,RM_PROFILE_ONLY=p"), "{show}");
    // Refused: the runner's own names, and nothing is written.
    let before = w.cli_ok(&["--json", "profile", "show", "linux"]);
    let bad = w.cli(&["profile", "set", "linux", "env.GITHUB_TOKEN=x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("env.GITHUB_TOKEN"));
    assert_eq!(w.cli_ok(&["--json", "profile", "show", "linux"]), before);

    w.start_daemon();
    let id = w.sim.enqueue_script_job(
        "acme/app",
        "env",
        &["self-hosted", "linux"],
        "env | grep '^RM_' | sort",
    );
    let out = w.finished(id).output.unwrap_or_default();
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(
        lines,
        [
            "RM_BOTH=profile",
            "RM_HOST_ONLY=from host",
            "RM_PROFILE_ONLY=p"
        ],
        "{out}"
    );
    w.wait_settled(&["acme/app"]);
    w.stop_daemon();
    w.check_invariants(&["acme/app"]);
}

/// A daemon that sees no cgroups (here: a mount namespace with an empty tmpfs over
/// `/sys/fs/cgroup`, as a host with no controller delegated looks to it): a profile
/// whose `memory_max` cannot apply starts nothing and says why in `status`, the
/// metric and `doctor`, while a `limits=best-effort` profile starts, warned of (issue
/// 31: a limit is never claimed where it is not in effect).
#[test]
fn a_limit_the_host_cannot_enforce_holds_its_profile_unless_it_takes_best_effort() {
    let probe = std::process::Command::new("unshare")
        .args(["--mount", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED a_limit_the_host_cannot_enforce...: no mount namespaces here\n",
        );
        return;
    }
    let mut w = World::new("fitness-limits", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("strict", "t", &["linux"]).max(1));
    w.add_profile(ProfileSpec::new("loose", "t", &["gpu"]).max(1));
    w.cli_ok(&["profile", "set", "strict", "memory_max=256M"]);
    w.cli_ok(&[
        "profile",
        "set",
        "loose",
        "memory_max=256M",
        "limits=best-effort",
    ]);
    let bad = w.cli(&["profile", "set", "loose", "limits=sometimes"]);
    assert_eq!(bad.status.code(), Some(2));
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("limits") && said.contains("best-effort"),
        "{said}"
    );
    let wrapper = w.dir.join("no-cgroups");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec unshare --mount --propagation private sh -c \
             'mount -t tmpfs none /sys/fs/cgroup && exec \"$0\" \"$@\"' {} \"$@\"\n",
            super::support::BIN
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.start_daemon_from(&wrapper, &["--metrics-listen", "127.0.0.1:0"]);
    let addr = metrics_addr_in(&w.daemon_log_path(1));
    w.enqueue("acme/app", "strict-job", &["linux"], 200);
    w.enqueue("acme/app", "loose-job", &["gpu"], 200);
    wait_until(SETTLE, "status to show strict held by its limits", || {
        w.limiting("strict")
            .contains("required check limits:strict")
    });
    let why = w.limiting("strict");
    assert!(why.contains("memory_max set but not in effect"), "{why}");
    wait_until(SETTLE, "the best-effort profile's job to run", || {
        w.attempts().iter().any(|a| a.profile == "loose")
    });
    assert!(
        w.attempts().iter().all(|a| a.profile != "strict"),
        "{:?}",
        w.attempts()
    );
    assert_eq!(held_gauge(&addr, "strict"), Some(1.0));
    assert_eq!(held_gauge(&addr, "loose"), Some(0.0));
    // doctor judges by the daemon's cgroups, not by its own (which have memory here).
    let doctor = w.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL limits:strict") && l.contains("memory_max")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("WARN limits:loose") && l.contains("best-effort")),
        "{text}"
    );
    assert!(!doctor.status.success(), "{text}");
    w.stop_daemon();
}
