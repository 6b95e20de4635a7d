//! What `status` and `doctor` show of the caches and kept workspaces: the daemon's
//! last measure (`store::daemon_facts::Measured`, which `daemon::workers::slots`
//! records at each prune) while nothing touched the slots since, else one walk now.

use crate::domain::Host;
use crate::runner::slots::{self, Footprint};
use crate::store::Store;
use crate::store::daemon_facts::{self, Measured};
use crate::timefmt::Millis;
use std::path::Path;

/// How old a recorded measure `status` and `doctor` still show: two prunes' span.
pub const MEASURE_FRESH_MS: Millis = 2 * 3600 * 1000;

/// Which measure to show (pure): the recorded one while no slot was touched since it
/// was taken (`touched`, [`slots::last_touched`]) and it is younger than
/// [`MEASURE_FRESH_MS`], against the host's cap now (it may have changed since); none
/// (walk the slots) otherwise. A slot touched in the measure's own millisecond counts
/// as measured: file times come from the kernel's coarse clock, so a slot written
/// just before the measure often carries its very millisecond (the prune's test
/// failed on it under load), and a write after it within that millisecond is shown
/// at the next measure.
pub fn fresh(
    recorded: Option<Measured>,
    touched: Millis,
    cap_bytes: u64,
    now: Millis,
) -> Option<Measured> {
    recorded
        .filter(|m| touched <= m.at && (0..MEASURE_FRESH_MS).contains(&(now - m.at)))
        .map(|mut m| {
            m.footprint.cap_bytes = cap_bytes;
            m
        })
}

/// What `status` and `doctor` show of the caches and kept workspaces: the daemon's
/// last measure while nothing touched the slots since (no walk: they can hold
/// hundreds of thousands of files), else one walk now. The time is the recorded
/// measure's, `None` for a walk.
pub fn shown(
    store: &dyn Store,
    state_dir: &Path,
    host: &Host,
    now: Millis,
) -> (Footprint, Option<Millis>) {
    let recorded = daemon_facts::measured(store).ok().flatten();
    let runtime = crate::runner::root::host_runtime(host).unwrap_or_else(|| state_dir.into());
    let touched = match recorded {
        Some(_) => slots::last_touched(&runtime),
        None => 0,
    };
    match fresh(recorded, touched, host.cache_cap_bytes, now) {
        Some(m) => (m.footprint, Some(m.at)),
        None => (Footprint::read(state_dir, host), None),
    }
}

/// The line `status` and `doctor` show: the footprint, and how old a recorded one is.
pub fn shown_line(f: &Footprint, at: Option<Millis>, now: Millis) -> String {
    match at {
        Some(at) => format!(
            "{} (measured {} ago)",
            line(f),
            crate::timefmt::age(now - at)
        ),
        None => line(f),
    }
}

/// `1.6 GiB of 10 GiB: caches 1.2 GiB (3 targets), workspaces 400 MiB (2)`.
pub fn line(f: &Footprint) -> String {
    let b = crate::units::bytes;
    format!(
        "{} of {}: caches {} ({} target{}), workspaces {} ({})",
        b(f.caches_bytes + f.workspaces_bytes),
        b(f.cap_bytes),
        b(f.caches_bytes),
        f.cache_targets,
        if f.cache_targets == 1 { "" } else { "s" },
        b(f.workspaces_bytes),
        f.workspaces
    )
}
