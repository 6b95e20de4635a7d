//! Finding a scale set the coordinator created, by name, on a thread of its own (never
//! the loop's): a coordinated host starts and removes its runners through it without a
//! session.

use super::*;

/// A lookup of a scale set profile's scale set, on its own thread.
pub(super) struct Lookup {
    pub(super) shared: Arc<Shared>,
    pub(super) target: Target,
    pub(super) policy: ScalePolicy,
    pub(super) ties: Ties,
    pub(super) groups: Arc<GroupIds>,
    pub(super) stop: Receiver<()>,
}

impl Lookup {
    /// The scale set, by name in the profile's runner group (its id, else the Default
    /// group: the group a coordinator creates it in).
    pub(super) fn find(self) -> Found {
        let gh = clients::build(&self.shared, &self.target, &self.ties, self.stop)
            .map_err(|e| format!("credentials: {e}"))?;
        let client = Arc::new(ScaleSetClient::new(Arc::new(gh)));
        let group = self
            .groups
            .resolve(self.policy.runner_group_ref(), |name| {
                client.runner_group_by_name(name).map(|g| g.map(|g| g.id))
            })
            .map_err(|e| e.to_string())?;
        let Some(group) = group else {
            return Err(format!(
                "no runner group named {}",
                self.policy.runner_group.as_deref().unwrap_or_default()
            ));
        };
        match client.scale_set_by_name(group, &self.policy.name) {
            Ok(Some(s)) => Ok(Some((client, s.id))),
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Keeps a lookup's answer, and says what it was.
pub(super) fn note_found(target: &str, profile: &str, r: &mut Remote, answer: Found) {
    match answer {
        Ok(Some(found)) => {
            log_info!(
                "scaleset_found",
                target = target,
                profile = profile,
                scale_set = found.1
            );
            r.found = Some(found);
        }
        Ok(None) => log_info!(
            "scaleset_not_created_yet",
            target = target,
            profile = profile
        ),
        Err(e) => log_warn!(
            "scaleset_lookup_failed",
            target = target,
            profile = profile,
            error = e
        ),
    }
}
