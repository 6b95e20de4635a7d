//! What the loop shows and keeps apart from the plan: why profiles are unfit, the
//! status rows, and store writes that fail.

use super::*;

/// Lines of one failure that repeats pass after pass, at most so many a window.
const REPEATED_LINES: u32 = 3;
const REPEATED_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// The store writes of the loop's passes: the status rows, and failures as logged.
pub(super) struct Writers {
    pub(super) status: StatusWriter,
    /// The write of a pass that last failed (a full disk: SQLITE_FULL), so it is
    /// logged when it fails and when writes work again, not every pass.
    pub(super) failing: Option<String>,
    /// Whether a write of this pass failed.
    pub(super) failed_now: bool,
    /// Bounds the lines of failures that repeat pass after pass (issue 33: a full
    /// disk logged `store_write_failed` about 4.6 times a second).
    pub(super) repeats: crate::logging::Repeats,
}

impl Writers {
    pub(super) fn new() -> Writers {
        Writers {
            status: StatusWriter::default(),
            failing: None,
            failed_now: false,
            repeats: crate::logging::Repeats::new(REPEATED_LINES, REPEATED_WINDOW),
        }
    }
}

impl TargetLoop {
    /// Notes a store write of the pass: a failure is logged when it first fails (or
    /// fails differently), and the pass goes on.
    pub(super) fn wrote(&mut self, what: &str, r: Result<(), StoreError>) {
        if let Err(e) = r {
            self.writers.failed_now = true;
            let msg = format!("{what}: {e}");
            // Writes of one pass may fail in turn with different words: the repeats
            // bound what the change of words lets through.
            if self.writers.failing.as_deref() != Some(msg.as_str()) {
                match self
                    .writers
                    .repeats
                    .admit("store_write_failed", std::time::Instant::now())
                {
                    Some(0) => log_warn!("store_write_failed", target = self.name, error = msg),
                    Some(n) => log_warn!(
                        "store_write_failed",
                        target = self.name,
                        error = msg,
                        suppressed = n
                    ),
                    None => {}
                }
            }
            self.writers.failing = Some(msg);
        }
    }

    /// Profiles that cannot start runners now, with the reason `status` shows.
    pub(super) fn unfit(
        &mut self,
        target: &Target,
        profiles: &[ScalePolicy],
        contain: &contain::Containment,
        now: Millis,
    ) -> (BTreeMap<String, Unfit>, pass::Installs) {
        // An `oci` profile's runner install is in its image, not on the host.
        let install_errors: BTreeMap<String, String> = profiles
            .iter()
            .filter(|p| p.execution != crate::domain::Execution::Oci)
            .filter_map(|p| {
                runner::check_install(&starter::runner_dir(&self.shared.state_dir, p))
                    .err()
                    .map(|e| (p.name.clone(), e.to_string()))
            })
            .collect();
        let mut scaleset_unready = BTreeMap::new();
        self.inbound
            .scaleset
            .add_unfit(profiles, &mut scaleset_unready);
        let refused = match &contain.isolation {
            InEffect::Refused { why } => Some(why.as_str()),
            _ => None,
        };
        let no_client = (!self.state.has_client()).then(|| {
            self.state
                .error()
                .map_or_else(|| "no credentials".into(), ToString::to_string)
        });
        let disk_full = self.shared.disk_reason();
        let mut host_unfit = self.shared.fitness_reasons();
        crate::daemon::workers::oci::add_unjudged(&self.shared, profiles, &mut host_unfit);
        let unfit = unfit::unfit(
            &Fitness {
                profiles,
                org: matches!(target.scope, TargetScope::Org { .. }),
                isolation_refused: refused,
                disk_full: disk_full.as_deref(),
                host_unfit: &host_unfit,
                holds: self.state.holds(),
                no_client: no_client.as_deref(),
                public_repo: self.state.public_repo(),
                credentials_refused_since: self.state.credentials_refused_since(),
                group_public: self.state.group_public(),
                install_errors: &install_errors,
                scaleset_unready: &scaleset_unready,
            },
            now,
        );
        let installs = pass::Installs {
            errors: install_errors,
            profiles: profiles.iter().map(|p| p.name.clone()).collect(),
        };
        (unfit, installs)
    }

    /// Writes what `status` and `top` show, when it changed.
    pub(super) fn record_status(
        &mut self,
        plan: &Plan,
        profiles: &[ScalePolicy],
        mode: TargetMode,
        host_unfit: &BTreeMap<&str, String>,
        now: Millis,
    ) -> Result<(), StoreError> {
        let rate = self
            .github
            .client
            .as_ref()
            .map(|c| c.rate_limit_snapshot())
            .unwrap_or_default();
        let target = TargetStatus {
            target: self.name.clone(),
            mode: mode.into(),
            last_error: self.state.error().map(ToString::to_string),
            error_kind: self
                .state
                .error()
                .map(crate::reconcile::pass::TargetError::kind),
            rate_limit_remaining: rate.remaining.map(|r| r as i64),
            rate_limit_limit: rate.limit.map(|r| r as i64),
            rate_limit_reset: rate.reset,
            poll_every_ms: self.state.pace().map(|p| p.every),
            updated_at: now,
        };
        let last_error = |profile: &str| {
            self.state.status_error(
                self.inbound.queue.visibility_note.as_deref(),
                self.inbound.scaleset.error(profile),
                // A required check of the host that stops the profile is its
                // last error whatever the demand; else why waiting jobs do not fit.
                host_unfit
                    .get(profile)
                    .cloned()
                    .or_else(|| plan.demand.unfit_reason_for(profile)),
            )
        };
        self.writers
            .status
            .record(&self.store, &plan.allocation, target, last_error, now)?;
        // Every profile of the target, so a row outlives neither its listener nor a
        // switch back to REST polling.
        let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        self.writers.status.record_sessions(
            &self.store,
            &self.name,
            &self.inbound.scaleset.sessions(),
            &names,
            now,
        )
    }

    /// Stops the scale set listeners (their sessions are deleted) and records their
    /// rows as closed, so `status` does not show a session the daemon gave up.
    pub(super) fn close_sessions(&mut self) {
        let ended = self.inbound.scaleset.stop();
        if ended.is_empty() {
            return;
        }
        let now = now_millis();
        if let Err(e) =
            self.writers
                .status
                .record_sessions(&self.store, &self.name, &ended, &[], now)
        {
            log_warn!("session_rows_not_written", target = self.name, error = e);
        }
    }
}
