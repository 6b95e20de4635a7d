//! Distance in the simulated GitHub: every request (REST, the scale set service, the
//! simulated runner's own calls) spends a round trip, and a JIT config its making time,
//! on its own connection's thread, so a delayed request never holds up another. Also
//! the count of requests in flight per credential, with its peak.
//!
//! A request's life here: it arrives (the request log's `at`), travels half the round
//! trip, waits the JIT time if it asks for a JIT config, is served (its state changes
//! and its answer are decided then), travels the other half back, and completes (the
//! log's `done_at`) just before its bytes are written. Splitting the round trip puts
//! the decision where GitHub makes it: an answer is sent half a round trip before the
//! client reads it, and a message that reaches a long poll while it waits still takes
//! half a round trip to arrive. The sim's own controls (`/_sim/...` except the runner's
//! endpoints) are not far away: a test reading state must not wait.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::handle::Sim;
use super::rng::SplitMix64;
use super::state::{LogEntry, State};
use crate::http_server::{Reply, Request};
use crate::timefmt::{Millis, now_millis};

/// How far GitHub is. All zero (the default) is loopback: no delay at all.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// The round trip every request spends (half each way).
    pub request: Duration,
    /// What making a JIT config adds (REST `generate-jitconfig`, the scale set's
    /// `generatejitconfig`), on top of the round trip: GitHub registers the runner
    /// before it answers.
    pub jit: Duration,
    /// Each delay is drawn uniformly within this fraction either side (0.2: ±20%).
    pub jitter: f64,
}

impl Latency {
    /// The "GitHub far away": 120 ms per request, 500 ms more per JIT config,
    /// ±20%.
    pub const FAR: Latency = Latency {
        request: Duration::from_millis(120),
        jit: Duration::from_millis(500),
        jitter: 0.2,
    };

    pub fn is_zero(&self) -> bool {
        self.request.is_zero() && self.jit.is_zero()
    }

    /// The delays of one request, drawn from `rng` (the sim's latency generator, seeded
    /// from `SimConfig::seed`, so a run replays given the same order of arrivals).
    pub fn plan(&self, rng: &mut SplitMix64, jit: bool) -> Trip {
        let mut draw = |d: Duration| {
            if d.is_zero() || self.jitter <= 0.0 {
                return d;
            }
            let j = self.jitter.min(1.0);
            d.mul_f64(1.0 - j + 2.0 * j * rng.next_f64())
        };
        let round = draw(self.request);
        let work = if jit { draw(self.jit) } else { Duration::ZERO };
        Trip {
            up: round / 2,
            work,
            down: round - round / 2,
        }
    }

    /// "120 ms per request, 500 ms more per JIT config, ±20%", for banners.
    pub fn describe(&self) -> String {
        format!(
            "{} ms per request, {} ms more per JIT config, ±{}%",
            self.request.as_millis(),
            self.jit.as_millis(),
            (self.jitter * 100.0).round()
        )
    }
}

/// One request's delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trip {
    /// From arrival to being served.
    pub up: Duration,
    /// The service's own time (a JIT config), before it answers.
    pub work: Duration,
    /// From the answer to its bytes being written.
    pub down: Duration,
}

/// `120ms`, `1.5s`, `0`: a duration as the command line takes it. A bare number is
/// refused (except 0) so that `--latency 120` cannot be read as seconds by one reader
/// and milliseconds by another.
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1.0)
    } else if v == "0" {
        (v, 0.0)
    } else {
        return Err(format!("{v:?}: give a unit, e.g. 120ms or 0.5s"));
    };
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{v:?} is not a duration (e.g. 120ms or 0.5s)"))?;
    if !x.is_finite() || x < 0.0 || x * scale > 3600.0 {
        return Err(format!("{v:?}: give 0 to 3600 seconds"));
    }
    Ok(Duration::from_secs_f64(x * scale))
}

/// `20%` (or `20`): the jitter as a fraction, 0 to 100%.
pub fn parse_jitter(v: &str) -> Result<f64, String> {
    let n = v.trim().trim_end_matches('%');
    let x: f64 = n
        .trim()
        .parse()
        .map_err(|_| format!("{v:?} is not a percentage (e.g. 20%)"))?;
    if !(0.0..=100.0).contains(&x) {
        return Err(format!("{v:?}: give 0% to 100%"));
    }
    Ok(x / 100.0)
}

/// Requests in flight per credential now, and the most there ever were at once.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InFlight {
    pub now: BTreeMap<String, u32>,
    pub peak: BTreeMap<String, u32>,
}

impl InFlight {
    pub fn enter(&mut self, credential: &str) {
        let n = self.now.entry(credential.to_string()).or_insert(0);
        *n += 1;
        let p = self.peak.entry(credential.to_string()).or_insert(0);
        *p = (*p).max(*n);
    }

    pub fn leave(&mut self, credential: &str) {
        if let Some(n) = self.now.get_mut(credential) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.now.remove(credential);
            }
        }
    }
}

/// Where a request's log entry went, so its completion time can be written there.
pub struct Stamp {
    /// When the request's bytes were read (the log's `at`).
    pub arrived: Millis,
    logged: Option<usize>,
}

impl Stamp {
    pub fn new(arrived: Millis) -> Stamp {
        Stamp {
            arrived,
            logged: None,
        }
    }

    /// Appends the request's entry to the log and remembers where.
    pub fn log(&mut self, st: &mut State, entry: LogEntry) {
        self.logged = Some(st.log.len());
        st.log.push(entry);
    }
}

/// Counts a request in flight until dropped (a panicking handler leaves too).
struct Flight<'a> {
    sim: &'a Sim,
    credential: Option<String>,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        if let Some(c) = &self.credential {
            self.sim.lock().in_flight.leave(c);
        }
    }
}

/// Whether a request asks GitHub to make a JIT config.
pub fn is_jit(req: &Request) -> bool {
    req.method == "POST"
        && (req.path.ends_with("/actions/runners/generate-jitconfig")
            || req.path.ends_with("/generatejitconfig"))
}

/// Carries one request across the distance: counts it in flight under `credential`
/// (None: not counted), waits the way up (and the JIT time), has `serve` answer it,
/// waits the way back, and stamps its log entry's completion. Waits end early when the
/// sim shuts down.
pub fn carry(
    sim: &Sim,
    req: Request,
    credential: impl FnOnce(&State, &Request, Millis) -> Option<String>,
    serve: impl FnOnce(&Sim, Request, &mut Stamp) -> Reply,
) -> Reply {
    let arrived = now_millis();
    let jit = is_jit(&req);
    let (trip, credential) = {
        let mut st = sim.lock();
        let latency = st.cfg.latency;
        let trip = latency.plan(&mut st.latency_rng, jit);
        let credential = credential(&st, &req, arrived);
        if let Some(c) = &credential {
            st.in_flight.enter(c);
        }
        (trip, credential)
    };
    let _flight = Flight { sim, credential };
    let before = trip.up + trip.work;
    if !before.is_zero() {
        sim.stopper.wait(before);
    }
    let mut stamp = Stamp::new(arrived);
    let reply = serve(sim, req, &mut stamp);
    // A hung request never completes: it keeps no time and spends no way back.
    if matches!(reply, Reply::Hang) {
        return reply;
    }
    if !trip.down.is_zero() {
        sim.stopper.wait(trip.down);
    }
    if let Some(i) = stamp.logged {
        let done = now_millis();
        let mut st = sim.lock();
        // The log only grows; the check guards a test that replaced it meanwhile.
        if let Some(e) = st.log.get_mut(i).filter(|e| e.at == arrived) {
            e.done_at = Some(done);
        }
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_jitter_parse_with_units() {
        assert_eq!(parse_duration("120ms"), Ok(Duration::from_millis(120)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("120").is_err(), "a bare number has no unit");
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("2h").is_err());
        assert_eq!(parse_jitter("20%"), Ok(0.2));
        assert_eq!(parse_jitter("0"), Ok(0.0));
        assert!(parse_jitter("120%").is_err());
        assert!(parse_jitter("x").is_err());
    }

    #[test]
    fn a_plan_splits_the_round_trip_and_adds_jit_time_within_the_jitter() {
        let l = Latency {
            request: Duration::from_millis(100),
            jit: Duration::from_millis(400),
            jitter: 0.0,
        };
        let mut rng = SplitMix64::new(1);
        let t = l.plan(&mut rng, true);
        assert_eq!(t.up + t.down, Duration::from_millis(100));
        assert_eq!(t.work, Duration::from_millis(400));
        assert_eq!(l.plan(&mut rng, false).work, Duration::ZERO);
        let l = Latency { jitter: 0.2, ..l };
        let (mut a, mut b) = (SplitMix64::new(9), SplitMix64::new(9));
        for _ in 0..200 {
            let t = l.plan(&mut a, true);
            assert_eq!(t, l.plan(&mut b, true), "the same seed draws the same");
            let round = (t.up + t.down).as_millis();
            assert!((80..=120).contains(&round), "{round}");
            assert!((320..=480).contains(&t.work.as_millis()), "{:?}", t.work);
        }
    }

    #[test]
    fn in_flight_keeps_the_peak_per_credential() {
        let mut f = InFlight::default();
        f.enter("pat:0");
        f.enter("pat:0");
        f.enter("pat:1");
        f.leave("pat:0");
        f.enter("pat:0");
        f.leave("pat:0");
        f.leave("pat:0");
        assert_eq!(f.peak.get("pat:0"), Some(&2));
        assert_eq!(f.peak.get("pat:1"), Some(&1));
        assert_eq!(f.now.get("pat:0"), None);
        assert_eq!(f.now.get("pat:1"), Some(&1));
    }
}
