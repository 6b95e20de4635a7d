//! `top` in a real terminal: the binary inside tmux on a state directory prepared with
//! the CLI (and attempts written through the store API), driven with `send-keys` and
//! read with `capture-pane`. Checks that rows appear, keys work, and that `q` and
//! SIGTERM both give the shell back a working terminal (alternate screen left, cooked
//! mode restored: a typed command runs).

use runner_manager::domain::AttemptState;
use runner_manager::store::{Heartbeat, NewAttempt, SqliteStore, Store};
use runner_manager::timefmt::{Millis, now_millis};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");
#[path = "common/tmux.rs"]
mod tmux;
use tmux::{PROMPT, Tmux};

fn cli(state: &Path, args: &[&str]) {
    let out = Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
}

/// A fresh directory `rm-tui-<tag>-<pid>` whose state directory has target `octo`
/// (repository `octo/app`, token in a file), added through the CLI.
fn with_target(tag: &str) -> (PathBuf, PathBuf) {
    let root = std::env::temp_dir().join(format!("rm-tui-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let state: PathBuf = root.join("state");
    let token = root.join("token");
    std::fs::write(&token, "secret-token-value").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    cli(
        &state,
        &[
            "target",
            "add",
            "octo",
            "--repo",
            "octo/app",
            "--token-file",
            token.to_str().unwrap(),
        ],
    );
    (root, state)
}

/// Writes an attempt of profile `linux` for `job`, created at `created_at` and moved
/// to `to` at `moved_at`, straight through the store API.
fn seed_attempt(
    store: &SqliteStore,
    host_id: &str,
    job: String,
    to: AttemptState,
    created_at: Millis,
    moved_at: Millis,
) {
    let mut a = store
        .create_attempt(
            &NewAttempt {
                profile: "linux".into(),
                target: "octo".into(),
                host_id: host_id.into(),
                job_name: Some(job),
                ..NewAttempt::default()
            },
            created_at,
        )
        .unwrap();
    a.recover(to, moved_at).unwrap();
    store.save_attempt(&a).unwrap();
}

/// The pid of `top`: the shell's child.
fn child_of(parent: &str) -> Option<String> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let after = stat.rsplit_once(") ")?.1;
        let ppid = after.split_whitespace().nth(1)?;
        (ppid == parent).then(|| e.file_name().to_string_lossy().into_owned())
    })
}

#[test]
fn top_in_a_real_terminal() {
    let (root, state) = with_target("tmux");
    cli(
        &state,
        &[
            "profile", "add", "linux", "--target", "octo", "--labels", "gpu", "--max", "4",
        ],
    );
    cli(
        &state,
        &[
            "profile", "add", "arm", "--target", "octo", "--labels", "arm64", "--paused",
        ],
    );
    {
        let store = SqliteStore::open(&state).unwrap();
        let host = store.host().unwrap().unwrap();
        let now = now_millis();
        for (job, to) in [
            ("e2e-job-busy", AttemptState::Busy),
            ("e2e-job-idle", AttemptState::Idle),
        ] {
            seed_attempt(&store, &host.id, job.into(), to, now - 30_000, now - 20_000);
        }
        store
            .put_heartbeat(&Heartbeat {
                pid: 1,
                started_at: now - 60_000,
                heartbeat_at: now,
                version: "test".into(),
            })
            .unwrap();
        // GitHub's runner list as the daemon publishes it: our busy runner and a
        // foreign one.
        let gh = |id, name: String, busy| runner_manager::domain::RegisteredRunner {
            id,
            name,
            online: true,
            busy,
            labels: vec!["self-hosted".into()],
        };
        runner_manager::store::daemon_facts::publish_runners(
            &store,
            "octo",
            &[
                gh(11, runner_manager::domain::runner_name(&host.id, 1), true),
                gh(12, "hand-made-box".into(), false),
            ],
            now,
        )
        .unwrap();
    }
    // Runner logs longer than the tail the detail shows (500 lines).
    std::fs::create_dir_all(state.join("logs")).unwrap();
    for id in [1, 2] {
        let log: String = (1..=3000).map(|i| format!("log-{id} line {i}\n")).collect();
        std::fs::write(runner_manager::runner::attempt_log(&state, id), log).unwrap();
    }
    let tmux = Tmux::start(&[("TERM", "xterm-256color")]);
    tmux.wait("the shell prompt", |s| s.contains(PROMPT.trim()));
    let run_top = format!("{BIN} --state-dir {} top", state.display());
    tmux.type_text(&run_top);
    tmux.key("Enter");
    let s = tmux.wait("the overview rows", |s| {
        s.contains("Profiles (2)") && s.contains("linux")
    });
    assert!(s.contains("arm") && s.contains("daemon up"), "{s}");
    tmux.wait_alternate(true);

    tmux.key("?");
    tmux.wait("the help overlay", |s| s.contains("Esc or ? to close"));
    tmux.key("Escape");
    tmux.wait("the help to close", |s| !s.contains("Esc or ? to close"));
    tmux.key("Tab");
    let s = tmux.wait("the attempts pane", |s| s.contains("Attempts: 2 shown"));
    assert!(
        s.contains("e2e-job-busy") && s.contains("e2e-job-idle"),
        "{s}"
    );
    tmux.key("Enter");
    tmux.wait("an attempt's detail", |s| {
        s.contains("Timeline") && s.contains("Runner log") && s.contains("line 3000")
    });
    // The whole log: opened with Enter, at its end, then its first line with g.
    tmux.key("Enter");
    tmux.wait("the whole log at its end", |s| {
        s.contains("Log of attempt") && s.contains("of 3000") && s.contains("line 3000")
    });
    tmux.key("g");
    tmux.wait("the whole log's first line", |s| {
        s.contains("lines 1-") && s.contains(" line 1 ")
    });
    tmux.key("Escape");
    tmux.wait("the detail again", |s| s.contains("Timeline"));
    tmux.key("Escape");
    tmux.key("1");
    tmux.wait("the overview", |s| s.contains("Profiles (2)"));
    // + applies at once and offers u; u puts it back (profiles by name: arm, linux).
    tmux.key("j");
    tmux.key("+");
    tmux.wait("max raised", |s| {
        s.contains("linux max 4 → 5") && s.contains("u undoes")
    });
    tmux.key("u");
    tmux.wait("max put back", |s| s.contains("linux max 5 → 4"));
    {
        let store = SqliteStore::open(&state).unwrap();
        assert_eq!(store.profile("linux").unwrap().max_capacity, 4);
    }
    // The Runners pane by the original's key: ours apart from the foreign one, and
    // our live attempt the list does not have yet (issue 38).
    tmux.key("n");
    tmux.wait("the runners pane", |s| {
        s.contains("Runners as GitHub listed them")
            && s.contains("2 listed + 1 of ours not yet")
            && s.contains("#1")
            && s.contains("not listed")
            && s.contains("foreign")
    });
    // c copies the selected runner's name over OSC 52, which tmux keeps as a buffer.
    assert!(
        tmux.cmd(&["set", "-g", "set-clipboard", "on"])
            .status
            .success()
    );
    tmux.key("c");
    tmux.wait("the copy message", |s| s.contains("copied: rm-"));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let buf = tmux.cmd(&["show-buffer"]);
        if String::from_utf8_lossy(&buf.stdout).starts_with("rm-") {
            break;
        }
        assert!(Instant::now() < deadline, "no OSC 52 buffer: {buf:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.key("a");
    tmux.wait("the activity pane", |s| {
        s.contains("Activity: ") && s.contains("busy: e2e-job-busy")
    });
    // A click on a tab opens it: the mouse is captured (SGR reports, 1-based).
    assert_eq!(tmux.display("#{mouse_sgr_flag}"), "1", "mouse capture on");
    let s = tmux.capture();
    let tabs = s.lines().nth(1).unwrap();
    let col = tabs[..tabs.find("4 Runners").unwrap()].chars().count() + 1;
    tmux.type_text(&format!("\x1b[<0;{col};2M\x1b[<0;{col};2m"));
    tmux.wait("the clicked tab", |s| {
        s.contains("Runners as GitHub listed them")
    });
    // A setting edited in place: linux's max, a bad value first (refused, nothing
    // written, the editor stays), then a good one.
    tmux.key("1");
    tmux.wait("the overview", |s| s.contains("Profiles (2)"));
    tmux.key("e");
    tmux.wait("the settings pane", |s| s.contains("Enter edits"));
    for _ in 0..3 {
        tmux.key("j");
    }
    tmux.key("Enter");
    tmux.wait("the editor on max", |s| {
        s.contains("Edit profile linux") && s.contains("max=4_")
    });
    tmux.key("BSpace");
    tmux.type_text("many");
    tmux.key("Enter");
    tmux.wait("the refusal", |s| s.contains("refused, nothing written"));
    {
        let store = SqliteStore::open(&state).unwrap();
        assert_eq!(store.profile("linux").unwrap().max_capacity, 4);
    }
    for _ in 0..4 {
        tmux.key("BSpace");
    }
    tmux.type_text("6");
    tmux.key("Enter");
    tmux.wait("the edit written", |s| {
        s.contains("profile linux max=6 (revision")
    });
    {
        let store = SqliteStore::open(&state).unwrap();
        assert_eq!(store.profile("linux").unwrap().max_capacity, 6);
    }
    tmux.key("1");
    // A large terminal: the overview fills it with the live attempts and the chart.
    assert!(
        tmux.cmd(&["resize-window", "-t", "t", "-x", "250", "-y", "70"])
            .status
            .success()
    );
    tmux.wait("the roomy overview", |s| {
        s.contains("Live attempts (2)") && s.contains("queued jobs vs live runners")
    });

    tmux.key("q");
    tmux.wait_alternate(false);
    tmux.wait("the prompt again", |s| s.contains(PROMPT.trim()));
    assert_eq!(
        tmux.display("#{mouse_sgr_flag}"),
        "0",
        "mouse released on quit"
    );
    tmux.shell_works("quit");

    // TERM=dumb and NO_COLOR: the same screen in ASCII.
    tmux.type_text(&format!("TERM=dumb NO_COLOR=1 {run_top}"));
    tmux.key("Enter");
    tmux.wait_alternate(true);
    let s = tmux.wait("the ASCII overview", |s| {
        s.contains("+ Profiles (2) ---") && s.contains("| 2 Attempts|")
    });
    assert!(!s.contains('│') && !s.contains('─'), "{s}");
    tmux.key("q");
    tmux.wait_alternate(false);
    tmux.shell_works("dumb");

    // SIGTERM: the same restoration, from a signal instead of a key.
    tmux.type_text(&run_top);
    tmux.key("Enter");
    tmux.wait_alternate(true);
    tmux.wait("the overview again", |s| s.contains("Profiles (2)"));
    let shell = tmux.display("#{pane_pid}");
    let top = child_of(&shell).expect("top's pid");
    let out = Command::new("kill").args(["-TERM", &top]).output().unwrap();
    assert!(out.status.success());
    tmux.wait_alternate(false);
    assert_eq!(
        tmux.display("#{mouse_sgr_flag}"),
        "0",
        "mouse released on SIGTERM"
    );
    tmux.shell_works("term");
    drop(tmux);
    let _ = std::fs::remove_dir_all(&root);
}

/// Figure, printed and never asserted: CPU `top` uses while idle on a store with 200
/// live attempts, while a writer stands in for the daemon (a heartbeat every second,
/// so every refresh reloads the store: the worst case of an idle screen).
#[test]
fn figure_top_idle_cpu_with_200_live_attempts() {
    let (root, state) = with_target("cpu");
    cli(
        &state,
        &[
            "profile", "add", "linux", "--target", "octo", "--labels", "gpu", "--max", "1000",
        ],
    );
    cli(&state, &["host", "set", "capacity=1000"]);
    let store = SqliteStore::open(&state).unwrap();
    let host = store.host().unwrap().unwrap();
    let now = now_millis();
    for i in 0..200 {
        let to = [
            AttemptState::Starting,
            AttemptState::Idle,
            AttemptState::Busy,
        ][i % 3];
        seed_attempt(
            &store,
            &host.id,
            format!("job-{i}"),
            to,
            now - 60_000,
            now - 30_000,
        );
    }
    let tmux = Tmux::start(&[("TERM", "xterm-256color"), ("FIGURE", "1")]);
    tmux.wait("the shell prompt", |s| s.contains(PROMPT.trim()));
    tmux.type_text(&format!("{BIN} --state-dir {} top", state.display()));
    tmux.key("Enter");
    tmux.wait_alternate(true);
    tmux.wait("the overview", |s| s.contains("Profiles (1)"));
    let shell = tmux.display("#{pane_pid}");
    let top = child_of(&shell).expect("top's pid");
    let ticks = |pid: &str| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = stat.rsplit_once(')').unwrap().1;
        let f: Vec<&str> = after.split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let secs = 10u64;
    let t0 = ticks(&top);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        store
            .put_heartbeat(&Heartbeat {
                pid: 1,
                started_at: now,
                heartbeat_at: now_millis(),
                version: "figure".into(),
            })
            .unwrap();
        std::thread::sleep(Duration::from_secs(1));
    }
    let used = (ticks(&top) - t0) as f64 / hz;
    eprintln!(
        "figure: top idle with 200 live attempts, store reloaded every second: {:.2}% of one core ({used:.2} s CPU over {:.1} s)",
        100.0 * used / start.elapsed().as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    tmux.key("q");
    tmux.wait_alternate(false);
    drop(tmux);
    let _ = std::fs::remove_dir_all(&root);
}

/// Whether `pid` has exited: gone from `/proc`, or a zombie waiting for init (the
/// pane's shell, its parent, died with the session) to reap it.
fn exited(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, after)| after.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
    }
}

/// Issue 36: `top` in a tmux pane whose session is killed (as a closed terminal tab
/// or a dropped SSH session ends it) is gone within 2 s, instead of spinning a core
/// for ever on a terminal that reads 0.
#[test]
fn top_is_gone_within_2s_of_its_tmux_session_closing() {
    let (root, state) = with_target("hangup");
    let tmux = Tmux::start(&[("TERM", "xterm-256color")]);
    tmux.wait("the shell prompt", |s| s.contains(PROMPT.trim()));
    tmux.type_text(&format!("{BIN} --state-dir {} top", state.display()));
    tmux.key("Enter");
    tmux.wait_alternate(true);
    tmux.wait("the overview", |s| s.contains("Profiles (0)"));
    let shell = tmux.display("#{pane_pid}");
    let top = child_of(&shell).expect("top's pid");
    let killed = Instant::now();
    assert!(tmux.cmd(&["kill-session", "-t", "t"]).status.success());
    while !exited(&top) && killed.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = killed.elapsed();
    let ended = exited(&top);
    if !ended {
        let _ = Command::new("kill").args(["-KILL", &top]).output();
    }
    eprintln!(
        "figure: top ended {:.0} ms after its tmux session was killed",
        after.as_secs_f64() * 1000.0
    );
    assert!(
        ended,
        "top still running {after:?} after its tmux session was killed"
    );
    drop(tmux);
    let _ = std::fs::remove_dir_all(&root);
}
