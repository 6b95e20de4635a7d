//! GitHub's JSON shapes as the sim sends them: serde structs that mirror the schemas in
//! GitHub's OpenAPI description (every required field, with its type), and their builders.
//!
//! Only the sim knows these; the client in `github/` has its own, smaller, view.

use serde::Serialize;
use std::collections::BTreeMap;

/// `simple-user` (also the owner of a repository and an installation's account).
#[derive(Debug, Clone, Serialize)]
pub struct SimpleUser {
    pub login: String,
    pub id: u64,
    pub node_id: String,
    pub avatar_url: String,
    pub gravatar_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub site_admin: bool,
    #[serde(flatten)]
    pub urls: BTreeMap<&'static str, String>,
}

const USER_URLS: &[&str] = &[
    "url",
    "html_url",
    "followers_url",
    "following_url",
    "gists_url",
    "starred_url",
    "subscriptions_url",
    "organizations_url",
    "repos_url",
    "events_url",
    "received_events_url",
];

pub fn simple_user(base: &str, login: &str, id: u64, is_org: bool) -> SimpleUser {
    let urls = USER_URLS
        .iter()
        .map(|k| {
            let v = match *k {
                "url" => format!("{base}/users/{login}"),
                "html_url" => format!("https://github.com/{login}"),
                _ => format!("{base}/users/{login}/{}", k.trim_end_matches("_url")),
            };
            (*k, v)
        })
        .collect();
    SimpleUser {
        login: login.to_string(),
        id,
        node_id: node_id("U", id),
        avatar_url: format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        gravatar_id: Some(String::new()),
        kind: if is_org { "Organization" } else { "User" }.to_string(),
        site_admin: false,
        urls,
    }
}

/// `full-repository`, `repository` and `minimal-repository` at once: a superset of the
/// required fields of all three, so one struct answers every endpoint that returns one.
#[derive(Debug, Clone, Serialize)]
pub struct Repository {
    pub id: u64,
    pub node_id: String,
    pub name: String,
    pub full_name: String,
    pub owner: SimpleUser,
    pub private: bool,
    pub visibility: String,
    pub description: Option<String>,
    pub fork: bool,
    pub mirror_url: Option<String>,
    pub homepage: Option<String>,
    pub language: Option<String>,
    pub forks_count: u64,
    pub stargazers_count: u64,
    pub watchers_count: u64,
    pub size: u64,
    pub default_branch: String,
    pub open_issues_count: u64,
    pub has_issues: bool,
    pub has_projects: bool,
    pub has_wiki: bool,
    pub has_pages: bool,
    pub has_downloads: bool,
    pub has_discussions: bool,
    pub archived: bool,
    pub disabled: bool,
    pub pushed_at: String,
    pub created_at: String,
    pub updated_at: String,
    pub subscribers_count: u64,
    pub network_count: u64,
    pub license: Option<serde_json::Value>,
    pub forks: u64,
    pub open_issues: u64,
    pub watchers: u64,
    #[serde(flatten)]
    pub urls: BTreeMap<String, String>,
}

const REPO_API_URLS: &[&str] = &[
    "archive",
    "assignees",
    "blobs",
    "branches",
    "collaborators",
    "comments",
    "commits",
    "compare",
    "contents",
    "contributors",
    "deployments",
    "downloads",
    "events",
    "forks",
    "git_commits",
    "git_refs",
    "git_tags",
    "issue_comment",
    "issue_events",
    "issues",
    "keys",
    "labels",
    "languages",
    "merges",
    "milestones",
    "notifications",
    "pulls",
    "releases",
    "stargazers",
    "statuses",
    "subscribers",
    "subscription",
    "tags",
    "teams",
    "trees",
    "hooks",
];

pub fn repository(
    base: &str,
    full_name: &str,
    id: u64,
    owner: SimpleUser,
    private: bool,
    at: &str,
) -> Repository {
    let name = full_name
        .split_once('/')
        .map_or(full_name, |(_, n)| n)
        .to_string();
    let api = format!("{base}/repos/{full_name}");
    let mut urls: BTreeMap<String, String> = REPO_API_URLS
        .iter()
        .map(|k| (format!("{k}_url"), format!("{api}/{k}")))
        .collect();
    for (k, v) in [
        ("url", api.clone()),
        ("html_url", format!("https://github.com/{full_name}")),
        ("git_url", format!("git://github.com/{full_name}.git")),
        ("ssh_url", format!("git@github.com:{full_name}.git")),
        ("clone_url", format!("https://github.com/{full_name}.git")),
        ("svn_url", format!("https://github.com/{full_name}")),
    ] {
        urls.insert(k.to_string(), v);
    }
    Repository {
        id,
        node_id: node_id("R", id),
        name,
        full_name: full_name.to_string(),
        owner,
        private,
        visibility: if private { "private" } else { "public" }.to_string(),
        description: None,
        fork: false,
        mirror_url: None,
        homepage: None,
        language: None,
        forks_count: 0,
        stargazers_count: 0,
        watchers_count: 0,
        size: 0,
        default_branch: "main".into(),
        open_issues_count: 0,
        has_issues: true,
        has_projects: true,
        has_wiki: true,
        has_pages: false,
        has_downloads: true,
        has_discussions: false,
        archived: false,
        disabled: false,
        pushed_at: at.to_string(),
        created_at: at.to_string(),
        updated_at: at.to_string(),
        subscribers_count: 0,
        network_count: 0,
        license: None,
        forks: 0,
        open_issues: 0,
        watchers: 0,
        urls,
    }
}

/// `organization-full`.
#[derive(Debug, Clone, Serialize)]
pub struct Organization {
    pub login: String,
    pub id: u64,
    pub node_id: String,
    pub url: String,
    pub repos_url: String,
    pub events_url: String,
    pub hooks_url: String,
    pub issues_url: String,
    pub members_url: String,
    pub public_members_url: String,
    pub avatar_url: String,
    pub description: Option<String>,
    pub has_organization_projects: bool,
    pub has_repository_projects: bool,
    pub public_repos: u64,
    pub public_gists: u64,
    pub followers: u64,
    pub following: u64,
    pub html_url: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

pub fn organization(base: &str, login: &str, id: u64, public_repos: u64, at: &str) -> Organization {
    let api = format!("{base}/orgs/{login}");
    Organization {
        login: login.to_string(),
        id,
        node_id: node_id("O", id),
        url: api.clone(),
        repos_url: format!("{api}/repos"),
        events_url: format!("{api}/events"),
        hooks_url: format!("{api}/hooks"),
        issues_url: format!("{api}/issues"),
        members_url: format!("{api}/members{{/member}}"),
        public_members_url: format!("{api}/public_members{{/member}}"),
        avatar_url: format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        description: None,
        has_organization_projects: true,
        has_repository_projects: true,
        public_repos,
        public_gists: 0,
        followers: 0,
        following: 0,
        html_url: format!("https://github.com/{login}"),
        kind: "Organization".into(),
        created_at: at.to_string(),
        updated_at: at.to_string(),
        archived_at: None,
    }
}

/// `workflow-run`.
#[derive(Debug, Clone, Serialize)]
pub struct WorkflowRun {
    pub id: u64,
    pub name: Option<String>,
    pub node_id: String,
    pub head_branch: Option<String>,
    pub head_sha: String,
    pub path: String,
    pub display_title: String,
    pub run_number: u64,
    pub run_attempt: u64,
    pub event: String,
    pub status: Option<String>,
    pub conclusion: Option<String>,
    pub workflow_id: u64,
    pub url: String,
    pub html_url: String,
    pub pull_requests: Vec<serde_json::Value>,
    pub created_at: String,
    pub updated_at: String,
    pub run_started_at: String,
    pub jobs_url: String,
    pub logs_url: String,
    pub check_suite_url: String,
    pub artifacts_url: String,
    pub cancel_url: String,
    pub rerun_url: String,
    pub workflow_url: String,
    pub head_commit: Option<serde_json::Value>,
    pub repository: Repository,
    pub head_repository: Repository,
}

/// `job`.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub id: u64,
    pub run_id: u64,
    pub run_url: String,
    pub run_attempt: u64,
    pub node_id: String,
    pub head_sha: String,
    pub url: String,
    pub html_url: Option<String>,
    pub status: String,
    pub conclusion: Option<String>,
    pub created_at: String,
    pub started_at: String,
    pub completed_at: Option<String>,
    pub name: String,
    pub check_run_url: String,
    pub labels: Vec<String>,
    pub runner_id: Option<u64>,
    pub runner_name: Option<String>,
    pub runner_group_id: Option<u64>,
    pub runner_group_name: Option<String>,
    pub workflow_name: Option<String>,
    pub head_branch: Option<String>,
}

/// `runner-label`.
#[derive(Debug, Clone, Serialize)]
pub struct RunnerLabel {
    pub id: u64,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// `runner`.
#[derive(Debug, Clone, Serialize)]
pub struct Runner {
    pub id: u64,
    pub runner_group_id: u64,
    pub name: String,
    pub os: String,
    pub status: String,
    pub busy: bool,
    pub labels: Vec<RunnerLabel>,
    pub ephemeral: bool,
    pub version: Option<String>,
}

/// `runner-groups-org`.
#[derive(Debug, Clone, Serialize)]
pub struct RunnerGroup {
    pub id: u64,
    pub name: String,
    pub visibility: String,
    pub default: bool,
    pub runners_url: String,
    pub inherited: bool,
    pub allows_public_repositories: bool,
    pub restricted_to_workflows: bool,
    pub selected_workflows: Vec<String>,
    pub workflow_restrictions_read_only: bool,
}

/// `installation`.
#[derive(Debug, Clone, Serialize)]
pub struct Installation {
    pub id: u64,
    pub account: SimpleUser,
    pub repository_selection: String,
    pub access_tokens_url: String,
    pub repositories_url: String,
    pub html_url: String,
    pub app_id: u64,
    pub target_id: u64,
    pub target_type: String,
    pub permissions: BTreeMap<&'static str, &'static str>,
    pub events: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
    pub single_file_name: Option<String>,
    pub app_slug: String,
    pub suspended_by: Option<SimpleUser>,
    pub suspended_at: Option<String>,
}

/// The permissions every sim installation has: what a runner manager asks for.
pub fn runner_manager_permissions() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("actions", "read"),
        ("administration", "write"),
        ("metadata", "read"),
        ("organization_self_hosted_runners", "write"),
    ])
}

/// `installation-token`.
#[derive(Debug, Clone, Serialize)]
pub struct InstallationToken {
    pub token: String,
    pub expires_at: String,
    pub permissions: BTreeMap<&'static str, &'static str>,
    pub repository_selection: String,
}

/// `authentication-token` (registration and remove tokens).
#[derive(Debug, Clone, Serialize)]
pub struct AuthenticationToken {
    pub token: String,
    pub expires_at: String,
}

/// `rate-limit`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RateLimit {
    pub limit: u64,
    pub remaining: u64,
    pub reset: u64,
    pub used: u64,
}

/// `rate-limit-overview`.
#[derive(Debug, Clone, Serialize)]
pub struct RateLimitOverview {
    pub resources: BTreeMap<&'static str, RateLimit>,
    pub rate: RateLimit,
}

/// `basic-error`.
#[derive(Debug, Clone, Serialize)]
pub struct BasicError {
    pub message: String,
    pub documentation_url: String,
    pub status: String,
}

/// `validation-error-simple`.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationError {
    pub message: String,
    pub documentation_url: String,
    pub errors: Vec<String>,
}

pub const DOCS: &str = "https://docs.github.com/rest";

pub fn node_id(prefix: &str, id: u64) -> String {
    format!("{prefix}_kgDO{id:08X}")
}
