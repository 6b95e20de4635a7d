//! The store's own tests: books round-trip, revisions, migrations, refusals, pruning,
//! and the query plans of the every-pass reads.

use super::*;
use crate::domain::target::{DEFAULT_MAX_IN_FLIGHT, DEFAULT_POLL_INTERVAL_SECS, GITHUB_API_URL};
use crate::domain::{
    AttemptState, CredentialRef, Limit, NotReconciling, Outcome, Reason, ReasonKind, Reported,
    TargetMode, TargetScope,
};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("rm-store-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn target(name: &str) -> Target {
    Target {
        name: name.into(),
        scope: TargetScope::Repo {
            owner: "octo".into(),
            repo: "app".into(),
        },
        api_url: GITHUB_API_URL.into(),
        credential: CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        },
        poll_interval_secs: DEFAULT_POLL_INTERVAL_SECS,
        repos: vec![],
        max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        secondary_limit: Some(900),
    }
}

pub(super) fn seeded() -> (SqliteStore, Host, ScalePolicy) {
    let s = SqliteStore::open_in_memory().unwrap();
    let h = s.host_or_create().unwrap();
    s.add_target(&target("octo")).unwrap();
    let mut p = ScalePolicy::new("linux", "octo", &h.id);
    p.set_labels("--labels", &["gpu".into()], &h.os, &h.arch)
        .unwrap();
    p.max_capacity = 4;
    let p = s.add_profile(&p).unwrap();
    (s, h, p)
}

pub(super) fn new_attempt(h: &Host, profile: &str) -> NewAttempt {
    NewAttempt {
        profile: profile.into(),
        target: "octo".into(),
        host_id: h.id.clone(),
        ..NewAttempt::default()
    }
}

#[test]
fn host_is_created_once_with_a_random_id() {
    let s = SqliteStore::open_in_memory().unwrap();
    assert_eq!(s.host().unwrap(), None);
    let h = s.host_or_create().unwrap();
    assert_eq!(h.id.len(), 16);
    assert!(
        h.id.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert!(h.capacity >= 1);
    assert_eq!(s.host_or_create().unwrap(), h);
    let mut h2 = h.clone();
    h2.capacity = 7;
    h2.coordinator = Some("ws://127.0.0.1:9000".into());
    h2.coordinator_ca_file = Some("/etc/rm/ca.pem".into());
    h2.coordinator_insecure = true;
    h2.name = "ignored".into();
    s.update_host(&h2).unwrap();
    s.set_draining(true).unwrap();
    let back = s.host().unwrap().unwrap();
    assert_eq!(
        (back.capacity, back.draining, back.name),
        (7, true, h.name.clone())
    );
    assert_eq!(back.coordinator.as_deref(), Some("ws://127.0.0.1:9000"));
    assert_eq!(
        (back.coordinator_ca_file, back.coordinator_insecure),
        (Some("/etc/rm/ca.pem".into()), true)
    );
}

#[test]
fn targets_round_trip_and_refuse_duplicates_and_removal_in_use() {
    let (s, _, _) = seeded();
    assert_eq!(s.target("octo").unwrap(), target("octo"));
    assert!(matches!(
        s.add_target(&target("octo")),
        Err(StoreError::Exists { .. })
    ));
    let mut t = target("octo");
    t.poll_interval_secs = 30;
    t.max_in_flight = 40;
    t.credential = CredentialRef::App {
        app_id: 5,
        key_path: "/k.pem".into(),
        installation_id: Some(9),
    };
    s.update_target(&t).unwrap();
    assert_eq!(s.targets().unwrap(), vec![t]);
    let e = s.remove_target("octo").unwrap_err();
    assert!(
        matches!(&e, StoreError::InUse { users, .. } if users.contains("linux")),
        "{e}"
    );
    s.remove_profile("linux").unwrap();
    s.remove_target("octo").unwrap();
    assert!(matches!(
        s.target("octo"),
        Err(StoreError::NotFound { what: "target", .. })
    ));
}

#[test]
fn profile_needs_its_target() {
    let (s, h, _) = seeded();
    let mut p = ScalePolicy::new("other", "nope", &h.id);
    p.labels = vec!["x".into()];
    assert!(matches!(
        s.add_profile(&p),
        Err(StoreError::NotFound { what: "target", name }) if name == "nope"
    ));
}

#[test]
fn edits_made_atomically_are_written_together_or_not_at_all() {
    let (s, h, p) = seeded();
    // A refusal after two edits took effect: neither is written.
    let r: Result<()> = s.atomically(|s| {
        s.add_target(&target("second"))?;
        s.update_profile(
            &ScalePolicy {
                max_capacity: 9,
                ..p.clone()
            },
            p.revision,
        )?;
        // Its own edit refused inside: only that savepoint is rolled back.
        assert!(s.remove_target("octo").is_err());
        assert_eq!(s.profile("linux")?.max_capacity, 9);
        s.add_target(&target("second")).map(drop)
    });
    assert!(matches!(r, Err(StoreError::Exists { .. })), "{r:?}");
    assert!(matches!(
        s.target("second"),
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(s.profile("linux").unwrap(), p);
    // Accepted whole: both written, and the store takes edits after it.
    s.atomically(|s| {
        s.add_target(&target("second"))?;
        s.update_profile(
            &ScalePolicy {
                max_capacity: 9,
                ..p.clone()
            },
            p.revision,
        )
        .map(drop)
    })
    .unwrap();
    assert_eq!(s.profile("linux").unwrap().max_capacity, 9);
    s.remove_target("second").unwrap();
    let _ = h;
}

#[test]
fn a_stale_revision_is_refused_and_writes_nothing() {
    let (s, _, p) = seeded();
    assert_eq!(p.revision, 1);
    let mut a = p.clone();
    a.max_capacity = 8;
    assert_eq!(s.update_profile(&a, 1).unwrap(), 2);
    let mut b = p.clone();
    b.max_capacity = 2;
    b.min_capacity = 1;
    match s.update_profile(&b, 1) {
        Err(StoreError::StaleRevision {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (1, 2)),
        other => panic!("expected a stale revision, got {other:?}"),
    }
    let stored = s.profile("linux").unwrap();
    assert_eq!((stored.max_capacity, stored.min_capacity), (8, 0));
    assert_eq!(stored.revision, 2);
    let mut c = stored.clone();
    c.mode = crate::domain::Mode::Monitor;
    c.demand = crate::domain::DemandSource::Scaleset;
    c.job_timeout_secs = Some(60);
    c.runner_dir = Some("/opt/r".into());
    assert_eq!(s.update_profile(&c, 2).unwrap(), 3);
    c.revision = 3;
    assert_eq!(s.profile("linux").unwrap(), c);
}

#[test]
fn the_one_profile_edit_validates_whole_and_checks_the_revision() {
    use crate::domain::profile::Change;
    let (s, h, p) = seeded();
    let e = edit_profile(&s, &h, "linux", &[Change::Max(0)], None).unwrap_err();
    assert!(
        matches!(&e, EditError::Invalid(i) if i.arg == "max"),
        "max=0 of an autoscale profile is refused by validate: {e}"
    );
    let e = edit_profile(
        &s,
        &h,
        "linux",
        &[Change::Setting("runner_dir=/nonexistent/runner".into())],
        None,
    )
    .unwrap_err();
    assert!(
        matches!(&e, EditError::Invalid(i) if i.arg == "runner_dir"),
        "{e}"
    );
    let e = edit_profile(
        &s,
        &h,
        "linux",
        &[Change::Setting("target=nope".into())],
        None,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "invalid target: no target named \"nope\"");
    assert_eq!(
        s.profile("linux").unwrap(),
        p,
        "every refusal wrote nothing"
    );
    let written = edit_profile(
        &s,
        &h,
        "linux",
        &[Change::Max(6), Change::Active(false)],
        Some(1),
    )
    .unwrap();
    assert_eq!(
        (written.revision, written.max_capacity, written.active),
        (2, 6, false)
    );
    assert_eq!(s.profile("linux").unwrap(), written);
    let e = edit_profile(&s, &h, "linux", &[Change::Max(5)], Some(1)).unwrap_err();
    assert!(
        matches!(
            e,
            EditError::Store(StoreError::StaleRevision {
                expected: 1,
                actual: 2,
                ..
            })
        ),
        "{e}"
    );
}

#[test]
fn attempts_keep_their_history_and_the_profile_stays_while_live() {
    let (s, h, _) = seeded();
    let mut a = s.create_attempt(&new_attempt(&h, "linux"), 1_000).unwrap();
    assert_eq!(a.runner_name, crate::domain::runner_name(&h.id, a.id));
    a.step(AttemptState::Starting, 2_000).unwrap();
    a.pid = Some(4242);
    a.pid_start = Some(123_456);
    s.save_attempt(&a).unwrap();
    a.step(AttemptState::Idle, 3_000).unwrap();
    s.save_attempt(&a).unwrap();
    s.save_attempt(&a).unwrap();
    assert_eq!(s.attempt(a.id).unwrap(), a);
    assert_eq!(s.live_counts().unwrap().get("linux"), Some(&1));
    let e = s.remove_profile("linux").unwrap_err();
    assert!(e.to_string().contains("pause it"), "{e}");

    a.end(
        Outcome::ExitedIdleWithoutWork,
        Some(Reason::new(ReasonKind::IdleTimeout)),
        4_000,
    )
    .unwrap();
    s.save_attempt(&a).unwrap();
    assert!(s.live_counts().unwrap().is_empty());
    assert_eq!(s.open_attempts(&h.id).unwrap().len(), 1);
    let back = s.attempt(a.id).unwrap();
    assert_eq!(back.history.len(), 4);
    assert_eq!(back.outcome, Some(Outcome::ExitedIdleWithoutWork));
    s.remove_profile("linux").unwrap();
    assert!(matches!(
        s.attempt(999),
        Err(StoreError::NotFound {
            what: "attempt",
            ..
        })
    ));
}

#[test]
fn a_lease_and_a_workers_save_never_undo_each_other() {
    let (s, h, _) = seeded();
    let mut a = s.create_attempt(&new_attempt(&h, "linux"), 1_000).unwrap();
    a.step(AttemptState::Starting, 2_000).unwrap();
    a.step(AttemptState::Idle, 3_000).unwrap();
    s.save_attempt(&a).unwrap();
    // The pass binds a launch from the row it read; a worker holding the attempt
    // ends and cleans it meanwhile, from its own copy (no lease on it).
    let read_by_the_pass = s.attempt(a.id).unwrap();
    a.end(Outcome::ExitedIdleWithoutWork, None, 4_000).unwrap();
    a.mark_cleaned(5_000);
    s.save_attempt(&a).unwrap();
    s.set_lease(read_by_the_pass.id, "L1").unwrap();
    let back = s.attempt(a.id).unwrap();
    assert!(back.cleaned, "the lease did not bring the attempt back");
    assert_eq!(back.lease_id.as_deref(), Some("L1"));
    // And the worker's next save keeps the lease it never saw.
    s.save_attempt(&a).unwrap();
    assert_eq!(s.attempt(a.id).unwrap().lease_id.as_deref(), Some("L1"));
    assert!(matches!(
        s.set_lease(999, "L2"),
        Err(StoreError::NotFound { .. })
    ));
}

/// Issue 38: a copy read before the job id was learned saved `job_id: null` over it.
/// CI (stop 42) then lost a job's name the same way: `labels` found a served job
/// that no attempt named.
#[test]
fn regression_38_a_save_never_erases_what_is_known_of_the_job() {
    let (s, h, _) = seeded();
    let mut stale = s.create_attempt(&new_attempt(&h, "linux"), 1_000).unwrap();
    let mut served = s.attempt(stale.id).unwrap();
    served.job_id = Some(42);
    served.job_name = Some("a0".into());
    served.job_queued_at = Some(900);
    served.owner = Some(crate::domain::job_owner::JobOwner {
        repo: "acme/app".into(),
        workflow: Some("ci".into()),
        job_name: "a0".into(),
        run_id: 7,
        run_attempt: Some(1),
        job_id: Some(42),
        queued_at: Some(900),
        source: crate::domain::job_owner::OwnerSource::Rest,
    });
    s.save_attempt(&served).unwrap();
    stale.step(AttemptState::Starting, 2_000).unwrap();
    s.save_attempt(&stale).unwrap();
    let back = s.attempt(stale.id).unwrap();
    assert_eq!(
        (back.job_id, back.job_name.as_deref(), back.job_queued_at),
        (Some(42), Some("a0"), Some(900))
    );
    assert_eq!(back.state, AttemptState::Starting);
    assert_eq!(
        back.owner, served.owner,
        "the owner went with the stale save"
    );
}

#[test]
fn listing_filters_and_open_reads() {
    let (s, h, _) = seeded();
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut a = s.create_attempt(&new_attempt(&h, "linux"), i).unwrap();
        if i < 3 {
            a.end(Outcome::CompletedJob, None, i + 10).unwrap();
            if i < 2 {
                a.cleaned = true;
            }
            s.save_attempt(&a).unwrap();
        }
        ids.push(a.id);
    }
    s.create_attempt(&new_attempt(&h, "other"), 9).unwrap();
    let all = s.attempts(&AttemptFilter::default()).unwrap();
    assert_eq!(all.len(), 6);
    assert!(all.windows(2).all(|w| w[0].id > w[1].id), "newest first");
    let f = AttemptFilter {
        profile: Some("linux".into()),
        active_only: true,
        limit: None,
    };
    assert_eq!(
        s.attempts(&f)
            .unwrap()
            .iter()
            .map(|a| a.id)
            .collect::<Vec<_>>(),
        vec![ids[4], ids[3]]
    );
    let limited = AttemptFilter {
        limit: Some(2),
        ..AttemptFilter::default()
    };
    assert_eq!(s.attempts(&limited).unwrap().len(), 2);
    assert_eq!(s.open_attempts_of_profile("linux").unwrap().len(), 3);
    assert_eq!(s.open_attempts(&h.id).unwrap().len(), 4);
    assert_eq!(s.open_attempts("ffffffffffffffff").unwrap().len(), 0);
}

#[test]
fn prune_removes_old_cleaned_attempts_with_their_events_and_never_reuses_ids() {
    let (s, h, _) = seeded();
    let mut last = 0;
    for i in 0..4 {
        let mut a = s
            .create_attempt(&new_attempt(&h, "linux"), i * 100)
            .unwrap();
        a.end(
            Outcome::Failed,
            Some(Reason::message(ReasonKind::Spawn, "boom")),
            i * 100 + 1,
        )
        .unwrap();
        a.cleaned = i != 1;
        s.save_attempt(&a).unwrap();
        last = a.id;
    }
    // Cleaned and updated before 250: attempts 0 and 2; 1 is not cleaned, 3 is newer.
    assert_eq!(s.prune_attempts(250).unwrap(), 2);
    assert_eq!(s.attempts(&AttemptFilter::default()).unwrap().len(), 2);
    let events: i64 = s
        .connection()
        .query_row("SELECT count(*) FROM attempt_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(events, 2 * 2, "pruned attempts' events went too");
    assert_eq!(s.prune_attempts(1_000).unwrap(), 1);
    let next = s.create_attempt(&new_attempt(&h, "linux"), 2_000).unwrap();
    assert!(
        next.id > last,
        "an attempt id (a runner name) is never reused"
    );
}

#[test]
fn every_pass_reads_use_the_partial_indexes() {
    let (s, _, _) = seeded();
    for (sql, index) in [
        (ledger::OPEN_OF_HOST, "attempts_open_by_host"),
        (ledger::OPEN_OF_PROFILE, "attempts_open_by_profile"),
    ] {
        let mut st = s
            .connection()
            .prepare(&format!("EXPLAIN QUERY PLAN SELECT * FROM attempts {sql}"))
            .unwrap();
        let plan: Vec<String> = st
            .query_map(["x"], |r| r.get::<_, String>(3))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert!(
            plan.iter().any(|l| l.contains(index)),
            "{sql}: plan {plan:?} does not use {index}"
        );
    }
}

#[test]
fn reasons_are_kept_as_data_beside_their_text_and_old_rows_read_back_leniently() {
    let (s, h, _) = seeded();
    let mut a = s.create_attempt(&new_attempt(&h, "linux"), 0).unwrap();
    let why = Reason::exit(ReasonKind::ExitedDuringJob, 137);
    a.end(Outcome::Failed, Some(why.clone()), 5).unwrap();
    s.save_attempt(&a).unwrap();
    let text: String = s
        .connection()
        .query_row("SELECT reason FROM attempts WHERE id = ?1", [a.id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(
        text, "exited_during_job (exit 137)",
        "the text older builds wrote"
    );
    let parts: (String, String) = s
        .connection()
        .query_row(
            "SELECT reason_kind, reason_detail FROM attempts WHERE id = ?1",
            [a.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        parts,
        ("exited_during_job".into(), "137".into()),
        "kept as data"
    );
    assert_eq!(s.attempt(a.id).unwrap().reason, Some(why.clone()));
    // The data wins over the text.
    s.connection()
        .execute("UPDATE attempts SET reason = 'x' WHERE id = ?1", [a.id])
        .unwrap();
    assert_eq!(s.attempt(a.id).unwrap().reason, Some(why));

    // A row from before V18 (text only), in another build's words: read as `Other`,
    // shown and saved back unchanged.
    s.connection()
        .execute(
            "UPDATE attempts SET reason = 'evicted by the scheduler', reason_kind = NULL, \
             reason_detail = NULL WHERE id = ?1",
            [a.id],
        )
        .unwrap();
    let mut back = s.attempt(a.id).unwrap();
    let odd = back.reason.clone().unwrap();
    assert_eq!(odd.kind(), ReasonKind::Other);
    assert_eq!(odd.to_string(), "evicted by the scheduler");
    back.cleaned = true;
    s.save_attempt(&back).unwrap();
    assert_eq!(s.attempt(a.id).unwrap().reason, Some(odd));
}

#[test]
fn status_words_are_typed_and_unknown_ones_kept() {
    let (s, _, _) = seeded();
    let unfit = Limit::NotReconciling(NotReconciling::Unfit("no runner install".into()));
    s.put_profile_status(&ProfileStatus {
        profile: "linux".into(),
        demand: 1,
        limiting: unfit.clone().into(),
        last_error: None,
        updated_at: 5,
    })
    .unwrap();
    assert_eq!(
        s.profile_statuses().unwrap()[0].limiting,
        Reported::Known(unfit)
    );
    s.put_target_status(&TargetStatus {
        target: "octo".into(),
        mode: TargetMode::Fallback.into(),
        last_error: None,
        error_kind: None,
        rate_limit_limit: None,
        rate_limit_reset: None,
        poll_every_ms: None,
        rate_limit_remaining: None,
        updated_at: 6,
    })
    .unwrap();
    assert_eq!(
        s.target_statuses().unwrap()[0].mode,
        Reported::Known(TargetMode::Fallback)
    );
    s.connection()
        .execute_batch(
            "UPDATE profile_status SET limiting = 'queue_depth'; \
             UPDATE target_status SET mode = 'federated';",
        )
        .unwrap();
    assert_eq!(
        s.profile_statuses().unwrap()[0].limiting,
        Reported::Unrecognized("queue_depth".into())
    );
    assert_eq!(
        s.target_statuses().unwrap()[0].mode.to_string(),
        "federated"
    );
}

#[test]
fn live_rows_samples_and_kv() {
    let (s, _, _) = seeded();
    let ps = ProfileStatus {
        profile: "linux".into(),
        demand: 3,
        limiting: Limit::MaxCapacity.into(),
        last_error: None,
        updated_at: 5,
    };
    s.put_profile_status(&ps).unwrap();
    s.put_profile_status(&ProfileStatus {
        demand: 4,
        ..ps.clone()
    })
    .unwrap();
    assert_eq!(s.profile_statuses().unwrap()[0].demand, 4);
    let ts = TargetStatus {
        target: "octo".into(),
        mode: TargetMode::Standalone.into(),
        last_error: Some("401 bad credentials".into()),
        error_kind: Some(crate::domain::status::ErrorKind::CredentialsRefused),
        rate_limit_limit: None,
        rate_limit_reset: None,
        poll_every_ms: None,
        rate_limit_remaining: Some(4999),
        updated_at: 6,
    };
    s.put_target_status(&ts).unwrap();
    assert_eq!(s.target_statuses().unwrap(), vec![ts]);
    assert_eq!(s.heartbeat().unwrap(), None);
    let hb = Heartbeat {
        pid: 77,
        started_at: 1,
        heartbeat_at: 2,
        version: "0.1.0".into(),
    };
    s.put_heartbeat(&hb).unwrap();
    assert_eq!(s.heartbeat().unwrap(), Some(hb));
    s.clear_heartbeat().unwrap();
    assert_eq!(s.heartbeat().unwrap(), None);

    let q = |at| QueueSample {
        profile: "linux".into(),
        at,
        queued: 2,
        live: 1,
    };
    s.add_queue_samples(&[q(10), q(20), q(30)]).unwrap();
    s.add_latency_sample(&LatencySample {
        profile: "linux".into(),
        at: 15,
        latency_ms: 900,
    })
    .unwrap();
    assert_eq!(
        s.queue_samples(Some("linux"), 20).unwrap(),
        vec![q(20), q(30)]
    );
    assert_eq!(s.queue_samples(Some("none"), 0).unwrap(), vec![]);
    assert_eq!(s.latency_samples(None, 0).unwrap().len(), 1);
    assert_eq!(s.prune_samples(20).unwrap(), 2);
    assert_eq!(s.queue_samples(None, 0).unwrap(), vec![q(20), q(30)]);

    assert_eq!(s.kv_get("scaleset.last").unwrap(), None);
    s.kv_put("scaleset.last", "41").unwrap();
    s.kv_put("scaleset.last", "42").unwrap();
    assert_eq!(s.kv_get("scaleset.last").unwrap().as_deref(), Some("42"));
    s.kv_delete("scaleset.last").unwrap();
    assert_eq!(s.kv_get("scaleset.last").unwrap(), None);
}

fn live_meter(attempt: i64, at: Millis, rss: u64, peak: u64, cpu: u64, seq: u64) -> LiveMeter {
    LiveMeter {
        attempt,
        at,
        rss_bytes: rss,
        peak_rss_bytes: peak,
        cpu_millis: cpu,
        cpu_percent: 12.5,
        processes: 3,
        seq,
    }
}

#[test]
fn live_meters_are_upserted_with_a_bounded_ring_and_go_when_cleaned() {
    use crate::meter::live::RING_SLOTS;
    let (s, h, _) = seeded();
    let mut a = s.create_attempt(&new_attempt(&h, "linux"), 1).unwrap();
    let other = s.create_attempt(&new_attempt(&h, "linux"), 1).unwrap();
    assert!(s.live_meters().unwrap().is_empty());
    s.put_live_meters(&[live_meter(a.id, 10, 100, 100, 5, 0)])
        .unwrap();
    s.put_live_meters(&[live_meter(other.id, 10, 7, 7, 1, 0)])
        .unwrap();
    let m = s.live_meters().unwrap()[&a.id];
    assert_eq!((m.rss_bytes, m.peak_rss_bytes, m.cpu_millis), (100, 100, 5));
    assert_eq!((m.cpu_percent, m.processes, m.at), (12.5, 3, 10));

    // A restarted daemon's sampler starts from nothing: the stored peak and CPU
    // time stay, the figures of now follow the new sample.
    s.put_live_meters(&[live_meter(a.id, 20, 50, 60, 2, 1)])
        .unwrap();
    let m = s.live_meters().unwrap()[&a.id];
    assert_eq!((m.rss_bytes, m.peak_rss_bytes, m.cpu_millis), (50, 100, 5));

    // The ring keeps at most RING_SLOTS points, the newest, oldest first.
    for seq in 2..(RING_SLOTS + 10) {
        let at = 10 * (seq as i64 + 1);
        s.put_live_meters(&[live_meter(a.id, at, seq, seq, 5, seq)])
            .unwrap();
    }
    let points = s.meter_points(a.id).unwrap();
    assert_eq!(points.len() as u64, RING_SLOTS);
    assert_eq!(points.last().unwrap().rss_bytes, RING_SLOTS + 9);
    assert_eq!(points[0].rss_bytes, 10);
    assert!(points.windows(2).all(|w| w[0].at < w[1].at));
    assert_eq!(s.meter_points(other.id).unwrap().len(), 1);

    // The attempt row is not what the meters rewrite.
    assert_eq!(s.attempt(a.id).unwrap().peak_rss_bytes, None);

    // Cleaned: its meter and points go; a late batch does not bring them back.
    a.cleaned = true;
    s.save_attempt(&a).unwrap();
    s.put_live_meters(&[live_meter(a.id, 5_000, 1, 1, 1, 99)])
        .unwrap();
    let left = s.live_meters().unwrap();
    assert_eq!(left.keys().copied().collect::<Vec<_>>(), [other.id]);
    assert!(s.meter_points(a.id).unwrap().is_empty());
    // Nor for an attempt that never existed.
    s.put_live_meters(&[live_meter(9_999, 1, 1, 1, 1, 0)])
        .unwrap();
    assert_eq!(s.live_meters().unwrap().len(), 1);
}

fn session_row(profile: &str, phase: crate::domain::SessionPhase, at: Millis) -> SessionStatus {
    SessionStatus {
        profile: profile.into(),
        target: "octo".into(),
        session: crate::domain::SessionState {
            phase: phase.into(),
            scale_set_id: Some(3),
            session_id: Some("a1b2-c3d4".into()),
            held_since: Some(at - 60_000),
            last_message_id: Some(42),
            last_message_at: Some(at - 5_000),
            last_poll_at: Some(at - 1_000),
            reason: None,
            retry_at: None,
        },
        updated_at: at,
    }
}

#[test]
fn session_rows_are_one_per_profile_overwritten_and_go_with_the_profile() {
    use crate::domain::{Reported, SessionPhase};
    let (s, _, _) = seeded();
    assert!(s.session_statuses().unwrap().is_empty());
    s.put_session_status(&session_row("linux", SessionPhase::Held, 10_000))
        .unwrap();
    let mut conflict = session_row("linux", SessionPhase::Conflict, 20_000);
    conflict.session.session_id = None;
    conflict.session.held_since = None;
    conflict.session.reason = Some("another listener holds it (owner x)".into());
    conflict.session.retry_at = Some(32_000);
    s.put_session_status(&conflict).unwrap();
    assert_eq!(s.session_statuses().unwrap(), vec![conflict.clone()]);
    s.put_session_status(&session_row("other", SessionPhase::Opening, 1))
        .unwrap();
    s.delete_session_status("other").unwrap();
    assert_eq!(s.session_statuses().unwrap().len(), 1);
    // A word another build wrote is kept as written.
    s.connection()
        .execute("UPDATE scaleset_sessions SET phase = 'parked'", [])
        .unwrap();
    assert_eq!(
        s.session_statuses().unwrap()[0].session.phase,
        Reported::Unrecognized("parked".into())
    );
    s.remove_profile("linux").unwrap();
    assert!(s.session_statuses().unwrap().is_empty());
}

#[test]
fn a_targets_validators_are_kept_changed_and_go_with_it() {
    let d = TempDir::new("etags");
    let s = SqliteStore::open(&d.0).unwrap();
    s.add_target(&target("octo")).unwrap();
    let e = |url: &str, tag: &str| super::StoredEtag {
        url: url.into(),
        etag: tag.into(),
        body: br#"{"workflow_runs":[{"id":1}]}"#.to_vec(),
        link: Some("<https://api.github.com/x?page=2>; rel=\"next\"".into()),
    };
    use super::EtagChange::{Gone, Put};
    s.save_etags("octo", &[Put(e("/a", "\"1\"")), Put(e("/b", "\"2\""))])
        .unwrap();
    s.save_etags("octo", &[Put(e("/a", "\"3\"")), Gone("/b".into())])
        .unwrap();
    assert_eq!(s.etags("octo").unwrap(), vec![e("/a", "\"3\"")]);
    assert!(s.etags("other").unwrap().is_empty(), "kept per target");
    s.remove_target("octo").unwrap();
    assert!(
        s.etags("octo").unwrap().is_empty(),
        "a removed target's go with it"
    );
}

#[test]
fn a_removed_targets_kept_times_and_runner_list_go_with_it() {
    use super::daemon_facts as facts;
    let d = TempDir::new("target-kv");
    let s = SqliteStore::open(&d.0).unwrap();
    for name in ["octo", "octo-2"] {
        s.add_target(&target(name)).unwrap();
        facts::put_rate_limit_hold(&s, name, 5).unwrap();
        facts::put_in_progress_read(&s, name, 7).unwrap();
        facts::publish_runners(&s, name, &[], 9).unwrap();
    }
    s.remove_target("octo").unwrap();
    assert_eq!(facts::rate_limit_hold(&s, "octo").unwrap(), None);
    assert_eq!(facts::in_progress_read(&s, "octo").unwrap(), None);
    assert!(facts::runners_seen(&s, "octo").unwrap().is_none());
    // A target whose name starts with the removed one's keeps its own.
    assert_eq!(facts::rate_limit_hold(&s, "octo-2").unwrap(), Some(5));
    assert_eq!(facts::in_progress_read(&s, "octo-2").unwrap(), Some(7));
    assert!(facts::runners_seen(&s, "octo-2").unwrap().is_some());
    // A target added again under the name starts with nothing kept.
    s.add_target(&target("octo")).unwrap();
    assert_eq!(facts::rate_limit_hold(&s, "octo").unwrap(), None);
}

#[test]
fn the_runner_environment_and_tools_round_trip() {
    let d = TempDir::new("runner-env");
    std::fs::create_dir_all(&d.0).unwrap();
    let s = SqliteStore::open(&d.0).unwrap();
    let mut h = s.host_or_create().unwrap();
    h.env.insert("JAVA_HOME".into(), "/opt/jdk".into());
    s.update_host(&h).unwrap();
    assert_eq!(s.host().unwrap().unwrap().env, h.env);
    s.add_target(&crate::domain::Target {
        name: "octo".into(),
        scope: crate::domain::TargetScope::Org { org: "octo".into() },
        api_url: "https://api.github.com".into(),
        credential: crate::domain::CredentialRef::TokenFile { path: "/t".into() },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 8,
        secondary_limit: Some(900),
    })
    .unwrap();
    let mut p = crate::domain::ScalePolicy::new("linux", "octo", &h.id);
    p.env.insert("A".into(), "x=y, z".into());
    p.tools = vec!["git".into(), "node".into()];
    let stored = s.add_profile(&p).unwrap();
    assert_eq!((&stored.env, &stored.tools), (&p.env, &p.tools));
    let mut next = stored.clone();
    next.env.clear();
    next.tools = vec!["docker".into()];
    s.update_profile(&next, stored.revision).unwrap();
    let back = s.profile("linux").unwrap();
    assert!(back.env.is_empty());
    assert_eq!(back.tools, ["docker"]);
    // V15: native until set; the image and disk limit round-trip.
    assert_eq!(back.execution, crate::domain::Execution::Native);
    assert_eq!((&back.image, back.disk_max), (&None, None));
    let mut oci = back.clone();
    oci.execution = crate::domain::Execution::Oci;
    oci.image = Some(format!("ghcr.io/a/r@sha256:{}", "a".repeat(64)));
    oci.disk_max = Some(20 << 30);
    s.update_profile(&oci, back.revision).unwrap();
    let back = s.profile("linux").unwrap();
    assert_eq!(
        (back.execution, &back.image, back.disk_max),
        (oci.execution, &oci.image, oci.disk_max)
    );
    // V17: limits are required until a profile says best-effort.
    use crate::domain::isolation::LimitsMode;
    assert_eq!(back.limits, LimitsMode::Required);
    let mut loose = back.clone();
    loose.limits = LimitsMode::BestEffort;
    s.update_profile(&loose, back.revision).unwrap();
    assert_eq!(s.profile("linux").unwrap().limits, LimitsMode::BestEffort);
}

#[test]
fn a_seeded_history_follows_the_ids_given_and_names_its_runners_as_the_store_does() {
    let (s, h, _) = seeded();
    let first = s.create_attempt(&new_attempt(&h, "linux"), 1).unwrap();
    s.seed_history(&HistorySeed {
        host_id: &h.id,
        target: "octo",
        profiles: &["linux", "other"],
        n: 5,
        open: 2,
        closed: AttemptState::Destroying,
        base: 10_000,
    })
    .unwrap();
    let all = s.attempts(&AttemptFilter::default()).unwrap();
    assert_eq!(all.len(), 6);
    for a in all.iter().filter(|a| a.id != first.id) {
        let i = a.id - first.id;
        assert_eq!(a.runner_name, crate::domain::runner_name(&h.id, a.id));
        assert_eq!(a.profile, ["linux", "other"][(i % 2) as usize]);
        assert_eq!(a.created_at, 10_000 + i * 1000);
        let open = i > 3;
        assert_eq!(
            a.state,
            if open {
                AttemptState::Busy
            } else {
                AttemptState::Destroying
            }
        );
        assert_eq!(a.cleaned, !open, "attempt {i}");
    }
    let events: i64 = s
        .connection()
        .query_row("SELECT count(*) FROM attempt_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        events,
        1 + 5 * 2,
        "the first attempt's own event and two per seeded one"
    );
    let next = s.create_attempt(&new_attempt(&h, "linux"), 2).unwrap();
    assert_eq!(next.id, first.id + 6, "ids go on after the seeded ones");
}

#[test]
fn each_attempt_holds_the_lowest_free_slot_of_its_target_until_it_is_cleaned() {
    let (s, h, p) = seeded();
    let mut a = s.create_attempt(&new_attempt(&h, &p.name), 1).unwrap();
    let b = s.create_attempt(&new_attempt(&h, &p.name), 2).unwrap();
    assert_eq!((a.slot, b.slot), (Some(0), Some(1)));
    assert!(!a.keeps_work);
    // Slot 0 stays held through the end and is free once cleaned.
    let _ = a.end(crate::domain::Outcome::CompletedJob, None, 3);
    s.save_attempt(&a).unwrap();
    let c = s.create_attempt(&new_attempt(&h, &p.name), 4).unwrap();
    assert_eq!(c.slot, Some(2));
    a.cleaned = true;
    s.save_attempt(&a).unwrap();
    let mut kept = new_attempt(&h, &p.name);
    kept.keeps_work = true;
    let d = s.create_attempt(&kept, 5).unwrap();
    assert_eq!(d.slot, Some(0));
    let back = s.attempt(d.id).unwrap();
    assert_eq!((back.slot, back.keeps_work), (Some(0), true));
}

#[test]
fn a_slot_goes_back_to_the_uid_that_last_held_it_when_free() {
    use super::ledger::choose_slot;
    assert_eq!(choose_slot(&[], None), 0);
    assert_eq!(choose_slot(&[0, 1, 3], None), 2);
    assert_eq!(choose_slot(&[0, 1], Some(4)), 4);
    assert_eq!(choose_slot(&[0, 4], Some(4)), 1);
    let (s, h, p) = seeded();
    let with_uid = |uid: u32| NewAttempt {
        runner_uid: Some(uid),
        runner_gid: Some(uid),
        ..new_attempt(&h, &p.name)
    };
    let mut a = s.create_attempt(&with_uid(61001), 1).unwrap();
    let mut b = s.create_attempt(&with_uid(61002), 2).unwrap();
    assert_eq!((a.slot, b.slot), (Some(0), Some(1)));
    for x in [&mut a, &mut b] {
        let _ = x.end(crate::domain::Outcome::CompletedJob, None, 3);
        x.cleaned = true;
        s.save_attempt(x).unwrap();
    }
    // 61002 takes slot 1 again although 0 is free; a uid new to the target the lowest.
    let c = s.create_attempt(&with_uid(61002), 4).unwrap();
    assert_eq!(c.slot, Some(1));
    let d = s.create_attempt(&with_uid(61009), 5).unwrap();
    assert_eq!(d.slot, Some(0));
}

#[path = "file_tests.rs"]
mod file;

#[test]
fn a_writer_behind_anothers_lock_waits_for_it_and_gives_up_only_past_the_timeout() {
    use std::sync::atomic::Ordering;
    let d = TempDir::new("busy");
    let s = SqliteStore::open(&d.0).unwrap();
    drop(s);
    let holder = rusqlite::Connection::open(d.0.join(super::sqlite::DB_FILE)).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let waits = super::sqlite::LOCK_WAITS.load(Ordering::SeqCst);
    let dir = d.0.clone();
    let writer = std::thread::spawn(move || {
        let s = SqliteStore::open(&dir).unwrap();
        s.kv_put("k", "v")
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    while super::sqlite::LOCK_WAITS.load(Ordering::SeqCst) == waits {
        assert!(
            !writer.is_finished(),
            "the writer waits while the lock is held"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never waited"
        );
        std::thread::yield_now();
    }
    holder.execute_batch("COMMIT").unwrap();
    writer.join().unwrap().unwrap();
    let s = SqliteStore::open(&d.0).unwrap();
    assert_eq!(s.kv_get("k").unwrap().as_deref(), Some("v"));
    // Each try sleeps at least a millisecond: 5,000 of them are the 5 s timeout.
    assert!(super::sqlite::wait_for_lock(0));
    assert!(super::sqlite::wait_for_lock(4_999));
    assert!(!super::sqlite::wait_for_lock(5_000));
    assert!(!super::sqlite::wait_for_lock(i32::MAX));
}
