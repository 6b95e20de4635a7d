//! `packaging/install.sh` into a temporary root: every file lands where the unit, the
//! man pages and the .deb metadata say, and the dry run writes nothing.

use crate::support::{BIN, Dir};
use std::path::{Path, PathBuf};
use std::process::Command;

const TOP: &str = env!("CARGO_MANIFEST_DIR");

fn install(dest: &Path, extra: &[&str]) -> std::process::Output {
    Command::new("sh")
        .arg(format!("{TOP}/packaging/install.sh"))
        .args(["--destdir", dest.to_str().unwrap(), "--bin", BIN])
        .args(extra)
        .env_remove("PREFIX")
        .env_remove("DESTDIR")
        .output()
        .unwrap()
}

fn read(p: impl AsRef<Path>) -> String {
    std::fs::read_to_string(p.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", p.as_ref().display()))
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

fn under(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

/// Absolute paths a man page's FILES section names (`.I /usr/...`), unescaped.
fn man_files(page: &str) -> Vec<String> {
    page.split("\n.SH FILES\n")
        .nth(1)
        .unwrap()
        .split("\n.SH ")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix(".I /"))
        .map(|p| format!("/{}", p.replace("\\-", "-")))
        .collect()
}

#[test]
fn install_sh_puts_every_file_where_the_unit_and_man_pages_say() {
    let d = Dir::new("pkg");
    let root = d.path("root");
    let out = install(&root, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let unit = read(under(
        &root,
        "/usr/lib/systemd/system/runner-manager.service",
    ));
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let program = exec.split_whitespace().next().unwrap();
    assert_eq!(program, "/usr/bin/runner-manager");
    let installed = under(&root, program);
    assert_eq!(mode(&installed), 0o755);
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(BIN).unwrap()
    );
    let v = Command::new(&installed).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("runner-manager "));

    // Documentation=man:NAME(SECTION) pages are installed where man(1) looks.
    for doc in unit
        .lines()
        .filter_map(|l| l.strip_prefix("Documentation="))
        .flat_map(|l| l.split_whitespace())
    {
        let page = doc.strip_prefix("man:").expect("man: documentation");
        let (name, section) = page.trim_end_matches(')').split_once('(').unwrap();
        let p = under(
            &root,
            &format!("/usr/share/man/man{section}/{name}.{section}"),
        );
        assert_eq!(mode(&p), 0o644, "{}", p.display());
        assert_eq!(read(&p), read(format!("{TOP}/man/{name}.{section}")));
    }
    // Every system path the daemon's man page names under FILES is installed.
    for f in man_files(&read(format!("{TOP}/man/runner-manager-daemon.8"))) {
        if f.starts_with("/usr/") {
            assert!(
                under(&root, &f).is_file(),
                "{f} named in runner-manager-daemon(8)"
            );
        }
    }
    // The daemon runs as root with exactly the capabilities per-attempt uids take
    // (`runner::caps::NEEDED`), delegated cgroups, no core dumps.
    assert!(!unit.lines().any(|l| l.starts_with("User=")), "{unit}");
    let mut bounding: Vec<&str> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("a CapabilityBoundingSet")
        .split_whitespace()
        .collect();
    bounding.sort_unstable();
    let mut needed: Vec<&str> = runner_manager::runner::caps::NEEDED
        .iter()
        .map(|c| c.name)
        .collect();
    needed.sort_unstable();
    assert_eq!(bounding, needed);
    for line in [
        "Delegate=yes",
        "LimitCORE=0",
        "KillMode=process",
        "UMask=0077",
    ] {
        assert!(unit.lines().any(|l| l == line), "no {line} in the unit");
    }
    // The runner users sysusers creates are the range the package sets: one user per
    // uid, named for it, its home where the daemon points it at each attempt's own.
    let state = unit
        .lines()
        .find_map(|l| l.strip_prefix("Environment=RUNNER_MANAGER_STATE_DIR="))
        .unwrap();
    let sysusers = read(under(&root, "/usr/lib/sysusers.d/runner-manager.conf"));
    let users: Vec<Vec<&str>> = sysusers
        .lines()
        .filter(|l| l.starts_with("u "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(users.len(), 64, "{sysusers}");
    for (i, u) in users.iter().enumerate() {
        let uid = 61000 + i;
        assert_eq!(u[1], format!("rm-runner-{uid}"), "{u:?}");
        assert_eq!(u[2], uid.to_string(), "{u:?}");
        let home = u[u.len() - 2];
        assert_eq!(home, format!("{state}/homes/rm-runner-{uid}"), "{u:?}");
    }
    let postinst = read(format!("{TOP}/packaging/deb/postinst"));
    assert!(postinst.contains("runner_uids=61000-61063"), "{postinst}");
    // The state directory the unit sets is the one tmpfiles creates, traversable (0711)
    // so each runner reaches its own root; the logs stay private.
    let tmpfiles = read(under(&root, "/usr/lib/tmpfiles.d/runner-manager.conf"));
    assert!(
        tmpfiles
            .lines()
            .any(|l| l.split_whitespace().take(3).eq(["d", state, "0711"])),
        "{tmpfiles}"
    );
    let logs = format!("{state}/logs");
    assert!(
        tmpfiles.lines().any(|l| l
            .split_whitespace()
            .take(3)
            .eq(["d", logs.as_str(), "0700"])),
        "{tmpfiles}"
    );
    // Completions, generated by the installed binary.
    let bash = read(under(
        &root,
        "/usr/share/bash-completion/completions/runner-manager",
    ));
    assert!(bash.contains("complete -F _runner_manager runner-manager"));
    assert!(
        read(under(
            &root,
            "/usr/share/zsh/site-functions/_runner-manager"
        ))
        .starts_with("#compdef runner-manager")
    );
    assert!(
        under(
            &root,
            "/usr/share/fish/vendor_completions.d/runner-manager.fish"
        )
        .is_file()
    );
    // Nothing half-written is left.
    let leftovers = Command::new("find")
        .arg(&root)
        .args(["-name", "*.tmp.*"])
        .output()
        .unwrap();
    assert!(leftovers.stdout.is_empty());

    // The .deb puts each asset at the same place.
    let cargo = read(format!("{TOP}/Cargo.toml"));
    let deb = cargo
        .split("[package.metadata.deb]")
        .nth(1)
        .expect("deb metadata");
    let mut assets = 0;
    for l in deb.lines().map(str::trim).filter(|l| l.starts_with("[\"")) {
        let fields: Vec<&str> = l
            .trim_matches(|c| c == '[' || c == ']' || c == ',')
            .split("\", \"")
            .map(|f| f.trim_matches('"'))
            .collect();
        let (src, dest) = (fields[0], fields[1]);
        let name = Path::new(src).file_name().unwrap();
        assert!(
            under(&root, &format!("/{dest}")).join(name).is_file(),
            "deb asset {src} -> {dest}"
        );
        if !src.starts_with("target/") {
            assert!(Path::new(TOP).join(src).is_file(), "deb asset source {src}");
        }
        assets += 1;
    }
    assert_eq!(assets, 7);
    // The RPM's %files are what install.sh staged (macros as Fedora defines them).
    let spec = read(format!("{TOP}/packaging/rpm/runner-manager.spec"));
    let files = spec
        .split("%files\n")
        .nth(1)
        .unwrap()
        .split("\n%changelog")
        .next()
        .unwrap();
    for f in files.lines().filter(|l| l.starts_with("%{")) {
        let p = f
            .replace("%{_bindir}", "/usr/bin")
            .replace("%{_mandir}", "/usr/share/man")
            .replace("%{_unitdir}", "/usr/lib/systemd/system")
            .replace("%{_sysusersdir}", "/usr/lib/sysusers.d")
            .replace("%{_tmpfilesdir}", "/usr/lib/tmpfiles.d")
            .replace("%{_datadir}", "/usr/share")
            .trim_end_matches('*')
            .to_string();
        assert!(under(&root, &p).is_file(), "rpm %files {f}");
    }
}

#[test]
fn another_prefix_moves_exec_start_and_dry_run_writes_nothing() {
    let d = Dir::new("pkg-prefix");
    let root = d.path("root");
    let out = install(&root, &["--prefix", "/usr/local"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unit = read(under(
        &root,
        "/usr/local/lib/systemd/system/runner-manager.service",
    ));
    assert!(
        unit.contains("\nExecStart=/usr/local/bin/runner-manager"),
        "{unit}"
    );
    assert!(
        unit.contains("\nExecStopPost=-+/usr/local/bin/runner-manager daemon --release-cgroups"),
        "{unit}"
    );
    assert!(under(&root, "/usr/local/bin/runner-manager").is_file());

    let dry = d.path("dry");
    let out = install(&dry, &["--dry-run"]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("would install") && said.contains("/usr/bin/runner-manager"),
        "{said}"
    );
    assert!(
        said.contains("dry run: nothing was done") && !said.contains("done: start"),
        "a dry run says it did nothing: {said}"
    );
    assert!(!dry.exists(), "a dry run creates nothing");

    let bad = install(&d.path("x"), &["--prefix", "relative"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `install.sh --runner-users START-END --users-only` makes one user per uid, named for
/// it, with its own group and the daemon-managed home; a second run changes nothing,
/// and a range whose uid another user holds is refused.
#[test]
fn install_sh_makes_the_runner_users_of_a_range() {
    if unsafe { libc::geteuid() } != 0 || Command::new("useradd").arg("--help").output().is_err() {
        // The real stderr: libtest would swallow eprintln! of a passing test.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED install_sh_makes_the_runner_users_of_a_range: needs root and useradd\n",
        );
        return;
    }
    let users = |extra: &[&str]| {
        Command::new("sh")
            .arg(format!("{TOP}/packaging/install.sh"))
            .args(["--runner-users", "60600-60602", "--users-only"])
            .args(extra)
            .output()
            .unwrap()
    };
    let dry = users(&["--dry-run"]);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(!said.contains(" ready;"), "a dry run made no users: {said}");
    for _ in 0..2 {
        let out = users(&[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for uid in 60600..=60602u32 {
        let u = runner_manager::runner::lookup_uid(uid).unwrap().unwrap();
        assert_eq!(u.name, format!("rm-runner-{uid}"));
        assert_eq!(u.gid, uid);
        assert_eq!(
            u.home,
            std::path::Path::new(&format!("/var/lib/runner-manager/homes/rm-runner-{uid}"))
        );
    }
    let bad = Command::new("sh")
        .arg(format!("{TOP}/packaging/install.sh"))
        .args(["--runner-users", "0-5", "--users-only"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    for uid in 60600..=60602u32 {
        let _ = Command::new("userdel")
            .arg(format!("rm-runner-{uid}"))
            .output();
        let _ = Command::new("groupdel")
            .arg(format!("rm-runner-{uid}"))
            .output();
    }
}

/// The unit as systemd reads it: `systemd-analyze verify` where this host has it, with
/// ExecStart and ExecStopPost pointed at the binary under test. No complaint is
/// allowed: systemd before 254 warned of `DelegateSubgroup=`, which the unit no longer
/// has (issue 31).
#[test]
fn systemd_analyze_verifies_the_unit() {
    let Ok(out) = Command::new("systemd-analyze").arg("--version").output() else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED systemd_analyze_verifies_the_unit: no systemd-analyze here\n",
        );
        return;
    };
    assert!(out.status.success());
    let d = Dir::new("pkg-verify");
    let unit = read(format!("{TOP}/packaging/systemd/runner-manager.service"))
        .replace("/usr/bin/runner-manager", BIN);
    let path = d.path("runner-manager.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    let complaints: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.contains("/bin/kill is not executable"))
        .collect();
    assert!(out.status.success() && complaints.is_empty(), "{said}");
}

/// A range other than the packaged one gets a sysusers file naming that range's users
/// (a boot must not make 61000-61063 instead), and the binary is found under
/// `CARGO_TARGET_DIR` when no `--bin` is given.
#[test]
fn install_sh_follows_the_runner_range_and_cargos_target_directory() {
    let d = Dir::new("pkg-range");
    let root = d.path("root");
    let targets = d.path("cargo-target");
    let built = targets.join("release/runner-manager");
    std::fs::create_dir_all(built.parent().unwrap()).unwrap();
    std::fs::copy(BIN, &built).unwrap();
    let out = Command::new("sh")
        .arg(format!("{TOP}/packaging/install.sh"))
        .args(["--destdir", root.to_str().unwrap()])
        .args(["--runner-users", "62000-62003"])
        .env_remove("PREFIX")
        .env_remove("DESTDIR")
        .env("CARGO_TARGET_DIR", &targets)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = under(&root, "/usr/bin/runner-manager");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(&built).unwrap(),
        "the binary under CARGO_TARGET_DIR is the one installed"
    );
    let sysusers = read(under(&root, "/usr/lib/sysusers.d/runner-manager.conf"));
    let users: Vec<&str> = sysusers.lines().filter(|l| l.starts_with("u ")).collect();
    assert_eq!(users.len(), 4, "{sysusers}");
    for (i, uid) in (62000..=62003).enumerate() {
        assert!(
            users[i].starts_with(&format!("u rm-runner-{uid} {uid} ")),
            "{sysusers}"
        );
    }
    assert!(
        !sysusers
            .lines()
            .any(|l| !l.starts_with('#') && l.contains("61000")),
        "{sysusers}"
    );
}

/// Issue 50: on a host whose init is not systemd, install.sh's closing line sends the
/// operator to docs/supervisors.md's recipes and never to `systemctl`; on a host with
/// systemd it still names `systemctl enable --now`. (A dry run into a prefix of its own:
/// nothing is written, and nothing on this host is read but `id` and `getent`.)
#[test]
fn install_sh_names_systemctl_only_where_systemd_runs() {
    let d = Dir::new("pkg-nosd");
    let prefix = d.path("prefix");
    let booted = d.path("run-systemd-system");
    std::fs::create_dir_all(&booted).unwrap();
    let run = |sd: &Path| {
        let out = Command::new("sh")
            .arg(format!("{TOP}/packaging/install.sh"))
            .args(["--dry-run", "--bin", BIN, "--prefix"])
            .arg(&prefix)
            .env_remove("PREFIX")
            .env_remove("DESTDIR")
            .env(runner_manager::supervisor::SYSTEMD_RUN_DIR_ENV, sd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let without = run(&d.path("no-run-systemd-system"));
    assert!(!without.contains("systemctl"), "{without}");
    let last = without.lines().last().unwrap_or("");
    assert!(
        last.contains("docs/supervisors.md") && last.contains("runner-manager daemon"),
        "{without}"
    );
    let with = run(&booted);
    assert!(
        with.lines()
            .last()
            .is_some_and(|l| l.contains("systemctl enable --now runner-manager")),
        "{with}"
    );
    assert!(!prefix.exists(), "a dry run creates nothing");
}

/// The supervisor recipes of docs/supervisors.md keep what makes them safe (issue 50):
/// each stops only the daemon's pid (never its group or cgroup, which would kill the
/// runners), each restarts after exit 75 and a crash, and none loops on an exit a
/// restart does not mend. The finish scripts run for real; runit's whole recipe runs
/// under runsv in tests/daemon/supervisor.rs.
#[test]
fn the_supervisor_recipes_restart_on_75_and_never_stop_the_runners() {
    let d = Dir::new("pkg-supervisors");
    // runit: finish takes the service down after 2, 7, 8 and 11 only.
    let sv = d.path("runit");
    std::fs::create_dir_all(sv.join("supervise")).unwrap();
    for (code, down) in [
        ("75", false),
        ("-1", false),
        ("0", false),
        ("7", true),
        ("2", true),
    ] {
        let control = sv.join("supervise/control");
        std::fs::write(&control, "").unwrap();
        let out = Command::new("sh")
            .arg(format!("{TOP}/packaging/runit/finish"))
            .args([code, "0"])
            .current_dir(&sv)
            .output()
            .unwrap();
        assert!(out.status.success(), "runit finish {code}: {out:?}");
        assert_eq!(read(&control) == "d", down, "runit finish {code}");
    }
    // s6: finish exits 125 (do not restart) after 2, 7, 8 and 11 only.
    for (code, want) in [("75", 0), ("256", 0), ("0", 0), ("8", 125), ("11", 125)] {
        let out = Command::new("sh")
            .arg(format!("{TOP}/packaging/s6/finish"))
            .args([code, "9"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(want), "s6 finish {code}: {out:?}");
    }
    // Each run script execs the daemon, so the supervisor's signal reaches it alone.
    for run in ["runit/run", "s6/run"] {
        let text = read(format!("{TOP}/packaging/{run}"));
        assert!(
            text.lines().last().is_some_and(
                |l| l.starts_with("exec /usr/bin/runner-manager ") && l.ends_with(" daemon")
            ),
            "{run}: {text}"
        );
    }
    let settings = |path: &str| -> Vec<String> {
        read(format!("{TOP}/packaging/{path}"))
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
            .map(str::to_string)
            .collect()
    };
    let openrc = settings("openrc/runner-manager");
    for want in [
        "supervisor=supervise-daemon",
        "rc_cgroup_cleanup=\"NO\"",
        "retry=\"TERM/90/KILL/5\"",
    ] {
        assert!(openrc.iter().any(|l| l == want), "openrc: no {want}");
    }
    let conf = settings("supervisord/runner-manager.conf");
    for want in [
        "autorestart=unexpected",
        "exitcodes=2,7,8,11",
        "stopsignal=TERM",
        "stopasgroup=false",
        "killasgroup=false",
    ] {
        assert!(conf.iter().any(|l| l == want), "supervisord: no {want}");
    }
    assert!(
        !conf
            .iter()
            .any(|l| l.starts_with("exitcodes=") && l.contains("75")),
        "exit 75 must restart under supervisord"
    );
}
