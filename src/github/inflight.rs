//! A bound on the requests one credential has in flight: a counting semaphore (a mutex
//! and a condition variable) that every client of the credential shares, the way they
//! share a `SharedHold`.
//!
//! GitHub counts concurrent requests per credential (100 at most, and a secondary rate
//! limit well before that for a burst), so the bound belongs to the credential, not to
//! one client: the target loop's client, its I/O workers and its scale set clients all
//! draw from one `InFlight`. A permit covers one HTTP exchange, from sending the request
//! to having read the response, never a backoff sleep or a long poll.
//!
//! Waiting is in slices, so that a waiter notices its shutdown channel (which a condition
//! variable cannot watch) within a slice, and gives up at a deadline rather than block
//! forever. Waiters are served in arrival order, so a steady stream of new requests
//! cannot starve one that has been waiting; except that requests that yield
//! ([`InFlight::acquire_yielding`]: runners' JIT configs, half a second each and paced by
//! GitHub's points anyway) hold at most half the permits while others wait, so that a
//! burst of starts never holds up the queue reads and the cleanups behind it, and is
//! never held up by them either.

use crate::domain::Target;
use crossbeam_channel::{Receiver, TryRecvError};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use crate::domain::target::{DEFAULT_MAX_IN_FLIGHT, MAX_IN_FLIGHT};

/// How long a waiter sleeps before it looks at its shutdown channel again. Short enough
/// that a stopping daemon is not held up noticeably; a release wakes waiters at once.
const SLICE: Duration = Duration::from_millis(20);

/// What the limiter's counters say now; for metrics and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlightUsage {
    /// Permits there are.
    pub limit: u32,
    /// Permits held now: requests in flight.
    pub in_use: u32,
    /// The most permits ever held at once (since the last `reset_peak`).
    pub peak: u32,
    /// Callers waiting for a permit now.
    pub waiting: u32,
}

/// Why no permit was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireError {
    /// The shutdown channel received or disconnected while waiting.
    Interrupted,
    /// No permit came free before the deadline.
    TimedOut,
}

#[derive(Debug, Default)]
struct Counts {
    limit: u32,
    in_use: u32,
    /// Of `in_use`, the permits of requests that yield.
    yielding: u32,
    peak: u32,
    /// Tickets of the waiters, oldest first, each with whether it yields: only the
    /// next in line ([`Counts::next`]) may take a permit.
    queue: VecDeque<(u64, bool)>,
    next_ticket: u64,
}

impl Counts {
    /// Whether requests that yield hold their share (half the permits, at least one)
    /// already: then the others waiting go first.
    fn yielding_full(&self) -> bool {
        self.yielding >= (self.limit / 2).max(1)
    }

    /// Whose turn it is: the oldest waiter, unless it yields and requests that yield
    /// hold their share; then the oldest that does not yield, if any.
    fn next(&self) -> Option<u64> {
        let others = self.queue.iter().find(|w| !w.1);
        match self.queue.front() {
            Some(w) if w.1 && self.yielding_full() => others.or(Some(w)),
            front => front,
        }
        .map(|w| w.0)
    }

    /// Whether a request may go at once: a permit is free and nobody whose turn comes
    /// first waits (a request that does not yield may pass the yielding ones while
    /// they hold their share).
    fn may_go_now(&self, yields: bool) -> bool {
        let passes = |w: &(u64, bool)| !yields && w.1 && self.yielding_full();
        self.in_use < self.limit && self.queue.iter().all(passes)
    }
}

#[derive(Debug)]
struct Inner {
    counts: Mutex<Counts>,
    freed: Condvar,
}

/// The requests-in-flight limiter of one credential. Cheap to clone; clones share the
/// permits.
#[derive(Debug, Clone)]
pub struct InFlight(Arc<Inner>);

/// One request's right to be in flight; given back when dropped.
#[derive(Debug)]
pub struct Permit(Arc<Inner>, bool);

fn lock(m: &Mutex<Counts>) -> MutexGuard<'_, Counts> {
    // A panic while counting must not wedge every client of the credential.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight::new(DEFAULT_MAX_IN_FLIGHT)
    }
}

impl InFlight {
    /// A limiter of `limit` permits, held to 1..=`MAX_IN_FLIGHT` (a target's
    /// `max_in_flight` is validated to that range already; 0 would deadlock).
    pub fn new(limit: u32) -> InFlight {
        InFlight(Arc::new(Inner {
            counts: Mutex::new(Counts {
                limit: limit.clamp(1, MAX_IN_FLIGHT),
                ..Counts::default()
            }),
            freed: Condvar::new(),
        }))
    }

    /// The limiter of a target's credential, with the target's `max_in_flight`.
    pub fn for_target(target: &Target) -> InFlight {
        InFlight::new(target.max_in_flight)
    }

    pub fn limit(&self) -> u32 {
        lock(&self.0.counts).limit
    }

    /// Changes the limit in place (a `target set NAME max_in_flight=N` the daemon
    /// reloads), so the clients sharing it need not be rebuilt. Lowered, the requests
    /// already out finish and no new one starts until fewer are in flight than the new
    /// limit; raised, waiters go at once.
    pub fn set_limit(&self, limit: u32) {
        let mut c = lock(&self.0.counts);
        c.limit = limit.clamp(1, MAX_IN_FLIGHT);
        if !c.queue.is_empty() {
            self.0.freed.notify_all();
        }
    }

    /// Requests in flight now.
    pub fn in_use(&self) -> u32 {
        lock(&self.0.counts).in_use
    }

    /// The most requests that were ever in flight at once.
    pub fn peak(&self) -> u32 {
        lock(&self.0.counts).peak
    }

    pub fn usage(&self) -> InFlightUsage {
        let c = lock(&self.0.counts);
        InFlightUsage {
            limit: c.limit,
            in_use: c.in_use,
            peak: c.peak,
            waiting: c.queue.len() as u32,
        }
    }

    /// Starts the peak over from what is in flight now (a benchmark's phase).
    pub fn reset_peak(&self) {
        let mut c = lock(&self.0.counts);
        c.peak = c.in_use;
    }

    /// Whether two handles share their permits (the same credential's limiter).
    pub fn same(&self, other: &InFlight) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A permit, at once or after waiting in turn. The wait ends with `Interrupted` when
    /// `shutdown` receives or disconnects, and with `TimedOut` at `deadline`.
    pub fn acquire(
        &self,
        shutdown: Option<&Receiver<()>>,
        deadline: Instant,
    ) -> Result<Permit, AcquireError> {
        self.acquire_as(shutdown, deadline, false)
    }

    /// [`InFlight::acquire`] for a request that lets every waiter that does not yield
    /// go first, whenever it came.
    pub fn acquire_yielding(
        &self,
        shutdown: Option<&Receiver<()>>,
        deadline: Instant,
    ) -> Result<Permit, AcquireError> {
        self.acquire_as(shutdown, deadline, true)
    }

    fn acquire_as(
        &self,
        shutdown: Option<&Receiver<()>>,
        deadline: Instant,
        yields: bool,
    ) -> Result<Permit, AcquireError> {
        let inner = &self.0;
        let mut c = lock(&inner.counts);
        if c.may_go_now(yields) {
            return Ok(self.take(&mut c, yields));
        }
        let ticket = c.next_ticket;
        c.next_ticket += 1;
        c.queue.push_back((ticket, yields));
        loop {
            if c.next() == Some(ticket) && c.in_use < c.limit {
                c.queue.retain(|w| w.0 != ticket);
                let permit = self.take(&mut c, yields);
                if c.in_use < c.limit && !c.queue.is_empty() {
                    // More than one permit came free: the next in line may go too.
                    inner.freed.notify_all();
                }
                return Ok(permit);
            }
            let interrupted =
                shutdown.is_some_and(|rx| !matches!(rx.try_recv(), Err(TryRecvError::Empty)));
            let now = Instant::now();
            if interrupted || now >= deadline {
                c.queue.retain(|w| w.0 != ticket);
                // Leaving may put someone else at the front of a queue with a free
                // permit: tell them rather than leave them to their next slice.
                inner.freed.notify_all();
                return Err(if interrupted {
                    AcquireError::Interrupted
                } else {
                    AcquireError::TimedOut
                });
            }
            let wait = SLICE.min(deadline - now);
            c = inner
                .freed
                .wait_timeout(c, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A permit if one is free and nobody waits for it.
    pub fn try_acquire(&self) -> Option<Permit> {
        let mut c = lock(&self.0.counts);
        (c.queue.is_empty() && c.in_use < c.limit).then(|| self.take(&mut c, false))
    }

    fn take(&self, c: &mut Counts, yields: bool) -> Permit {
        c.in_use += 1;
        c.yielding += u32::from(yields);
        c.peak = c.peak.max(c.in_use);
        Permit(self.0.clone(), yields)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut c = lock(&self.0.counts);
        c.in_use = c.in_use.saturating_sub(1);
        c.yielding = c.yielding.saturating_sub(u32::from(self.1));
        if !c.queue.is_empty() {
            // All, not one: only the front of the queue may take it, and a condition
            // variable cannot pick which waiter wakes.
            self.0.freed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn limits_are_held_to_their_range() {
        assert_eq!(InFlight::new(0).limit(), 1);
        assert_eq!(InFlight::new(500).limit(), MAX_IN_FLIGHT);
        assert_eq!(InFlight::default().limit(), DEFAULT_MAX_IN_FLIGHT);
    }

    #[test]
    fn permits_count_and_come_back_when_dropped() {
        let f = InFlight::new(2);
        let a = f.acquire(None, far()).unwrap();
        let b = f.try_acquire().unwrap();
        assert!(f.try_acquire().is_none(), "both permits are out");
        assert_eq!(f.usage().in_use, 2);
        drop(a);
        assert_eq!(f.in_use(), 1);
        let c = f.try_acquire().unwrap();
        drop((b, c));
        assert_eq!(
            f.usage(),
            InFlightUsage {
                limit: 2,
                in_use: 0,
                peak: 2,
                waiting: 0
            }
        );
        f.reset_peak();
        assert_eq!(f.peak(), 0);
        assert!(f.same(&f.clone()));
        assert!(!f.same(&InFlight::new(2)));
    }

    #[test]
    fn many_threads_never_hold_more_than_the_limit() {
        let f = InFlight::new(3);
        let now = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    for _ in 0..50 {
                        let _p = f.acquire(None, far()).unwrap();
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        std::thread::yield_now();
                        now.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert!(most.load(Ordering::SeqCst) <= 3);
        assert_eq!(f.in_use(), 0);
        assert!(f.peak() <= 3);
    }

    #[test]
    fn the_limit_changes_in_place() {
        let f = InFlight::new(2);
        let a = f.try_acquire().unwrap();
        let b = f.try_acquire().unwrap();
        f.set_limit(1);
        drop(a);
        assert!(f.try_acquire().is_none(), "one still out, at a limit of 1");
        drop(b);
        let c = f.try_acquire().unwrap();
        f.set_limit(3);
        let d = f.try_acquire().unwrap();
        let e = f.try_acquire().unwrap();
        assert_eq!(f.usage().in_use, 3);
        drop((c, d, e));
        f.set_limit(0);
        assert_eq!(f.limit(), 1, "never 0: nothing could ever be sent");
    }

    #[test]
    fn a_waiter_gives_up_at_its_deadline_and_on_shutdown() {
        let f = InFlight::new(1);
        let _held = f.try_acquire().unwrap();
        let soon = Instant::now() + Duration::from_millis(30);
        assert_eq!(f.acquire(None, soon).unwrap_err(), AcquireError::TimedOut);
        assert_eq!(f.usage().waiting, 0, "a waiter that left is not counted");

        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        drop(tx);
        let t = Instant::now();
        assert_eq!(
            f.acquire(Some(&rx), far()).unwrap_err(),
            AcquireError::Interrupted
        );
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn waiters_are_served_in_arrival_order() {
        let f = InFlight::new(1);
        let held = f.try_acquire().unwrap();
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for i in 0..4u32 {
                // Each joins the queue before the next starts.
                let deadline = Instant::now() + Duration::from_secs(10);
                s.spawn({
                    let (f, order) = (&f, &order);
                    move || {
                        let _p = f.acquire(None, far()).unwrap();
                        order.lock().unwrap().push(i);
                    }
                });
                while f.usage().waiting < i + 1 {
                    assert!(Instant::now() < deadline, "waiter {i} never queued");
                    std::thread::yield_now();
                }
            }
            drop(held);
        });
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn yielding_requests_hold_half_the_permits_while_others_wait() {
        let f = InFlight::new(2);
        // One start in flight holds the yielding share of 2 permits.
        let start = f.acquire_yielding(None, far()).unwrap();
        let held = f.try_acquire().unwrap();
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            // 0 and 1 are starts, 2 and 3 reads that came after them.
            for i in 0..4u32 {
                let deadline = Instant::now() + Duration::from_secs(10);
                s.spawn({
                    let (f, order) = (&f, &order);
                    move || {
                        let _p = if i < 2 {
                            f.acquire_yielding(None, far()).unwrap()
                        } else {
                            f.acquire(None, far()).unwrap()
                        };
                        order.lock().unwrap().push(i);
                    }
                });
                while f.usage().waiting < i + 1 {
                    assert!(Instant::now() < deadline, "waiter {i} never queued");
                    std::thread::yield_now();
                }
            }
            // The read's permit frees: the reads pass the starts, who hold their share.
            drop(held);
            let deadline = Instant::now() + Duration::from_secs(10);
            while order.lock().unwrap().len() < 2 {
                assert!(Instant::now() < deadline, "the reads never went");
                std::thread::yield_now();
            }
            drop(start);
        });
        assert_eq!(*order.lock().unwrap(), vec![2, 3, 0, 1]);
        // Below their share, starts keep their place in line.
        let mut c = Counts {
            limit: 4,
            in_use: 3,
            yielding: 1,
            ..Counts::default()
        };
        c.queue.push_back((7, true));
        c.queue.push_back((8, false));
        assert_eq!(c.next(), Some(7));
        assert!(!c.may_go_now(false) && !c.may_go_now(true));
        c.yielding = 2;
        assert_eq!(c.next(), Some(8), "at their share, the read goes first");
        assert!(
            !c.may_go_now(false),
            "a read waits behind the read before it"
        );
        c.queue.retain(|w| w.1);
        assert!(c.may_go_now(false), "only starts wait, at their share");
        assert!(!c.may_go_now(true));
    }
}
