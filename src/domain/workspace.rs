//! Workspaces: disposable (the default: a job's `_work` dies with its attempt) or
//! persistent (`profile set NAME workspace=persistent`: the `_work` of a target's slot
//! is kept for the next job of that slot), and where the host keeps runner roots,
//! caches and kept workspaces (`host set runtime_root=PATH`).

use super::validate::{self, Invalid};
use super::{ScalePolicy, TargetScope};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workspace {
    /// Every job starts from an empty `_work`.
    #[default]
    Disposable,
    /// `_work` is kept between jobs of one repository target, slot by slot.
    Persistent,
}

impl Workspace {
    pub fn as_str(self) -> &'static str {
        match self {
            Workspace::Disposable => "disposable",
            Workspace::Persistent => "persistent",
        }
    }

    pub fn parse(key: &str, value: &str) -> Result<Workspace, Invalid> {
        match value {
            "disposable" | "" => Ok(Workspace::Disposable),
            "persistent" => Ok(Workspace::Persistent),
            _ => Err(Invalid::new(
                key,
                format!("expected disposable or persistent (got {value:?})"),
            )),
        }
    }
}

/// Why a persistent workspace is refused for this profile, if it is: never with
/// `allow_public` (a public repository's jobs include strangers' pull requests, and a
/// kept `_work` is an input to the next job), and only for a repository target (an
/// organization's runner takes jobs from every repository).
pub fn check(p: &ScalePolicy, scope: Option<&TargetScope>) -> Result<(), Invalid> {
    if p.workspace != Workspace::Persistent {
        return Ok(());
    }
    if p.allow_public {
        return Err(Invalid::new(
            "workspace",
            "a persistent workspace is never kept for a profile with allow_public=true: \
             the next job would run what a stranger's pull request left",
        ));
    }
    if let Some(TargetScope::Org { .. }) = scope {
        return Err(Invalid::new(
            "workspace",
            "a persistent workspace needs a repository target: an organization's runner \
             takes jobs from every repository",
        ));
    }
    Ok(())
}

/// Whether an attempt of `p` for a target of `scope` keeps its `_work`: the same rules
/// as [`check`], asked again at each start.
pub fn keeps_work(p: &ScalePolicy, scope: &TargetScope) -> bool {
    p.workspace == Workspace::Persistent && check(p, Some(scope)).is_ok()
}

/// Directories that belong to the system: a runtime root is never one of these nor
/// inside the first group, since runner roots, caches and kept workspaces are made
/// and removed under it with the manager's rights (issue 33: `runtime_root=/etc`
/// was accepted). Beneath the second group (`/var/lib/runner-manager`,
/// `/run/runner-manager`, `/srv/rm`) is where a runtime root belongs.
const SYSTEM_TREES: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev",
    "/proc", "/sys",
];
const SYSTEM_DIRS: &[&str] = &[
    "/home",
    "/root",
    "/tmp",
    "/var",
    "/var/tmp",
    "/var/lib",
    "/var/log",
    "/var/cache",
    "/run",
    "/opt",
    "/srv",
    "/mnt",
    "/media",
    "/nix",
    "/snap",
];

/// `runtime_root=PATH`: an absolute path with no `.` or `..` component, not `/`
/// and not a system directory (every path the host's runners write under is checked
/// like this; the CLI then checks the directory on disk).
pub fn runtime_root(key: &str, value: &str) -> Result<std::path::PathBuf, Invalid> {
    let p = validate::path(key, value)?;
    let bad = p.components().any(|c| {
        matches!(
            c,
            std::path::Component::ParentDir | std::path::Component::CurDir
        )
    }) || value.split('/').any(|s| s == "." || s == "..");
    if bad {
        return Err(Invalid::new(
            key,
            format!("must not contain . or .. (got {value:?})"),
        ));
    }
    if p.parent().is_none() {
        return Err(Invalid::new(key, "must not be / itself"));
    }
    // /usr/local/... is the operator's, not the distribution's.
    let in_tree = SYSTEM_TREES.iter().any(|t| p.starts_with(t)) && !p.starts_with("/usr/local/");
    if in_tree
        || SYSTEM_DIRS.iter().any(|d| p == std::path::Path::new(d))
        || p == std::path::Path::new("/usr/local")
    {
        return Err(Invalid::new(
            key,
            format!(
                "{} is a system directory: runner roots, caches and kept workspaces are \
                 made and removed under it with the manager's rights; use a directory of \
                 its own (mkdir -m 0711 /var/lib/runner-manager/run)",
                p.display()
            ),
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> TargetScope {
        TargetScope::Repo {
            owner: "o".into(),
            repo: "r".into(),
        }
    }

    #[test]
    fn persistence_only_for_a_private_repository_profile() {
        let mut p = ScalePolicy::new("p", "t", "h");
        assert!(!keeps_work(&p, &repo()));
        p.workspace = Workspace::parse("workspace", "persistent").unwrap();
        assert!(keeps_work(&p, &repo()));
        assert!(!keeps_work(&p, &TargetScope::Org { org: "o".into() }));
        assert!(check(&p, Some(&TargetScope::Org { org: "o".into() })).is_err());
        p.allow_public = true;
        assert!(!keeps_work(&p, &repo()));
        let e = check(&p, None).unwrap_err();
        assert!(e.to_string().contains("allow_public"), "{e}");
        assert!(Workspace::parse("workspace", "kept").is_err());
    }

    #[test]
    fn a_runtime_root_is_absolute_plain_and_not_slash() {
        assert!(runtime_root("runtime_root", "/srv/rm").is_ok());
        for bad in ["srv/rm", "/", "/srv/../etc", "/srv/./rm", ""] {
            assert!(runtime_root("runtime_root", bad).is_err(), "{bad}");
        }
        // Issue 33: system directories, where nothing good can come of roots.
        for bad in [
            "/etc",
            "/etc/rm",
            "/usr",
            "/usr/lib/rm",
            "/var",
            "/tmp",
            "/home",
            "/run",
            "/usr/local",
            "/proc/1",
        ] {
            let e = runtime_root("runtime_root", bad).unwrap_err();
            assert!(e.reason.contains("system directory"), "{bad}: {e}");
        }
        for ok in [
            "/var/lib/runner-manager/run",
            "/run/runner-manager",
            "/usr/local/rm",
            "/tmp/rm-test",
            "/home/ci/rm",
        ] {
            assert!(runtime_root("runtime_root", ok).is_ok(), "{ok}");
        }
    }
}
