//! The target's reads as parts of the pass's state: each read GitHub answers (the
//! queue, the runner list, the guard's facts, the lost jobs) is a [`Slot`], due at a
//! time or in flight, and the queue read's run lists keep their own times
//! ([`RunLists`]). When each read is due, and how often, is the pass's rule
//! (`reconcile::pass`); this module only keeps the times.

use crate::timefmt::Millis;

/// One read: when it is next due, and whether it is on its way now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    next: Millis,
    in_flight: bool,
}

impl Slot {
    /// Its time has come and it is not already on its way.
    pub fn due(&self, now: Millis) -> bool {
        !self.in_flight && self.time_come(now)
    }

    /// Its time has come (whether or not a read is on its way).
    pub fn time_come(&self, now: Millis) -> bool {
        now >= self.next
    }

    pub fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// Sent now, due again at `next`.
    pub fn send(&mut self, next: Millis) {
        self.in_flight = true;
        self.next = next;
    }

    /// Not sent: due at `next`.
    pub fn put_off(&mut self, next: Millis) {
        self.next = next;
    }

    /// Due no sooner than `t` (a rate limit, a read kept across a restart).
    pub fn not_before(&mut self, t: Millis) {
        self.next = self.next.max(t);
    }

    /// Due at once (a credential changed, a reload).
    pub fn due_now(&mut self) {
        self.next = 0;
    }

    /// Its answer came back.
    pub fn answered(&mut self) {
        self.in_flight = false;
    }

    /// When it next falls due, if that is after `now` and it is not on its way (a
    /// read already due, or on its way, wakes no one: the pass that saw it decided).
    pub fn due_after(&self, now: Millis) -> Option<Millis> {
        (!self.in_flight && self.next > now).then_some(self.next)
    }
}

/// The target's reads.
#[derive(Debug, Default)]
pub struct Reads {
    /// The queued jobs (its pace is the budget's: `budget::Polling`).
    pub queue: Slot,
    /// GitHub's runner list.
    pub runners: Slot,
    /// The public-repository guard's facts.
    pub guard: Slot,
    /// The lost jobs due for a re-run (beside the others: not one at a time).
    pub reruns: Slot,
    pub run_lists: RunLists,
}

impl Reads {
    /// A read that goes one at a time is on its way: when GitHub answers one with a
    /// rate limit, no other is.
    pub fn one_out(&self) -> bool {
        self.queue.in_flight || self.runners.in_flight || self.guard.in_flight
    }

    /// The first time after `now` a read falls due (the queue's backstop among them).
    pub fn due_after(&self, now: Millis) -> Option<Millis> {
        let backstop = (self.run_lists.backstop_next > now).then_some(self.run_lists.backstop_next);
        [&self.queue, &self.runners, &self.guard, &self.reruns]
            .into_iter()
            .filter_map(|s| s.due_after(now))
            .chain(backstop)
            .min()
    }
}

/// The queue read's run lists, which go with it at their own times.
#[derive(Debug, Default)]
pub struct RunLists {
    /// While the target's webhooks come steadily, its run lists are not read again
    /// before this (`budget::HOOKED_POLL_EVERY` after the last read began).
    pub backstop_next: Millis,
    /// When a queue read next reads the in-progress run lists too.
    pub in_progress_next: Millis,
    /// The read on its way reads them (if it fails, the next read does).
    pub in_progress_sent: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_due_at_its_time_unless_on_its_way_and_a_hold_only_pushes_it_later() {
        let mut s = Slot::default();
        assert!(s.due(0));
        s.send(1_000);
        assert!(!s.due(5_000), "on its way");
        assert!(s.time_come(5_000));
        s.answered();
        assert!(!s.due(999) && s.due(1_000));
        s.not_before(500);
        assert!(s.due(1_000), "an earlier time does not bring it sooner");
        s.not_before(2_000);
        assert!(!s.due(1_999) && s.due(2_000));
        s.due_now();
        assert!(s.due(0));
        let mut r = Reads::default();
        r.reruns.send(10);
        assert!(!r.one_out(), "the lost jobs go beside the others");
        r.guard.send(10);
        assert!(r.one_out());
    }

    #[test]
    fn the_reads_wake_at_the_first_one_due_later_not_at_one_due_now_or_on_its_way() {
        let mut r = Reads::default();
        assert_eq!(
            r.due_after(0),
            None,
            "all due now: the pass that saw them decided"
        );
        r.queue.put_off(3_000);
        r.runners.send(1_000);
        r.guard.put_off(60_000);
        r.reruns.put_off(5_000);
        assert_eq!(r.due_after(0), Some(3_000), "the runner list is on its way");
        r.run_lists.backstop_next = 2_000;
        assert_eq!(r.due_after(0), Some(2_000));
        assert_eq!(r.due_after(3_000), Some(5_000), "a time come is no wake");
    }
}
