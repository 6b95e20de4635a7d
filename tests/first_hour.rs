//! The first hour of a new user, in a real terminal (tmux), as the README walks it: the
//! demo opens `top` while jobs arrive, the attempts pane shows busy runners with their
//! live meters, `q` ends it (the daemon drains, the summary is printed and the shell
//! comes back), and then `status` and `attempts` on the kept books show nothing left
//! running or open.

#[path = "common/tmux.rs"]
mod tmux;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tmux::Tmux;

const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");

fn json(state: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether a row shows a memory figure: `612M`, `612 MiB`, `1.2GiB`, ... (not `-`).
fn shows_memory(row: &str) -> bool {
    let tokens: Vec<&str> = row
        .split(|c: char| c.is_whitespace() || c == '│')
        .filter(|t| !t.is_empty())
        .collect();
    let unit = |u: &str| ["K", "M", "G", "KiB", "MiB", "GiB"].contains(&u);
    let number = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.');
    tokens.iter().enumerate().any(|(i, t)| {
        let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
        let (n, u) = t.split_at(split);
        (number(n) && unit(u)) || (number(t) && tokens.get(i + 1).is_some_and(|next| unit(next)))
    })
}

#[test]
fn a_memory_figure_is_told_from_a_dash() {
    assert!(shows_memory("│8  linux  busy  2s  job-8-0  1M  17ms  -"));
    assert!(shows_memory(
        "│8  linux  busy  2s  job-8-0  612 MiB  1.2 s  -"
    ));
    assert!(shows_memory("8 linux busy 2s job 1.5GiB 3 s -"));
    assert!(!shows_memory("│9  linux  busy  1s  job-9-0  -  -  -"));
    assert!(!shows_memory("│9  linux  busy  1s  job-9-0M  -  -  -"));
}

#[test]
fn the_demo_under_top_then_quit_leaves_clean_books() {
    let root = std::env::temp_dir().join(format!("rm-first-hour-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let state: PathBuf = root.join("state");

    let t = Tmux::start(&[]);
    t.type_text(&format!(
        "{BIN} --state-dir {} demo --keep; echo demo-exit=$?",
        state.display()
    ));
    t.key("Enter");
    t.wait_alternate(true);
    t.wait("top's overview", |s| s.contains("Profiles"));

    // The attempts pane: a busy runner with its live meters (sampled every few
    // seconds while it runs, not only after it ends).
    t.key("2");
    t.wait_for(
        "a busy runner showing its live memory",
        Duration::from_secs(60),
        |s| s.lines().any(|l| l.contains("busy") && shows_memory(l)),
    );

    // q: the daemon drains (busy runners finish their jobs), the summary is printed,
    // and the shell has its terminal back.
    t.key("q");
    let screen = t.wait_for(
        "the demo's summary and exit code",
        Duration::from_secs(90),
        // The typed command line holds `demo-exit=$?` (and may wrap right before it);
        // its output starts a line with the digit.
        |s| {
            s.lines().any(|l| {
                l.strip_prefix("demo-exit=")
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
        },
    );
    t.wait_alternate(false);
    assert!(screen.contains("summary after"), "{screen}");
    assert!(screen.contains("state directory kept"), "{screen}");
    // Quitting while jobs still arrive leaves some queued: exit 1, saying how many.
    assert!(
        screen.contains("demo-exit=1") || screen.contains("demo-exit=0"),
        "{screen}"
    );
    t.shell_works("after-demo");

    // The kept books: nothing live, nothing open, no daemon, not draining.
    let status = json(&state, &["status"]);
    assert_eq!(status["live"], 0, "{status:#}");
    assert_eq!(status["daemon"]["running"], false, "{status:#}");
    assert_eq!(status["host"]["draining"], false, "{status:#}");
    for p in status["profiles"].as_array().unwrap() {
        assert_eq!(p["live"], 0, "{p:#}");
    }
    let active = json(&state, &["attempts", "--active"]);
    assert_eq!(active.as_array().map(Vec::len), Some(0), "{active:#}");
    let all = json(&state, &["attempts"]);
    let all = all.as_array().unwrap();
    assert!(!all.is_empty(), "the demo started no runner");
    for a in all {
        assert_eq!(a["cleaned"], true, "{a:#}");
        assert!(
            a["outcome"].is_string(),
            "an attempt without an outcome: {a:#}"
        );
    }
    // And no runner process of the demo is left.
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&*root.to_string_lossy()) && c.contains("Runner"))
        .collect();
    assert!(left.is_empty(), "runner processes left: {left:?}");
    let _ = std::fs::remove_dir_all(&root);
}
