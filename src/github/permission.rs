//! What a credential needs for each call runner-manager makes, in the words of the
//! setting that grants it: a classic token's scope, or the permission a fine-grained
//! token or a GitHub App is given on its settings page. `target check` (and `doctor`)
//! name it when GitHub refuses a call with 403; docs/github-permissions.md lists them
//! with GitHub's sources.

use super::auth::Credential;
use crate::domain::TargetScope;

/// The kind of credential, as GitHub's settings pages tell them apart. A token's kind
/// is read from its prefix (`ghp_` classic, `github_pat_` fine-grained); another
/// token (an OAuth or an Enterprise Server token, a test's) is `Token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Classic,
    FineGrained,
    App,
    Token,
}

impl Kind {
    pub fn of(credential: &Credential) -> Kind {
        match credential {
            Credential::App { .. } => Kind::App,
            Credential::Token(t) if t.expose().starts_with("ghp_") => Kind::Classic,
            Credential::Token(t) if t.expose().starts_with("github_pat_") => Kind::FineGrained,
            Credential::Token(_) => Kind::Token,
        }
    }
}

/// What a call needs of the credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The target's self-hosted runners: list, register (registration token, JIT
    /// config), remove; an organization's runner groups; the runner downloads.
    Runners,
    /// Workflow runs and their jobs: the queue the daemon reads.
    Actions,
    /// A repository's metadata (its visibility), or an organization's repositories.
    Metadata,
}

/// The classic token's scope for `need` on `scope` (GitHub's REST reference: `repo`
/// for a repository's runners, `admin:org` for an organization's, `repo` to read a
/// private repository's runs).
fn scope_words(scope: &TargetScope, need: Need) -> &'static str {
    match (scope, need) {
        (TargetScope::Repo { .. }, Need::Runners) => "the \"repo\" scope",
        (TargetScope::Org { .. }, Need::Runners) => {
            "the \"admin:org\" scope (and \"repo\" for private repositories)"
        }
        (_, Need::Actions | Need::Metadata) => "the \"repo\" scope (for private repositories)",
    }
}

/// The fine-grained permission for `need` on `scope`, as a fine-grained token's and a
/// GitHub App's settings name it. Runners need write: the daemon registers them.
fn permission_words(scope: &TargetScope, need: Need) -> &'static str {
    match (scope, need) {
        (TargetScope::Repo { .. }, Need::Runners) => {
            "Repository permissions > Administration: Read and write"
        }
        (TargetScope::Org { .. }, Need::Runners) => {
            "Organization permissions > Self-hosted runners: Read and write"
        }
        (_, Need::Actions) => "Repository permissions > Actions: Read-only",
        (_, Need::Metadata) => "Repository permissions > Metadata: Read-only",
    }
}

/// The setting that grants `need` to a credential of `kind` on `scope`, in its
/// settings page's words.
pub fn grant(kind: Kind, scope: &TargetScope, need: Need) -> String {
    let classic = scope_words(scope, need);
    let permission = permission_words(scope, need);
    match kind {
        Kind::Classic => format!("a classic token needs {classic}"),
        Kind::FineGrained => format!("a fine-grained token needs {permission}"),
        Kind::App => format!(
            "the GitHub App needs {permission} (then accept the new permissions on the installation)"
        ),
        Kind::Token => format!(
            "a classic token needs {classic}; a fine-grained token or a GitHub App, {permission}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    fn repo() -> TargetScope {
        TargetScope::Repo {
            owner: "octo".into(),
            repo: "app".into(),
        }
    }

    fn org() -> TargetScope {
        TargetScope::Org { org: "octo".into() }
    }

    #[test]
    fn a_token_is_known_by_its_prefix() {
        let t = |s: &str| Kind::of(&Credential::Token(Secret::new(s)));
        assert_eq!(t("ghp_abc"), Kind::Classic);
        assert_eq!(t("github_pat_11ABC"), Kind::FineGrained);
        assert_eq!(t("gho_abc"), Kind::Token);
        assert_eq!(t("secret"), Kind::Token);
    }

    #[test]
    fn each_kind_names_its_own_setting_for_each_target_kind() {
        assert_eq!(
            grant(Kind::Classic, &repo(), Need::Runners),
            "a classic token needs the \"repo\" scope"
        );
        assert!(grant(Kind::Classic, &org(), Need::Runners).contains("\"admin:org\""));
        assert_eq!(
            grant(Kind::FineGrained, &repo(), Need::Runners),
            "a fine-grained token needs Repository permissions > Administration: Read and write"
        );
        assert!(
            grant(Kind::App, &org(), Need::Runners)
                .contains("Organization permissions > Self-hosted runners: Read and write")
        );
        assert!(
            grant(Kind::FineGrained, &org(), Need::Actions)
                .ends_with("Repository permissions > Actions: Read-only")
        );
        assert!(
            grant(Kind::App, &repo(), Need::Metadata)
                .contains("Repository permissions > Metadata: Read-only")
        );
        let either = grant(Kind::Token, &repo(), Need::Runners);
        assert!(either.contains("\"repo\"") && either.contains("Administration: Read and write"));
    }
}
