//! Every command's human and `--json` output against golden files in tests/golden/.
//! `RUNNER_MANAGER_UPDATE_GOLDEN=1 cargo test --test cli` rewrites them.

use crate::support::Dir;
use runner_manager::domain::{AttemptState, Outcome};
use runner_manager::store::{NewAttempt, SqliteStore, Store};
use std::path::PathBuf;

/// 2026-11-30T10:00:00Z: attempts get fixed times so their output is stable.
const T0: i64 = 1_796_032_800_000;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Replaces what differs between machines and runs with placeholders.
struct Normalizer(Vec<(String, &'static str)>);

impl Normalizer {
    fn apply(&self, s: &str) -> String {
        let mut s = s.to_string();
        for (from, to) in &self.0 {
            s = s.replace(from.as_str(), to);
        }
        s
    }
}

/// Compares with the golden file, or rewrites it when asked. Collects mismatches so
/// one run shows them all.
fn check(name: &str, actual: &str, failures: &mut Vec<String>) {
    let path = golden_dir().join(format!("{name}.txt"));
    if std::env::var_os("RUNNER_MANAGER_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        failures.push(format!(
            "--- {}\n=== expected\n{expected}=== actual\n{actual}",
            path.display()
        ));
    }
}

#[test]
fn every_command_human_and_json() {
    let d = Dir::new("golden");
    let tok = d.file("token", "ghp_not_for_printing");
    let key = d.file("key.pem", include_str!("../fixtures/github/app-key.pem"));
    let runner = d.path("actions-runner");
    runner_manager::sim::install::lay_out(&runner, std::path::Path::new(crate::support::BIN))
        .unwrap();
    let runner = runner.display().to_string();
    // Fix the capacity first: its default is the machine's CPU count.
    d.ok(&["host", "set", "capacity=4"]);
    let host = SqliteStore::open(&d.state())
        .unwrap()
        .host()
        .unwrap()
        .unwrap();
    // Whether this machine has a machine id (a container may not) decides `status`'s
    // identity line.
    let (identity_ok, identity) = runner_manager::domain::identity::describe(
        SqliteStore::open(&d.state())
            .unwrap()
            .kept_machine_id()
            .unwrap()
            .as_deref(),
        runner_manager::runner::machine::current().as_deref(),
    );
    let norm = Normalizer(vec![
        (d.state().display().to_string(), "<STATE_DIR>"),
        (
            format!("identity     {identity}\n"),
            "identity     <IDENTITY>\n",
        ),
        (
            format!("\"detail\": \"{identity}\""),
            "\"detail\": \"<IDENTITY>\"",
        ),
        (
            format!("\"last_change\": null,\n    \"ok\": {identity_ok}\n"),
            "\"last_change\": null,\n    \"ok\": <IDENTITY_OK>\n",
        ),
        (d.root.display().to_string(), "<TMP>"),
        // Same-width placeholders keep the tables aligned.
        (host.id.clone(), "HHHHHHHHHHHHHHHH"),
        (host.id[..8].to_string(), "hhhhhhhh"),
        (
            format!("host         {} (", host.name),
            "host         <HOST_NAME> (",
        ),
        (
            format!("name                    {}\n", host.name),
            "name                    <HOST_NAME>\n",
        ),
        (
            format!("\"name\": \"{}\"", host.name),
            "\"name\": \"<HOST_NAME>\"",
        ),
        (
            format!("host {} updated", host.name),
            "host <HOST_NAME> updated",
        ),
    ]);

    let steps: Vec<(&str, Vec<&str>)> = vec![
        (
            "target-add-repo",
            vec![
                "target",
                "add",
                "octo",
                "--repo",
                "octo/app",
                "--token-file",
                &tok,
            ],
        ),
        (
            "target-add-org",
            vec![
                "--json",
                "target",
                "add",
                "corp",
                "--org",
                "corp",
                "--api-url",
                "https://ghe.corp.example/api/v3/",
                "--app-id",
                "12",
                "--app-key",
                &key,
                "--installation-id",
                "34",
            ],
        ),
        (
            "target-set",
            vec![
                "target",
                "set",
                "corp",
                "repos=api,web",
                "poll_interval=10",
                "max_in_flight=20",
                "secondary_limit=off",
            ],
        ),
        (
            "target-set-json",
            vec!["--json", "target", "set", "octo", "token_env=GH_TOKEN"],
        ),
        (
            "profile-add",
            vec![
                "profile",
                "add",
                "linux",
                "--target",
                "octo",
                "--labels",
                "gpu,cuda",
                "--max",
                "4",
                "--min",
                "1",
                "--runner-dir",
                &runner,
                "--group",
                "builders",
                "--idle-timeout",
                "120",
                "--bootstrap-timeout",
                "60",
            ],
        ),
        (
            "profile-add-json",
            vec![
                "--json",
                "profile",
                "add",
                "watch",
                "--target",
                "corp",
                "--labels",
                "big",
                "--monitor",
                "--paused",
                "--no-default-labels",
                "--allow-public",
                "--max",
                "0",
            ],
        ),
        (
            "profile-set",
            vec![
                "profile",
                "set",
                "linux",
                "max=6",
                "job_timeout=3600",
                "demand=scaleset",
                "run_as=runner",
            ],
        ),
        (
            "profile-set-revision-json",
            vec![
                "--json",
                "profile",
                "set",
                "linux",
                "labels=gpu",
                "--revision",
                "2",
            ],
        ),
        ("profile-pause", vec!["profile", "pause", "linux"]),
        (
            "profile-resume-json",
            vec!["--json", "profile", "resume", "linux"],
        ),
        ("host-set", vec!["host", "set", "capacity=8"]),
    ];
    let mut failures = Vec::new();
    for (name, args) in &steps {
        let r = d.ok(args);
        check(name, &norm.apply(&r.stdout), &mut failures);
    }

    // Attempts come from the daemon, which does not exist yet: write them through the
    // library with fixed times.
    {
        let s = SqliteStore::open(&d.state()).unwrap();
        let new = NewAttempt {
            profile: "linux".into(),
            target: "octo".into(),
            host_id: host.id.clone(),
            job_id: Some(901),
            job_name: Some("build (ubuntu)".into()),
            job_queued_at: Some(T0 - 5_000),
            lease_id: None,
            ..NewAttempt::default()
        };
        let mut a = s.create_attempt(&new, T0).unwrap();
        a.step(AttemptState::Starting, T0 + 1_000).unwrap();
        a.pid = Some(4242);
        a.step(AttemptState::Idle, T0 + 4_000).unwrap();
        a.step(AttemptState::Busy, T0 + 6_000).unwrap();
        a.end(Outcome::CompletedJob, None, T0 + 65_000).unwrap();
        a.exit_code = Some(0);
        a.step(AttemptState::Destroying, T0 + 66_000).unwrap();
        a.cleaned = true;
        a.owner = Some(runner_manager::domain::job_owner::JobOwner {
            repo: "octo/app".into(),
            workflow: Some("CI".into()),
            job_name: "build (ubuntu)".into(),
            run_id: 77,
            run_attempt: Some(1),
            job_id: Some(901),
            queued_at: Some(T0 - 5_000),
            source: runner_manager::domain::job_owner::OwnerSource::Rest,
        });
        s.save_attempt(&a).unwrap();
        let mut b = s
            .create_attempt(
                &NewAttempt {
                    job_id: None,
                    job_name: None,
                    job_queued_at: None,
                    ..new
                },
                T0 + 70_000,
            )
            .unwrap();
        b.step(AttemptState::Starting, T0 + 71_000).unwrap();
        b.pid = Some(4343);
        s.save_attempt(&b).unwrap();
        // The live meter the daemon keeps while b's runner lives.
        s.put_live_meters(&[runner_manager::meter::LiveMeter {
            attempt: b.id,
            at: T0 + 72_000,
            rss_bytes: 612 << 20,
            peak_rss_bytes: 700 << 20,
            cpu_millis: 1_234,
            cpu_percent: 35.0,
            processes: 4,
            seq: 0,
        }])
        .unwrap();
    }

    let reads: Vec<(&str, Vec<&str>)> = vec![
        ("target-list", vec!["target", "list"]),
        ("target-show", vec!["target", "show", "corp"]),
        ("profile-list", vec!["profile", "list"]),
        ("profile-show", vec!["profile", "show", "linux"]),
        ("host-show", vec!["host", "show"]),
        ("status", vec!["status"]),
        ("attempts", vec!["attempts"]),
        (
            "attempts-active",
            vec!["attempts", "--active", "--profile", "linux"],
        ),
        ("attempt-show", vec!["attempt", "show", "1"]),
        ("attempt-show-live", vec!["attempt", "show", "2"]),
    ];
    // The store's size moves with SQLite's page use; `status` prints it.
    let store_size = |s: &str| {
        let size = |n: &str| std::fs::metadata(d.state().join(n)).map_or(0, |m| m.len());
        let n = size("state.db") + size("state.db-wal");
        s.replace(
            &format!("store {}", runner_manager::meter::units::bytes(n)),
            "store <SIZE>",
        )
        .replace(&format!("\"store_bytes\": {n}"), "\"store_bytes\": 0")
    };
    for (name, args) in &reads {
        let r = d.ok(args);
        check(name, &store_size(&norm.apply(&r.stdout)), &mut failures);
        let mut json_args = vec!["--json"];
        json_args.extend(args);
        let r = d.ok(&json_args);
        serde_json::from_str::<serde_json::Value>(&r.stdout)
            .unwrap_or_else(|e| panic!("{name} --json is not JSON: {e}"));
        check(
            &format!("{name}-json"),
            &store_size(&norm.apply(&r.stdout)),
            &mut failures,
        );
    }
    let all = format!(
        "{}{}",
        d.ok(&["--json", "target", "list"]).stdout,
        d.ok(&["status"]).stdout
    );
    assert!(
        !all.contains("ghp_not_for_printing"),
        "a secret was printed"
    );

    let removals: Vec<(&str, Vec<&str>)> = vec![
        ("profile-rm", vec!["profile", "rm", "watch"]),
        ("target-rm-json", vec!["--json", "target", "rm", "corp"]),
    ];
    for (name, args) in &removals {
        let r = d.ok(args);
        check(name, &norm.apply(&r.stdout), &mut failures);
    }
    assert!(
        failures.is_empty(),
        "golden mismatches (RUNNER_MANAGER_UPDATE_GOLDEN=1 rewrites):\n{}",
        failures.join("\n")
    );
}

#[test]
fn help_and_version() {
    let d = Dir::new("help");
    let mut failures = Vec::new();
    check("help", &d.ok(&["--help"]).stdout, &mut failures);
    check(
        "help-profile-set",
        &d.ok(&["profile", "set", "--help"]).stdout,
        &mut failures,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let v = d.ok(&["--version"]);
    assert_eq!(
        v.stdout,
        format!("runner-manager {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_fresh_machine_gets_a_private_store_on_first_use() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dir::new("fresh");
    // A command that only reads makes no store: it says there is none.
    let r = d.run(&["status"]);
    assert_eq!(r.code, 12, "no-store: {}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("no store at {}", d.state().display())),
        "{}",
        r.stderr
    );
    assert!(!d.state().exists(), "a read made the state directory");
    // One that writes the books makes it, private.
    d.ok(&["host", "set", "capacity=2"]);
    let r = d.ok(&["status"]);
    assert!(
        r.stdout.contains("daemon       not running"),
        "{}",
        r.stdout
    );
    let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(d.state()), 0o700);
    assert_eq!(mode(d.state().join("state.db")), 0o600);
    // The environment variable works as --state-dir does.
    let out = std::process::Command::new(crate::support::BIN)
        .args(["--json", "host", "show"])
        .env("RUNNER_MANAGER_STATE_DIR", d.state())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["id"].as_str().map(str::len), Some(16));
}
