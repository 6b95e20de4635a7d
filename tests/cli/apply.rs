//! `apply FILE` and `export`: a host described in one file, applied whole or not at
//! all, idempotent, its drift shown.

use crate::support::{BIN, Dir, snapshot};
use std::io::Write as _;
use std::process::{Command, Stdio};

/// A file of every section, its token in the test's directory.
fn file(d: &Dir) -> String {
    let tok = d.file("acme.token", "secret-token-value");
    format!(
        r#"
[host]
capacity = 3
retention = "2d"

[targets.acme]
repo = "acme/app"
token_file = "{tok}"
poll_interval = "10s"

[targets.fleet]
org = "acme"
token_env = "FLEET_TOKEN"
repos = ["app", "lib"]

[profiles.linux]
target = "acme"
labels = ["linux", "big"]
max = 4
idle_timeout = "10m"
env.CACHE_DIR = "/srv/cache"

[profiles.small]
target = "fleet"
labels = "small"
active = false
"#
    )
}

/// The books as `--json` shows them, revisions included.
fn books(d: &Dir) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let json =
        |args: &[&str]| -> serde_json::Value { serde_json::from_str(&d.ok(args).stdout).unwrap() };
    (
        json(&["--json", "host", "show"]),
        json(&["--json", "target", "list"]),
        json(&["--json", "profile", "list"]),
    )
}

/// `apply -` with `text` on stdin.
fn apply_stdin(d: &Dir, text: &str) -> crate::support::Run {
    let mut child = Command::new(BIN)
        .arg("--state-dir")
        .arg(d.state())
        .args(["apply", "-"])
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap().into()
}

#[test]
fn a_file_applied_to_a_fresh_store_exports_the_same_and_applies_again_as_nothing() {
    let d = Dir::new("apply-fresh");
    let f = d.file("host.toml", &file(&d));
    let r = d.ok(&["apply", &f]);
    assert!(r.stdout.contains("+ target acme"), "{}", r.stdout);
    assert!(r.stdout.contains("+ profile small"), "{}", r.stdout);
    let (host, targets, profiles) = books(&d);
    assert_eq!(host["capacity"], 3, "{host}");
    let linux = &profiles.as_array().unwrap()[0];
    assert_eq!(linux["name"], "linux");
    assert_eq!(linux["max"], 4, "{linux}");
    assert_eq!(linux["revision"], 1, "{linux}");
    assert_eq!(targets.as_array().unwrap().len(), 2);

    // A second apply: nothing written, not a byte.
    let before = snapshot(&d.state());
    let r = d.ok(&["apply", &f]);
    assert!(r.stdout.contains("no change"), "{}", r.stdout);
    assert_eq!(snapshot(&d.state()), before, "a second apply wrote");

    // The export names the token by its path, never its contents; applied to this
    // store it changes nothing, and to a fresh one it makes the same books.
    let exported = d.ok(&["export"]).stdout;
    assert!(!exported.contains("secret-token-value"), "{exported}");
    assert!(exported.contains("acme.token"), "{exported}");
    let r = apply_stdin(&d, &exported);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("no change"), "{}", r.stdout);
    assert_eq!(books(&d), (host.clone(), targets.clone(), profiles.clone()));

    let other = Dir::new("apply-other");
    let r = apply_stdin(&other, &exported);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (h2, t2, p2) = books(&other);
    assert_eq!(t2, targets);
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        for p in v.as_array_mut().unwrap() {
            p.as_object_mut().unwrap().remove("host_id");
        }
        v
    };
    assert_eq!(strip(&p2), strip(&profiles));
    assert_eq!(h2["capacity"], host["capacity"]);
    assert_eq!(h2["retention"], host["retention"]);
}

#[test]
fn a_bad_key_or_value_exits_2_names_its_place_and_writes_nothing() {
    let d = Dir::new("apply-bad");
    let good = d.file("host.toml", &file(&d));
    d.ok(&["apply", &good]);
    let cases: &[(&str, &str, &str)] = &[
        ("max = 4", "maxx = 4", "profiles.linux.maxx"),
        ("capacity = 3", "capacty = 5", "host.capacty"),
        ("max = 4", "max = -1", "profiles.linux.max"),
        ("[profiles.small]", "[profile.small]", "profile"),
        (
            "poll_interval = \"10s\"",
            "poll_interval = \"soon\"",
            "targets.acme.poll_interval",
        ),
        (
            "target = \"fleet\"",
            "target = \"flet\"",
            "profiles.small.target",
        ),
    ];
    let guesses = ["'max'", "'capacity'", "", "'profiles'", "", "'fleet'"];
    for ((from, to, arg), guess) in cases.iter().zip(guesses) {
        let text = file(&d).replace(from, to);
        // One more change beside the bad one: none of the file is written.
        let text = text
            .replace("capacity = 3", "capacity = 7")
            .replace("capacty = 5", "capacty = 7");
        let bad = d.file("bad.toml", &text);
        let before = snapshot(&d.state());
        let r = d.run(&["apply", &bad]);
        assert_eq!(r.code, 2, "{to}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(arg), "{to}: {}", r.stderr);
        assert!(r.stderr.contains(guess), "{to}: want {guess}: {}", r.stderr);
        assert_eq!(snapshot(&d.state()), before, "{to}: the store changed");
        assert!(r.stdout.is_empty(), "{to}: {}", r.stdout);
    }
    // A token file that is not there: refused on the disk, the host untouched too.
    let text = file(&d)
        .replace("acme.token", "missing.token")
        .replace("capacity = 3", "capacity = 7");
    let bad = d.file("bad.toml", &text);
    let before = snapshot(&d.state());
    let r = d.run(&["apply", &bad]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("targets.acme.token_file"), "{}", r.stderr);
    assert_eq!(snapshot(&d.state()), before);
    // A file on a fresh state directory that is refused leaves no store behind.
    let fresh = Dir::new("apply-bad-fresh");
    let bad = fresh.file("bad.toml", "[host]\ncapacty = 3\n");
    let r = fresh.run(&["apply", &bad]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(!fresh.state().join("state.db").exists());
}

#[test]
fn a_dry_run_shows_the_difference_and_writes_nothing() {
    let d = Dir::new("apply-dry");
    let f = d.file("host.toml", &file(&d));
    // On a fresh state directory a dry run makes no store either.
    let r = d.run(&["apply", "--dry-run", &f]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(!d.state().join("state.db").exists());
    d.ok(&["host", "set", "capacity=2"]);
    let before = snapshot(&d.state());
    let r = d.ok(&["apply", "--dry-run", &f]);
    assert!(r.stdout.contains("~ host: capacity 2 → 3"), "{}", r.stdout);
    assert!(r.stdout.contains("+ profile linux"), "{}", r.stdout);
    assert!(r.stdout.contains("nothing written"), "{}", r.stdout);
    assert_eq!(snapshot(&d.state()), before, "a dry run wrote");
    d.ok(&["apply", &f]);
    let changed = d.file(
        "changed.toml",
        &file(&d).replace("max = 4", "max = 6").replace(
            "[profiles.small]\ntarget = \"fleet\"\nlabels = \"small\"\nactive = false\n",
            "",
        ),
    );
    let before = snapshot(&d.state());
    let r = d.ok(&["apply", "--dry-run", &changed]);
    assert!(
        r.stdout.contains("~ profile linux: max 4 → 6"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("profile small: in the store, not in the file (kept"),
        "{}",
        r.stdout
    );
    assert_eq!(snapshot(&d.state()), before, "a dry run wrote");
    let r = d.ok(&["apply", "--dry-run", "--prune", &changed]);
    assert!(r.stdout.contains("- profile small"), "{}", r.stdout);
    assert_eq!(snapshot(&d.state()), before, "a dry run wrote");
    d.ok(&["apply", "--prune", &changed]);
    let (_, _, profiles) = books(&d);
    assert_eq!(profiles.as_array().unwrap().len(), 1, "{profiles}");
}

#[test]
fn a_hand_edit_after_an_apply_is_drift_in_the_dry_run_and_in_status() {
    let d = Dir::new("apply-drift");
    let f = d.file("host.toml", &file(&d));
    d.ok(&["apply", &f]);
    let status = d.ok(&["status"]).stdout;
    assert!(!status.lines().any(|l| l.starts_with("drift")), "{status}");
    d.ok(&["profile", "set", "linux", "max=9"]);
    let r = d.ok(&["apply", "--dry-run", &f]);
    assert!(
        r.stdout.contains("~ profile linux: max 9 → 4"),
        "{}",
        r.stdout
    );
    let status = d.ok(&["status"]).stdout;
    let line = status
        .lines()
        .find(|l| l.starts_with("drift"))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(line.contains("1 difference"), "{line}");
    assert!(line.contains("host.toml"), "{line}");
    let json: serde_json::Value =
        serde_json::from_str(&d.ok(&["--json", "status"]).stdout).unwrap();
    assert!(
        json["drift"]
            .as_str()
            .is_some_and(|s| s.contains("1 difference")),
        "{json}"
    );
    // Applied again: the store is the file's, and the drift is gone.
    d.ok(&["apply", &f]);
    let status = d.ok(&["status"]).stdout;
    assert!(!status.lines().any(|l| l.starts_with("drift")), "{status}");
}

#[test]
fn the_operations_guides_example_file_applies() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .unwrap();
    let section = doc
        .split("## Describing a host in a file")
        .nth(1)
        .expect("docs/operations.md has the section");
    let example = section
        .split("```toml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the section has a toml example");
    let d = Dir::new("apply-doc");
    let tok = d.file("acme.token", "secret-token-value");
    let text = example.replace("/etc/runner-manager/acme.token", &tok);
    let f = d.file("host.toml", &text);
    let r = d.run(&["apply", &f]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(d.ok(&["apply", &f]).stdout.contains("no change"));
}

#[test]
fn pruning_a_profile_with_a_live_runner_refuses_the_whole_file() {
    use runner_manager::store::{NewAttempt, SqliteStore, Store};
    let d = Dir::new("apply-prune-live");
    let f = d.file("host.toml", &file(&d));
    d.ok(&["apply", &f]);
    {
        let store = SqliteStore::open(&d.state()).unwrap();
        let host = store.host().unwrap().unwrap();
        let new = NewAttempt {
            profile: "small".into(),
            target: "fleet".into(),
            host_id: host.id,
            ..NewAttempt::default()
        };
        store.create_attempt(&new, 1).unwrap();
    }
    // The file leaves `small` out and changes `linux`: with --prune, the live runner
    // of `small` refuses the removal, and `linux` is not changed either.
    let text = file(&d).replace("max = 4", "max = 6").replace(
        "[profiles.small]\ntarget = \"fleet\"\nlabels = \"small\"\nactive = false\n",
        "",
    );
    let less = d.file("less.toml", &text);
    let before = snapshot(&d.state());
    let r = d.run(&["apply", "--prune", &less]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stderr.contains("small") && r.stderr.contains("live"),
        "{}",
        r.stderr
    );
    assert_eq!(snapshot(&d.state()), before, "a refused file wrote");
    // Without --prune it is kept, and the rest applies.
    let r = d.ok(&["apply", &less]);
    assert!(
        r.stdout.contains("~ profile linux: max 4 → 6"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("profile small: in the store, not in the file (kept"),
        "{}",
        r.stdout
    );
}
