//! Driving the simulated scale set service in-process: `SimHandle` methods that tests
//! and benchmarks call to configure it, inspect it, and script its failures.

use serde_json::Value;

use super::handle::SimHandle;
use super::scaleset_state::{ScaleSetSimConfig, SimSession};
use crate::timefmt::now_millis;

impl SimHandle {
    /// Changes how the simulated scale set service behaves (hold, BOM, TTLs...).
    pub fn scaleset_config(&self, f: impl FnOnce(&mut ScaleSetSimConfig)) {
        self.with_state(|s| f(&mut s.scalesets.config));
    }

    /// (id, name, labels, runner group id, disable_update) of every scale set.
    pub fn scale_sets(&self) -> Vec<(u64, String, Vec<String>, u64, bool)> {
        self.with_state(|s| {
            s.scalesets
                .scale_sets
                .values()
                .map(|x| {
                    (
                        x.id,
                        x.name.clone(),
                        x.labels.clone(),
                        x.runner_group_id,
                        x.disable_update,
                    )
                })
                .collect()
        })
    }

    /// Deletes a scale set under its listener (the "scale set deleted" case).
    pub fn delete_scale_set(&self, id: u64) -> bool {
        self.with_state(|s| s.scalesets.remove_scale_set(id))
    }

    /// Ends every session of a scale set (the "session gone" case).
    pub fn drop_scaleset_sessions(&self, scale_set_id: u64) {
        self.with_state(|s| {
            s.scalesets
                .sessions
                .retain(|_, x| x.scale_set_id != scale_set_id)
        });
    }

    /// Expires every queue token now (the "401 on the queue" case).
    pub fn expire_queue_tokens(&self) {
        self.with_state(|s| {
            for x in s.scalesets.sessions.values_mut() {
                x.token_expires_at = 0;
            }
        });
    }

    /// (message id, acknowledged, inner body) of a scale set's messages.
    pub fn scaleset_messages(&self, scale_set_id: u64) -> Vec<(i64, bool, String)> {
        self.with_state(|s| {
            s.scalesets
                .messages
                .iter()
                .filter(|m| m.scale_set_id == scale_set_id)
                .map(|m| (m.id, m.acked, m.body.clone()))
                .collect()
        })
    }

    /// How many session creations the service refused because another holder had the
    /// session (409), over the whole request log.
    pub fn session_conflicts(&self) -> usize {
        self.request_log()
            .iter()
            .filter(|e| e.endpoint.ends_with("/sessions") && e.status == 409)
            .count()
    }

    /// The number of sessions a scale set has.
    pub fn scaleset_sessions(&self, scale_set_id: u64) -> usize {
        self.with_state(|s| {
            s.scalesets
                .sessions
                .values()
                .filter(|x| x.scale_set_id == scale_set_id)
                .count()
        })
    }

    /// The statistics the service would report now.
    pub fn scaleset_statistics(&self, scale_set_id: u64) -> Value {
        self.with_state(|s| s.scaleset_statistics(scale_set_id))
    }

    /// Requeues a scale set job's assignment as GitHub does when no runner took it in
    /// time (`JobCompleted` canceled, then offered again); false unless still queued.
    pub fn scaleset_reassign(&self, job_id: u64) -> bool {
        // `with_state` wakes the long polls waiting for a message.
        self.with_state(|s| s.scaleset_reassign(job_id))
    }

    /// The session ids of a scale set.
    pub fn scaleset_session_ids(&self, scale_set_id: u64) -> Vec<String> {
        self.scaleset_session_field(scale_set_id, |x| x.id.clone())
    }

    /// The queue tokens of a scale set's sessions: secrets, for tests that check
    /// they are shown nowhere.
    pub fn scaleset_queue_tokens(&self, scale_set_id: u64) -> Vec<String> {
        self.scaleset_session_field(scale_set_id, |x| x.queue_token.clone())
    }

    fn scaleset_session_field(
        &self,
        scale_set_id: u64,
        field: impl Fn(&SimSession) -> String,
    ) -> Vec<String> {
        self.with_state(|s| {
            s.scalesets
                .sessions
                .values()
                .filter(|x| x.scale_set_id == scale_set_id)
                .map(&field)
                .collect()
        })
    }

    /// Opens a session on a scale set for another holder (another host or manager),
    /// as if it polled just now; returns its id. It expires like any other.
    pub fn scaleset_foreign_session(&self, scale_set_id: u64, owner: &str) -> String {
        self.with_state(|s| {
            let now = now_millis();
            let id = format!("foreign-{}", s.rng.hex(8));
            s.scalesets.sessions.insert(
                id.clone(),
                SimSession {
                    id: id.clone(),
                    scale_set_id,
                    owner: owner.to_string(),
                    queue_token: s.rng.hex(16),
                    token_expires_at: now + 3_600_000,
                    last_seen: now,
                    polls: 0,
                },
            );
            id
        })
    }
}
