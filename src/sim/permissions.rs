//! Fine-grained permissions, as GitHub checks them: a PAT the sim was told holds only
//! some permissions (`SimHandle::add_fine_grained_pat`) is refused with 403 on an
//! endpoint that needs another, and the answer's `x-accepted-github-permissions`
//! header names what would have been accepted (GitHub sends it to fine-grained
//! actors; changelog 2023-08-10). Other callers hold every permission.

use super::auth::Caller;
use super::state::State;

/// GitHub's message for a fine-grained PAT that lacks a permission.
pub const REFUSED: &str = "Resource not accessible by personal access token";

/// The permission and level an endpoint needs (GitHub's "Permissions required for
/// fine-grained personal access tokens"), or `None` for one that needs none.
pub fn required(method: &str, template: &str) -> Option<(&'static str, &'static str)> {
    let write = method != "GET";
    let level = if write { "write" } else { "read" };
    if let Some(rest) = template.strip_prefix("/repos/{owner}/{repo}") {
        return if rest.starts_with("/actions/runners") {
            Some(("administration", level))
        } else if rest.starts_with("/actions/runs") || rest.starts_with("/actions/jobs") {
            // Reading runs and jobs; re-running a job writes (`actions:write`).
            Some(("actions", level))
        } else if rest.is_empty() {
            Some(("metadata", "read"))
        } else {
            None
        };
    }
    if let Some(rest) = template.strip_prefix("/orgs/{org}") {
        return if rest.starts_with("/actions/runners") || rest.starts_with("/actions/runner-groups")
        {
            Some(("organization_self_hosted_runners", level))
        } else if rest == "/repos" {
            Some(("metadata", "read"))
        } else {
            None
        };
    }
    None
}

/// Whether a held level covers a needed one (write includes read).
fn covers(held: &str, needed: &str) -> bool {
    held == needed || (held == "write" && needed == "read")
}

/// The `x-accepted-github-permissions` value of a refusal, when `caller` is a
/// fine-grained PAT that lacks what the endpoint needs.
pub fn refusal(st: &State, caller: Caller, method: &str, template: &str) -> Option<String> {
    let Caller::Pat(n) = caller else {
        return None;
    };
    let held = st.fine_grained.get(&n)?;
    let (permission, level) = required(method, template)?;
    match held.get(permission) {
        Some(h) if covers(h, level) => None,
        _ => Some(format!("{permission}={level}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_the_daemon_calls_needs_its_permission() {
        let r = |m, t| required(m, t);
        assert_eq!(
            r(
                "POST",
                "/repos/{owner}/{repo}/actions/runners/generate-jitconfig"
            ),
            Some(("administration", "write"))
        );
        assert_eq!(
            r("GET", "/repos/{owner}/{repo}/actions/runners"),
            Some(("administration", "read"))
        );
        assert_eq!(
            r("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs"),
            Some(("actions", "read"))
        );
        assert_eq!(
            r("GET", "/repos/{owner}/{repo}"),
            Some(("metadata", "read"))
        );
        assert_eq!(
            r("DELETE", "/orgs/{org}/actions/runners/{runner_id}"),
            Some(("organization_self_hosted_runners", "write"))
        );
        assert_eq!(
            r("GET", "/orgs/{org}/actions/runner-groups"),
            Some(("organization_self_hosted_runners", "read"))
        );
        assert_eq!(r("GET", "/rate_limit"), None);
        assert!(covers("write", "read") && !covers("read", "write"));
    }
}
