//! Placement scenarios, one decision each.

use super::*;

const T0: Millis = 1_800_000_000_000;

fn cfg() -> PlacementConfig {
    PlacementConfig {
        ttl_secs: 60,
        refusal_memory_ms: 10_000,
        orphan_grace_ms: 30_000,
        away_grace_ms: 5_000,
        reconcile_interval_secs: None,
    }
}

fn placement() -> Placement {
    placement_keyed([7; 32])
}

/// A coordinator life: each draws its own lease key.
fn placement_keyed(lease_key: [u8; 32]) -> Placement {
    Placement::new(
        cfg(),
        vec![CoordTarget {
            name: "ct".into(),
            scope: "octo/app".into(),
            api_url: "https://api.github.com".into(),
        }],
        lease_key,
    )
}

/// The host's api_url ends in a slash where the coordinator's does not: they match.
fn hello(name: &str, version: u32, capacity: u32, labels: &[&str]) -> Hello {
    let mut h = Hello::fixture(&format!("{name}-id"), name, version, capacity, labels);
    h.targets[0].api_url = "https://api.github.com/".into();
    h
}

const POOL: &[&str] = &["self-hosted", "linux", "rm-pool-linux"];

fn job(id: i64, labels: &[&str]) -> QueuedJob {
    QueuedJob {
        id,
        run_id: 1,
        repo: "octo/app".into(),
        name: format!("j{id}"),
        labels: labels.iter().map(|s| s.to_string()).collect(),
        created_at: T0 + id,
    }
}

fn launches(a: &[Action]) -> Vec<(ConnId, String, String)> {
    a.iter()
        .filter_map(|x| match x {
            Action::Send(c, CoordMsg::Launch(l)) => {
                Some((*c, l.job_key.clone(), l.lease_id.clone()))
            }
            _ => None,
        })
        .collect()
}

fn cancels(a: &[Action]) -> Vec<(ConnId, String)> {
    a.iter()
        .filter_map(|x| match x {
            Action::Send(c, CoordMsg::CancelLaunch { lease_id }) => Some((*c, lease_id.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn hello_ack_covers_matching_targets_and_a_version_2_host_is_never_directed() {
    let mut p = placement();
    let a = p.hello(1, "h1", hello("h1", 3, 2, POOL), T0);
    assert_eq!(
        a[0],
        Action::Send(
            1,
            CoordMsg::HelloAck(HelloAck {
                version: 3,
                reconcile_interval_secs: None,
                covered: vec!["ht".into()],
                ..Default::default()
            })
        )
    );
    let a = p.hello(2, "old", hello("old", 2, 8, POOL), T0);
    assert!(
        matches!(&a[0], Action::Send(2, CoordMsg::HelloAck(h)) if h.version == 2 && h.covered.is_empty())
    );
    let a = p.queue(
        "ct",
        (1..=5).map(|i| job(i, &["self-hosted", "linux"])).collect(),
        T0,
    );
    let l = launches(&a);
    assert_eq!(l.len(), 2, "only h1's two free slots: {a:?}");
    assert!(l.iter().all(|(c, _, _)| *c == 1));
    assert_eq!(
        p.hello(3, "ancient", hello("ancient", 1, 8, POOL), T0),
        vec![Action::Close(3, CloseWhy::UnsupportedVersion(1))]
    );
}

#[test]
fn spread_by_free_capacity_refusal_goes_to_the_next_host() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 3, POOL), T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0);
    let a = p.queue("ct", vec![job(1, &["linux"]), job(2, &["linux"])], T0);
    let l = launches(&a);
    // h1 has 3 free: it gets the first; then h1 has 2 and h2 1: h1 again.
    assert_eq!(l.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 1]);
    let a = p.ack(
        1,
        LaunchAck {
            lease_id: l[0].2.clone(),
            accepted: false,
            reason: Some("host_capacity".into()),
        },
        T0 + 1,
    );
    let again = launches(&a);
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].0, again[0].1.as_str()), (2, "1"));
    assert_ne!(again[0].2, l[0].2, "a new lease id");
    let h1 = &p.hosts()[&1];
    assert_eq!(h1.refusals, 1);
    assert_eq!(
        h1.last_refusal,
        Some(("host_capacity".into(), T0 + 1)),
        "the host's own word is kept for the Pool pane"
    );
}

#[test]
fn jobs_no_pool_profile_fits_are_not_placed() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 3, &["self-hosted", "linux"]), T0);
    p.hello(2, "h2", hello("h2", 3, 3, POOL), T0);
    let a = p.queue("ct", vec![job(1, &["gpu"]), job(2, &["linux"])], T0);
    let l = launches(&a);
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].0, l[0].1.as_str()), (2, "2"));
}

#[test]
fn expiry_cancels_and_replaces_disconnect_replaces_queue_exit_cancels() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    let first = l[0].0;
    let other = 3 - first;
    let a = p.tick(T0 + 60_000);
    assert_eq!(cancels(&a), vec![(first, l[0].2.clone())]);
    let l2 = launches(&a);
    assert_eq!(l2[0].0, other, "placed on the other host");
    assert_eq!(
        p.hosts()[&first].last_refusal,
        Some((super::EXPIRED.into(), T0 + 60_000)),
        "an offer let run out counts as a refusal"
    );
    let a = p.disconnect(other, T0 + 61_000);
    // The first host still is passed over (it let the lease expire), so nothing.
    assert!(launches(&a).is_empty());
    let a = p.tick(T0 + 71_000);
    let l3 = launches(&a);
    assert_eq!(l3[0].0, first);
    let a = p.queue("ct", vec![], T0 + 72_000);
    assert_eq!(cancels(&a), vec![(first, l3[0].2.clone())]);
    assert!(p.jobs().is_empty());
}

#[test]
fn started_closes_the_lease_finished_waits_for_a_fresh_snapshot() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 2, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    p.ack(
        1,
        LaunchAck {
            lease_id: l[0].2.clone(),
            accepted: true,
            reason: None,
        },
        T0,
    );
    p.started(
        1,
        AttemptStarted {
            lease_id: Some(l[0].2.clone()),
            runner_name: "rm-a-1".into(),
            target: "ht".into(),
            profile: "p".into(),
        },
        T0,
    );
    assert_eq!(p.outstanding(1), 0);
    assert!(
        launches(&p.tick(T0 + 600_000)).is_empty(),
        "a started job never expires"
    );
    let fin = AttemptFinished {
        lease_id: Some(l[0].2.clone()),
        runner_name: "rm-a-1".into(),
        outcome: "exited_idle_without_work".into(),
        duration_secs: None,
        usage: None,
    };
    p.finished(1, fin, T0);
    assert!(
        launches(&p.tick(T0 + 1)).is_empty(),
        "held until a fresh snapshot"
    );
    let a = p.queue("ct", vec![job(1, &["linux"])], T0 + 2);
    assert_eq!(launches(&a).len(), 1, "still queued: placed again");
}

fn accept(p: &mut Placement, conn: ConnId, lease: &str, now: Millis) {
    p.ack(
        conn,
        LaunchAck {
            lease_id: lease.into(),
            accepted: true,
            reason: None,
        },
        now,
    );
}

/// A daemon SIGKILLed mid-start comes back in seconds, its runner alive: the job it
/// accepted stays its own meanwhile, and is not given a second runner elsewhere.
#[test]
fn a_launch_accepted_by_a_host_that_goes_away_waits_for_its_return() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    accept(&mut p, 1, &l[0].2, T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0 + 1);
    let a = p.disconnect(1, T0 + 2);
    assert!(launches(&a).is_empty(), "not placed again at once");
    assert!(launches(&p.tick(T0 + 4_000)).is_empty(), "within the grace");
    // h1 returns on a new connection: the lease is leased there, and its report of
    // the runner closes it.
    let a = p.hello(3, "h1", hello("h1", 3, 1, POOL), T0 + 4_500);
    assert!(launches(&a).is_empty());
    assert_eq!(p.outstanding(3), 1);
    p.started(3, started(&l[0].2, "rm-h1-1"), T0 + 4_600);
    assert!(matches!(p.jobs()["1"].state, JobState::Started { .. }));
    assert!(launches(&p.tick(T0 + 60_000)).is_empty());
}

/// A host removed from the pool does not come back: what it accepted is placed again
/// at once, not after the grace a crashed daemon gets.
#[test]
fn a_launch_accepted_by_a_removed_host_is_placed_again_at_once() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    accept(&mut p, 1, &l[0].2, T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0 + 1);
    let again = launches(&p.remove_host(1, T0 + 2));
    assert_eq!(again.len(), 1, "placed again at once");
    assert_eq!((again[0].0, again[0].1.as_str()), (2, "1"));
    assert_ne!(again[0].2, l[0].2);
}

/// A daemon that comes back without the runner its crash cut short says nothing of
/// the lease: it ends within the grace, and the job is placed again.
#[test]
fn a_launch_taken_back_by_a_returning_host_ends_within_the_grace() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    accept(&mut p, 1, &l[0].2, T0);
    p.disconnect(1, T0 + 1);
    p.hello(3, "h1", hello("h1", 3, 1, POOL), T0 + 1_000);
    let a = p.tick(T0 + 1_000 + cfg().away_grace_ms);
    assert_eq!(cancels(&a), vec![(3, l[0].2.clone())]);
    assert!(
        !matches!(p.jobs()["1"].state, JobState::Leased { ref lease_id, .. } if *lease_id == l[0].2),
        "the old lease is closed"
    );
}

#[test]
fn a_launch_accepted_by_a_host_that_does_not_return_is_placed_again_after_the_grace() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    accept(&mut p, 1, &l[0].2, T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0 + 1);
    assert!(launches(&p.disconnect(1, T0 + 2)).is_empty());
    let a = p.tick(T0 + 2 + cfg().away_grace_ms);
    assert_eq!(
        launches(&a).iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![2],
        "placed on the host still here"
    );
}

#[test]
fn a_late_start_for_an_expired_lease_cancels_the_new_one() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    let a = p.tick(T0 + 60_000);
    let l2 = launches(&a);
    let a = p.started(
        l[0].0,
        AttemptStarted {
            lease_id: Some(l[0].2.clone()),
            runner_name: "rm-x-1".into(),
            target: "ht".into(),
            profile: "p".into(),
        },
        T0 + 60_001,
    );
    assert_eq!(cancels(&a), vec![(l2[0].0, l2[0].2.clone())]);
    assert!(matches!(p.jobs()["1"].state, JobState::Started { .. }));
}

#[test]
fn a_started_lease_is_forgotten_and_an_unstarted_one_after_its_late_window() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 2, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"]), job(2, &["linux"])], T0));
    assert_eq!(p.leases_remembered(), 2, "two open leases");
    p.started(1, started(&l[0].2, "rm-a"), T0 + 1);
    assert_eq!(
        p.leases_remembered(),
        1,
        "the started lease is forgotten at once"
    );
    // A second start naming the same lease changes nothing.
    assert!(p.started(1, started(&l[0].2, "rm-b"), T0 + 2).is_empty());
    assert!(
        matches!(&p.jobs()["1"].state, JobState::Started { runner_name, .. } if runner_name == "rm-a")
    );
    // Job 2's lease expires unstarted (60 s) and its job is placed again once h1's
    // refusal is forgotten; the old lease is still matched by a start that comes late,
    // within LATE_START_MS, and the new lease is cancelled.
    p.tick(T0 + 60_000);
    let late = T0 + 60_000 + LATE_START_MS - 1;
    let again = launches(&p.tick(late));
    assert_eq!(again.len(), 1, "job 2 is placed again");
    let a = p.started(1, started(&l[1].2, "rm-late"), late);
    assert_eq!(cancels(&a), vec![(1, again[0].2.clone())]);
    assert!(
        matches!(&p.jobs()["2"].state, JobState::Started { runner_name, .. } if runner_name == "rm-late")
    );
    // A lease closed unstarted is forgotten once its window is over; open ones never.
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    let again = launches(&p.tick(T0 + 60_000));
    assert_eq!(again.len(), 1, "placed again on the other host");
    assert_eq!(p.leases_remembered(), 2);
    // At the old lease's forget_at only it goes; the new one is open.
    let forget_at = T0 + 60_000 + LATE_START_MS;
    p.forget_leases(forget_at);
    assert_eq!(p.leases_remembered(), 1, "the open lease is kept");
    assert!(
        p.started(l[0].0, started(&l[0].2, "rm-too-late"), forget_at)
            .is_empty()
    );
    assert!(
        matches!(p.jobs()["1"].state, JobState::Leased { .. }),
        "a forgotten lease names nothing"
    );
    // A lease whose job left the queue is forgotten at the next tick, window or not.
    p.queue("ct", vec![], forget_at + 1);
    p.tick(forget_at + 2);
    assert_eq!(p.leases_remembered(), 0);
}

#[test]
fn a_reconnecting_host_replaces_its_stale_connection() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    assert_eq!(l[0].0, 1);
    let a = p.hello(5, "h1", hello("h1", 3, 1, POOL), T0 + 1);
    assert!(a.contains(&Action::Close(1, CloseWhy::Replaced)));
    assert_eq!(
        launches(&a).iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![5]
    );
}

#[test]
fn draining_and_unfit_hosts_get_nothing() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 4, POOL), T0);
    p.status(
        1,
        Status {
            free: 4,
            draining: true,
            unfit: vec![],
            meters: Default::default(),
            ..Default::default()
        },
        T0,
    );
    assert!(launches(&p.queue("ct", vec![job(1, &["linux"])], T0)).is_empty());
    assert!(
        launches(&p.status(
            1,
            Status {
                free: 4,
                draining: false,
                unfit: vec!["p".into()],
                meters: Default::default(),
                ..Default::default()
            },
            T0
        ))
        .is_empty()
    );
    assert_eq!(
        launches(&p.status(
            1,
            Status {
                free: 4,
                draining: false,
                unfit: vec![],
                meters: Default::default(),
                ..Default::default()
            },
            T0
        ))
        .len(),
        1
    );
}

fn started(lease: &str, runner: &str) -> AttemptStarted {
    AttemptStarted {
        lease_id: Some(lease.into()),
        runner_name: runner.into(),
        target: "ht".into(),
        profile: "p".into(),
    }
}

fn took(job: i64, runner: &str) -> Taken {
    Taken {
        job_key: job.to_string(),
        runner_name: runner.into(),
    }
}

/// Two jobs, two hosts (h2's profile also has `big`), one launch each: returns the
/// (conn, job, lease) of each.
fn two_leased(p: &mut Placement, second_labels: &[&str]) -> Vec<(ConnId, String, String)> {
    let big: Vec<&str> = POOL.iter().copied().chain(["big"]).collect();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    p.hello(2, "h2", hello("h2", 3, 1, &big), T0);
    let mut l = launches(&p.queue("ct", vec![job(1, &["linux"]), job(2, second_labels)], T0));
    l.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(l.len(), 2);
    l
}

#[test]
fn a_runner_that_took_another_job_moves_that_jobs_lease_to_its_own() {
    let mut p = placement();
    let l = two_leased(&mut p, &["linux"]);
    // Job 1's runner starts and takes job 2, whose own launch has not started yet.
    assert!(p.started(l[0].0, started(&l[0].2, "r1"), T0 + 1).is_empty());
    let a = p.snapshot(
        "ct",
        vec![job(1, &["linux"])],
        &[took(2, "r1")],
        T0 + 2,
        T0 + 2,
    );
    assert!(a.is_empty(), "no cancel, no new launch: {a:?}");
    assert!(
        matches!(&p.jobs()["1"].state, JobState::Leased { lease_id, .. } if *lease_id == l[1].2),
        "job 1 now waits on job 2's launch: {:?}",
        p.jobs()["1"].state
    );
    // That launch's runner serves job 1.
    assert!(p.started(l[1].0, started(&l[1].2, "r2"), T0 + 3).is_empty());
    assert!(
        matches!(&p.jobs()["1"].state, JobState::Started { runner_name, .. } if runner_name == "r2")
    );
    // A runner that took its own job changes nothing.
    let a = p.snapshot("ct", vec![], &[took(1, "r2")], T0 + 4, T0 + 4);
    assert!(a.is_empty() && p.jobs().is_empty(), "{a:?}");
}

#[test]
fn a_taken_jobs_lease_is_cancelled_when_its_taker_is_not_known() {
    let mut p = placement();
    let l = two_leased(&mut p, &["linux"]);
    // A runner no lease reported (a host's own, or one started before this
    // coordinator) took job 2: its launch is cancelled, job 1's stays.
    let a = p.snapshot(
        "ct",
        vec![job(1, &["linux"])],
        &[took(2, "rm-other-7")],
        T0 + 1,
        T0 + 1,
    );
    assert_eq!(cancels(&a), vec![(l[1].0, l[1].2.clone())]);
    assert!(launches(&a).is_empty());
    assert!(
        matches!(&p.jobs()["1"].state, JobState::Leased { lease_id, .. } if *lease_id == l[0].2)
    );
}

#[test]
fn a_lease_is_not_moved_to_a_job_with_other_labels() {
    let mut p = placement();
    let l = two_leased(&mut p, &["linux", "big"]);
    assert!(p.started(l[0].0, started(&l[0].2, "r1"), T0 + 1).is_empty());
    let a = p.snapshot(
        "ct",
        vec![job(1, &["linux"])],
        &[took(2, "r1")],
        T0 + 2,
        T0 + 2,
    );
    // Job 2's launch may be for a profile job 1 does not fit: cancelled, and job 1
    // is placed again instead of waiting for r1 to finish.
    assert_eq!(cancels(&a), vec![(l[1].0, l[1].2.clone())]);
    assert_eq!(p.jobs()["1"].state.phase(), Phase::Offered);
}

#[test]
fn lease_ids_are_128_bits_from_the_callers_key() {
    let run = |key| {
        let mut p = placement_keyed(key);
        p.hello(1, "h1", hello("h1", 3, 4, POOL), T0);
        launches(&p.queue("ct", vec![job(1, &["linux"]), job(2, &["linux"])], T0))
    };
    let l = run([7; 32]);
    assert_eq!(l.len(), 2);
    for (_, _, id) in &l {
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    assert_ne!(l[0].2, l[1].2);
    // Pure: the same key places the same; a restart's new key gives new ids.
    assert_eq!(run([7; 32]), l);
    let other = run([8; 32]);
    assert!(other.iter().all(|(_, _, id)| l.iter().all(|x| x.2 != *id)));
}

#[test]
fn a_lease_named_by_another_host_changes_nothing() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 4, POOL), T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    assert_eq!(l[0].0, 1, "h1 has the most free");
    let before = p.jobs()["1"].state.clone();
    // h2 names h1's lease in every frame that carries one.
    let a = p.started(2, started(&l[0].2, "rm-h2-1"), T0 + 1);
    assert!(a.is_empty(), "{a:?}");
    let fin = AttemptFinished {
        lease_id: Some(l[0].2.clone()),
        runner_name: "rm-h2-1".into(),
        outcome: "completed_job".into(),
        duration_secs: None,
        usage: None,
    };
    assert!(p.finished(2, fin, T0 + 2).is_empty());
    let refuse = LaunchAck {
        lease_id: l[0].2.clone(),
        accepted: false,
        reason: Some("other".into()),
    };
    assert!(p.ack(2, refuse, T0 + 3).is_empty());
    assert_eq!(p.jobs()["1"].state, before);
    assert_eq!(p.hosts()[&2].started, 0);
    // h1's own report still closes it.
    p.started(1, started(&l[0].2, "rm-h1-1"), T0 + 4);
    assert!(
        matches!(&p.jobs()["1"].state, JobState::Started { host, .. } if host == "h1"),
        "{:?}",
        p.jobs()["1"].state
    );
}

/// A coordinator killed and started again: what the first placed is taken up from
/// its book, and what the second sees first is the hosts saying hello again.
fn restarted(p: &Placement, now: Millis) -> Placement {
    let mut q = placement_keyed([8; 32]);
    q.restore(&p.book_rows(now), now);
    q
}

#[test]
fn a_restarted_coordinator_does_not_place_again_a_job_its_last_life_leased() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    p.hello(2, "h2", hello("h2", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    assert_eq!(l.len(), 1);
    // Killed before the host's ack arrived: the offer may have been accepted.
    let mut q = restarted(&p, T0 + 100);
    let mut a = q.hello(3, "h2", hello("h2", 3, 1, POOL), T0 + 200);
    a.extend(q.queue("ct", vec![job(1, &["linux"])], T0 + 300));
    a.extend(q.hello(4, "h1", hello("h1", 3, 1, POOL), T0 + 400));
    assert!(
        launches(&a).is_empty(),
        "not placed beside its lease: {a:?}"
    );
    // The host that had it returns: the lease is its own again, on its new
    // connection, and a start it reports closes it.
    let host = &l[0].0;
    let conn = if *host == 1 { 4 } else { 3 };
    assert_eq!(q.outstanding(conn), 1);
    let a = q.started(conn, started(&l[0].2, "rm-x-1"), T0 + 500);
    assert!(cancels(&a).is_empty());
    assert!(matches!(q.jobs()["1"].state, JobState::Started { .. }));
    assert!(launches(&q.tick(T0 + 120_000)).is_empty());
}

#[test]
fn a_restored_lease_whose_runner_never_came_is_placed_again_after_the_grace() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    accept(&mut p, 1, &l[0].2, T0);
    let mut q = restarted(&p, T0 + 100);
    q.hello(2, "h2", hello("h2", 3, 1, POOL), T0 + 200);
    assert!(launches(&q.queue("ct", vec![job(1, &["linux"])], T0 + 300)).is_empty());
    let a = q.tick(T0 + 100 + cfg().away_grace_ms);
    assert_eq!(
        launches(&a).iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![2],
        "h1 never came back: placed on the host that is here"
    );
}

#[test]
fn a_restored_runner_serves_its_job_and_a_job_gone_from_the_queue_is_forgotten() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 2, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"]), job(2, &["linux"])], T0));
    for x in &l {
        accept(&mut p, 1, &x.2, T0);
    }
    p.started(1, started(&l[0].2, "rm-h1-1"), T0 + 10);
    let mut q = restarted(&p, T0 + 100);
    assert!(matches!(q.jobs()["1"].state, JobState::Started { .. }));
    q.hello(2, "h1", hello("h1", 3, 2, POOL), T0 + 200);
    // Job 2's runner took it while no coordinator ran: it leaves with the snapshot.
    let a = q.queue("ct", vec![job(1, &["linux"])], T0 + 300);
    assert!(launches(&a).is_empty());
    assert!(!q.jobs().contains_key("2"));
    // The started runner's host is back: past the orphan grace it still serves.
    assert!(launches(&q.tick(T0 + 100 + cfg().orphan_grace_ms + 1)).is_empty());
}

#[test]
fn a_restored_book_drops_targets_no_longer_served() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 1, POOL), T0);
    p.queue("ct", vec![job(1, &["linux"])], T0);
    let mut rows = p.book_rows(T0);
    rows[0].target = "gone".into();
    let mut q = placement();
    q.restore(&rows, T0);
    assert!(q.jobs().is_empty());
}

/// A read that began before the runner finished may list the job a runner took
/// meanwhile: only a read begun after the hold places it again.
#[test]
fn a_held_job_waits_for_a_read_begun_after_its_runner_finished() {
    let mut p = placement();
    p.hello(1, "h1", hello("h1", 3, 2, POOL), T0);
    let l = launches(&p.queue("ct", vec![job(1, &["linux"])], T0));
    accept(&mut p, 1, &l[0].2, T0);
    p.started(1, started(&l[0].2, "rm-h1-1"), T0 + 10);
    p.finished(
        1,
        AttemptFinished {
            lease_id: Some(l[0].2.clone()),
            runner_name: "rm-h1-1".into(),
            outcome: "completed_job".into(),
            duration_secs: None,
            usage: None,
        },
        T0 + 1_000,
    );
    let stale = p.snapshot("ct", vec![job(1, &["linux"])], &[], T0 + 900, T0 + 1_100);
    assert!(
        launches(&stale).is_empty(),
        "read before the hold: {stale:?}"
    );
    assert_eq!(p.jobs()["1"].state.phase(), Phase::Held);
    let fresh = p.snapshot("ct", vec![job(1, &["linux"])], &[], T0 + 1_200, T0 + 1_300);
    assert_eq!(
        launches(&fresh).len(),
        1,
        "still queued after the hold: placed again"
    );
}

/// Issue 50, item 2: the hosts share one credential, so their launches together stay
/// within its JIT points a minute (a host's report names its target's limit), and a
/// `retry-after` one host met pauses every host's launches until it passes.
#[test]
fn the_pools_launches_stay_within_the_credentials_points_and_a_retry_after_pauses_them_all() {
    use super::protocol::LimitReport;
    let mut p = placement();
    let limit = |held_until: Millis| Status {
        free: 10,
        limits: vec![LimitReport {
            target: "ht".into(),
            held_until,
            points_limit: Some(60),
            ..LimitReport::default()
        }],
        ..Default::default()
    };
    for (c, h) in [(1, "h1"), (2, "h2"), (3, "h3")] {
        p.hello(c, h, hello(h, 3, 10, POOL), T0);
        p.status(c, limit(0), T0);
    }
    let jobs: Vec<QueuedJob> = (1..=15).map(|i| job(i, &["linux"])).collect();
    let first = launches(&p.queue("ct", jobs.clone(), T0));
    // 60 points less a thirtieth: 58, 11 JIT configs of 5 points, across all hosts.
    assert_eq!(first.len(), 11, "{first:?}");
    let hosts: BTreeSet<ConnId> = first.iter().map(|l| l.0).collect();
    assert_eq!(hosts.len(), 3, "spread over the hosts");
    assert_eq!(
        p.credit_wait("ct", T0),
        Some(credit::Wait::Points(T0 + crate::reconcile::points::WINDOW))
    );
    // Each runner starts at once: a window after, the rest is placed.
    for (c, _, lease) in &first {
        p.started(
            *c,
            AttemptStarted {
                lease_id: Some(lease.clone()),
                runner_name: format!("r-{lease}"),
                target: "ht".into(),
                profile: "p".into(),
            },
            T0,
        );
    }
    assert!(launches(&p.tick(T0 + 59_000)).is_empty());
    // But host 2 met a retry-after meanwhile: nobody gets a launch until it passes.
    p.status(2, limit(T0 + 90_000), T0 + 59_500);
    assert!(launches(&p.tick(T0 + 60_000)).is_empty());
    assert_eq!(
        p.credit_wait("ct", T0 + 60_000),
        Some(credit::Wait::Held(T0 + 90_000))
    );
    assert_eq!(launches(&p.tick(T0 + 90_000)).len(), 4);
}
