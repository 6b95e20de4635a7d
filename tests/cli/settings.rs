//! Settings as a user types them: what `profile show` prints is accepted back, in the
//! one form `top` and `host show` print too (`5m`, not `300s`: issue 38).

use crate::support::seeded;

#[test]
fn durations_take_what_profile_show_prints_and_units() {
    let d = seeded("durations");
    let shown = d.ok(&["profile", "show", "linux"]).stdout;
    let idle = shown
        .lines()
        .find_map(|l| l.strip_prefix("idle_timeout"))
        .map(str::trim)
        .expect("profile show prints idle_timeout")
        .to_string();
    assert_eq!(idle, "5m");
    d.ok(&["profile", "set", "linux", &format!("idle_timeout={idle}")]);
    for (value, shown) in [
        ("30s", "30s"),
        ("300", "5m"),
        ("1h30m", "90m"),
        ("2d", "2d"),
        ("45", "45s"),
        ("90s", "90s"),
    ] {
        d.ok(&["profile", "set", "linux", &format!("idle_timeout={value}")]);
        let out = d.ok(&["profile", "show", "linux"]).stdout;
        assert!(
            out.lines()
                .any(|l| l.starts_with("idle_timeout") && l.trim_end().ends_with(shown)),
            "{value} must be stored as {shown}:\n{out}"
        );
    }
    d.ok(&["target", "set", "octo", "poll_interval=1m"]);
    assert!(
        d.ok(&["target", "show", "octo"])
            .stdout
            .lines()
            .any(|l| l.starts_with("poll_interval") && l.trim_end().ends_with(" 1m"))
    );
    let r = d.run(&["profile", "set", "linux", "idle_timeout=soon"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("idle_timeout") && r.stderr.contains("unit s, m, h or d"),
        "the error gives the units: {}",
        r.stderr
    );
}

#[test]
fn a_typed_label_that_is_a_default_is_explained_when_given() {
    let d = seeded("default-label");
    let r = d.ok(&[
        "profile", "add", "plain", "--target", "octo", "--labels", "linux",
    ]);
    assert!(
        r.stderr
            .contains("note: --labels: linux is a default label (Linux)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("self-hosted, Linux,"), "{}", r.stderr);
    let r = d.ok(&["profile", "set", "plain", "labels=gpu,Self-Hosted"]);
    assert!(
        r.stderr
            .contains("note: labels: Self-Hosted is a default label (self-hosted)"),
        "{}",
        r.stderr
    );
    // A label no default covers says nothing.
    let r = d.ok(&["profile", "set", "plain", "labels=gpu"]);
    assert_eq!(r.stderr, "");
    let r = d.ok(&[
        "profile",
        "add",
        "own",
        "--target",
        "octo",
        "--labels",
        "linux",
        "--no-default-labels",
    ]);
    assert_eq!(r.stderr, "");
}

#[test]
fn a_runner_dir_that_is_not_an_install_is_refused_naming_what_is_missing() {
    let d = seeded("runner-dir");
    let empty = d.subdir("empty");
    let r = d.run(&[
        "profile",
        "add",
        "x",
        "--target",
        "octo",
        "--labels",
        "x",
        "--runner-dir",
        &empty,
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--runner-dir")
            && r.stderr.contains(&empty)
            && r.stderr.contains("bin/Runner.Listener is missing"),
        "{}",
        r.stderr
    );
    assert!(d.run(&["profile", "show", "x"]).code != 0, "nothing added");
    let r = d.run(&["profile", "set", "linux", &format!("runner_dir={empty}")]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("runner_dir") && r.stderr.contains("bin/Runner.Listener is missing"),
        "{}",
        r.stderr
    );
    // A simulated install, as the tests and the demo lay out, is an install.
    let install = d.path("install");
    runner_manager::sim::install::lay_out(&install, std::path::Path::new(crate::support::BIN))
        .unwrap();
    d.ok(&[
        "profile",
        "set",
        "linux",
        &format!("runner_dir={}", install.display()),
    ]);
}

#[test]
fn host_set_prints_only_what_changed() {
    let d = seeded("host-set");
    d.ok(&["host", "set", "capacity=4"]);
    let name = d.ok(&["--json", "host", "show"]).stdout;
    let name: serde_json::Value = serde_json::from_str(&name).unwrap();
    let name = name["name"].as_str().unwrap().to_string();
    let r = d.ok(&["host", "set", "capacity=5", "isolation=none"]);
    assert_eq!(
        r.stdout,
        format!("host {name} updated: capacity 5, isolation none\n")
    );
    let r = d.ok(&["host", "set", "capacity=5"]);
    assert_eq!(r.stdout, format!("host {name} unchanged\n"));
    // JSON still gives the whole host.
    let r = d.ok(&["--json", "host", "set", "capacity=6"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["capacity"], 6);
}

/// Issue 22, item 6: a poll interval whose busy polling could take more than half the
/// credential's hourly budget is accepted with a warning that gives the figure, and
/// one that fits says nothing.
#[test]
fn a_poll_interval_past_the_budget_is_warned_with_the_figure() {
    let d = seeded("poll-budget");
    let r = d.ok(&["target", "set", "octo", "poll_interval=1"]);
    assert!(
        r.stderr.contains("warning: target octo")
            && r.stderr
                .contains("7200 of the credential's 5000 units an hour (144%)"),
        "{}",
        r.stderr
    );
    assert!(
        d.ok(&["target", "show", "octo"])
            .stdout
            .lines()
            .any(|l| l.starts_with("poll_interval") && l.trim_end().ends_with("1s")),
        "the change stands"
    );
    let r = d.ok(&["target", "set", "octo", "poll_interval=10"]);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
}

/// Issue 33: risky settings are no longer taken silently. A runtime root in a system
/// directory and a PATH entry anyone can write are refused (exit 2, naming the
/// setting, nothing written); a preload, a PATH directory its group can write and a
/// shared uid for run_as are taken with a warning that names the risk.
#[test]
fn risky_settings_are_refused_or_warned_of_naming_the_risk() {
    use std::os::unix::fs::PermissionsExt;
    let d = seeded("risks");
    let snapshot = || crate::support::snapshot(&d.state());
    let before = snapshot();
    for (kv, said) in [
        ("runtime_root=/etc", "system directory"),
        ("env.PATH=/tmp:/usr/bin", "/tmp is writable by anyone"),
    ] {
        let r = d.run(&["host", "set", kv]);
        assert_eq!(r.code, 2, "{kv}: {}", r.stderr);
        let key = kv.split('=').next().unwrap();
        assert!(
            r.stderr.contains(key) && r.stderr.contains(said),
            "{kv}: {}",
            r.stderr
        );
        assert!(snapshot() == before, "{kv} was written");
    }
    let r = d.run(&["profile", "set", "linux", "env.PATH=/usr/bin:/tmp"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(snapshot() == before, "the profile's PATH was written");

    let shared = d.subdir("shared-bin");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).unwrap();
    for (args, said) in [
        (
            vec!["host", "set", "env.LD_PRELOAD=/usr/lib/libeatmydata.so"],
            "every program of every job loads",
        ),
        (
            vec!["profile", "set", "linux", "env.LD_PRELOAD=/usr/lib/x.so"],
            "every program of every job loads",
        ),
        (
            vec![
                "profile",
                "set",
                "linux",
                &format!("env.PATH={shared}:/usr/bin"),
            ],
            "can be written by its group",
        ),
        (
            vec!["profile", "set", "linux", "run_as=nobody"],
            "a uid other services share",
        ),
    ] {
        let r = d.ok(&args);
        assert!(
            r.stderr.contains("warning:") && r.stderr.contains(said),
            "{args:?}: {}",
            r.stderr
        );
    }
    let shown = d.ok(&["profile", "show", "linux"]).stdout;
    assert!(
        shown.contains("nobody") && shown.contains("LD_PRELOAD"),
        "{shown}"
    );
}

/// Issue 38: `profile set` printed only `updated (revision 2)`. It says what changed,
/// as `profile show` prints it (as `host set` does), and when nothing did.
#[test]
fn profile_set_says_what_changed() {
    let d = seeded("profile-set-changes");
    let r = d.ok(&["profile", "set", "linux", "max=6", "idle_timeout=5m"]);
    assert_eq!(
        r.stdout, "profile linux updated (revision 2): max 6\n",
        "idle_timeout was 300s already"
    );
    let r = d.ok(&["profile", "set", "linux", "active=false", "min=1"]);
    assert_eq!(
        r.stdout,
        "profile linux updated (revision 3): min 1, active no\n"
    );
    let r = d.ok(&["profile", "set", "linux", "max=6"]);
    assert_eq!(r.stdout, "profile linux: no setting changed (revision 4)\n");
}
