//! The simulated runner: behaves like actions-runner's `bin/Runner.Listener run` with a
//! JIT config (reads and drops `ACTIONS_RUNNER_INPUT_JITCONFIG`, writes `.runner` and
//! `.credentials`, prints the real lines, takes one job, exits), talking to the sim's
//! private `/_sim/runner/*` endpoints. Faults come from the JIT config.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::client;
use super::control::RUNNER_VERSION;
use super::faults::RunnerFault;
use super::jit::{self, JitConfig};
use crate::timefmt::{format_rfc3339, now_millis};

pub const JIT_ENV: &str = "ACTIONS_RUNNER_INPUT_JITCONFIG";

/// How long the runner keeps retrying an unreachable server before giving up (exit 2,
/// the real runner's "retryable error"), so an orphaned sim runner cannot loop forever.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// `yyyy-MM-dd HH:mm:ssZ`, the runner's log prefix.
pub fn stamp() -> String {
    format_rfc3339(now_millis()).replacen('T', " ", 1)
}

/// The install root: the directory above `bin/`, found from how we were invoked (a hard
/// link's own path, not its target's).
fn root_dir() -> PathBuf {
    let argv0 = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .unwrap_or_default();
    let exe = if argv0.components().count() > 1 {
        std::env::current_dir()
            .map(|d| d.join(&argv0))
            .unwrap_or(argv0)
    } else {
        std::env::current_exe().unwrap_or(argv0)
    };
    let bin = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    bin.parent().map(Path::to_path_buf).unwrap_or(bin)
}

fn wait_or_term(term: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if term.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
    }
    term.load(Ordering::SeqCst)
}

/// `Runner.Listener` entry point; returns the exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("run") => {}
        Some("--version") => {
            println!("{RUNNER_VERSION}");
            return 0;
        }
        Some(other) => {
            eprintln!(
                "Unrecognized command-line input arguments: '{other}'. For usage refer to: .\\config.cmd --help or ./config.sh --help"
            );
            return 1;
        }
    }
    let encoded = std::env::var(JIT_ENV).ok();
    // SAFETY: no other thread exists yet, so nothing can read the environment concurrently.
    // The real runner drops the variable too, so children never inherit the config.
    unsafe { std::env::remove_var(JIT_ENV) };
    let Some(encoded) = encoded.map(crate::secret::Secret::new) else {
        eprintln!(
            "An error occurred: Not configured. Run config.(sh/cmd) to configure the runner."
        );
        return 1;
    };
    let (cfg, files) = match jit::decode(encoded.expose()) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("An error occurred: {e}");
            return 1;
        }
    };
    let root = root_dir();
    for (name, bytes) in files {
        if let Err(e) = std::fs::write(root.join(name), bytes) {
            eprintln!(
                "An error occurred: cannot write {} in {} ({e})",
                name,
                root.display()
            );
            return 1;
        }
    }
    let term = Arc::new(AtomicBool::new(false));
    if cfg.faults.contains(&RunnerFault::IgnoreSigterm) {
        // SAFETY: setting a signal disposition to SIG_IGN has no handler to race with.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    } else {
        let _ = signal_hook::flag::register(signal_hook::consts::SIGTERM, term.clone());
    }
    let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, term.clone());
    run(&cfg, &root, &term)
}

/// The version this runner is: its install's `bin/runnerversion` (a release served by
/// the sim says which it is), else the sim's own.
fn own_version(root: &Path) -> String {
    std::fs::read_to_string(root.join("bin/runnerversion"))
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| RUNNER_VERSION.to_string())
}

/// What the real runner does when told to update (`SelfUpdater`): downloads the new
/// release into its own root's `_work/_update`, then exits for the update script to
/// replace its `bin/` and `externals/` (exit 4, a run-once runner updating). Here: the
/// lines, the directory, and the sim told, so tests can count it.
fn self_update(cfg: &JitConfig, root: &Path, call: &Call<'_>, version: &str) -> i32 {
    println!("Runner update in progress, do not shutdown runner.");
    println!("Downloading {version} runner");
    let _ = std::fs::create_dir_all(root.join("_work/_update"));
    let body = serde_json::json!({"runner_id": cfg.runner_id, "version": version});
    let _ = call(
        "POST",
        "/_sim/runner/self_update",
        Some(body),
        Duration::from_secs(10),
    );
    println!("Runner will exit shortly for update, should be back online within 10 seconds.");
    4
}

fn run(cfg: &JitConfig, root: &Path, term: &AtomicBool) -> i32 {
    if cfg.faults.contains(&RunnerFault::CrashAtStart) {
        eprintln!("Unhandled exception: System.IO.IOException: simulated crash at start");
        return 1;
    }
    if cfg.faults.contains(&RunnerFault::HangBeforeListening) {
        while !wait_or_term(term, Duration::from_secs(3600)) {}
        return 0;
    }
    let auth = format!("Bearer {}", cfg.credential.expose());
    let call = |method: &str, path: &str, body: Option<serde_json::Value>, timeout: Duration| {
        let bytes = body.map(|b| b.to_string().into_bytes());
        client::request(
            &cfg.server_url,
            method,
            path,
            &[
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
            ],
            bytes.as_deref(),
            timeout,
        )
    };
    // Connect (retrying like the real runner while the server is unreachable).
    let version = own_version(root);
    let mut failing_since: Option<Instant> = None;
    let update = loop {
        let body = serde_json::json!({
            "runner_id": cfg.runner_id,
            "version": version,
            "disable_update": cfg.disable_update,
        });
        match call(
            "POST",
            "/_sim/runner/connect",
            Some(body),
            Duration::from_secs(10),
        ) {
            Ok(r) if r.status == 200 => {
                let v = r.json().unwrap_or_default();
                break v["update"].as_str().map(str::to_string);
            }
            Ok(r) if r.status == 404 => return gone(),
            Ok(r) => eprintln!(
                "Runner connect error: the server answered {}. Retrying until reconnected.",
                r.status
            ),
            Err(e) => eprintln!("Runner connect error: {e}. Retrying until reconnected."),
        }
        if failing_since.get_or_insert_with(Instant::now).elapsed() > GIVE_UP_AFTER {
            return 2;
        }
        if wait_or_term(term, Duration::from_secs(1)) {
            return 0;
        }
    };
    println!("√ Connected to GitHub");
    println!();
    println!("Current runner version: '{version}'");
    if cfg.faults.contains(&RunnerFault::SessionConflict) {
        eprintln!("{}: A session for this runner already exists.", stamp());
        return 5;
    }
    if cfg.faults.contains(&RunnerFault::Deprecated) {
        eprintln!(
            "{}: Runner version v{version} is deprecated and cannot receive messages.",
            stamp()
        );
        return 7;
    }
    println!("{}: Listening for Jobs", stamp());
    if let Some(to) = update {
        return self_update(cfg, root, &call, &to);
    }
    let mut failing_since: Option<Instant> = None;
    loop {
        if term.load(Ordering::SeqCst) {
            println!("{}: Exiting...", stamp());
            return 0;
        }
        let path = format!("/_sim/runner/poll?runner_id={}", cfg.runner_id);
        match call("GET", &path, None, Duration::from_secs(30)) {
            Ok(r) if r.status == 200 => {
                let v = r.json().unwrap_or_default();
                let job = &v["job"];
                let j = Job {
                    id: job["id"].as_u64().unwrap_or(0),
                    name: job["name"].as_str().unwrap_or("job").to_string(),
                    ms: job["duration_ms"].as_u64().unwrap_or(0),
                    script: job["script"].as_str().map(str::to_string),
                    renew_ms: job["renew_ms"].as_u64().unwrap_or(60_000),
                };
                return run_job(cfg, root, term, &call, &j);
            }
            Ok(r) if r.status == 204 => failing_since = None,
            Ok(r) if r.status == 404 || r.status == 401 => return gone(),
            // Any other answer (a 5xx, a 409) is retried as an unreachable server is,
            // a second apart and for GIVE_UP_AFTER at most: asked again at once, a
            // server that keeps failing fast would have this loop spin a core.
            failed => {
                let why = match failed {
                    Ok(r) => format!("the server answered {}", r.status),
                    Err(e) => e.to_string(),
                };
                eprintln!(
                    "{}: Runner connect error: {why}. Retrying until reconnected.",
                    stamp()
                );
                if failing_since.get_or_insert_with(Instant::now).elapsed() > GIVE_UP_AFTER {
                    return 2;
                }
                if wait_or_term(term, Duration::from_secs(1)) {
                    return 0;
                }
            }
        }
    }
}

fn gone() -> i32 {
    eprintln!(
        "{}: The runner no longer exists on the server. Please reconfigure the runner.",
        stamp()
    );
    0
}

type Call<'a> = dyn Fn(&str, &str, Option<serde_json::Value>, Duration) -> std::io::Result<client::ClientResponse>
    + 'a;

/// A job as the simulation hands it out.
struct Job {
    id: u64,
    name: String,
    ms: u64,
    /// Steps to run with `/bin/sh -c` (see `SCRIPT_ENV`).
    script: Option<String>,
    /// How often to renew the job while it runs.
    renew_ms: u64,
}

/// The variable the listener hands a job's script to its worker in.
const SCRIPT_ENV: &str = "RUNNER_MANAGER_SIM_JOB_SCRIPT";
/// Where the worker writes the script's output, for the listener to report.
const OUTPUT_FILE: &str = "_work/_job_output.txt";

fn run_job(cfg: &JitConfig, root: &Path, term: &AtomicBool, call: &Call<'_>, job: &Job) -> i32 {
    let (id, name, ms) = (job.id, job.name.as_str(), job.ms);
    println!("{}: Running job: {name}", stamp());
    let worker = root.join("bin").join("Runner.Worker");
    let output_file = root.join(OUTPUT_FILE);
    let mut cmd = Command::new(&worker);
    cmd.args(["spawnclient", &ms.to_string()]);
    if let Some(script) = &job.script {
        cmd.env(SCRIPT_ENV, script)
            .env("RUNNER_MANAGER_SIM_JOB_OUTPUT", &output_file)
            .env("GITHUB_WORKSPACE", root.join("_work"))
            .env("RUNNER_TEMP", root.join("_work/_temp"));
    }
    let mut child: Option<Child> = cmd.spawn().ok();
    let started = Instant::now();
    let mut renewed = Instant::now();
    let mut result = "Succeeded";
    loop {
        if renewed.elapsed() >= Duration::from_millis(job.renew_ms) {
            renewed = Instant::now();
            let body = serde_json::json!({"runner_id": cfg.runner_id, "job_id": id});
            let _ = call(
                "POST",
                "/_sim/runner/renew",
                Some(body),
                Duration::from_secs(10),
            );
        }
        let done = match &mut child {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => started.elapsed() >= Duration::from_millis(ms),
        };
        if done {
            if let Some(c) = &mut child
                && let Ok(Some(status)) = c.wait().map(Some)
                && !status.success()
            {
                result = "Failed";
            }
            break;
        }
        if term.load(Ordering::SeqCst) {
            if let Some(c) = &mut child {
                let _ = c.kill();
                let _ = c.wait();
            }
            result = "Canceled";
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if cfg.faults.contains(&RunnerFault::LeaveBackgroundProcess) {
        // Deliberately not waited for: the leak the daemon's cleanup must find.
        let _ = Command::new(&worker).args(["linger", "30000"]).spawn();
    }
    // The script's output, bounded: what a workflow's log would show.
    let output = job.script.as_ref().map(|_| {
        let bytes = std::fs::read(&output_file).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(64 * 1024)]).into_owned();
        print!("{text}");
        text
    });
    let body = serde_json::json!({"runner_id": cfg.runner_id, "job_id": id, "result": result, "output": output});
    if let Err(e) = call(
        "POST",
        "/_sim/runner/complete",
        Some(body),
        Duration::from_secs(10),
    ) {
        eprintln!(
            "{}: Runner connect error: {e}. The job result could not be reported.",
            stamp()
        );
    }
    println!("{}: Job {name} completed with result: {result}", stamp());
    if cfg.faults.contains(&RunnerFault::ExitNonZeroAfterJob) {
        1
    } else {
        0
    }
}

/// `Runner.Worker` entry point: `spawnclient MS` runs a job for MS milliseconds (or,
/// given a script in its environment, runs the script as the job's steps and exits
/// with its code), `linger MS` is a left-behind process that lives MS milliseconds.
pub fn worker_main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ms: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    if let (Some("spawnclient"), Some(script)) = (
        args.first().map(String::as_str),
        std::env::var_os(SCRIPT_ENV),
    ) {
        return run_script(&script);
    }
    match args.first().map(String::as_str) {
        Some("spawnclient") | Some("linger") => {
            std::thread::sleep(Duration::from_millis(ms));
            0
        }
        _ => {
            eprintln!("Runner.Worker: expected spawnclient or linger");
            1
        }
    }
}

/// Runs a job's script like a `run:` step: `/bin/sh -c`, in the work folder, its
/// output to the file the listener reports from (a file, not a pipe: a process the
/// script leaves behind must not keep the job from ending).
fn run_script(script: &std::ffi::OsStr) -> i32 {
    let Some(out_path) = std::env::var_os("RUNNER_MANAGER_SIM_JOB_OUTPUT") else {
        eprintln!("Runner.Worker: a script job needs RUNNER_MANAGER_SIM_JOB_OUTPUT");
        return 1;
    };
    let workspace = std::env::var_os("GITHUB_WORKSPACE").unwrap_or_else(|| ".".into());
    if let Some(t) = std::env::var_os("RUNNER_TEMP") {
        let _ = std::fs::create_dir_all(t);
    }
    let out = match std::fs::File::create(&out_path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("Runner.Worker: cannot write the job's output: {e}");
            return 1;
        }
    };
    let err = match out.try_clone() {
        Ok(f) => f,
        Err(_) => return 1,
    };
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .env_remove(SCRIPT_ENV)
        .env_remove("RUNNER_MANAGER_SIM_JOB_OUTPUT")
        .current_dir(&workspace)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .status();
    match status {
        Ok(s) => s.code().unwrap_or(1),
        Err(e) => {
            eprintln!("Runner.Worker: cannot run the job's script: {e}");
            1
        }
    }
}
