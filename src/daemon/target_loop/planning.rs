//! Gather, plan and record: what each live attempt shows, then `reconcile::plan`
//! and `reconcile::record` under the allocation lock, then what the plan leaves for
//! later passes.

use super::*;

impl TargetLoop {
    /// What the webhook deliveries said of this target's runs since the last pass
    /// joins its queue (`RestQueue::hear`): a queued job is demand at this pass.
    pub(super) fn hear_webhooks(&mut self, set: &Setting) {
        let scope = match set.target.scope {
            TargetScope::Org { .. } => Scope::Org(&set.profiles),
            TargetScope::Repo { .. } => Scope::Repo,
        };
        let book = lock(&self.shared.heard.hooks);
        self.inbound
            .queue
            .hear(&book, |repo| set.target.scope.covers(repo), scope);
    }

    /// Gather: look at each attempt no worker holds, take what the scale set
    /// listeners handed over and the runner list a read brought.
    pub(super) fn gather(
        &mut self,
        set: &Setting,
        contain: &contain::Containment,
    ) -> Result<Gathered, StoreError> {
        let mut open = self.store.open_attempts(&set.host.id)?;
        self.recover_pids(&mut open)?;
        let fresh_list = self.inbound.fresh_runners.take();
        let mut seen: BTreeMap<i64, Seen> = BTreeMap::new();
        for a in open
            .iter()
            .filter(|a| a.target == self.name && a.state.is_live())
            .filter(|a| !self.state.in_flight().contains(&a.id))
        {
            let list = fresh_list.as_ref().map(|(l, at)| (l.as_slice(), *at));
            let s = self
                .inbound
                .observer
                .see(&self.shared.state_dir, a, list, contain);
            seen.insert(a.id, s);
        }
        let owners = self.inbound.scaleset.take();
        self.shared
            .note_owners(owners.iter().map(|(n, o)| (n.as_str(), o.clone())));
        self.attach_owners(&mut open)?;
        Ok(Gathered {
            open,
            seen,
            runners: fresh_list.map(|(l, _)| l),
        })
    }

    /// Copies whose job each of this target's attempts ran, and its job id, into its
    /// row (`Attempt::take_owner`), from what the demand sources said
    /// (`Shared::owners`), before the plan reads them: once per attempt, and never
    /// into one a worker holds (its copy would overwrite it).
    fn attach_owners(&self, open: &mut [Attempt]) -> Result<(), StoreError> {
        let in_flight = self.state.in_flight();
        for a in open
            .iter_mut()
            .filter(|a| a.target == self.name && a.owner.is_none() && !in_flight.contains(&a.id))
        {
            if let Some(owner) = self.shared.owner_of(&a.runner_name) {
                a.take_owner(owner);
                self.store.save_attempt(a)?;
            }
        }
        Ok(())
    }

    /// Plan and record under the allocation lock, so two loops (or a loop and a
    /// coordinator launch) never spend one slot of capacity or one uid. Returns the
    /// plan and the intents recorded.
    pub(super) fn plan_and_record(
        &mut self,
        set: &Setting,
        g: &Gathered,
        unfit: &BTreeMap<String, Unfit>,
        contain: &contain::Containment,
        now: Millis,
    ) -> Result<(Plan, Vec<Attempt>), StoreError> {
        let draining = set.host.draining || self.shared.stopping();
        let can_start = self.state.can_start(now);
        let credential_hold = self.credential_hold();
        let shared = self.shared.clone();
        let _guard = lock(&shared.alloc_lock);
        let host = self.store.host_or_create()?;
        let open = plan::host_view(&g.open, self.store.open_attempts(&host.id)?, &self.name);
        let free_uids = match &contain.isolation {
            InEffect::Uids(range) if can_start => {
                Some(self.uids.free(*range, &open, host.capacity as usize, now))
            }
            _ => None,
        };
        let ended = self.inbound.queue.ended_since_read();
        let jobs = if all_directed(&host, &set.profiles, set.mode) {
            Vec::new()
        } else {
            self.inbound.queue.jobs.clone()
        };
        let scaleset_seen = self.inbound.scaleset.seen();
        let scaleset_queued = self.inbound.scaleset.queued();
        let observed = Observed {
            target: &self.name,
            host: &host,
            profiles: &set.profiles,
            open: &open,
            seen: &g.seen,
            in_flight: self.state.in_flight(),
            mode: set.mode,
            draining,
            jobs: &jobs,
            queue_read_at: self.inbound.queue.read_at,
            ended_since_read: &ended,
            scaleset: &scaleset_seen,
            scaleset_queued: &scaleset_queued,
            unfit,
            can_start,
            rate_limited_until: self.state.rate_limited_until(credential_hold, now),
            credentials_refused_since: self.state.credentials_refused_since(),
            jit_room: Some(
                self.inbound
                    .scaleset
                    .points()
                    .jit_room(&set.target.scope, now),
            ),
            free_uids: free_uids.as_deref(),
            surplus: self.state.surplus(),
            runners: g.runners.as_deref(),
        };
        let mut book = lock(&shared.pool.book);
        let plan = plan::plan(&observed, &mut book, now);
        // An intent that cannot be written is a start that does not happen; the
        // pass still watches and cleans.
        let (intents, failed) = self.record(&host, &set.target, &plan, &mut book, now);
        let rest = room::rest_starts(intents.iter().map(|a| a.profile.as_str()), &set.profiles);
        self.inbound
            .scaleset
            .points()
            .reserve_jit(&set.target.scope, rest, now);
        self.wrote("intents", failed.map_or(Ok(()), Err));
        drop(book);
        shared.pool.set_view(
            &self.name,
            TargetView {
                unfit: unfit.clone(),
                demand: plan.standalone.clone(),
                limits: Some(self.limit_report(set, credential_hold)),
            },
        );
        Ok((plan, intents))
    }

    /// What the plan leaves for later passes (surplus, room, uids), the status rows
    /// and the metrics; the scale set messages it acted on are acknowledged.
    pub(super) fn note_plan(
        &mut self,
        plan: &Plan,
        set: &Setting,
        installs: pass::Installs,
        host_unfit: &BTreeMap<&str, String>,
        now: Millis,
    ) {
        let planned = pass::Planned {
            installs,
            host_unfit: unfit::first_host_unfit(host_unfit),
            ..room::planned(plan, &set.profiles)
        };
        // A crash hold's log line and the workers' hold, when this pass made one.
        self.feed(Event::Planned(planned), Some(set), now);
        let status = self.record_status(plan, &set.profiles, set.mode, host_unfit, now);
        self.wrote("status", status);
        metrics_feed::demand(&self.shared.metrics, &plan.allocation);
        metrics_feed::target(
            &self.shared.metrics,
            &self.name,
            self.github.client.as_deref(),
            self.state.pace().map(|p| p.every),
            now,
        );
        self.inbound.scaleset.handed_over();
    }
}
