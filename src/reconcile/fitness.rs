//! Whether this host is fit to start runners: a pure judgement of the facts the
//! daemon's fitness watch (and `doctor`) read, sorted as `doctor` sorts its checks.
//! A **required** check failing stops starts (every profile, or the one it names)
//! until a later look finds it passing; a **recommended** one is reported and never
//! stops anything; **informational** lines are facts. A fact that could not be read
//! never fails a check (not knowing is not evidence that the host is unfit), but for
//! an `oci` profile's readiness: a container backend not seen working is not ready.
//!
//! Required here: the tools a profile's jobs need, on the `PATH` its runners get;
//! runner users when the host has a uid range (with none, no start could get an
//! identity); for an `oci` profile, the host's readiness for rootless containers
//! (`domain::oci_readiness`); and a profile's `memory_max`, `cpu_max` and
//! `pids_max` being in effect, unless the profile says `limits=best-effort` (then a
//! limit not in effect is recommended: reported, never stopping). Recommended: memory
//! and cores against the host's capacity (capacity is the owner's explicit bound and a
//! job's size is unknown, so it is advice).

use std::collections::BTreeMap;

/// How much a check matters: whether the daemon starts runners while it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// The daemon starts no runner while it fails.
    Required,
    /// Reported; never stops a start.
    Recommended,
    /// A fact, for the reader.
    Info,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Required => "required",
            Class::Recommended => "recommended",
            Class::Info => "info",
        }
    }
}

/// The memory a runner and a modest job take, under which `memory` advises.
pub const MEMORY_PER_RUNNER: u64 = 2 << 30;

/// One profile's required tools, as looked up on its runner's `PATH`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFacts {
    /// Its `tools`, in order.
    pub tools: Vec<String>,
    /// Those not found.
    pub missing: Vec<String>,
    /// The `PATH` its runners get.
    pub path: String,
}

/// What was read about the host. `None`: not known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    pub capacity: u32,
    /// Total memory (`MemTotal`).
    pub memory_bytes: Option<u64>,
    /// CPUs this process may run on.
    pub cores: Option<u32>,
    /// Users among the host's `runner_uids` (at least one is enough to start); `None`
    /// when the host has no range.
    pub runner_users: Option<u32>,
    /// Per profile that names tools.
    pub tools: BTreeMap<String, ToolFacts>,
    /// The host's rootless-container facts, read when a profile runs `oci`
    /// (`None`: not read, which fails those profiles closed).
    pub oci: Option<OciFacts>,
    /// The profiles that run `oci`, each stopped while the host is not ready.
    pub oci_profiles: Vec<String>,
    /// Per native profile that sets a cgroup limit: which of its limits the daemon's
    /// cgroups enforce.
    pub limits: BTreeMap<String, LimitFacts>,
}

/// One profile's cgroup limits against what the host's cgroups enforce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitFacts {
    /// The limits it sets, by setting name (`memory_max`, `cpu_max`, `pids_max`).
    pub set: Vec<String>,
    /// Those the host does not enforce.
    pub unenforced: Vec<String>,
    /// Why not, in the cgroup detection's words (empty when all are enforced).
    pub why: String,
    /// `limits=best-effort`: starts go on without them.
    pub best_effort: bool,
}

pub use crate::domain::oci_readiness::Facts as OciFacts;

/// One judged check: `doctor`'s line and the daemon's reason come from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `memory`, `cores`, `runner-users`, `tools:<profile>`, `oci:<profile>`.
    pub check: String,
    pub class: Class,
    pub ok: bool,
    pub detail: String,
    /// What to do; set when not ok.
    pub hint: Option<String>,
    /// The profile it stops, when it stops one only.
    pub profile: Option<String>,
}

/// Every check the facts allow, in a stable order: memory, cores, runner users,
/// then each profile's tools by name, then each `oci` profile's readiness (judged by
/// `domain::oci_readiness`, where not knowing fails).
pub fn findings(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    let line = |check: &str, class, ok, detail: String, hint: Option<&str>| Finding {
        check: check.into(),
        class,
        ok,
        detail,
        hint: if ok { None } else { hint.map(String::from) },
        profile: None,
    };
    if let Some(m) = f.memory_bytes {
        let want = MEMORY_PER_RUNNER.saturating_mul(f.capacity as u64);
        out.push(line(
            "memory",
            Class::Recommended,
            m >= want,
            format!(
                "{} for capacity {}: {} per runner is advised",
                crate::units::bytes(m),
                f.capacity,
                crate::units::bytes(MEMORY_PER_RUNNER)
            ),
            Some("lower it with host set capacity=N, or give the host more memory"),
        ));
    }
    if let Some(c) = f.cores {
        out.push(line(
            "cores",
            Class::Recommended,
            f.capacity <= c,
            format!("{c} CPUs for capacity {}", f.capacity),
            Some("more runners than CPUs make every job slower: host set capacity=N"),
        ));
    }
    if let Some(n) = f.runner_users {
        out.push(line(
            "runner-users",
            Class::Required,
            n > 0,
            if n > 0 {
                format!("{n} runner users in runner_uids")
            } else {
                "none of the uids of runner_uids has a passwd entry: no runner can get an \
                 identity"
                    .to_string()
            },
            Some("create them: packaging/install.sh --runner-users START-END --users-only"),
        ));
    }
    for (profile, t) in &f.tools {
        let ok = t.missing.is_empty();
        let detail = if ok {
            format!(
                "{} found on the runner's PATH {}",
                t.tools.join(", "),
                t.path
            )
        } else {
            format!(
                "not on the runner's PATH {}: {}",
                t.path,
                t.missing.join(", ")
            )
        };
        out.push(Finding {
            profile: Some(profile.clone()),
            ..line(
                &format!("tools:{profile}"),
                Class::Required,
                ok,
                detail,
                Some(
                    "install them there, or set env.PATH on the host or the profile to \
                     directories that hold them",
                ),
            )
        });
    }
    for (profile, l) in &f.limits {
        out.push(limits_finding(profile, l));
    }
    let oci = f.oci.clone().unwrap_or_default();
    let verdict = crate::domain::oci_readiness::verdict(&oci);
    for profile in &f.oci_profiles {
        let (ok, detail) = match &verdict {
            Ok(summary) => (true, format!("ready for rootless containers: {summary}")),
            Err(why) => (false, format!("not ready for rootless containers: {why}")),
        };
        out.push(Finding {
            check: format!("oci:{profile}"),
            class: Class::Required,
            ok,
            detail,
            hint: crate::domain::oci_readiness::first_hint(&oci).map(String::from),
            profile: Some(profile.clone()),
        });
    }
    out
}

/// `limits:<profile>`: required unless the profile took `limits=best-effort`.
fn limits_finding(profile: &str, l: &LimitFacts) -> Finding {
    let ok = l.unenforced.is_empty();
    let detail = if ok {
        format!("{} in effect", l.set.join(", "))
    } else if l.best_effort {
        format!(
            "{} not in effect, started anyway (limits=best-effort): {}",
            l.unenforced.join(", "),
            l.why
        )
    } else {
        format!(
            "{} set but not in effect, so none of its runners start: {}",
            l.unenforced.join(", "),
            l.why
        )
    };
    Finding {
        check: format!("limits:{profile}"),
        class: if l.best_effort {
            Class::Recommended
        } else {
            Class::Required
        },
        ok,
        detail,
        hint: (!ok).then(|| {
            "run the daemon with cgroup v2 delegated to it (the packaged unit does), or \
             accept runners without them: profile set NAME limits=best-effort"
                .to_string()
        }),
        profile: Some(profile.to_string()),
    }
}

/// The daemon's judgement: each profile that may not start, with the first required
/// check it fails (host-wide checks before its own). `profiles` are every profile's
/// names; a profile not in the result is fit.
pub fn unfit(f: &Facts, profiles: &[String]) -> BTreeMap<String, String> {
    let failed: Vec<Finding> = findings(f)
        .into_iter()
        .filter(|x| x.class == Class::Required && !x.ok)
        .collect();
    let mut out = BTreeMap::new();
    for p in profiles {
        if let Some(x) = failed
            .iter()
            .find(|x| x.profile.is_none() || x.profile.as_deref() == Some(p))
        {
            out.insert(
                p.clone(),
                format!("required check {}: {}", x.check, x.detail),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn names(ps: &[&str]) -> Vec<String> {
        ps.iter().map(|p| p.to_string()).collect()
    }

    fn tools(missing: &[&str]) -> ToolFacts {
        ToolFacts {
            tools: names(&["git", "node"]),
            missing: names(missing),
            path: "/usr/bin:/bin".into(),
        }
    }

    #[test]
    fn a_missing_tool_stops_its_profile_only_and_says_which() {
        let mut f = Facts {
            capacity: 2,
            ..Facts::default()
        };
        f.tools.insert("linux".into(), tools(&["node"]));
        f.tools.insert("other".into(), tools(&[]));
        let u = unfit(&f, &names(&["linux", "other", "plain"]));
        assert_eq!(u.len(), 1, "{u:?}");
        assert_eq!(
            u["linux"],
            "required check tools:linux: not on the runner's PATH /usr/bin:/bin: node"
        );
        f.tools.insert("linux".into(), tools(&[]));
        assert!(unfit(&f, &names(&["linux", "other"])).is_empty());
    }

    #[test]
    fn no_runner_users_stop_every_profile_before_their_own_checks() {
        let mut f = Facts {
            capacity: 2,
            runner_users: Some(0),
            ..Facts::default()
        };
        f.tools.insert("linux".into(), tools(&["git"]));
        let u = unfit(&f, &names(&["linux", "plain"]));
        assert!(
            u["linux"].starts_with("required check runner-users: none"),
            "{u:?}"
        );
        assert_eq!(u["linux"], u["plain"]);
        f.runner_users = Some(3);
        assert_eq!(unfit(&f, &names(&["plain"])).len(), 0);
    }

    #[test]
    fn an_oci_profile_starts_only_on_a_ready_host_and_unknown_is_not_ready() {
        let mut f = Facts {
            capacity: 2,
            oci_profiles: names(&["boxed"]),
            ..Facts::default()
        };
        let u = unfit(&f, &names(&["boxed", "plain"]));
        assert_eq!(u.len(), 1, "{u:?}");
        assert!(
            u["boxed"].starts_with(
                "required check oci:boxed: not ready for rootless containers: podman: not \
                 checked yet"
            ),
            "{u:?}"
        );
        f.oci = Some(OciFacts {
            podman: Some(Err("podman is not installed (not found on PATH)".into())),
            ..OciFacts::default()
        });
        let all = findings(&f);
        let line = all.iter().find(|x| x.check == "oci:boxed").unwrap();
        assert!(!line.ok && line.detail.contains("podman is not installed"));
        assert!(line.hint.as_deref().unwrap().contains("install Podman"));
        f.oci = Some(OciFacts {
            podman: Some(Ok("5.0.3".into())),
            rootless: Some(true),
            uid_map: Some(65_536),
            gid_map: Some(65_536),
            cgroup_version: Some("v2".into()),
            controllers: Some(names(&["cpu", "memory", "pids"])),
            storage: Some(("overlay".into(), "xfs".into())),
            quota_probe: Some(Ok(())),
        });
        assert!(unfit(&f, &names(&["boxed", "plain"])).is_empty());
    }

    #[test]
    fn a_limit_not_in_effect_stops_its_profile_unless_it_takes_best_effort() {
        let lim = |unenforced: &[&str], best_effort| LimitFacts {
            set: names(&["memory_max", "pids_max"]),
            unenforced: names(unenforced),
            why: "no memory or pids controller is delegated".into(),
            best_effort,
        };
        let mut f = Facts {
            capacity: 2,
            ..Facts::default()
        };
        f.limits
            .insert("strict".into(), lim(&["memory_max"], false));
        f.limits.insert("loose".into(), lim(&["memory_max"], true));
        f.limits.insert("fine".into(), lim(&[], false));
        let u = unfit(&f, &names(&["strict", "loose", "fine", "plain"]));
        assert_eq!(u.keys().collect::<Vec<_>>(), ["strict"]);
        assert!(
            u["strict"].contains("memory_max set but not in effect"),
            "{u:?}"
        );
        assert!(
            u["strict"].contains("no memory or pids controller"),
            "{u:?}"
        );
        let by = |c: &str| findings(&f).into_iter().find(|x| x.check == c).unwrap();
        let loose = by("limits:loose");
        assert_eq!((loose.class, loose.ok), (Class::Recommended, false));
        assert!(loose.detail.contains("started anyway"), "{loose:?}");
        let fine = by("limits:fine");
        assert!(fine.ok && fine.hint.is_none(), "{fine:?}");
        assert_eq!(fine.detail, "memory_max, pids_max in effect");
    }

    #[test]
    fn memory_and_cores_advise_and_never_stop_and_unknown_facts_say_nothing() {
        let f = Facts {
            capacity: 8,
            memory_bytes: Some(4 * GIB),
            cores: Some(2),
            ..Facts::default()
        };
        let all = findings(&f);
        let by = |c: &str| all.iter().find(|x| x.check == c).unwrap();
        assert!(!by("memory").ok && by("memory").class == Class::Recommended);
        assert!(by("memory").detail.contains("4.0 GiB for capacity 8"));
        assert!(!by("cores").ok && by("cores").hint.is_some());
        assert!(unfit(&f, &names(&["linux"])).is_empty());
        let fine = Facts {
            capacity: 2,
            memory_bytes: Some(4 * GIB),
            cores: Some(2),
            ..Facts::default()
        };
        assert!(findings(&fine).iter().all(|x| x.ok && x.hint.is_none()));
        assert!(findings(&Facts::default()).is_empty());
    }
}
