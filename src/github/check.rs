//! `runner-manager target check NAME`: proves a target works before the daemon relies
//! on it, one line per check (`check_line::CheckLine`).

use super::auth::Credential;
use super::check_line::{Cause, CheckLine};
use super::client::{Call, GitHubClient, parse_json};
use super::error::GhError;
use super::ops::{DEFAULT_RUNNER_GROUP_ID, Deleted, jit_body};
use super::permission::{self, Kind, Need};
use crate::domain::runner_group::{GroupIds, RunnerGroup};
use crate::domain::{Target, TargetScope};
use crate::timefmt::format_rfc3339;

/// What the profiles using the target allow and ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// A profile sets `allow_public=true`: public repositories are flagged, not refused.
    pub allow_public: bool,
    /// The runner group a profile names (`ID` or `NAME`); `None` is the Default group.
    pub runner_group: Option<String>,
}

fn line(name: &'static str, r: Result<String, String>) -> CheckLine {
    CheckLine::of(name, r)
}

/// A line whose failure is a GitHub error, kept with it.
fn gh_line(target: &Target, name: &'static str, r: Result<String, GhError>) -> CheckLine {
    match r {
        Ok(detail) => CheckLine::ok(name, detail),
        Err(e) => CheckLine::failed(name, e.to_string()).with_cause(Some(cause(target, e))),
    }
}

/// A line of a call that needs `need`: a failure is a GitHub error kept with it, and a
/// refusal (403) names the setting that grants what the call needs.
fn needs_line(
    target: &Target,
    kind: Kind,
    name: &'static str,
    need: Need,
    r: Result<String, GhError>,
) -> CheckLine {
    match r {
        Err(e) => {
            let detail = refused(target, kind, need, &e);
            CheckLine::failed(name, detail).with_cause(Some(cause(target, e)))
        }
        ok => gh_line(target, name, ok),
    }
}

/// What to say of a failed call that needs `need`: GitHub's error, and when it is a
/// refusal (403, not a rate limit), the setting that grants the permission.
fn refused(target: &Target, kind: Kind, need: Need, e: &GhError) -> String {
    match e {
        GhError::Forbidden { message } => format!(
            "GitHub refused it (403: {message}); {}",
            permission::grant(kind, &target.scope, need)
        ),
        e => e.to_string(),
    }
}

/// A check's failure: what to say, and the GitHub error behind it, if one is.
type Failed = (String, Option<GhError>);

/// A line from a check whose failure may carry its GitHub error.
fn failed_line(target: &Target, name: &'static str, r: Result<String, Failed>) -> CheckLine {
    match r {
        Ok(detail) => CheckLine::ok(name, detail),
        Err((detail, e)) => CheckLine::failed(name, detail).with_cause(e.map(|e| cause(target, e))),
    }
}

fn cause(target: &Target, error: GhError) -> Cause {
    Cause::GitHub {
        target: target.name.clone(),
        error,
    }
}

/// Runs every check. Stops after the credential check when that fails, since every
/// later line would repeat it.
///
/// The JIT endpoint is proven reachable without creating a runner: a registration
/// token is minted (it expires unused after an hour; GitHub requires the same
/// "manage runners" permission for it as for JIT) and `generate-jitconfig` is sent a
/// body with no labels, which GitHub's schema refuses (`minItems: 1`): a 422 or 400
/// proves the endpoint exists and parsed our request; a 404 means it is missing (GHES
/// too old) or hidden. Should GitHub ever accept it, the probe runner is deleted.
pub fn check_target(target: &Target, client: &GitHubClient, opts: &CheckOptions) -> Vec<CheckLine> {
    let mut lines = Vec::new();
    let who = match client.credential() {
        Credential::Token(_) => target.credential.describe(),
        Credential::App { app_id, .. } => match client.installation_id() {
            Ok(i) => format!("app {app_id}, installation {i}"),
            Err(e) => {
                lines.push(gh_line(target, "credentials", Err(e)));
                return lines;
            }
        },
    };
    let rate = client.rate_limit();
    let creds = match &rate {
        Ok(_) => Ok(format!("accepted ({who}) at {}", client.base_url())),
        Err(e) => Err(e.clone()),
    };
    let creds_ok = creds.is_ok();
    lines.push(match creds {
        // Every GitHub API answers /rate_limit: a 404 there is the base URL, not the
        // credentials, and its fix is `api_url` (a 404 is otherwise said of the token).
        Err(GhError::NotFound) => CheckLine::failed(
            "credentials",
            format!(
                "GET /rate_limit answered 404 at {}: not a GitHub API base URL \
                 (github.com's is https://api.github.com, GitHub Enterprise Server's \
                 https://HOST/api/v3)",
                client.base_url()
            ),
        )
        .with_cause(Some(cause(target, GhError::Unexpected { status: 404 }))),
        creds => gh_line(target, "credentials", creds),
    });
    if !creds_ok {
        return lines;
    }
    let rate_line = match rate {
        Ok(s) => match (s.remaining, s.limit) {
            // The limit is spent: the class of a refused request, until its reset.
            (Some(0), _) => line(
                "rate limit",
                Err(format!(
                    "none left; resets at {}",
                    s.reset
                        .map(format_rfc3339)
                        .unwrap_or_else(|| "an unknown time".into())
                )),
            )
            .with_cause(
                s.reset
                    .map(|until| cause(target, GhError::RateLimited { until })),
            ),
            (Some(r), Some(l)) => line(
                "rate limit",
                Ok(format!(
                    "{r} of {l} requests left this hour; {}",
                    starts_ceiling(target)
                )),
            ),
            _ => line(
                "rate limit",
                Ok("no limit reported (rate limiting off on this server)".into()),
            ),
        },
        Err(e) => gh_line(target, "rate limit", Err(e)),
    };
    lines.push(rate_line);
    let scope = &target.scope;
    let kind = Kind::of(client.credential());
    lines.push(needs_line(
        target,
        kind,
        "list runners",
        Need::Runners,
        client
            .list_runners(scope)
            .map(|r| format!("allowed; {} runners registered", r.len())),
    ));
    lines.push(failed_line(
        target,
        "jit endpoint",
        jit_reachable(target, kind, client, scope),
    ));
    lines.push(failed_line(target, "queue", queue(target, kind, client)));
    lines.push(failed_line(
        target,
        "visibility",
        visibility(target, kind, client, opts.allow_public),
    ));
    lines.push(failed_line(
        target,
        "runner group",
        runner_group(target, kind, client, scope, opts.runner_group.as_deref()),
    ));
    lines
}

/// The secondary limit's ceiling on runner starts over REST (issue 37), and what to do
/// beyond it.
fn starts_ceiling(target: &Target) -> String {
    match crate::reconcile::points::jit_configs_a_minute(target.secondary_limit) {
        Some(n) => format!(
            "runner starts over REST: at most about {n} a minute per credential (GitHub's \
             secondary limit, {} points a minute per endpoint); for larger bursts use \
             demand=scaleset or spread targets over credentials",
            target.secondary_limit.unwrap_or_default()
        ),
        None => "runner starts over REST: no secondary limit (secondary_limit=off)".into(),
    }
}

fn jit_reachable(
    target: &Target,
    kind: Kind,
    client: &GitHubClient,
    scope: &TargetScope,
) -> Result<String, Failed> {
    let manage = |e: GhError| (refused(target, kind, Need::Runners, &e), Some(e));
    client.can_register_runners(scope).map_err(|e| {
        let (detail, e) = manage(e);
        (format!("cannot mint a registration token: {detail}"), e)
    })?;
    let path = match scope {
        TargetScope::Repo { owner, repo } => {
            format!("/repos/{owner}/{repo}/actions/runners/generate-jitconfig")
        }
        TargetScope::Org { org } => format!("/orgs/{org}/actions/runners/generate-jitconfig"),
    };
    let mut c = Call::post(
        client.url(&path),
        jit_body(
            "runner-manager-check-probe",
            &[],
            DEFAULT_RUNNER_GROUP_ID,
            None,
        ),
    );
    c.retry = false;
    match client.call(&c) {
        Err(GhError::Unprocessable { .. }) | Err(GhError::Unexpected { status: 400 }) => {
            Ok("reachable (manage-runners permission proven by a registration token)".into())
        }
        Err(GhError::NotFound) => Err((
            "generate-jitconfig answered 404; GitHub Enterprise Server must be 3.10 or newer, and the credentials must manage runners".into(),
            None,
        )),
        Err(e) => Err(manage(e)),
        Ok(reply) => {
            // Not expected: remove the probe so no registration is left behind.
            let id = serde_json::from_slice::<serde_json::Value>(&reply.body)
                .ok()
                .and_then(|v| v["runner"]["id"].as_i64());
            match id.map(|id| client.delete_runner(scope, id)) {
                Some(Ok(Deleted::Removed | Deleted::AlreadyGone)) => {
                    Ok("reachable (a probe runner was registered and removed)".into())
                }
                _ => Err(("a probe runner named runner-manager-check-probe was registered and could not be removed; delete it in GitHub's settings".into(), None)),
            }
        }
    }
}

/// The queue can be read: the daemon's demand comes from a repository's queued runs
/// (the first repository of an organization target's, as the daemon reads them).
fn queue(target: &Target, kind: Kind, client: &GitHubClient) -> Result<String, Failed> {
    let gh = |e: GhError| (refused(target, kind, Need::Actions, &e), Some(e));
    let (owner, repo) = match &target.scope {
        TargetScope::Repo { owner, repo } => (owner.clone(), repo.clone()),
        TargetScope::Org { org } => match target.repos.first() {
            Some(r) => (org.clone(), r.clone()),
            None => {
                let repos = match client.credential() {
                    Credential::App { .. } => client.installation_repositories(),
                    Credential::Token(_) => client.org_repositories(org),
                }
                .map_err(|e| (refused(target, kind, Need::Metadata, &e), Some(e)))?;
                match repos.into_iter().next() {
                    Some(r) => (r.owner, r.name),
                    None => return Ok(format!("{org} has no repository to read yet")),
                }
            }
        },
    };
    let path = format!("/repos/{owner}/{repo}/actions/runs?status=queued&per_page=1");
    let reply = client.call(&Call::get(client.url(&path))).map_err(gh)?;
    let body: serde_json::Value = parse_json(&reply.body).map_err(gh)?;
    let queued = body["total_count"].as_u64().unwrap_or(0);
    Ok(format!("{owner}/{repo}: allowed; {queued} runs queued"))
}

fn visibility(
    target: &Target,
    kind: Kind,
    client: &GitHubClient,
    allow_public: bool,
) -> Result<String, Failed> {
    let gh = |e: GhError| (refused(target, kind, Need::Metadata, &e), Some(e));
    let public: Vec<String> = match &target.scope {
        TargetScope::Repo { owner, repo } => match client.repository_is_public(owner, repo) {
            Ok(true) => vec![format!("{owner}/{repo}")],
            Ok(false) => vec![],
            Err(e) => return Err(gh(e)),
        },
        TargetScope::Org { org } if !target.repos.is_empty() => {
            let mut p = Vec::new();
            for r in &target.repos {
                match client.repository_is_public(org, r) {
                    Ok(true) => p.push(format!("{org}/{r}")),
                    Ok(false) => {}
                    Err(e) => {
                        let (detail, e) = gh(e);
                        return Err((format!("{org}/{r}: {detail}"), e));
                    }
                }
            }
            p
        }
        TargetScope::Org { org } => {
            let repos = match client.credential() {
                Credential::App { .. } => client.installation_repositories(),
                Credential::Token(_) => client.org_repositories(org),
            };
            match repos {
                Ok(rs) => rs
                    .into_iter()
                    .filter(|r| r.public)
                    .map(|r| format!("{}/{}", r.owner, r.name))
                    .collect(),
                Err(e) => return Err(gh(e)),
            }
        }
    };
    if public.is_empty() {
        return Ok("no public repository served".into());
    }
    let shown = public
        .iter()
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = if public.len() > 5 {
        format!(" and {} more", public.len() - 5)
    } else {
        String::new()
    };
    if allow_public {
        Ok(format!(
            "public: {shown}{more} (allowed by allow_public=true)"
        ))
    } else {
        Err((
            format!(
                "public: {shown}{more}; a fork's pull request could run code on this host; refused unless a profile sets allow_public=true"
            ),
            None,
        ))
    }
}

fn runner_group(
    target: &Target,
    kind: Kind,
    client: &GitHubClient,
    scope: &TargetScope,
    group: Option<&str>,
) -> Result<String, Failed> {
    let gh = |e: GhError| (refused(target, kind, Need::Runners, &e), Some(e));
    // The one rule (`domain::runner_group`): none, `1` and `Default` are the Default
    // group, a number is that id, anything else a name to look up.
    match (scope, RunnerGroup::of(group)) {
        (TargetScope::Repo { .. }, RunnerGroup::Default) => {
            Ok("Default (id 1) for a repository runner".into())
        }
        (TargetScope::Repo { .. }, _) => Err((
            format!(
                "repository runners join the Default group only; remove group {} from the profile or use an organization target",
                group.unwrap_or_default()
            ),
            None,
        )),
        (TargetScope::Org { org }, g) => {
            if let Some(id) = g.known_id() {
                // A numeric group: prove it exists by listing groups.
                let groups = client
                    .get_pages(
                        &format!("/orgs/{org}/actions/runner-groups?per_page=100"),
                        |g: serde_json::Value| {
                            g["runner_groups"]
                                .as_array()
                                .map(|a| a.iter().filter_map(|x| x["id"].as_i64()).collect())
                                .unwrap_or_default()
                        },
                    )
                    .map_err(gh)?;
                return if groups.contains(&id) {
                    Ok(format!("group id {id} exists in {org}"))
                } else {
                    Err((
                        format!(
                            "{org} has no runner group with id {id}; check the profile's group"
                        ),
                        None,
                    ))
                };
            }
            let name = group.unwrap_or_default();
            let found = GroupIds::default().resolve(g, |n| client.runner_group_id_by_name(org, n));
            match found {
                Ok(Some(id)) => Ok(format!("{name} resolves to id {id}")),
                Ok(None) => Err((
                    format!(
                        "{org} has no runner group named {name}; create it or fix the profile's group"
                    ),
                    None,
                )),
                Err(e) => Err(gh(e)),
            }
        }
    }
}
