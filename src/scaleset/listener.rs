//! `ScaleSetListener`: holds one scale set's message session and turns the long poll
//! into demand, one `poll_once` at a time, on the caller's thread. It keeps the scale
//! set in existence (recreating it after a 404), the session alive (refresh after a
//! 401 and the refused call sent again, a new one after a 404, jittered backoff while
//! another holder has it), and `lastMessageId` and the session's id persisted through
//! a [`Checkpoint`], so a restart neither loses nor repeats a message, and deletes the
//! session a killed predecessor left instead of waiting for it to expire.
//!
//! What it knows of its session (held since, last message and poll, why it waits and
//! until when) it reports through a [`SessionWatch`], for the daemon's status rows.
//!
//! Delivery contract: a message returned by `poll_once` is acknowledged, and its id
//! persisted, at the start of the *next* `poll_once` (or by `commit`/`close`). So the
//! caller records what the message means (its demand) before polling again; if the
//! process dies first, the message comes back to the next listener.

use super::client::{ScaleSet, ScaleSetClient, ScaleSetSpec, Session};
use super::error::ScaleSetError;
use super::message::{JobMessage, ScaleSetMessage, Statistics, desired_runners};
use crate::domain::{SessionPhase, SessionState};
use crate::github::{GhError, RetryPolicy};
use crate::store::Store;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the listener keeps what must outlive it: the last handled message id and the
/// session it holds, each under its own key, as text (`None` removes the key).
pub trait Checkpoint: Send {
    fn get(&mut self, key: &str) -> Result<Option<String>, String>;
    fn put(&mut self, key: &str, value: Option<&str>) -> Result<(), String>;
}

/// The store's kv table as a checkpoint (give the listener thread its own store).
pub struct StoreCheckpoint<S>(pub S);

impl<S: Store + Send> Checkpoint for StoreCheckpoint<S> {
    fn get(&mut self, key: &str) -> Result<Option<String>, String> {
        self.0.kv_get(key).map_err(|e| e.to_string())
    }

    fn put(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        match value {
            Some(v) => self.0.kv_put(key, v),
            None => self.0.kv_delete(key),
        }
        .map_err(|e| e.to_string())
    }
}

/// A shared in-memory checkpoint (tests, or a caller persisting elsewhere).
#[derive(Debug, Clone, Default)]
pub struct MemoryCheckpoint(pub Arc<Mutex<BTreeMap<String, String>>>);

impl Checkpoint for MemoryCheckpoint {
    fn get(&mut self, key: &str) -> Result<Option<String>, String> {
        Ok(lock(&self.0).get(key).cloned())
    }

    fn put(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        let mut m = lock(&self.0);
        match value {
            Some(v) => m.insert(key.to_string(), v.to_string()),
            None => m.remove(key),
        };
        Ok(())
    }
}

/// Ends a listener's session from another thread. The long poll cannot be
/// interrupted (the service holds it ~50 s), so a stopping owner deletes the session
/// instead of waiting for the poll to end: another holder (the restarted daemon, the
/// coordinator taking over) can open one at once rather than meet 409 until the
/// stale session expires. The blocked poll then ends with an error, or at its hold.
#[derive(Clone)]
pub struct SessionCloser {
    client: Arc<ScaleSetClient>,
    published: Arc<Mutex<Published>>,
}

/// The listener's session as its closers see it.
#[derive(Debug, Default)]
struct Published {
    /// (scale set id, session id).
    session: Option<(i64, String)>,
    /// Closed: a session the listener opens from now on is deleted at once (its
    /// create call may have been under way when the closer ran).
    closed: bool,
}

impl SessionCloser {
    /// A closer for the listener given it with [`ScaleSetListener::closed_by`].
    pub fn new(client: Arc<ScaleSetClient>) -> SessionCloser {
        SessionCloser {
            client,
            published: Arc::default(),
        }
    }

    /// Deletes the listener's current session, if it has one; whether it had.
    pub fn close(&self) -> Result<bool, ScaleSetError> {
        let taken = {
            let mut p = lock(&self.published);
            p.closed = true;
            p.session.take()
        };
        let Some((scale_set_id, session_id)) = taken else {
            return Ok(false);
        };
        self.client.delete_session(scale_set_id, &session_id)?;
        Ok(true)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a listener reports of its session, read from another thread (the daemon's
/// target loop writes it to the store). Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct SessionWatch(Arc<Mutex<SessionState>>);

impl SessionWatch {
    /// The state as the listener last reported it.
    pub fn get(&self) -> SessionState {
        lock(&self.0).clone()
    }

    fn update(&self, f: impl FnOnce(&mut SessionState)) {
        f(&mut lock(&self.0));
    }
}

/// The kv key of a scale set's last message id.
pub fn checkpoint_key(target: &str, scale_set_id: i64) -> String {
    format!("scaleset:{target}:{scale_set_id}:last_message_id")
}

/// The kv key of the session this host holds on a scale set: its id (not a secret; the
/// queue token is), written when the session is created and before its first poll,
/// removed when the listener ends it. A restart after a crash finds it and deletes that
/// session instead of meeting 409 until it expires.
pub fn session_key(target: &str, scale_set_id: i64) -> String {
    format!("scaleset:{target}:{scale_set_id}:session")
}

#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// The target's name (for the checkpoint key).
    pub target: String,
    /// The session's `ownerName` (e.g. `runner-manager@<host>`).
    pub owner: String,
    pub spec: ScaleSetSpec,
    /// Sent as `X-ScaleSetMaxCapacity`.
    pub max_capacity: u32,
    /// Waits after a failed poll, growing with consecutive failures (a session
    /// conflict waits here instead of crash-looping).
    pub backoff: RetryPolicy,
}

impl ListenerConfig {
    pub fn new(target: &str, owner: &str, spec: ScaleSetSpec, max_capacity: u32) -> Self {
        ListenerConfig {
            target: target.to_string(),
            owner: owner.to_string(),
            spec,
            max_capacity,
            backoff: RetryPolicy {
                tries: u32::MAX,
                base: Duration::from_secs(2),
                cap: Duration::from_secs(60),
            },
        }
    }
}

/// What one poll saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollResult {
    pub scale_set_id: i64,
    /// The newest statistics known (from this message, or an earlier one or the session).
    pub statistics: Option<Statistics>,
    /// `None` when the long poll ended with 202 (nothing new).
    pub message: Option<ScaleSetMessage>,
    /// Runner request ids of `JobAvailable` offers this poll acquired.
    pub acquired: Vec<i64>,
}

impl PollResult {
    /// Runners wanted now: `min(max, min_capacity + totalAssignedJobs)`; `None`
    /// before any statistics arrived.
    pub fn desired(&self, min_capacity: u32, max_capacity: u32) -> Option<u32> {
        self.statistics
            .as_ref()
            .map(|s| desired_runners(min_capacity, max_capacity, s))
    }
}

pub struct ScaleSetListener {
    client: Arc<ScaleSetClient>,
    cfg: ListenerConfig,
    checkpoint: Box<dyn Checkpoint>,
    scale_set: Option<ScaleSet>,
    session: Option<Session>,
    /// The session as [`SessionCloser`]s see it.
    published: Arc<Mutex<Published>>,
    last_message_id: i64,
    /// Delivered to the caller, not yet persisted and acknowledged.
    pending: Option<i64>,
    /// Persisted, not yet acknowledged: its ack is sent (again) before the next poll,
    /// after refreshing the session if the service refused it with 401.
    unacked: Option<i64>,
    failures: u32,
    statistics: Option<Statistics>,
    /// Sessions this listener opened: messages may have gone to another holder
    /// between two of them.
    opened: u64,
    /// Where it reports its session's state.
    watch: SessionWatch,
}

impl ScaleSetListener {
    /// No I/O here: the first `poll_once` finds or creates the scale set and opens the
    /// session. Waits are interrupted by the `GitHubClient`'s shutdown channel.
    pub fn new(
        client: Arc<ScaleSetClient>,
        cfg: ListenerConfig,
        checkpoint: Box<dyn Checkpoint>,
    ) -> ScaleSetListener {
        ScaleSetListener {
            client,
            cfg,
            checkpoint,
            scale_set: None,
            session: None,
            published: Arc::default(),
            last_message_id: 0,
            pending: None,
            unacked: None,
            failures: 0,
            statistics: None,
            opened: 0,
            watch: SessionWatch::default(),
        }
    }

    pub fn scale_set(&self) -> Option<&ScaleSet> {
        self.scale_set.as_ref()
    }

    pub fn last_message_id(&self) -> i64 {
        self.last_message_id
    }

    pub fn has_session(&self) -> bool {
        self.session.is_some()
    }

    /// How many sessions this listener has opened. Between two, another holder may
    /// have received (and acknowledged) messages this one never sees.
    pub fn sessions_opened(&self) -> u64 {
        self.opened
    }

    /// Reports the session's state to `watch` (the daemon's status rows read it).
    pub fn watched_by(mut self, watch: &SessionWatch) -> ScaleSetListener {
        self.watch = watch.clone();
        self
    }

    /// The session's state as reported.
    pub fn session_state(&self) -> SessionState {
        self.watch.get()
    }

    fn now(&self) -> crate::timefmt::Millis {
        self.client.github().now()
    }

    /// Lets `closer` end this listener's sessions from another thread.
    pub fn closed_by(mut self, closer: &SessionCloser) -> ScaleSetListener {
        self.published = closer.published.clone();
        self
    }

    /// Sets the session, or forgets it, and tells the closers.
    fn set_session(&mut self, s: Option<Session>) {
        lock(&self.published).session = match (&self.scale_set, &s) {
            (Some(ss), Some(s)) => Some((ss.id, s.id.clone())),
            _ => None,
        };
        let now = self.now();
        let new_id = s.as_ref().map(|s| s.id.clone());
        self.watch.update(|st| {
            if st.session_id != new_id {
                st.held_since = new_id.as_ref().map(|_| now);
                st.session_id = new_id.clone();
            }
            if new_id.is_some() {
                // Held from now on: whatever kept it from us is over.
                st.phase = SessionPhase::Held.into();
                st.reason = None;
                st.retry_at = None;
            } else if st.phase == SessionPhase::Held.into() {
                st.phase = SessionPhase::Opening.into();
            }
        });
        self.session = s;
    }

    /// Forgets a session that is gone (deleted by us, or by the service), and its
    /// record, so a restart does not try to delete it again.
    fn forget_session(&mut self) -> Result<(), ScaleSetError> {
        self.set_session(None);
        self.record_session(None)
    }

    /// Writes (or removes) the record of the session this host holds on the scale set.
    fn record_session(&mut self, id: Option<&str>) -> Result<(), ScaleSetError> {
        let Some(ss) = &self.scale_set else {
            return Ok(());
        };
        let key = session_key(&self.cfg.target, ss.id);
        self.checkpoint
            .put(&key, id)
            .map_err(|detail| ScaleSetError::Checkpoint { detail })
    }

    /// One long poll. On failure it first waits (jittered, growing with consecutive
    /// failures, interruptible), then returns the error: the caller logs it and calls
    /// again, and never spins. `Err(Interrupted)` means shut down.
    pub fn poll_once(&mut self) -> Result<PollResult, ScaleSetError> {
        let result = self.poll_inner();
        let wait = match &result {
            Ok(_) => {
                self.failures = 0;
                let held = self.session.is_some();
                self.watch.update(|st| {
                    if held {
                        st.phase = SessionPhase::Held.into();
                    }
                    st.reason = None;
                    st.retry_at = None;
                });
                return result;
            }
            Err(ScaleSetError::Interrupted) => return result,
            // A rate-limit hold (the credential's, shared with the target loop) says
            // when it ends: wait until then and no longer. An exponential backoff here
            // grew while the hold was refusing each call at once, and kept the
            // listener away long after the hold had ended.
            Err(ScaleSetError::GitHub(GhError::RateLimited { until })) => {
                let left = (*until - self.now()).max(0) as u64;
                let jitter = (self.client.github().jitter() * 250.0) as u64;
                Duration::from_millis(left + jitter)
            }
            Err(_) => {
                let d = self
                    .cfg
                    .backoff
                    .delay(self.failures, self.client.github().jitter());
                self.failures = self.failures.saturating_add(1);
                d
            }
        };
        if let Err(e) = &result {
            // Reported before the wait, so the reason and the next try show meanwhile.
            self.report_failure(e, wait);
        }
        self.client.github().wait_interruptibly(wait)?;
        result
    }

    /// Records why the last try failed and when the next one is: a conflict while
    /// another owner holds the session, any other failure as failing (or, with the
    /// session still ours, as a failed poll of a held session).
    fn report_failure(&self, e: &ScaleSetError, wait: Duration) {
        let retry_at = self.now() + wait.as_millis() as i64;
        let held = self.session.is_some();
        let phase = if held {
            SessionPhase::Held
        } else if e.is_session_conflict() {
            SessionPhase::Conflict
        } else {
            SessionPhase::Failing
        };
        let reason = e.to_string();
        self.watch.update(|st| {
            st.phase = phase.into();
            st.reason = Some(reason);
            st.retry_at = Some(retry_at);
        });
    }

    /// Persists and acknowledges the message the last poll delivered. Persist first:
    /// a crash between the two leaves an unacked message whose id is already
    /// recorded, and the next listener drops it as a repeat. An ack the service
    /// refuses with 401 is sent again after a session refresh, as GitHub's own
    /// clients do; one that still fails is tried again before the next poll.
    pub fn commit(&mut self) -> Result<(), ScaleSetError> {
        self.persist()?;
        if self.session.is_some() {
            self.acknowledge()?;
        }
        Ok(())
    }

    /// Saves the delivered message's id: from now on it is handled.
    fn persist(&mut self) -> Result<(), ScaleSetError> {
        let Some(id) = self.pending else {
            return Ok(());
        };
        let key = self.key()?;
        self.checkpoint
            .put(&key, Some(&id.to_string()))
            .map_err(|detail| ScaleSetError::Checkpoint { detail })?;
        self.last_message_id = id;
        self.pending = None;
        self.unacked = Some(id);
        Ok(())
    }

    /// Sends the ack of the persisted message; after a 401, refreshes the session
    /// (a new one when it is gone) and sends it once more.
    fn acknowledge(&mut self) -> Result<(), ScaleSetError> {
        let Some(id) = self.unacked else {
            return Ok(());
        };
        let session = self.session.as_ref().expect("the caller holds a session");
        match self.client.delete_message(session, id) {
            Err(e) if e.is_unauthorized() => {
                self.refresh_session()?;
                let session = self.session.as_ref().expect("refreshed above");
                self.client.delete_message(session, id)?;
            }
            r => r?,
        }
        self.unacked = None;
        Ok(())
    }

    /// Commits, then ends the session so another holder (after a restart, another
    /// process) can open one at once instead of waiting for it to expire.
    pub fn close(mut self) -> Result<(), ScaleSetError> {
        let committed = self.commit();
        let session = self.session.take();
        self.set_session(None);
        self.watch.update(|st| {
            st.phase = SessionPhase::Closed.into();
            st.retry_at = None;
        });
        if let (Some(ss), Some(s)) = (&self.scale_set, session) {
            self.client.delete_session(ss.id, &s.id)?;
            self.record_session(None)?;
        }
        committed
    }

    fn key(&self) -> Result<String, ScaleSetError> {
        let id =
            self.scale_set
                .as_ref()
                .map(|s| s.id)
                .ok_or_else(|| ScaleSetError::Checkpoint {
                    detail: "no scale set yet".into(),
                })?;
        Ok(checkpoint_key(&self.cfg.target, id))
    }

    fn ensure_scale_set(&mut self) -> Result<i64, ScaleSetError> {
        if let Some(s) = &self.scale_set {
            return Ok(s.id);
        }
        let s = self.client.ensure_scale_set(&self.cfg.spec)?;
        let key = checkpoint_key(&self.cfg.target, s.id);
        let text = self
            .checkpoint
            .get(&key)
            .map_err(|detail| ScaleSetError::Checkpoint { detail })?;
        self.last_message_id = match text {
            None => 0,
            Some(v) => v.parse().map_err(|_| ScaleSetError::Checkpoint {
                detail: format!("{key} holds {v:?}, not a message id"),
            })?,
        };
        if s.statistics.is_some() {
            self.statistics = s.statistics;
        }
        let id = s.id;
        let last = (self.last_message_id > 0).then_some(self.last_message_id);
        self.watch.update(|st| {
            st.scale_set_id = Some(id);
            if st.last_message_id.is_none() {
                st.last_message_id = last;
            }
        });
        self.scale_set = Some(s);
        Ok(id)
    }

    /// The scale set is gone: forget it and the session so the next step recreates it.
    fn lose_scale_set(&mut self) -> Result<(), ScaleSetError> {
        // Its sessions went with it.
        let forgotten = self.forget_session();
        self.scale_set = None;
        self.watch.update(|st| st.scale_set_id = None);
        self.pending = None;
        self.unacked = None;
        forgotten
    }

    fn ensure_session(&mut self) -> Result<(), ScaleSetError> {
        if self.session.is_some() {
            return Ok(());
        }
        let id = self.ensure_scale_set()?;
        self.end_recorded_session(id)?;
        match self.client.create_session(id, &self.cfg.owner) {
            Ok(s) => self.take_session(s),
            Err(e)
                if e.is_scale_set_not_found() || (e.is_not_found() && !e.is_session_conflict()) =>
            {
                self.lose_scale_set()?;
                let id = self.ensure_scale_set()?;
                let s = self.client.create_session(id, &self.cfg.owner)?;
                self.take_session(s)
            }
            // Ours was ended just above: the holder is someone else, and is waited out
            // (the error names it; `poll_once` backs off).
            Err(e) => Err(e),
        }
    }

    /// A session this host opened on the scale set and never ended (the process was
    /// killed) would hold it until the service expires it: it is ours, so it is
    /// deleted (with the admin token) before a new one is opened.
    fn end_recorded_session(&mut self, scale_set_id: i64) -> Result<(), ScaleSetError> {
        let key = session_key(&self.cfg.target, scale_set_id);
        let recorded = self
            .checkpoint
            .get(&key)
            .map_err(|detail| ScaleSetError::Checkpoint { detail })?;
        if let Some(old) = recorded {
            // 404 (expired meanwhile) counts as done.
            self.client.delete_session(scale_set_id, &old)?;
            self.checkpoint
                .put(&key, None)
                .map_err(|detail| ScaleSetError::Checkpoint { detail })?;
        }
        Ok(())
    }

    /// Takes a session the service gave, unless a closer ran meanwhile: then it is
    /// deleted at once and the listener is interrupted. A new session is recorded
    /// before it is first polled, so a crash from here on leaves its id behind.
    fn take_session(&mut self, s: Session) -> Result<(), ScaleSetError> {
        if lock(&self.published).closed {
            self.set_session(None);
            if let Some(ss) = &self.scale_set {
                self.client.delete_session(ss.id, &s.id)?;
            }
            return Err(ScaleSetError::Interrupted);
        }
        let new = self.session.as_ref().is_none_or(|old| old.id != s.id);
        if new {
            if let Err(e) = self.record_session(Some(&s.id)) {
                // Unrecorded, a crash would leave it to expire: do not hold it.
                if let Some(ss) = &self.scale_set {
                    let _ = self.client.delete_session(ss.id, &s.id);
                }
                self.set_session(None);
                return Err(e);
            }
            self.opened += 1;
        }
        if s.statistics.is_some() {
            self.statistics = s.statistics;
        }
        self.set_session(Some(s));
        Ok(())
    }

    /// After a 401 with the queue token: a fresh queue token, or a new session when
    /// the old one is gone.
    fn refresh_session(&mut self) -> Result<(), ScaleSetError> {
        let (Some(ss), Some(s)) = (&self.scale_set, &self.session) else {
            return self.ensure_session();
        };
        match self.client.refresh_session(ss.id, &s.id) {
            Ok(s) => self.take_session(s),
            Err(e) if e.is_scale_set_not_found() => {
                self.lose_scale_set()?;
                self.ensure_session()
            }
            Err(e) if e.is_not_found() => {
                self.forget_session()?;
                self.ensure_session()
            }
            Err(e) => Err(e),
        }
    }

    fn get_message(&mut self) -> Result<Option<ScaleSetMessage>, ScaleSetError> {
        let session = self.session.as_ref().expect("ensured by the caller");
        self.client
            .get_message(session, self.last_message_id, self.cfg.max_capacity)
    }

    /// Acquires offered jobs; after a 401 refreshes the session and tries once more at
    /// once (waiting for the next poll would start the job seconds late).
    fn acquire(&mut self, scale_set_id: i64, offers: &[i64]) -> Result<Vec<i64>, ScaleSetError> {
        let session = self.session.as_ref().expect("ensured by the caller");
        match self.client.acquire_jobs(scale_set_id, session, offers) {
            Err(e) if e.is_unauthorized() => {
                self.refresh_session()?;
                let session = self.session.as_ref().expect("refreshed above");
                self.client.acquire_jobs(scale_set_id, session, offers)
            }
            r => r,
        }
    }

    fn poll_inner(&mut self) -> Result<PollResult, ScaleSetError> {
        self.persist()?;
        self.ensure_session()?;
        // Wire order after a refused ack: DELETE (401), PATCH, DELETE, then the poll.
        self.acknowledge()?;
        let message = match self.get_message() {
            Err(e) if e.is_unauthorized() => {
                // The queue token expired: refresh once and poll again.
                self.refresh_session()?;
                self.get_message()?
            }
            Err(e) if e.is_scale_set_not_found() => {
                self.lose_scale_set()?;
                return Err(e);
            }
            Err(e) if e.is_not_found() => {
                self.forget_session()?;
                return Err(e);
            }
            r => r?,
        };
        let scale_set_id = self.scale_set.as_ref().map_or(0, |s| s.id);
        let now = self.now();
        self.watch.update(|st| st.last_poll_at = Some(now));
        let Some(message) = message else {
            return Ok(self.result(scale_set_id, None, Vec::new()));
        };
        if message.statistics.is_some() {
            self.statistics = message.statistics;
        }
        if message.id <= self.last_message_id {
            // Handled before: a crash came between persisting and acknowledging, or
            // the service redelivers to a new session what an old one left unacked.
            // Acknowledge it now and deliver nothing.
            self.unacked = Some(message.id);
            self.acknowledge()?;
            return Ok(self.result(scale_set_id, None, Vec::new()));
        }
        let offers: Vec<i64> = message
            .jobs
            .iter()
            .filter_map(|j| match j {
                JobMessage::Available { job, .. } => Some(job.runner_request_id),
                _ => None,
            })
            .collect();
        let acquired = if offers.is_empty() {
            Vec::new()
        } else {
            self.acquire(scale_set_id, &offers)?
        };
        self.pending = Some(message.id);
        let id = message.id;
        self.watch.update(|st| {
            st.last_message_id = Some(id);
            st.last_message_at = Some(now);
        });
        Ok(self.result(scale_set_id, Some(message), acquired))
    }

    fn result(
        &self,
        scale_set_id: i64,
        message: Option<ScaleSetMessage>,
        acquired: Vec<i64>,
    ) -> PollResult {
        PollResult {
            scale_set_id,
            statistics: self.statistics,
            message,
            acquired,
        }
    }
}
