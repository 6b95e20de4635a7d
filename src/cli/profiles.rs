//! `profile add|set|list|show|rm|pause|resume`: every edit validated whole before one
//! revision-checked write.

use super::output::{self, Out, or_dash, profile_json, table, yes_no};
use super::parse::Invocation;
use super::spec::{Opt, opts};
use super::{CliError, CliResult, setting_risks, warn};
use crate::domain::profile::{Change, Mode};
use crate::domain::validate::{self, Invalid};
use crate::domain::{Host, ScalePolicy, labels};
use crate::store::{Store, check_runner_dir, edit_profile};
use crate::timefmt::duration;
use serde_json::json;

/// `profile add`'s options, mapped onto `profile set` keys so both edit paths share
/// `ScalePolicy::apply_setting`.
const ADD_SETTINGS: &[(Opt, &str)] = &[
    (opts::profile_add::MAX, "max"),
    (opts::profile_add::MIN, "min"),
    (opts::profile_add::RUNNER_DIR, "runner_dir"),
    (opts::profile_add::GROUP, "runner_group"),
    (opts::profile_add::IDLE_TIMEOUT, "idle_timeout"),
    (opts::profile_add::BOOTSTRAP_TIMEOUT, "bootstrap_timeout"),
];

/// Re-labels an `Invalid` from a settings key to the option the user typed.
fn as_option(opt: &str) -> impl Fn(Invalid) -> Invalid + '_ {
    move |e| Invalid::new(opt, e.reason)
}

/// Says on stderr which of the labels the user typed are default labels already, so
/// a label that seems to vanish from `user_labels` (and `top`'s LABELS) is explained
/// when it is given, not found missing later.
fn note_default_labels(arg: &str, p: &ScalePolicy, user: &[String], host: &Host) {
    if !p.default_labels {
        return;
    }
    for (typed, default) in labels::already_defaults(user, &host.os, &host.arch) {
        eprintln!(
            "note: {arg}: {typed} is a default label ({default}) that every runner carries; \
             the profile's labels are {} ('--no-default-labels' to give them all yourself)",
            p.labels.join(", ")
        );
    }
}

pub fn add(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let name = validate::name("NAME", &inv.positionals[0])?;
    let target = inv.value(&opts::profile_add::TARGET).ok_or_else(|| {
        CliError::usage(
            "--target",
            "is required: the target its runners register with",
        )
    })?;
    let target = validate::name("--target", target)?;
    let labels = inv.value(&opts::profile_add::LABELS).ok_or_else(|| {
        CliError::usage("--labels", "is required: the labels jobs ask for (L1,L2)")
    })?;
    let host = store.host_or_create()?;
    let mut p = ScalePolicy::new(&name, &target, &host.id);
    p.default_labels = !inv.flag(&opts::profile_add::NO_DEFAULT_LABELS);
    let user_labels = labels::parse_list(labels);
    p.set_labels("--labels", &user_labels, &host.os, &host.arch)?;
    for (opt, key) in ADD_SETTINGS {
        if let Some(v) = inv.value(opt) {
            p.apply_setting(key, v, &host.os, &host.arch)
                .map_err(as_option(opt.name))?;
        }
    }
    p.active = !inv.flag(&opts::profile_add::PAUSED);
    if inv.flag(&opts::profile_add::MONITOR) {
        p.mode = Mode::Monitor;
    }
    p.allow_public = inv.flag(&opts::profile_add::ALLOW_PUBLIC);
    p.validate().map_err(|e| match e.arg.as_str() {
        "min" => Invalid::new("--min", e.reason),
        "max" => Invalid::new("--max", e.reason),
        _ => e,
    })?;
    check_runner_dir("--runner-dir", &p)?;
    // An unknown target is the user's input, so say which option named it.
    // One it most likely meant is the store's refusal, which names it and whose fix
    // is this command with that name.
    if let Err(e @ crate::store::StoreError::NotFound { what: "target", .. }) =
        store.target(&target)
    {
        if crate::store::near_name(store, "target", &target).is_some() {
            return Err(e.into());
        }
        return Err(CliError::usage(
            "--target",
            &format!("no target named {target:?} (add it with 'target add' first)"),
        ));
    }
    let stored = store.add_profile(&p)?;
    note_default_labels("--labels", &stored, &user_labels, &host);
    out.emit(
        || {
            format!(
                "profile {} added (revision {})\n",
                stored.name, stored.revision
            )
        },
        || profile_json(&stored, &host),
    );
    Ok(())
}

/// Reads the profile, applies every `KEY=VALUE`, validates the whole, and writes it
/// only if nobody else wrote since the revision read (or the one `--revision` names).
pub fn set(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let expected = inv
        .value(&opts::profile_set::REVISION)
        .map(|v| validate::number_in("--revision", v, 1, i64::MAX as u64))
        .transpose()?;
    let host = store.host_or_create()?;
    let changes: Vec<Change> = inv.positionals[1..]
        .iter()
        .map(|kv| Change::Setting(kv.clone()))
        .collect();
    let warnings = setting_risks(&inv.positionals[1..])?;
    // The edit is checked against the revision read here (unless --revision names
    // one), so what it says changed is exactly what it wrote.
    let before = store.profile(&inv.positionals[0])?;
    let expected = expected.or(Some(before.revision));
    let p = edit_profile(store, &host, &inv.positionals[0], &changes, expected)?;
    for kv in &inv.positionals[1..] {
        if let Ok(("labels", v)) = validate::key_value(kv) {
            note_default_labels("labels", &p, &labels::parse_list(v), &host);
        }
    }
    out.emit(
        || self::changes(&before, &p, &host),
        || profile_json(&p, &host),
    );
    warn(&warnings);
    Ok(())
}

pub fn set_active(inv: &Invocation, store: &dyn Store, out: &mut Out, active: bool) -> CliResult {
    let host = store.host_or_create()?;
    let mut p = store.profile(&inv.positionals[0])?;
    let word = if active { "resumed" } else { "paused" };
    if p.active != active {
        let read = p.revision;
        p.active = active;
        p.revision = store.update_profile(&p, read)?;
    }
    out.emit(
        || format!("profile {} {word} (revision {})\n", p.name, p.revision),
        || profile_json(&p, &host),
    );
    Ok(())
}

/// `active`, `monitor` or `paused`: the one word tables show for a profile.
pub(super) fn state(p: &ScalePolicy) -> String {
    match (p.active, p.mode) {
        (false, _) => "paused".into(),
        (true, Mode::Monitor) => "monitor".into(),
        (true, Mode::Autoscale) => "active".into(),
    }
}

pub fn list(store: &dyn Store, out: &mut Out) -> CliResult {
    let host = store.host_or_create()?;
    let ps = store.profiles()?;
    let live = store.live_counts()?;
    out.emit(
        || {
            let rows: Vec<Vec<String>> = ps
                .iter()
                .map(|p| {
                    vec![
                        p.name.clone(),
                        p.target.clone(),
                        state(p),
                        format!("{}", live.get(&p.name).copied().unwrap_or(0)),
                        p.min_capacity.to_string(),
                        p.max_capacity.to_string(),
                        p.labels.join(","),
                        p.revision.to_string(),
                    ]
                })
                .collect();
            table(
                &[
                    "NAME", "TARGET", "STATE", "LIVE", "MIN", "MAX", "LABELS", "REV",
                ],
                &rows,
            )
        },
        || {
            json!(
                ps.iter()
                    .map(|p| {
                        let mut v = profile_json(p, &host);
                        v["live"] = json!(live.get(&p.name).copied().unwrap_or(0));
                        v
                    })
                    .collect::<Vec<_>>()
            )
        },
    );
    Ok(())
}

pub fn show_block(p: &ScalePolicy, host: &Host, live: u32) -> String {
    output::block(&fields(p, host, live))
}

/// `profile set`'s line: each setting that changed, as `profile show` prints it (as
/// `host set` says its own). `state` and `revision` follow from the settings.
fn changes(before: &ScalePolicy, after: &ScalePolicy, host: &Host) -> String {
    let changed: Vec<String> = fields(before, host, 0)
        .into_iter()
        .zip(fields(after, host, 0))
        .filter(|(b, a)| b.1 != a.1 && !["state", "revision"].contains(&a.0))
        .map(|(_, (k, v))| format!("{k} {v}"))
        .collect();
    if changed.is_empty() {
        format!(
            "profile {}: no setting changed (revision {})\n",
            after.name, after.revision
        )
    } else {
        format!(
            "profile {} updated (revision {}): {}\n",
            after.name,
            after.revision,
            changed.join(", ")
        )
    }
}

/// A profile's fields as `profile show` prints them, in its order.
fn fields(p: &ScalePolicy, host: &Host, live: u32) -> Vec<(&'static str, String)> {
    vec![
        ("name", p.name.clone()),
        ("target", p.target.clone()),
        ("state", state(p)),
        ("revision", p.revision.to_string()),
        ("labels", p.labels.join(",")),
        ("default_labels", yes_no(p.default_labels)),
        ("min", p.min_capacity.to_string()),
        ("max", p.max_capacity.to_string()),
        ("live", live.to_string()),
        (
            "runner_dir",
            or_dash(p.runner_dir.as_ref().map(|d| d.display())),
        ),
        ("runner_group", or_dash(p.runner_group.as_ref())),
        // Durations and sizes in the one form `top` and `host show` use too
        // (`units`): `5m`, not `300s`.
        ("idle_timeout", duration(p.idle_timeout_secs)),
        ("bootstrap_timeout", duration(p.bootstrap_timeout_secs)),
        ("job_timeout", or_dash(p.job_timeout_secs.map(duration))),
        ("mode", p.mode.as_str().into()),
        ("active", yes_no(p.active)),
        ("allow_public", yes_no(p.allow_public)),
        ("run_as", or_dash(p.run_as.as_ref())),
        ("demand", p.demand.as_str().into()),
        ("memory_max", or_dash(p.memory_max.map(crate::units::bytes))),
        (
            "cpu_max",
            or_dash(p.cpu_max.map(crate::domain::isolation::human_cpus)),
        ),
        ("pids_max", or_dash(p.pids_max)),
        ("limits", p.limits.as_str().into()),
        (
            "env",
            or_dash((!p.env.is_empty()).then(|| crate::domain::runner_env::display(&p.env))),
        ),
        (
            "tools",
            or_dash((!p.tools.is_empty()).then(|| p.tools.join(","))),
        ),
        ("execution", p.execution.as_str().into()),
        ("image", or_dash(p.image.as_ref())),
        ("disk_max", or_dash(p.disk_max.map(crate::units::bytes))),
        (
            "caches",
            crate::domain::caches::show_setting(p.caches).into(),
        ),
        ("workspace", p.workspace.as_str().into()),
        (
            "rerun_lost",
            crate::domain::rerun::setting_text(p.rerun_lost),
        ),
        (
            "host",
            if p.host_id == host.id {
                format!("{} (this host)", p.host_id)
            } else {
                p.host_id.clone()
            },
        ),
    ]
}

pub fn show(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let host = store.host_or_create()?;
    let p = store.profile(&inv.positionals[0])?;
    let live = store.live_counts()?.get(&p.name).copied().unwrap_or(0);
    out.emit(
        || show_block(&p, &host, live),
        || {
            let mut v = profile_json(&p, &host);
            v["live"] = json!(live);
            v
        },
    );
    Ok(())
}

pub fn rm(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let name = &inv.positionals[0];
    store.remove_profile(name)?;
    out.emit(
        || format!("profile {name} removed\n"),
        || json!({"removed": {"profile": name}}),
    );
    Ok(())
}
