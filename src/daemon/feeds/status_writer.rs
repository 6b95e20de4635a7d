//! Writes what `status` and `top` show for one target and its profiles: each row only
//! when it changed (or every few seconds, so readers can tell it is fresh), so the
//! daemon's own writes do not churn the store; a queue sample every few seconds for
//! the pictures; and each scale set profile's session row, removed once its listener
//! no longer runs here.

use crate::domain::SessionState;
use crate::reconcile::allocate::Allocation;
use crate::store::{ProfileStatus, QueueSample, SessionStatus, Store, StoreError, TargetStatus};
use crate::timefmt::Millis;
use std::collections::{BTreeMap, HashMap, HashSet};

const SAMPLE_EVERY: Millis = 5_000;
const STATUS_REFRESH: Millis = 10_000;

#[derive(Default)]
pub struct StatusWriter {
    last_profiles: HashMap<String, (ProfileStatus, Millis)>,
    last_target: Option<(TargetStatus, Millis)>,
    next_sample: Millis,
    last_sessions: HashMap<String, (SessionState, Millis)>,
    /// Profiles whose session row this writer removed: not removed again every pass.
    no_session: HashSet<String>,
}

impl StatusWriter {
    /// Records the pass's rows. `last_error(profile)` is what the profile's row shows.
    pub fn record(
        &mut self,
        store: &dyn Store,
        alloc: &Allocation,
        target: TargetStatus,
        last_error: impl Fn(&str) -> Option<String>,
        now: Millis,
    ) -> Result<(), StoreError> {
        for pa in &alloc.profiles {
            let st = ProfileStatus {
                profile: pa.profile.clone(),
                demand: pa.demand,
                limiting: pa.limit.clone().into(),
                last_error: last_error(&pa.profile),
                updated_at: now,
            };
            let changed = match self.last_profiles.get(&pa.profile) {
                Some((old, at)) => {
                    old.demand != st.demand
                        || old.limiting != st.limiting
                        || old.last_error != st.last_error
                        || now - at >= STATUS_REFRESH
                }
                None => true,
            };
            if changed {
                store.put_profile_status(&st)?;
                self.last_profiles.insert(pa.profile.clone(), (st, now));
            }
        }
        let changed = match &self.last_target {
            Some((old, at)) => {
                old.last_error != target.last_error
                    || old.mode != target.mode
                    || now - at >= STATUS_REFRESH
            }
            None => true,
        };
        if changed {
            store.put_target_status(&target)?;
            self.last_target = Some((target, now));
        }
        if now >= self.next_sample {
            self.next_sample = now + SAMPLE_EVERY;
            let samples: Vec<QueueSample> = alloc
                .profiles
                .iter()
                .map(|pa| QueueSample {
                    profile: pa.profile.clone(),
                    at: now,
                    queued: pa.queued,
                    live: pa.live,
                })
                .collect();
            store.add_queue_samples(&samples)?;
        }
        Ok(())
    }
}

impl StatusWriter {
    /// Records the session rows of `target`'s scale set profiles: each running
    /// listener's when it changed (or every few seconds); the row of any of
    /// `profiles` with no listener here (directed, stopped, polling REST again) is
    /// removed, once.
    pub fn record_sessions(
        &mut self,
        store: &dyn Store,
        target: &str,
        sessions: &BTreeMap<String, SessionState>,
        profiles: &[&str],
        now: Millis,
    ) -> Result<(), StoreError> {
        for (profile, st) in sessions {
            let changed = match self.last_sessions.get(profile) {
                Some((old, at)) => old != st || now - at >= STATUS_REFRESH,
                None => true,
            };
            if changed {
                store.put_session_status(&SessionStatus {
                    profile: profile.clone(),
                    target: target.to_string(),
                    session: st.clone(),
                    updated_at: now,
                })?;
                self.last_sessions
                    .insert(profile.clone(), (st.clone(), now));
                self.no_session.remove(profile);
            }
        }
        for p in profiles {
            if !sessions.contains_key(*p) && !self.no_session.contains(*p) {
                store.delete_session_status(p)?;
                self.last_sessions.remove(*p);
                self.no_session.insert(p.to_string());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SessionPhase;
    use crate::store::SqliteStore;

    fn sessions(phase: SessionPhase) -> BTreeMap<String, SessionState> {
        let st = SessionState {
            phase: phase.into(),
            ..SessionState::default()
        };
        BTreeMap::from([("ss".to_string(), st)])
    }

    fn written(store: &SqliteStore) -> Vec<(String, Millis)> {
        let rows = store.session_statuses().unwrap();
        rows.into_iter()
            .map(|r| (r.session.phase.to_string(), r.updated_at))
            .collect()
    }

    #[test]
    fn session_rows_are_written_when_they_change_and_removed_once_without_a_listener() {
        let store = SqliteStore::open_in_memory().unwrap();
        let mut w = StatusWriter::default();
        let profiles = ["ss", "rest"];
        let held = sessions(SessionPhase::Held);
        w.record_sessions(&store, "t", &held, &profiles, 1_000)
            .unwrap();
        assert_eq!(written(&store), [("held".to_string(), 1_000)]);
        // Unchanged: not rewritten until the refresh is due.
        w.record_sessions(&store, "t", &held, &profiles, 2_000)
            .unwrap();
        assert_eq!(written(&store), [("held".to_string(), 1_000)]);
        w.record_sessions(&store, "t", &held, &profiles, 1_000 + STATUS_REFRESH)
            .unwrap();
        assert_eq!(written(&store), [("held".to_string(), 11_000)]);
        // Changed: written at once.
        let conflict = sessions(SessionPhase::Conflict);
        w.record_sessions(&store, "t", &conflict, &profiles, 11_500)
            .unwrap();
        assert_eq!(written(&store), [("conflict".to_string(), 11_500)]);
        // No listener any more: the row goes, and is not deleted again every pass.
        let none = BTreeMap::new();
        w.record_sessions(&store, "t", &none, &profiles, 12_000)
            .unwrap();
        assert!(written(&store).is_empty());
        w.record_sessions(&store, "t", &held, &profiles, 13_000)
            .unwrap();
        assert_eq!(written(&store), [("held".to_string(), 13_000)]);
    }
}
