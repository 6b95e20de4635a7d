//! The door of a listener: connections that have not yet sent what they owe (for the
//! coordinator, the WebSocket handshake; for [`Server`](super::Server), a request's
//! head and body, or the next request on a kept-alive connection). A slow or silent
//! client must not hold a place someone else needs, so:
//! - the whole wait has one deadline, enforced from outside the connection's thread
//!   (its socket is shut down), however slowly bytes trickle in;
//! - waiting connections are capped per source address and in total; a new
//!   connection is never turned away for that: the oldest waiting connection of its
//!   own source (at the per-source cap), or of the source holding the most (at the
//!   total cap), is closed to make room. A well-behaved client sends in milliseconds,
//!   so it gets through unless one source floods faster than that;
//! - connections past the door (an authenticated host, a request being handled) are
//!   counted apart, so waiting connections never cost them their place.
//!
//! One mechanism for both listeners: the coordinator re-exports it as
//! `coordinator::gate`.

/// A connection's number within its listener.
pub type ConnId = u64;
use std::collections::BTreeMap;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateLimits {
    /// Waiting (unauthenticated) connections at once, from every source.
    pub max_unauthenticated: usize,
    /// Waiting connections at once from one source address.
    pub max_per_source: usize,
    /// The whole handshake (for HTTP: the wait for a request and its reading) must
    /// finish within this.
    pub handshake: Duration,
}

/// One waiting connection as the pure choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    pub id: ConnId,
    pub source: IpAddr,
    pub since: Instant,
}

/// Which waiting connections to close so that one more from `source` fits: the
/// oldest of `source` at the per-source cap, then the oldest of the source with the
/// most waiting (ties: the oldest connection) at the total cap. Pure.
pub fn make_room(waiting: &[Waiting], source: IpAddr, limits: &GateLimits) -> Vec<ConnId> {
    let mut left: Vec<Waiting> = waiting.to_vec();
    left.sort_by_key(|w| (w.since, w.id));
    let mut out = Vec::new();
    let per = limits.max_per_source.max(1);
    while left.iter().filter(|w| w.source == source).count() >= per {
        let i = left
            .iter()
            .position(|w| w.source == source)
            .expect("counted");
        out.push(left.remove(i).id);
    }
    let total = limits.max_unauthenticated.max(1);
    while left.len() >= total {
        let mut counts: BTreeMap<IpAddr, usize> = BTreeMap::new();
        for w in &left {
            *counts.entry(w.source).or_default() += 1;
        }
        let most = counts.values().copied().max().unwrap_or(0);
        // `left` is oldest first: the first of a most-holding source is its oldest.
        let i = left
            .iter()
            .position(|w| counts[&w.source] == most)
            .expect("non-empty");
        out.push(left.remove(i).id);
    }
    out
}

struct Pending {
    source: IpAddr,
    since: Instant,
    sock: TcpStream,
}

/// The book of waiting connections, shared by the acceptor, the connection
/// threads and the reaper.
pub struct Gate {
    limits: GateLimits,
    pending: Mutex<BTreeMap<ConnId, Pending>>,
}

impl Gate {
    pub fn new(limits: GateLimits) -> Gate {
        Gate {
            limits,
            pending: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn limits(&self) -> &GateLimits {
        &self.limits
    }

    /// Takes a new connection in, closing the ones [`make_room`] names; returns how
    /// many it closed. `sock` is a clone of the connection's socket, kept to shut it
    /// down from outside its thread.
    pub fn admit(&self, id: ConnId, source: IpAddr, sock: TcpStream, now: Instant) -> usize {
        let mut book = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let waiting: Vec<Waiting> = book
            .iter()
            .map(|(id, p)| Waiting {
                id: *id,
                source: p.source,
                since: p.since,
            })
            .collect();
        let victims = make_room(&waiting, source, &self.limits);
        for v in &victims {
            if let Some(p) = book.remove(v) {
                let _ = p.sock.shutdown(Shutdown::Both);
            }
        }
        book.insert(
            id,
            Pending {
                source,
                since: now,
                sock,
            },
        );
        victims.len()
    }

    /// The connection authenticated: it leaves the book. `false` if it was closed
    /// meanwhile (evicted or out of time): the caller drops it.
    pub fn passed(&self, id: ConnId) -> bool {
        let mut book = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        book.remove(&id).is_some()
    }

    /// The connection ended before authenticating.
    pub fn left(&self, id: ConnId) {
        self.passed(id);
    }

    /// Shuts down every connection whose handshake has run past its deadline;
    /// returns how many.
    pub fn expire(&self, now: Instant) -> usize {
        let mut book = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let late: Vec<ConnId> = book
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.since) >= self.limits.handshake)
            .map(|(id, _)| *id)
            .collect();
        for id in &late {
            if let Some(p) = book.remove(id) {
                let _ = p.sock.shutdown(Shutdown::Both);
            }
        }
        late.len()
    }

    /// Unauthenticated connections now.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: ConnId, src: u8, t: &Instant, ms: u64) -> Waiting {
        Waiting {
            id,
            source: IpAddr::from([10, 0, 0, src]),
            since: *t + Duration::from_millis(ms),
        }
    }

    #[test]
    fn room_is_made_from_the_source_that_holds_the_most() {
        let t = Instant::now();
        let limits = GateLimits {
            max_unauthenticated: 4,
            max_per_source: 2,
            handshake: Duration::from_secs(5),
        };
        let a = IpAddr::from([10, 0, 0, 1]);
        let c = IpAddr::from([10, 0, 0, 3]);
        // Below both caps: nothing closed.
        assert!(make_room(&[w(1, 1, &t, 0)], a, &limits).is_empty());
        // Source 1 at its cap: its own oldest goes, not source 2's older one.
        let at_cap = [w(9, 2, &t, 0), w(1, 1, &t, 5), w(2, 1, &t, 6)];
        assert_eq!(make_room(&at_cap, a, &limits), vec![1]);
        // Total full (2 + 1 + 1): a newcomer from a third source closes the oldest of
        // the source with two, never the single ones.
        let full = [
            w(5, 4, &t, 0),
            w(1, 1, &t, 1),
            w(2, 1, &t, 2),
            w(7, 2, &t, 3),
        ];
        assert_eq!(make_room(&full, c, &limits), vec![1]);
        // Every source holds one: the oldest goes.
        let spread = [
            w(3, 4, &t, 2),
            w(1, 1, &t, 0),
            w(7, 2, &t, 3),
            w(2, 5, &t, 1),
        ];
        assert_eq!(make_room(&spread, c, &limits), vec![1]);
    }
}
