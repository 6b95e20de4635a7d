//! The daemon runs with glibc's per-thread malloc caches off (`alloc::without_thread_caches`:
//! it starts itself again once with the tunable set), under its own name and pid, and
//! the runners it starts do not inherit the setting.

use super::support::*;
use runner_manager::domain::AttemptState;

fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[test]
fn the_daemon_starts_again_once_with_malloc_thread_caches_off_and_runners_never_see_it() {
    let mut w = World::new("malloc", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    w.enqueue("acme/app", "long", &["p"], 3000);
    w.start_daemon();
    let pid = w.daemon_pid();
    wait_until(SETTLE, "the daemon's image with the tunable", || {
        environ(pid)
            .iter()
            .any(|v| v == "GLIBC_TUNABLES=glibc.malloc.tcache_count=0")
    });
    // The same process under its own name (not `exe`), started once: its command line
    // is the one it was given.
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "runner-manager");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("daemon"),
        "{cmdline:?}"
    );
    wait_until(SETTLE, "a busy runner", || {
        w.in_state(AttemptState::Busy).len() == 1
    });
    let runner = w.in_state(AttemptState::Busy).remove(0).pid.expect("a pid");
    let env = environ(runner as u32);
    assert!(!env.is_empty(), "the runner's environment reads");
    assert!(
        !env.iter().any(|v| v.starts_with("GLIBC_TUNABLES")),
        "{env:?}"
    );
    assert!(w.stop_daemon().success(), "{}", w.daemon_logs());
}
