//! A pool world: one simulated GitHub, one coordinator process, N host daemons.

use runner_manager::coordinator::protocol::{CoordMsg, Hello, HelloAck, HostMsg, LaunchFrame};
use runner_manager::sim::{JobStatus, SimConfig, SimGitHub, SimHandle, install};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");
pub const REPO: &str = "pool-org/app";
static WORLDS: AtomicU32 = AtomicU32::new(0);

pub fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {within:?} waiting until {what}");
}

pub fn write_secret(path: &Path, value: &str) {
    runner_manager::demo::write_token_file(path, value).unwrap();
}

pub fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--state-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

pub fn run_ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sends `sig` and waits (30 s at most) for the child to exit: its status, or `None`
/// when it had to be SIGKILLed after all.
fn kill(child: &mut Child, sig: i32) -> Option<ExitStatus> {
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Sees each line a daemon writes to stderr, as it arrives.
pub type Tap = Box<dyn FnMut(&str) + Send>;

pub struct Host {
    pub dir: PathBuf,
    /// `daemon --fallback-grace`, in seconds.
    pub fallback_grace: u32,
    /// The binary its daemon runs: this build's unless a test put another in place
    /// (an upgrade, host by host).
    pub bin: PathBuf,
    daemon: Option<Child>,
    runs: u32,
}

impl Host {
    pub fn start(&mut self) {
        self.start_tapped(None);
    }

    /// Starts the daemon; with a `tap`, each stderr line is also handed to it as it
    /// arrives (for timings finer than the log's one-second timestamps).
    pub fn start_tapped(&mut self, tap: Option<Tap>) {
        self.runs += 1;
        let log =
            std::fs::File::create(self.dir.join(format!("daemon-{}.log", self.runs))).unwrap();
        let stderr = if tap.is_some() {
            Stdio::piped()
        } else {
            Stdio::from(log.try_clone().unwrap())
        };
        let mut child = Command::new(&self.bin)
            .arg("--state-dir")
            .arg(&self.dir)
            .args([
                "daemon",
                "--log-level",
                "debug",
                "--fallback-grace",
                &self.fallback_grace.to_string(),
                "--drain-timeout",
                "10",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(stderr)
            .spawn()
            .unwrap();
        if let Some(mut tap) = tap {
            let pipe = child.stderr.take().unwrap();
            let mut log = log;
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    tap(&line);
                    let _ = writeln!(log, "{line}");
                }
            });
        }
        self.daemon = Some(child);
    }

    /// Whether the daemon process is still running (it did not crash).
    pub fn alive(&mut self) -> bool {
        self.daemon
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            kill(&mut c, libc::SIGTERM);
        }
    }

    /// SIGKILLs the daemon (its runners live on, as after a crash).
    #[allow(dead_code)] // benches/pool.rs's endurance run
    pub fn kill(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            kill(&mut c, libc::SIGKILL);
        }
    }

    pub fn mode(&self) -> String {
        let v: serde_json::Value =
            serde_json::from_str(&run_ok(&self.dir, &["--json", "status"])).unwrap();
        v["targets"][0]["mode"].as_str().unwrap_or("").to_string()
    }

    /// `status --json`'s `coordinator_link`: state, since, last error (issue 38).
    pub fn link(&self) -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&run_ok(&self.dir, &["--json", "status"])).unwrap();
        v["coordinator_link"].clone()
    }

    /// Whether the daemon has judged every profile fit to start: a status row written
    /// and no "not yet known" fact (a repository's visibility is read once the link is
    /// up; until then a launch is refused as unfit).
    pub fn judged(&self) -> bool {
        let v: serde_json::Value =
            serde_json::from_str(&run_ok(&self.dir, &["--json", "status"])).unwrap();
        v["profiles"].as_array().is_some_and(|ps| {
            !ps.is_empty()
                && ps
                    .iter()
                    .all(|p| !p["updated_at"].is_null() && !p.to_string().contains("not yet known"))
        })
    }

    pub fn logs(&self) -> String {
        (1..=self.runs)
            .map(|r| {
                std::fs::read_to_string(self.dir.join(format!("daemon-{r}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

pub struct Pool {
    pub sim: SimHandle,
    pub root: PathBuf,
    pub coord_dir: PathBuf,
    pub hosts: Vec<Host>,
    coordinator: Option<Child>,
    port: u16,
}

impl Pool {
    /// A sim with one private repository, a coordinator state directory that knows
    /// `n` hosts, and `n` host state directories, each with a target for the
    /// repository and a pool profile (max `max`), joined to the coordinator when
    /// `coordinated`.
    pub fn new(tag: &str, n: usize, max: u32, coordinated: bool) -> Pool {
        let sim = SimGitHub::start(SimConfig::default()).unwrap();
        sim.add_repo(REPO, true);
        let root = std::env::temp_dir().join(format!(
            "rm-pool-{tag}-{}-{}",
            std::process::id(),
            WORLDS.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let token = format!("ghp_pool{}{}", std::process::id(), tag.len());
        sim.add_pat(&token);
        let token_file = root.join("gh-token");
        write_secret(&token_file, &token);
        let install_dir = root.join("runner-install");
        install::lay_out(&install_dir, Path::new(BIN)).unwrap();
        let coord_dir = root.join("coordinator");
        let tf = token_file.to_str().unwrap();
        run_ok(
            &coord_dir,
            &[
                "target",
                "add",
                "pool",
                "--repo",
                REPO,
                "--api-url",
                sim.url(),
                "--token-file",
                tf,
            ],
        );
        run_ok(&coord_dir, &["target", "set", "pool", "poll_interval=1"]);
        // A free port, so the coordinator can come back on the same address.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("ws://127.0.0.1:{port}");
        let mut hosts = Vec::new();
        for i in 0..n {
            let dir = root.join(format!("host{i}"));
            run_ok(
                &dir,
                &[
                    "target",
                    "add",
                    "app",
                    "--repo",
                    REPO,
                    "--api-url",
                    sim.url(),
                    "--token-file",
                    tf,
                ],
            );
            run_ok(&dir, &["target", "set", "app", "poll_interval=1"]);
            let max_s = max.to_string();
            run_ok(
                &dir,
                &[
                    "profile",
                    "add",
                    "pool",
                    "--target",
                    "app",
                    "--labels",
                    "rm-pool-linux",
                    "--max",
                    &max_s,
                    "--runner-dir",
                    install_dir.to_str().unwrap(),
                    "--idle-timeout",
                    "2",
                ],
            );
            run_ok(&dir, &["host", "set", &format!("capacity={max}")]);
            if coordinated {
                let host_token = run_ok(
                    &coord_dir,
                    &["coordinator", "host", "add", &format!("host{i}")],
                );
                let htf = dir.join("coordinator-token");
                write_secret(&htf, host_token.trim());
                run_ok(
                    &dir,
                    &[
                        "host",
                        "set",
                        &format!("coordinator={url}"),
                        &format!("coordinator_token_file={}", htf.display()),
                    ],
                );
            }
            hosts.push(Host {
                dir,
                fallback_grace: 3,
                bin: PathBuf::from(BIN),
                daemon: None,
                runs: 0,
            });
        }
        Pool {
            sim,
            root,
            coord_dir,
            hosts,
            coordinator: None,
            port,
        }
    }

    /// Gives every host a pool profile `name` (max `max`) whose demand is the scale set
    /// of that name: labels the pool label and `name`, the pool's runner install.
    pub fn add_scaleset_profile(&self, name: &str, max: u32) {
        let install = self.root.join("runner-install");
        for h in &self.hosts {
            run_ok(
                &h.dir,
                &[
                    "profile",
                    "add",
                    name,
                    "--target",
                    "app",
                    "--labels",
                    &format!("rm-pool-linux,{name}"),
                    "--max",
                    &max.to_string(),
                    "--runner-dir",
                    install.to_str().unwrap(),
                    "--idle-timeout",
                    "2",
                ],
            );
            run_ok(&h.dir, &["profile", "set", name, "demand=scaleset"]);
        }
    }

    /// The port the coordinator listens on (the same across its restarts).
    pub fn coordinator_port(&self) -> u16 {
        self.port
    }

    pub fn start_coordinator(&mut self) {
        self.start_coordinator_with(&[]);
    }

    /// Starts the coordinator with more `coordinator serve` options.
    pub fn start_coordinator_with(&mut self, extra: &[&str]) {
        // Appended to, so a restarted coordinator's log follows the first one's.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("coordinator.log"))
            .unwrap();
        // `RM_HEAPTRACK_OUT=PATH` runs the coordinator under heaptrack (a heap profile
        // of a benchmark's coordinator; heaptrack prints a line of its own first).
        let mut cmd = match std::env::var_os("RM_HEAPTRACK_OUT") {
            Some(out) => {
                let mut c = Command::new("heaptrack");
                c.arg("-o").arg(out).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        let mut child = cmd
            .arg("--state-dir")
            .arg(&self.coord_dir)
            .args([
                "coordinator",
                "serve",
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--lease-ttl",
                "20",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        for _ in 0..4 {
            line.clear();
            out.read_line(&mut line).unwrap();
            if line.contains("listening on ") {
                break;
            }
        }
        assert!(line.contains("listening on "), "coordinator said {line:?}");
        self.coordinator = Some(child);
    }

    /// SIGTERM, then waits (30 s at most) for the coordinator to exit: its status, or
    /// `None` when it had to be SIGKILLed.
    pub fn stop_coordinator(&mut self) -> Option<ExitStatus> {
        let mut c = self.coordinator.take()?;
        kill(&mut c, libc::SIGTERM)
    }

    /// The running coordinator's pid.
    #[allow(dead_code)] // benches/pool.rs's endurance run
    pub fn coordinator_pid(&self) -> Option<u32> {
        self.coordinator.as_ref().map(Child::id)
    }

    pub fn kill_coordinator(&mut self) {
        if let Some(mut c) = self.coordinator.take() {
            kill(&mut c, libc::SIGKILL);
        }
    }

    pub fn enqueue(&self, n: usize, prefix: &str, ms: u64) {
        for i in 0..n {
            self.sim.enqueue_job(
                REPO,
                &format!("{prefix}-{i}"),
                &["self-hosted", "linux"],
                ms,
            );
        }
    }

    pub fn all_done(&self) -> bool {
        self.sim
            .jobs()
            .iter()
            .all(|j| j.status == JobStatus::Completed)
    }

    /// JIT configs generated: one per runner started.
    pub fn runners_started(&self) -> usize {
        self.sim
            .request_log()
            .iter()
            .filter(|e| {
                e.method == "POST" && e.endpoint.ends_with("generate-jitconfig") && e.status == 201
            })
            .count()
    }

    /// Waits until every runner of every host is gone (idle surplus timed out).
    pub fn wait_quiet(&self) {
        wait_until(
            Duration::from_secs(40),
            "every registration is gone",
            || self.sim.runners().is_empty(),
        );
    }

    pub fn dump(&self) -> String {
        let mut s = std::fs::read_to_string(self.root.join("coordinator.log")).unwrap_or_default();
        for (i, h) in self.hosts.iter().enumerate() {
            s.push_str(&format!("\n===== host{i}\n{}", h.logs()));
        }
        s
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            h.stop();
        }
        self.kill_coordinator();
        // Whatever runners are left die with their roots.
        for h in &self.hosts {
            for pid in runner_manager::runner::processes_with_cwd_or_exe_under(&h.dir) {
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        } else {
            eprintln!("{}", self.dump());
        }
    }
}

/// A coordinator played by the test: a plain tungstenite server on 127.0.0.1 that
/// checks the host's bearer token in the handshake and speaks the protocol's frames
/// one at a time, so each launch's `launch_ack` can be read back.
pub struct ScriptedCoord {
    listener: std::net::TcpListener,
    token: String,
    ws: Option<tungstenite::WebSocket<std::net::TcpStream>>,
    /// Every report (started, finished) read so far, in order.
    pub reports: Vec<HostMsg>,
}

impl ScriptedCoord {
    pub fn bind(token: &str) -> ScriptedCoord {
        ScriptedCoord {
            listener: std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
            token: token.to_string(),
            ws: None,
            reports: Vec::new(),
        }
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.listener.local_addr().unwrap())
    }

    /// Points the host at this coordinator with a token file holding our token.
    pub fn join(&self, host: &Host) {
        let tf = host.dir.join("coordinator-token");
        write_secret(&tf, &self.token);
        run_ok(
            &host.dir,
            &[
                "host",
                "set",
                &format!("coordinator={}", self.url()),
                &format!("coordinator_token_file={}", tf.display()),
            ],
        );
    }

    /// Accepts the host's next connection (within `secs`), refusing a wrong bearer
    /// token with 401, and reads its `hello`.
    // tungstenite's callback type fixes the error type; this is the test's own.
    #[allow(clippy::result_large_err)]
    pub fn accept(&mut self, secs: u64) -> Hello {
        use tungstenite::handshake::server::{ErrorResponse, Request, Response};
        self.listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(secs);
        let tcp = loop {
            match self.listener.accept() {
                Ok((t, _)) => break t,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "the host did not connect");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        tcp.set_nonblocking(false).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let want = format!("Bearer {}", self.token);
        let cb = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
            let got = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            if got == Some(want.as_str()) {
                Ok(resp)
            } else {
                let mut r = ErrorResponse::new(None);
                *r.status_mut() = tungstenite::http::StatusCode::UNAUTHORIZED;
                Err(r)
            }
        };
        let ws = tungstenite::accept_hdr(tcp, cb).expect("the host's handshake and its token");
        ws.get_ref()
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        self.ws = Some(ws);
        match self.next(10, |m| matches!(m, HostMsg::Hello(_))) {
            Some(HostMsg::Hello(h)) => h,
            other => panic!("expected hello, got {other:?}"),
        }
    }

    /// `hello_ack` version 3 covering these of the host's targets.
    pub fn ack_hello(&mut self, covered: &[&str]) {
        self.send(&CoordMsg::HelloAck(HelloAck {
            version: 3,
            reconcile_interval_secs: None,
            covered: covered.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }));
    }

    pub fn send(&mut self, m: &CoordMsg) {
        self.send_raw(m.encode());
    }

    pub fn send_raw(&mut self, text: String) {
        let ws = self.ws.as_mut().expect("a connection");
        ws.send(tungstenite::Message::text(text)).unwrap();
    }

    /// The next host frame that `want` picks, within `secs`; reports are kept in
    /// `reports` whether picked or not; `None` on timeout or a closed connection.
    pub fn next(&mut self, secs: u64, want: impl Fn(&HostMsg) -> bool) -> Option<HostMsg> {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            let ws = self.ws.as_mut()?;
            match ws.read() {
                Ok(tungstenite::Message::Text(t)) => {
                    let m = HostMsg::decode(t.as_str()).expect("the host sends valid frames");
                    if matches!(m, HostMsg::AttemptStarted(_) | HostMsg::AttemptFinished(_)) {
                        self.reports.push(m.clone());
                    }
                    if want(&m) {
                        return Some(m);
                    }
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {
                    self.ws = None;
                    return None;
                }
            }
        }
        None
    }

    /// Reads (keeping reports) for about `secs`.
    pub fn pump(&mut self, secs: u64) {
        self.next(secs, |_| false);
    }

    /// Whether the host closed the connection within `secs`.
    pub fn closed_within(&mut self, secs: u64) -> bool {
        self.next(secs, |_| false);
        self.ws.is_none()
    }

    /// Sends a launch and returns its `launch_ack` (accepted, reason).
    pub fn launch(&mut self, l: LaunchFrame) -> (bool, Option<String>) {
        let lease = l.lease_id.clone();
        self.send(&CoordMsg::Launch(l));
        match self.next(
            10,
            |m| matches!(m, HostMsg::LaunchAck(a) if a.lease_id == lease),
        ) {
            Some(HostMsg::LaunchAck(a)) => (a.accepted, a.reason),
            other => panic!("no launch_ack for {lease}: {other:?}"),
        }
    }

    /// Reports about a lease: (attempt_started, attempt_finished) counts.
    pub fn reports_for(&self, lease: &str) -> (usize, usize) {
        let is = |l: &Option<String>| l.as_deref() == Some(lease);
        let started = self
            .reports
            .iter()
            .filter(|m| matches!(m, HostMsg::AttemptStarted(s) if is(&s.lease_id)))
            .count();
        let finished = self
            .reports
            .iter()
            .filter(|m| matches!(m, HostMsg::AttemptFinished(f) if is(&f.lease_id)))
            .count();
        (started, finished)
    }
}

/// A launch frame for the host's target `app`.
pub fn launch(lease: &str, profile: &str, ttl_secs: u64) -> LaunchFrame {
    LaunchFrame {
        target: "app".into(),
        profile: profile.into(),
        job_key: format!("job-of-{lease}"),
        lease_id: lease.into(),
        expires_at: "2030-01-01T00:00:00Z".into(),
        ttl_secs,
    }
}
