//! `update [--check | --force]`: the newest release from `release_source`, verified
//! against its `SHA256SUMS`, renamed over this binary, and the daemon asked to hand
//! over to it (see `selfupdate`).

use super::exit::Failure;
use super::output::Out;
use super::parse::Invocation;
use super::spec::opts;
use super::{CliError, CliResult};
use crate::domain::host_settings::Beside;
use crate::selfupdate::owner::{self, Verdict};
use crate::selfupdate::release::{self, Source};
use crate::selfupdate::{Decision, UpdateError, decide, replace};
use crate::store::{Store, daemon_facts};
use crate::timefmt::now_millis;
use serde_json::json;
use std::path::PathBuf;

fn failed(e: UpdateError) -> CliError {
    match e {
        UpdateError::PackageManaged(m) => {
            CliError::classed(Failure::PackageManaged, format!("{m}; nothing changed"))
        }
        other => CliError::Failed(other.to_string()),
    }
}

pub fn run(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    // What this binary says it is, as `--version` does (`crate::version`).
    let current = crate::version::version();
    let check = inv.flag(&opts::update::CHECK);
    let force = inv.flag(&opts::update::FORCE);
    if check && force {
        return Err(CliError::usage(
            "--force",
            "cannot be given with --check, which changes nothing",
        ));
    }
    let stored = crate::store::beside(store, Beside::ReleaseSource)?.unwrap_or_default();
    let source = Source::parse("release_source", &stored)
        .map_err(|i| {
            CliError::Failed(format!(
                "the stored {i}; set it again with 'runner-manager host set release_source=URL|DIR'"
            ))
        })?
        .ok_or_else(|| {
            // A setting not made yet: usage (exit 2, nothing written), like a missing
            // argument.
            CliError::Usage(
                "no release source: set one with 'runner-manager host set release_source=URL|DIR' \
                 (a directory or https:// URL holding SHA256SUMS and runner-manager-VERSION-TARGET)"
                    .into(),
            )
        })?;
    let sums = release::read_sums(&source).map_err(failed)?;
    let target = release::target();
    let entries = release::parse_sums(&sums, &target);
    let newest = release::newest(&entries).ok_or_else(|| {
        CliError::Failed(format!(
            "SHA256SUMS of {stored} lists no {}: this target has no release there",
            release::asset_name("VERSION", &target)
        ))
    })?;
    let decision = decide(&current, &newest.version, force);
    if check {
        return report(&decision, &current, &newest.version, out);
    }
    let Decision::Install { version, .. } = decision else {
        out.emit(
            || match decision {
                Decision::Ahead => format!(
                    "runner-manager {current} is newer than the newest release ({}): nothing to do (--force installs it)\n",
                    newest.version
                ),
                _ => format!("runner-manager {current} is the newest release: nothing to do\n"),
            },
            || json!({"current": current, "newest": newest.version, "updated": false}),
        );
        return Ok(());
    };
    let exe = replace::current_exe().map_err(failed)?;
    if let Verdict::Managed(why) = owner::judge(&owner::gather(&exe)) {
        return Err(failed(UpdateError::PackageManaged(why)));
    }
    replace::check_writable(&exe).map_err(failed)?;
    let staged = replace::staging_path(&exe);
    release::fetch(&source, newest, &staged).map_err(|e| match e {
        // The file to look at, not `doctor`: the release itself does not add up.
        UpdateError::Checksum { .. } => CliError::fixed(
            Failure::Other,
            e.to_string(),
            format!(
                "sha256sum {file} in {stored} and compare it with that directory's {sums} line                  for it (a partial upload or a tampered release); when they agree,                  runner-manager update",
                file = newest.file,
                sums = release::SUMS
            ),
        ),
        other => failed(other),
    })?;
    let said = replace::prepare(&staged, &exe, &version).map_err(failed)?;
    // The daemon is asked to hand over only if it runs this file (or cannot be told).
    let now = now_millis();
    let daemon = store.heartbeat()?.filter(|b| b.alive_at(now));
    let other_exe = daemon.as_ref().and_then(|b| runs_other(b.pid, &exe));
    replace::swap(&staged, &exe).map_err(failed)?;
    let daemon_line = match (&daemon, &other_exe) {
        (None, _) => "no daemon is running: the next one started runs the new binary".to_string(),
        (Some(b), Some(other)) => format!(
            "the daemon (pid {}) runs {}, not this binary: it was not asked to hand over",
            b.pid,
            other.display()
        ),
        (Some(b), None) => format!(
            "the daemon (pid {}) stops starting runners, lets its runners finish and exits {}; \
             its supervisor (systemd's unit, or a docs/supervisors.md recipe) starts it again on \
             the new binary (a daemon started by hand must be started again)",
            b.pid,
            crate::selfupdate::EXIT_HANDOVER
        ),
    };
    if other_exe.is_none() {
        let request = daemon_facts::HandoverRequest {
            at: now_millis(),
            version: version.clone(),
        };
        daemon_facts::put_handover_request(store, &request)?;
    }
    out.emit(
        || {
            format!(
                "runner-manager {current} -> {version}: {} replaced, verified against SHA256SUMS ({said})\n{daemon_line}\n",
                exe.display()
            )
        },
        || {
            json!({
                "current": current,
                "newest": version,
                "updated": true,
                "path": exe.display().to_string(),
                "daemon_pid": daemon.as_ref().map(|b| b.pid),
                "handover": daemon.is_some() && other_exe.is_none(),
            })
        },
    );
    Ok(())
}

/// The binary daemon `pid` runs, when it can be read and is not `exe`.
fn runs_other(pid: u32, exe: &std::path::Path) -> Option<PathBuf> {
    let runs = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    (runs != exe).then_some(runs)
}

/// `update --check`: this version, the newest, and whether to update. A script tells
/// "newer available" (exit 14, `update-available`) from "up to date" (0) by the status.
fn report(decision: &Decision, current: &str, newest: &str, out: &mut Out) -> CliResult {
    let available = matches!(decision, Decision::Install { .. });
    out.emit(
        || {
            format!(
                "current {current}\nnewest  {newest}\n{}\n",
                match decision {
                    Decision::Install { .. } => "an update is available: runner-manager update",
                    Decision::Ahead => "this binary is newer than the release source's",
                    Decision::UpToDate => "up to date",
                }
            )
        },
        || json!({"current": current, "newest": newest, "update_available": available}),
    );
    if !available {
        return Ok(());
    }
    out.flush_now()?;
    Err(CliError::classed(
        Failure::UpdateAvailable,
        format!("runner-manager {newest} is available (this is {current})"),
    ))
}
