//! An attempt's slot of its target, carried out: at its start its cache slot readied
//! for its uid and the variables pointing at it added (after the operator's, which
//! win), and a kept `_work` moved into its root; at its cleanup the `_work` moved back
//! and the cache slot taken back from its uid; and the hourly prune of the caches and
//! kept workspaces together to the host's `cache_cap` (`domain::caches::prune_plan`),
//! never of a slot an attempt not yet cleaned holds, and what it measured recorded
//! (`store::daemon_facts::Measured`) for `status` and `doctor` (`shown`). The store is the book of who holds which
//! slot (`attempts.slot`), so a restart finds every lease where it was.

use crate::daemon::host::contain::{Containment, Ready};
use crate::daemon::shared::Shared;
use crate::domain::caches::{self, CacheDir};
use crate::domain::{Attempt, Host, InEffect, ScalePolicy, Target};
use crate::runner::slots::{self, Footprint, Kept};
use crate::store::Store;
use crate::store::daemon_facts::{self, Measured};
use crate::timefmt::Millis;
use crate::{log_info, log_warn};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Whether caches can be given without letting one target's jobs read another's:
/// each attempt has its own uid (the slot is that uid's alone while it holds it), or
/// runners are the manager's own user (isolation `none`, where nothing is kept apart
/// and the README says so). A profile's `run_as` user without per-attempt uids would
/// be one uid across targets: no caches.
fn caches_allowed(c: &Containment, ready: &Ready) -> bool {
    matches!(c.isolation, InEffect::Uids(_)) || ready.user.is_none()
}

fn runner_uids(host: &Host) -> impl Fn(u32) -> bool {
    let range = host.runner_uids;
    move |u| range.is_some_and(|r| r.contains(u))
}

/// Readies `a`'s slot for its start (see the module's comment). A cache or workspace
/// that cannot be readied costs the job its speed, not its runner: logged, and the
/// runner starts without it.
pub fn lease(
    c: &Containment,
    state_dir: &Path,
    host: &Host,
    target: &Target,
    policy: &ScalePolicy,
    a: &Attempt,
    ready: &mut Ready,
) {
    let Some(slot) = a.slot else { return };
    let runtime = c.runtime_dir(state_dir);
    let key = caches::target_key(target);
    let owner = ready.user.as_ref().map(|u| (u.uid, u.gid));
    let is_runner = runner_uids(host);
    if caches::enabled(policy, &target.scope) && caches_allowed(c, ready) {
        let dirs: Vec<&str> = caches::TOOLS.iter().map(|t| t.dir).collect();
        match slots::lease_caches(runtime, &key, slot, owner, &is_runner, &dirs) {
            Ok(dir) => {
                let vars = caches::env(&dir.to_string_lossy(), &ready.env);
                ready.env.extend(vars);
            }
            Err(e) => log_warn!("caches_unavailable", attempt = a.id, slot = slot, error = e),
        }
    }
    if a.keeps_work {
        match slots::take_work(runtime, &key, slot, &ready.root.work_dir, owner, &is_runner) {
            Ok(Kept::Refused) => log_warn!("workspace_refused", attempt = a.id, slot = slot),
            Ok(Kept::Moved) => log_info!("workspace_kept", attempt = a.id, slot = slot),
            Ok(Kept::Nothing) => {}
            Err(e) => log_warn!(
                "workspace_unavailable",
                attempt = a.id,
                slot = slot,
                error = e
            ),
        }
    }
}

/// Gives `a`'s slot back at its cleanup, before its root (`root`) is removed: its
/// `_work` to the slot when it keeps it (a link in its place is not kept), its cache
/// slot to the manager. False when the cache slot could not be taken back: the
/// cleanup is retried, and meanwhile the attempt holds its uid, so no other job runs
/// under the uid that still owns it.
pub fn release(
    store: &dyn Store,
    c: &Containment,
    state_dir: &Path,
    a: &Attempt,
    root: &Path,
) -> bool {
    let Some(slot) = a.slot else { return true };
    let Ok(target) = store.target(&a.target) else {
        return true;
    };
    // The root's runtime directory (`RUNTIME/attempts/<id>`): the old layout's for an
    // attempt started before roots moved into a directory per host.
    let runtime = root
        .parent()
        .and_then(Path::parent)
        .unwrap_or(c.runtime_dir(state_dir));
    let key = caches::target_key(&target);
    if a.keeps_work {
        let work = root.join(crate::runner::root::WORK_DIR);
        match slots::return_work(runtime, &key, slot, &work) {
            Ok(Kept::Refused) => log_warn!("workspace_refused", attempt = a.id, slot = slot),
            Ok(_) => {}
            // Lost, not kept: a cleanup that can never finish would hold the slot.
            Err(e) => log_warn!("workspace_lost", attempt = a.id, slot = slot, error = e),
        }
    }
    match slots::release_caches(runtime, &key, slot) {
        Ok(()) => true,
        Err(e) => {
            log_warn!(
                "caches_not_released",
                attempt = a.id,
                slot = slot,
                error = e
            );
            false
        }
    }
}

/// Prunes the caches and kept workspaces under the runtime root to the host's
/// `cache_cap` (one cap for both), least recently used first, never a slot an attempt
/// not yet cleaned holds (asked again under the allocation lock just before each
/// removal, so a start recorded meanwhile keeps its slot). Returns the slots removed
/// (`caches/<key>/slot-<n>`, `workspaces/<key>/slot-<n>`).
pub fn prune(shared: &Shared, store: &dyn Store, host: &Host) -> Vec<String> {
    let c = shared.containment();
    let runtime = c.runtime_dir(&shared.state_dir).to_path_buf();
    slots::remove_leftovers(&runtime);
    // Before the walk: a change made while it runs is newer than the measure.
    let started = crate::timefmt::now_millis();
    let found = match slots::list_slots(&runtime) {
        Ok(f) => f,
        Err(e) => {
            log_warn!("caches_not_listed", error = e);
            return Vec::new();
        }
    };
    if found.is_empty() {
        record(store, started, &found, host);
        return Vec::new();
    }
    let Some(held) = leased(store, host) else {
        record(store, started, &found, host);
        return Vec::new();
    };
    let dirs: Vec<CacheDir> = found
        .iter()
        .map(|f| CacheDir {
            name: f.name(),
            bytes: f.bytes,
            last_used: f.last_used,
            leased: held.contains(&(f.key.clone(), f.slot)),
        })
        .collect();
    let mut removed = Vec::new();
    for name in caches::prune_plan(&dirs, host.cache_cap_bytes) {
        let Some(f) = found.iter().find(|f| f.name() == name) else {
            continue;
        };
        let _guard = shared.alloc_lock.lock().unwrap_or_else(|p| p.into_inner());
        let still_free = leased(store, host).is_some_and(|l| !l.contains(&(f.key.clone(), f.slot)));
        if !still_free {
            continue;
        }
        match slots::remove_slot(&runtime, f.kind, &f.key, f.slot) {
            Ok(()) => removed.push(name),
            Err(e) => log_warn!("cache_not_pruned", slot = name, error = e),
        }
    }
    if !removed.is_empty() {
        log_info!(
            "caches_pruned",
            slots = removed.join(","),
            cap = host.cache_cap_bytes
        );
    }
    let left: Vec<slots::FoundSlot> = found
        .into_iter()
        .filter(|f| !removed.contains(&f.name()))
        .collect();
    record(store, started, &left, host);
    removed
}

fn record(store: &dyn Store, at: Millis, left: &[slots::FoundSlot], host: &Host) {
    let m = Measured {
        at,
        footprint: Footprint::of(left, host.cache_cap_bytes),
    };
    if let Err(e) = daemon_facts::put_measured(store, &m) {
        log_warn!("caches_not_recorded", error = e);
    }
}

/// The (target key, slot) pairs attempts not yet cleaned hold; `None` when the store
/// cannot say (then nothing is pruned).
fn leased(store: &dyn Store, host: &Host) -> Option<BTreeSet<(String, u32)>> {
    let keys: BTreeMap<String, String> = store
        .targets()
        .ok()?
        .iter()
        .map(|t| (t.name.clone(), caches::target_key(t)))
        .collect();
    let mut out = BTreeSet::new();
    for a in store.open_attempts(&host.id).ok()? {
        let (Some(slot), Some(key)) = (a.slot, keys.get(&a.target)) else {
            continue;
        };
        out.insert((key.clone(), slot));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{CredentialRef, TargetScope};
    use crate::facts::caches::{MEASURE_FRESH_MS, fresh, line, shown, shown_line};
    use crate::store::{NewAttempt, SqliteStore};

    #[test]
    fn a_recorded_measure_is_shown_while_fresh_against_the_cap_now() {
        let m = Measured {
            at: 1_000_000,
            footprint: Footprint {
                caches_bytes: 5,
                cache_targets: 1,
                cap_bytes: 10,
                ..Footprint::default()
            },
        };
        let now = m.at + MEASURE_FRESH_MS - 1;
        let untouched = m.at - 1;
        let shown = fresh(Some(m.clone()), untouched, 99, now).unwrap();
        assert_eq!((shown.footprint.cap_bytes, shown.at), (99, m.at));
        // A slot touched in the measure's millisecond counts as measured; one touched
        // after it (a lease, a release, a kept `_work`): walk again.
        assert!(fresh(Some(m.clone()), m.at, 99, now).is_some());
        assert_eq!(fresh(Some(m.clone()), m.at + 1, 99, now), None);
        assert_eq!(
            fresh(Some(m.clone()), untouched, 99, m.at + MEASURE_FRESH_MS),
            None
        );
        // A clock stepped back past it: not trusted.
        assert_eq!(fresh(Some(m.clone()), untouched, 99, m.at - 1), None);
        assert_eq!(fresh(None, 0, 99, now), None);
        assert!(
            shown_line(&shown.footprint, Some(m.at), m.at + 720_000)
                .ends_with("(measured 12m00s ago)")
        );
        assert!(!shown_line(&shown.footprint, None, now).contains("measured"));
    }

    #[test]
    fn the_footprint_line_adds_up_against_the_cap() {
        let f = Footprint {
            caches_bytes: 1224 << 20,
            cache_targets: 2,
            workspaces_bytes: 400 << 20,
            workspaces: 2,
            cap_bytes: 10 << 30,
        };
        assert_eq!(
            line(&f),
            "1.6 GiB of 10 GiB: caches 1.2 GiB (2 targets), workspaces 400 MiB (2)"
        );
        assert_eq!(
            line(&Footprint::default()),
            "0 B of 0 B: caches 0 B (0 targets), workspaces 0 B (0)"
        );
        let one = Footprint {
            cache_targets: 1,
            ..Footprint::default()
        };
        assert!(line(&one).contains("(1 target)"), "{}", line(&one));
    }

    #[test]
    fn the_prune_removes_free_slots_over_the_cap_and_never_a_held_one() {
        let d = crate::store::tests::TempDir::new("slots-prune");
        std::fs::create_dir_all(&d.0).unwrap();
        let shared = Shared::new(d.0.clone());
        let store = SqliteStore::open_in_memory().unwrap();
        let mut host = store.host_or_create().unwrap();
        host.cache_cap_bytes = 0;
        let t = Target {
            name: "t".into(),
            scope: TargetScope::Repo {
                owner: "o".into(),
                repo: "r".into(),
            },
            api_url: "https://api.github.com".into(),
            credential: CredentialRef::TokenEnv { var: "T".into() },
            poll_interval_secs: 10,
            repos: vec![],
            max_in_flight: 4,
            secondary_limit: Some(900),
        };
        store.add_target(&t).unwrap();
        store
            .add_profile(&ScalePolicy::new("p", "t", &host.id))
            .unwrap();
        let key = caches::target_key(&t);
        for slot in [0, 1] {
            slots::lease_caches(&d.0, &key, slot, None, &|_| false, &["npm"]).unwrap();
        }
        // An attempt not yet cleaned holds slot 0.
        let a = store
            .create_attempt(
                &NewAttempt {
                    profile: "p".into(),
                    target: "t".into(),
                    host_id: host.id.clone(),
                    ..NewAttempt::default()
                },
                1,
            )
            .unwrap();
        assert_eq!(a.slot, Some(0));
        // Kept workspaces count against the same cap: slot 0's is leased with its
        // cache, slot 2's is free.
        for slot in [0, 2] {
            let work = d.0.join(format!("attempts/w{slot}/_work"));
            std::fs::create_dir_all(&work).unwrap();
            std::fs::write(work.join("left"), "x").unwrap();
            slots::return_work(&d.0, &key, slot, &work).unwrap();
        }
        let before = Footprint::read(&d.0, &host);
        assert_eq!((before.cache_targets, before.workspaces), (1, 2));
        assert!(before.over() && before.workspaces_bytes > 0, "{before:?}");
        let mut removed = prune(&shared, &store, &host);
        removed.sort();
        assert_eq!(
            removed,
            [
                format!("caches/{key}/slot-1"),
                format!("workspaces/{key}/slot-2")
            ]
        );
        assert!(slots::cache_slot(&d.0, &key, 0).is_dir());
        assert!(!slots::cache_slot(&d.0, &key, 1).exists());
        assert!(slots::work_slot(&d.0, &key, 0).join("_work/left").is_file());
        assert!(!slots::work_slot(&d.0, &key, 2).exists());
        let after = Footprint::read(&d.0, &host);
        assert_eq!((after.cache_targets, after.workspaces), (1, 1));
        // What it measured, after its removals, is recorded for status and doctor.
        let (shown_now, at) = shown(&store, &d.0, &host, crate::timefmt::now_millis());
        assert!(at.is_some());
        assert_eq!(shown_now, after);
    }
}
