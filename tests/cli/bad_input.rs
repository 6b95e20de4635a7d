//! Bad input: exit 2, a message naming the argument, and the store byte-for-byte
//! unchanged.

use crate::support::{Dir, seeded, snapshot};

#[test]
fn bad_inputs_exit_2_name_the_argument_and_write_nothing() {
    let d = seeded("bad");
    let many_labels = (0..101)
        .map(|i| format!("l{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let long_name = "a".repeat(41);
    let p = ["profile", "add", "new", "--target", "octo", "--labels"];
    let long_url = format!("coordinator=wss://{}.example:7700", "a".repeat(2100));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["profile", "add", "Bad", "--target", "octo", "--labels", "x"],
            "NAME",
        ),
        (
            vec![
                "profile", "add", &long_name, "--target", "octo", "--labels", "x",
            ],
            "NAME",
        ),
        (
            vec!["profile", "add", "-x", "--target", "octo", "--labels", "x"],
            "-x",
        ),
        ([&p[..], &[""]].concat(), "--labels"),
        ([&p[..], &["a,,b"]].concat(), "--labels"),
        ([&p[..], &["a,A"]].concat(), "--labels"),
        ([&p[..], &["a b"]].concat(), "--labels"),
        ([&p[..], &[many_labels.as_str()]].concat(), "--labels"),
        ([&p[..], &["x", "--max", "-1"]].concat(), "--max"),
        ([&p[..], &["x", "--max", "1001"]].concat(), "--max"),
        ([&p[..], &["x", "--max", "0"]].concat(), "--max"),
        (
            [&p[..], &["x", "--min", "5", "--max", "2"]].concat(),
            "--min",
        ),
        (
            [&p[..], &["x", "--idle-timeout", "0"]].concat(),
            "--idle-timeout",
        ),
        (
            [&p[..], &["x", "--bootstrap-timeout", "99999"]].concat(),
            "--bootstrap-timeout",
        ),
        (
            [&p[..], &["x", "--runner-dir", "relative/dir"]].concat(),
            "--runner-dir",
        ),
        (
            [&p[..], &["x", "--runner-dir", "/nonexistent/runner"]].concat(),
            "--runner-dir",
        ),
        (
            [&p[..], &["x", "--runner-dir", "/tmp"]].concat(),
            "--runner-dir",
        ),
        ([&p[..], &["x", "--group", "0"]].concat(), "--group"),
        ([&p[..], &["x", "--bogus"]].concat(), "--bogus"),
        ([&p[..], &["x", "--paused=yes"]].concat(), "--paused"),
        ([&p[..], &["x", "--max"]].concat(), "--max"),
        (
            vec!["profile", "add", "new", "--target", "nope", "--labels", "x"],
            "--target",
        ),
        (vec!["profile", "add", "new", "--labels", "x"], "--target"),
        (
            vec!["profile", "add", "new", "--target", "octo"],
            "--labels",
        ),
        (
            vec![
                "profile", "add", "linux", "--target", "octo", "--labels", "x",
            ],
            "linux",
        ),
        (vec!["profile", "set", "linux", "max=many"], "max"),
        (vec!["profile", "set", "linux", "colour=blue"], "colour"),
        (vec!["profile", "set", "linux", "min=9"], "min"),
        (vec!["profile", "set", "linux", "mode=fast"], "mode"),
        (vec!["profile", "set", "linux", "labels="], "labels"),
        (
            vec!["profile", "set", "linux", "max=2", "labels=a,a"],
            "labels",
        ),
        (
            vec!["profile", "set", "linux", "runner_dir=/nonexistent/runner"],
            "runner_dir",
        ),
        (vec!["profile", "set", "linux", "target=nope"], "target"),
        (
            vec!["profile", "set", "linux", "max=3", "--revision", "x"],
            "--revision",
        ),
        (vec!["profile", "set", "linux", "max"], "max"),
        (vec!["profile", "set", "nope", "max=2"], "nope"),
        (vec!["profile", "show", "nope"], "nope"),
        (vec!["profile", "frobnicate"], "frobnicate"),
        (
            vec![
                "target",
                "add",
                "t2",
                "--repo",
                "noslash",
                "--token-env",
                "X",
            ],
            "--repo",
        ),
        (
            vec![
                "target",
                "add",
                "t2",
                "--repo",
                "a/b",
                "--token-file",
                "/nonexistent/tok",
            ],
            "--token-file",
        ),
        (vec!["target", "add", "t2", "--repo", "a/b"], "--token-file"),
        (
            vec![
                "target",
                "add",
                "t2",
                "--repo",
                "a/b",
                "--org",
                "c",
                "--token-env",
                "X",
            ],
            "--org",
        ),
        (
            vec![
                "target",
                "add",
                "t2",
                "--repo",
                "a/b",
                "--token-env",
                "1BAD",
            ],
            "--token-env",
        ),
        (
            vec![
                "target",
                "add",
                "t2",
                "--repo",
                "a/b",
                "--token-env",
                "X",
                "--api-url",
                "http://example.com",
            ],
            "--api-url",
        ),
        (
            vec!["target", "add", "t2", "--repo", "a/b", "--app-id", "1"],
            "--app-key",
        ),
        (
            vec![
                "target",
                "add",
                "t2",
                "--repo",
                "a/b",
                "--token-env",
                "X",
                "--installation-id",
                "3",
            ],
            "--installation-id",
        ),
        (
            vec!["target", "add", "octo", "--repo", "a/b", "--token-env", "X"],
            "octo",
        ),
        (
            vec!["target", "set", "octo", "poll_interval=0"],
            "poll_interval",
        ),
        (
            vec!["target", "set", "octo", "poll_interval=5x"],
            "poll_interval",
        ),
        (
            vec!["profile", "set", "linux", "idle_timeout=1.5h"],
            "idle_timeout",
        ),
        (
            vec!["profile", "set", "linux", "bootstrap_timeout=2h"],
            "bootstrap_timeout",
        ),
        (
            vec!["target", "set", "octo", "max_in_flight=0"],
            "max_in_flight",
        ),
        (
            vec!["target", "set", "octo", "max_in_flight=101"],
            "max_in_flight",
        ),
        (
            vec!["target", "set", "octo", "max_in_flight=lots"],
            "max_in_flight",
        ),
        (
            vec!["target", "set", "octo", "secondary_limit=10"],
            "secondary_limit",
        ),
        (
            vec!["target", "set", "octo", "secondary_limit=none"],
            "secondary_limit",
        ),
        (vec!["host", "set", "retention=10m"], "retention"),
        (vec!["host", "set", "retention=400d"], "retention"),
        (vec!["host", "set", "retention=soon"], "retention"),
        (vec!["host", "set", "logs_max=1M"], "logs_max"),
        (vec!["host", "set", "logs_max=lots"], "logs_max"),
        (vec!["host", "set", "disk_reserve=lots"], "disk_reserve"),
        (vec!["host", "set", "disk_reserve=-1M"], "disk_reserve"),
        (vec!["host", "set", "env.RUNNER_TEMP=/x"], "env.RUNNER_TEMP"),
        (
            vec!["host", "set", "env.GITHUB_TOKEN=x"],
            "env.GITHUB_TOKEN",
        ),
        (vec!["host", "set", "env.HOME=/x"], "env.HOME"),
        (vec!["host", "set", "env.1BAD=x"], "env.1BAD"),
        (vec!["host", "set", "env.PATH=bin:/usr/bin"], "env.PATH"),
        (
            vec!["profile", "set", "linux", "env.ACTIONS_X=1"],
            "env.ACTIONS_X",
        ),
        (vec!["profile", "set", "linux", "env.A-B=1"], "env.A-B"),
        (vec!["profile", "set", "linux", "env=A=1"], "env"),
        (
            vec!["profile", "set", "linux", "tools=/usr/bin/git"],
            "tools",
        ),
        (
            vec!["target", "set", "octo", "token_file=/nonexistent/tok"],
            "token_file",
        ),
        (vec!["target", "set", "octo", "color=red"], "color"),
        (vec!["host", "set", "capacity=0"], "capacity"),
        (vec!["host", "set", "capacity=lots"], "capacity"),
        (vec!["host", "set", "coordinator=http://x"], "coordinator"),
        (
            vec![
                "host",
                "set",
                "coordinator=ws://coord.example:7700/\u{1b}[2J",
            ],
            "coordinator",
        ),
        (vec!["host", "set", &long_url], "at most 2048"),
        (
            vec!["host", "set", "coordinator_token_file=/nonexistent/tok"],
            "coordinator_token_file",
        ),
        (vec!["attempts", "--limit", "x"], "--limit"),
        (vec!["attempts", "--profile", "Nope"], "--profile"),
        (vec!["attempt", "show", "abc"], "ID"),
        (vec!["status", "extra"], "extra"),
        (vec!["frobnicate"], "frobnicate"),
        // Checked before the daemon opens anything: no daemon starts.
        (vec!["daemon", "--upkeep-every", "0"], "--upkeep-every"),
        (vec!["daemon", "--upkeep-every", "soon"], "--upkeep-every"),
        (vec!["daemon", "--fitness-every", "2d"], "--fitness-every"),
    ];
    assert!(cases.len() >= 30);
    let state = d.state();
    for (args, arg) in &cases {
        let before = snapshot(&state);
        let r = d.run(args);
        assert_eq!(
            r.code, 2,
            "{args:?} must exit 2, got {}: {}",
            r.code, r.stderr
        );
        assert!(
            r.stderr.contains(arg),
            "{args:?}: message must name {arg:?}: {}",
            r.stderr
        );
        assert!(
            r.stdout.is_empty(),
            "{args:?} printed to stdout: {}",
            r.stdout
        );
        assert!(
            !r.stderr.contains("secret-token-value"),
            "{args:?} printed the secret"
        );
        assert!(snapshot(&state) == before, "{args:?} changed the store");
    }
    // And the store still holds what it held.
    let show = d.ok(&["profile", "show", "linux"]);
    assert!(
        show.stdout.contains("revision           1"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_mistyped_target_or_profile_name_is_answered_with_the_near_one() {
    let d = seeded("near");
    let state = d.state();
    // Each with its fix: the very command, with the name it meant.
    let cases: [(&[&str], &str, &str); 6] = [
        (
            &["target", "rm", "octp"],
            "no target named \"octp\"; did you mean 'octo'?",
            "target rm octo",
        ),
        (
            &["target", "show", "oct"],
            "no target named \"oct\"; did you mean 'octo'?",
            "target show octo",
        ),
        (
            &["profile", "set", "linx", "max=2"],
            "no profile named \"linx\"; did you mean 'linux'?",
            "profile set linux max=2",
        ),
        (
            &["profile", "pause", "Linux"],
            "no profile named \"Linux\"; did you mean 'linux'?",
            "profile pause linux",
        ),
        (
            &["profile", "add", "new", "--target", "otco", "--labels", "x"],
            "no target named \"otco\"; did you mean 'octo'?",
            "profile add new --target octo --labels x",
        ),
        (
            &["profile", "set", "linux", "target=octa"],
            "no target named \"octa\"; did you mean 'octo'?",
            "profile set linux target=octo",
        ),
    ];
    for (args, want, fix) in cases {
        let before = snapshot(&state);
        let r = d.run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
        let fix_line = r.stderr.lines().last().unwrap_or("");
        assert!(
            fix_line.starts_with("fix: runner-manager --state-dir ") && fix_line.ends_with(fix),
            "{args:?}: {}",
            r.stderr
        );
        assert!(snapshot(&state) == before, "{args:?} changed the store");
    }
    // Nothing near: no guess, the same refusal.
    let r = d.run(&["target", "rm", "zzzzzz"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("no target named \"zzzzzz\"") && !r.stderr.contains("did you mean"),
        "{}",
        r.stderr
    );
}

#[test]
fn refusals_that_are_not_bad_input_exit_conflict() {
    let d = seeded("bad");
    let r = d.run(&["target", "rm", "octo"]);
    assert_eq!(r.code, 13, "{}", r.stderr);
    assert!(
        r.stderr.contains("profile rm"),
        "says what to do: {}",
        r.stderr
    );
    d.ok(&["profile", "set", "linux", "max=5"]);
    let r = d.run(&["profile", "set", "linux", "max=6", "--revision", "1"]);
    assert_eq!(r.code, 13);
    assert!(
        r.stderr.contains("revision 1") && r.stderr.contains("revision 2"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_foreign_file_is_refused_untouched() {
    let d = Dir::new("foreign");
    std::fs::create_dir_all(d.state()).unwrap();
    let db = d.state().join("state.db");
    std::fs::write(&db, "my shopping list\n").unwrap();
    let r = d.run(&["status"]);
    assert_eq!(r.code, 8, "store-unreadable: {}", r.stderr);
    assert!(r.stderr.contains(&db.display().to_string()), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&db).unwrap(), "my shopping list\n");
}

#[test]
fn an_app_key_that_is_not_a_pem_key_is_refused_naming_the_file() {
    let d = seeded("badkey");
    let state = d.state();
    let not_pem = d.file("notes.txt", "ghp_this_is_a_token_not_a_key\n");
    let half = d.file("half.pem", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n");
    for key in [&not_pem, &half] {
        let before = snapshot(&state);
        let r = d.run(&[
            "target",
            "add",
            "app",
            "--repo",
            "a/b",
            "--app-id",
            "1",
            "--app-key",
            key,
        ]);
        assert_eq!(r.code, 2, "{key}: {}", r.stderr);
        assert!(
            r.stderr.contains("--app-key") && r.stderr.contains(key.as_str()),
            "names the argument and the file: {}",
            r.stderr
        );
        assert!(r.stderr.contains("PEM"), "{}", r.stderr);
        assert!(
            !r.stderr.contains("ghp_this"),
            "echoed the file: {}",
            r.stderr
        );
        assert!(snapshot(&state) == before, "{key} changed the store");
    }
    // A real key is taken, and `target set app_key=` is held to the same rule.
    let good = d.file("key.pem", include_str!("../fixtures/github/app-key.pem"));
    d.ok(&[
        "target",
        "add",
        "app",
        "--repo",
        "a/b",
        "--app-id",
        "1",
        "--app-key",
        &good,
    ]);
    let before = snapshot(&state);
    let r = d.run(&["target", "set", "app", &format!("app_key={not_pem}")]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("app_key") && r.stderr.contains(not_pem.as_str()));
    assert!(snapshot(&state) == before);
}
