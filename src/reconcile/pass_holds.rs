//! The profiles' start holds as the pass keeps them: a host failure holds a
//! profile's starts, [`CRASHES_BEFORE_HOLD`] runners that crash at start in a row do
//! too, a runner that listens ends a crash streak, and a hold names the starts of its
//! profile still out so the workers withdraw them. Part of [`TargetState`]
//! (`reconcile::pass`); the waits are `hold::StartHold`'s.

use super::{Effect, Line, TargetState};
use crate::reconcile::hold::{CRASHES_BEFORE_HOLD, StartHold};
use crate::reconcile::plan::StartsSeen;
use crate::timefmt::Millis;

impl TargetState {
    /// A runner that listened ends its profile's crash streak (and a crash hold);
    /// [`CRASHES_BEFORE_HOLD`] crashes in a row hold the profile's starts, longer
    /// each time while none listens.
    pub(super) fn starts_seen(&mut self, seen: StartsSeen, now: Millis, out: &mut Vec<Effect>) {
        for profile in seen.listened {
            self.holds.crashes_in_a_row.remove(&profile);
            if self.holds.starts.get(&profile).is_some_and(|h| h.crashes) {
                self.holds.starts.remove(&profile);
                out.push(Effect::StartsResumed { profile });
            }
        }
        for (profile, why) in seen.crashed {
            let n = self
                .holds
                .crashes_in_a_row
                .entry(profile.clone())
                .or_default();
            *n = n.saturating_add(1);
            if *n >= CRASHES_BEFORE_HOLD {
                let why = format!("{n} in a row, the last {why}");
                self.hold_starts(profile, why, StartHold::after_crash, now, out);
            }
        }
    }

    /// A profile's start failed for a host reason: its starts are held.
    pub(super) fn hold_profile(
        &mut self,
        profile: String,
        why: String,
        now: Millis,
        out: &mut Vec<Effect>,
    ) {
        self.hold_starts(profile, why, StartHold::after_failure, now, out);
    }

    /// Holds a profile's starts after a host failure or runners' crashes. Starts that
    /// fail together while a hold already stands (sent before it) do not lengthen it.
    fn hold_starts(
        &mut self,
        profile: String,
        why: String,
        after: fn(Option<&StartHold>, String, Millis) -> StartHold,
        now: Millis,
        out: &mut Vec<Effect>,
    ) {
        let prev = self.holds.starts.get(&profile);
        if prev.is_some_and(|h| h.holds(now)) {
            return;
        }
        let hold = after(prev, why, now);
        out.push(Effect::Log(Line::StartsHeld {
            profile: profile.clone(),
            hold: hold.clone(),
        }));
        out.push(Effect::HoldStarts {
            profile: profile.clone(),
            until: hold.until,
            withdraw: self.holds.starts_of(&profile),
        });
        self.holds.starts.insert(profile, hold);
    }

    /// A hold whose time passed is shown as ended (it stays, so the next failure
    /// waits longer, until a start goes through).
    pub(super) fn expire_holds(&self, now: Millis, out: &mut Vec<Effect>) {
        for (p, h) in &self.holds.starts {
            if !h.holds(now) {
                out.push(Effect::StartsResumed { profile: p.clone() });
            }
        }
    }
}
