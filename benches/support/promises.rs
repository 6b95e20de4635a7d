//! The reliability promises the chaos suite checks (../shared/reliability.md), each
//! as a function over what the run left behind: the simulated GitHub's jobs, runners
//! and request log, the store, the state directory and /proc.

use super::proc;
use runner_manager::domain::reason::Form;
use runner_manager::domain::{Attempt, AttemptState, Outcome, Reason};
use runner_manager::sim::{JobState, JobStatus, LogEntry, RunnerState};
use runner_manager::store::SqliteStore;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// One checked promise: what was looked at, and what broke it.
pub struct Check {
    pub promise: &'static str,
    pub checked: usize,
    pub what: &'static str,
    pub violations: Vec<String>,
}

/// Prints each check with its counts (and its first ten violations) under `checks:`;
/// returns the violations in all.
pub fn print(checks: &[Check]) -> usize {
    println!("checks:");
    let mut total = 0;
    for c in checks {
        println!(
            "  [{}] {} ({} {} checked, {} violations)",
            if c.violations.is_empty() {
                " ok "
            } else {
                "FAIL"
            },
            c.promise,
            c.checked,
            c.what,
            c.violations.len()
        );
        for v in c.violations.iter().take(10) {
            println!("         {v}");
        }
        total += c.violations.len();
    }
    total
}

/// Ends a run of `what` by its result: 0 with no violation, 1 with any (or when it
/// could not complete), saying which and the seed that reproduces it.
pub fn exit_with(result: Result<usize, String>, what: &str, seed: u64) -> ! {
    let code = match result {
        Ok(0) => 0,
        Ok(n) => {
            println!("VIOLATIONS: {n} (seed {seed})");
            1
        }
        Err(e) => {
            println!("{what} could not complete: {e} (seed {seed})");
            1
        }
    };
    std::process::exit(code)
}

impl Check {
    pub fn new(promise: &'static str, what: &'static str) -> Check {
        Check {
            promise,
            checked: 0,
            what,
            violations: Vec::new(),
        }
    }
}

/// Every job completed, by exactly one runner, and that runner was one of ours.
pub fn served_exactly_once(jobs: &[JobState], attempts: &[Attempt]) -> Check {
    let mut c = Check::new(
        "every job served exactly once by one of our runners",
        "jobs",
    );
    let ours: HashSet<&str> = attempts.iter().map(|a| a.runner_name.as_str()).collect();
    let mut by_runner: HashMap<&str, Vec<u64>> = HashMap::new();
    for j in jobs {
        c.checked += 1;
        if j.status != JobStatus::Completed {
            c.violations.push(format!(
                "job {} ({}) is {}",
                j.id,
                j.name,
                j.status.as_str()
            ));
            continue;
        }
        match j.runner_name.as_deref() {
            Some(n) if ours.contains(n) => by_runner.entry(n).or_default().push(j.id),
            other => c.violations.push(format!(
                "job {} was served by {other:?}, not one of ours",
                j.id
            )),
        }
    }
    for (runner, js) in by_runner {
        if js.len() > 1 {
            c.violations
                .push(format!("runner {runner} served {} jobs: {js:?}", js.len()));
        }
    }
    c
}

/// Every attempt ended with an outcome (a reason when it failed) and was cleaned. A
/// cleaned attempt rests in `destroying` (or the state it ended in): "cleaned" is a
/// flag, not a state.
pub fn attempts_finished(attempts: &[Attempt]) -> Check {
    let mut c = Check::new(
        "every attempt finished with a reason and cleaned",
        "attempts",
    );
    for a in attempts {
        c.checked += 1;
        let ended = matches!(
            a.state,
            AttemptState::Finished | AttemptState::Failed | AttemptState::Destroying
        );
        let reason_ok = match a.outcome {
            Some(Outcome::Failed) | Some(Outcome::Orphaned) => a.reason.is_some(),
            Some(_) => true,
            None => false,
        };
        if !ended || !reason_ok || !a.cleaned {
            c.violations.push(format!(
                "attempt {} is {} outcome {:?} reason {:?} cleaned {}",
                a.id,
                a.state.as_str(),
                a.outcome.map(|o| o.as_str()),
                a.reason,
                a.cleaned
            ));
        }
    }
    c
}

/// Outcomes and reasons of the attempts, for the summary.
pub fn outcome_counts(attempts: &[Attempt]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in attempts {
        let key = match (&a.outcome, &a.reason) {
            (Some(o), Some(r)) => format!("{} ({})", o.as_str(), short_reason(r)),
            (Some(o), None) => o.as_str().to_string(),
            (None, _) => format!("open: {}", a.state.as_str()),
        };
        *m.entry(key).or_insert(0) += 1;
    }
    m
}

/// The reason without its message (error texts carry ids), so counts group; exit
/// codes and job results are few and stay.
fn short_reason(r: &Reason) -> String {
    match r.kind().form() {
        Form::Message => r.as_str().to_string(),
        _ => r.to_string().chars().take(40).collect(),
    }
}

/// No registration named for this host is left on GitHub.
pub fn registrations_left(runners: &[RunnerState], host_id: &str) -> Check {
    let mut c = Check::new("no registration with our names left", "registrations");
    for r in runners {
        c.checked += 1;
        if runner_manager::domain::host::parse_runner_name(host_id, &r.name).is_some() {
            c.violations.push(format!(
                "runner {} (id {}) is still registered",
                r.name, r.id
            ));
        }
    }
    c
}

/// No runner process left: nothing runs from the state directory's attempt roots, and
/// no process holds a JIT config issued by this run's simulated GitHub.
pub fn leaked_processes(state_dir: &Path, sim_url: &str) -> Check {
    let mut c = Check::new("no leaked runner process", "processes scanned");
    let attempts = state_dir.join("attempts");
    let pids = proc::pids();
    c.checked = pids.len();
    if attempts.exists() {
        for pid in runner_manager::runner::processes_with_cwd_or_exe_under(&attempts) {
            c.violations
                .push(format!("pid {pid} runs under {}", attempts.display()));
        }
    }
    for (pid, jit) in proc::jit_processes() {
        if jit_server(&jit).as_deref() == Some(sim_url) {
            c.violations
                .push(format!("pid {pid} holds a JIT config of this run"));
        }
    }
    c
}

/// The server URL inside an encoded JIT config, if it decodes.
pub fn jit_server(jit: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(jit).ok()?;
    runner_manager::sim::jit::decode(s)
        .ok()
        .map(|(cfg, _)| cfg.server_url)
}

/// The runner credential inside an encoded JIT config (a secret too).
pub fn jit_credential(jit: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(jit).ok()?;
    runner_manager::sim::jit::decode(s)
        .ok()
        .map(|(cfg, _)| cfg.credential.expose().to_string())
}

/// How long after an answer was written its client may not know it yet.
pub const READ_GRACE_MS: i64 = 50;

/// No request was sent with the answered credential between a `retry-after` answer
/// and the end of its wait (the limit is the credential's: the Actions service's calls,
/// made with the scale set's own tokens, are not held by it). `restarts` are the
/// daemon's start times: a request after one of them was sent by a new daemon process,
/// which only knows the wait if the daemon keeps it across restarts.
///
/// The wait runs from when the answer was sent: its entry's `done_at`, when the sim
/// wrote it, which on loopback is when the client read it. The window is [sent, sent +
/// retry-after) and holds the requests that *arrived* in it (`at`, when the sim read
/// them: when the client sent them). With GitHub far away (`--far`) this is the check
/// that means something: a request that arrived after the 403 did but before its answer
/// was sent left the client before the client could know, so it is no violation, while
/// measuring from the 403's arrival would both flag those and let a client that counts
/// the wait from its own sending of the request (a round trip early) pass. Measured from
/// the answer, it holds GitHub's own rule exactly when the latency is split evenly
/// between the two ways, as the sim splits it: the next request reaches GitHub half a
/// round trip after it left, the answer reached the client half a round trip after
/// GitHub sent it. A log from before distance existed has no `done_at`: its arrival
/// stands in (on loopback they are the same millisecond).
///
/// The window opens [`READ_GRACE_MS`] after the answer was written: the client's
/// thread must still be woken, read the answer and raise the hold, and meanwhile
/// another worker of the same daemon, sharing the credential but not the connection,
/// may already be writing its request (a CI run saw one DELETE 2 ms after the answer,
/// in a debug build on a loaded machine). A client that ignored the wait would go on
/// sending through the whole of it, far past the grace.
pub fn retry_after(log: &[LogEntry], waits: &[(String, u64)], restarts: &[i64]) -> Check {
    let mut c = Check::new("retry-after never violated", "retry-after answers");
    let mut order: Vec<&LogEntry> = log.iter().collect();
    order.sort_by_key(|e| e.at);
    for e in &order {
        let Some(fault) = e.fault.as_deref() else {
            continue;
        };
        let Some((_, secs)) = waits.iter().find(|(f, _)| f == fault) else {
            continue;
        };
        c.checked += 1;
        let sent = e.done_at.unwrap_or(e.at);
        let until = sent + (*secs as i64) * 1000;
        let early: Vec<&&LogEntry> = order
            .iter()
            .skip_while(|l| l.at < sent + READ_GRACE_MS)
            .take_while(|l| l.at < until)
            .filter(|l| {
                !std::ptr::eq(**l, *e)
                    && !l.endpoint.starts_with("/_sim")
                    && (e.credential.is_none() || l.credential == e.credential)
            })
            .collect();
        let Some(first) = early.first() else {
            continue;
        };
        let restarted = restarts.iter().any(|r| *r > e.at && *r <= first.at);
        c.violations.push(format!(
            "{} request(s) within a {}s retry-after, the first {} {} {} ms after the answer was sent{}",
            early.len(),
            secs,
            first.method,
            first.endpoint,
            first.at - sent,
            if restarted {
                " by a daemon started after the 403 (the wait did not survive the restart)"
            } else {
                " by the same daemon process"
            }
        ));
    }
    c
}

/// Files under `dir` (recursively), skipping `skip` and runner executables.
pub fn files_under(dir: &Path, skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if skip.iter().any(|s| p.starts_with(s)) {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file()
                && !matches!(
                    p.file_name().and_then(|n| n.to_str()),
                    Some("Runner.Listener" | "Runner.Worker")
                )
            {
                out.push(p);
            }
        }
    }
    out
}

/// No secret in any file (logs, the store's raw pages) under the state directory.
pub fn secrets_in_files(files: &[PathBuf], secrets: &[String]) -> Check {
    let mut c = Check::new("no secret in any log or store file", "files");
    for f in files {
        let Ok(bytes) = std::fs::read(f) else {
            continue;
        };
        c.checked += 1;
        for s in secrets {
            if contains(&bytes, s.as_bytes()) {
                c.violations.push(format!(
                    "{} holds a secret ({}...)",
                    f.display(),
                    &s[..6.min(s.len())]
                ));
            }
        }
    }
    c
}

/// No secret in any row of any table of the store, dumped as text.
pub fn secrets_in_store(db: &Path, secrets: &[String]) -> Check {
    let mut c = Check::new("no secret in any store row", "rows");
    let rows = match SqliteStore::rows_as_text(db) {
        Ok(rows) => rows,
        Err(e) => {
            c.violations
                .push(format!("cannot open {}: {e}", db.display()));
            return c;
        }
    };
    for (t, line) in rows {
        c.checked += 1;
        for s in secrets {
            if line.contains(s.as_str()) {
                c.violations.push(format!("a row of {t} holds a secret"));
            }
        }
    }
    c
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}
