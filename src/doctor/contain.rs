//! The containment checks: which isolation runners start with, the runner users of
//! the host's uid range, the daemon's capabilities, the cgroups the host has and which
//! limits they enforce, and whether each runner install is safe to share with jobs.

use super::{CheckLine, Class};
use crate::domain::isolation::{self, Powers};
use crate::domain::{Host, InEffect, ScalePolicy};
use crate::runner::cgroup::{Cgroups, Enforced};
use crate::runner::{self, caps};
use crate::store::{SqliteStore, Store, daemon_facts};
use std::path::Path;

/// Every containment line, in order.
pub(super) fn check(state_dir: &Path, store: &SqliteStore, lines: &mut Vec<CheckLine>) {
    let Ok(host) = store.host_or_create() else {
        return;
    };
    let profiles = store.profiles().unwrap_or_default();
    let daemon_pid = store
        .heartbeat()
        .ok()
        .flatten()
        .filter(|b| crate::timefmt::now_millis() - b.heartbeat_at < 60_000)
        .map(|b| b.pid);
    let in_effect = isolation_in_effect(store, &host, daemon_pid);
    lines.push(isolation_line(&in_effect).with_class(Class::Required));
    if let Some(r) = host.runner_uids {
        lines.push(users_line(r, host.capacity).with_class(Class::Required));
    }
    lines.push(capabilities_line(daemon_pid, &in_effect).with_class(Class::Required));
    lines.push(cgroups_line(store, &host, daemon_pid));
    if let InEffect::Uids(_) = in_effect {
        for p in &profiles {
            lines.push(install_line(state_dir, p));
        }
    }
}

/// The daemon's own word when it runs (it knows what it can do); otherwise what the
/// settings would give a daemon with this process's powers.
fn isolation_in_effect(store: &SqliteStore, host: &Host, daemon_pid: Option<u32>) -> InEffect {
    if daemon_pid.is_some()
        && let Ok(Some(word)) = daemon_facts::isolation(store)
    {
        let line = daemon_facts::containment_line(store)
            .ok()
            .flatten()
            .unwrap_or_default();
        // The line is `InEffect::describe`'s: its reason follows the word.
        let why = |prefix: &str| line.strip_prefix(prefix).unwrap_or(&line).to_string();
        return match (word.as_str(), host.runner_uids) {
            ("uids", Some(r)) => InEffect::Uids(r),
            ("refused", _) => InEffect::Refused {
                why: why("refused, no runner starts: "),
            },
            _ => InEffect::None { why: why("none: ") },
        };
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let powers = Powers {
        can_switch_users: caps::can_switch_users(),
        uid,
    };
    isolation::effective(host.isolation, host.runner_uids, powers)
}

fn isolation_line(e: &InEffect) -> CheckLine {
    match e {
        InEffect::Uids(_) => CheckLine::ok("isolation", e.describe()),
        // The reason says what a job can reach; the hint only what to do.
        InEffect::None { .. } => {
            CheckLine::warn("isolation", e.describe(), isolation::CONTAIN_HINT)
        }
        InEffect::Refused { .. } => CheckLine::fail(
            "isolation",
            e.describe(),
            "fix what it names, or set host isolation=none to run jobs uncontained",
        ),
    }
}

/// How many uids of the range are users: fewer than the host's capacity caps how many
/// runners can live at once.
fn users_line(r: crate::domain::UidRange, capacity: u32) -> CheckLine {
    let n = runner::uid::count_users(r, r.len());
    let detail = format!("{n} of the {} uids of {r} have a passwd entry", r.len());
    if n == 0 {
        CheckLine::fail(
            "runner-users",
            detail,
            format!("create them: packaging/install.sh --runner-users {r} --users-only"),
        )
    } else if n < capacity {
        CheckLine::warn(
            "runner-users",
            format!("{detail}: at most {n} runners can live at once, below capacity {capacity}"),
            format!("widen runner_uids, or create the missing users for {r}"),
        )
    } else {
        CheckLine::ok("runner-users", detail)
    }
}

/// The running daemon's effective capabilities against what it needs.
fn capabilities_line(daemon_pid: Option<u32>, e: &InEffect) -> CheckLine {
    let Some(pid) = daemon_pid else {
        return CheckLine::skip("capabilities", "the daemon is not running");
    };
    let Some(mask) = caps::effective_of(&pid.to_string()) else {
        return CheckLine::skip(
            "capabilities",
            format!("cannot read /proc/{pid}/status (run doctor as root)"),
        );
    };
    let needed = matches!(e, InEffect::Uids(_));
    let extra = caps::extra_names(mask);
    if needed && !caps::has_needed(mask) {
        return CheckLine::fail(
            "capabilities",
            format!("the daemon (pid {pid}) lacks some of what per-attempt uids take"),
            "run it as root, as the packaged unit does",
        );
    }
    if needed && !extra.is_empty() {
        return CheckLine::warn(
            "capabilities",
            format!(
                "the daemon (pid {pid}) also holds {}: a flaw in it would reach further",
                extra.join(", ")
            ),
            "use the packaged unit's CapabilityBoundingSet",
        );
    }
    if needed {
        let names: Vec<&str> = caps::NEEDED.iter().map(|c| c.name).collect();
        CheckLine::ok(
            "capabilities",
            format!("the daemon (pid {pid}) holds only {}", names.join(", ")),
        )
    } else {
        CheckLine::ok(
            "capabilities",
            format!("the daemon (pid {pid}) runs jobs as itself; its capabilities are its own"),
        )
    }
}

/// The cgroups the daemon has (its own word while it runs: it lives in another cgroup
/// than this shell), or what this process would have. Whether each profile's limits are
/// in effect is judged apart (`limits:<profile>`, `reconcile::fitness`).
fn cgroups_line(store: &SqliteStore, host: &Host, daemon_pid: Option<u32>) -> CheckLine {
    let (summary, none) = match daemon_pid.and_then(|_| daemon_cgroups(store)) {
        Some((summary, enforced)) => (summary, !enforced.kill),
        None => {
            let cg = Cgroups::detect(host.short_id());
            let summary = format!(
                "{} (as this process sees it; the daemon is not running)",
                cg.summary()
            );
            (summary, cg.is_none())
        }
    };
    if none {
        return CheckLine::warn(
            "cgroups",
            summary,
            "cleanup kills by the runner's own uid instead; limits need cgroups",
        );
    }
    CheckLine::ok("cgroups", summary)
}

/// The running daemon's cgroup summary and what its cgroups enforce, as it recorded
/// them at start.
fn daemon_cgroups(store: &SqliteStore) -> Option<(String, Enforced)> {
    daemon_facts::cgroups(store).ok().flatten()
}

/// What limits a profile's runners would get: the running daemon's word, or, with no
/// daemon, what a daemon started like this process would find.
pub(super) fn enforced_limits(store: &SqliteStore, host: &Host) -> Enforced {
    let running = store
        .heartbeat()
        .ok()
        .flatten()
        .is_some_and(|b| crate::timefmt::now_millis() - b.heartbeat_at < 60_000);
    match running.then(|| daemon_cgroups(store)).flatten() {
        Some((_, e)) => e,
        None => Cgroups::detect(host.short_id()).enforced(),
    }
}

/// A runner install every runner's root links to must be the manager's and read-only
/// to everyone else, or one job could change it for every later one.
fn install_line(state_dir: &Path, p: &ScalePolicy) -> CheckLine {
    let dir = p
        .runner_dir
        .clone()
        .unwrap_or_else(|| state_dir.join("runner"));
    let name = format!("install-safety:{}", p.name);
    if runner::check_install(&dir).is_err() {
        return CheckLine::skip(name, format!("no runner install at {}", dir.display()));
    }
    match runner::root::audit_install(&dir) {
        Ok(n) => CheckLine::ok(
            name,
            format!(
                "{}: {n} entries, none writable by group or others",
                dir.display()
            ),
        ),
        Err(e) => CheckLine::fail(name, e.to_string(), "chmod -R go-w and chown -R root: it"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Isolation;

    /// Issue 38: the warning said "set host runner_uids" and "a job can read what
    /// the daemon's user can" in its reason and again in its hint. Each is said once.
    #[test]
    fn regression_38_isolation_warning_gives_its_advice_once() {
        let root = Powers {
            can_switch_users: true,
            uid: 0,
        };
        for setting in [Isolation::Auto, Isolation::None] {
            let line = isolation_line(&isolation::effective(setting, None, root));
            let hint = line.hint.clone().unwrap();
            let all = format!("{} {hint}", line.detail);
            assert_eq!(all.matches("runner_uids=").count(), 1, "{all}");
            assert_eq!(all.matches("can reach what it can").count(), 1, "{all}");
            assert!(!line.detail.contains("install.sh"), "{all}");
        }
    }
}
