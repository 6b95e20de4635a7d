//! Carrying out what the pass decided (`reconcile::pass::Effect`): building the
//! client, handing reads to the workers, recording holds, logging.

use super::*;

impl TargetLoop {
    /// Feeds an event to the pure state and carries out all that comes back: the one
    /// way an event reaches it, so no effect is dropped.
    pub(super) fn feed(&mut self, event: Event, set: Option<&Setting>, now: Millis) {
        let effects = self.state.on_event(event, now);
        self.carry(effects, set, now);
    }

    /// Carries out what the pass decided (a start's effects are `start_or_end`'s).
    pub(super) fn carry(&mut self, effects: Vec<Effect>, set: Option<&Setting>, now: Millis) {
        for e in effects {
            match e {
                Effect::BuildClient => {
                    if let Some(set) = set {
                        self.build_client(&set.target, now);
                    }
                }
                Effect::DropClient => {
                    self.github.client = None;
                    self.credential_built(None);
                }
                Effect::RecheckCredential => self.recheck_credential(),
                Effect::Send(read) => {
                    if let Some(set) = set {
                        self.send(read, set, now);
                    }
                }
                Effect::QueueEmpty => self.inbound.queue.empty_at(now),
                Effect::PersistHold(until) => {
                    let r = daemon_facts::put_rate_limit_hold(&self.store, &self.name, until);
                    if r.is_ok() {
                        self.feed(Event::HoldKept(until), None, now);
                    }
                    self.wrote("hold", r);
                }
                Effect::HoldStarts {
                    profile,
                    until,
                    withdraw,
                } => {
                    metrics_feed::start_held(&self.shared.metrics, &profile, true);
                    let why = format!(
                        "the profile's starts are held until {}",
                        crate::timefmt::format_rfc3339(until)
                    );
                    self.io.withdraw(&withdraw, &why);
                }
                Effect::StartsResumed { profile } => {
                    metrics_feed::start_held(&self.shared.metrics, &profile, false);
                }
                Effect::DeleteOrphans(runners) => {
                    if let Some(set) = set {
                        self.delete_orphans(runners, &set.target);
                    }
                }
                Effect::Start(_) | Effect::EndNotStarted { .. } => {}
                Effect::Log(line) => self.log(line),
            }
        }
    }

    /// Hands a read to a worker.
    pub(super) fn send(&mut self, read: Read, set: &Setting, now: Millis) {
        let Some(client) = self.github.client.clone() else {
            return;
        };
        let task = match read {
            Read::Runners => Task::ListRunners,
            Read::Demand {
                new_runs,
                known_runs,
                in_progress,
            } => Task::ReadDemand {
                repos: self.inbound.queue.begin_read(),
                any_public: set.profiles.iter().any(|p| p.allow_public),
                caps: DemandCaps {
                    new_runs,
                    known_runs,
                    in_progress,
                },
                held: self.inbound.queue.held_runs(),
            },
            Read::Guard(read) => Task::Guard {
                read,
                profiles: set.profiles.clone(),
            },
            // No other loop holds the host's runner install check, and it is due.
            Read::RunnerRelease => match self.shared.host.runner_update.claim(now) {
                Some(job) => Task::RunnerRelease { job },
                None => return,
            },
            Read::Reruns => Task::Reruns,
        };
        self.io.send(task, client, &set.target);
    }

    pub(super) fn log(&self, line: Line) {
        let target = &self.name;
        match line {
            Line::TargetError(error) => log_warn!("target_error", target = target, error = error),
            Line::TargetRecovered => log_info!("target_recovered", target = target),
            Line::CredentialChanged => log_info!(
                "credential_changed",
                target = target,
                note = "the credential is read again and tried at once"
            ),
            Line::PollingPaced { every, remaining } => log_info!(
                "polling_paced",
                target = target,
                every_ms = every,
                remaining = remaining
            ),
            Line::StartsHeld { profile, hold } => log_warn!(
                "starts_held",
                target = target,
                profile = profile,
                failures = hold.failures,
                until = crate::timefmt::format_rfc3339(hold.until),
                reason = hold.reason
            ),
            Line::InstallUnusable { profile, why } => log_warn!(
                "runner_install_unusable",
                target = target,
                profile = profile,
                error = why
            ),
            Line::InstallUsable { profile } => {
                log_info!("runner_install_usable", target = target, profile = profile)
            }
        }
    }

    /// Hands the registrations the pass found unexplained to a worker, saying first
    /// which: the log is their record (no attempt holds them).
    pub(super) fn delete_orphans(&mut self, runners: Vec<RegisteredRunner>, target: &Target) {
        let Some(client) = self.github.client.clone() else {
            return;
        };
        let names: Vec<&str> = runners.iter().map(|r| r.name.as_str()).collect();
        log_info!(
            "orphan_registrations_found",
            target = self.name,
            runners = names.join(",")
        );
        self.io
            .send(Task::DeleteRunners { runners }, client, target);
    }
}
