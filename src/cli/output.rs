//! Output: aligned tables and key/value blocks for people, stable JSON for scripts,
//! and the JSON shapes of each book (documented in man/runner-manager.1).

use super::{CliError, CliResult};
use crate::domain::{Attempt, Host, ScalePolicy, Target, TargetScope};
use crate::meter::{LiveMeter, Totals, totals};
use crate::store::{SessionStatus, Store, StoreError};
use crate::timefmt::{Millis, format_rfc3339};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;

/// Collects what a command prints, so a failing command prints nothing on stdout.
pub struct Out {
    pub json: bool,
    text: String,
}

impl Out {
    pub fn new(json: bool) -> Out {
        Out {
            json,
            text: String::new(),
        }
    }

    /// Prints `human` or `machine` depending on `--json`.
    pub fn emit(&mut self, human: impl FnOnce() -> String, machine: impl FnOnce() -> Value) {
        if self.json {
            // Pretty JSON, one document per command; serde_json's maps are sorted, so
            // the key order is stable whatever order the code builds them in.
            // What a job or a peer sent (a job's name, a host's) reaches a terminal
            // here: its control and bidirectional characters are escaped (`printable`),
            // the JSON keeping its values.
            let text = serde_json::to_string_pretty(&machine()).expect("JSON values print");
            self.text.push_str(&crate::printable::json(&text));
            self.text.push('\n');
        } else {
            self.text.push_str(&crate::printable::escape_text(&human()));
        }
    }

    pub fn flush(mut self) -> CliResult {
        self.flush_now()
    }

    /// Prints what was gathered so far, for a command that reports and then exits
    /// with a class that is not a failure of what it printed (`update --check`'s
    /// `update-available`).
    pub fn flush_now(&mut self) -> CliResult {
        let text = std::mem::take(&mut self.text);
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|_| stdout.flush())
        {
            Ok(()) => Ok(()),
            // A closed pipe (`| head`) is the reader's choice, not our failure.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(CliError::Failed(format!("writing to stdout: {e}"))),
        }
    }
}

/// An aligned table: a header row and rows, columns separated by two spaces. A cell is
/// one field: what it holds from outside (a job's name, a workflow's) is escaped with
/// its line breaks (`printable::escape`), so a name never breaks the row in two.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| crate::printable::escape(c)).collect())
        .collect();
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(w[i] - c.chars().count() + 2));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in &rows {
        out.push_str(&line(r.iter().map(|c| c.as_ref()).collect()));
    }
    out
}

/// `key  value` lines with the keys aligned; each value is one field, escaped as a
/// table's cells are, so a value from outside never starts a line of its own.
pub fn block(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| {
            let v = crate::printable::escape(v);
            format!("{k:w$}  {v}\n").trim_end().to_string() + "\n"
        })
        .collect()
}

pub fn or_dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

pub fn time(ms: Millis) -> String {
    format_rfc3339(ms)
}

/// A scale set profile's session in `status --json`: raw values (ids, RFC 3339
/// times) as the daemon last recorded them, `null` with no row; `held` only while that
/// daemon runs. Never the session's queue token: the store has none.
pub fn session_json(row: Option<&SessionStatus>, daemon_alive: bool) -> Option<Value> {
    let r = row?;
    let st = &r.session;
    Some(json!({
        "state": st.phase.to_string(),
        "held": st.is_held() && daemon_alive,
        "scale_set_id": st.scale_set_id,
        "session_id": st.session_id,
        "held_since": st.held_since.map(time),
        "last_message_id": st.last_message_id,
        "last_message_at": st.last_message_at.map(time),
        "last_poll_at": st.last_poll_at.map(time),
        "reason": st.reason,
        "retry_at": st.retry_at.map(time),
        "updated_at": time(r.updated_at),
    }))
}

pub fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

pub fn scope_json(s: &TargetScope) -> Value {
    match s {
        TargetScope::Repo { owner, repo } => json!({"kind": "repo", "owner": owner, "repo": repo}),
        TargetScope::Org { org } => json!({"kind": "org", "org": org}),
    }
}

pub fn target_json(t: &Target) -> Value {
    json!({
        "name": t.name,
        "scope": scope_json(&t.scope),
        "api_url": t.api_url,
        // The reference only (a path, a variable name, an app id): never a secret.
        "credential": serde_json::to_value(&t.credential).expect("JSON values print"),
        "poll_interval_secs": t.poll_interval_secs,
        "max_in_flight": t.max_in_flight,
        // Points a minute per endpoint; null when the target's GHES has none.
        "secondary_limit": t.secondary_limit,
        "repos": t.repos,
    })
}

pub fn profile_json(p: &ScalePolicy, host: &Host) -> Value {
    json!({
        "name": p.name,
        "target": p.target,
        "host_id": p.host_id,
        "labels": p.labels,
        "user_labels": p.user_labels(&host.os, &host.arch),
        "default_labels": p.default_labels,
        "min": p.min_capacity,
        "max": p.max_capacity,
        "runner_dir": p.runner_dir.as_ref().map(|d| d.display().to_string()),
        "runner_group": p.runner_group,
        "idle_timeout_secs": p.idle_timeout_secs,
        "bootstrap_timeout_secs": p.bootstrap_timeout_secs,
        "job_timeout_secs": p.job_timeout_secs,
        "mode": p.mode.as_str(),
        "active": p.active,
        "allow_public": p.allow_public,
        "run_as": p.run_as,
        "demand": p.demand.as_str(),
        "memory_max": p.memory_max,
        "cpu_max": p.cpu_max.map(|m| m as f64 / 1000.0),
        "pids_max": p.pids_max,
        "limits": p.limits.as_str(),
        "env": p.env,
        "tools": p.tools,
        "execution": p.execution.as_str(),
        "image": p.image,
        "disk_max": p.disk_max,
        "caches": crate::domain::caches::show_setting(p.caches),
        "workspace": p.workspace.as_str(),
        "rerun_lost": p.rerun_lost,
        "revision": p.revision,
    })
}

pub fn host_json(h: &Host) -> Value {
    json!({
        "id": h.id,
        "name": h.name,
        "os": h.os,
        "arch": h.arch,
        "capacity": h.capacity,
        "draining": h.draining,
        "coordinator": h.coordinator,
        "coordinator_token_file": h.coordinator_token_file.as_ref().map(|p| p.display().to_string()),
        "coordinator_ca_file": h.coordinator_ca_file.as_ref().map(|p| p.display().to_string()),
        "coordinator_insecure": h.coordinator_insecure,
        "isolation": h.isolation.as_str(),
        "runner_uids": h.runner_uids.map(|r| r.to_string()),
        "retention_secs": h.retention_secs,
        "logs_max_bytes": h.logs_max_bytes,
        "disk_reserve_bytes": h.disk_reserve_bytes,
        "env": h.env,
        "runner_version": h.runner_version.as_deref().unwrap_or("latest"),
        "runtime_root": h.runtime_root.as_ref().map(|p| p.to_string_lossy().into_owned()),
        "cache_cap_bytes": h.cache_cap_bytes,
    })
}

/// The attempt's peak RSS and CPU time: the larger of what its row keeps (written
/// when its life ends) and its live meter.
pub fn attempt_figures(a: &Attempt, m: Option<&LiveMeter>) -> (Option<u64>, Option<u64>) {
    let max = |row: Option<u64>, live: Option<u64>| match (row, live) {
        (Some(r), Some(l)) => Some(r.max(l)),
        (r, l) => r.or(l),
    };
    (
        max(a.peak_rss_bytes, m.map(|m| m.peak_rss_bytes)),
        max(a.cpu_millis, m.map(|m| m.cpu_millis)),
    )
}

/// The meter of an attempt whose runner may still run; an ended attempt's figures of
/// "now" are not shown.
pub fn live_meter<'a>(a: &Attempt, meters: &'a BTreeMap<i64, LiveMeter>) -> Option<&'a LiveMeter> {
    meters
        .get(&a.id)
        .filter(|_| a.state.is_live() && !a.cleaned)
}

/// Per-profile totals of this host's live attempts' meters.
pub fn profile_meters(store: &dyn Store) -> Result<BTreeMap<String, Totals>, StoreError> {
    let Some(h) = store.host()? else {
        return Ok(BTreeMap::new());
    };
    let meters = store.live_meters()?;
    let open = store.open_attempts(&h.id)?;
    Ok(totals(open.iter().filter_map(|a| {
        live_meter(a, &meters).map(|m| (a.profile.as_str(), m))
    })))
}

pub fn meter_json(m: Option<&LiveMeter>) -> Value {
    match m {
        None => Value::Null,
        Some(m) => json!({
            "at": time(m.at),
            "rss_bytes": m.rss_bytes,
            "peak_rss_bytes": m.peak_rss_bytes,
            "cpu_millis": m.cpu_millis,
            "cpu_percent": m.cpu_percent,
            "processes": m.processes,
        }),
    }
}

pub fn totals_json(t: Option<&Totals>) -> Value {
    let t = t.copied().unwrap_or_default();
    json!({
        "metered": t.metered,
        "rss_bytes": t.rss_bytes,
        "cpu_millis": t.cpu_millis,
        "cpu_percent": t.cpu_percent,
        "processes": t.processes,
    })
}

/// An attempt as `attempts --json` and `attempt show --json` print it; `meters` is
/// [`Store::live_meters`].
pub fn attempt_json(a: &Attempt, meters: &BTreeMap<i64, LiveMeter>) -> Value {
    let (peak_rss, cpu) = attempt_figures(a, meters.get(&a.id));
    let m = live_meter(a, meters);
    json!({
        "id": a.id,
        "profile": a.profile,
        "target": a.target,
        "host_id": a.host_id,
        "runner_name": a.runner_name,
        "state": a.state_word(),
        "outcome": a.outcome.map(|o| o.as_str()),
        "reason": a.reason.as_ref().map(ToString::to_string),
        "job_lost": crate::domain::loss::loss(a)
            .map(|l| json!({"reason": l.as_str(), "detail": l.describe()})),
        "created_at": time(a.created_at),
        "updated_at": time(a.updated_at),
        "ended_at": a.ended_at.map(time),
        "pid": a.pid,
        "exit_code": a.exit_code,
        "runner_id": a.runner_id,
        "job_id": a.job_id,
        "job_name": a.job_name,
        "lease_id": a.lease_id,
        "owner": a.owner.as_ref().map(|o| json!({
            "repo": o.repo,
            "workflow": o.workflow,
            "job_name": o.job_name,
            "run_id": o.run_id,
            "run_attempt": o.run_attempt,
            "job_id": o.job_id,
            "source": o.source.as_str(),
        })),
        "peak_rss_bytes": peak_rss,
        "cpu_millis": cpu,
        "meter": meter_json(m),
        "cleaned": a.cleaned,
        "cleanup_tries": a.cleanup_tries,
        "history": history_json(a),
    })
}

/// An attempt's steps to its end: each state it entered, then `cleaned` once its
/// cleanup is done (a flag, not a state, so the events stop at `destroying`; the
/// timeline of `attempt show` ends the same way).
fn history_json(a: &Attempt) -> Value {
    let mut steps: Vec<Value> = a
        .history
        .iter()
        .map(|h| json!({"state": h.state.as_str(), "at": time(h.at)}))
        .collect();
    if a.cleaned {
        steps.push(json!({"state": "cleaned", "at": time(a.state_since())}));
    }
    Value::Array(steps)
}
