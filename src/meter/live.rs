//! Live meters: which of the sampler's figures the daemon writes to the store while a runner lives, and when (pure: `now` is passed in).
//!
//! The sampler reports every second; [`LiveBook`] keeps each live attempt's latest
//! figures and the CPU % over the last sampling interval, and [`LiveBook::due`] hands
//! out the rows to write: an attempt's first sample at once, then at most one row per
//! [`WRITE_EVERY`], and only when a new sample came in since. Each row written is also
//! one point of the attempt's sparkline ring (`seq % RING_SLOTS`), so the store keeps
//! one meter row and at most [`RING_SLOTS`] points per attempt not yet cleaned.

use super::sampler::MeterReport;
use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// An attempt's meter row is rewritten at most this often (the issue asks for 5 s at
/// the outside; 2 s keeps `top` lively at one small transaction per 2 s).
pub const WRITE_EVERY: Millis = 2_000;

/// Sparkline points kept per live attempt: 60 × 2 s, the last two minutes.
pub const RING_SLOTS: u64 = 60;

/// One live attempt's figures as the store keeps them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveMeter {
    pub attempt: i64,
    /// When the sample was taken (received from the sampler).
    pub at: Millis,
    /// Resident memory now.
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// CPU time so far (the largest total seen).
    pub cpu_millis: u64,
    /// CPU use over the last sampling interval: 100 is one core busy.
    pub cpu_percent: f64,
    pub processes: u32,
    /// How many rows the daemon has written for this attempt (since it started):
    /// the sparkline slot is `seq % RING_SLOTS`.
    pub seq: u64,
}

/// One sparkline point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeterPoint {
    pub at: Millis,
    pub rss_bytes: u64,
    pub cpu_percent: f64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    latest: LiveMeter,
    /// A sample came in since the last row was handed out.
    fresh: bool,
    written_at: Option<Millis>,
    next_seq: u64,
}

/// The daemon's in-memory side of the live meters (owned by the main thread).
#[derive(Debug, Default)]
pub struct LiveBook {
    entries: HashMap<i64, Entry>,
}

impl LiveBook {
    pub fn new() -> LiveBook {
        LiveBook::default()
    }

    /// Takes one batch of the sampler's reports, received at `now`.
    pub fn observe(&mut self, reports: &[MeterReport], now: Millis) {
        for r in reports {
            let usage = r.meter.last.unwrap_or(r.usage);
            let e = self.entries.entry(r.attempt).or_insert(Entry {
                latest: LiveMeter {
                    attempt: r.attempt,
                    at: now,
                    rss_bytes: 0,
                    peak_rss_bytes: 0,
                    cpu_millis: r.meter.cpu_millis,
                    cpu_percent: 0.0,
                    processes: 0,
                    seq: 0,
                },
                fresh: false,
                written_at: None,
                next_seq: 0,
            });
            let prev = e.latest;
            let cpu_percent = if now > prev.at && e.fresh_or_written() {
                let used = r.meter.cpu_millis.saturating_sub(prev.cpu_millis);
                used as f64 * 100.0 / (now - prev.at) as f64
            } else {
                prev.cpu_percent
            };
            e.latest = LiveMeter {
                attempt: r.attempt,
                at: now,
                rss_bytes: usage.rss_bytes,
                peak_rss_bytes: r.meter.peak_rss_bytes.max(usage.rss_bytes),
                cpu_millis: r.meter.cpu_millis,
                cpu_percent,
                processes: usage.processes,
                seq: e.next_seq,
            };
            e.fresh = true;
        }
    }

    /// Forgets attempts that are no longer live (the sampler's list without them).
    pub fn retain(&mut self, live: impl Fn(i64) -> bool) {
        self.entries.retain(|id, _| live(*id));
    }

    /// The rows to write now, by attempt id, and marks them written: every attempt
    /// with a sample not yet written whose last row is [`WRITE_EVERY`] old or that
    /// has none.
    pub fn due(&mut self, now: Millis) -> Vec<LiveMeter> {
        let mut rows: Vec<LiveMeter> = Vec::new();
        for e in self.entries.values_mut() {
            let time = e.written_at.is_none_or(|w| now - w >= WRITE_EVERY);
            if e.fresh && time {
                e.latest.seq = e.next_seq;
                rows.push(e.latest);
                e.next_seq += 1;
                e.written_at = Some(now);
                e.fresh = false;
            }
        }
        rows.sort_by_key(|m| m.attempt);
        rows
    }

    /// The latest figures of every attempt, written or not (for metrics).
    pub fn latest(&self) -> impl Iterator<Item = &LiveMeter> {
        self.entries.values().map(|e| &e.latest)
    }
}

impl Entry {
    /// The previous figures are a real sample, not the placeholder of a first one.
    fn fresh_or_written(&self) -> bool {
        self.fresh || self.written_at.is_some()
    }
}

/// One profile's live runners on a host, added up, as a host reports them to its
/// coordinator (`coordinator::protocol::Status::meters`) and the coordinator's store
/// keeps them: per-profile totals keep what a host sends bounded by its profiles,
/// however many runners it has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileMeters {
    /// Live runners with a meter reading.
    pub runners: u32,
    pub rss_bytes: u64,
    /// CPU time used so far by those runners.
    pub cpu_millis: u64,
    /// CPU over the last interval, in percent of one core (may pass 100).
    pub cpu_percent: u32,
    pub processes: u32,
}

/// One profile's live attempts added up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Attempts with a meter.
    pub metered: u32,
    pub rss_bytes: u64,
    pub cpu_millis: u64,
    pub cpu_percent: f64,
    pub processes: u32,
}

/// Per-profile totals of the given (profile, meter) pairs; the caller passes only
/// live attempts.
pub fn totals<'a>(
    meters: impl IntoIterator<Item = (&'a str, &'a LiveMeter)>,
) -> BTreeMap<String, Totals> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for (profile, m) in meters {
        let t = out.entry(profile.to_string()).or_default();
        t.metered += 1;
        t.rss_bytes += m.rss_bytes;
        t.cpu_millis += m.cpu_millis;
        t.cpu_percent += m.cpu_percent;
        t.processes += m.processes;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::{Meter, Usage};

    fn report(attempt: i64, meter: &mut Meter, rss: u64, cpu: u64, procs: u32) -> MeterReport {
        let usage = Usage {
            rss_bytes: rss,
            cpu_millis: cpu,
            processes: procs,
        };
        meter.observe(usage);
        MeterReport {
            attempt,
            usage,
            meter: *meter,
            oom_killed: false,
        }
    }

    #[test]
    fn first_sample_is_written_at_once_then_at_most_every_interval() {
        let mut book = LiveBook::new();
        let mut m = Meter::new();
        assert!(book.due(0).is_empty(), "nothing sampled, nothing written");
        book.observe(&[report(7, &mut m, 100, 0, 1)], 1_000);
        let rows = book.due(1_000);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].attempt, rows[0].rss_bytes, rows[0].seq),
            (7, 100, 0)
        );

        book.observe(&[report(7, &mut m, 200, 500, 2)], 2_000);
        assert!(book.due(2_000).is_empty(), "1 s after the last row");
        book.observe(&[report(7, &mut m, 150, 1_000, 2)], 3_000);
        let rows = book.due(3_000);
        assert_eq!(rows.len(), 1, "2 s after the last row");
        let r = rows[0];
        assert_eq!(
            (r.rss_bytes, r.peak_rss_bytes, r.cpu_millis),
            (150, 200, 1_000)
        );
        assert_eq!(r.processes, 2);
        assert_eq!(r.seq, 1);
        assert_eq!(r.at, 3_000);
        assert!(book.due(9_000).is_empty(), "no new sample, no new row");
    }

    #[test]
    fn cpu_percent_is_over_the_last_interval() {
        let mut book = LiveBook::new();
        let mut m = Meter::new();
        book.observe(&[report(1, &mut m, 1, 10_000, 1)], 0);
        assert_eq!(book.due(0)[0].cpu_percent, 0.0, "no interval yet");
        // 1.5 s of CPU in 1 s: one and a half cores.
        book.observe(&[report(1, &mut m, 1, 11_500, 1)], 1_000);
        book.observe(&[report(1, &mut m, 1, 11_750, 1)], 2_000);
        let r = book.due(2_000)[0];
        assert_eq!(r.cpu_percent, 25.0);
        // A tree that lost an unwaited child reports a smaller total: the meter keeps
        // the largest, so the interval counts nothing rather than going negative.
        book.observe(&[report(1, &mut m, 1, 3_000, 1)], 3_000);
        book.observe(&[report(1, &mut m, 1, 3_000, 1)], 4_000);
        let r = book.due(4_000)[0];
        assert_eq!(r.cpu_percent, 0.0);
        assert_eq!(r.cpu_millis, 11_750);
    }

    #[test]
    fn forgotten_attempts_are_not_written_and_the_rest_are_batched() {
        let mut book = LiveBook::new();
        let (mut a, mut b) = (Meter::new(), Meter::new());
        book.observe(
            &[report(2, &mut b, 20, 0, 1), report(1, &mut a, 10, 0, 1)],
            0,
        );
        let rows = book.due(0);
        assert_eq!(rows.iter().map(|r| r.attempt).collect::<Vec<_>>(), [1, 2]);
        book.observe(
            &[report(2, &mut b, 20, 0, 1), report(1, &mut a, 10, 0, 1)],
            2_000,
        );
        book.retain(|id| id != 2);
        let rows = book.due(2_000);
        assert_eq!(rows.iter().map(|r| r.attempt).collect::<Vec<_>>(), [1]);
        assert_eq!(book.latest().count(), 1);
    }

    #[test]
    fn ring_slots_wrap() {
        let mut book = LiveBook::new();
        let mut m = Meter::new();
        let mut last = 0;
        for i in 0..(RING_SLOTS as i64 + 5) {
            let now = i * WRITE_EVERY;
            book.observe(&[report(3, &mut m, 1, 0, 1)], now);
            last = book.due(now)[0].seq;
        }
        assert_eq!(last % RING_SLOTS, 4);
    }

    #[test]
    fn totals_add_up_per_profile() {
        let m = |attempt, rss, cpu, pct, procs| LiveMeter {
            attempt,
            at: 0,
            rss_bytes: rss,
            peak_rss_bytes: rss,
            cpu_millis: cpu,
            cpu_percent: pct,
            processes: procs,
            seq: 0,
        };
        let (a, b, c) = (
            m(1, 100, 10, 50.0, 2),
            m(2, 200, 20, 25.0, 3),
            m(3, 7, 1, 1.0, 1),
        );
        let t = totals([("linux", &a), ("linux", &b), ("gpu", &c)]);
        assert_eq!(t.len(), 2);
        let l = t["linux"];
        assert_eq!(
            (l.metered, l.rss_bytes, l.cpu_millis, l.processes),
            (2, 300, 30, 5)
        );
        assert_eq!(l.cpu_percent, 75.0);
        assert_eq!(t["gpu"].metered, 1);
    }
}
