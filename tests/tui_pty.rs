//! `top` and the demo's `top` when their terminal goes away (issue 36): each runs on
//! the slave end of a pty pair, the test closes the master, as a closed tmux pane, a
//! closed terminal tab or a dropped SSH session does, and the process must end (exit
//! 130, the exit-code table's `interrupted`) within 2 s, having used little CPU
//! meanwhile (read from `/proc/PID/stat`). Before the fix, `top` spun on `read(0) = 0`
//! for ever.
//!
//! Two ways for the terminal to go: as the session's controlling terminal (the kernel
//! sends SIGHUP too, as tmux's pane does), and as a plain descriptor with no
//! controlling terminal (no SIGHUP at all: only poll(2)'s POLLHUP tells).

use runner_manager::store::{SqliteStore, Store};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");

/// The bound: gone within 2 s of the master closing.
const EXIT_WITHIN: Duration = Duration::from_secs(2);

/// CPU `top` may use between the master closing and its exit. Ending takes a few
/// milliseconds; a spinning reader burns about a core, 100 ticks a second.
const MAX_TICKS_AFTER_HANGUP: u64 = 25;

/// A pty pair: the master for the test, the slave for the program.
struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

fn check(rc: libc::c_int, what: &str) {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
}

/// Opens a pty pair, both ends close-on-exec (so no other child of this test binary
/// keeps the master open: the hang-up must come when the test closes it), the slave
/// 40 rows by 120 columns.
fn open_pty() -> Pty {
    // SAFETY: plain libc calls on descriptors this function owns; ptsname_r writes
    // into a buffer of the length given.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        check(m, "posix_openpt");
        let master = OwnedFd::from_raw_fd(m);
        check(libc::grantpt(m), "grantpt");
        check(libc::unlockpt(m), "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let s = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        check(s, "open the slave");
        let slave = OwnedFd::from_raw_fd(s);
        let ws = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        check(libc::ioctl(s, libc::TIOCSWINSZ, &ws), "TIOCSWINSZ");
        Pty { master, slave }
    }
}

/// How the program holds the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Its session's controlling terminal: closing the master also sends SIGHUP.
    Controlling,
    /// Only as stdin, stdout and stderr, in a session of its own with no controlling
    /// terminal: no SIGHUP comes, only the hang-up on the descriptor.
    Descriptor,
}

/// Starts `args` on the slave in a session of its own.
fn spawn_on(pty: &Pty, held: Held, args: &[&str]) -> std::process::Child {
    let fd = |f: &OwnedFd| Stdio::from(f.try_clone().unwrap());
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .stdin(fd(&pty.slave))
        .stdout(fd(&pty.slave))
        .stderr(fd(&pty.slave));
    // SAFETY: setsid and ioctl are async-signal-safe; nothing else runs before exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if held == Held::Controlling && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("start runner-manager on the pty")
}

/// Reads what the program drew until `want` shows, or fails after `within`. Never a
/// blocking read from another thread: a read in progress would keep the master open
/// past its close, and the hang-up would never come.
fn read_until(master: &OwnedFd, want: &str, within: Duration) -> String {
    let end = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{want:?} never showed; the end of the screen so far: {}",
            String::from_utf8_lossy(&seen[seen.len().saturating_sub(2000)..])
        );
        let mut p = libc::pollfd {
            fd: master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, left.as_millis().min(200) as i32) };
        if n > 0 {
            let mut buf = [0u8; 8192];
            // SAFETY: reading into a live buffer of its length.
            let got = unsafe { libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            assert!(got > 0, "the pty master read {got}");
            seen.extend_from_slice(&buf[..got as usize]);
            if String::from_utf8_lossy(&seen).contains(want) {
                return String::from_utf8_lossy(&seen).into_owned();
            }
        }
    }
}

/// Kills a program that outlived its bound, with what it started in its session (the
/// demo's daemon): it leads its own session and process group (`spawn_on`).
fn kill_session(child: &std::process::Child) {
    // SAFETY: kill(2) on the process group this test made the child lead.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGKILL);
    }
}

/// User plus system CPU ticks of `pid`, and its threads' names.
fn ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|s| s.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits for `pid` to exit without reaping it (waitid with WNOWAIT), so its final CPU
/// ticks can still be read from `/proc`. None after `within`.
fn exited_within(pid: u32, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    loop {
        // SAFETY: a zeroed siginfo_t for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child; WNOHANG so it never blocks.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
            )
        };
        check(rc, "waitid");
        // SAFETY: si_pid is set by waitid when a child changed state, else zero.
        if unsafe { info.si_pid() } as u32 == pid {
            return Some(start.elapsed());
        }
        if start.elapsed() >= within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A state directory with one target and one profile, made through the CLI.
fn state_dir(tag: &str) -> (PathBuf, PathBuf) {
    let root = std::env::temp_dir().join(format!("rm-tui-pty-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let state = root.join("state");
    let token = root.join("token");
    std::fs::write(&token, "secret-token-value").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let cli = |args: &[&str]| {
        let out = Command::new(BIN)
            .arg("--state-dir")
            .arg(&state)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    let token = token.to_str().unwrap();
    cli(&[
        "target",
        "add",
        "octo",
        "--repo",
        "octo/app",
        "--token-file",
        token,
    ]);
    cli(&[
        "profile", "add", "linux", "--target", "octo", "--labels", "gpu",
    ]);
    assert!(SqliteStore::open(&state).unwrap().host().unwrap().is_some());
    (root, state)
}

/// What happened after the master closed.
struct Ending {
    after: Duration,
    ticks: u64,
    code: Option<i32>,
}

/// Closes the master and watches the program go: the time to exit (or to the TUI's
/// threads being gone, for the demo, which then winds its daemon down), and the CPU
/// ticks it used from the close to that moment. Kills it if it outlives `within`.
fn hang_up(pty: Pty, child: &mut std::process::Child, tui_gone: bool) -> (Duration, u64) {
    let pid = child.id();
    let before = ticks(pid);
    let Pty { master, slave } = pty;
    drop(slave);
    let closed = Instant::now();
    drop(master);
    let mut gone = None;
    while closed.elapsed() < EXIT_WITHIN {
        if exited_within(pid, Duration::ZERO).is_some() {
            gone = Some(closed.elapsed());
            break;
        }
        if tui_gone && !thread_names(pid).iter().any(|n| n.starts_with("tui-")) {
            gone = Some(closed.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let used = ticks(pid) - before;
    let Some(after) = gone else {
        let names = thread_names(pid);
        kill_session(child);
        let _ = child.wait();
        panic!(
            "still running {:?} after the terminal closed ({used} ticks used meanwhile; threads {names:?})",
            closed.elapsed()
        );
    };
    (after, used)
}

fn run_top(held: Held) -> Ending {
    let (root, state) = state_dir(&format!("top-{held:?}"));
    let pty = open_pty();
    let mut child = spawn_on(&pty, held, &["--state-dir", state.to_str().unwrap(), "top"]);
    read_until(&pty.master, "Profiles", Duration::from_secs(20));
    let (after, ticks) = hang_up(pty, &mut child, false);
    let code = child.wait().unwrap().code();
    let _ = std::fs::remove_dir_all(&root);
    Ending { after, ticks, code }
}

fn assert_small(what: &str, e: &Ending) {
    eprintln!(
        "figure: {what} ended {:.0} ms after its terminal closed, using {} CPU ticks meanwhile",
        e.after.as_secs_f64() * 1000.0,
        e.ticks
    );
    assert!(
        e.ticks <= MAX_TICKS_AFTER_HANGUP,
        "{what} used {} ticks after the hang-up",
        e.ticks
    );
}

#[test]
fn top_ends_when_its_controlling_terminal_closes() {
    let e = run_top(Held::Controlling);
    assert_small("top (controlling terminal, SIGHUP)", &e);
    assert_eq!(e.code, Some(130), "the exit-code table's `interrupted`");
}

#[test]
fn top_ends_when_its_terminal_hangs_up_without_sighup() {
    let e = run_top(Held::Descriptor);
    assert_small("top (a descriptor only, no SIGHUP)", &e);
    assert_eq!(e.code, Some(130), "the exit-code table's `interrupted`");
}

/// The demo's `top`: its TUI threads are gone within the same bound, the demo then
/// drains and stops its daemon (short jobs keep that brief) and exits 130, and
/// nothing of it spins meanwhile.
#[test]
fn the_demos_top_ends_when_its_terminal_closes() {
    let root = std::env::temp_dir().join(format!("rm-tui-pty-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let state = root.join("state");
    let pty = open_pty();
    let mut child = spawn_on(
        &pty,
        Held::Controlling,
        &["--state-dir", state.to_str().unwrap(), "demo"],
    );
    read_until(&pty.master, "Profiles", Duration::from_secs(60));
    let pid = child.id();
    let (after, ticks_tui) = hang_up(pty, &mut child, true);
    let e = Ending {
        after,
        ticks: ticks_tui,
        code: None,
    };
    assert_small("the demo's top (its TUI threads)", &e);
    // The wind-down waits for the demo's runners (jobs of a few seconds) and stops
    // its daemon; the demo then exits, the way it does after Ctrl-C.
    let before = ticks(pid);
    let waited = exited_within(pid, Duration::from_secs(60));
    let used = ticks(pid) - before;
    let code = if waited.is_some() {
        child.wait().unwrap().code()
    } else {
        kill_session(&child);
        let _ = child.wait();
        None
    };
    eprintln!(
        "figure: the demo wound down and exited {:.1} s after its TUI ended, using {used} CPU ticks",
        waited.unwrap_or_default().as_secs_f64()
    );
    assert!(
        waited.is_some(),
        "the demo never exited after its terminal closed"
    );
    assert_eq!(code, Some(130));
    let _ = std::fs::remove_dir_all(&root);
}
