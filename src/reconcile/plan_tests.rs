//! The pass's plan, scenario by scenario: starts, watching, rate limits, uids and orphans.

use super::*;
use crate::domain::Outcome;

const HOST: &str = "0123abcd89ef4567";

fn host(capacity: u32) -> Host {
    Host::new(HOST.into(), "h".into(), "linux", "x86_64", capacity)
}

fn profile(name: &str, max: u32) -> ScalePolicy {
    let mut p = ScalePolicy::new(name, "t", HOST);
    p.labels = vec!["self-hosted".into(), name.into()];
    p.max_capacity = max;
    p
}

fn job(id: i64, label: &str, at: Millis) -> QueuedJob {
    QueuedJob {
        id,
        run_id: id,
        repo: "o/r".into(),
        name: format!("j{id}"),
        labels: vec!["self-hosted".into(), label.into()],
        created_at: at,
    }
}

struct Fixture {
    host: Host,
    profiles: Vec<ScalePolicy>,
    open: Vec<Attempt>,
    seen: BTreeMap<i64, Seen>,
    in_flight: BTreeSet<i64>,
    jobs: Vec<QueuedJob>,
    unfit: BTreeMap<String, Unfit>,
    uids: Option<Vec<(u32, u32)>>,
    surplus: HashSet<i64>,
    scaleset: BTreeMap<String, ScaleSetSeen>,
    scaleset_queued: BTreeMap<String, Vec<Millis>>,
    /// The host drains or the daemon stops (`Observed::draining`).
    draining: bool,
    rate_limited_until: Option<Millis>,
    credentials_refused_since: Option<Millis>,
    jit_room: Option<crate::reconcile::points::Room>,
    runners: Option<Vec<RegisteredRunner>>,
}

impl Fixture {
    fn new(capacity: u32, profiles: Vec<ScalePolicy>) -> Fixture {
        Fixture {
            host: host(capacity),
            profiles,
            open: Vec::new(),
            seen: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            jobs: Vec::new(),
            unfit: BTreeMap::new(),
            uids: None,
            surplus: HashSet::new(),
            scaleset: BTreeMap::new(),
            scaleset_queued: BTreeMap::new(),
            draining: false,
            rate_limited_until: None,
            credentials_refused_since: None,
            jit_room: None,
            runners: None,
        }
    }

    fn plan(&self, now: Millis) -> Plan {
        self.plan_on(&mut LaunchBook::new(), now)
    }

    fn plan_on(&self, book: &mut LaunchBook, now: Millis) -> Plan {
        let o = Observed {
            target: "t",
            host: &self.host,
            profiles: &self.profiles,
            open: &self.open,
            seen: &self.seen,
            in_flight: &self.in_flight,
            mode: TargetMode::Standalone,
            draining: self.draining,
            jobs: &self.jobs,
            queue_read_at: 0,
            ended_since_read: &[],
            scaleset: &self.scaleset,
            scaleset_queued: &self.scaleset_queued,
            unfit: &self.unfit,
            can_start: true,
            rate_limited_until: self.rate_limited_until,
            credentials_refused_since: self.credentials_refused_since,
            jit_room: self.jit_room,
            free_uids: self.uids.as_deref(),
            surplus: &self.surplus,
            runners: self.runners.as_deref(),
        };
        plan(&o, book, now)
    }
}

#[test]
fn a_start_a_worker_holds_keeps_its_job_until_the_worker_reports() {
    let mut f = Fixture::new(4, vec![profile("linux", 2)]);
    f.jobs = vec![job(1, "linux", 0)];
    let mut a = Attempt::new(7, "linux", "t", HOST, 0);
    a.end(Outcome::Failed, None, 500).unwrap();
    f.open = vec![a];
    f.in_flight = BTreeSet::from([7]);
    // The worker wrote the failure; the loop has not heard: no second runner.
    assert!(f.plan(1_000).intents.is_empty());
    // Once it has, the job is served again (unless a hold says otherwise).
    f.in_flight.clear();
    assert_eq!(f.plan(1_000).intents.len(), 1);
}

#[test]
fn registrations_no_open_attempt_explains_are_orphans_and_others_never() {
    let mut f = Fixture::new(4, vec![profile("linux", 2)]);
    let mut live = Attempt::new(7, "linux", "t", HOST, 0);
    live.runner_name = crate::domain::runner_name(HOST, 7);
    f.open = vec![live];
    let reg = |id: i64, name: String| RegisteredRunner {
        id,
        name,
        online: true,
        busy: false,
        labels: Vec::new(),
    };
    assert!(
        f.plan(1_000).orphans.is_empty(),
        "no list read: nothing judged"
    );
    f.runners = Some(vec![
        reg(1, crate::domain::runner_name(HOST, 7)),
        reg(2, crate::domain::runner_name(HOST, 8)),
        reg(3, crate::domain::runner_name("ffffeeeeddddcccc", 9)),
        reg(4, "build-box".into()),
    ]);
    let orphans: Vec<i64> = f.plan(1_000).orphans.iter().map(|r| r.id).collect();
    assert_eq!(orphans, vec![2], "only ours, and only unexplained");
}

#[test]
fn starts_beyond_the_jit_points_wait_oldest_job_first_and_the_profiles_say_so() {
    use crate::reconcile::points::Room;
    let mut scaleset = profile("big", 5);
    scaleset.demand = DemandSource::Scaleset;
    let mut f = Fixture::new(20, vec![profile("linux", 5), profile("arm", 5), scaleset]);
    // arm's two jobs are the oldest, then linux's three.
    f.jobs = vec![
        job(1, "linux", 300),
        job(2, "linux", 400),
        job(3, "arm", 100),
        job(4, "linux", 500),
        job(5, "arm", 200),
    ];
    f.scaleset.insert(
        "big".into(),
        ScaleSetSeen {
            assigned: 2,
            running: 0,
        },
    );
    let next = 61_000;
    f.jit_room = Some(Room {
        fits: 3,
        next_at: next,
    });
    let p = f.plan(1_000);
    let by = |name: &str| p.intents.iter().filter(|i| i.profile == name).count();
    // Both of arm's and linux's oldest; the scale set's two never wait.
    assert_eq!((by("arm"), by("linux"), by("big")), (2, 1, 2));
    let linux = p.allocation.get("linux").unwrap();
    assert_eq!(linux.limit, Limit::Paced { waiting: 2, next });
    assert_eq!(linux.to_start, 1);
    assert_eq!(p.allocation.get("arm").unwrap().limit, Limit::Demand);
    assert_eq!(
        linux.limit.to_string(),
        "paced: 2 starts wait for GitHub's per-minute limit (next at 1970-01-01T00:01:01Z)"
    );
    // No room at all: every REST start waits; room enough: nothing is paced.
    f.jit_room = Some(Room {
        fits: 0,
        next_at: next,
    });
    assert_eq!(f.plan(1_000).intents.len(), 2);
    f.jit_room = Some(Room {
        fits: 5,
        next_at: next,
    });
    let p = f.plan(1_000);
    assert_eq!(p.intents.len(), 7);
    assert!(
        p.allocation
            .profiles
            .iter()
            .all(|pa| !matches!(pa.limit, Limit::Paced { .. }))
    );
}

#[test]
fn a_rate_limited_target_says_so_and_starts_nothing() {
    let mut paused = profile("gpu", 2);
    paused.active = false;
    let mut f = Fixture::new(10, vec![profile("linux", 1), paused]);
    f.jobs = (1..=3).map(|i| job(i, "linux", 0)).collect();
    // Without the limit, the profile's ceiling is what stops it.
    let free = f.plan(1_000);
    assert_eq!(
        free.allocation.get("linux").unwrap().limit,
        Limit::MaxCapacity
    );
    assert_eq!(free.intents.len(), 1);
    // Held until 61.2 s: limited by the rate limit, to the second it ends.
    f.rate_limited_until = Some(61_200);
    let held = f.plan(1_000);
    let linux = held.allocation.get("linux").unwrap();
    assert_eq!(linux.limit, Limit::RateLimited(62_000));
    assert_eq!((linux.to_start, held.intents.len()), (0, 0));
    assert_eq!(
        held.allocation.get("gpu").unwrap().limit,
        Limit::NotReconciling(NotReconciling::Paused),
        "a profile that would not start anyway keeps its own reason"
    );
    // A visibility the limit kept from being read is the limit's doing too.
    f.unfit.insert("linux".into(), Unfit::RepoNotYetKnown);
    let held = f.plan(1_000);
    assert_eq!(
        held.allocation.get("linux").unwrap().limit,
        Limit::RateLimited(62_000)
    );
    f.unfit.clear();
    // A hold that has ended limits nothing.
    assert_eq!(f.plan(61_200).intents.len(), 1);
}

#[test]
fn a_refused_credential_says_so_never_rate_limited_and_starts_nothing() {
    let mut f = Fixture::new(10, vec![profile("linux", 1)]);
    f.jobs = (1..=3).map(|i| job(i, "linux", 0)).collect();
    f.credentials_refused_since = Some(1_500);
    // Past its backoff too: refused until a call goes through or the token changes.
    let held = f.plan(600_000);
    let linux = held.allocation.get("linux").unwrap();
    assert_eq!(linux.limit, Limit::CredentialsRefused(1_000));
    assert_eq!((linux.to_start, held.intents.len()), (0, 0));
    assert!(
        linux
            .limit
            .to_string()
            .starts_with("credentials_refused (401 since ")
    );
    // A rate limit GitHub set meanwhile is the nearer word: it says when.
    f.rate_limited_until = Some(700_000);
    assert_eq!(
        f.plan(600_000).allocation.get("linux").unwrap().limit,
        Limit::RateLimited(700_000)
    );
}

fn attempt(id: i64, profile: &str, state: AttemptState) -> Attempt {
    let mut a = Attempt::new(id, profile, "t", HOST, 0);
    if state != AttemptState::Pending {
        a.recover(state, 0).unwrap();
    }
    a
}

#[test]
fn a_stopping_daemon_says_so_and_a_draining_host_says_draining() {
    let mut f = Fixture::new(8, vec![profile("linux", 3)]);
    f.jobs = vec![job(1, "linux", 0)];
    f.draining = true;
    let limit = |f: &Fixture| f.plan(1_000).allocation.profiles[0].limit.to_string();
    assert_eq!(limit(&f), "not_reconciling (daemon stopping)");
    f.host.draining = true;
    assert_eq!(limit(&f), "not_reconciling (draining)");
}

#[test]
fn starts_one_runner_per_queued_job_oldest_first_with_uids() {
    let mut f = Fixture::new(8, vec![profile("linux", 3)]);
    f.jobs = vec![
        job(1, "linux", 300),
        job(2, "linux", 100),
        job(3, "linux", 200),
    ];
    f.uids = Some(vec![(61000, 61000), (61001, 61001), (61002, 61002)]);
    let p = f.plan(1_000);
    type Got = (Option<Millis>, Option<(u32, u32)>);
    let got: Vec<Got> = p
        .intents
        .iter()
        .map(|i| (i.queued_at, i.runner_ids))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(100), Some((61000, 61000))),
            (Some(200), Some((61001, 61001))),
            (Some(300), Some((61002, 61002)))
        ]
    );
    // One uid short: the rest wait, and the plan says why.
    f.uids = Some(vec![(61000, 61000)]);
    let p = f.plan(1_000);
    assert_eq!(p.intents.len(), 1);
    assert!(p.uids_used_up.unwrap().contains("runner_uids"));
}

#[test]
fn an_attempt_in_flight_is_not_watched_but_counts_toward_capacity() {
    let mut f = Fixture::new(8, vec![profile("linux", 2)]);
    f.jobs = vec![job(1, "linux", 0), job(2, "linux", 0)];
    // A start on a worker: pending, no pid yet. Watched, it would be orphaned.
    f.open = vec![attempt(5, "linux", AttemptState::Pending)];
    f.in_flight.insert(5);
    let p = f.plan(1_000);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.intents.len(), 1, "one more for the second job, not two");
    // Out of flight with no process, the same attempt is what a crash left.
    f.in_flight.clear();
    let p = f.plan(1_000);
    assert!(matches!(
        p.actions[0].1[0],
        Action::Transition {
            outcome: Some(Outcome::Orphaned),
            ..
        }
    ));
}

#[test]
fn unfit_profiles_and_a_held_target_start_nothing() {
    let mut f = Fixture::new(8, vec![profile("linux", 2)]);
    f.jobs = vec![job(1, "linux", 0)];
    f.unfit.insert(
        "linux".into(),
        Unfit::Held("starts held 30s after a host failure".into()),
    );
    let p = f.plan(1_000);
    assert!(p.intents.is_empty());
    assert!(
        p.allocation.profiles[0]
            .limit
            .to_string()
            .contains("starts held")
    );
}

#[test]
fn scale_set_demand_counts_assigned_jobs_not_yet_running() {
    let mut f = Fixture::new(8, vec![profile("ss", 4)]);
    f.profiles[0].demand = DemandSource::Scaleset;
    f.scaleset.insert(
        "ss".into(),
        ScaleSetSeen {
            assigned: 3,
            running: 1,
        },
    );
    f.scaleset_queued.insert("ss".into(), vec![10, 20]);
    f.open = vec![attempt(1, "ss", AttemptState::Busy)];
    let p = f.plan(1_000);
    let got: Vec<Option<Millis>> = p.intents.iter().map(|i| i.queued_at).collect();
    assert_eq!(got, vec![Some(10), Some(20)]);
    assert_eq!(
        queued_from(
            ScaleSetSeen {
                assigned: 3,
                running: 1
            },
            2
        ),
        1
    );
}

#[test]
fn queued_is_assigned_minus_the_larger_running_count() {
    let s = |assigned, running| ScaleSetSeen { assigned, running };
    assert_eq!(queued_from(s(3, 0), 0), 3);
    // A runner took a job and we saw it before the service's message came.
    assert_eq!(queued_from(s(3, 0), 1), 2);
    // Our runner finished before the JobCompleted message: the service's count holds.
    assert_eq!(queued_from(s(3, 1), 0), 2);
    assert_eq!(queued_from(s(1, 1), 2), 0);
}

#[test]
fn rest_demand_only_where_a_profile_polls() {
    let mut a = ScalePolicy::new("a", "t", "h");
    assert!(needs_rest_demand(&[]));
    a.demand = DemandSource::Scaleset;
    assert!(!needs_rest_demand(std::slice::from_ref(&a)));
    let b = ScalePolicy::new("b", "t", "h");
    assert!(needs_rest_demand(&[a.clone(), b]));
    let job = |labels: &[&str]| QueuedJob {
        id: 1,
        run_id: 1,
        repo: "o/r".into(),
        name: "j".into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        created_at: 0,
    };
    let jobs = [job(&["A"]), job(&["self-hosted", "a"])];
    assert_eq!(rest_jobs(&jobs, &[a]).len(), 1);
}

#[test]
fn actions_split_where_a_worker_takes_over() {
    let acts = vec![
        Action::Transition {
            to: AttemptState::Finished,
            outcome: Some(Outcome::CompletedJob),
            reason: None,
        },
        Action::Cleanup,
        Action::MarkCleaned,
    ];
    let (head, tail) = split_at_io(acts);
    assert_eq!(head.len(), 1);
    assert_eq!(tail, vec![Action::Cleanup, Action::MarkCleaned]);
    let (head, tail) = split_at_io(vec![Action::Kill]);
    assert_eq!((head.len(), tail.len()), (1, 0));
}

#[test]
fn a_runner_a_worker_removes_serves_no_job_and_holds_its_slot() {
    let mut f = Fixture::new(2, vec![profile("linux", 2)]);
    f.jobs = vec![job(1, "linux", 0)];
    f.open = vec![attempt(5, "linux", AttemptState::Idle)];
    f.in_flight.insert(5);
    let mut book = LaunchBook::new();
    // Its idle timeout's DELETE on a worker: the store still says idle.
    book.leaving(5);
    let p = f.plan_on(&mut book, 1_000);
    assert_eq!(p.intents.len(), 1, "the job gets a runner of its own");
    assert_eq!(
        p.allocation.profiles[0].live, 1,
        "the leaving runner holds its slot"
    );
    // Ended by its worker (destroying, not yet cleaned): still not a runner to count
    // on, not even as a start the worker holds.
    let mut ended = attempt(5, "linux", AttemptState::Idle);
    ended.end(Outcome::CompletedJob, None, 900).unwrap();
    ended.recover(AttemptState::Destroying, 950).unwrap();
    f.open = vec![ended];
    let p = f.plan_on(&mut book, 1_000);
    assert_eq!(p.intents.len(), 1);
    assert_eq!(p.allocation.profiles[0].live, 0);
    // Without the book's word, the same idle runner serves the job.
    f.open = vec![attempt(5, "linux", AttemptState::Idle)];
    book.left(5);
    assert!(f.plan_on(&mut book, 1_000).intents.is_empty());
}

#[test]
fn a_pass_plans_from_its_own_gathered_attempts_and_the_others_read_under_the_lock() {
    let mine_then = attempt(2, "linux", AttemptState::Idle);
    let mut mine_now = mine_then.clone();
    mine_now.recover(AttemptState::Busy, 10).unwrap();
    let mut theirs = Attempt::new(3, "gpu", "other", HOST, 0);
    theirs.recover(AttemptState::Starting, 5).unwrap();
    let theirs_then = Attempt::new(1, "gpu", "other", HOST, 0);
    let view = host_view(
        &[theirs_then, mine_then.clone()],
        vec![mine_now, theirs.clone()],
        "t",
    );
    // Ours as gathered (what `seen` was taken with), theirs as read now, by id.
    assert_eq!(view, vec![mine_then, theirs]);
}
