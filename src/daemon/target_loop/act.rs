//! Acting on a pass's plan: each attempt's actions (inline, or handed to a worker),
//! and each recorded intent started or ended as the pass decided.

use super::*;

impl TargetLoop {
    /// A runner spawned by a daemon killed before it recorded the pid: found through
    /// the pid its own process wrote (`runner::attempt_pid_file`), and recorded now,
    /// so it is watched like any other instead of taken for gone while it runs a job.
    pub(super) fn recover_pids(&self, open: &mut [Attempt]) -> Result<(), StoreError> {
        for a in open.iter_mut().filter(|a| {
            a.target == self.name
                && a.state == AttemptState::Starting
                && a.pid.is_none()
                && !self.state.in_flight().contains(&a.id)
        }) {
            let file = runner::attempt_pid_file(&self.shared.state_dir, a.id);
            let since = watch::entered_at(a, AttemptState::Starting);
            if let Some((pid, start)) = runner::proc::recover_runner(&file, since) {
                log_info!("runner_recovered", attempt = a.id, pid = pid);
                a.pid = Some(pid);
                a.pid_start = Some(start);
                self.store.save_attempt(a)?;
            }
        }
        Ok(())
    }

    /// Carries out the plan's actions: up to the first that needs GitHub or the disk
    /// inline (state changes, signals), the rest on a worker.
    pub(super) fn act(
        &mut self,
        set: &Setting,
        open: &[Attempt],
        seen: &BTreeMap<i64, Seen>,
        actions: Vec<(i64, Vec<crate::reconcile::Action>)>,
        handed: &mut Vec<i64>,
        now: Millis,
    ) -> Result<(), StoreError> {
        let (target, profiles) = (&set.target, &set.profiles);
        let mut acted: BTreeSet<i64> = BTreeSet::new();
        for (id, actions) in actions {
            let Some(mut a) = open.iter().find(|a| a.id == id).cloned() else {
                continue;
            };
            acted.insert(id);
            note_exit(&mut a, seen.get(&id));
            let (inline, rest) = plan::split_at_io(actions);
            let timeouts = plan::timeouts_of(profiles, &a.profile);
            let scaleset = self.inbound.scaleset.client(&a.profile);
            let jitter = self.jitter.draw();
            let cx = Ctx {
                shared: &self.shared,
                store: &self.store,
                client: self.github.client.as_deref(),
                scope: &target.scope,
                timeouts,
                jitter,
                now,
                scaleset: scaleset.as_deref(),
            };
            if let Err(e) = actuator::apply(&cx, &mut a, inline) {
                // Not recorded (a full disk): the rest waits for a pass that can
                // record it, and the other attempts are still acted on.
                self.wrote("attempt", Err(e));
                continue;
            }
            // Before any worker reports: an attempt that just ended with a job must
            // keep that job out of a queue read before it took it, from the next pass.
            self.after_attempt(&a);
            if rest.is_empty() {
                continue;
            }
            let Some(client) = self.github.client.clone() else {
                // No client: nothing on GitHub can be done; the next pass decides again.
                continue;
            };
            handed.push(a.id);
            // What a worker finishes (a deregistration, a cleanup) ends the attempt:
            // from now on it serves no launch, whatever the store still says.
            lock(&self.shared.pool.book).leaving(a.id);
            self.io.send(
                Task::Apply {
                    attempt: a,
                    actions: rest,
                    timeouts,
                    scaleset,
                    jitter,
                },
                client,
                target,
            );
        }
        // An exit code is known only to the parent that reaps it, once: keep it even
        // when nothing else was decided this pass.
        for (id, s) in seen {
            if acted.contains(id) {
                continue;
            }
            if let Some(mut a) = open.iter().find(|a| a.id == *id).cloned()
                && note_exit(&mut a, Some(s))
            {
                self.store.save_attempt(&a)?;
            }
        }
        Ok(())
    }

    /// What the loop remembers of an attempt after acting on it.
    pub(super) fn after_attempt(&mut self, a: &Attempt) {
        crate::daemon::workers::runner_update::note_attempt(&self.shared, a);
        if a.cleaned {
            self.inbound.observer.forget(a.id);
        }
        self.inbound.queue.note(a);
    }

    /// Tells the pass what was handed to workers and recorded, and hands each intent
    /// to a worker or ends it, as the pass decides.
    pub(super) fn start_or_end(
        &mut self,
        set: &Setting,
        handed: &[i64],
        intents: Vec<Attempt>,
        now: Millis,
    ) {
        let decide: Vec<(i64, &str, bool)> = intents
            .iter()
            .map(|a| {
                let has_policy = set.profiles.iter().any(|p| p.name == a.profile);
                (a.id, a.profile.as_str(), has_policy)
            })
            .collect();
        let acted = Event::Acted {
            handed,
            intents: &decide,
        };
        let effects = self.state.on_event(acted, now);
        drop(decide);
        let mut intents: BTreeMap<i64, Attempt> = intents.into_iter().map(|a| (a.id, a)).collect();
        for e in effects {
            match e {
                Effect::Start(id) => {
                    let Some(a) = intents.remove(&id) else {
                        continue;
                    };
                    let policy = set.profiles.iter().find(|p| p.name == a.profile);
                    let (Some(policy), Some(client)) = (policy, self.github.client.clone()) else {
                        continue;
                    };
                    let scaleset = self
                        .inbound
                        .scaleset
                        .launcher(&a.profile)
                        .map(|(c, id)| (c.clone(), id));
                    self.io.send(
                        Task::Start {
                            attempt: a,
                            policy: Box::new(policy.clone()),
                            scaleset,
                        },
                        client,
                        &set.target,
                    );
                }
                Effect::EndNotStarted { attempt, why } => {
                    let Some(mut a) = intents.remove(&attempt) else {
                        continue;
                    };
                    let _ = a.end_not_started(why, now);
                    metrics_feed::ended(&self.shared.metrics, &a);
                    let r = self.store.save_attempt(&a);
                    self.wrote("attempt", r);
                }
                other => self.carry(vec![other], Some(set), now),
            }
        }
    }
}

/// Keeps a reaped runner's exit code on its attempt (only the parent that reaps it
/// ever knows it). True when it was new.
pub(super) fn note_exit(a: &mut Attempt, seen: Option<&Seen>) -> bool {
    if let Some(Seen {
        process: watch::ProcessStatus::Exited { code },
        ..
    }) = seen
        && a.exit_code.is_none()
    {
        a.exit_code = Some(*code);
        return true;
    }
    false
}
