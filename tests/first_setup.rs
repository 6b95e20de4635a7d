//! A new user's first real setup (issue 38), driven as README.md's "A first real
//! target" and docs/pools.md walk it, against the simulated GitHub instead of
//! github.com: a token file, `target add` and `target check`, `runner install`,
//! `profile add`, `service install` on a host without systemd (a clear refusal that
//! names what to do instead), the daemon under "a supervisor" (this test), a job served,
//! `top` in a real terminal (tmux) showing it, then a coordinator: `coordinator host
//! add`, `coordinator serve`, the host joining with `host set coordinator=`, a pool job
//! placed on it and served, and `top` on the coordinator opening on its Pool pane with
//! the host in it. No step may dead-end.

#[path = "common/tmux.rs"]
mod tmux;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tmux::Tmux;

const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");

/// A child process killed when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child that prints `marker` on its first stdout line with a URL: the child and the
/// URL (what `sim github` and `coordinator serve` print once they listen).
fn spawn_printing_url(args: &[&str], marker: &str) -> (Running, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let running = Running(child);
    let mut line = String::new();
    let mut lines = BufReader::new(stdout);
    while !line.contains(marker) {
        line.clear();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "{args:?} ended before printing {marker}"
        );
    }
    let url = line
        .split_whitespace()
        .find(|w| w.contains(marker))
        .unwrap()
        .to_string();
    (running, url)
}

fn rm(state: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .env(
            "RUNNER_MANAGER_SYSTEMD_RUN_DIR",
            "/nonexistent/run/systemd/system",
        )
        .output()
        .unwrap()
}

#[track_caller]
fn ok(state: &Path, args: &[&str]) -> String {
    let out = rm(state, args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(state: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(state, &all)).unwrap()
}

#[track_caller]
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Attempts of `state` that served a job to its end.
fn served(state: &Path) -> usize {
    json(state, &["attempts", "--limit", "0"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["outcome"] == "completed_job")
        .count()
}

fn daemon(state: &Path) -> Running {
    let log = std::fs::File::create(state.with_extension("log")).unwrap();
    Running(
        Command::new(BIN)
            .arg("--state-dir")
            .arg(state)
            .args(["daemon", "--drain-timeout", "5"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_first_real_setup_from_the_docs_has_no_dead_end() {
    let dir = Dir(std::env::temp_dir().join(format!("rm-first-setup-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    let d = &dir.0;
    let token = d.join("app.token");
    std::fs::write(&token, "ghp_firstsetup00000000000000000000000000\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let token = token.to_str().unwrap();
    let (_sim, api) = spawn_printing_url(
        &["sim", "github", "--repo", "acme/app", "--pat-file", token],
        "http://",
    );
    let host = d.join("host");

    // README, "A first real target".
    ok(
        &host,
        &[
            "target",
            "add",
            "app",
            "--repo",
            "acme/app",
            "--api-url",
            &api,
            "--token-file",
            token,
        ],
    );
    let check = ok(&host, &["target", "check", "app"]);
    assert!(check.lines().all(|l| l.starts_with("ok ")), "{check}");
    ok(&host, &["runner", "install"]);
    ok(
        &host,
        &[
            "profile", "add", "build", "--target", "app", "--labels", "build", "--max", "4",
        ],
    );
    // No systemd here: refused, nothing written, and told what to do instead.
    let svc = rm(&host, &["service", "install"]);
    assert_eq!(svc.status.code(), Some(2), "{svc:?}");
    let said = String::from_utf8_lossy(&svc.stderr);
    assert!(said.contains("runner-manager daemon"), "{said}");
    let _daemon = daemon(&host);
    ok(
        &host,
        &[
            "sim",
            "job",
            "add",
            "--url",
            &api,
            "--repo",
            "acme/app",
            "--labels",
            "self-hosted,build",
            "--duration",
            "1s",
            "--count",
            "2",
        ],
    );
    wait_until("both jobs are served", || served(&host) >= 2);

    // `top` in a real terminal shows the profile and what its runners did.
    let t = Tmux::start(&[]);
    t.type_text(&format!("{BIN} --state-dir {} top\n", host.display()));
    t.wait("top shows the profile", |s| {
        s.contains("build") && s.contains("app")
    });
    t.type_text("q");
    t.wait("the shell is back", |s| {
        s.trim_end().ends_with(tmux::PROMPT.trim_end())
    });

    // docs/pools.md: a coordinator with its own state directory and target, a host
    // token, and the host joining it with a pool profile.
    let coord = d.join("coord");
    ok(
        &coord,
        &[
            "target",
            "add",
            "app",
            "--repo",
            "acme/app",
            "--api-url",
            &api,
            "--token-file",
            token,
        ],
    );
    let host_token = d.join("vm.token");
    let host_name = json(&host, &["host", "show"])["name"]
        .as_str()
        .unwrap()
        .to_string();
    ok(
        &coord,
        &[
            "coordinator",
            "host",
            "add",
            &host_name,
            "--token-out",
            host_token.to_str().unwrap(),
        ],
    );
    let coord_dir = coord.to_str().unwrap().to_string();
    let (_coord, ws) = spawn_printing_url(
        &[
            "--state-dir",
            &coord_dir,
            "coordinator",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
        "ws://",
    );
    ok(
        &host,
        &[
            "profile",
            "add",
            "pool",
            "--target",
            "app",
            "--labels",
            "rm-pool-linux",
            "--max",
            "2",
        ],
    );
    ok(
        &host,
        &[
            "host",
            "set",
            &format!("coordinator={ws}"),
            &format!("coordinator_token_file={}", host_token.display()),
        ],
    );
    wait_until("the host is connected to the coordinator", || {
        json(&coord, &["coordinator", "hosts"])
            .as_array()
            .is_some_and(|hs| {
                hs.iter()
                    .any(|h| h["name"] == host_name.as_str() && h["connected"] == true)
            })
    });
    ok(
        &host,
        &[
            "sim",
            "job",
            "add",
            "--url",
            &api,
            "--repo",
            "acme/app",
            "--labels",
            "self-hosted,rm-pool-linux",
            "--duration",
            "1s",
            "--name",
            "pooled",
        ],
    );
    wait_until("the pool job is served on the host", || {
        json(&host, &["attempts", "--limit", "0"])
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["profile"] == "pool" && a["outcome"] == "completed_job")
    });

    // `top` on the coordinator's state directory opens on its Pool pane, the host in it.
    t.type_text(&format!("{BIN} --state-dir {coord_dir} top\n"));
    t.wait("the coordinator's Pool pane with the host", |s| {
        s.contains("Pool") && s.contains(&host_name)
    });
    t.type_text("q");
    t.wait("the shell is back", |s| {
        s.trim_end().ends_with(tmux::PROMPT.trim_end())
    });
}
