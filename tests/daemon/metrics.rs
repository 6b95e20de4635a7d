//! The daemon's metrics and systemd notifications, end to end: the real binary with
//! `--metrics-listen` on loopback, scraped while it serves jobs from the simulated
//! GitHub and parsed strictly (the parser of `tests/ship/`, which shares no code with
//! the writer); `/healthz`; a non-loopback address refused with exit 2; `READY=1` and
//! `WATCHDOG=1` received on a `NOTIFY_SOCKET` this test binds. Figures (start to
//! ready, scrape time) are printed, never asserted.

#[path = "../ship/exposition.rs"]
mod exposition;

use super::support::*;
use exposition::{Family, parse};
use runner_manager::metrics::names;
use runner_manager::sim::client::request;
use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A `NOTIFY_SOCKET` of our own: what systemd would receive from a `Type=notify` unit.
pub struct NotifySocket {
    sock: UnixDatagram,
    pub path: PathBuf,
}

impl NotifySocket {
    pub fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).expect("the notify socket binds");
        NotifySocket { sock, path }
    }

    /// Waits (bounded) for a datagram carrying `state` (e.g. `READY=1`) and returns
    /// when it arrived; other states received before it are skipped.
    pub fn wait_for(&self, state: &str, within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        let mut buf = [0u8; 4096];
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {state} on NOTIFY_SOCKET within {within:?}; got {seen:?}"
            );
            self.sock.set_read_timeout(Some(left)).unwrap();
            if let Ok(n) = self.sock.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).to_string();
                if msg.lines().any(|l| l == state) {
                    return Instant::now();
                }
                seen.push(msg);
            }
        }
    }
}

/// A daemon this file starts itself (with its own flags and environment), killed on
/// drop so a failing test leaks nothing.
pub struct Spawned {
    pub child: Option<Child>,
    pub log: PathBuf,
    pub spawned_at: Instant,
}

impl Spawned {
    pub fn start(
        dir: &Path,
        log_name: &str,
        args: &[&str],
        notify: Option<&NotifySocket>,
    ) -> Spawned {
        let log = dir.join(log_name);
        let f = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("--state-dir")
            .arg(dir)
            .arg("daemon")
            .args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID");
        if let Some(n) = notify {
            // Half of 400 ms is shorter than the daemon's one-second tick, so it pings
            // on every tick.
            cmd.env("NOTIFY_SOCKET", &n.path)
                .env("WATCHDOG_USEC", "400000");
        }
        let spawned_at = Instant::now();
        let child = cmd.spawn().expect("the daemon starts");
        Spawned {
            child: Some(child),
            log,
            spawned_at,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address the metrics listener bound, from its `metrics_listening` log line
    /// (so the test can ask for port 0 and never race for a free port).
    pub fn metrics_addr(&self) -> String {
        metrics_addr_in(&self.log)
    }

    /// Waits (bounded) for the daemon to exit on its own.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let mut st = None;
        let ok = poll_until(SETTLE, || {
            st = child.try_wait().unwrap();
            st.is_some()
        });
        assert!(ok, "the daemon did not exit within {SETTLE:?}");
        self.child = None;
        st.unwrap()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- {} ---\n{}", self.log.display(), self.log_text());
        }
    }
}

/// The address a daemon's metrics listener bound, from the `metrics_listening` line of
/// its log (so a test can ask for port 0 and never race for a free port).
pub(super) fn metrics_addr_in(log: &Path) -> String {
    let mut addr = None;
    wait_until(SETTLE, "the metrics_listening log line", || {
        addr = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains("msg=metrics_listening"))
            .and_then(|l| l.split(' ').find_map(|kv| kv.strip_prefix("addr=")))
            .map(|a| a.trim_matches('"').to_string());
        addr.is_some()
    });
    addr.unwrap()
}

pub(super) fn get(addr: &str, path: &str) -> (u16, String) {
    let r = request(
        &format!("http://{addr}"),
        "GET",
        path,
        &[],
        None,
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("GET {path} on {addr}: {e}"));
    (r.status, String::from_utf8(r.body).expect("UTF-8"))
}

pub(super) fn scrape(addr: &str) -> BTreeMap<String, Family> {
    let (status, text) = get(addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    parse(&text).unwrap_or_else(|e| panic!("the exposition does not parse: {e}\n{text}"))
}

/// The value of the sample of `family` named `sample` with exactly `labels`.
pub(super) fn value(
    fams: &BTreeMap<String, Family>,
    family: &str,
    sample: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    fams.get(family)?
        .samples
        .iter()
        .find(|s| {
            s.name == sample
                && s.labels.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(a, b)| a == k && b == v))
        })
        .map(|s| s.value)
}

/// Sum of a family's samples whose labels include `labels`.
fn sum(fams: &BTreeMap<String, Family>, family: &str, labels: &[(&str, &str)]) -> f64 {
    fams.get(family).map_or(0.0, |f| {
        f.samples
            .iter()
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(a, b)| a == k && b == v))
            })
            .map(|s| s.value)
            .sum()
    })
}

const JITCONFIG: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";

#[test]
fn a_running_daemon_serves_metrics_that_parse_strictly_and_say_what_it_did() {
    let mut w = World::new("metrics", 4);
    w.add_target("t", "acme/metrics", true);
    w.add_profile(ProfileSpec::new("p", "t", &["m"]).max(3).idle_timeout(1));
    for n in 0..3 {
        w.enqueue("acme/metrics", &format!("job{n}"), &["m"], 3000);
    }
    let notify = NotifySocket::bind(&w.dir);
    let d = Spawned::start(
        &w.dir,
        "daemon-metrics.log",
        &["--metrics-listen", "127.0.0.1:0", "--log-level", "debug"],
        Some(&notify),
    );
    let ready = notify.wait_for("READY=1", SETTLE);
    println!(
        "figure: daemon start to READY=1 on NOTIFY_SOCKET: {:.1} ms (debug build, 1 target)",
        (ready - d.spawned_at).as_secs_f64() * 1e3
    );
    notify.wait_for("WATCHDOG=1", SETTLE);
    let addr = d.metrics_addr();

    // While the jobs run: busy runners by profile, with the other live states as 0.
    let mut seen_busy = false;
    wait_until(SETTLE, "a scrape showing busy runners of p", || {
        let fams = scrape(&addr);
        seen_busy = value(
            &fams,
            names::RUNNERS,
            names::RUNNERS,
            &[("profile", "p"), ("state", "busy")],
        )
        .is_some_and(|v| v >= 1.0);
        seen_busy
    });
    let fams = scrape(&addr);
    for (name, f) in &fams {
        assert!(!f.help.is_empty(), "{name} has HELP text");
    }
    for state in ["pending", "starting", "idle", "busy"] {
        assert!(
            value(
                &fams,
                names::RUNNERS,
                names::RUNNERS,
                &[("profile", "p"), ("state", state)]
            )
            .is_some(),
            "runners of p in {state} is reported (0 when none)"
        );
    }
    let (status, body) = get(&addr, "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    w.wait_settled(&["acme/metrics"]);
    let fams = scrape(&addr);
    let starts = value(&fams, names::STARTS, names::STARTS, &[("profile", "p")]);
    assert_eq!(starts, Some(3.0), "three runners started");
    let q = format!("{}_count", names::QUEUE_TO_START);
    assert_eq!(
        value(&fams, names::QUEUE_TO_START, &q, &[("profile", "p")]),
        Some(3.0),
        "one queue-to-start observation per started runner"
    );
    assert!(
        value(&fams, names::DEMAND, names::DEMAND, &[("profile", "p")]).is_some(),
        "demand of p is reported"
    );
    // Every pass of t's loop so far is one observation of its CPU time.
    let passes = format!("{}_count", names::PASS_CPU);
    assert!(
        value(&fams, names::PASS_CPU, &passes, &[("target", "t")]).is_some_and(|n| n >= 2.0),
        "t's passes are timed: {:?}",
        fams.get(names::PASS_CPU).map(|f| &f.samples)
    );
    let pass_sum = format!("{}_sum", names::PASS_CPU);
    assert!(
        value(&fams, names::PASS_CPU, &pass_sum, &[("target", "t")]).is_some_and(|s| s > 0.0),
        "a pass costs some CPU"
    );
    // Every JIT POST the sim answered is counted, by template and status.
    let sim_jit: Vec<u16> = w
        .log()
        .iter()
        .filter(|e| e.endpoint == JITCONFIG)
        .map(|e| e.status)
        .collect();
    assert_eq!(sim_jit.len(), 3, "{sim_jit:?}");
    let counted = sum(
        &fams,
        names::GITHUB_REQUESTS,
        &[("target", "t"), ("endpoint", JITCONFIG)],
    );
    assert_eq!(counted, 3.0, "JIT requests counted by endpoint template");
    let status = sim_jit[0].to_string();
    assert_eq!(
        sum(
            &fams,
            names::GITHUB_REQUESTS,
            &[("endpoint", JITCONFIG), ("status", &status)]
        ),
        3.0
    );
    assert!(sum(&fams, names::GITHUB_REQUESTS, &[("endpoint", RUNS)]) >= 1.0);
    // No concrete path ever becomes a label value.
    for s in &fams[names::GITHUB_REQUESTS].samples {
        let ep = &s.labels.iter().find(|(k, _)| k == "endpoint").unwrap().1;
        assert!(
            !ep.contains("acme"),
            "a concrete path leaked into a label: {ep}"
        );
    }
    let remaining = value(
        &fams,
        names::RATE_LIMIT_REMAINING,
        names::RATE_LIMIT_REMAINING,
        &[("target", "t")],
    )
    .expect("rate limit remaining of t");
    assert!(remaining > 0.0 && remaining < 5000.0, "{remaining}");
    assert_eq!(
        value(
            &fams,
            names::LINK_MODE,
            names::LINK_MODE,
            &[("target", "t"), ("mode", "standalone")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sum(&fams, names::FAILURES, &[]),
        0.0,
        "nothing failed: {:?}",
        fams[names::FAILURES].samples
    );
    w.check_invariants(&["acme/metrics"]);

    // Scrape time of this daemon, with its few series (the 200-attempt figure is in
    // `scrape_figure_with_200_live_attempts`).
    let t = Instant::now();
    for _ in 0..20 {
        get(&addr, "/metrics");
    }
    println!(
        "figure: HTTP scrape of a running daemon (3 attempts): {:.2} ms each",
        t.elapsed().as_secs_f64() * 1e3 / 20.0
    );
}

#[test]
fn a_non_loopback_metrics_address_is_refused_with_exit_2() {
    let w = World::new("metrics-addr", 1);
    for (addr, says) in [
        ("0.0.0.0:9464", "is not a loopback address"),
        ("192.0.2.1:9464", "is not a loopback address"),
        ("localhost:9464", "expected IP:PORT"),
        ("127.0.0.1", "expected IP:PORT"),
    ] {
        let out = w.cli(&["daemon", "--metrics-listen", addr]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{addr}: {err}");
        assert!(
            err.contains("--metrics-listen") && err.contains(says),
            "{addr}: {err}"
        );
    }
    // Refused before the daemon ran: no heartbeat was written.
    assert_eq!(
        w.status_json()["daemon"]["running"],
        serde_json::json!(false)
    );
}

/// Issue 33: 515 connections that sent only `POST / HTTP/1.1\r\n` made `/healthz`
/// answer 503 for as long as they stayed open; now it answers 200 within seconds.
#[test]
fn a_flood_of_half_sent_requests_does_not_keep_healthz_from_answering() {
    use std::io::Write;
    use std::net::TcpStream;
    let w = World::new("metrics-flood", 1);
    let d = Spawned::start(
        &w.dir,
        "daemon-metrics-flood.log",
        &["--metrics-listen", "127.0.0.1:0"],
        None,
    );
    let addr = d.metrics_addr();
    let flood: Vec<TcpStream> = (0..515)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).expect("connect");
            s.write_all(b"POST / HTTP/1.1\r\n").expect("send");
            s
        })
        .collect();
    let t = Instant::now();
    let r = request(
        &format!("http://{addr}"),
        "GET",
        "/healthz",
        &[],
        None,
        Duration::from_secs(5),
    )
    .map(|r| r.status);
    let took = t.elapsed();
    println!("GET /healthz under a flood of 515: {r:?} in {took:?}");
    assert_eq!(r.ok(), Some(200));
    assert!(took < Duration::from_secs(5), "{took:?}");
    for s in &flood {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    drop(flood);
    drop(d);
}

#[test]
fn scrape_figure_with_200_live_attempts() {
    use runner_manager::domain::AttemptState;
    use runner_manager::metrics::Metrics;
    use runner_manager::store::{NewAttempt, Store};
    let mut w = World::new("metrics-200", 400);
    w.add_target("t", "acme/many", true);
    w.add_profile(ProfileSpec::new("a", "t", &["a"]).max(200));
    w.add_profile(ProfileSpec::new("b", "t", &["b"]).max(200));
    // 200 open attempts in four live states, through the store's API. Their target is
    // one no loop serves, so no pass ends them: the main thread counts all 200 on
    // every tick, as it would 200 live runners.
    let store = w.store();
    let now = runner_manager::timefmt::now_millis();
    let path = [
        AttemptState::Starting,
        AttemptState::Idle,
        AttemptState::Busy,
    ];
    for i in 0..200 {
        let mut a = store
            .create_attempt(
                &NewAttempt {
                    profile: if i % 2 == 0 { "a" } else { "b" }.into(),
                    target: "parked".into(),
                    host_id: w.host_id.clone(),
                    ..NewAttempt::default()
                },
                now,
            )
            .unwrap();
        for s in &path[..(i / 2) % 4] {
            a.step(*s, now).unwrap();
        }
        store.save_attempt(&a).unwrap();
    }
    let d = Spawned::start(
        &w.dir,
        "daemon-200.log",
        &["--metrics-listen", "127.0.0.1:0"],
        None,
    );
    let addr = d.metrics_addr();
    wait_until(SETTLE, "200 runners counted in the scrape", || {
        sum(&scrape(&addr), names::RUNNERS, &[]) == 200.0
    });
    let fams = scrape(&addr);
    assert_eq!(
        value(
            &fams,
            names::RUNNERS,
            names::RUNNERS,
            &[("profile", "a"), ("state", "busy")]
        ),
        Some(25.0)
    );
    let n = 50;
    let t = Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        bytes = get(&addr, "/metrics").1.len();
    }
    println!(
        "figure: HTTP scrape of a running daemon with 200 live attempts: {:.2} ms each ({bytes} bytes; debug build)",
        t.elapsed().as_secs_f64() * 1e3 / n as f64
    );

    // The worst case for the registry: 200 attempts in 200 profiles, each started,
    // observed and failed once, plus every GitHub endpoint at three statuses.
    let m = Metrics::new();
    let profiles: Vec<String> = (0..200).map(|i| format!("profile-{i}")).collect();
    let rows: Vec<(&str, &str, u64)> = profiles.iter().map(|p| (p.as_str(), "busy", 1)).collect();
    m.set_runners(&rows);
    for p in &profiles {
        m.set_demand(p, 1);
        m.runner_started(p);
        m.queue_to_start(p, 4.2);
        m.runner_failed(p, "exited_during_job");
    }
    for ep in runner_manager::github::endpoint::TEMPLATES {
        for st in [200, 304, 500] {
            m.github_request("t", ep, st);
        }
    }
    let n = 200;
    let t = Instant::now();
    let mut len = 0;
    for _ in 0..n {
        len = m.render().len();
    }
    println!(
        "figure: rendering the registry with 200 attempts in 200 profiles: {:.3} ms each ({len} bytes; debug build)",
        t.elapsed().as_secs_f64() * 1e3 / n as f64
    );
    parse(&m.render()).expect("the worst case parses strictly");
}

/// Issue 35, item 5: the usage counters per repository add up to what `usage` says,
/// under at most `usage_metrics_top` names (here 1), the rest as `other`.
#[test]
fn usage_counters_name_the_top_repositories_and_add_up_to_the_usage_command() {
    let mut w = World::new("metrics-usage", 4);
    w.add_target("one", "acme/one", true);
    w.add_target("two", "acme/two", true);
    w.add_profile(ProfileSpec::new("p1", "one", &["u"]).max(2).idle_timeout(1));
    w.add_profile(ProfileSpec::new("p2", "two", &["u"]).max(2).idle_timeout(1));
    w.cli_ok(&["host", "set", "usage_metrics_top=1"]);
    let d = Spawned::start(
        &w.dir,
        "daemon-metrics-usage.log",
        &["--metrics-listen", "127.0.0.1:0", "--upkeep-every", "1"],
        None,
    );
    let addr = d.metrics_addr();
    for n in 0..2 {
        // A repository target's jobs count under its repository whether or not a read
        // of the runs in progress (every 10 s) named each job's owner.
        w.enqueue("acme/one", &format!("one{n}"), &["u"], 3000);
        w.enqueue("acme/two", &format!("two{n}"), &["u"], 3000);
    }
    w.wait_settled(&["acme/one", "acme/two"]);
    let usage: serde_json::Value =
        serde_json::from_str(&w.cli_ok(&["usage", "--by", "repo", "--json"])).unwrap();
    let jobs_in_usage = usage["total"]["jobs"].as_f64().expect("usage totals jobs");
    assert_eq!(jobs_in_usage, 4.0, "{usage}");
    let mut fams = scrape(&addr);
    wait_until(SETTLE, "the usage counters to reach the roll-up", || {
        fams = scrape(&addr);
        sum(&fams, names::USAGE_JOBS, &[]) >= jobs_in_usage
    });
    assert_eq!(sum(&fams, names::USAGE_JOBS, &[]), jobs_in_usage);
    let labels: Vec<String> = fams[names::USAGE_JOBS]
        .samples
        .iter()
        .map(|s| {
            s.labels
                .iter()
                .find(|(k, _)| k == "repo")
                .unwrap()
                .1
                .clone()
        })
        .collect();
    let named: Vec<&String> = labels.iter().filter(|l| l.starts_with("acme/")).collect();
    assert_eq!(
        named.len(),
        1,
        "one repository named, the other is `other`: {labels:?}\n{usage}"
    );
    assert!(labels.iter().any(|l| l == "other"), "{labels:?}");
    assert_eq!(
        value(
            &fams,
            names::USAGE_JOBS,
            names::USAGE_JOBS,
            &[("repo", named[0])]
        ),
        Some(2.0)
    );
    // Every runner-second the roll-up holds is counted, busy and idle.
    let busy = usage["total"]["busy_seconds"]
        .as_f64()
        .expect("busy_seconds");
    let counted = sum(&fams, names::USAGE_RUNNER_SECONDS, &[("state", "busy")]);
    assert!(
        (counted - busy).abs() < 1.0,
        "{counted} against {busy} (whole seconds)"
    );
    assert!(fams.contains_key(names::USAGE_CPU) && fams.contains_key(names::USAGE_GIB_SECONDS));
}
