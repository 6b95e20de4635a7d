//! Writes what `status` and `top` show for one target and its profiles: each row only
//! when it changed (or every few seconds, so readers can tell it is fresh), so the
//! daemon's own writes do not churn the store; and a queue sample every few seconds
//! for the pictures.

use crate::reconcile::allocate::Allocation;
use crate::store::{ProfileStatus, QueueSample, Store, StoreError, TargetStatus};
use crate::timefmt::Millis;
use std::collections::HashMap;

const SAMPLE_EVERY: Millis = 5_000;
const STATUS_REFRESH: Millis = 10_000;

#[derive(Default)]
pub struct StatusWriter {
    last_profiles: HashMap<String, (ProfileStatus, Millis)>,
    last_target: Option<(TargetStatus, Millis)>,
    next_sample: Millis,
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
