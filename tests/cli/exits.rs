//! Exit codes that name the fix: each failure class, met through a simulated fault,
//! exits with its code from `exit::TABLE` and ends stderr with its `fix:` line; and the
//! man page's EXIT STATUS and the table in docs/troubleshooting.md say what the table
//! says, the page with a section on each code.

use super::support::{Dir, Run};
use runner_manager::cli::exit::{Failure, Subject, TABLE, fix_line};
use runner_manager::sim::{FaultAction, FaultRule, SimConfig, SimGitHub, SimHandle, Trigger};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[path = "../common/poll.rs"]
mod poll;

const TOKEN: &str = "ghp_exitcodes_secret_value";

/// A state directory with target `t` (repository `repo`, token in a file) at a
/// simulated GitHub that knows the token when `known`.
struct World {
    d: Dir,
    sim: SimHandle,
}

impl World {
    fn new(tag: &str, repo: &str, known: bool) -> World {
        let d = Dir::new(tag);
        let sim = SimGitHub::start(SimConfig::default()).expect("sim starts");
        sim.add_repo("acme/app", true);
        if known {
            sim.add_pat(TOKEN);
        }
        let tok = d.file("token", TOKEN);
        let url = sim.url().to_string();
        d.ok(&[
            "target",
            "add",
            "t",
            "--repo",
            repo,
            "--api-url",
            &url,
            "--token-file",
            &tok,
        ]);
        World { d, sim }
    }

    fn subject(&self, command: &str, target: Option<&str>) -> Subject {
        Subject {
            target: target.map(str::to_string),
            command: Some(command.into()),
            dir: Some(self.d.state().display().to_string()),
            until: None,
            fix: None,
        }
    }
}

/// The code is the class's, and the last stderr line is its remedy with what is known
/// filled in (up to the reset time, which only the failure knows); no secret shows.
fn assert_class(what: &str, r: &Run, failure: Failure, subject: &Subject) {
    assert_eq!(
        r.code,
        failure.code(),
        "{what}: exit code\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    let last = r.stderr.lines().last().unwrap_or_default();
    let until = Subject {
        until: Some("\u{0}".into()),
        ..subject.clone()
    };
    let want = fix_line(failure, &until);
    let prefix = want.split('\u{0}').next().unwrap();
    assert!(
        last.starts_with(prefix) && (want.len() != prefix.len() || last == want),
        "{what}: last line {last:?}, want {want:?}\n{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains(TOKEN) && !r.stdout.contains(TOKEN),
        "{what}: the token leaked"
    );
}

fn runner_fault(path: &str, action: FaultAction) -> FaultRule {
    FaultRule {
        method: Some("GET".into()),
        path: path.into(),
        trigger: Trigger::Times(100),
        action,
    }
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn each_github_fault_at_target_check_exits_with_its_class_and_names_the_fix() {
    let runners = "/repos/*/*/actions/runners";
    // (what, repository, token known, fault, class)
    let cases: Vec<(&str, &str, bool, Option<FaultRule>, Failure)> = vec![
        ("401", "acme/app", false, None, Failure::Credentials),
        ("404", "acme/missing", true, None, Failure::TargetNotFound),
        (
            "rate limit spent",
            "acme/app",
            true,
            Some(runner_fault(
                runners,
                FaultAction::RateLimitExhausted { reset_in_secs: 600 },
            )),
            Failure::RateLimited,
        ),
        (
            "429 retry-after",
            "acme/app",
            true,
            Some(runner_fault(
                runners,
                FaultAction::TooManyRequests {
                    retry_after: Some(120),
                },
            )),
            Failure::RateLimited,
        ),
        (
            "503",
            "acme/app",
            true,
            Some(runner_fault(
                "/rate_limit",
                FaultAction::Status { status: 503 },
            )),
            Failure::GitHubUnreachable,
        ),
    ];
    for (what, repo, known, fault, failure) in cases {
        let w = World::new("exit-gh", repo, known);
        if let Some(f) = fault {
            w.sim.add_fault(f);
        }
        let r = w.d.run(&["target", "check", "t"]);
        assert_class(what, &r, failure, &w.subject("target check", Some("t")));
    }

    // Nothing listens at api_url: a transport error.
    let w = World::new("exit-transport", "acme/app", true);
    let url = format!("http://127.0.0.1:{}", closed_port());
    w.d.ok(&["target", "set", "t", &format!("api_url={url}")]);
    let r = w.d.run(&["target", "check", "t"]);
    let s = w.subject("target check", Some("t"));
    assert_class("transport", &r, Failure::GitHubUnreachable, &s);

    // A wrong API path (`/api/v3` on a host that is not GHES): /rate_limit answers 404,
    // which is the URL's fault, not the token's; the fix names api_url.
    let w = World::new("exit-apipath", "acme/app", true);
    let url = format!("{}/api/v3", w.sim.url());
    w.d.ok(&["target", "set", "t", &format!("api_url={url}")]);
    let r = w.d.run(&["target", "check", "t"]);
    let s = w.subject("target check", Some("t"));
    assert_class("wrong api path", &r, Failure::GitHubUnreachable, &s);
    assert!(
        r.stdout.contains("not a GitHub API base URL") && r.stderr.contains("api_url="),
        "{}{}",
        r.stdout,
        r.stderr
    );

    // A token file gone since `target add`: the credential cannot be read.
    let w = World::new("exit-tokenfile", "acme/app", true);
    std::fs::remove_file(w.d.path("token")).unwrap();
    let r = w.d.run(&["target", "check", "t"]);
    let s = w.subject("target check", Some("t"));
    assert_class("token file gone", &r, Failure::Credentials, &s);
}

/// Kills the daemon it holds when dropped, so a failed assertion leaves none running.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_second_daemon_exits_store_locked() {
    let d = Dir::new("exit-lock");
    d.ok(&["host", "set", "capacity=1"]);
    let first = Daemon(
        Command::new(super::support::BIN)
            .arg("--state-dir")
            .arg(d.state())
            .args(["daemon", "--fitness-every", "3600"])
            .env_remove("RUNNER_MANAGER_STATE_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the first daemon"),
    );
    let pid = first.0.id().to_string();
    let lock = d.state().join("daemon.lock");
    poll::wait_for(
        "the first daemon to hold its lock",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(&lock)
                .is_ok_and(|t| t.contains(&format!("pid {pid}")))
                .then_some(())
        },
    );
    let r = d.run(&["daemon"]);
    let subject = Subject {
        command: Some("daemon".into()),
        dir: Some(d.state().display().to_string()),
        ..Subject::default()
    };
    assert_class("second daemon", &r, Failure::StoreLocked, &subject);
    assert!(
        r.stderr.contains(&format!("pid {pid}")),
        "names the holder: {}",
        r.stderr
    );
    drop(first);
}

fn subject_at(d: &Dir, command: &str) -> Subject {
    Subject {
        command: Some(command.into()),
        dir: Some(d.state().display().to_string()),
        ..Subject::default()
    }
}

#[test]
fn store_faults_exit_with_their_class() {
    // Not a store: left untouched, and the fix is doctor on that directory.
    let d = Dir::new("exit-notours");
    std::fs::create_dir_all(d.state()).unwrap();
    std::fs::write(d.state().join("state.db"), "my shopping list\n").unwrap();
    let r = d.run(&["status"]);
    assert_class(
        "not a store",
        &r,
        Failure::StoreUnreadable,
        &subject_at(&d, "status"),
    );

    // A state directory this user may not enter: as root, run as nobody; otherwise
    // take our own permission away.
    let d = Dir::new("exit-perm");
    d.ok(&["host", "set", "capacity=1"]);
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(super::support::BIN);
        c
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.state(), std::fs::Permissions::from_mode(0o000)).unwrap();
        Command::new(super::support::BIN)
    };
    let out = cmd
        .arg("--state-dir")
        .arg(d.state())
        .arg("status")
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .output()
        .expect("run runner-manager");
    if !root {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.state(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let r = Run::from(out);
    assert_class(
        "permission",
        &r,
        Failure::PermissionDenied,
        &subject_at(&d, "status"),
    );
}

#[test]
fn doctor_exits_host_unfit_on_a_required_check_else_the_github_or_coordinator_class() {
    // A profile whose jobs need a tool no PATH has: a required check fails.
    let w = World::new("exit-unfit", "acme/app", true);
    w.d.ok(&["profile", "add", "linux", "--target", "t", "--labels", "x"]);
    w.d.ok(&["profile", "set", "linux", "tools=rm-exit-test-no-such-tool"]);
    let r = w.d.run(&["doctor"]);
    assert_class("unfit", &r, Failure::HostUnfit, &w.subject("doctor", None));
    assert!(
        r.stdout.lines().any(|l| l.starts_with("FAIL tools:")),
        "{}",
        r.stdout
    );

    // No required failure, and GitHub refuses the target's token: its class and fix.
    let w = World::new("exit-doctor-cred", "acme/app", false);
    let r = w.d.run(&["doctor"]);
    assert_class(
        "doctor 401",
        &r,
        Failure::Credentials,
        &w.subject("doctor", Some("t")),
    );

    // Only the coordinator fails: nothing listens at its URL.
    let d = Dir::new("exit-coord");
    let tok = d.file("coord-token", "coordinator-secret");
    let url = format!("ws://127.0.0.1:{}/", closed_port());
    d.ok(&[
        "host",
        "set",
        &format!("coordinator={url}"),
        &format!("coordinator_token_file={tok}"),
    ]);
    let r = d.run(&["doctor"]);
    assert_class(
        "coordinator",
        &r,
        Failure::CoordinatorUnreachable,
        &subject_at(&d, "doctor"),
    );
    assert!(!r.stderr.contains("coordinator-secret"));
}

#[test]
fn input_errors_stay_2_and_refusals_are_conflicts_each_with_its_fix() {
    let w = World::new("exit-input", "acme/app", true);
    let r = w.d.run(&["target", "check", "nope"]);
    assert_class(
        "unknown name",
        &r,
        Failure::Usage,
        &w.subject("target check", None),
    );
    let r = w.d.run(&["tagret", "list"]);
    assert_class("unknown command", &r, Failure::Usage, &Subject::default());
    assert_eq!(r.stderr.lines().last(), Some("fix: runner-manager --help"));
    w.d.ok(&["profile", "add", "linux", "--target", "t", "--labels", "x"]);
    w.d.ok(&["profile", "set", "linux", "max=3"]);
    let r =
        w.d.run(&["profile", "set", "linux", "max=4", "--revision", "1"]);
    assert_class(
        "stale revision",
        &r,
        Failure::Conflict,
        &w.subject("profile set", None),
    );
    let r = w.d.run(&["target", "rm", "t"]);
    // Issue 50: not "target rm again, after what the message names", but the commands.
    let at = runner_manager::tui::app::shell_quote(&w.d.state().to_string_lossy());
    assert_class(
        "in use",
        &r,
        Failure::Conflict,
        &Subject {
            fix: Some(format!(
                "runner-manager --state-dir {at} profile rm linux && runner-manager --state-dir \
                 {at} target rm t (or move each profile to another target first: profile set \
                 NAME target=OTHER)"
            )),
            ..w.subject("target rm", None)
        },
    );
    // A state directory with no store, for a command that does not make one.
    let d = Dir::new("exit-nostore");
    let r = d.run(&["status"]);
    assert_class("no store", &r, Failure::NoStore, &subject_at(&d, "status"));
    assert!(!d.state().exists(), "made nothing");
}

/// The rows of a document's exit-code list, as (code, name, meaning, remedy).
type Rows = Vec<(i32, String, String, String)>;

fn table_rows() -> Rows {
    TABLE
        .iter()
        .map(|r| {
            (
                r.code,
                r.name.to_string(),
                r.meaning.to_string(),
                r.failure.documented(),
            )
        })
        .collect()
}

fn man_rows(page: &str) -> Rows {
    let section = page
        .split("\n.SH EXIT STATUS\n")
        .nth(1)
        .expect("an EXIT STATUS section")
        .split("\n.SH ")
        .next()
        .unwrap()
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "");
    section
        .split(".TP\n")
        .skip(1)
        .filter_map(|item| {
            let lines: Vec<&str> = item.lines().collect();
            let code: i32 = lines[0].strip_prefix(".B ")?.parse().ok()?;
            if code == 0 {
                return None;
            }
            let (name, meaning) = lines[1].split_once(": ")?;
            let remedy = lines.iter().find_map(|l| l.strip_prefix("fix: "))?;
            Some((
                code,
                name.to_string(),
                meaning.trim_end_matches('.').to_string(),
                remedy.to_string(),
            ))
        })
        .collect()
}

fn doc_rows(doc: &str) -> Rows {
    doc.split("<!-- exit-codes:")
        .nth(1)
        .expect("docs/troubleshooting.md's exit-code table")
        .split("<!-- /exit-codes -->")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(" | ").map(|c| c.trim_matches('|').trim()).collect();
            let code: i32 = cells.first()?.parse().ok()?;
            if code == 0 {
                return None;
            }
            Some((
                code,
                cells[1].trim_matches('`').to_string(),
                cells[2].to_string(),
                cells[3]
                    .trim_matches('`')
                    .strip_prefix("fix: ")?
                    .to_string(),
            ))
        })
        .collect()
}

#[test]
fn the_man_page_and_troubleshooting_list_the_exit_codes_the_table_gives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("man/runner-manager.1")).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/troubleshooting.md")).unwrap();
    let want = table_rows();
    assert_eq!(man_rows(&page), want, "man/runner-manager.1 EXIT STATUS");
    assert_eq!(doc_rows(&doc), want, "docs/troubleshooting.md exit codes");
    assert!(page.contains("\n.TP\n.B 0\nSuccess.\n"), "0 is documented");
    // Each code has its own section saying what to do, under the class's name.
    for (code, name, _, _) in &want {
        let heading = format!("\n### {code} `{name}`\n");
        assert!(
            doc.contains(&heading),
            "docs/troubleshooting.md has no section {heading:?}"
        );
    }
    // The README names every class by its code and points there for the rest, rather
    // than keeping a copy of the table that could drift.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for (code, name, _, _) in &want {
        let named = format!("{code} `{name}`");
        assert!(readme.contains(&named), "README.md does not name {named}");
    }
    assert!(
        readme.contains("(docs/troubleshooting.md)"),
        "README links the exit codes"
    );
    assert!(
        !readme.contains("<!-- exit-codes"),
        "one exit-code table, in docs/"
    );
}

/// A token file owned by another user (a runner's uid could replace it) is refused as
/// a 0644 one is: `target set` exits 2 and changes nothing, `doctor` fails the target
/// with the chown. Needs root to give the file away.
#[test]
fn a_token_file_owned_by_another_user_is_refused_with_the_chown() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: giving a file to another uid needs root");
        return;
    }
    let w = World::new("exit-owner", "acme/app", true);
    let theirs = w.d.file("their-token", TOKEN);
    let c = std::ffi::CString::new(theirs.as_str()).unwrap();
    // SAFETY: a valid NUL-terminated path; u32::MAX keeps the group.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, u32::MAX) }, 0);
    let before = w.d.ok(&["--json", "target", "show", "t"]).stdout;
    let r =
        w.d.run(&["target", "set", "t", &format!("token_file={theirs}")]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("token_file") && r.stderr.contains("owned by uid 65534"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!("chown 0 {theirs}")),
        "{}",
        r.stderr
    );
    assert_eq!(w.d.ok(&["--json", "target", "show", "t"]).stdout, before);
    // The target's own file given away under it: doctor fails it, naming the fix.
    let own = w.d.path("token");
    let c = std::ffi::CString::new(own.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, u32::MAX) }, 0);
    let r = w.d.run(&["doctor"]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL target t"))
        .unwrap_or_else(|| panic!("no failed target line: {}", r.stdout));
    assert!(
        line.contains("chown 0 ") && line.contains("owned by uid 65534"),
        "{line}"
    );
    assert!(!r.stdout.contains(TOKEN) && !r.stderr.contains(TOKEN));
}
