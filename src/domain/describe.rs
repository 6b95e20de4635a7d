//! A host described in one file (`apply`, `export`, `daemon --config`): its settings,
//! targets (credentials by reference only) and profiles as TOML, read with the very
//! keys `host set`, `target set` and `profile set` take, and the difference between a
//! description and the store as a plan (pure: each value is checked by the setting's
//! own `apply_setting`, nothing here validates twice).
//!
//! ```toml
//! [host]
//! capacity = 4
//! [targets.acme]
//! repo = "acme/app"                 # or org = "acme"
//! token_file = "/etc/runner-manager/acme.token"
//! [profiles.linux]
//! target = "acme"
//! labels = "linux,x64"
//! max = 4
//! env.CI_CACHE = "/srv/cache"       # env.NAME, as `profile set env.NAME=` takes it
//! ```
//!
//! A key the file leaves out keeps its value (a new profile or target gets the
//! default); a target or profile the store has and the file does not is kept, and
//! listed, unless `--prune` removes it.

use super::host_settings::{Beside, HostSettings};
use super::validate::{self, Invalid};
use super::{CredentialRef, ScalePolicy, Target, TargetScope};
use std::collections::BTreeMap;

/// `KEY`, `VALUE` pairs as the `set` commands take them, in the file's order.
pub type Settings = Vec<(String, String)>;

/// The largest description read: far past a fleet's (a profile takes about 300 bytes),
/// small enough that a wrong file (a log, an image) is refused, not parsed.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// The sections a file may have.
const SECTIONS: &[&str] = &["host", "targets", "profiles"];
/// A target's keys besides `target set`'s: its scope, which `target add` names.
const SCOPE_KEYS: &[&str] = &["repo", "org"];
/// The keys naming a credential; a target has exactly one kind.
const CREDENTIAL_KEYS: &[&str] = &["token_file", "token_env", "app_id", "app_key"];

/// One target as the file gives it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetSpec {
    /// `repo = "OWNER/REPO"` or `org = "ORG"`; required for a new target.
    pub scope: Option<TargetScope>,
    pub settings: Settings,
}

/// What a file describes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Description {
    pub host: Settings,
    pub targets: BTreeMap<String, TargetSpec>,
    pub profiles: BTreeMap<String, Settings>,
}

/// The store's side: the host's settings, every target and profile.
#[derive(Debug, Clone)]
pub struct Current {
    pub host: HostSettings,
    pub targets: Vec<Target>,
    pub profiles: Vec<ScalePolicy>,
}

/// Reads a description; a refusal names the place in the file (`profiles.linux.maxx`)
/// and, for a key no section takes, the one it most likely meant.
pub fn parse(text: &str) -> Result<Description, Invalid> {
    if text.len() > MAX_FILE_BYTES {
        return Err(Invalid::new(
            "FILE",
            format!("is larger than a description may be ({MAX_FILE_BYTES} bytes)"),
        ));
    }
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| not_toml(text, &e))?;
    let mut d = Description::default();
    for (section, value) in &table {
        match section.as_str() {
            "host" => d.host = settings("host", value)?,
            "targets" => {
                for (name, v) in sub_tables("targets", value)? {
                    let at = format!("targets.{name}");
                    validate::name(&at, name)?;
                    d.targets.insert(name.clone(), target_spec(&at, v)?);
                }
            }
            "profiles" => {
                for (name, v) in sub_tables("profiles", value)? {
                    let at = format!("profiles.{name}");
                    validate::name(&at, name)?;
                    d.profiles.insert(name.clone(), settings(&at, v)?);
                }
            }
            other => return Err(unknown(other, "section", SECTIONS)),
        }
    }
    Ok(d)
}

/// A file that is not TOML: where and why, never the line itself (a token pasted
/// where a reference belongs must not reach a log or a terminal).
fn not_toml(text: &str, e: &toml::de::Error) -> Invalid {
    let at = e
        .span()
        .map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!(" at line {line}, column {column}")
        })
        .unwrap_or_default();
    Invalid::new(
        "FILE",
        format!("is not TOML{at}: {}", e.message().trim_end()),
    )
}

fn unknown(key: &str, what: &str, known: &[&str]) -> Invalid {
    let guess = validate::nearest(key, known.iter().copied())
        .map(|k| format!("; did you mean '{k}'?"))
        .unwrap_or_default();
    Invalid::new(
        key,
        format!("unknown {what}{guess} (known: {})", known.join(", ")),
    )
}

fn sub_tables<'a>(at: &str, v: &'a toml::Value) -> Result<&'a toml::Table, Invalid> {
    let t = v
        .as_table()
        .ok_or_else(|| Invalid::new(at, format!("must be a table ([{at}.NAME])")))?;
    match t.iter().find(|(_, v)| !v.is_table()) {
        Some((k, _)) => Err(Invalid::new(
            format!("{at}.{k}"),
            format!("must be a table ([{at}.{k}]) of its settings"),
        )),
        None => Ok(t),
    }
}

/// A section's keys as `set` takes them: numbers and booleans as written, a list as
/// `a,b`, and the `env` table as `env.NAME` keys.
fn settings(at: &str, v: &toml::Value) -> Result<Settings, Invalid> {
    let t = v
        .as_table()
        .ok_or_else(|| Invalid::new(at, format!("must be a table ([{at}])")))?;
    let mut out = Vec::new();
    for (key, value) in t {
        let place = format!("{at}.{key}");
        match (key.as_str(), value) {
            ("env", toml::Value::Table(vars)) => {
                for (name, v) in vars {
                    let place = format!("{place}.{name}");
                    out.push((format!("env.{name}"), scalar(&place, v)?));
                }
            }
            _ => out.push((key.clone(), scalar(&place, value)?)),
        }
    }
    Ok(out)
}

fn scalar(at: &str, v: &toml::Value) -> Result<String, Invalid> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                toml::Value::Table(_) | toml::Value::Array(_) => {
                    Err(Invalid::new(at, "a list holds words or numbers only"))
                }
                other => scalar(at, other),
            })
            .collect::<Result<Vec<_>, _>>()?
            .join(","),
        toml::Value::Table(_) => {
            return Err(Invalid::new(at, "expected a value, not a table"));
        }
        toml::Value::Datetime(_) => {
            return Err(Invalid::new(at, "expected a value as `set` takes it"));
        }
    })
}

fn target_spec(at: &str, v: &toml::Value) -> Result<TargetSpec, Invalid> {
    let mut spec = TargetSpec::default();
    for (key, value) in settings(at, v)? {
        let place = format!("{at}.{key}");
        match key.as_str() {
            "repo" => {
                let (owner, repo) = validate::repo_full_name(&place, &value)?;
                set_scope(&mut spec, &place, TargetScope::Repo { owner, repo })?;
            }
            "org" => {
                let org = validate::owner(&place, &value)?;
                set_scope(&mut spec, &place, TargetScope::Org { org })?;
            }
            k if super::target::SETTABLE_KEYS.contains(&k) => spec.settings.push((key, value)),
            k => {
                let known: Vec<&str> = SCOPE_KEYS
                    .iter()
                    .chain(super::target::SETTABLE_KEYS)
                    .copied()
                    .collect();
                let e = unknown(k, "target setting", &known);
                return Err(Invalid::new(place, e.reason));
            }
        }
    }
    let kinds = ["token_file", "token_env", "app_key"]
        .iter()
        .filter(|k| spec.settings.iter().any(|(s, _)| s == *k))
        .count();
    if kinds > 1 {
        return Err(Invalid::new(
            format!("{at}.token_file"),
            "give exactly one credential: token_file, token_env, or app_id with app_key",
        ));
    }
    Ok(spec)
}

fn set_scope(spec: &mut TargetSpec, at: &str, scope: TargetScope) -> Result<(), Invalid> {
    if spec.scope.is_some() {
        return Err(Invalid::new(at, "give either repo or org, not both"));
    }
    spec.scope = Some(scope);
    Ok(())
}

/// One change a plan makes to a target or a profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<T> {
    Add(T),
    Change { before: T, after: T },
    Remove(T),
}

/// What applying a description would do, each entity as it would be written.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The host's settings before and after, when they change.
    pub host: Option<(HostSettings, HostSettings)>,
    pub targets: Vec<Step<Target>>,
    pub profiles: Vec<Step<ScalePolicy>>,
    /// What the store has and the file does not, kept (without `--prune`):
    /// (`target` or `profile`, name).
    pub kept: Vec<(&'static str, String)>,
}

impl Plan {
    /// Whether applying it writes nothing.
    pub fn is_empty(&self) -> bool {
        self.host.is_none() && self.targets.is_empty() && self.profiles.is_empty()
    }

    /// The changes, one line each: `+` added, `~` changed (`key old → new`), `-`
    /// removed; then what is kept.
    pub fn lines(&self, os: &str, arch: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((before, after)) = &self.host {
            out.push(format!(
                "~ host: {}",
                differences(&host_values(before), &host_values(after))
            ));
        }
        for s in &self.targets {
            out.push(match s {
                Step::Add(t) => format!(
                    "+ target {} ({}, {})",
                    t.name,
                    t.scope.display(),
                    t.credential.describe()
                ),
                Step::Change { before, after } => format!(
                    "~ target {}: {}",
                    after.name,
                    differences(&target_values(before), &target_values(after))
                ),
                Step::Remove(t) => format!("- target {}", t.name),
            });
        }
        for s in &self.profiles {
            out.push(match s {
                Step::Add(p) => format!(
                    "+ profile {} (target {}, labels {}, max {})",
                    p.name,
                    p.target,
                    p.labels.join(","),
                    p.max_capacity
                ),
                Step::Change { before, after } => format!(
                    "~ profile {}: {}",
                    after.name,
                    differences(
                        &profile_values(before, os, arch),
                        &profile_values(after, os, arch)
                    )
                ),
                Step::Remove(p) => format!("- profile {}", p.name),
            });
        }
        for (what, name) in &self.kept {
            out.push(format!(
                "  {what} {name}: in the store, not in the file (kept; --prune removes it)"
            ));
        }
        out
    }
}

/// `key old → new` for each key whose value differs.
fn differences(before: &Settings, after: &Settings) -> String {
    let old: BTreeMap<&str, &str> = before
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let new: BTreeMap<&str, &str> = after
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let shown = |v: Option<&&str>| match v {
        None | Some(&"") => "(none)".to_string(),
        Some(v) => v.to_string(),
    };
    let mut keys: Vec<&str> = old.keys().chain(new.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| old.get(k) != new.get(k))
        .map(|k| format!("{k} {} → {}", shown(old.get(k)), shown(new.get(k))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Places a refusal at `at` in the file (`profiles.linux` + `max`).
fn placed(at: &str) -> impl Fn(Invalid) -> Invalid + '_ {
    move |e| {
        if e.arg.starts_with(at) {
            e
        } else {
            Invalid::new(format!("{at}.{}", e.arg), e.reason)
        }
    }
}

/// The difference between `d` and the store (`now`), each entity as `set` would leave
/// it: every value checked by its setting, every whole by its `check`/`validate`. The
/// host's `os`/`arch` give a profile's default labels; a new profile is this host's.
/// `prune` removes what the file does not name (targets after their profiles).
pub fn plan(d: &Description, now: &Current, prune: bool) -> Result<Plan, Invalid> {
    let mut plan = Plan {
        host: None,
        targets: Vec::new(),
        profiles: Vec::new(),
        kept: Vec::new(),
    };
    let mut host = now.host.clone();
    for (k, v) in &d.host {
        host.apply_setting(k, v).map_err(placed("host"))?;
    }
    host.check().map_err(placed("host"))?;
    if host != now.host {
        plan.host = Some((now.host.clone(), host));
    }

    for (name, spec) in &d.targets {
        let stored = now.targets.iter().find(|t| &t.name == name);
        let t = planned_target(name, spec, stored)?;
        plan.targets.extend(step(stored, t));
    }

    let mut target_names: Vec<&str> = d.targets.keys().map(String::as_str).collect();
    for t in &now.targets {
        if !d.targets.contains_key(&t.name) && !prune {
            target_names.push(&t.name);
        }
    }
    for (name, settings) in &d.profiles {
        let stored = now.profiles.iter().find(|p| &p.name == name);
        let p = planned_profile(name, settings, stored, d, now, &target_names)?;
        plan.profiles.extend(step(stored, p));
    }
    for p in &now.profiles {
        if !d.profiles.contains_key(&p.name) {
            if prune {
                plan.profiles.push(Step::Remove(p.clone()));
            } else {
                plan.kept.push(("profile", p.name.clone()));
            }
        }
    }
    for t in &now.targets {
        if d.targets.contains_key(&t.name) {
            continue;
        }
        if !prune {
            plan.kept.push(("target", t.name.clone()));
            continue;
        }
        // A profile the file keeps cannot name it: the file's targets alone are known.
        plan.targets.push(Step::Remove(t.clone()));
    }
    Ok(plan)
}

/// A target of the file as `target set` would leave it (`stored`, or a new one).
fn planned_target(
    name: &str,
    spec: &TargetSpec,
    stored: Option<&Target>,
) -> Result<Target, Invalid> {
    let at = format!("targets.{name}");
    let mut t = match (stored, &spec.scope) {
        (Some(t), Some(scope)) if *scope != t.scope => {
            return Err(Invalid::new(
                format!("{at}.{}", scope_key(scope)),
                format!(
                    "is {} in the store; apply does not move a target to another \
                     repository or organization (remove it, or give it a new name)",
                    t.scope.display()
                ),
            ));
        }
        (Some(t), _) => t.clone(),
        (None, None) => {
            return Err(Invalid::new(
                format!("{at}.repo"),
                "a new target needs repo = \"OWNER/REPO\" or org = \"ORG\"",
            ));
        }
        (None, Some(scope)) => {
            if !spec
                .settings
                .iter()
                .any(|(k, _)| CREDENTIAL_KEYS.contains(&k.as_str()))
            {
                return Err(Invalid::new(
                    format!("{at}.token_file"),
                    "a new target needs a credential: token_file, token_env, or app_id \
                     with app_key",
                ));
            }
            new_target(name, scope.clone())
        }
    };
    let has = |k: &str| spec.settings.iter().any(|(s, _)| s == k);
    // A switch to an App names both of its keys; each alone would be refused
    // without the other, so the App is begun with both and they fill it in.
    if has("app_id") && has("app_key") && !matches!(t.credential, CredentialRef::App { .. }) {
        t.credential = CredentialRef::App {
            app_id: 1,
            key_path: "/".into(),
            installation_id: None,
        };
    }
    for (k, v) in &spec.settings {
        t.apply_setting(k, v).map_err(placed(&at))?;
    }
    t.validate().map_err(placed(&at))?;
    Ok(t)
}

/// A profile of the file as `profile set` would leave it (`stored`, or a new one of
/// this host), its target one the file or the store names.
fn planned_profile(
    name: &str,
    settings: &[(String, String)],
    stored: Option<&ScalePolicy>,
    d: &Description,
    now: &Current,
    target_names: &[&str],
) -> Result<ScalePolicy, Invalid> {
    let (os, arch) = (now.host.host.os.as_str(), now.host.host.arch.as_str());
    let at = format!("profiles.{name}");
    let mut p = match stored {
        Some(p) => p.clone(),
        None => {
            for required in ["target", "labels"] {
                if !settings.iter().any(|(k, _)| k == required) {
                    return Err(Invalid::new(
                        format!("{at}.{required}"),
                        "is required for a new profile",
                    ));
                }
            }
            ScalePolicy::new(name, "", &now.host.host.id)
        }
    };
    // `labels` first: `default_labels` keeps the labels it finds (a new profile
    // has none), so the order of the file's keys does not matter.
    let mut ordered: Vec<&(String, String)> = settings.iter().collect();
    ordered.sort_by_key(|(k, _)| k != "labels");
    for (k, v) in ordered {
        p.apply_setting(k, v, os, arch).map_err(placed(&at))?;
    }
    p.validate().map_err(placed(&at))?;
    if !target_names.contains(&p.target.as_str()) {
        let guess = validate::nearest(&p.target, target_names.iter().copied())
            .map(|k| format!("; did you mean '{k}'?"))
            .unwrap_or_default();
        return Err(Invalid::new(
            format!("{at}.target"),
            format!(
                "no target named {:?} in the file or the store{guess}",
                p.target
            ),
        ));
    }
    let scope = d
        .targets
        .get(&p.target)
        .and_then(|s| s.scope.clone())
        .or_else(|| {
            let t = now.targets.iter().find(|t| t.name == p.target);
            t.map(|t| t.scope.clone())
        });
    if p.workspace == super::workspace::Workspace::Persistent {
        super::workspace::check(&p, scope.as_ref()).map_err(placed(&at))?;
    }
    Ok(p)
}

/// The step from `stored` to `after`: an addition, a change, or none.
fn step<T: Clone + PartialEq>(stored: Option<&T>, after: T) -> Option<Step<T>> {
    match stored {
        None => Some(Step::Add(after)),
        Some(before) if *before != after => Some(Step::Change {
            before: before.clone(),
            after,
        }),
        Some(_) => None,
    }
}

fn scope_key(s: &TargetScope) -> &'static str {
    match s {
        TargetScope::Repo { .. } => "repo",
        TargetScope::Org { .. } => "org",
    }
}

/// A new target with every setting at its default, before the file's are applied.
fn new_target(name: &str, scope: TargetScope) -> Target {
    Target {
        name: name.into(),
        scope,
        api_url: super::target::GITHUB_API_URL.into(),
        credential: CredentialRef::TokenEnv { var: String::new() },
        poll_interval_secs: super::target::DEFAULT_POLL_INTERVAL_SECS,
        repos: Vec::new(),
        max_in_flight: super::target::DEFAULT_MAX_IN_FLIGHT,
        secondary_limit: Some(super::target::DEFAULT_SECONDARY_LIMIT),
    }
}

/// Bytes as `parse_bytes` reads them back exactly: `2G`, `512M`, or a number.
fn exact_bytes(b: u64) -> String {
    for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        if b != 0 && b.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    b.to_string()
}

fn opt_path(p: &Option<std::path::PathBuf>) -> String {
    p.as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn env_values(out: &mut Settings, env: &super::runner_env::EnvMap) {
    for (k, v) in env {
        out.push((format!("env.{k}"), v.clone()));
    }
}

/// The host's settings as `host set` takes them back, every key (empty: unset).
pub fn host_values(s: &HostSettings) -> Settings {
    let h = &s.host;
    let mut out: Settings = vec![
        ("capacity", h.capacity.to_string()),
        ("coordinator", h.coordinator.clone().unwrap_or_default()),
        (
            "coordinator_token_file",
            opt_path(&h.coordinator_token_file),
        ),
        ("coordinator_ca_file", opt_path(&h.coordinator_ca_file)),
        ("coordinator_insecure", h.coordinator_insecure.to_string()),
        ("isolation", h.isolation.as_str().to_string()),
        (
            "runner_uids",
            h.runner_uids.map(|r| r.to_string()).unwrap_or_default(),
        ),
        ("retention", crate::timefmt::duration(h.retention_secs)),
        ("logs_max", exact_bytes(h.logs_max_bytes)),
        ("disk_reserve", exact_bytes(h.disk_reserve_bytes)),
        (
            "runner_version",
            h.runner_version.clone().unwrap_or_default(),
        ),
        ("runtime_root", opt_path(&h.runtime_root)),
        ("cache_cap", exact_bytes(h.cache_cap_bytes)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for b in Beside::ALL {
        out.push((b.name().into(), s.beside(b).unwrap_or_default().into()));
    }
    env_values(&mut out, &h.env);
    out
}

/// A target's settings as `target set` takes them back (its scope apart).
pub fn target_values(t: &Target) -> Settings {
    let mut out: Settings = vec![
        ("api_url".into(), t.api_url.clone()),
        (
            "poll_interval".into(),
            crate::timefmt::duration(t.poll_interval_secs),
        ),
        ("max_in_flight".into(), t.max_in_flight.to_string()),
        (
            "secondary_limit".into(),
            super::target::secondary_limit_text(t.secondary_limit),
        ),
    ];
    match &t.credential {
        CredentialRef::TokenFile { path } => {
            out.push(("token_file".into(), path.to_string_lossy().into_owned()))
        }
        CredentialRef::TokenEnv { var } => out.push(("token_env".into(), var.clone())),
        CredentialRef::App {
            app_id,
            key_path,
            installation_id,
        } => {
            out.push(("app_id".into(), app_id.to_string()));
            out.push(("app_key".into(), key_path.to_string_lossy().into_owned()));
            out.push((
                "installation_id".into(),
                installation_id.map(|i| i.to_string()).unwrap_or_default(),
            ));
        }
    }
    if let TargetScope::Org { .. } = t.scope {
        out.push(("repos".into(), t.repos.join(",")));
    }
    out
}

/// A profile's settings as `profile set` takes them back, every key.
pub fn profile_values(p: &ScalePolicy, os: &str, arch: &str) -> Settings {
    use crate::timefmt::duration;
    let none_or = |v: Option<String>| v.unwrap_or_else(|| "none".into());
    let mut out: Settings = vec![
        ("target", p.target.clone()),
        ("labels", p.user_labels(os, arch).join(",")),
        ("default_labels", p.default_labels.to_string()),
        ("min", p.min_capacity.to_string()),
        ("max", p.max_capacity.to_string()),
        ("runner_dir", opt_path(&p.runner_dir)),
        ("runner_group", p.runner_group.clone().unwrap_or_default()),
        ("idle_timeout", duration(p.idle_timeout_secs)),
        ("bootstrap_timeout", duration(p.bootstrap_timeout_secs)),
        ("job_timeout", none_or(p.job_timeout_secs.map(duration))),
        ("mode", p.mode.as_str().into()),
        ("active", p.active.to_string()),
        ("allow_public", p.allow_public.to_string()),
        ("run_as", p.run_as.clone().unwrap_or_default()),
        ("demand", p.demand.as_str().into()),
        ("memory_max", none_or(p.memory_max.map(exact_bytes))),
        (
            "cpu_max",
            none_or(p.cpu_max.map(super::isolation::human_cpus)),
        ),
        ("pids_max", none_or(p.pids_max.map(|n| n.to_string()))),
        ("limits", p.limits.as_str().into()),
        ("tools", p.tools.join(",")),
        ("execution", p.execution.as_str().into()),
        ("image", p.image.clone().unwrap_or_default()),
        ("disk_max", none_or(p.disk_max.map(exact_bytes))),
        ("caches", super::caches::show_setting(p.caches).into()),
        ("workspace", p.workspace.as_str().into()),
        ("rerun_lost", super::rerun::setting_text(p.rerun_lost)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    env_values(&mut out, &p.env);
    out
}

/// The store as a description's text (`export`): every key of the host, each target
/// (its credential by reference) and each profile.
pub fn render(now: &Current) -> String {
    let (os, arch) = (now.host.host.os.as_str(), now.host.host.arch.as_str());
    let mut out = String::from(
        "# runner-manager: this host's settings, targets and profiles (runner-manager export).\n\
         # Apply with 'runner-manager apply FILE'; the keys are those of host/target/profile set.\n",
    );
    section(&mut out, "host", &host_values(&now.host));
    for t in &now.targets {
        let mut values = vec![(scope_key(&t.scope).to_string(), t.scope.display())];
        values.extend(target_values(t));
        section(&mut out, &format!("targets.{}", t.name), &values);
    }
    for p in &now.profiles {
        section(
            &mut out,
            &format!("profiles.{}", p.name),
            &profile_values(p, os, arch),
        );
    }
    out
}

fn section(out: &mut String, header: &str, values: &Settings) {
    out.push_str(&format!("\n[{header}]\n"));
    for (k, v) in values {
        let key = match k.strip_prefix("env.") {
            Some(name) => format!("env.{}", toml_key(name)),
            None => k.clone(),
        };
        out.push_str(&format!("{key} = {}\n", toml::Value::String(v.clone())));
    }
}

/// A key as TOML writes it: bare when it can be.
fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        k.into()
    } else {
        toml::Value::String(k.into()).to_string()
    }
}

#[cfg(test)]
#[path = "describe_tests.rs"]
mod tests;
