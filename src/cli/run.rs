//! Commands that run something rather than edit the books: `daemon`, `drain`,
//! `target check`, `demo` and `sim github`.

use super::exit::Failure;
use super::output::Out;
use super::parse::Invocation;
use super::spec::{Opt, opts};
use super::{CliError, CliResult};
use crate::daemon::{DaemonError, DaemonOptions};
use crate::domain::{AttemptState, validate};
use crate::github::{CheckOptions, GitHubClient, check_line, check_target, load_credential};
use crate::logging::Level;
use crate::scaleset;
use crate::store::{AttemptFilter, Store};
use crate::units;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

pub fn daemon(inv: &Invocation, dir: &Path) -> CliResult {
    if inv.flag(&opts::daemon::RELEASE_CGROUPS) {
        return release_cgroups(inv);
    }
    let log_level = match inv.value(&opts::daemon::LOG_LEVEL) {
        None => Level::Info,
        Some(v) => Level::parse(v).ok_or_else(|| {
            CliError::usage(
                "--log-level",
                &format!("expected error, warn, info or debug (got {v:?})"),
            )
        })?,
    };
    let drain_timeout = match inv.value(&opts::daemon::DRAIN_TIMEOUT) {
        None => 30,
        Some(v) => validate::seconds_in("--drain-timeout", v, 0, 86_400)?,
    };
    let fallback_grace = match inv.value(&opts::daemon::FALLBACK_GRACE) {
        None => 30,
        Some(v) => validate::seconds_in("--fallback-grace", v, 1, 86_400)?,
    };
    let fitness_every = match inv.value(&opts::daemon::FITNESS_EVERY) {
        None => crate::daemon::FITNESS_EVERY.as_secs(),
        Some(v) => validate::seconds_in("--fitness-every", v, 1, 86_400)?,
    };
    let runner_check = match inv.value(&opts::daemon::RUNNER_CHECK) {
        None => crate::daemon::RUNNER_CHECK_EVERY.as_secs(),
        Some(v) => validate::seconds_in("--runner-check", v, 0, 30 * 86_400)?,
    };
    let upkeep_every = match inv.value(&opts::daemon::UPKEEP_EVERY) {
        None => crate::daemon::UPKEEP_EVERY.as_secs(),
        Some(v) => validate::seconds_in("--upkeep-every", v, 1, 86_400)?,
    };
    let metrics_listen = inv
        .value(&opts::daemon::METRICS_LISTEN)
        .map(metrics_listen)
        .transpose()?;
    let options = DaemonOptions {
        fallback_grace: Duration::from_secs(fallback_grace),
        state_dir: dir.to_path_buf(),
        once: inv.flag(&opts::daemon::ONCE),
        drain_timeout: Duration::from_secs(drain_timeout),
        log_level,
        metrics_listen,
        fitness_every: Duration::from_secs(fitness_every),
        runner_check: Duration::from_secs(runner_check),
        upkeep_every: Duration::from_secs(upkeep_every),
        config: inv
            .value(&opts::daemon::CONFIG)
            .map(config_file)
            .transpose()?,
    };
    match crate::daemon::run(options) {
        Ok(crate::daemon::Stopped::Terminated) => Ok(()),
        Ok(crate::daemon::Stopped::Interrupted) => Err(CliError::Interrupted(
            "daemon: interrupted (SIGINT); runners still running keep running, and the next \
             daemon on this state directory adopts them"
                .into(),
        )),
        Ok(crate::daemon::Stopped::Handover) => Err(CliError::classed(
            Failure::Handover,
            format!(
                "drained for a new binary: exit {} so that its supervisor starts the new one \
                 (systemd, or a docs/supervisors.md recipe)",
                Failure::Handover.code()
            ),
        )),
        Err(DaemonError::Store(s)) => Err(CliError::Store(s)),
        Err(other) => {
            let mut err = CliError::classed(Failure::of_daemon(&other), other.to_string());
            // A copied state directory: its fix is the one command that gives it an id.
            if let (
                DaemonError::Lock(crate::facts::lock::LockError::HostId { state_dir, .. }),
                CliError::Classed { subject, .. },
            ) = (&other, &mut err)
            {
                subject.fix = Some(format!(
                    "runner-manager --state-dir {} host reidentify",
                    crate::tui::app::shell_quote(&state_dir.to_string_lossy())
                ));
            }
            Err(err)
        }
    }
}

/// `--config FILE`: a description file that reads now (what it says is checked when
/// the daemon applies it, and a refusal then is logged), named by its full path so a
/// SIGHUP or a change finds it whatever the daemon's directory.
fn config_file(file: &str) -> Result<std::path::PathBuf, CliError> {
    let path = validate::path("--config", file)?;
    let text = crate::config_file::read_bounded(&path)
        .map_err(|e| CliError::usage("--config", &format!("cannot read {file}: {e}")))?;
    crate::domain::describe::parse(&text)
        .map_err(|e| CliError::usage("--config", &format!("{file}: {e}")))?;
    std::fs::canonicalize(&path)
        .map_err(|e| CliError::usage("--config", &format!("cannot read {file}: {e}")))
}

/// `daemon --release-cgroups`: the unit's `ExecStopPost=` between two daemon lives
/// (`runner::cgroup::handover`). Alone: any other daemon option is a usage error.
fn release_cgroups(inv: &Invocation) -> CliResult {
    if let Some((other, _)) = inv
        .options
        .iter()
        .find(|(o, _)| *o != opts::daemon::RELEASE_CGROUPS.name)
    {
        return Err(CliError::usage(
            other,
            "does not go with --release-cgroups, which runs no daemon",
        ));
    }
    let r = crate::runner::cgroup::handover::release()
        .map_err(|e| CliError::Failed(format!("cannot release the daemon's cgroup: {e}")))?;
    if r.turned_off.is_empty() {
        println!("{}: no controller was handed down", r.cgroup.display());
    }
    for (dir, off) in &r.turned_off {
        println!("{}: turned off {}", dir.display(), off.join(" "));
    }
    Ok(())
}

/// `--metrics-listen`: an IP address and port on loopback. The listener has no
/// authentication, so anything else is refused here, before the daemon starts.
fn metrics_listen(v: &str) -> Result<std::net::SocketAddr, CliError> {
    let addr: std::net::SocketAddr = v.parse().map_err(|_| {
        CliError::usage(
            "--metrics-listen",
            &format!("expected IP:PORT such as 127.0.0.1:9464 or [::1]:9464 (got {v:?})"),
        )
    })?;
    if !addr.ip().is_loopback() {
        return Err(CliError::usage(
            "--metrics-listen",
            &format!(
                "{addr} is not a loopback address: the metrics listener has no authentication; use 127.0.0.1:PORT or [::1]:PORT and put a proxy in front for remote scrapes"
            ),
        ));
    }
    Ok(addr)
}

pub fn drain(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    if inv.flag(&opts::drain::CANCEL) && inv.flag(&opts::drain::WAIT) {
        return Err(CliError::usage(
            "--cancel",
            "cannot be combined with --wait",
        ));
    }
    let cancel = inv.flag(&opts::drain::CANCEL);
    store.host_or_create()?;
    store.set_draining(!cancel)?;
    if cancel {
        out.emit(
            || "drain cancelled: runners start again\n".into(),
            || json!({"draining": false}),
        );
        return Ok(());
    }
    if !inv.flag(&opts::drain::WAIT) {
        out.emit(
            || "draining: no new runners; idle ones are deregistered, busy ones finish (drain --cancel undoes it)\n".into(),
            || json!({"draining": true}),
        );
        return Ok(());
    }
    // Ctrl-C ends the wait, not the drain: said, so the host is not left draining
    // without a word.
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone())
            .map_err(|e| CliError::classed(Failure::Other, format!("cannot watch signals: {e}")))?;
    }
    let mut last = usize::MAX;
    loop {
        let live = store.attempts(&AttemptFilter {
            active_only: true,
            ..AttemptFilter::default()
        })?;
        let busy = live
            .iter()
            .filter(|a| a.state == AttemptState::Busy)
            .count();
        let alive = units::count(live.len() as u64, "runner");
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(CliError::classed(
                Failure::Interrupted,
                format!(
                    "stopped waiting with {alive} alive ({busy} busy); the host is still \
                     draining: 'runner-manager drain --wait' waits again, 'runner-manager \
                     drain --cancel' starts runners again"
                ),
            ));
        }
        if live.len() != last && !inv.json {
            eprintln!("draining: {alive} alive ({busy} busy)");
            last = live.len();
        }
        if live.is_empty() {
            out.emit(
                || "drained: no runner of this host is alive\n".into(),
                || json!({"draining": true, "alive": 0}),
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub fn target_check(inv: &Invocation, store: &dyn Store) -> CliResult {
    let name = &inv.positionals[0];
    let target = store.target(name)?;
    let profiles: Vec<_> = store
        .profiles()?
        .into_iter()
        .filter(|p| &p.target == name)
        .collect();
    let opts = CheckOptions {
        allow_public: profiles.iter().any(|p| p.allow_public),
        runner_group: profiles.iter().find_map(|p| p.runner_group.clone()),
    };
    let mut lines = match load_credential(&target.credential) {
        Ok(cred) => check_target(&target, &GitHubClient::new(&target, cred), &opts),
        Err(e) => {
            return Err(CliError::about_target(
                Failure::of_auth(&e),
                name,
                format!("target {name}: credentials: {e}"),
            ));
        }
    };
    if lines.iter().all(|l| l.name != "credentials" || l.passed()) {
        lines.extend(scaleset::check::check_target(&target, &profiles));
    }
    // What the running daemon's listeners hold, from the store: known without asking
    // GitHub, so said whatever the checks above found.
    let now = crate::timefmt::now_millis();
    let alive = store.heartbeat()?.is_some_and(|b| b.alive_at(now));
    let used: Vec<&_> = profiles.iter().collect();
    lines.extend(scaleset::check::session_lines(
        &used,
        &store.session_statuses()?,
        alive,
        now,
    ));
    let failed = lines.iter().filter(|l| !l.passed()).count();
    if inv.json {
        let checks = check_line::to_json(&lines);
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"target": name, "checks": checks}))
                .unwrap_or_default()
        );
    } else {
        print!("{}", check_line::render(&lines, check_line::TARGET_CHECK));
    }
    if failed > 0 {
        let message = format!(
            "target {name}: {failed} {} failed",
            if failed == 1 { "check" } else { "checks" }
        );
        // Classed by the first GitHub error met (the later lines often repeat it);
        // a failure GitHub did not cause (a public repository refused) is `other`.
        return Err(
            match lines.iter().find_map(check_line::CheckLine::github_error) {
                Some((_, cause)) => CliError::github(name, cause, message),
                None => CliError::about_target(Failure::Other, name, message),
            },
        );
    }
    Ok(())
}

pub fn demo(inv: &Invocation) -> CliResult {
    let mut options = crate::demo::DemoOptions {
        state_dir: inv.state_dir.clone(),
        keep: inv.flag(&opts::demo::KEEP),
        headless: inv.flag(&opts::demo::HEADLESS),
        far: inv.flag(&opts::demo::FAR),
        ..Default::default()
    };
    if let Some(v) = inv.value(&opts::demo::JOBS) {
        options.jobs = validate::number_in("--jobs", v, 1, 10_000)? as u32;
    }
    crate::demo::run(&options).map_err(|e| match e {
        crate::demo::DemoError::Failed(m) => CliError::Failed(m),
        crate::demo::DemoError::Interrupted(m) => CliError::Interrupted(m),
    })
}

/// `sim job add`: queues jobs on a running `sim github` through its control endpoint
/// (`POST /_sim/jobs`), as the tests and the demo do in process.
pub fn sim_job_add(inv: &Invocation, out: &mut Out) -> CliResult {
    let required = |opt: &Opt, what: &str| {
        inv.value(opt)
            .ok_or_else(|| CliError::usage(opt.name, &format!("is required: {what}")))
    };
    let url = required(&opts::sim_job_add::URL, "the URL `sim github` printed")?;
    if !url.starts_with("http://") {
        return Err(CliError::usage(
            "--url",
            &format!("expected the simulated GitHub's http://HOST:PORT (got {url:?})"),
        ));
    }
    let base = url.trim_end_matches('/').trim_end_matches("/api/v3");
    let (owner, repo) =
        validate::repo_full_name("--repo", required(&opts::sim_job_add::REPO, "OWNER/REPO")?)?;
    let labels: Vec<String> = required(
        &opts::sim_job_add::LABELS,
        "the labels jobs ask for (L1,L2)",
    )?
    .split(',')
    .map(|l| l.trim().to_string())
    .collect();
    if labels.iter().any(String::is_empty) {
        return Err(CliError::usage(
            "--labels",
            "expected labels separated by commas, none empty (e.g. self-hosted,linux)",
        ));
    }
    let count = match inv.value(&opts::sim_job_add::COUNT) {
        Some(v) => validate::number_in("--count", v, 1, 1000)?,
        None => 1,
    };
    let secs = match inv.value(&opts::sim_job_add::DURATION) {
        Some(v) => validate::seconds_in("--duration", v, 0, 86_400)?,
        None => 5,
    };
    let prefix = match inv.value(&opts::sim_job_add::NAME) {
        Some(v) => validate::name("--name", v)?,
        None => "job".into(),
    };
    // A job's steps: the simulated runner's worker runs them with /bin/sh -c and
    // ends the job with their exit code (the test bed's guest checks use it).
    let script = match inv.value(&opts::sim_job_add::SCRIPT) {
        Some("") => {
            return Err(CliError::usage(
                "--script",
                "expected a command for /bin/sh -c (got an empty one)",
            ));
        }
        other => other.map(str::to_string),
    };
    let timeout = std::time::Duration::from_secs(10);
    let mut added = Vec::new();
    for i in 1..=count {
        let name = format!("{prefix}-{i}");
        let mut body = json!({
            "repo": format!("{owner}/{repo}"),
            "name": name,
            "labels": labels,
            "duration_ms": secs * 1000,
        });
        if let Some(s) = &script {
            body["script"] = json!(s);
        }
        let body = body.to_string();
        let resp = crate::sim::client::request(
            base,
            "POST",
            "/_sim/jobs",
            &[("content-type", "application/json")],
            Some(body.as_bytes()),
            timeout,
        )
        .map_err(|e| {
            CliError::fixed(
                Failure::Other,
                format!("cannot reach the simulated GitHub at {base}: {e}"),
                "runner-manager sim github --repo OWNER/REPO (it prints the URL to give --url)",
            )
        })?;
        if resp.status != 200 && resp.status != 201 {
            let message = format!(
                "the simulated GitHub refused job {name}: {} {}",
                resp.status,
                String::from_utf8_lossy(&resp.body).trim()
            );
            // 404: a repository the sim was not started with; anything else is a
            // request this command made wrong, whose words the sim said.
            let fix = if resp.status == 404 {
                format!(
                    "runner-manager sim github --repo {owner}/{repo} (the simulated GitHub \
                     serves only the repositories it was started with), then this command again"
                )
            } else {
                "runner-manager sim job add --help".to_string()
            };
            return Err(CliError::fixed(Failure::Other, message, fix));
        }
        added.push(name);
    }
    out.emit(
        || {
            let each = match &script {
                Some(_) => "each running its script".to_string(),
                None => format!("{secs}s each"),
            };
            let jobs = if added.len() == 1 { "job" } else { "jobs" };
            format!(
                "queued {} {jobs} in {owner}/{repo} asking for [{}], {each}: {}\n",
                added.len(),
                labels.join(", "),
                added.join(" ")
            )
        },
        || json!({"repo": format!("{owner}/{repo}"), "labels": labels, "duration_secs": secs, "script": script, "jobs": added}),
    );
    Ok(())
}

pub fn sim_github(inv: &Invocation) -> CliResult {
    let mut args = Vec::new();
    for (name, value) in &inv.options {
        args.push(name.to_string());
        if let Some(v) = value {
            args.push(v.clone());
        }
    }
    match crate::sim::serve_main(&args) {
        0 => Ok(()),
        2 => Err(CliError::Usage(
            "sim github: invalid arguments (see above)".into(),
        )),
        _ => Err(CliError::Failed("sim github failed".into())),
    }
}
