//! Why a profile cannot start runners now, typed: each reason is a variant whose
//! words `status` and `top` show ([`Unfit`]'s `Display`), and the rules that pick the
//! first reason that applies ([`unfit`]). The plan reads the type, never the words:
//! a visibility not yet known is the rate limit's doing while one holds.

use super::hold::StartHold;
use crate::domain::{DemandSource, ScalePolicy};
use crate::timefmt::Millis;
use std::collections::BTreeMap;
use std::fmt;

/// Why a profile cannot start runners now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    /// Isolation is required but cannot be had.
    IsolationRefused(String),
    /// The state directory's filesystem is under its reserve (`reconcile::disk`).
    DiskFull(String),
    /// A required fitness check fails (`reconcile::fitness`).
    Host(String),
    /// Starts are held after a host failure: the hold as `status` shows it.
    Held(String),
    /// The target has no GitHub client: why.
    NoClient(String),
    /// An organization's scale set runner group admits public repositories.
    PublicGroup,
    /// That setting is not read yet.
    GroupNotYetKnown,
    /// A repository target is public.
    PublicRepo,
    /// The profile's runner install is missing or broken.
    Install(String),
    /// A repository target's visibility is not read yet.
    RepoNotYetKnown,
    /// A visibility (the repository's, or a runner group's) cannot be read because
    /// GitHub refuses the target's credential (401) since this time: the refusal, not
    /// the visibility, is what stops the profile (issue 50).
    CredentialsRefused(Millis),
    /// The profile's scale set is not known yet.
    ScaleSetUnready(String),
}

impl Unfit {
    /// A fact not learnt yet: while a rate limit holds the target, it is what keeps
    /// the fact from being read, so the profile shows the rate limit instead.
    pub fn not_yet_known(&self) -> bool {
        matches!(
            self,
            Unfit::GroupNotYetKnown | Unfit::RepoNotYetKnown | Unfit::CredentialsRefused(_)
        )
    }

    /// A required check of the host fails (isolation, the disk's reserve, a fitness
    /// check, the runner install): what `doctor` calls unfit, exit class 9, and what
    /// `status` keeps as the profile's last error whatever the demand.
    pub fn is_host_unfit(&self) -> bool {
        matches!(
            self,
            Unfit::IsolationRefused(_) | Unfit::DiskFull(_) | Unfit::Host(_) | Unfit::Install(_)
        )
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::IsolationRefused(why) => write!(f, "isolation: {why}"),
            Unfit::DiskFull(why) | Unfit::Host(why) | Unfit::Held(why) => f.write_str(why),
            Unfit::NoClient(why) | Unfit::ScaleSetUnready(why) => f.write_str(why),
            Unfit::PublicGroup => f.write_str(
                "the scale set's runner group allows public repositories: a fork's pull \
                 request would run on this host; turn that off in the group's settings, or \
                 set allow_public=true only if you mean it",
            ),
            Unfit::GroupNotYetKnown => f.write_str("runner group visibility not yet known"),
            Unfit::PublicRepo => f.write_str(
                "repository is public: a fork's pull request would run on this host; set \
                 allow_public=true only if you mean it",
            ),
            Unfit::Install(e) => write!(f, "runner install: {e}"),
            Unfit::RepoNotYetKnown => f.write_str("repository visibility not yet known"),
            Unfit::CredentialsRefused(since) => f.write_str(&super::target_error::refused_text(
                *since,
                "GitHub refuses the target's credential, so nothing is read or started until \
                 it is fixed ('target check NAME' says how)",
            )),
        }
    }
}

/// What decides whether each profile may start runners now, gathered by the loop.
#[derive(Debug, Clone, Copy)]
pub struct Fitness<'a> {
    pub profiles: &'a [ScalePolicy],
    /// The target is an organization (else one repository).
    pub org: bool,
    /// Isolation is required but cannot be had: why.
    pub isolation_refused: Option<&'a str>,
    /// The state directory's filesystem is under its reserve: why (`reconcile::disk`).
    pub disk_full: Option<&'a str>,
    /// Profiles a required fitness check stops, with why (`reconcile::fitness::unfit`,
    /// from the daemon's `fitness_watch`).
    pub host_unfit: &'a BTreeMap<String, String>,
    /// Profiles whose starts are held after a host failure.
    pub holds: &'a BTreeMap<String, StartHold>,
    /// Why the target has no GitHub client, when it has none.
    pub no_client: Option<&'a str>,
    /// A repository target's visibility (`None` until read).
    pub public_repo: Option<bool>,
    /// Since when GitHub refuses the target's credential (401), while it does: a
    /// visibility not read yet is then said as the refusal.
    pub credentials_refused_since: Option<Millis>,
    /// Per scale set profile of an organization: its runner group admits public
    /// repositories' jobs (absent until read).
    pub group_public: &'a BTreeMap<String, bool>,
    /// Profiles whose runner install is missing or broken, with why.
    pub install_errors: &'a BTreeMap<String, String>,
    /// Scale set profiles whose scale set is not known yet, with why.
    pub scaleset_unready: &'a BTreeMap<String, String>,
}

/// Profiles that cannot start runners now, with the first reason that applies:
/// isolation refused, a full disk, a failed required check, starts held, no
/// credentials, a public runner group or repository, a broken install, an unknown
/// visibility, no scale set yet.
pub fn unfit(f: &Fitness, now: Millis) -> BTreeMap<String, Unfit> {
    let mut unfit = BTreeMap::new();
    for p in f.profiles {
        let scaleset_org = f.org && p.demand == DemandSource::Scaleset && !p.allow_public;
        let why = if let Some(why) = f.isolation_refused {
            Some(Unfit::IsolationRefused(why.to_string()))
        } else if let Some(why) = f.disk_full {
            Some(Unfit::DiskFull(why.to_string()))
        } else if let Some(why) = f.host_unfit.get(&p.name) {
            Some(Unfit::Host(why.clone()))
        } else if let Some(h) = f.holds.get(&p.name).filter(|h| h.holds(now)) {
            Some(Unfit::Held(h.describe(now)))
        } else if let Some(why) = f.no_client {
            Some(Unfit::NoClient(why.to_string()))
        } else if scaleset_org && f.group_public.get(&p.name) == Some(&true) {
            Some(Unfit::PublicGroup)
        } else if scaleset_org && !f.group_public.contains_key(&p.name) {
            Some(
                f.credentials_refused_since
                    .map_or(Unfit::GroupNotYetKnown, Unfit::CredentialsRefused),
            )
        } else if f.public_repo == Some(true) && !p.allow_public {
            Some(Unfit::PublicRepo)
        } else if let Some(e) = f.install_errors.get(&p.name) {
            Some(Unfit::Install(e.clone()))
        } else if !f.org && f.public_repo.is_none() {
            Some(
                f.credentials_refused_since
                    .map_or(Unfit::RepoNotYetKnown, Unfit::CredentialsRefused),
            )
        } else {
            f.scaleset_unready
                .get(&p.name)
                .map(|why| Unfit::ScaleSetUnready(why.clone()))
        };
        if let Some(why) = why {
            unfit.insert(p.name.clone(), why);
        }
    }
    unfit
}

/// The profiles a required check of the host stops, with why (each is its last
/// error in `status`, whatever the demand).
pub fn host_unfit(unfit: &BTreeMap<String, Unfit>) -> BTreeMap<&str, String> {
    unfit
        .iter()
        .filter(|(_, u)| u.is_host_unfit())
        .map(|(p, u)| (p.as_str(), u.to_string()))
        .collect()
}

/// What `daemon --once` fails with when GitHub answered every call: the first profile
/// (by name) a required check of the host stopped, and why.
pub fn first_host_unfit(host_unfit: &BTreeMap<&str, String>) -> Option<String> {
    host_unfit
        .iter()
        .next()
        .map(|(p, why)| format!("profile {p}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str, max: u32) -> ScalePolicy {
        let mut p = ScalePolicy::new(name, "octo", "h");
        p.max_capacity = max;
        p
    }

    #[test]
    fn only_the_hosts_own_checks_make_a_profile_host_unfit_and_the_first_by_name_is_told() {
        let unfit = BTreeMap::from([
            ("zeta".to_string(), Unfit::DiskFull("disk: 1% free".into())),
            ("alpha".to_string(), Unfit::Host("cgroup v2 missing".into())),
            ("held".to_string(), Unfit::Held("spawn failed".into())),
            ("public".to_string(), Unfit::PublicRepo),
        ]);
        let host = host_unfit(&unfit);
        assert_eq!(host.keys().copied().collect::<Vec<_>>(), ["alpha", "zeta"]);
        let first = first_host_unfit(&host).unwrap();
        assert!(first.starts_with("profile alpha: "), "{first}");
        assert!(first.contains("cgroup v2 missing"), "{first}");
        assert_eq!(first_host_unfit(&host_unfit(&BTreeMap::new())), None);
    }

    #[test]
    fn the_first_reason_a_profile_cannot_start_is_the_one_shown() {
        let profiles = vec![profile("linux", 2), profile("gpu", 1)];
        let holds = BTreeMap::from([(
            "gpu".to_string(),
            StartHold::after_failure(None, "spawn: denied".into(), 0),
        )]);
        let (no_groups, none) = (BTreeMap::new(), BTreeMap::new());
        let f = Fitness {
            profiles: &profiles,
            org: false,
            isolation_refused: None,
            disk_full: None,
            host_unfit: &none,
            holds: &holds,
            no_client: None,
            public_repo: Some(false),
            credentials_refused_since: None,
            group_public: &no_groups,
            install_errors: &none,
            scaleset_unready: &none,
        };
        let u = unfit(&f, 1_000);
        assert_eq!(u.len(), 1);
        assert!(u["gpu"].to_string().starts_with("starts held 29s"), "{u:?}");
        // The hold over, gpu may start again.
        assert!(unfit(&f, 31_000).is_empty());
        // Isolation refused outranks everything; an unknown visibility holds all.
        let refused = Fitness {
            isolation_refused: Some("no runner users"),
            ..f
        };
        assert!(
            unfit(&refused, 1_000)["linux"]
                .to_string()
                .starts_with("isolation: ")
        );
        // A full disk holds every profile, whatever else holds one.
        let full = Fitness {
            disk_full: Some("disk: 3.0 MiB free"),
            ..f
        };
        let u = unfit(&full, 1_000);
        assert_eq!(
            (u["linux"].to_string(), u["gpu"].to_string()),
            (
                "disk: 3.0 MiB free".to_string(),
                "disk: 3.0 MiB free".to_string()
            )
        );
        let unknown = Fitness {
            public_repo: None,
            ..f
        };
        assert_eq!(unfit(&unknown, 40_000)["linux"], Unfit::RepoNotYetKnown);
        // Issue 50: under a 401 the visibility is unknown because the credential is
        // refused; the words say so, and do not blame the visibility.
        let refused_401 = Fitness {
            credentials_refused_since: Some(1_764_000_000_000),
            ..unknown
        };
        let said = unfit(&refused_401, 40_000)["linux"].to_string();
        assert!(
            said.starts_with("credentials refused (401) since 2025-11-24T16:00:00Z: "),
            "{said}"
        );
        assert!(!said.contains("visibility"), "{said}");
        assert!(unfit(&refused_401, 40_000)["linux"].not_yet_known());
        let public = Fitness {
            public_repo: Some(true),
            ..f
        };
        assert!(
            unfit(&public, 40_000)["linux"]
                .to_string()
                .starts_with("repository is public")
        );
        // A failed required fitness check stops the profile it names, before its hold.
        let tools = BTreeMap::from([(
            "gpu".to_string(),
            "required check tools:gpu: not on the runner's PATH /bin: nvcc".to_string(),
        )]);
        let unfit_host = Fitness {
            host_unfit: &tools,
            ..f
        };
        let u = unfit(&unfit_host, 1_000);
        assert_eq!(u.len(), 1);
        assert!(
            u["gpu"].to_string().starts_with("required check tools:gpu"),
            "{u:?}"
        );
    }
}
