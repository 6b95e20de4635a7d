//! What comes in to the loop between passes: the queued jobs the demand reads
//! brought, GitHub's runner list until a pass judges it, the runners watched, the
//! scale set listeners and the lost jobs waiting; and the facts the pass's reads are
//! decided from.

use super::*;

/// What comes in, owned by the reads that bring it.
pub(super) struct Inbound {
    /// The queued jobs as the demand reads brought them.
    pub(super) queue: RestQueue,
    /// GitHub's runner list, as a read brought it, until a pass judges it, and when
    /// that read began.
    pub(super) fresh_runners: Option<(Vec<RegisteredRunner>, Millis)>,
    pub(super) observer: Observer,
    /// The listeners of this target's `demand=scaleset` profiles and what they saw.
    pub(super) scaleset: ScaleSetFeed,
    pub(super) reruns: RerunWatch,
}

impl Inbound {
    pub(super) fn new(name: &str, shutdown_rx: Receiver<()>) -> Inbound {
        Inbound {
            queue: RestQueue::default(),
            fresh_runners: None,
            observer: Observer::default(),
            scaleset: ScaleSetFeed::new(name, shutdown_rx),
            reruns: RerunWatch::default(),
        }
    }
}

/// What the loop knows of its lost jobs waiting for a re-run, so a pass does not ask
/// the store each time (issue 32, "Idle": a look each pass cost about 50 kB a target).
/// It asks again when a loss was committed anywhere in the process
/// (`store::losses_noted` moved) or when its own look settled rows.
#[derive(Default)]
pub(super) struct RerunWatch {
    /// `losses_noted` at the last look; none before the first.
    pub(super) seen: Option<u64>,
    /// When the first waiting row is due, as the last look found it.
    pub(super) first_due: Option<Millis>,
}

impl TargetLoop {
    /// The facts the pass's reads are decided from.
    pub(super) fn facts(&self, set: &Setting, now: Millis) -> Facts {
        let rate = self.rate_limits();
        let budget = match (rate.limit, rate.remaining, rate.reset) {
            (Some(limit), Some(remaining), Some(reset)) => Some(Budget {
                limit,
                remaining,
                reset,
            }),
            _ => None,
        };
        Facts {
            poll_every: poll_every(&set.target),
            reads_queue: !all_directed(&set.host, &set.profiles, set.mode)
                && plan::needs_rest_demand(&set.profiles),
            budget,
            polled_max: room::polled_max(&set.profiles),
            queued: self.inbound.queue.jobs.len() as u64,
            unread_runs: self.inbound.queue.unread_runs,
            queue_read_at: self.inbound.queue.read_at,
            guard: crate::daemon::workers::public_guard::due_read(&set.target, &set.profiles),
            reruns_first_due: self.inbound.reruns.first_due,
            jit_room: Some(
                self.inbound
                    .scaleset
                    .points()
                    .jit_room(&set.target.scope, now)
                    .fits,
            ),
            hooks_steady: lock(&self.shared.heard.hooks).steady(self.inbound.queue.heard_at, now),
        }
    }

    /// Asks the store when its first lost job is due, if a loss was committed or the
    /// loop's own look settled rows since it last asked. A failed read asks again on
    /// the next pass.
    pub(super) fn look_for_reruns(&mut self) {
        let noted = crate::store::losses_noted();
        if self.inbound.reruns.seen == Some(noted) {
            return;
        }
        if let Ok(first) = self.store.first_rerun_due(&self.name) {
            self.inbound.reruns = RerunWatch {
                seen: Some(noted),
                first_due: first,
            };
        }
    }
}
