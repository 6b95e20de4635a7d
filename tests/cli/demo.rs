//! `demo`'s exit codes: interrupted is 130, with the daemon drained and stopped, its
//! books finished and the summary printed first.

use super::support::{BIN, Dir};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A headless demo of 500 jobs on `d`'s state directory, its stdout piped, and a
/// thread that reads its stderr to the end. In a process group of its own, as a
/// shell's foreground job is, so [`interrupt`] is the terminal's Ctrl-C.
fn start_demo(d: &Dir) -> (Child, std::thread::JoinHandle<String>) {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(BIN)
        .process_group(0)
        .arg("--state-dir")
        .arg(d.state())
        .args(["demo", "--headless", "--jobs", "500"])
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the demo");
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    (child, err)
}

/// SIGINT to the demo's process group, as a terminal's Ctrl-C sends it to every
/// process of the foreground job, then waits (bounded) for the demo to exit; `seen`
/// goes in the failure.
fn interrupt(child: &mut Child, seen: &str) -> ExitStatus {
    // SAFETY: kill(2) on the process group our own child leads.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGINT);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("the demo did not stop within 60 s of SIGINT:\n{seen}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_interrupted_demo_prints_its_summary_and_exits_130() {
    let d = Dir::new("demo-int");
    let (mut child, err) = start_demo(&d);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Wait for its first progress line: the world is laid out and the daemon started.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no progress line from the demo:\n{seen}"));
        seen.push_str(&line);
        seen.push('\n');
        // Several runners are busy: the interruption meets jobs in flight, more than
        // a plain SIGTERM's drain of the idle ones would outwait.
        let running = line
            .split("running")
            .nth(1)
            .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok());
        if line.starts_with("t=") && running.is_some_and(|n| n >= 3) {
            break;
        }
    }
    let status = interrupt(&mut child, &seen);
    // The process has exited, so its end of the pipes is closed.
    seen.extend(lines.iter().map(|l| l + "\n"));
    let stderr = err.join().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "stdout:\n{seen}\nstderr:\n{stderr}"
    );
    assert!(seen.contains("summary after"), "no summary:\n{seen}");
    assert!(
        stderr.contains("interrupted with") && stderr.contains("jobs served"),
        "stderr does not say what was served:\n{stderr}"
    );
    // The Ctrl-C was the demo's to handle: its daemon, in a group of its own, did not
    // get it, and was stopped by the demo after the drain.
    assert!(
        !stderr.contains("the daemon exited with"),
        "the daemon took the terminal's Ctrl-C itself:\n{stderr}"
    );
    // Its books are finished: the busy runners finished their jobs and were cleaned
    // before the daemon stopped, no attempt is left open, no runner process is left.
    let attempts: serde_json::Value =
        serde_json::from_str(&d.ok(&["attempts", "--json"]).stdout).unwrap();
    let open: Vec<_> = attempts
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["cleaned"] != true)
        .map(|a| (a["id"].clone(), a["state"].clone()))
        .collect();
    assert!(open.is_empty(), "attempts left open: {open:?}\n{seen}");
    let root = d.state().join("attempts");
    let left: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(&root))
        })
        .collect();
    assert!(left.is_empty(), "runner processes left: {left:?}");
    let status = d.ok(&["status"]).stdout;
    assert!(status.contains("draining     no"), "{status}");
}

#[test]
fn an_interrupted_demo_whose_reader_is_gone_still_exits_130() {
    // `demo | cat` and Ctrl-C: the terminal's SIGINT takes `cat` down too, so the
    // demo's summary meets a closed pipe.
    let d = Dir::new("demo-pipe");
    let (mut child, err) = start_demo(&d);
    {
        // The first line is printed once the simulated GitHub runs; a read that never
        // comes is bounded by the demo's own failure (it exits, closing the pipe).
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("runner-manager demo:"), "{line}");
    } // The reader is gone: the pipe is closed.
    let status = interrupt(&mut child, "");
    let stderr = err.join().unwrap();
    assert_eq!(status.code(), Some(130), "stderr:\n{stderr}");
    assert!(stderr.contains("interrupted with"), "{stderr}");
}

#[test]
fn the_demo_makes_a_given_state_directory_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dir::new("demo-mode");
    let state = d.state();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let world =
        runner_manager::demo::World::prepare(Some(state.clone()), std::path::Path::new(BIN), 1)
            .expect("the demo's world");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o711, "others may pass through, never read or write");
    drop(world);
    let r = d.run(&["doctor"]);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("state-dir"))
        .unwrap_or_default();
    assert!(line.starts_with("ok"), "doctor: {}", r.stdout);
}
