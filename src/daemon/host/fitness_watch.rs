//! The host's fitness, read by the main thread at start, every `--fitness-every`
//! (5 min) and whenever the configuration changes, judged by the pure
//! `reconcile::fitness`, and kept in `HostFacts::fitness`, where each target loop's pass
//! reads it as an unfitness fact (`reconcile::plan::Fitness::host_unfit`), as it reads
//! `disk_watch`'s. Cheap facts: total memory and CPUs against capacity
//! (advice), whether the host's runner uids have users, and each profile's required
//! tools on the `PATH` its runners get, and, when a profile runs `oci`, Podman's
//! readiness (`podman info` and a disk quota probe, each bounded). The free disk is `disk_watch`'s and refused
//! containment `contain`'s; both already stop every profile. A change is logged once
//! and wakes the loops, and sets `runner_manager_fitness_starts_held`.

use super::facts::{HostFacts, lock};
use crate::domain::{Host, ScalePolicy, runner_env};
use crate::metrics::Metrics;
use crate::reconcile::fitness::{self, Class, Facts, LimitFacts, OciFacts, ToolFacts};
use crate::runner::cgroup::Enforced;
use crate::runner::tools;
use crate::{log_info, log_warn};
use std::collections::BTreeMap;
use std::time::Duration;

/// How often the facts are read again unless `--fitness-every` says otherwise.
pub const CHECK_EVERY: Duration = Duration::from_secs(300);

/// What the last look found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FitnessState {
    /// Profiles a required check stops, with why.
    pub unfit: BTreeMap<String, String>,
    /// Recommended checks that fail: `check: detail`.
    pub advice: Vec<String>,
    /// The `oci` profiles the last look found the host ready for: the starter starts
    /// a container for no other (not looked yet is not ready).
    pub oci_ready: std::collections::BTreeSet<String>,
    /// Whether a container's size holds here (`domain::oci_readiness::quota_holds`): containers
    /// get one only then (rootless Podman cannot set one on most hosts).
    pub oci_quota: bool,
}

/// Total memory from `/proc/meminfo`.
fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Each profile's required tools looked up on its runners' `PATH`.
pub fn tool_facts(host: &Host, profiles: &[ScalePolicy]) -> BTreeMap<String, ToolFacts> {
    profiles
        .iter()
        .filter(|p| !p.tools.is_empty())
        .map(|p| {
            let path = tools::runner_path(&runner_env::merged(&host.env, &p.env));
            let t = ToolFacts {
                tools: p.tools.clone(),
                missing: tools::missing(&p.tools, &path),
                path,
            };
            (p.name.clone(), t)
        })
        .collect()
}

/// Each profile that sets a limit, against what the host enforces: a native
/// profile's cgroup limits against what `enforced` says the daemon's cgroups apply;
/// an `oci` profile's `disk_max` against whether a container size holds (`oci`,
/// Podman's facts; its cgroup limits are Podman's, which readiness requires).
pub fn limit_facts(
    profiles: &[ScalePolicy],
    enforced: &Enforced,
    oci: Option<&OciFacts>,
) -> BTreeMap<String, LimitFacts> {
    let quota = oci.is_some_and(crate::domain::oci_readiness::quota_holds);
    let quota_why = oci
        .and_then(|f| {
            crate::domain::oci_readiness::checks(f)
                .into_iter()
                .find(|c| c.name == crate::domain::oci_readiness::QUOTA)
        })
        .map(|c| format!("disk-quota: {}", c.detail))
        .unwrap_or_else(|| "Podman's storage not looked at yet".into());
    profiles
        .iter()
        .filter_map(|p| {
            let (asked, why) = match p.execution {
                crate::domain::Execution::Native => (
                    vec![
                        ("memory_max", p.memory_max.is_some(), enforced.memory),
                        ("cpu_max", p.cpu_max.is_some(), enforced.cpu),
                        ("pids_max", p.pids_max.is_some(), enforced.pids),
                    ],
                    enforced.why.join("; "),
                ),
                crate::domain::Execution::Oci => (
                    vec![("disk_max", p.disk_max.is_some(), quota)],
                    quota_why.clone(),
                ),
            };
            let set: Vec<String> = asked
                .iter()
                .filter(|(_, s, _)| *s)
                .map(|(n, _, _)| n.to_string())
                .collect();
            if set.is_empty() {
                return None;
            }
            let unenforced: Vec<String> = asked
                .iter()
                .filter(|(_, s, e)| *s && !*e)
                .map(|(n, _, _)| n.to_string())
                .collect();
            let why = if unenforced.is_empty() {
                String::new()
            } else {
                why
            };
            let l = LimitFacts {
                set,
                unenforced,
                why,
                best_effort: p.limits == crate::domain::isolation::LimitsMode::BestEffort,
            };
            Some((p.name.clone(), l))
        })
        .collect()
}

/// The facts, read now: cheap (one file, one syscall, one passwd lookup at most
/// per uid until a user is found, a `stat` per tool and `PATH` entry), and two
/// Podman calls when a profile runs `oci`. `enforced` is what the daemon's cgroups
/// apply.
pub fn read_facts(host: &Host, profiles: &[ScalePolicy], enforced: &Enforced) -> Facts {
    let oci_profiles = oci_profiles(profiles);
    let oci = (!oci_profiles.is_empty()).then(crate::runner::oci::podman::facts);
    Facts {
        capacity: host.capacity,
        memory_bytes: memory_bytes(),
        cores: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32),
        runner_users: host
            .runner_uids
            .map(|r| crate::runner::uid::count_users(r, 1)),
        tools: tool_facts(host, profiles),
        limits: limit_facts(profiles, enforced, oci.as_ref()),
        oci,
        oci_profiles,
    }
}

/// The profiles whose runners run in containers: only for them is Podman asked.
pub fn oci_profiles(profiles: &[ScalePolicy]) -> Vec<String> {
    profiles
        .iter()
        .filter(|p| p.execution == crate::domain::Execution::Oci)
        .map(|p| p.name.clone())
        .collect()
}

/// Judges `facts` and keeps the result in `HostFacts::fitness`; a change is logged
/// once. Returns the new state, and whether a profile's fitness changed (the caller
/// then wakes the target loops).
pub fn apply(
    host: &HostFacts,
    metrics: &Metrics,
    facts: &Facts,
    profiles: &[ScalePolicy],
) -> (FitnessState, bool) {
    let names: Vec<String> = profiles.iter().map(|p| p.name.clone()).collect();
    let now = FitnessState {
        unfit: fitness::unfit(facts, &names),
        advice: fitness::findings(facts)
            .into_iter()
            .filter(|f| f.class == Class::Recommended && !f.ok)
            .map(|f| format!("{}: {}", f.check, f.detail))
            .collect(),
        oci_ready: fitness::findings(facts)
            .into_iter()
            .filter(|f| f.ok && f.check.starts_with("oci:"))
            .filter_map(|f| f.profile)
            .collect(),
        oci_quota: facts
            .oci
            .as_ref()
            .is_some_and(crate::domain::oci_readiness::quota_holds),
    };
    let before = std::mem::replace(&mut *lock(&host.fitness), now.clone());
    for (p, why) in &now.unfit {
        if before.unfit.get(p) != Some(why) {
            log_warn!("starts_held_unfit", profile = p, reason = why);
        }
    }
    for p in before.unfit.keys().filter(|p| !now.unfit.contains_key(*p)) {
        log_info!("starts_resumed_fit", profile = p);
    }
    for a in now.advice.iter().filter(|a| !before.advice.contains(a)) {
        log_warn!("host_fitness_advice", advice = a);
    }
    let rows: Vec<(String, bool)> = names
        .iter()
        .map(|p| (p.clone(), now.unfit.contains_key(p)))
        .collect();
    metrics.set_fitness_held(&rows);
    let changed = now.unfit != before.unfit;
    (now, changed)
}

/// Reads the facts for `host` and `profiles` and applies them.
pub fn check(
    facts: &HostFacts,
    metrics: &Metrics,
    host: &Host,
    profiles: &[ScalePolicy],
) -> (FitnessState, bool) {
    let enforced = facts.containment().cgroups.enforced();
    apply(
        facts,
        metrics,
        &read_facts(host, profiles, &enforced),
        profiles,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::names;

    #[test]
    fn a_missing_tool_holds_its_profile_until_a_look_finds_it() {
        let host = HostFacts::default();
        let metrics = Metrics::new();
        let mut p = ScalePolicy::new("linux", "octo", "0123abcd89ef4567");
        p.tools = vec!["node".into()];
        let profiles = vec![p, ScalePolicy::new("plain", "octo", "0123abcd89ef4567")];
        let mut facts = Facts {
            capacity: 1,
            ..Facts::default()
        };
        facts.tools.insert(
            "linux".into(),
            ToolFacts {
                tools: vec!["node".into()],
                missing: vec!["node".into()],
                path: "/bin".into(),
            },
        );
        let (s, changed) = apply(&host, &metrics, &facts, &profiles);
        assert!(changed);
        assert_eq!(s.unfit.keys().collect::<Vec<_>>(), ["linux"]);
        assert_eq!(host.fitness_reasons(), s.unfit);
        let held = |p: &str| metrics.value(names::FITNESS_STARTS_HELD, &[("profile", p)]);
        assert_eq!((held("linux"), held("plain")), (Some(1.0), Some(0.0)));
        facts.tools.get_mut("linux").unwrap().missing.clear();
        assert!(apply(&host, &metrics, &facts, &profiles).0.unfit.is_empty());
        assert!(host.fitness_reasons().is_empty());
        assert_eq!(held("linux"), Some(0.0));
    }

    #[test]
    fn memory_is_read_from_proc() {
        assert!(memory_bytes().is_some_and(|m| m > 1 << 20));
    }
}
