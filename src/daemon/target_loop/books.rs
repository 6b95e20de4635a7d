//! The loop's books for `reconcile::record`: the store, keeping the intents a pass
//! recorded so the loop can start them.

use super::*;

impl TargetLoop {
    /// Records what the plan decided before anything external happens
    /// (`reconcile::record`): launches bound to free runners, and a `pending` row per
    /// intent (with its uid and lease).
    pub(super) fn record(
        &self,
        host: &Host,
        target: &Target,
        plan: &Plan,
        book: &mut crate::reconcile::LaunchBook,
        now: Millis,
    ) -> (Vec<Attempt>, Option<StoreError>) {
        for c in &plan.closed {
            log_info!(
                "launch_closed",
                lease = c.launch.launch.lease_id,
                why = format!("{:?}", c.why)
            );
        }
        let mut books = StoreBooks {
            store: &self.store,
            host,
            target,
            now,
            recorded: Vec::with_capacity(plan.intents.len()),
        };
        let (_, failed) = crate::reconcile::record::record(plan, book, &self.name, &mut books);
        (books.recorded, failed)
    }
}

/// The daemon's books for `reconcile::record`: the store, keeping the intents it
/// recorded for the loop to start.
pub(super) struct StoreBooks<'a> {
    store: &'a SqliteStore,
    host: &'a Host,
    target: &'a Target,
    now: Millis,
    recorded: Vec<Attempt>,
}
impl crate::reconcile::record::Books for StoreBooks<'_> {
    type Error = StoreError;

    fn intent(&mut self, i: &crate::reconcile::plan::Intent) -> Result<i64, StoreError> {
        let target = self.target;
        // Whether the start keeps its slot's `_work`, recorded with its intent so its
        // cleanup knows whatever the profile says by then.
        let keeps_work = self
            .store
            .profile(&i.profile)
            .is_ok_and(|p| crate::domain::workspace::keeps_work(&p, &target.scope));
        let a = starter::record_intent(
            self.store,
            self.host,
            &i.profile,
            &target.name,
            i.queued_at,
            i.runner_ids,
            keeps_work,
            self.now,
        )?;
        let id = a.id;
        self.recorded.push(a);
        Ok(id)
    }

    fn lease(&mut self, attempt: i64, lease: &str) -> Result<(), StoreError> {
        if let Some(a) = self.recorded.iter_mut().find(|a| a.id == attempt) {
            a.lease_id = Some(lease.to_string());
        }
        match self.store.set_lease(attempt, lease) {
            // Gone meanwhile: nothing to bind.
            Err(StoreError::NotFound { .. }) => Ok(()),
            r => r,
        }
    }
}
