//! The path template of a request (`/repos/{owner}/{repo}/actions/runs`), so metrics
//! count requests by endpoint with bounded cardinality: owners, repositories and ids
//! never become label values.

/// Every REST path the client calls, spelled as GitHub's OpenAPI description spells it.
/// A test holds this list against the simulated GitHub's routes.
pub const TEMPLATES: &[&str] = &[
    "/rate_limit",
    "/installation/repositories",
    "/app/installations/{installation_id}/access_tokens",
    "/orgs/{org}",
    "/orgs/{org}/repos",
    "/orgs/{org}/installation",
    "/orgs/{org}/actions/runner-groups",
    "/orgs/{org}/actions/runners",
    "/orgs/{org}/actions/runners/downloads",
    "/orgs/{org}/actions/runners/generate-jitconfig",
    "/orgs/{org}/actions/runners/registration-token",
    "/orgs/{org}/actions/runners/remove-token",
    "/orgs/{org}/actions/runners/{runner_id}",
    "/repos/{owner}/{repo}",
    "/repos/{owner}/{repo}/installation",
    "/repos/{owner}/{repo}/actions/runs",
    "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs",
    "/repos/{owner}/{repo}/actions/jobs/{job_id}",
    "/repos/{owner}/{repo}/actions/jobs/{job_id}/rerun",
    "/repos/{owner}/{repo}/actions/runners",
    "/repos/{owner}/{repo}/actions/runners/downloads",
    "/repos/{owner}/{repo}/actions/runners/generate-jitconfig",
    "/repos/{owner}/{repo}/actions/runners/registration-token",
    "/repos/{owner}/{repo}/actions/runners/remove-token",
    "/repos/{owner}/{repo}/actions/runners/{runner_id}",
];

/// What a path matching no template is counted as.
pub const OTHER: &str = "other";

/// The template of `path` (after the API base, query allowed). Literal segments win
/// over placeholders, and `{..._id}` placeholders take digits only, so
/// `.../runners/downloads` is never `.../runners/{runner_id}`.
pub fn template_of(path: &str) -> &'static str {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut best: Option<(&'static str, usize)> = None;
    'templates: for t in TEMPLATES {
        let tsegs: Vec<&str> = t.trim_matches('/').split('/').collect();
        if tsegs.len() != segs.len() {
            continue;
        }
        let mut literals = 0;
        for (ts, s) in tsegs.iter().zip(&segs) {
            match ts.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
                Some(name) => {
                    let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                    if s.is_empty() || (name.ends_with("_id") && !digits) {
                        continue 'templates;
                    }
                }
                None if ts == s => literals += 1,
                None => continue 'templates,
            }
        }
        if best.is_none_or(|(_, n)| literals > n) {
            best = Some((t, literals));
        }
    }
    best.map_or(OTHER, |(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concrete_paths_become_templates() {
        for (path, want) in [
            (
                "/repos/acme/web/actions/runs?status=queued&per_page=100",
                "/repos/{owner}/{repo}/actions/runs",
            ),
            (
                "/repos/acme/web/actions/runners/downloads",
                "/repos/{owner}/{repo}/actions/runners/downloads",
            ),
            (
                "/repos/acme/web/actions/runners/42",
                "/repos/{owner}/{repo}/actions/runners/{runner_id}",
            ),
            (
                "/repos/acme/runs/actions/runs/7/jobs",
                "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs",
            ),
            (
                "/orgs/acme/actions/runners/generate-jitconfig",
                "/orgs/{org}/actions/runners/generate-jitconfig",
            ),
            ("/rate_limit", "/rate_limit"),
            ("/repos/acme/web", "/repos/{owner}/{repo}"),
            ("/repos/acme/web/actions/runners/abc", OTHER),
            ("/users/someone", OTHER),
            ("", OTHER),
        ] {
            assert_eq!(template_of(path), want, "{path}");
        }
    }

    #[test]
    fn every_route_of_the_simulated_github_is_known() {
        for (_, route) in crate::sim::github::ROUTES {
            assert!(TEMPLATES.contains(route), "{route} missing from TEMPLATES");
            // A template's own spelling, with ids made numeric, maps back to itself.
            let concrete = route
                .split('/')
                .map(|s| {
                    if s.ends_with("_id}") {
                        "12"
                    } else if s.starts_with('{') {
                        "x"
                    } else {
                        s
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            assert_eq!(template_of(&concrete), *route, "{concrete}");
        }
    }
}
