//! The scale set feed of one target: one listener thread per `demand=scaleset` profile
//! (`scaleset:<profile>`), each holding its scale set's message session, and the
//! channel that hands each poll's result to the target loop, which turns it into the
//! profile's demand.
//!
//! Handover: a listener sends a result and waits until a pass has taken it and
//! recorded the attempts it asked for ([`ScaleSetFeed::handed_over`]) before it polls
//! again, because its next poll acknowledges the message. A crash before that leaves
//! the message unacknowledged, so the next listener gets it again.
//!
//! Shutdown: a long poll cannot be interrupted (the service holds it ~50 s, the sim
//! 2 s), so stopping a listener deletes its session from the stopping thread (a
//! [`SessionCloser`]) and waits at most [`STOP_WAIT`] for the thread to end; one still
//! polling then is left to the process exit. The session is gone either way, so the
//! next holder opens its own at once instead of meeting 409 until it expires.

use super::clients::{self, Ties};
mod listen;
mod lookup;

use crate::backoff::Backoff;
use crate::daemon::shared::{LoopMsg, Shared};
use crate::domain::job_owner::JobOwner;
use crate::domain::runner_group::GroupIds;
use crate::domain::{Attempt, DemandSource, Host, ScalePolicy, SessionPhase, SessionState, Target};
use crate::github::{GhError, InFlight, SharedHold};
use crate::reconcile::launch_book::{TargetMode, is_directed};
use crate::reconcile::plan::ScaleSetSeen;
use crate::reconcile::watch::DeregisterResult;
use crate::scaleset::{
    JobMessage, ListenerConfig, Removed, ScaleSetClient, ScaleSetError, ScaleSetListener,
    ScaleSetSpec, SessionCloser, SessionWatch, Statistics, StoreCheckpoint,
};
use crate::secret::Secret;
use crate::store::SqliteStore;
use crate::timefmt::Millis;
use crate::{log_info, log_warn};
use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded, select, unbounded};
use listen::ListenCx;
use lookup::{Lookup, note_found};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long stopping the feed waits for listeners to close their sessions.
pub const STOP_WAIT: Duration = Duration::from_secs(10);

/// The scale set a profile registers its runners in: named after the profile, which
/// is also its only label.
pub fn spec_for(policy: &ScalePolicy, runner_group_id: i64) -> ScaleSetSpec {
    ScaleSetSpec::named(&policy.name, runner_group_id)
}

/// A poll's result on its way to the target loop.
struct Update {
    profile: String,
    scale_set_id: i64,
    statistics: Option<Statistics>,
    jobs: Vec<JobMessage>,
    /// Sent to once the pass has acted on it; dropped unsent means it never was.
    handed: Sender<()>,
}

/// What the loop knows of one profile's scale set.
#[derive(Debug, Default)]
struct Known {
    scale_set_id: i64,
    statistics: Option<Statistics>,
    /// Assigned jobs not started yet, by the service's job id, with their queue time
    /// (for the queue-to-start latency; after a restart only statistics are known).
    waiting: BTreeMap<String, Option<Millis>>,
}

struct Listener {
    /// What the listener was built from; another value means rebuild it.
    fingerprint: String,
    client: Arc<ScaleSetClient>,
    /// Dropping it stops the listener and interrupts its client's waits.
    stop: Sender<()>,
    /// Ends the listener's session while its thread may still be in a long poll.
    closer: SessionCloser,
    /// Its session as it reports it: the status rows, and why its polls fail while
    /// they do (the profile's unfit reason).
    watch: SessionWatch,
    /// Disconnects when the thread ends.
    done: Receiver<()>,
    thread: JoinHandle<()>,
}

impl Listener {
    /// Tells the thread to stop and ends its session now, so the next holder need not
    /// wait for a long poll to end or the session to expire. Returns what to wait on.
    fn stop(self, target: &str, profile: &str) -> (Receiver<()>, JoinHandle<()>) {
        drop(self.stop);
        if let Err(e) = self.closer.close() {
            log_warn!(
                "scaleset_session_not_closed",
                target = target,
                profile = profile,
                error = e
            );
        }
        (self.done, self.thread)
    }
}

/// One target's listeners and what they reported.
pub struct ScaleSetFeed {
    target: String,
    listeners: HashMap<String, Listener>,
    tx: Sender<Update>,
    rx: Receiver<Update>,
    known: HashMap<String, Known>,
    /// Results taken this pass, released by `handed_over`.
    held: Vec<Sender<()>>,
    /// Credential failures are retried no sooner than this.
    next_try: Millis,
    /// On a coordinated host: the scale sets the coordinator holds sessions on, found
    /// by name (no session here), so directed launches take their JIT from them.
    remote: HashMap<String, Remote>,
    /// The target's rate-limit hold (a `retry-after`, a reset) and bound on requests
    /// in flight, shared live by every client of the target, the loop's included:
    /// the feed's send no REST call (registration tokens, lookups) before the hold
    /// ends (`clients`).
    ties: Ties,
    /// Runner group ids found by name, for every listener and lookup of the target.
    groups: Arc<GroupIds>,
    /// The loop's shutdown: ends a lookup's waits.
    shutdown: Receiver<()>,
}

/// A lookup's answer: the scale set's client and id, `None` while it does not exist.
type Found = Result<Option<(Arc<ScaleSetClient>, i64)>, String>;

/// A scale set found by name, for starting and removing runners without a session.
struct Remote {
    fingerprint: String,
    /// `None` until found; looked up again no sooner than `next_try`.
    found: Option<(Arc<ScaleSetClient>, i64)>,
    next_try: Millis,
    /// A lookup on its own thread (never the loop's), until it answers.
    looking: Option<Receiver<Found>>,
}

/// Wait between lookups of a scale set the coordinator has not created yet.
const REMOTE_RETRY: Millis = 2_000;
/// Wait before a listener whose credentials failed is started again.
const START_RETRY: Millis = 30_000;

impl ScaleSetFeed {
    pub fn new(target: &str, shutdown: Receiver<()>) -> ScaleSetFeed {
        let (tx, rx) = unbounded();
        ScaleSetFeed {
            target: target.to_string(),
            listeners: HashMap::new(),
            tx,
            rx,
            known: HashMap::new(),
            held: Vec::new(),
            next_try: 0,
            remote: HashMap::new(),
            ties: Ties::default(),
            groups: Arc::default(),
            shutdown,
        }
    }

    /// What every client of the target shares; give it to the loop's client.
    pub fn ties(&self) -> &Ties {
        &self.ties
    }

    /// The hold every client of the target shares.
    pub fn shared_hold(&self) -> &SharedHold {
        &self.ties.hold
    }

    /// The bound every client of the target shares.
    pub fn in_flight(&self) -> &InFlight {
        &self.ties.in_flight
    }

    /// The secondary-limit points every client of the target shares.
    pub fn points(&self) -> &crate::github::SharedPoints {
        &self.ties.points
    }

    /// Starts a listener for every scale set profile of this host that is not directed
    /// (or whose target, runner group or ceiling changed) and stops the others. A
    /// directed profile runs none: the coordinator holds its session. In fallback
    /// (the coordinator out of reach past the grace) the host holds it again, as it
    /// reads its own REST demand again; on a pool of several hosts the first to open
    /// the session serves, the others meet 409 and retry; back to coordinated, the
    /// session is ended at once so the coordinator can take it.
    pub fn sync(
        &mut self,
        target: &Target,
        profiles: &[ScalePolicy],
        host: &Host,
        mode: TargetMode,
        shared: &Arc<Shared>,
        now: Millis,
    ) {
        let mut wanted = scaleset_profiles(target, profiles, host);
        wanted.retain(|_, (p, _)| !is_directed(host, p, mode));
        let stale: Vec<String> = self
            .listeners
            .iter()
            .filter(|(name, l)| {
                wanted
                    .get(name.as_str())
                    .is_none_or(|(_, fp)| *fp != l.fingerprint)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            if let Some(l) = self.listeners.remove(&name) {
                log_info!(
                    "scaleset_listener_stopping",
                    target = self.target,
                    profile = name
                );
                // Not joined here: it may be in a long poll. It ends on its own.
                drop(l.stop(&self.target, &name));
            }
            self.known.remove(&name);
        }
        self.sync_remote(target, profiles, host, shared, now);
        for (name, (policy, fp)) in wanted {
            if self.listeners.contains_key(name) || now < self.next_try {
                continue;
            }
            match self.start(target, policy, fp, &host.id, shared) {
                Ok(l) => {
                    self.listeners.insert(name.to_string(), l);
                }
                Err(e) => {
                    log_warn!(
                        "scaleset_listener_not_started",
                        target = self.target,
                        profile = name,
                        error = e
                    );
                    self.next_try = now + START_RETRY;
                }
            }
        }
    }

    /// On a coordinated host, finds each scale set profile's scale set by name (the
    /// coordinator created it and holds its session), retrying while it is missing.
    /// Each lookup runs on a thread of its own; its answer is taken at a later pass.
    fn sync_remote(
        &mut self,
        target: &Target,
        profiles: &[ScalePolicy],
        host: &Host,
        shared: &Arc<Shared>,
        now: Millis,
    ) {
        let wanted: BTreeMap<&str, (&ScalePolicy, String)> = if host.coordinator.is_none() {
            BTreeMap::new()
        } else {
            scaleset_profiles(target, profiles, host)
        };
        self.remote.retain(|name, r| {
            wanted
                .get(name.as_str())
                .is_some_and(|(_, fp)| *fp == r.fingerprint)
        });
        for (name, (policy, fp)) in wanted {
            let r = self
                .remote
                .entry(name.to_string())
                .or_insert_with(|| Remote {
                    fingerprint: fp,
                    found: None,
                    next_try: now,
                    looking: None,
                });
            if let Some(rx) = &r.looking {
                match rx.try_recv() {
                    Ok(answer) => {
                        r.looking = None;
                        note_found(&self.target, name, r, answer);
                    }
                    Err(TryRecvError::Empty) => {}
                    Err(TryRecvError::Disconnected) => r.looking = None,
                }
                continue;
            }
            if r.found.is_some() || now < r.next_try {
                continue;
            }
            r.next_try = now + REMOTE_RETRY;
            let lookup = Lookup {
                shared: shared.clone(),
                target: target.clone(),
                policy: policy.clone(),
                ties: self.ties.clone(),
                groups: self.groups.clone(),
                stop: self.shutdown.clone(),
            };
            let (tx, rx) = bounded(1);
            let spawned = std::thread::Builder::new()
                .name(format!("scaleset-find:{name}"))
                .spawn(move || drop(tx.send(lookup.find())));
            if spawned.is_ok() {
                r.looking = Some(rx);
            }
        }
    }

    fn start(
        &self,
        target: &Target,
        policy: &ScalePolicy,
        fingerprint: String,
        host_id: &str,
        shared: &Arc<Shared>,
    ) -> Result<Listener, String> {
        let (stop, stop_rx) = bounded::<()>(0);
        let gh = clients::build(shared, target, &self.ties, stop_rx.clone())
            .map_err(|e| format!("credentials: {e}"))?;
        let client = Arc::new(ScaleSetClient::new(Arc::new(gh)));
        let store = SqliteStore::open(&shared.state_dir).map_err(|e| format!("store: {e}"))?;
        let (done_tx, done) = bounded::<()>(0);
        let closer = SessionCloser::new(client.clone());
        let watch = SessionWatch::default();
        let cx = ListenCx {
            client: client.clone(),
            policy: policy.clone(),
            target: self.target.clone(),
            owner: format!("runner-manager@{host_id}"),
            store: Some(store),
            stop: stop_rx,
            closer: closer.clone(),
            watch: watch.clone(),
            tx: self.tx.clone(),
            shared: shared.clone(),
            groups: self.groups.clone(),
            _done: done_tx,
        };
        let thread = std::thread::Builder::new()
            .name(format!("scaleset:{}", policy.name))
            .spawn(move || cx.run())
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        log_info!(
            "scaleset_listener_started",
            target = self.target,
            profile = policy.name
        );
        Ok(Listener {
            fingerprint,
            client,
            stop,
            closer,
            watch,
            done,
            thread,
        })
    }

    /// Takes every result the listeners handed in since the last pass, and returns
    /// whose job each runner that started one took (for the usage roll-up). Call
    /// `handed_over` once the pass recorded what they ask for.
    pub fn take(&mut self) -> Vec<(String, JobOwner)> {
        let mut owners = Vec::new();
        while let Ok(u) = self.rx.try_recv() {
            if !self.listeners.contains_key(&u.profile) {
                // From a listener stopped since: dropped unhandled, not acknowledged.
                continue;
            }
            let k = self.known.entry(u.profile).or_default();
            if k.scale_set_id != u.scale_set_id {
                k.waiting.clear();
            }
            k.scale_set_id = u.scale_set_id;
            if u.statistics.is_some() {
                k.statistics = u.statistics;
            }
            for j in &u.jobs {
                match j {
                    JobMessage::Assigned { job } => {
                        k.waiting.insert(job.job_id.clone(), job.queued_at);
                    }
                    JobMessage::Started {
                        job, runner_name, ..
                    }
                    | JobMessage::Completed {
                        job, runner_name, ..
                    } => {
                        k.waiting.remove(&job.job_id);
                        owners.push((runner_name.clone(), job.owner()));
                    }
                    JobMessage::Available { .. } | JobMessage::Unknown { .. } => {}
                }
            }
            self.held.push(u.handed);
        }
        owners
    }

    /// The pass acted on what `take` took: the listeners may poll (and acknowledge).
    pub fn handed_over(&mut self) {
        for h in self.held.drain(..) {
            let _ = h.send(());
        }
    }

    /// What the plan needs of each scale set profile with statistics: assigned and
    /// running jobs (see `reconcile::plan::scaleset_demand`).
    pub fn seen(&self) -> BTreeMap<String, ScaleSetSeen> {
        self.known
            .iter()
            .filter_map(|(profile, k)| {
                let st = k.statistics.as_ref()?;
                Some((
                    profile.clone(),
                    ScaleSetSeen {
                        assigned: st.total_assigned_jobs,
                        running: st.total_running_jobs,
                    },
                ))
            })
            .collect()
    }

    /// When each job assigned to a profile's scale set and not yet started was queued,
    /// oldest first, by profile (jobs whose messages carried no queue time left out).
    pub fn queued(&self) -> BTreeMap<String, Vec<Millis>> {
        self.known
            .iter()
            .map(|(profile, k)| {
                let mut out: Vec<Millis> = k.waiting.values().flatten().copied().collect();
                out.sort_unstable();
                (profile.clone(), out)
            })
            .collect()
    }

    /// The client and scale set id that start `profile`'s runners, once its scale set
    /// is known.
    pub fn launcher(&self, profile: &str) -> Option<(Arc<ScaleSetClient>, i64)> {
        if let Some((c, id)) = self.remote.get(profile).and_then(|r| r.found.as_ref()) {
            return Some((c.clone(), *id));
        }
        let id = self.known.get(profile)?.scale_set_id;
        let l = self.listeners.get(profile)?;
        (id > 0).then(|| (l.client.clone(), id))
    }

    /// Scale set profiles whose scale set is not known yet cannot start runners: a
    /// REST runner would not be in the scale set.
    pub fn add_unfit(&self, profiles: &[ScalePolicy], unfit: &mut BTreeMap<String, String>) {
        for p in profiles {
            if p.demand == DemandSource::Scaleset && self.launcher(&p.name).is_none() {
                let why = match self.error(&p.name) {
                    Some(e) => format!("scale set session not open: {e}"),
                    None => "scale set session not open yet".into(),
                };
                unfit.entry(p.name.clone()).or_insert(why);
            }
        }
    }

    /// Why `profile`'s listener fails to poll, while it does.
    pub fn error(&self, profile: &str) -> Option<String> {
        self.listeners.get(profile)?.watch.get().reason
    }

    /// Each running listener's session as it last reported it, by profile.
    pub fn sessions(&self) -> BTreeMap<String, SessionState> {
        self.listeners
            .iter()
            .map(|(name, l)| (name.clone(), l.watch.get()))
            .collect()
    }

    /// The client that looks up and removes `profile`'s runners.
    pub fn client(&self, profile: &str) -> Option<Arc<ScaleSetClient>> {
        if let Some((c, _)) = self.remote.get(profile).and_then(|r| r.found.as_ref()) {
            return Some(c.clone());
        }
        self.listeners.get(profile).map(|l| l.client.clone())
    }

    /// Forgets every listener (SIGHUP: credentials are re-read when they restart).
    pub fn reset(&mut self) {
        for (_, l) in self.listeners.drain() {
            drop(l.stop);
        }
        self.known.clear();
        self.remote.clear();
    }
}

impl ScaleSetFeed {
    /// Stops every listener and waits (at most [`STOP_WAIT`]) for them to close their
    /// sessions, so a restart can open new ones at once. Returns each one's session
    /// as it ended: closed (the closer or the listener deleted it).
    pub fn stop(&mut self) -> BTreeMap<String, SessionState> {
        self.handed_over();
        let listeners: Vec<(String, Listener)> = self.listeners.drain().collect();
        let deadline = Instant::now() + STOP_WAIT;
        let mut waiting = Vec::new();
        let mut ended = BTreeMap::new();
        for (profile, l) in listeners {
            let watch = l.watch.clone();
            waiting.push(l.stop(&self.target, &profile));
            ended.insert(profile, watch);
        }
        // Results sent from now on find no receiver and stay unacknowledged.
        while self.rx.try_recv().is_ok() {}
        for (done, thread) in waiting {
            let left = deadline.saturating_duration_since(Instant::now());
            match done.recv_timeout(left) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    log_warn!("scaleset_listener_left_polling", target = self.target);
                }
                _ => {
                    let _ = thread.join();
                }
            }
        }
        ended
            .into_iter()
            .map(|(profile, watch)| {
                let mut st = watch.get();
                st.phase = SessionPhase::Closed.into();
                st.session_id = None;
                st.held_since = None;
                st.retry_at = None;
                (profile, st)
            })
            .collect()
    }
}

impl Drop for ScaleSetFeed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// This host's `demand=scaleset` profiles of the target, by name, with the
/// fingerprint that says when their listener (or scale set lookup) must be redone.
fn scaleset_profiles<'a>(
    target: &Target,
    profiles: &'a [ScalePolicy],
    host: &Host,
) -> BTreeMap<&'a str, (&'a ScalePolicy, String)> {
    profiles
        .iter()
        .filter(|p| p.demand == DemandSource::Scaleset && p.host_id == host.id)
        .map(|p| (p.name.as_str(), (p, fingerprint(target, p))))
        .collect()
}

fn fingerprint(target: &Target, p: &ScalePolicy) -> String {
    format!(
        "{}|{:?}|{:?}|{:?}|{}",
        target.api_url, target.scope, target.credential, p.runner_group, p.max_capacity
    )
}

/// The scale set's JIT config for an attempt's runner, replacing a registration of
/// ours with the same name (an earlier try of this very attempt). Returns the
/// runner's id and the config.
pub fn jit(ss: &ScaleSetClient, scale_set_id: i64, a: &Attempt) -> Result<(i64, Secret), GhError> {
    ss.generate_jit_config_replacing_ours(scale_set_id, &a.host_id, &a.runner_name, "_work")
        .map(|(r, jit)| (r.id, jit))
        .map_err(to_gh)
}

/// Removes a scale set runner's registration (`actuator` looks its id up first): a
/// runner running a job (400 `AgentInUse`) is busy.
pub fn remove(ss: &ScaleSetClient, id: i64) -> Result<DeregisterResult, ScaleSetError> {
    match ss.remove_runner(id) {
        Ok(Removed::Removed) => Ok(DeregisterResult::Deleted),
        Ok(Removed::AlreadyGone) => Ok(DeregisterResult::NotFound),
        Err(e) if matches!(e.status(), Some(400 | 409 | 422)) => Ok(DeregisterResult::Busy),
        Err(e) => Err(e),
    }
}

/// A scale set error in the REST client's terms, so the loop holds starts as it would
/// for REST: transient ones retry next pass, others back off.
fn to_gh(e: ScaleSetError) -> GhError {
    match e {
        ScaleSetError::GitHub(g) => g,
        ScaleSetError::Interrupted => GhError::Interrupted,
        e if e.is_transient() => GhError::Transport {
            detail: e.to_string(),
        },
        e => GhError::Forbidden {
            message: e.to_string(),
        },
    }
}
