//! `target check` names a missing permission in the words of the setting that grants
//! it: a fine-grained token without one of the permissions the daemon needs (against
//! a simulated GitHub that refuses it with 403, as GitHub does) fails the line of the
//! call that needs it, saying which permission to grant, and exits with the
//! credentials class.

use super::support::{Dir, Run};
use runner_manager::cli::exit::Failure;
use runner_manager::sim::{SimConfig, SimGitHub, SimHandle};

const TOKEN: &str = "github_pat_11PERMISSIONS_secret_value";

/// A state directory with target `t` (`--repo acme/app` or `--org acme`) whose token
/// the simulated GitHub knows as a fine-grained PAT holding `permissions`.
fn world(tag: &str, org: bool, permissions: &[(&str, &str)]) -> (Dir, SimHandle) {
    let d = Dir::new(tag);
    let sim = SimGitHub::start(SimConfig::default()).expect("sim starts");
    sim.add_org("acme");
    sim.add_repo("acme/app", true);
    sim.add_fine_grained_pat(TOKEN, permissions);
    let tok = d.file("token", TOKEN);
    let url = sim.url().to_string();
    let (kind, name) = if org {
        ("--org", "acme")
    } else {
        ("--repo", "acme/app")
    };
    d.ok(&[
        "target",
        "add",
        "t",
        kind,
        name,
        "--api-url",
        &url,
        "--token-file",
        &tok,
    ]);
    (d, sim)
}

/// The line of check `name` in `target check`'s output.
fn line<'a>(r: &'a Run, name: &str) -> &'a str {
    r.stdout
        .lines()
        .find(|l| l[4..].trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} line:\n{}", r.stdout))
}

/// Permissions a fine-grained token holds: GitHub's names and levels.
type Held = &'static [(&'static str, &'static str)];

const ALL_REPO: Held = &[
    ("administration", "write"),
    ("actions", "read"),
    ("metadata", "read"),
];

#[test]
fn each_missing_repository_permission_is_named_on_the_line_that_needs_it() {
    // (what is held, the lines that fail, the setting they name)
    let cases: &[(Held, &[&str], &str)] = &[
        (
            &[("actions", "read"), ("metadata", "read")],
            &["list runners", "jit endpoint"],
            "a fine-grained token needs Repository permissions > Administration: Read and write",
        ),
        (
            &[
                ("administration", "read"),
                ("actions", "read"),
                ("metadata", "read"),
            ],
            &["jit endpoint"],
            "a fine-grained token needs Repository permissions > Administration: Read and write",
        ),
        (
            &[("administration", "write"), ("metadata", "read")],
            &["queue"],
            "a fine-grained token needs Repository permissions > Actions: Read-only",
        ),
        (
            &[("administration", "write"), ("actions", "read")],
            &["visibility"],
            "a fine-grained token needs Repository permissions > Metadata: Read-only",
        ),
    ];
    for (held, failing, words) in cases {
        let (d, _sim) = world("perm-repo", false, held);
        let r = d.run(&["target", "check", "t"]);
        for name in *failing {
            let l = line(&r, name);
            assert!(l.starts_with("FAIL"), "{name}: {}", r.stdout);
            assert!(
                l.contains("(403: Resource not accessible by personal access token)"),
                "{l}"
            );
            assert!(l.contains(words), "{name} should name {words:?}: {l}");
        }
        // Only the lines whose call needs the missing permission fail.
        let failed = r.stdout.lines().filter(|l| l.starts_with("FAIL")).count();
        assert_eq!(failed, failing.len(), "{}", r.stdout);
        assert_eq!(r.code, Failure::Credentials.code(), "{}", r.stderr);
        assert!(!r.stdout.contains(TOKEN) && !r.stderr.contains(TOKEN));
    }
    let (d, _sim) = world("perm-repo-all", false, ALL_REPO);
    let r = d.run(&["target", "check", "t"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(line(&r, "queue").contains("acme/app: allowed; 0 runs queued"));
}

#[test]
fn an_organization_target_names_the_organization_permission() {
    let (d, _sim) = world("perm-org", true, ALL_REPO);
    let r = d.run(&["target", "check", "t"]);
    let l = line(&r, "list runners");
    assert!(
        l.contains(
            "a fine-grained token needs Organization permissions > Self-hosted runners: Read and write"
        ),
        "{}",
        r.stdout
    );
    assert_eq!(r.code, Failure::Credentials.code());

    let (d, _sim) = world(
        "perm-org-all",
        true,
        &[
            ("organization_self_hosted_runners", "write"),
            ("actions", "read"),
            ("metadata", "read"),
        ],
    );
    let r = d.run(&["target", "check", "t"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}
