//! `host show|set` and `status`: this host, and what the store knows now (with each
//! scale set profile's session). `host reidentify` is `cli::reidentify`'s.

use super::output::{self, Out, host_json, or_dash, table, time, yes_no};
use super::parse::Invocation;
use super::{CliError, CliResult, setting_risks, warn};
use crate::domain::host_settings::{Beside, HostSettings};
use crate::domain::validate;
use crate::domain::{DemandSource, Host, Isolation, ScalePolicy};
use crate::meter::units;
use crate::store::daemon_facts::CredentialSeen;
use crate::store::{HostEdit, SessionStatus, Store};
use crate::timefmt::{Millis, now_millis};
use serde_json::{Value, json};

/// The host as `host show` prints it, field by field.
fn host_fields(h: &Host) -> Vec<(&'static str, String)> {
    vec![
        ("id", h.id.clone()),
        ("name", h.name.clone()),
        ("os", h.os.clone()),
        ("arch", h.arch.clone()),
        ("capacity", h.capacity.to_string()),
        ("draining", yes_no(h.draining)),
        ("coordinator", or_dash(h.coordinator.as_ref())),
        (
            "coordinator_token_file",
            or_dash(h.coordinator_token_file.as_ref().map(|p| p.display())),
        ),
        (
            "coordinator_ca_file",
            or_dash(h.coordinator_ca_file.as_ref().map(|p| p.display())),
        ),
        ("coordinator_insecure", yes_no(h.coordinator_insecure)),
        ("isolation", h.isolation.as_str().to_string()),
        ("runner_uids", or_dash(h.runner_uids.as_ref())),
        ("retention", crate::timefmt::duration(h.retention_secs)),
        ("logs_max", crate::meter::units::bytes(h.logs_max_bytes)),
        (
            "disk_reserve",
            crate::meter::units::bytes(h.disk_reserve_bytes),
        ),
        (
            "env",
            or_dash((!h.env.is_empty()).then(|| crate::domain::runner_env::display(&h.env))),
        ),
        (
            "runner_version",
            h.runner_version.clone().unwrap_or_else(|| "latest".into()),
        ),
        (
            "runtime_root",
            or_dash(h.runtime_root.as_ref().map(|p| p.display())),
        ),
        ("cache_cap", crate::meter::units::bytes(h.cache_cap_bytes)),
    ]
}

/// The host's settings as `host show` prints them: the row's, then those kept beside.
fn settings_fields(s: &HostSettings) -> Vec<(&'static str, String)> {
    let mut fields = host_fields(&s.host);
    fields.extend(
        Beside::ALL
            .into_iter()
            .map(|b| (b.name(), or_dash(s.beside(b)))),
    );
    fields
}

/// `host set`'s one line: the settings that changed, as `host show` prints them.
fn host_changes(edit: &HostEdit) -> String {
    let changed: Vec<String> = settings_fields(&edit.before)
        .into_iter()
        .zip(settings_fields(&edit.after))
        .filter(|(b, a)| b.1 != a.1)
        .map(|(_, (k, v))| format!("{k} {v}"))
        .collect();
    let name = &edit.after.host.name;
    if changed.is_empty() {
        format!("host {name} unchanged\n")
    } else {
        format!("host {name} updated: {}\n", changed.join(", "))
    }
}

pub fn show(store: &dyn Store, out: &mut Out) -> CliResult {
    store.host_or_create()?;
    let s = crate::store::read_host_settings(store)?;
    out.emit(
        || output::block(&settings_fields(&s)),
        || {
            let mut v = host_json(&s.host);
            for b in Beside::ALL {
                v[b.name()] = json!(s.beside(b));
            }
            v
        },
    );
    Ok(())
}

/// The keys `host set` accepts.
pub const SETTABLE_KEYS: &[&str] = crate::domain::host::SETTABLE_KEYS;

/// `host set KEY=VALUE...`: one `store::edit_host`, checked on this machine
/// (`facts::host_probe`), written whole or not at all.
pub fn set(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    store.host_or_create()?;
    let mut settings = Vec::new();
    for kv in &inv.positionals {
        settings.push(validate::key_value(kv)?);
    }
    let warnings = setting_risks(&inv.positionals)?;
    let probe = crate::facts::host_probe::Probe {
        state_dir: super::state_dir(inv)?,
    };
    let edit = crate::store::edit_host(store, &settings, &probe)?;
    out.emit(|| host_changes(&edit), || host_json(&edit.after.host));
    warn(&warnings);
    Ok(())
}

/// What containment runners start with: the daemon's own word for it (`uids`, `none`,
/// `refused`) and line, as it last recorded them; or, with no daemon running, what the
/// settings ask for.
fn isolation_line(
    store: &dyn Store,
    h: &Host,
    alive: bool,
) -> Result<(Option<String>, String, String), CliError> {
    use crate::store::daemon_facts;
    let word = daemon_facts::isolation(store)?;
    let line = daemon_facts::containment_line(store)?;
    let cgroups = daemon_facts::cgroups_summary(store)?
        .filter(|_| alive)
        .unwrap_or_else(|| "- (the daemon detects them when it starts)".into());
    Ok(match (alive, word, line) {
        (true, Some(w), Some(l)) => (Some(w), l, cgroups),
        _ => (None, isolation_asked(h.isolation, h.runner_uids), cgroups),
    })
}

/// What the settings ask for, said as one phrase while no daemon runs (the daemon
/// decides, knowing what it can do): `none once the daemon starts: runner_uids is
/// not set`.
fn isolation_asked(isolation: Isolation, uids: Option<crate::domain::UidRange>) -> String {
    let when = "once the daemon starts";
    match (isolation, uids) {
        (Isolation::None, _) => format!("none {when}: isolation=none"),
        (_, Some(r)) => format!("uids {r} {when}"),
        (Isolation::Uids, None) => {
            format!("refused {when}: isolation=uids needs runner_uids")
        }
        (Isolation::Auto, None) => format!("none {when}: runner_uids is not set"),
    }
}

/// A profile's limiting factor as `status` shows it: what the daemon last wrote while
/// it runs; with no daemon running nothing reconciles, whatever it wrote last (a
/// drain it was in, its own stop), so that is what is said.
fn limit_shown(limit: &impl std::fmt::Display, daemon_alive: bool) -> String {
    if daemon_alive {
        limit.to_string()
    } else {
        "not_reconciling (daemon not running)".into()
    }
}

/// A scale set profile's row of `status`'s session table: SESSION, HELD FOR, LAST
/// MESSAGE, LAST POLL, NEXT TRY, REASON. With no daemon running nothing is held (what
/// it last recorded may say otherwise), and with no row the host runs no listener for
/// it (directed, or not started yet).
fn session_cells(row: Option<&SessionStatus>, daemon_alive: bool, now: Millis) -> Vec<String> {
    let dash = || "-".to_string();
    let Some(r) = row else {
        return vec![dash(), dash(), dash(), dash(), dash(), dash()];
    };
    let st = &r.session;
    if !daemon_alive {
        return vec![
            "none (daemon not running)".into(),
            dash(),
            st.last_message(now),
            dash(),
            dash(),
            dash(),
        ];
    }
    vec![
        st.phase.to_string(),
        or_dash(st.held_for(now)),
        st.last_message(now),
        st.last_poll(now),
        or_dash(st.next_try(now)),
        or_dash(st.reason.as_ref()),
    ]
}

/// `status`'s daemon line: running since when and its last pass, or when last seen.
pub(super) fn daemon_line(hb: Option<&crate::store::Heartbeat>, alive: bool) -> String {
    match (hb, alive) {
        (Some(b), true) => format!(
            "running (pid {}, version {}, since {}, last pass {})",
            b.pid,
            b.version,
            time(b.started_at),
            time(b.heartbeat_at)
        ),
        (Some(b), false) => format!("not running (last seen {})", time(b.heartbeat_at)),
        (None, _) => "not running".into(),
    }
}

/// What is left of a target's rate-limit budget, as `status` shows it:
/// `1234/5000, resets 14:05` (UTC), or only what is known.
fn budget_cell(st: &crate::store::TargetStatus) -> String {
    let reset = |ms: Millis| crate::timefmt::format_rfc3339(ms)[11..16].to_string();
    match (
        st.rate_limit_remaining,
        st.rate_limit_limit,
        st.rate_limit_reset,
    ) {
        (Some(r), Some(l), Some(at)) => format!("{r}/{l}, resets {}", reset(at)),
        (Some(r), Some(l), None) => format!("{r}/{l}"),
        (Some(r), None, _) => r.to_string(),
        _ => "-".into(),
    }
}

/// How often a target reads its queue now: `5s`, `1m`, or `12s paced` when the budget
/// governor stretched its `poll_interval` so the budget lasts to the reset.
fn poll_cell(t: &crate::domain::Target, st: &crate::store::TargetStatus) -> String {
    match st.poll_every_ms {
        None => "-".into(),
        Some(ms) => {
            let every = crate::timefmt::duration(((ms.max(0) + 999) / 1000) as u64);
            if ms > t.poll_interval_secs as i64 * 1000 {
                format!("{every} paced")
            } else {
                every
            }
        }
    }
}

/// `status`'s targets: each one's mode, rate-limit budget, how often it reads its
/// queue, and last error.
fn targets_table(
    targets: &[crate::domain::Target],
    tstat: &[crate::store::TargetStatus],
) -> String {
    let trows: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            let st = tstat.iter().find(|s| s.target == t.name);
            vec![
                t.name.clone(),
                t.scope.display(),
                or_dash(st.map(|s| &s.mode)),
                st.map_or_else(|| "-".into(), budget_cell),
                st.map_or_else(|| "-".into(), |s| poll_cell(t, s)),
                or_dash(st.and_then(|s| s.last_error.as_ref())),
            ]
        })
        .collect();
    table(
        &["TARGET", "SCOPE", "MODE", "BUDGET", "POLL", "LAST ERROR"],
        &trows,
    )
}

/// `status`'s profiles: live of max, min, meters added up, demand, limit, last error.
fn profiles_table(
    profiles: &[crate::domain::ScalePolicy],
    pstat: &[crate::store::ProfileStatus],
    live: &std::collections::BTreeMap<String, u32>,
    meters: &std::collections::BTreeMap<String, crate::meter::Totals>,
    alive: bool,
) -> String {
    // With no daemon running, live counts and meters are what a gone daemon
    // recorded: marked, and said so under the table.
    let mut marked = false;
    let mut stale = |cell: String, recorded: bool| {
        if alive || !recorded {
            cell
        } else {
            marked = true;
            format!("{cell}{STALE_MARK}")
        }
    };
    let prows: Vec<Vec<String>> = profiles
        .iter()
        .map(|p| {
            let st = pstat.iter().find(|s| s.profile == p.name);
            let n = live.get(&p.name).copied().unwrap_or(0);
            let m = meters.get(&p.name);
            vec![
                p.name.clone(),
                p.target.clone(),
                super::profiles::state(p),
                stale(format!("{n}/{}", p.max_capacity), n > 0),
                p.min_capacity.to_string(),
                stale(or_dash(m.map(|t| units::bytes(t.rss_bytes))), m.is_some()),
                stale(
                    or_dash(m.map(|t| units::percent(t.cpu_percent))),
                    m.is_some(),
                ),
                or_dash(st.map(|s| s.demand)),
                or_dash(st.map(|s| limit_shown(&s.limiting, alive))),
                or_dash(st.and_then(|s| s.last_error.as_ref())),
            ]
        })
        .collect();
    let mut t = table(
        &[
            "PROFILE",
            "TARGET",
            "STATE",
            "LIVE/MAX",
            "MIN",
            "RSS",
            "CPU",
            "DEMAND",
            "LIMITED BY",
            "LAST ERROR",
        ],
        &prows,
    );
    if marked {
        t.push_str(&format!("{STALE_MARK} {STALE_NOTE}\n"));
    }
    t
}

/// What marks a count or meter a gone daemon recorded, and what the mark says.
const STALE_MARK: &str = "*";
const STALE_NOTE: &str = "stale: recorded by a daemon that is not running; nothing measures it now";

/// Everything `status` shows, read once.
struct StatusView {
    now: Millis,
    /// How the store differs from the description file last applied (`apply`).
    drift: Option<String>,
    dir: std::path::PathBuf,
    h: Host,
    targets: Vec<crate::domain::Target>,
    tstat: Vec<crate::store::TargetStatus>,
    profiles: Vec<ScalePolicy>,
    pstat: Vec<crate::store::ProfileStatus>,
    live: std::collections::BTreeMap<String, u32>,
    live_total: u32,
    hb: Option<crate::store::Heartbeat>,
    alive: bool,
    meters: std::collections::BTreeMap<String, crate::meter::Totals>,
    isolation: (Option<String>, String, String),
    kept: crate::facts::kept::Kept,
    caches: (crate::runner::slots::Footprint, Option<Millis>),
    runner: crate::facts::runner_check::Seen,
    sessions: Vec<SessionStatus>,
    webhook: Option<(String, Value)>,
    link: Option<LinkView>,
    /// Per profile, over the last day: jobs lost to the host, and how many re-run.
    lost: Vec<(String, u64, u64)>,
    /// Per target, what the daemon sees wrong with its credential.
    credentials: std::collections::BTreeMap<String, CredentialSeen>,
    identity: Identity,
}

/// `status`'s identity line: whether the host id is this machine's
/// (`domain::identity::describe`), and its last change, if any.
struct Identity {
    ok: bool,
    line: String,
    changed: Option<String>,
}

impl Identity {
    fn read(store: &dyn Store) -> Result<Identity, CliError> {
        let kept = store.kept_machine_id()?;
        let current = crate::runner::machine::current();
        let (ok, line) = crate::domain::identity::describe(kept.as_deref(), current.as_deref());
        Ok(Identity {
            ok,
            line,
            changed: crate::store::daemon_facts::identity_change(store)?,
        })
    }

    fn text(&self) -> String {
        match &self.changed {
            Some(c) if self.ok => format!("{}; {c}", self.line),
            _ => self.line.clone(),
        }
    }
}

/// The window of `status`'s lost-job counts.
const LOST_WINDOW: Millis = 24 * 3_600_000;

impl StatusView {
    fn read(store: &dyn Store, dir: &std::path::Path) -> Result<StatusView, CliError> {
        let now = now_millis();
        let h = store.host_or_create()?;
        let profiles = store.profiles()?;
        let live = store.live_counts()?;
        let hb = store.heartbeat()?;
        let alive = hb.as_ref().is_some_and(|b| b.alive_at(now));
        let installs: Vec<std::path::PathBuf> = profiles
            .iter()
            .map(|p| p.runner_dir.clone().unwrap_or_else(|| dir.join("runner")))
            .collect();
        let runner = crate::facts::runner_check::Seen::read(
            store,
            h.runner_version.as_deref(),
            Some(&installs),
        )?;
        let targets = store.targets()?;
        let credentials = targets
            .iter()
            .filter_map(|t| Some((t.name.clone(), CredentialSeen::read(store, &t.name)?)))
            .collect();
        Ok(StatusView {
            dir: dir.to_path_buf(),
            credentials,
            targets,
            tstat: store.target_statuses()?,
            pstat: store.profile_statuses()?,
            live_total: live.values().sum(),
            meters: output::profile_meters(store)?,
            isolation: isolation_line(store, &h, alive)?,
            kept: crate::facts::kept::Kept::read(dir, &h),
            caches: crate::facts::caches::shown(store, dir, &h, now),
            sessions: store.session_statuses()?,
            webhook: webhook_status(store, alive, now),
            link: LinkView::read(store, &h, hb.as_ref(), alive),
            lost: store.rerun_counts(now - LOST_WINDOW)?,
            identity: Identity::read(store)?,
            drift: crate::config_file::drift(store),
            runner,
            live,
            profiles,
            hb,
            alive,
            h,
            now,
        })
    }

    /// The capacity line: live of capacity, or what a gone daemon recorded as live.
    fn capacity(&self) -> String {
        let cap = self.h.capacity;
        if self.alive || self.live_total == 0 {
            format!("{} live of {cap}", self.live_total)
        } else {
            format!(
                "{} recorded live of {cap} (stale: no daemon running)",
                self.live_total
            )
        }
    }

    fn text(&self) -> String {
        let mut rows = vec![
            ("state_dir", self.dir.display().to_string()),
            ("host", format!("{} ({})", self.h.name, self.h.id)),
            ("identity", self.identity.text()),
            ("platform", format!("{}/{}", self.h.os, self.h.arch)),
            ("capacity", self.capacity()),
            ("draining", yes_no(self.h.draining)),
            (
                "coordinator",
                match &self.link {
                    Some(l) => l.line(self.now),
                    None => or_dash(self.h.coordinator.as_ref()),
                },
            ),
            ("daemon", daemon_line(self.hb.as_ref(), self.alive)),
            ("isolation", self.isolation.1.clone()),
            ("cgroups", self.isolation.2.clone()),
            ("kept", self.kept.line()),
            (
                "caches",
                crate::facts::caches::shown_line(&self.caches.0, self.caches.1, self.now),
            ),
            ("runner", self.runner.line()),
        ];
        if let Some((line, _)) = &self.webhook {
            rows.push(("webhook", line.clone()));
        }
        if let Some(drift) = &self.drift {
            rows.push(("drift", drift.clone()));
        }
        let mut s = output::block(&rows);
        s.push('\n');
        s.push_str(&targets_table(&self.targets, &self.tstat));
        for (t, seen) in &self.credentials {
            if let Some(line) = seen.describe(self.now) {
                s.push_str(&format!("credential of {t}: {line}\n"));
            }
        }
        s.push('\n');
        s.push_str(&profiles_table(
            &self.profiles,
            &self.pstat,
            &self.live,
            &self.meters,
            self.alive,
        ));
        if !self.lost.is_empty() {
            let each: Vec<String> = self
                .lost
                .iter()
                .map(|(p, lost, rerun)| format!("{p} {lost} ({rerun} re-run)"))
                .collect();
            s.push_str(&format!(
                "jobs lost to the host in the last day: {}\n",
                each.join(", ")
            ));
        }
        if let Some(t) = scalesets_table(&self.profiles, &self.sessions, self.alive, self.now) {
            s.push('\n');
            s.push_str(&t);
        }
        s
    }

    fn json(&self) -> Value {
        let (h, alive, hb) = (&self.h, self.alive, self.hb.as_ref());
        let session_of = |p: &str| self.sessions.iter().find(|r| r.profile == p);
        json!({
            "state_dir": self.dir.display().to_string(),
            "host": host_json(h),
            "identity": {
                "ok": self.identity.ok,
                "detail": self.identity.line,
                "last_change": self.identity.changed,
            },
            "live": self.live_total,
            "live_stale": !alive,
            "coordinator_link": self.link.as_ref().map(LinkView::json),
            "kept": self.kept,
            "drift": self.drift,
            "caches": caches_json(&self.caches.0, self.caches.1),
            "runner": self.runner,
            "webhook": self.webhook.as_ref().map(|(_, v)| v),
            "isolation": {
                "setting": h.isolation.as_str(),
                "runner_uids": h.runner_uids.map(|r| r.to_string()),
                "in_effect": self.isolation.0,
                "detail": self.isolation.1,
                "cgroups": self.isolation.2,
            },
            "daemon": {
                "running": alive,
                "pid": hb.map(|b| b.pid),
                "version": hb.map(|b| b.version.clone()),
                "started_at": hb.map(|b| time(b.started_at)),
                "heartbeat_at": hb.map(|b| time(b.heartbeat_at)),
            },
            "targets": self.targets.iter().map(|t| {
                let mut v = target_json(t, self.tstat.iter().find(|s| s.target == t.name));
                let seen = self.credentials.get(&t.name).cloned().unwrap_or_default();
                v["credential"] = json!({
                    "refused_since": seen.refused_since.map(time),
                    "problem": seen.problem,
                    "expires_at": seen.expires_at.map(time),
                });
                v
            }).collect::<Vec<_>>(),
            "profiles": self.profiles.iter().map(|p| {
                let st = self.pstat.iter().find(|s| s.profile == p.name);
                let mut meters = output::totals_json(self.meters.get(&p.name));
                meters["stale"] = json!(!alive);
                let lost = self.lost.iter().find(|(n, ..)| *n == p.name);
                json!({
                    "name": p.name,
                    "target": p.target,
                    "active": p.active,
                    "mode": p.mode.as_str(),
                    "live": self.live.get(&p.name).copied().unwrap_or(0),
                    "live_stale": !alive,
                    "min": p.min_capacity,
                    "max": p.max_capacity,
                    "meters": meters,
                    "demand": st.map(|s| s.demand),
                    "limiting": st.map(|s| limit_shown(&s.limiting, alive)),
                    "last_error": st.and_then(|s| s.last_error.clone()),
                    "updated_at": st.map(|s| time(s.updated_at)),
                    "session": (p.demand == DemandSource::Scaleset)
                        .then(|| output::session_json(session_of(&p.name), alive))
                        .flatten(),
                    "jobs_lost_last_day": lost.map_or(0, |l| l.1),
                    "jobs_rerun_last_day": lost.map_or(0, |l| l.2),
                })
            }).collect::<Vec<_>>(),
        })
    }
}

/// A coordinated host's link to its coordinator, as `status` shows it: what the
/// running daemon last recorded, or down with no daemon running (since it was last
/// seen).
struct LinkView {
    url: String,
    /// `None`: the daemon has not recorded its link yet.
    up: Option<bool>,
    since: Option<Millis>,
    last_error: Option<String>,
    last_error_at: Option<Millis>,
}

impl LinkView {
    fn read(
        store: &dyn Store,
        h: &Host,
        hb: Option<&crate::store::Heartbeat>,
        alive: bool,
    ) -> Option<LinkView> {
        let url = h.coordinator.clone()?;
        let seen = crate::store::daemon_facts::LinkSeen::read(store).filter(|s| s.url == url);
        Some(match seen {
            _ if !alive => LinkView {
                url,
                up: Some(false),
                since: hb.map(|b| b.heartbeat_at),
                last_error: Some("no daemon running".into()),
                last_error_at: None,
            },
            Some(s) => LinkView {
                url,
                up: Some(s.up),
                since: Some(s.since),
                last_error: s.last_error,
                last_error_at: s.last_error_at,
            },
            None => LinkView {
                url,
                up: None,
                since: None,
                last_error: None,
                last_error_at: None,
            },
        })
    }

    fn state(&self) -> &'static str {
        match self.up {
            Some(true) => "up",
            Some(false) => "down",
            None => "unknown",
        }
    }

    fn line(&self, now: Millis) -> String {
        let since = self
            .since
            .map(|t| format!(" since {} ({} ago)", time(t), crate::timefmt::age(now - t)))
            .unwrap_or_default();
        let error = match (self.up, &self.last_error) {
            (Some(false), Some(e)) => format!(": {e}"),
            (Some(true), Some(e)) => format!(" (last error: {e})"),
            _ => String::new(),
        };
        match self.up {
            None => format!("{} (link not reported yet)", self.url),
            Some(_) => format!("{} (link {}{since}{error})", self.url, self.state()),
        }
    }

    fn json(&self) -> Value {
        json!({
            "url": self.url,
            "state": self.state(),
            "since": self.since.map(time),
            "last_error": self.last_error,
            "last_error_at": self.last_error_at.map(time),
        })
    }
}

pub fn status(store: &dyn Store, out: &mut Out, dir: &std::path::Path) -> CliResult {
    let v = StatusView::read(store, dir)?;
    out.emit(|| v.text(), || v.json());
    Ok(())
}

/// `status`'s webhook line and its `--json` entry: the running listener's report, or
/// that none listens; `None` while no webhook is set up. The entry is fields
/// (`listening`, `listen`, `since`, `last_delivery`, `last_loss`, the counts, `error`), with the
/// line as `detail`.
fn webhook_status(store: &dyn Store, alive: bool, now: Millis) -> Option<(String, Value)> {
    let webhook = crate::store::daemon_facts::WebhookSeen::read(store).filter(|_| alive);
    let setting = crate::facts::webhook::settings(store);
    let entry = |listening: bool, listen: Option<String>, error: Option<String>, line: &str| {
        let seen = webhook.as_ref();
        json!({
            "listening": listening,
            "listen": listen,
            "since": seen.map(|w| time(w.since)),
            "last_delivery": seen.and_then(|w| w.last_delivery).map(time),
            "last_loss": seen.and_then(|w| w.last_loss).map(time),
            "accepted": seen.map(|w| w.accepted),
            "rejected": seen.map(|w| w.rejected),
            "jobs_lists_spared": seen.map(|w| w.spared),
            "error": error,
            "detail": line,
        })
    };
    let line = match (&webhook, &setting) {
        (Some(seen), _) => seen.describe(now),
        (None, Ok(Some((listen, _)))) => format!("set to {listen}; no daemon listens"),
        (None, Err(e)) => e.clone(),
        (None, Ok(None)) => return None,
    };
    let value = match (&webhook, setting) {
        (Some(seen), _) => entry(
            seen.error.is_none(),
            Some(seen.listen.clone()),
            seen.error.clone(),
            &line,
        ),
        (None, Ok(set)) => entry(false, set.map(|(l, _)| l.to_string()), None, &line),
        (None, Err(e)) => entry(false, None, Some(e), &line),
    };
    Some((line, value))
}

/// `status --json`'s `caches`: what caches and kept workspaces hold against the cap,
/// and when that was measured (`None`: measured now).
fn caches_json(caches: &crate::runner::slots::Footprint, measured: Option<Millis>) -> Value {
    json!({
        "caches_bytes": caches.caches_bytes,
        "cache_targets": caches.cache_targets,
        "workspaces_bytes": caches.workspaces_bytes,
        "workspaces": caches.workspaces,
        "cap_bytes": caches.cap_bytes,
        "measured_at": measured.map(time),
    })
}

/// `status`'s scale set table: one row per scale set profile, `None` when there is none.
fn scalesets_table(
    profiles: &[ScalePolicy],
    sessions: &[SessionStatus],
    alive: bool,
    now: Millis,
) -> Option<String> {
    let rows: Vec<Vec<String>> = profiles
        .iter()
        .filter(|p| p.demand == DemandSource::Scaleset)
        .map(|p| {
            let mut row = vec![p.name.clone()];
            let session = sessions.iter().find(|r| r.profile == p.name);
            row.extend(session_cells(session, alive, now));
            row
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(table(
        &[
            "SCALE SET",
            "SESSION",
            "HELD FOR",
            "LAST MESSAGE",
            "LAST POLL",
            "NEXT TRY",
            "REASON",
        ],
        &rows,
    ))
}

/// One target in `status --json`, with what the daemon last concluded about it.
fn target_json(t: &crate::domain::Target, st: Option<&crate::store::TargetStatus>) -> Value {
    json!({
        "name": t.name,
        "scope": output::scope_json(&t.scope),
        "mode": st.map(|s| s.mode.to_string()),
        "rate_limit_remaining": st.and_then(|s| s.rate_limit_remaining),
        "rate_limit": st.map(|s| json!({
            "limit": s.rate_limit_limit,
            "remaining": s.rate_limit_remaining,
            "reset": s.rate_limit_reset.map(time),
        })),
        "poll_every_secs": st.and_then(|s| s.poll_every_ms).map(|ms| ms as f64 / 1000.0),
        "poll_paced": st.and_then(|s| s.poll_every_ms)
            .map(|ms| ms > t.poll_interval_secs as i64 * 1000),
        "last_error": st.and_then(|s| s.last_error.clone()),
        "updated_at": st.map(|s| time(s.updated_at)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SessionPhase, SessionState};

    const NOW: Millis = 1_796_032_800_000;

    fn row(session: SessionState) -> SessionStatus {
        SessionStatus {
            profile: "ss".into(),
            target: "t".into(),
            session,
            updated_at: NOW,
        }
    }

    #[test]
    fn session_cells_in_human_units() {
        let held = row(SessionState {
            phase: SessionPhase::Held.into(),
            session_id: Some("a1b2".into()),
            held_since: Some(NOW - 7_500_000),
            last_message_id: Some(42),
            last_message_at: Some(NOW - 5_000),
            last_poll_at: Some(NOW - 1_000),
            ..SessionState::default()
        });
        assert_eq!(
            session_cells(Some(&held), true, NOW),
            ["held", "2h05m", "#42 5s ago", "1s ago", "-", "-"]
        );
        let conflict = row(SessionState {
            phase: SessionPhase::Conflict.into(),
            reason: Some("another listener holds it (owner x)".into()),
            retry_at: Some(NOW + 12_000),
            ..SessionState::default()
        });
        assert_eq!(
            session_cells(Some(&conflict), true, NOW),
            [
                "conflict",
                "-",
                "none",
                "never",
                "in 12s",
                "another listener holds it (owner x)"
            ]
        );
        assert_eq!(
            session_cells(Some(&held), false, NOW),
            [
                "none (daemon not running)",
                "-",
                "#42 5s ago",
                "-",
                "-",
                "-"
            ]
        );
        assert_eq!(session_cells(None, true, NOW), ["-"; 6]);
    }

    /// Issue 38: `status` said `none (runner_uids is not set) (the daemon decides when
    /// it starts)`. Each case is one phrase now, with no parentheses.
    #[test]
    fn regression_38_isolation_asked_is_one_phrase() {
        let r = crate::domain::UidRange::parse("60000-60009").unwrap();
        let cases = [
            (
                Isolation::Auto,
                None,
                "none once the daemon starts: runner_uids is not set",
            ),
            (
                Isolation::None,
                Some(r),
                "none once the daemon starts: isolation=none",
            ),
            (
                Isolation::Auto,
                Some(r),
                "uids 60000-60009 once the daemon starts",
            ),
            (
                Isolation::Uids,
                None,
                "refused once the daemon starts: isolation=uids needs runner_uids",
            ),
        ];
        for (isolation, uids, want) in cases {
            let got = isolation_asked(isolation, uids);
            assert_eq!(got, want);
            assert!(!got.contains('('), "{got}");
        }
    }

    /// Issue 38: the POLL column said `60s` where `target show` and `top` say `1m`.
    #[test]
    fn regression_38_poll_cell_in_the_settings_form() {
        use crate::domain::{CredentialRef, Target, TargetScope};
        let t = Target {
            name: "t".into(),
            scope: TargetScope::Repo {
                owner: "o".into(),
                repo: "r".into(),
            },
            api_url: "https://api.github.com".into(),
            credential: CredentialRef::TokenEnv { var: "T".into() },
            poll_interval_secs: 60,
            repos: vec![],
            max_in_flight: 4,
            secondary_limit: Some(900),
        };
        let st = |ms| crate::store::TargetStatus {
            target: "t".into(),
            mode: crate::domain::status::Reported::Known(
                crate::domain::status::TargetMode::Standalone,
            ),
            last_error: None,
            error_kind: None,
            rate_limit_remaining: None,
            rate_limit_limit: None,
            rate_limit_reset: None,
            poll_every_ms: Some(ms),
            updated_at: NOW,
        };
        assert_eq!(poll_cell(&t, &st(60_000)), "1m");
        assert_eq!(poll_cell(&t, &st(90_000)), "90s paced");
    }
}
