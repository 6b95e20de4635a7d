use super::*;
use crate::domain::Host;

fn current() -> Current {
    Current {
        host: HostSettings {
            host: Host::new("0123abcd89ef4567".into(), "h".into(), "linux", "x64", 4),
            beside: BTreeMap::new(),
        },
        targets: Vec::new(),
        profiles: Vec::new(),
    }
}

/// Applies `plan` to `now` as the store would: what the next plan starts from.
fn applied(mut now: Current, plan: &Plan) -> Current {
    if let Some((_, after)) = &plan.host {
        now.host = after.clone();
    }
    for s in &plan.targets {
        match s {
            Step::Add(t) => now.targets.push(t.clone()),
            Step::Change { after, .. } => {
                *now.targets
                    .iter_mut()
                    .find(|t| t.name == after.name)
                    .unwrap() = after.clone()
            }
            Step::Remove(t) => now.targets.retain(|o| o.name != t.name),
        }
    }
    for s in &plan.profiles {
        match s {
            Step::Add(p) => now.profiles.push(p.clone()),
            Step::Change { after, .. } => {
                *now.profiles
                    .iter_mut()
                    .find(|p| p.name == after.name)
                    .unwrap() = after.clone()
            }
            Step::Remove(p) => now.profiles.retain(|o| o.name != p.name),
        }
    }
    now.targets.sort_by(|a, b| a.name.cmp(&b.name));
    now.profiles.sort_by(|a, b| a.name.cmp(&b.name));
    now
}

const FILE: &str = r#"
[host]
capacity = 3
retention = "2d"
release_source = "https://releases.example/rm"
env.HTTP_PROXY = "http://proxy:3128"

[targets.acme]
repo = "acme/app"
token_file = "/etc/rm/acme.token"
poll_interval = "10s"

[targets.org]
org = "acme"
app_id = 42
app_key = "/etc/rm/app.pem"
installation_id = 7
repos = ["app", "lib"]

[profiles.linux]
target = "acme"
labels = ["linux", "big"]
max = 4
idle_timeout = "10m"
memory_max = "2G"
cpu_max = 1.5
env.CACHE = "/srv/cache"

[profiles.small]
target = "org"
labels = "small"
active = false
"#;

#[test]
fn a_file_applied_then_rendered_reads_back_the_same_and_plans_nothing() {
    let d = parse(FILE).unwrap();
    let p = plan(&d, &current(), false).unwrap();
    assert!(p.host.is_some());
    assert_eq!(p.targets.len(), 2);
    assert_eq!(p.profiles.len(), 2);
    let now = applied(current(), &p);
    let linux = now.profiles.iter().find(|p| p.name == "linux").unwrap();
    assert_eq!(linux.max_capacity, 4);
    assert_eq!(linux.memory_max, Some(2 << 30));
    assert_eq!(linux.cpu_max, Some(1500));
    assert_eq!(
        linux.env.get("CACHE").map(String::as_str),
        Some("/srv/cache")
    );
    let org = now.targets.iter().find(|t| t.name == "org").unwrap();
    assert_eq!(org.repos, ["app", "lib"]);
    assert!(matches!(
        org.credential,
        CredentialRef::App {
            app_id: 42,
            installation_id: Some(7),
            ..
        }
    ));
    // The same file again: nothing to write.
    assert!(plan(&d, &now, false).unwrap().is_empty());
    // Exported and applied to the same store: nothing to write; to a fresh store:
    // the same entities.
    let text = render(&now);
    let back = parse(&text).unwrap();
    assert!(plan(&back, &now, false).unwrap().is_empty(), "{text}");
    let fresh = applied(current(), &plan(&back, &current(), false).unwrap());
    assert_eq!(fresh.host, now.host);
    assert_eq!(fresh.targets, now.targets);
    assert_eq!(fresh.profiles, now.profiles);
}

#[test]
fn every_profile_and_host_key_is_rendered_as_set_takes_it() {
    // Every settable key, each away from its default, survives a render.
    let mut now = current();
    for (k, v) in [
        ("capacity", "9"),
        ("coordinator", "wss://pool.example:443"),
        ("coordinator_token_file", "/etc/rm/t"),
        ("coordinator_ca_file", "/etc/rm/ca.pem"),
        ("coordinator_insecure", "true"),
        ("isolation", "uids"),
        ("runner_uids", "61000-61099"),
        ("retention", "36h"),
        ("logs_max", "48M"),
        ("disk_reserve", "1000"),
        ("env.FOO", "bar baz"),
        ("runner_version", "2.330.0"),
        ("runtime_root", "/srv/rm"),
        ("cache_cap", "3G"),
        ("release_source", "https://r.example"),
        ("webhook_listen", "127.0.0.1:8090"),
        ("webhook_secret_file", "/etc/rm/hook"),
        ("usage_retention", "30d"),
        ("cost_per_cpu_hour", "0.04"),
        ("cost_per_gib_hour", "0.005"),
        ("usage_metrics_top", "5"),
    ] {
        now.host.apply_setting(k, v).unwrap();
    }
    let rendered: Vec<String> = host_values(&now.host)
        .into_iter()
        .map(|(k, _)| k.replace("FOO", "NAME"))
        .collect();
    let mut want: Vec<String> = crate::domain::host::SETTABLE_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    let mut got = rendered.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "every host key is rendered");

    let mut p = ScalePolicy::new("linux", "acme", &now.host.host.id);
    for (k, v) in [
        ("labels", "a,b"),
        ("default_labels", "false"),
        ("min", "1"),
        ("max", "5"),
        ("runner_dir", "/opt/runner"),
        ("runner_group", "builders"),
        ("idle_timeout", "90s"),
        ("bootstrap_timeout", "7m"),
        ("job_timeout", "2h"),
        ("mode", "monitor"),
        ("active", "false"),
        ("allow_public", "true"),
        ("run_as", "builder"),
        ("demand", "scaleset"),
        ("memory_max", "1536M"),
        ("cpu_max", "0.25"),
        ("pids_max", "512"),
        ("limits", "best-effort"),
        ("env.CACHE", "/srv/c"),
        ("tools", "git,docker"),
        ("execution", "oci"),
        (
            "image",
            "ghcr.io/acme/runner@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        ("disk_max", "10G"),
        ("caches", "off"),
        ("workspace", "disposable"),
        ("rerun_lost", "3"),
    ] {
        p.apply_setting(k, v, "linux", "x64")
            .unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    let mut keys: Vec<String> = profile_values(&p, "linux", "x64")
        .into_iter()
        .map(|(k, _)| k.replace("CACHE", "NAME"))
        .collect();
    keys.sort();
    let mut want: Vec<String> = crate::domain::profile::SETTABLE_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    want.sort();
    assert_eq!(keys, want, "every profile key is rendered");

    let mut t = new_target(
        "acme",
        TargetScope::Repo {
            owner: "acme".into(),
            repo: "app".into(),
        },
    );
    t.apply_setting("token_env", "ACME_TOKEN").unwrap();
    t.apply_setting("secondary_limit", "off").unwrap();
    now.targets.push(t);
    now.profiles.push(p);
    let text = render(&now);
    let fresh = applied(
        current(),
        &plan(&parse(&text).unwrap(), &current(), false).unwrap(),
    );
    assert_eq!(fresh.host, now.host, "{text}");
    assert_eq!(fresh.targets, now.targets, "{text}");
    assert_eq!(fresh.profiles, now.profiles, "{text}");
}

#[test]
fn a_hand_edit_is_a_difference_old_to_new() {
    let d = parse(FILE).unwrap();
    let mut now = applied(current(), &plan(&d, &current(), false).unwrap());
    let linux = now.profiles.iter_mut().find(|p| p.name == "linux").unwrap();
    linux.apply_setting("max", "7", "linux", "x64").unwrap();
    let p = plan(&d, &now, false).unwrap();
    let lines = p.lines("linux", "x64");
    assert_eq!(lines, ["~ profile linux: max 7 → 4"]);
}

#[test]
fn what_the_file_leaves_out_is_kept_or_pruned() {
    let d = parse(FILE).unwrap();
    let now = applied(current(), &plan(&d, &current(), false).unwrap());
    let less = parse(&FILE.replace("[profiles.small]\ntarget = \"org\"", "[profiles.small]\ntarget = \"acme\"").replace(
        "[targets.org]\norg = \"acme\"\napp_id = 42\napp_key = \"/etc/rm/app.pem\"\ninstallation_id = 7\nrepos = [\"app\", \"lib\"]\n",
        "",
    ))
    .unwrap();
    let kept = plan(&less, &now, false).unwrap();
    assert_eq!(kept.kept, [("target", "org".to_string())]);
    let pruned = plan(&less, &now, true).unwrap();
    assert!(pruned.kept.is_empty());
    assert!(matches!(&pruned.targets[..], [Step::Remove(t)] if t.name == "org"));
}

#[test]
fn refusals_name_the_place_and_the_near_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("[profile.x]\n", "profile", "did you mean 'profiles'?"),
        (
            "[targets.a]\nrepo = \"a/b\"\ntoken_env = \"T\"\n[profiles.x]\ntarget = \"a\"\nlabels = \"l\"\nmaxx = 3\n",
            "profiles.x.maxx",
            "did you mean 'max'?",
        ),
        (
            "[host]\ncapacty = 3\n",
            "host.capacty",
            "did you mean 'capacity'?",
        ),
        (
            "[targets.a]\nrpo = \"a/b\"\n",
            "targets.a.rpo",
            "did you mean 'repo'?",
        ),
        (
            "[targets.a]\nrepo = \"a/b\"\n",
            "targets.a.token_file",
            "credential",
        ),
        (
            "[targets.a]\nrepo = \"a/b\"\ntoken_env = \"T\"\n[profiles.x]\ntarget = \"b\"\nlabels = \"l\"\n",
            "profiles.x.target",
            "did you mean 'a'?",
        ),
        ("[host]\ncapacity = 0\n", "host.capacity", ""),
        ("[host\n", "FILE", "TOML at line 1"),
        // The line is not repeated: it may hold what was pasted by mistake.
        ("[host]\ntoken = ghp_pasted\n", "FILE", "at line 2"),
    ];
    let huge = format!("[host]\n#{}\n", "x".repeat(MAX_FILE_BYTES));
    let cases = [cases, &[(huge.as_str(), "FILE", "larger than")]].concat();
    for (text, arg, reason) in &cases {
        let e = parse(text)
            .and_then(|d| plan(&d, &current(), false))
            .unwrap_err();
        assert_eq!(e.arg, *arg, "{text}: {e}");
        assert!(e.reason.contains(reason), "{text}: {e}");
        assert!(!e.reason.contains("ghp_pasted"), "{text}: {e}");
    }
}
