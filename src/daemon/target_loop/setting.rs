//! What a pass reads first and follows: the host, the target, its profiles and its
//! mode, and the settings the loop's parts follow at once (the bound on requests in
//! flight, the client's fit, the scale set listeners).

use super::*;

/// What a pass reads first: the host, the target, its profiles and its mode.
pub(super) struct Setting {
    pub(super) host: Host,
    pub(super) target: Target,
    pub(super) profiles: Vec<ScalePolicy>,
    pub(super) mode: TargetMode,
}

impl TargetLoop {
    /// Reads what the pass works from and follows the target's settings (the bound
    /// on requests in flight, the client, the scale set listeners); `None` when the
    /// target is gone.
    pub(super) fn settle(&mut self, now: Millis) -> Result<Option<Setting>, StoreError> {
        let host = self.store.host_or_create()?;
        let target = match self.store.target(&self.name) {
            Ok(t) => t,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let profiles: Vec<ScalePolicy> = self
            .store
            .profiles()?
            .into_iter()
            .filter(|p| p.target == self.name)
            .collect();
        // The bound on requests in flight follows the target's setting at once; the
        // workers may grow to it as tasks come.
        self.inbound
            .scaleset
            .in_flight()
            .set_limit(target.max_in_flight);
        self.io.set_limit(target.max_in_flight as usize);
        self.inbound
            .scaleset
            .points()
            .set_limit(target.secondary_limit);
        let fit = if self
            .github
            .client
            .as_ref()
            .is_some_and(|c| c.base_url() == target.api_url && c.scope() == &target.scope)
        {
            self.credential_fit(&target)
        } else {
            self.github.client = None;
            ClientFit::Missing
        };
        if fit == ClientFit::CredentialChanged {
            // The scale set listeners' clients hold the old credential too: they
            // start again with the new one, as after SIGHUP.
            self.inbound.scaleset.reset();
        }
        let poll_every = poll_every(&target);
        let mode = self.shared.pool.mode(&self.name, now);
        // A coordinator divides a pool's points; a host on its own keeps to its share
        // of a credential other hosts may spend too.
        self.inbound
            .scaleset
            .points()
            .set_by_share(mode != crate::reconcile::TargetMode::Coordinated);
        let set = Setting {
            host,
            target,
            profiles,
            mode,
        };
        self.feed(Event::Client { fit, poll_every }, Some(&set), now);
        self.inbound.scaleset.sync(
            &set.target,
            &set.profiles,
            &set.host,
            mode,
            &self.shared,
            now,
        );
        Ok(Some(set))
    }
}

pub(super) fn poll_every(target: &Target) -> Millis {
    (target.poll_interval_secs as Millis) * 1000
}
