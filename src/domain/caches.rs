//! Dependency caches as decisions: which variables point a job's tools at its
//! target's cache slot (the operator's own `env.NAME` winning a whole tool), whether a
//! profile gets caches at all (`caches=on|off`, off by default for organization
//! targets), the directory name a target's caches and workspaces live under, and the
//! pure plan that prunes the caches least-recently-used to the host's `cache_cap`.

use super::validate::Invalid;
use super::{ScalePolicy, Target, TargetScope};
use std::collections::BTreeSet;

/// The cap on all caches of a host unless `host set cache_cap=` says otherwise.
pub const DEFAULT_CACHE_CAP_BYTES: u64 = 10 << 30;

/// One tool, or one family of variables set (and given up to the operator) together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheTool {
    /// The directory under the slot its variables point at.
    pub dir: &'static str,
    pub vars: &'static [&'static str],
}

/// Every cache a runner gets. Each is a directory of its target's slot, which one
/// attempt holds at a time (`attempts.slot`), so tools that are unsafe to share
/// between concurrent jobs (`@actions/tool-cache` deletes a version's folder before
/// filling it) are safe here too: no directory ever has two writers.
///
/// Yarn: `YARN_GLOBAL_FOLDER` moves Yarn 2+'s global cache; `YARN_CACHE_FOLDER` is
/// left alone because it would override a zero-install project's committed
/// `.yarn/cache`, and Yarn 1 follows `XDG_CACHE_HOME` already.
pub const TOOLS: &[CacheTool] = &[
    CacheTool {
        dir: "npm",
        vars: &["npm_config_cache"],
    },
    CacheTool {
        dir: "pnpm-store",
        vars: &["npm_config_store_dir", "PNPM_CONFIG_STORE_DIR"],
    },
    CacheTool {
        dir: "yarn",
        vars: &["YARN_GLOBAL_FOLDER"],
    },
    CacheTool {
        dir: "tool-cache",
        vars: &["RUNNER_TOOL_CACHE", "AGENT_TOOLSDIRECTORY"],
    },
    CacheTool {
        dir: "go-mod",
        vars: &["GOMODCACHE"],
    },
    CacheTool {
        dir: "xdg",
        vars: &["XDG_CACHE_HOME"],
    },
];

/// `caches=on|off|default`: `None` is the default (on for a repository target, off for
/// an organization's).
pub fn parse_setting(key: &str, value: &str) -> Result<Option<bool>, Invalid> {
    match value {
        "on" | "true" => Ok(Some(true)),
        "off" | "false" => Ok(Some(false)),
        "default" | "" => Ok(None),
        _ => Err(Invalid::new(
            key,
            format!("expected on, off or default (got {value:?})"),
        )),
    }
}

/// The setting as `profile show` prints it.
pub fn show_setting(s: Option<bool>) -> &'static str {
    match s {
        Some(true) => "on",
        Some(false) => "off",
        None => "default",
    }
}

/// Whether `p`'s runners get caches: its setting, else on for a repository target and
/// off for an organization's (its runners take jobs from every repository, and a cache
/// is an input to the next job that reads it).
pub fn enabled(p: &ScalePolicy, scope: &TargetScope) -> bool {
    p.caches
        .unwrap_or(matches!(scope, TargetScope::Repo { .. }))
}

/// The variables a runner of a cache slot at `slot_dir` gets, after `operator` (the
/// host's and profile's `env.NAME`): a tool any of whose variables the operator sets
/// is left out whole (in any letter case), so the operator's choice is never mixed
/// with ours.
pub fn env(slot_dir: &str, operator: &[(String, String)]) -> Vec<(String, String)> {
    let set: BTreeSet<String> = operator
        .iter()
        .map(|(k, _)| k.to_ascii_uppercase())
        .collect();
    let mut out = Vec::new();
    for t in TOOLS {
        if t.vars.iter().any(|v| set.contains(&v.to_ascii_uppercase())) {
            continue;
        }
        for v in t.vars {
            out.push((v.to_string(), format!("{slot_dir}/{}", t.dir)));
        }
    }
    out
}

/// The directory a target's caches and workspaces live under: its name and a hash of
/// where it points (API and scope), so a target re-pointed at another repository, or
/// removed and added again for another, never inherits the old one's files.
pub fn target_key(t: &Target) -> String {
    let what = format!(
        "{}\n{}\n{}",
        t.api_url,
        scope_word(&t.scope),
        t.scope.display()
    );
    let d = ring::digest::digest(&ring::digest::SHA256, what.as_bytes());
    let hex: String = d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", t.name)
}

fn scope_word(s: &TargetScope) -> &'static str {
    match s {
        TargetScope::Repo { .. } => "repo",
        TargetScope::Org { .. } => "org",
    }
}

/// One slot on disk, a cache's or a kept workspace's, as the daemon listed it: both
/// count against the host's one `cache_cap`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDir {
    /// `caches/<target key>/slot-<n>` or `workspaces/<target key>/slot-<n>`.
    pub name: String,
    pub bytes: u64,
    /// When a runner was last given it (unix ms); 0 when unknown.
    pub last_used: i64,
    /// An attempt not yet cleaned holds it: never removed.
    pub leased: bool,
}

/// Which slots go so that the caches and kept workspaces fit in `cap` together: the
/// least recently used first, whichever kind it is,
/// never a leased one; nothing when they fit already. When the leased ones alone
/// exceed the cap, every unleased one goes and the rest stays over.
pub fn prune_plan(dirs: &[CacheDir], cap: u64) -> Vec<String> {
    let mut total: u64 = dirs.iter().map(|d| d.bytes).sum();
    let mut order: Vec<&CacheDir> = dirs.iter().filter(|d| !d.leased).collect();
    order.sort_by(|a, b| a.last_used.cmp(&b.last_used).then(a.name.cmp(&b.name)));
    let mut out = Vec::new();
    for d in order {
        if total <= cap {
            break;
        }
        total -= d.bytes;
        out.push(d.name.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CredentialRef;

    fn dir(name: &str, mib: u64, last_used: i64, leased: bool) -> CacheDir {
        CacheDir {
            name: name.into(),
            bytes: mib << 20,
            last_used,
            leased,
        }
    }

    #[test]
    fn the_least_recently_used_go_first_until_the_rest_fits() {
        let dirs = [
            dir("a/slot-0", 40, 300, false),
            dir("b/slot-0", 40, 100, false),
            dir("c/slot-0", 40, 200, false),
        ];
        assert_eq!(prune_plan(&dirs, 120 << 20), Vec::<String>::new());
        assert_eq!(prune_plan(&dirs, 100 << 20), ["b/slot-0"]);
        assert_eq!(prune_plan(&dirs, 40 << 20), ["b/slot-0", "c/slot-0"]);
        assert_eq!(prune_plan(&dirs, 0), ["b/slot-0", "c/slot-0", "a/slot-0"]);
    }

    #[test]
    fn a_leased_slot_is_never_pruned_even_over_the_cap() {
        let dirs = [
            dir("a/slot-0", 100, 1, true),
            dir("a/slot-1", 10, 2, false),
            dir("b/slot-0", 10, 3, false),
        ];
        assert_eq!(prune_plan(&dirs, 50 << 20), ["a/slot-1", "b/slot-0"]);
        assert_eq!(prune_plan(&dirs, 115 << 20), ["a/slot-1"]);
    }

    #[test]
    fn kept_workspaces_share_the_cap_and_the_order_with_caches_and_a_leased_one_stays() {
        let dirs = [
            dir("caches/a/slot-0", 30, 400, false),
            dir("workspaces/a/slot-0", 50, 100, false),
            dir("workspaces/a/slot-1", 80, 50, true),
            dir("caches/b/slot-0", 20, 200, false),
        ];
        // 180 MiB held: under a 200 MiB cap nothing goes.
        assert!(prune_plan(&dirs, 200 << 20).is_empty());
        // Least recently used first across both kinds; the leased workspace, the oldest
        // of all, is never one of them.
        assert_eq!(prune_plan(&dirs, 130 << 20), ["workspaces/a/slot-0"]);
        assert_eq!(
            prune_plan(&dirs, 110 << 20),
            ["workspaces/a/slot-0", "caches/b/slot-0"]
        );
        assert_eq!(
            prune_plan(&dirs, 0),
            ["workspaces/a/slot-0", "caches/b/slot-0", "caches/a/slot-0"]
        );
    }

    #[test]
    fn equal_times_break_by_name_so_the_plan_is_stable() {
        let dirs = [dir("b/slot-0", 1, 5, false), dir("a/slot-0", 1, 5, false)];
        assert_eq!(prune_plan(&dirs, 1 << 20), ["a/slot-0"]);
    }

    #[test]
    fn the_operators_variable_takes_the_whole_tool_in_any_case() {
        let all = env("/c/t/slot-0", &[]);
        assert!(all.contains(&("npm_config_cache".into(), "/c/t/slot-0/npm".into())));
        assert!(all.contains(&(
            "AGENT_TOOLSDIRECTORY".into(),
            "/c/t/slot-0/tool-cache".into()
        )));
        let op = [
            ("NPM_CONFIG_STORE_DIR".to_string(), "/mine".to_string()),
            ("AGENT_TOOLSDIRECTORY".to_string(), "/tools".to_string()),
        ];
        let names: Vec<String> = env("/c", &op).into_iter().map(|(k, _)| k).collect();
        for gone in [
            "npm_config_store_dir",
            "PNPM_CONFIG_STORE_DIR",
            "RUNNER_TOOL_CACHE",
            "AGENT_TOOLSDIRECTORY",
        ] {
            assert!(
                !names.iter().any(|n| n == gone),
                "{gone} beside the operator's"
            );
        }
        assert!(names.iter().any(|n| n == "npm_config_cache"));
        assert!(names.iter().any(|n| n == "XDG_CACHE_HOME"));
    }

    fn target(name: &str, scope: TargetScope) -> Target {
        Target {
            name: name.into(),
            scope,
            api_url: "https://api.github.com".into(),
            credential: CredentialRef::TokenEnv { var: "T".into() },
            poll_interval_secs: 10,
            repos: Vec::new(),
            max_in_flight: 4,
            secondary_limit: Some(900),
        }
    }

    #[test]
    fn caches_default_on_for_a_repository_and_off_for_an_organization() {
        let repo = TargetScope::Repo {
            owner: "o".into(),
            repo: "r".into(),
        };
        let org = TargetScope::Org { org: "o".into() };
        let mut p = ScalePolicy::new("p", "t", "h");
        assert!(enabled(&p, &repo));
        assert!(!enabled(&p, &org));
        p.caches = parse_setting("caches", "on").unwrap();
        assert!(enabled(&p, &org));
        p.caches = parse_setting("caches", "off").unwrap();
        assert!(!enabled(&p, &repo));
        assert!(parse_setting("caches", "maybe").is_err());
    }

    #[test]
    fn a_target_pointed_elsewhere_gets_another_key() {
        let a = target(
            "t",
            TargetScope::Repo {
                owner: "o".into(),
                repo: "a".into(),
            },
        );
        let b = target(
            "t",
            TargetScope::Repo {
                owner: "o".into(),
                repo: "b".into(),
            },
        );
        assert_ne!(target_key(&a), target_key(&b));
        assert_eq!(target_key(&a), target_key(&a.clone()));
        assert!(target_key(&a).starts_with("t-"));
    }
}
