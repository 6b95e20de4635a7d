//! `target add|set|list|show|rm`.

use super::output::{self, Out, table, target_json};
use super::parse::Invocation;
use super::spec::opts;
use super::{CliError, CliResult, app_key_file, secret_file};
use crate::domain::target::{DEFAULT_MAX_IN_FLIGHT, DEFAULT_POLL_INTERVAL_SECS, GITHUB_API_URL};
use crate::domain::validate;
use crate::domain::{CredentialRef, Target, TargetScope};
use crate::reconcile::budget;
use crate::store::Store;
use serde_json::json;

/// Builds the target from `target add`'s arguments, checked whole; nothing is written.
fn from_args(inv: &Invocation) -> Result<Target, CliError> {
    let name = validate::name("NAME", &inv.positionals[0])?;
    let scope = match (
        inv.value(&opts::target_add::REPO),
        inv.value(&opts::target_add::ORG),
    ) {
        (Some(r), None) => {
            let (owner, repo) = validate::repo_full_name("--repo", r)?;
            TargetScope::Repo { owner, repo }
        }
        (None, Some(o)) => TargetScope::Org {
            org: validate::owner("--org", o)?,
        },
        (Some(_), Some(_)) => {
            return Err(CliError::usage(
                "--org",
                "give either --repo or --org, not both",
            ));
        }
        (None, None) => {
            return Err(CliError::usage(
                "--repo",
                "give --repo OWNER/REPO or --org ORG",
            ));
        }
    };
    let api_url = match inv.value(&opts::target_add::API_URL) {
        Some(u) => validate::api_url("--api-url", u)?,
        None => GITHUB_API_URL.to_string(),
    };
    let app = inv.value(&opts::target_add::APP_ID).is_some()
        || inv.value(&opts::target_add::APP_KEY).is_some();
    let kinds = [
        inv.value(&opts::target_add::TOKEN_FILE).is_some(),
        inv.value(&opts::target_add::TOKEN_ENV).is_some(),
        app,
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        return Err(CliError::usage(
            "--token-file",
            "give exactly one credential: --token-file PATH, --token-env VAR, or --app-id ID --app-key PATH",
        ));
    }
    if inv.value(&opts::target_add::INSTALLATION_ID).is_some() && !app {
        return Err(CliError::usage(
            "--installation-id",
            "only a GitHub App (--app-id, --app-key) has an installation id",
        ));
    }
    let credential = if let Some(f) = inv.value(&opts::target_add::TOKEN_FILE) {
        let path = validate::path("--token-file", f)?;
        secret_file("--token-file", &path)?;
        CredentialRef::TokenFile { path }
    } else if let Some(v) = inv.value(&opts::target_add::TOKEN_ENV) {
        CredentialRef::TokenEnv {
            var: validate::env_var_name("--token-env", v)?,
        }
    } else {
        let app_id = validate::number_in(
            "--app-id",
            inv.value(&opts::target_add::APP_ID)
                .ok_or_else(|| CliError::usage("--app-id", "a GitHub App needs --app-id too"))?,
            1,
            u64::MAX,
        )?;
        let key_path = validate::path(
            "--app-key",
            inv.value(&opts::target_add::APP_KEY)
                .ok_or_else(|| CliError::usage("--app-key", "a GitHub App needs --app-key too"))?,
        )?;
        app_key_file("--app-key", &key_path)?;
        let installation_id = inv
            .value(&opts::target_add::INSTALLATION_ID)
            .map(|v| validate::number_in("--installation-id", v, 1, u64::MAX))
            .transpose()?;
        CredentialRef::App {
            app_id,
            key_path,
            installation_id,
        }
    };
    let t = Target {
        name,
        scope,
        api_url,
        credential,
        poll_interval_secs: DEFAULT_POLL_INTERVAL_SECS,
        repos: Vec::new(),
        max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        secondary_limit: Some(crate::domain::target::DEFAULT_SECONDARY_LIMIT),
    };
    t.validate()?;
    Ok(t)
}

pub fn add(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let t = from_args(inv)?;
    store.add_target(&t)?;
    warn_poll_budget(store, &t);
    out.emit(|| format!("target {} added\n", t.name), || target_json(&t));
    Ok(())
}

/// Warns (on stderr; the change stands) when the polling of every target sharing
/// `t`'s credential could spend more of its hourly budget than polling should (issue
/// 22: the budget, projected at add time). The limit is the one GitHub last reported
/// for the target, else a PAT's.
fn warn_poll_budget(store: &dyn Store, t: &Target) {
    let Ok(targets) = store.targets() else { return };
    let sharing: Vec<&Target> = targets
        .iter()
        .filter(|o| o.credential == t.credential && o.api_url == t.api_url)
        .collect();
    let units = sharing
        .iter()
        .map(|o| {
            let repos = match o.scope {
                TargetScope::Repo { .. } => 1,
                TargetScope::Org { .. } => o.repos.len().max(1) as u64,
            };
            budget::poll_units_per_hour(o.poll_interval_secs, repos)
        })
        .sum();
    let limit = store
        .target_statuses()
        .ok()
        .and_then(|all| all.into_iter().find(|s| s.target == t.name))
        .and_then(|s| s.rate_limit_limit)
        .map_or(budget::ASSUMED_LIMIT, |l| l.max(1) as u64);
    if let Some(w) = budget::poll_projection_warning(units, limit, sharing.len()) {
        eprintln!("runner-manager: warning: target {}: {w}", t.name);
    }
}

pub fn set(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let name = &inv.positionals[0];
    let mut t = store.target(name)?;
    for kv in &inv.positionals[1..] {
        let (k, v) = validate::key_value(kv)?;
        t.apply_setting(k, v)?;
        // The daemon reads these files later; a path that is wrong now is a typo.
        match (k, &t.credential) {
            ("token_file", CredentialRef::TokenFile { path }) => secret_file(k, path)?,
            ("app_key", CredentialRef::App { key_path, .. }) => app_key_file(k, key_path)?,
            _ => {}
        }
    }
    t.validate()?;
    store.update_target(&t)?;
    warn_poll_budget(store, &t);
    out.emit(
        || format!("target {} updated\n", t.name),
        || target_json(&t),
    );
    Ok(())
}

fn row(t: &Target) -> Vec<String> {
    vec![
        t.name.clone(),
        match t.scope {
            TargetScope::Repo { .. } => "repo",
            TargetScope::Org { .. } => "org",
        }
        .into(),
        t.scope.display(),
        t.api_url.clone(),
        t.credential.describe(),
    ]
}

pub fn list(store: &dyn Store, out: &mut Out) -> CliResult {
    let ts = store.targets()?;
    out.emit(
        || {
            table(
                &["NAME", "KIND", "SCOPE", "API", "CREDENTIALS"],
                &ts.iter().map(row).collect::<Vec<_>>(),
            )
        },
        || json!(ts.iter().map(target_json).collect::<Vec<_>>()),
    );
    Ok(())
}

pub fn show(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let t = store.target(&inv.positionals[0])?;
    let used_by: Vec<String> = store
        .profiles()?
        .into_iter()
        .filter(|p| p.target == t.name)
        .map(|p| p.name)
        .collect();
    out.emit(
        || {
            output::block(&[
                ("name", t.name.clone()),
                ("scope", t.scope.display()),
                ("api_url", t.api_url.clone()),
                ("credentials", t.credential.describe()),
                (
                    "poll_interval",
                    crate::timefmt::duration(t.poll_interval_secs),
                ),
                ("max_in_flight", t.max_in_flight.to_string()),
                (
                    "secondary_limit",
                    crate::domain::target::secondary_limit_text(t.secondary_limit),
                ),
                (
                    "repos",
                    if t.repos.is_empty() {
                        "-".into()
                    } else {
                        t.repos.join(",")
                    },
                ),
                (
                    "profiles",
                    if used_by.is_empty() {
                        "-".into()
                    } else {
                        used_by.join(",")
                    },
                ),
            ])
        },
        || {
            let mut v = target_json(&t);
            v["profiles"] = json!(used_by);
            v
        },
    );
    Ok(())
}

pub fn rm(inv: &Invocation, store: &dyn Store, out: &mut Out) -> CliResult {
    let name = &inv.positionals[0];
    match store.remove_target(name) {
        Err(e @ crate::store::StoreError::InUse { .. }) => {
            // The fix is the very commands: remove the profiles that use it, then this.
            let users: Vec<String> = store
                .profiles()?
                .into_iter()
                .filter(|p| p.target == *name)
                .map(|p| p.name)
                .collect();
            let mut steps: Vec<String> = users
                .iter()
                .map(|p| super::command_line(inv, &["profile", "rm", p]))
                .collect();
            steps.push(super::command_line(inv, &["target", "rm", name]));
            return Err(CliError::fixed(
                super::exit::Failure::Conflict,
                e.to_string(),
                format!(
                    "{} (or move each profile to another target first: profile set NAME \
                     target=OTHER)",
                    steps.join(" && ")
                ),
            ));
        }
        other => other?,
    }
    out.emit(
        || format!("target {name} removed\n"),
        || json!({"removed": {"target": name}}),
    );
    Ok(())
}
