//! Placement (pure): the coordinator's book of queued jobs and connected hosts, and
//! the decision of which host gets a launch for which job. Every method takes `now`
//! (the coordinator's clock) and returns the frames to send; the server does the I/O,
//! and draws the key lease ids come from (`lease_ids`). `place` places, `book` is the
//! book as the store keeps it and a restart takes it up.
//!
//! One job is in exactly one phase ([`JobState`]; its word is `domain::job_phase::Phase`),
//! so it never has two open leases:
//! `Waiting` (no lease) → `Leased` (a launch sent to one host) → `Started` (the host
//! reported a runner for the lease: the lease is closed) → `Held` (that runner
//! finished while the job still looked queued: wait for a fresh queue snapshot before
//! placing it again, so a job the runner did take is not placed twice). A refusal or
//! an expiry sends the job back to `Waiting` and keeps that host away from it for a
//! while; a host's disconnect sends its leased jobs back at once; a job that leaves
//! the queue is cancelled where it is leased and forgotten.
//!
//! Runners take any job their labels fit, so the runner started for job A may take job
//! B. Where the demand source names the runner that took a job (the scale set's
//! `JobStarted` does), A takes over B's phase: B's lease is moved to A rather than
//! cancelled, and A does not wait for its supposed runner to finish.

use super::protocol::{
    self, AttemptFinished, AttemptStarted, CoordMsg, Hello, HelloAck, LaunchAck, ProfileMeters,
    Status,
};
use crate::domain::QueuedJob;
use crate::domain::job_phase::Phase;
use crate::timefmt::Millis;
use std::collections::{BTreeMap, BTreeSet};

mod book;
pub mod credit;
mod lease_ids;
mod place;

pub use lease_ids::LeaseIds;

/// One connection; a host that reconnects gets a new one.
pub type ConnId = u64;

/// The connection of a lease taken up from the store by a restarted coordinator,
/// until its host says hello: connections are numbered from 1.
pub const NO_CONN: ConnId = 0;

/// At most this many lease ids are remembered after their lease closed unstarted (a
/// backstop: [`LATE_START_MS`] bounds them first).
const LEASE_MEMORY: usize = 65_536;

/// How long after its expiry a lease that closed without a runner (expired, refused,
/// cancelled) is still matched to its job, for an `attempt_started` that comes late (a
/// host's clock, a runner slow to start, a link down for a while). A lease whose runner
/// started is forgotten at once: nothing may name it again. Before this, every lease
/// was kept until 65,536 more had been issued, and a coordinator's RSS grew by about
/// 300 bytes a job for its first 65,536 jobs.
const LATE_START_MS: Millis = 600_000;

/// A host's last refusal when it let an offer run out rather than answer it (counted
/// among its refusals: either way the job goes to another host).
pub const EXPIRED: &str = "expired";

/// A lease as remembered: its job and the host it was issued to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LeaseOf {
    job: String,
    /// The name the host's token was added under.
    host: String,
    /// When it may be forgotten once closed: its expiry and [`LATE_START_MS`].
    forget_at: Millis,
}

/// A runner seen taking a job, as the demand source reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The job's key (`job_key`).
    pub job_key: String,
    pub runner_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementConfig {
    /// A launch's time to live.
    pub ttl_secs: u64,
    /// How long a host that refused (or let expire) a job is passed over for it.
    pub refusal_memory_ms: Millis,
    /// How long a disconnected host's started runners still count as serving their
    /// jobs (the host may come back, its runners live on without the daemon).
    pub orphan_grace_ms: Millis,
    /// How long a launch a disconnected host accepted stays its own (at most to the
    /// lease's expiry): a daemon that crashed mid-start is back in seconds, and its
    /// runner, already asked for or running, serves the job. Placing the job again at
    /// once started a second runner for it.
    pub away_grace_ms: Millis,
    /// Sent in `hello_ack`.
    pub reconcile_interval_secs: Option<u64>,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            ttl_secs: 120,
            refusal_memory_ms: 60_000,
            orphan_grace_ms: 300_000,
            away_grace_ms: 30_000,
            reconcile_interval_secs: None,
        }
    }
}

/// One of the coordinator's own targets, as hosts' targets are matched with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordTarget {
    pub name: String,
    /// `owner/repo` or the organization.
    pub scope: String,
    pub api_url: String,
}

/// What the server must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Send(ConnId, CoordMsg),
    /// Close this connection, for this reason.
    Close(ConnId, CloseWhy),
}

/// Why placement closes a connection; the server turns it into the close frame's code
/// and reason and the log's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseWhy {
    /// The same host connected again on another connection.
    Replaced,
    /// Its `hello` named a protocol version older than `protocol::MIN_VERSION`.
    UnsupportedVersion(u32),
}

/// A job's [`Phase`] with what it holds: its lease, its runner, since when it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Waiting,
    Leased {
        lease_id: String,
        conn: ConnId,
        host: String,
        profile: String,
        expires_at: Millis,
        acked: bool,
    },
    Started {
        host: String,
        runner_name: String,
        /// Set while the host is disconnected: when the job goes back to waiting.
        orphan_at: Option<Millis>,
    },
    /// Since when: only a snapshot whose read began after it may place the job
    /// again. One read while the runner finished may still list the job a runner
    /// took meanwhile (a run's jobs list read before the take), and placing it again
    /// on that started a runner with nothing to run.
    Held {
        since: Millis,
    },
}

impl JobState {
    /// Its phase, the word the store keeps and people see.
    pub fn phase(&self) -> Phase {
        match self {
            JobState::Waiting => Phase::Waiting,
            JobState::Leased { acked: false, .. } => Phase::Offered,
            JobState::Leased { acked: true, .. } => Phase::Accepted,
            JobState::Started { .. } => Phase::Started,
            JobState::Held { .. } => Phase::Held,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEntry {
    /// The coordinator's target name.
    pub target: String,
    pub job: QueuedJob,
    pub state: JobState,
    /// Hosts passed over for this job, until when.
    pub refused: BTreeMap<String, Millis>,
    pub placements: u32,
    /// When the coordinator's queue read first showed it (or a restart took it up):
    /// where its placement's time is measured from (`launch_sent`'s `after_seen_ms`).
    pub seen_at: Millis,
}

/// A connected host as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostView {
    /// The name its token was added under (authoritative, unlike `hello.host.name`).
    pub name: String,
    pub hello: Hello,
    /// The negotiated version.
    pub version: u32,
    /// Host target name → coordinator target name.
    pub covered: BTreeMap<String, String>,
    pub free: u32,
    pub draining: bool,
    pub unfit: BTreeSet<String>,
    /// Each profile's live runners added up, as its last status report said.
    pub meters: BTreeMap<String, ProfileMeters>,
    pub connected_at: Millis,
    pub started: u64,
    pub finished: u64,
    /// Launches it refused or let expire.
    pub refusals: u64,
    /// Its last refusal's reason (the word the host sent, `expired` for an offer it
    /// let run out) and when: why a launch was refused, for the Pool pane.
    pub last_refusal: Option<(String, Millis)>,
}

#[derive(Debug, Clone)]
pub struct Placement {
    cfg: PlacementConfig,
    targets: Vec<CoordTarget>,
    hosts: BTreeMap<ConnId, HostView>,
    jobs: BTreeMap<String, JobEntry>,
    /// Lease id → its job and host, for open leases and those recently closed
    /// without a runner.
    lease_jobs: BTreeMap<String, LeaseOf>,
    lease_ids: LeaseIds,
    /// The credential's budget each placement draws from (`credit`).
    credit: credit::Credit,
}

/// The key a job is known by on the wire.
pub fn job_key(job: &QueuedJob) -> String {
    job.id.to_string()
}

fn same_api(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

impl Placement {
    /// `lease_key` is the caller's: fresh random bytes at each start, from which every
    /// lease id of this life is derived ([`LeaseIds`]), so placement itself draws no
    /// randomness and a test's placement is reproducible.
    pub fn new(cfg: PlacementConfig, targets: Vec<CoordTarget>, lease_key: [u8; 32]) -> Placement {
        Placement {
            cfg,
            targets,
            hosts: BTreeMap::new(),
            jobs: BTreeMap::new(),
            lease_jobs: BTreeMap::new(),
            lease_ids: LeaseIds::new(&lease_key),
            credit: credit::Credit::default(),
        }
    }

    pub fn hosts(&self) -> &BTreeMap<ConnId, HostView> {
        &self.hosts
    }

    pub fn jobs(&self) -> &BTreeMap<String, JobEntry> {
        &self.jobs
    }

    pub fn targets(&self) -> &[CoordTarget] {
        &self.targets
    }

    /// `target`'s points a minute for its starts' JIT configs, as the coordinator's
    /// own target says (`None`: none); hosts' reports no longer change it.
    pub fn set_jit_points_limit(&mut self, target: &str, limit: Option<u32>) {
        self.credit.set_limit(target, limit);
    }

    /// GitHub asked `target`'s credential to send nothing before `until` (the
    /// coordinator's own reads met it): no host starts a runner of it before then.
    pub fn credential_held(&mut self, target: &str, until: Millis) {
        self.credit.hold(target, until);
    }

    /// Why `target`'s starts wait for the credential's limits now, if they do.
    pub fn credit_wait(&mut self, target: &str, now: Millis) -> Option<credit::Wait> {
        self.credit.wait(target, now)
    }

    /// Open leases on a connection.
    pub fn outstanding(&self, conn: ConnId) -> u32 {
        self.jobs
            .values()
            .filter(|j| matches!(&j.state, JobState::Leased { conn: c, .. } if *c == conn))
            .count() as u32
    }

    /// A host said hello (first, or again with new profiles). Answers with
    /// `hello_ack`; a host too old for the protocol is closed.
    pub fn hello(&mut self, conn: ConnId, name: &str, hello: Hello, now: Millis) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(version) = protocol::negotiate(hello.version) else {
            out.push(Action::Close(
                conn,
                CloseWhy::UnsupportedVersion(hello.version),
            ));
            return out;
        };
        // The same host on another connection: that one is stale (a half-open TCP
        // connection the host already gave up on).
        let stale: Vec<ConnId> = self
            .hosts
            .iter()
            .filter(|(c, h)| **c != conn && h.name == name)
            .map(|(c, _)| *c)
            .collect();
        for c in stale {
            out.extend(self.disconnect(c, now));
            out.push(Action::Close(c, CloseWhy::Replaced));
        }
        let covered: BTreeMap<String, String> = if protocol::is_directable(version) {
            hello
                .targets
                .iter()
                .filter_map(|t| {
                    self.targets
                        .iter()
                        .find(|c| {
                            c.scope.eq_ignore_ascii_case(&t.scope)
                                && same_api(&c.api_url, &t.api_url)
                        })
                        .map(|c| (t.name.clone(), c.name.clone()))
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        let prev = self.hosts.remove(&conn);
        let view = HostView {
            name: name.to_string(),
            version,
            covered: covered.clone(),
            free: prev.as_ref().map_or(hello.host.capacity, |p| p.free),
            draining: prev.as_ref().is_some_and(|p| p.draining),
            unfit: prev.as_ref().map(|p| p.unfit.clone()).unwrap_or_default(),
            meters: prev.as_ref().map(|p| p.meters.clone()).unwrap_or_default(),
            connected_at: prev.as_ref().map_or(now, |p| p.connected_at),
            started: prev.as_ref().map_or(0, |p| p.started),
            finished: prev.as_ref().map_or(0, |p| p.finished),
            refusals: prev.as_ref().map_or(0, |p| p.refusals),
            last_refusal: prev.as_ref().and_then(|p| p.last_refusal.clone()),
            hello,
        };
        self.hosts.insert(conn, view);
        // The host is back: the launches it accepted on a connection now gone are
        // leased on this one. A restarted daemon does not know them again, so they end
        // within the grace: by then a runner that lived on has taken its job (which
        // leaves the queue), and a start the crash cut short is placed again.
        for j in self.jobs.values_mut() {
            if let JobState::Leased {
                conn: c,
                host,
                expires_at,
                ..
            } = &mut j.state
                && host == name
                && !self.hosts.contains_key(c)
                && protocol::is_directable(version)
            {
                *c = conn;
                *expires_at = (*expires_at).min(now + self.cfg.away_grace_ms);
            }
        }
        // The host is back: its started runners serve their jobs again.
        for j in self.jobs.values_mut() {
            if let JobState::Started {
                host, orphan_at, ..
            } = &mut j.state
                && host == name
            {
                *orphan_at = None;
            }
        }
        out.push(Action::Send(
            conn,
            CoordMsg::HelloAck(HelloAck {
                version,
                reconcile_interval_secs: self.cfg.reconcile_interval_secs,
                covered: covered.into_keys().collect(),
                // The placer, which holds the store, says where the host's usage
                // rows resume.
                usage_after: None,
            }),
        ));
        out.extend(self.place(now));
        out
    }

    /// The connection is gone: the launches it was offered go back to waiting and are
    /// placed again; those it accepted wait `away_grace_ms` for the host to return.
    pub fn disconnect(&mut self, conn: ConnId, now: Millis) -> Vec<Action> {
        self.drop_conn(conn, now, false)
    }

    /// The host was removed from the pool (its token revoked): it will not return, so
    /// even the launches it accepted are placed again at once. A runner it started
    /// still counts for `orphan_grace_ms`, as a disconnected host's does, since a
    /// removed host's daemon may still be running it.
    pub fn remove_host(&mut self, conn: ConnId, now: Millis) -> Vec<Action> {
        self.drop_conn(conn, now, true)
    }

    fn drop_conn(&mut self, conn: ConnId, now: Millis, removed: bool) -> Vec<Action> {
        let Some(host) = self.hosts.remove(&conn) else {
            return Vec::new();
        };
        for j in self.jobs.values_mut() {
            match &mut j.state {
                JobState::Leased {
                    conn: c,
                    acked: true,
                    expires_at,
                    ..
                } if *c == conn && !removed => {
                    *expires_at = (*expires_at).min(now + self.cfg.away_grace_ms)
                }
                JobState::Leased { conn: c, .. } if *c == conn => j.state = JobState::Waiting,
                JobState::Started {
                    host: h, orphan_at, ..
                } if *h == host.name => *orphan_at = Some(now + self.cfg.orphan_grace_ms),
                _ => {}
            }
        }
        self.place(now)
    }

    pub fn status(&mut self, conn: ConnId, s: Status, now: Millis) -> Vec<Action> {
        let Some(h) = self.hosts.get_mut(&conn) else {
            return Vec::new();
        };
        h.free = s.free;
        h.draining = s.draining;
        h.unfit = s.unfit.into_iter().collect();
        h.meters = s.meters;
        let (name, covered) = (h.name.clone(), h.covered.clone());
        for l in &s.limits {
            if let Some(target) = covered.get(&l.target) {
                self.credit.report(target, &name, l, now);
            }
        }
        self.place(now)
    }

    /// The job and phase of an open lease held by `conn`.
    fn leased_by(&self, conn: ConnId, lease_id: &str) -> Option<String> {
        let key = &self.lease_jobs.get(lease_id)?.job;
        match &self.jobs.get(key)?.state {
            JobState::Leased {
                lease_id: l,
                conn: c,
                ..
            } if l == lease_id && *c == conn => Some(key.clone()),
            _ => None,
        }
    }

    pub fn ack(&mut self, conn: ConnId, a: LaunchAck, now: Millis) -> Vec<Action> {
        let Some(key) = self.leased_by(conn, &a.lease_id) else {
            return Vec::new();
        };
        let until = now + self.cfg.refusal_memory_ms;
        let job = self.jobs.get_mut(&key).expect("leased job exists");
        if a.accepted {
            if let JobState::Leased { acked, .. } = &mut job.state {
                *acked = true;
            }
            return Vec::new();
        }
        if let JobState::Leased { host, .. } = &job.state {
            job.refused.insert(host.clone(), until);
        }
        // Refused before any request: the start's points come back.
        self.credit.refund(&a.lease_id);
        job.state = JobState::Waiting;
        if let Some(h) = self.hosts.get_mut(&conn) {
            h.refusals += 1;
            let why = a.reason.unwrap_or_else(|| "refused".into());
            h.last_refusal = Some((why, now));
        }
        self.place(now)
    }

    /// A runner started on a host: with a lease id, the lease closes and the job is
    /// served by that runner. A lease that was already closed (expired and placed
    /// elsewhere) still wins if its job's new lease has no runner yet: that lease is
    /// cancelled rather than a second runner started. A lease issued to another host
    /// (forged, or replayed from another host's traffic) is ignored: every frame that
    /// names a lease must come from that lease's host.
    pub fn started(&mut self, conn: ConnId, s: AttemptStarted, now: Millis) -> Vec<Action> {
        let Some(host) = self.hosts.get(&conn).map(|h| h.name.clone()) else {
            return Vec::new();
        };
        let lease = s.lease_id.as_ref().and_then(|l| self.lease_jobs.get(l));
        if lease.is_some_and(|l| l.host != host) {
            return Vec::new();
        }
        let key = lease.map(|l| l.job.clone());
        if let Some(h) = self.hosts.get_mut(&conn) {
            h.started += 1;
        }
        // Its runner started: nothing may name this lease again.
        if key.is_some()
            && let Some(l) = &s.lease_id
        {
            self.lease_jobs.remove(l);
        }
        let mut out = Vec::new();
        let Some(key) = key else {
            return out;
        };
        let Some(job) = self.jobs.get_mut(&key) else {
            return out;
        };
        match &job.state {
            JobState::Started { .. } | JobState::Held { .. } => return out,
            JobState::Leased {
                lease_id, conn: c, ..
            } if Some(lease_id) != s.lease_id.as_ref() => {
                out.push(Action::Send(
                    *c,
                    CoordMsg::CancelLaunch {
                        lease_id: lease_id.clone(),
                    },
                ));
            }
            _ => {}
        }
        job.state = JobState::Started {
            host,
            runner_name: s.runner_name,
            orphan_at: None,
        };
        // Its JIT config was answered: its points count a window from now.
        self.settle_closed(now);
        out
    }

    /// A runner ended. If it was serving a job that still looks queued, the job waits
    /// for a fresh snapshot of its target and is placed again if it is still there.
    pub fn finished(&mut self, conn: ConnId, f: AttemptFinished, now: Millis) -> Vec<Action> {
        let Some(host) = self.hosts.get_mut(&conn) else {
            return Vec::new();
        };
        host.finished += 1;
        let host = host.name.clone();
        for j in self.jobs.values_mut() {
            let ours = match &j.state {
                JobState::Started {
                    host: h,
                    runner_name,
                    ..
                } => *h == host && *runner_name == f.runner_name,
                JobState::Leased {
                    lease_id, conn: c, ..
                } => *c == conn && Some(lease_id) == f.lease_id.as_ref(),
                _ => false,
            };
            if ours {
                j.state = JobState::Held { since: now };
            }
        }
        Vec::new()
    }

    /// A fresh snapshot of one target's queue, read from `now`: new jobs wait, jobs
    /// gone are cancelled where they are leased and forgotten, held jobs still queued
    /// wait again.
    pub fn queue(&mut self, target: &str, queued: Vec<QueuedJob>, now: Millis) -> Vec<Action> {
        self.snapshot(target, queued, &[], now, now)
    }

    /// [`Placement::queue`], whose read began at `read_at`, with the runners seen
    /// taking the jobs that left it. A job held since after `read_at` stays held.
    pub fn snapshot(
        &mut self,
        target: &str,
        queued: Vec<QueuedJob>,
        taken: &[Taken],
        read_at: Millis,
        now: Millis,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let present: BTreeMap<String, QueuedJob> =
            queued.into_iter().map(|j| (job_key(&j), j)).collect();
        for t in taken.iter().filter(|t| !present.contains_key(&t.job_key)) {
            out.extend(self.runner_took(target, &present, t));
        }
        let gone: Vec<String> = self
            .jobs
            .iter()
            .filter(|(k, j)| j.target == target && !present.contains_key(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            let j = self.jobs.remove(&k).expect("listed");
            if let JobState::Leased { lease_id, conn, .. } = j.state {
                out.push(Action::Send(conn, CoordMsg::CancelLaunch { lease_id }));
            }
        }
        for (k, job) in present {
            match self.jobs.get_mut(&k) {
                Some(j) if j.target == target => {
                    if let JobState::Held { since } = j.state
                        && read_at >= since
                    {
                        j.state = JobState::Waiting;
                    }
                }
                Some(_) => {}
                None => {
                    self.jobs.insert(
                        k,
                        JobEntry {
                            target: target.to_string(),
                            job,
                            state: JobState::Waiting,
                            refused: BTreeMap::new(),
                            placements: 0,
                            seen_at: now,
                        },
                    );
                }
            }
        }
        out.extend(self.place(now));
        out
    }

    /// Runner `t.runner_name` took job `t.job_key`, which has left the queue. If the
    /// runner was counted as serving another job still queued, that job stands where
    /// the taken one stood: it inherits its lease (moved, not cancelled), its runner, or
    /// its wait.
    fn runner_took(
        &mut self,
        target: &str,
        present: &BTreeMap<String, QueuedJob>,
        t: &Taken,
    ) -> Vec<Action> {
        let runs_it = |j: &JobEntry| matches!(&j.state, JobState::Started { runner_name, .. } if *runner_name == t.runner_name);
        if self.jobs.get(&t.job_key).is_some_and(runs_it) {
            return Vec::new();
        }
        let Some(other) = self
            .jobs
            .iter()
            .find(|(k, j)| j.target == target && present.contains_key(*k) && runs_it(j))
            .map(|(k, _)| k.clone())
        else {
            // A runner not reported yet, or not ours (one a host started before this
            // coordinator did, or in fallback): the taken job's lease is cancelled as
            // it leaves. Keeping it for a runner of ours whose report is late would
            // start a surplus runner whenever the taker is not ours, and placing the
            // late reporter's job again at its report would too when the cancel came
            // after its host had started the runner.
            return Vec::new();
        };
        let (labels, phase) = match self.jobs.get_mut(&t.job_key) {
            Some(x) if x.target == target => (
                x.job.labels.clone(),
                std::mem::replace(&mut x.state, JobState::Waiting),
            ),
            _ => (Vec::new(), JobState::Waiting),
        };
        let job = self.jobs.get_mut(&other).expect("found above");
        let mut out = Vec::new();
        job.state = match phase {
            // A lease is only moved to a job with the same labels: its profile fits.
            JobState::Leased { lease_id, conn, .. }
                if !crate::domain::labels::same_set(&labels, &job.job.labels) =>
            {
                out.push(Action::Send(conn, CoordMsg::CancelLaunch { lease_id }));
                JobState::Waiting
            }
            JobState::Leased { .. } | JobState::Started { .. } => phase,
            JobState::Waiting | JobState::Held { .. } => JobState::Waiting,
        };
        if let JobState::Leased {
            lease_id,
            host,
            expires_at,
            ..
        } = &job.state
        {
            let (lease_id, host, forget_at) =
                (lease_id.clone(), host.clone(), expires_at + LATE_START_MS);
            self.remember_lease(&lease_id, &other, &host, forget_at);
        }
        out
    }

    /// Expires leases (cancelled on their host, placed again elsewhere first), ends
    /// the grace of disconnected hosts' runners, forgets old refusals.
    pub fn tick(&mut self, now: Millis) -> Vec<Action> {
        let mut out = Vec::new();
        for j in self.jobs.values_mut() {
            j.refused.retain(|_, until| *until > now);
            match &j.state {
                JobState::Leased {
                    lease_id,
                    conn,
                    host,
                    expires_at,
                    ..
                } if now >= *expires_at => {
                    out.push(Action::Send(
                        *conn,
                        CoordMsg::CancelLaunch {
                            lease_id: lease_id.clone(),
                        },
                    ));
                    j.refused
                        .insert(host.clone(), now + self.cfg.refusal_memory_ms);
                    if let Some(h) = self.hosts.get_mut(conn) {
                        h.refusals += 1;
                        h.last_refusal = Some((EXPIRED.into(), now));
                    }
                    j.state = JobState::Waiting;
                }
                JobState::Started {
                    orphan_at: Some(t), ..
                } if now >= *t => j.state = JobState::Waiting,
                _ => {}
            }
        }
        self.forget_leases(now);
        out.extend(self.place(now));
        out
    }
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
