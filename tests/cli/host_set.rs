//! `host set` is one typed, transactional edit (`store::edit_host`): every key it
//! lists is taken, what changed is said from the settings themselves, and a refused
//! edit (a rule across keys, a file on the disk) writes nothing.

use crate::support::{seeded, snapshot};

/// A uid with a passwd entry other than root's: `runner_uids` needs its users.
fn some_user_uid() -> u32 {
    std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(':').nth(2)?.parse::<u32>().ok())
        .find(|uid| *uid > 0)
        .expect("a user besides root in /etc/passwd")
}

#[test]
fn every_settable_key_is_set_and_said() {
    use std::os::unix::fs::PermissionsExt;
    let d = seeded("host-set-every");
    let token = d.file("host-token", "host-token-value");
    let hook = d.file("hook-secret", "hook-secret-value");
    let root = d.subdir("runtime");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = std::fs::canonicalize(&root).unwrap().display().to_string();
    let ca = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/coord_tls/ca.pem"
    );
    let uid = some_user_uid();
    let uids = format!("{uid}-{uid}");
    // (what is typed, what `host set` and `host show` then say of each key)
    type Edit<'a> = (Vec<String>, Vec<(&'a str, String)>);
    let edits: Vec<Edit> = vec![
        (vec!["capacity=3".into()], vec![("capacity", "3".into())]),
        (
            vec![format!("coordinator_token_file={token}")],
            vec![("coordinator_token_file", token.clone())],
        ),
        (
            vec!["coordinator=wss://pool.example:443".into()],
            vec![("coordinator", "wss://pool.example:443".into())],
        ),
        (
            vec![format!("coordinator_ca_file={ca}")],
            vec![("coordinator_ca_file", ca.into())],
        ),
        (
            vec!["coordinator_insecure=true".into()],
            vec![("coordinator_insecure", "yes".into())],
        ),
        (
            vec![format!("runner_uids={uids}")],
            vec![("runner_uids", uids.clone())],
        ),
        (
            vec!["isolation=uids".into()],
            vec![("isolation", "uids".into())],
        ),
        (
            vec!["retention=2d".into()],
            vec![("retention", "2d".into())],
        ),
        (
            vec!["logs_max=32MiB".into()],
            vec![("logs_max", "32 MiB".into())],
        ),
        (
            vec!["disk_reserve=1GiB".into()],
            vec![("disk_reserve", "1.0 GiB".into())],
        ),
        (vec!["env.FOO=bar".into()], vec![("env", "FOO=bar".into())]),
        (
            vec!["runner_version=2.330.0".into()],
            vec![("runner_version", "2.330.0".into())],
        ),
        (
            vec![format!("runtime_root={root}")],
            vec![("runtime_root", root.clone())],
        ),
        (
            vec!["cache_cap=2GiB".into()],
            vec![("cache_cap", "2.0 GiB".into())],
        ),
        (
            vec!["release_source=https://releases.example/rm/".into()],
            vec![("release_source", "https://releases.example/rm".into())],
        ),
        (
            vec![
                "webhook_listen=127.0.0.1:8090".into(),
                format!("webhook_secret_file={hook}"),
            ],
            vec![
                ("webhook_listen", "127.0.0.1:8090".into()),
                ("webhook_secret_file", hook.clone()),
            ],
        ),
        (
            vec!["usage_retention=9408h".into()],
            vec![("usage_retention", "392d".into())],
        ),
        (
            vec![
                "cost_per_cpu_hour=0.040".into(),
                "cost_per_gib_hour=0.005".into(),
            ],
            vec![
                ("cost_per_cpu_hour", "0.04".into()),
                ("cost_per_gib_hour", "0.005".into()),
            ],
        ),
        (
            vec!["usage_metrics_top=5".into()],
            vec![("usage_metrics_top", "5".into())],
        ),
    ];
    let mut covered: Vec<&str> = Vec::new();
    for (typed, said) in &edits {
        let mut args = vec!["host", "set"];
        args.extend(typed.iter().map(String::as_str));
        let out = d.ok(&args).stdout;
        let changes = out.split_once(" updated: ").map(|(_, c)| c.trim_end());
        let want: Vec<String> = said.iter().map(|(k, v)| format!("{k} {v}")).collect();
        assert_eq!(changes, Some(want.join(", ").as_str()), "{typed:?}");
        covered.extend(said.iter().map(|(k, _)| *k));
    }
    let shown = d.ok(&["host", "show"]).stdout;
    for (_, said) in &edits {
        for (key, value) in said {
            assert!(
                shown.lines().any(|l| l
                    .split_once(' ')
                    .is_some_and(|(k, v)| k == *key && v.trim() == value)),
                "{key} {value} not in:\n{shown}"
            );
        }
    }
    // Every key `host set` lists was set above (env.NAME as env).
    for key in runner_manager::domain::host::SETTABLE_KEYS {
        let key = if *key == "env.NAME" { "env" } else { key };
        assert!(covered.contains(&key), "{key} not covered");
    }
}

/// A rule across keys refuses the whole edit: exit 2 naming the key and the reason,
/// and neither the host row nor the rows beside it are written.
#[test]
fn a_refused_edit_writes_nothing() {
    let d = seeded("host-set-refused");
    d.ok(&["host", "show"]);
    let hook = d.file("hook-secret", "hook-secret-value");
    let before = snapshot(&d.state());
    for (args, key, reason) in [
        (
            vec![
                "capacity=3".to_string(),
                "coordinator=wss://pool.example:443".into(),
            ],
            "coordinator_token_file",
            "a coordinator needs coordinator_token_file",
        ),
        (
            vec!["capacity=3".into(), "webhook_listen=127.0.0.1:8090".into()],
            "webhook_secret_file",
            "webhook_listen needs webhook_secret_file",
        ),
        (
            vec![
                format!("webhook_secret_file={hook}"),
                "webhook_listen=127.0.0.1:8090".into(),
                "isolation=uids".into(),
            ],
            "isolation",
            "isolation=uids needs runner_uids",
        ),
        (
            vec![
                "release_source=https://releases.example/rm".into(),
                "coordinator_ca_file=/nonexistent/ca.pem".into(),
            ],
            "coordinator_ca_file",
            "cannot read /nonexistent/ca.pem",
        ),
    ] {
        let mut argv = vec!["host", "set"];
        argv.extend(args.iter().map(String::as_str));
        let r = d.run(&argv);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("invalid {key}: {reason}")),
            "{args:?}: {}",
            r.stderr
        );
        assert_eq!(snapshot(&d.state()), before, "{args:?} wrote something");
    }
    let shown = d.ok(&["host", "show"]).stdout;
    assert!(!shown.contains("releases.example"), "{shown}");
}
