//! A scale set listener's thread: it resolves the profile's runner group, opens the
//! scale set's message session and hands each poll's result to the feed, waiting for
//! the pass to take it before it polls (and so acknowledges) again.

use super::*;

/// Waits between tries to resolve a runner group by name: 30 s, doubling to 10 min.
const GROUP_RETRY: Backoff = Backoff::new(Duration::from_secs(30), Duration::from_secs(600));

/// A listener thread's world.
pub(super) struct ListenCx {
    pub(super) client: Arc<ScaleSetClient>,
    pub(super) policy: ScalePolicy,
    pub(super) target: String,
    pub(super) owner: String,
    /// The checkpoint's own connection (taken by the listener).
    pub(super) store: Option<SqliteStore>,
    pub(super) stop: Receiver<()>,
    /// Shares the listener's session with the feed, which ends it when stopping.
    pub(super) closer: SessionCloser,
    /// Where the listener reports its session (the feed reads it).
    pub(super) watch: SessionWatch,
    pub(super) tx: Sender<Update>,
    pub(super) shared: Arc<Shared>,
    pub(super) groups: Arc<GroupIds>,
    /// Dropped when the thread ends, which is what `done` waits for.
    pub(super) _done: Sender<()>,
}

impl ListenCx {
    fn stopped(&self) -> bool {
        !matches!(self.stop.try_recv(), Err(TryRecvError::Empty))
    }

    pub(super) fn run(mut self) {
        let Some(group) = self.runner_group() else {
            return;
        };
        let spec = spec_for(&self.policy, group);
        let cfg = ListenerConfig::new(&self.target, &self.owner, spec, self.policy.max_capacity);
        let Some(store) = self.store.take() else {
            return;
        };
        let mut listener =
            ScaleSetListener::new(self.client.clone(), cfg, Box::new(StoreCheckpoint(store)))
                .closed_by(&self.closer)
                .watched_by(&self.watch);
        let mut last_error: Option<String> = None;
        let mut sent_statistics: Option<Option<Statistics>> = None;
        loop {
            if self.stopped() {
                break;
            }
            let r = match listener.poll_once() {
                Ok(r) => r,
                Err(ScaleSetError::Interrupted) => break,
                Err(e) => {
                    // `poll_once` already waited (jittered, growing): log and go on.
                    let msg = e.to_string();
                    if last_error.as_deref() != Some(msg.as_str()) {
                        log_warn!(
                            "scaleset_poll_failed",
                            target = self.target,
                            profile = self.policy.name,
                            error = msg
                        );
                    }
                    last_error = Some(msg);
                    continue;
                }
            };
            if last_error.take().is_some() {
                log_info!(
                    "scaleset_poll_recovered",
                    target = self.target,
                    profile = self.policy.name
                );
            }
            // Nothing new (a 202 with the same statistics): nothing to hand over.
            if r.message.is_none() && sent_statistics == Some(r.statistics) {
                continue;
            }
            let (handed, handed_rx) = bounded::<()>(1);
            let update = Update {
                profile: self.policy.name.clone(),
                scale_set_id: r.scale_set_id,
                statistics: r.statistics,
                jobs: r.message.map(|m| m.jobs).unwrap_or_default(),
                handed,
            };
            if self.tx.send(update).is_err() {
                // The loop is gone: the message stays unacknowledged for the next one.
                return;
            }
            self.shared.tell(&self.target, LoopMsg::Wake);
            select! {
                recv(handed_rx) -> r => if r.is_err() {
                    // Dropped without a pass acting on it: do not acknowledge it.
                    return;
                },
                recv(self.stop) -> _ => return,
            }
            sent_statistics = Some(r.statistics);
        }
        if let Err(e) = listener.close() {
            log_warn!(
                "scaleset_session_not_closed",
                profile = self.policy.name,
                error = e
            );
        }
    }

    /// The profile's runner group: its id, its name looked up (retried while the
    /// service fails), or the Default group. `None` when stopped meanwhile.
    fn runner_group(&self) -> Option<i64> {
        let group = self.policy.runner_group_ref();
        for n in 0.. {
            let lookup = |name: &str| {
                self.client
                    .runner_group_by_name(name)
                    .map(|g| g.map(|g| g.id))
            };
            match self.groups.resolve(group, lookup) {
                Ok(Some(id)) => return Some(id),
                Ok(None) => log_warn!(
                    "scaleset_runner_group_missing",
                    profile = self.policy.name,
                    group = self.policy.runner_group.as_deref().unwrap_or_default()
                ),
                Err(ScaleSetError::Interrupted) => return None,
                Err(e) => log_warn!(
                    "scaleset_runner_group_failed",
                    profile = self.policy.name,
                    error = e
                ),
            }
            let wait = GROUP_RETRY.step(n);
            if self.client.github().wait_interruptibly(wait).is_err() {
                return None;
            }
        }
        None
    }
}
