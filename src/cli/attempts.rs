//! `attempts` and `attempt show`: the ledger, newest first, and one attempt's timeline.

use super::output::{self, Out, attempt_figures, attempt_json, live_meter, or_dash, table, time};
use super::parse::Invocation;
use super::spec::opts;
use super::{CliError, CliResult};
use crate::domain::rerun::{Rerun, RerunState};
use crate::domain::validate;
use crate::store::{AttemptFilter, Store};
use crate::units;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const DEFAULT_LIMIT: u64 = 50;

pub fn list(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let limit = match inv.value(&opts::attempts::LIMIT) {
        Some(v) => validate::number_in("--limit", v, 0, 1_000_000)?,
        None => DEFAULT_LIMIT,
    };
    let profile = inv
        .value(&opts::attempts::PROFILE)
        .map(|p| validate::name("--profile", p))
        .transpose()?;
    // A removed profile's history is still listable; only a name that never had
    // attempts is a typo.
    if let Some(p) = &profile
        && store.profile(p).is_err()
        && store
            .attempts(&AttemptFilter {
                profile: Some(p.clone()),
                active_only: false,
                limit: Some(1),
            })?
            .is_empty()
    {
        return Err(CliError::usage(
            "--profile",
            &format!("no profile named {p:?} and no attempts of one"),
        ));
    }
    let filter = AttemptFilter {
        profile,
        active_only: inv.flag(&opts::attempts::ACTIVE),
        limit: (limit > 0).then_some(limit as u32),
    };
    let list = store.attempts(&filter)?;
    let meters = store.live_meters()?;
    // Only attempts that lost their job have a re-run row: a read each, and rare.
    let mut reruns = BTreeMap::new();
    for a in list
        .iter()
        .filter(|a| crate::domain::loss::loss(a).is_some())
    {
        if let Some(r) = store.rerun_of(a.id)? {
            reruns.insert(a.id, r);
        }
    }
    out.emit(
        || {
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|a| {
                    let m = live_meter(a, &meters);
                    let (peak, cpu) = attempt_figures(a, meters.get(&a.id));
                    vec![
                        a.id.to_string(),
                        a.profile.clone(),
                        a.runner_name.clone(),
                        a.state_word().into(),
                        match (a.outcome, crate::domain::loss::loss(a)) {
                            (Some(o), Some(_)) => {
                                format!("{} ({})", o.as_str(), lost_words(reruns.get(&a.id)))
                            }
                            (o, None) => or_dash(o.map(|o| o.as_str())),
                            (None, Some(_)) => "-".into(),
                        },
                        time(a.created_at),
                        // A live runner's RSS now; an ended one's peak.
                        or_dash(m.map(|m| m.rss_bytes).or(peak).map(units::bytes)),
                        or_dash(cpu.map(units::cpu)),
                        or_dash(a.job_name.as_ref()),
                    ]
                })
                .collect();
            table(
                &[
                    "ID", "PROFILE", "RUNNER", "STATE", "OUTCOME", "CREATED", "RSS", "CPU", "JOB",
                ],
                &rows,
            )
        },
        || {
            json!(
                list.iter()
                    .map(|a| with_rerun(attempt_json(a, &meters), reruns.get(&a.id)))
                    .collect::<Vec<_>>()
            )
        },
    );
    Ok(())
}

/// What OUTCOME says of a lost job: whether it was run again.
fn lost_words(rerun: Option<&Rerun>) -> &'static str {
    match rerun.map(|r| r.state) {
        Some(RerunState::Rerun) => "job lost, re-run",
        Some(RerunState::Waiting) => "job lost, re-run pending",
        None | Some(RerunState::Off) => "job lost",
        Some(_) => "job lost, not re-run",
    }
}

/// `attempt show`'s line for a lost job's re-run: its state and why.
fn rerun_line(rerun: Option<&Rerun>) -> String {
    match rerun {
        None => "-".into(),
        Some(r) => match &r.detail {
            Some(d) => format!("{}: {d}", r.state.as_str()),
            None => r.state.as_str().into(),
        },
    }
}

/// An attempt's JSON with its lost job's re-run (`null` when it lost none).
fn with_rerun(mut v: Value, rerun: Option<&Rerun>) -> Value {
    v["rerun"] = rerun.map_or(Value::Null, |r| {
        json!({
            "state": r.state.as_str(),
            "detail": r.detail,
            "job_id": r.job_id,
            "run_id": r.run_id,
            "repo": r.repo,
            "tries": r.tries,
            "settled_at": r.done_at.map(time),
        })
    });
    v
}

/// Whose job an attempt ran, and which source said so: `acme/app · ci / build · run 7
/// (attempt 2) · from rest`.
fn owner_line(o: &crate::domain::job_owner::JobOwner) -> String {
    let run = match o.run_attempt {
        Some(n) => format!("run {} (attempt {n})", o.run_id),
        None => format!("run {}", o.run_id),
    };
    format!(
        "{} · {} / {} · {run} · from {}",
        o.repo,
        o.workflow.as_deref().unwrap_or("-"),
        o.job_name,
        o.source.as_str()
    )
}

pub fn show(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let id = validate::number_in("ID", &inv.positionals[0], 1, i64::MAX as u64)? as i64;
    let a = store.attempt(id)?;
    let rerun = store.rerun_of(a.id)?;
    let meters = store.live_meters()?;
    let m = live_meter(&a, &meters);
    let (peak, cpu) = attempt_figures(&a, meters.get(&a.id));
    out.emit(
        || {
            let mut s = output::block(&[
                ("id", a.id.to_string()),
                ("profile", a.profile.clone()),
                ("target", a.target.clone()),
                ("runner", a.runner_name.clone()),
                ("state", a.state_word().into()),
                ("outcome", or_dash(a.outcome.map(|o| o.as_str()))),
                ("reason", or_dash(a.reason.as_ref())),
                (
                    "job_lost",
                    or_dash(crate::domain::loss::loss(&a).map(|l| l.describe())),
                ),
                ("rerun", rerun_line(rerun.as_ref())),
                ("created", time(a.created_at)),
                ("ended", or_dash(a.ended_at.map(time))),
                ("pid", or_dash(a.pid)),
                ("exit_code", or_dash(a.exit_code)),
                ("runner_id", or_dash(a.runner_id)),
                (
                    "job",
                    match (&a.job_name, a.job_id) {
                        (Some(n), Some(id)) => format!("{n} ({id})"),
                        (Some(n), None) => n.clone(),
                        (None, Some(id)) => id.to_string(),
                        (None, None) => "-".into(),
                    },
                ),
                ("owner", or_dash(a.owner.as_ref().map(owner_line))),
                ("lease", or_dash(a.lease_id.as_ref())),
                ("rss", or_dash(m.map(|m| units::bytes(m.rss_bytes)))),
                ("peak_rss", or_dash(peak.map(units::bytes))),
                ("cpu", or_dash(cpu.map(units::cpu))),
                ("cpu_now", or_dash(m.map(|m| units::percent(m.cpu_percent)))),
                ("processes", or_dash(m.map(|m| m.processes))),
                ("cleaned", output::yes_no(a.cleaned)),
            ]);
            s.push_str("\nTIMELINE\n");
            for h in &a.history {
                s.push_str(&format!("  {}  {}\n", time(h.at), h.state));
            }
            if a.cleaned {
                s.push_str(&format!("  {}  cleaned\n", time(a.state_since())));
            }
            s
        },
        || with_rerun(attempt_json(&a, &meters), rerun.as_ref()),
    );
    Ok(())
}
