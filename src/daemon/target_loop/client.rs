//! The target's GitHub client: built from its credentials with the hold and the
//! conditional-request cache the last daemon kept, and what it keeps for the next.

use super::*;

/// The loop's GitHub side: the client, the credential it was built from (watched
/// for changes), and the shutdown its calls give up on.
pub(super) struct GitHub {
    pub(super) client: Option<Arc<GitHubClient>>,
    pub(super) credential: credential::CredentialWatch,
    pub(super) shutdown_rx: Receiver<()>,
}

impl GitHub {
    pub(super) fn new(shutdown_rx: Receiver<()>) -> GitHub {
        GitHub {
            client: None,
            credential: Default::default(),
            shutdown_rx,
        }
    }
}

impl TargetLoop {
    /// Writes what changed in the client's conditional-request cache to the store, so
    /// the next daemon's first poll is answered with 304s (issue 20). A failed write
    /// costs only that: the entries are written again when they change.
    pub(super) fn persist_etags(&self) {
        keep_etags(&self.store, &self.name, self.github.client.as_deref());
    }

    /// Builds the GitHub client from the target's credentials, with the hold and the
    /// conditional-request cache the last daemon kept; a failure is the target's
    /// visible error, tried again at the next poll, and stops nothing else.
    pub(super) fn build_client(&mut self, target: &Target, now: Millis) {
        let ties = self.inbound.scaleset.ties();
        let stamp = self.credential_stamp(target);
        let client =
            match clients::build(&self.shared, target, ties, self.github.shutdown_rx.clone()) {
                Ok(client) => client.with_etag_journal(),
                Err(error) => {
                    self.github.client = None;
                    self.credential_built(None);
                    let failed = Event::ClientFailed {
                        error,
                        poll_every: poll_every(target),
                    };
                    self.feed(failed, None, now);
                    return;
                }
            };
        // A retry-after or rate-limit reset recorded before a restart still holds.
        let kept_hold = daemon_facts::rate_limit_hold(&self.store, &self.name)
            .ok()
            .flatten()
            .filter(|t| *t > now);
        // What the last daemon's reads were answered with: its first poll costs 304s
        // for whatever has not changed since.
        match self.store.etags(&self.name) {
            Ok(kept) => client.seed_etags(kept.into_iter().map(|e| {
                let entry = Cached {
                    etag: e.etag,
                    body: e.body,
                    link: e.link,
                };
                (e.url, entry)
            })),
            Err(e) => log_warn!("etags_not_read", target = self.name, error = e),
        }
        if let Some(t) = kept_hold {
            client.hold_until(t);
        }
        self.seed_points(target, now);
        self.github.client = Some(Arc::new(client));
        self.credential_built(Some(crate::github::auth::CredentialSource {
            reference: target.credential.clone(),
            stamp,
        }));
        let runners_read_at = daemon_facts::runners_seen(&self.store, &self.name)
            .ok()
            .flatten()
            .map(|seen| seen.at);
        let in_progress_read_at = daemon_facts::in_progress_read(&self.store, &self.name)
            .ok()
            .flatten();
        let built = Event::ClientBuilt {
            kept_hold,
            runners_read_at,
            in_progress_read_at,
        };
        self.feed(built, None, now);
    }

    /// A new daemon's points book counts the JIT configs an earlier life asked for
    /// within the last minute (GitHub still counts them): their `pending` rows.
    fn seed_points(&self, target: &Target, now: Millis) {
        use crate::reconcile::points::WINDOW;
        let points = self.inbound.scaleset.points();
        if !points.book().is_empty() {
            return;
        }
        let filter = crate::store::AttemptFilter {
            limit: Some(1000),
            ..Default::default()
        };
        let recent = match self.store.attempts(&filter) {
            Ok(all) => all
                .iter()
                .filter(|a| a.target == self.name && a.created_at > now - WINDOW)
                .count(),
            Err(e) => {
                log_warn!("recent_starts_not_read", target = self.name, error = e);
                0
            }
        };
        let route = crate::github::secondary::jit_endpoint(&target.scope);
        points.book().seed(route, "POST", recent as u32, now);
    }

    /// What the client last heard of its credential's primary limits (none before its
    /// first answer, or without a client).
    pub(super) fn rate_limits(&self) -> crate::github::RateLimitSnapshot {
        self.github
            .client
            .as_ref()
            .map(|c| c.rate_limit_snapshot())
            .unwrap_or_default()
    }

    /// What the credential last heard of its limits, for the coordinator's budget.
    pub(super) fn limit_report(
        &self,
        set: &Setting,
        held_until: Millis,
    ) -> crate::coordinator::protocol::LimitReport {
        let rate = self.rate_limits();
        crate::coordinator::protocol::LimitReport {
            target: self.name.clone(),
            held_until,
            remaining: rate.remaining,
            reset: rate.reset,
            secondary_hits: self.inbound.scaleset.points().hits(),
            points_limit: Some(set.target.secondary_limit.unwrap_or(0)),
        }
    }

    /// Until when the credential is held: the client's own rate-limit hold, or the
    /// hold it shares with the scale set listeners (which may have met it).
    pub(super) fn credential_hold(&self) -> Millis {
        self.github
            .client
            .as_ref()
            .and_then(|c| c.rate_limit_snapshot().limited_until)
            .unwrap_or(0)
            .max(self.inbound.scaleset.shared_hold().until())
    }
}
