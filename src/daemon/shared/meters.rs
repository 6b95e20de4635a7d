//! The meter sampler's latest peaks, by attempt id (`Shared::meters`): the main loop
//! writes each reading; a target loop copies an attempt's peak into it when it saves
//! it, and forgets it when the attempt ends.

use crate::daemon::host::facts::lock;
use crate::meter::Meter;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Peak {
    pub rss_bytes: u64,
    pub cpu_millis: u64,
    pub mean_rss_bytes: u64,
}

#[derive(Debug, Default)]
pub struct Meters(Mutex<HashMap<i64, Peak>>);

impl Meters {
    pub fn record(&self, attempt: i64, meter: &Meter) {
        lock(&self.0).insert(
            attempt,
            Peak {
                rss_bytes: meter.peak_rss_bytes,
                cpu_millis: meter.cpu_millis,
                mean_rss_bytes: meter.mean_rss_bytes(),
            },
        );
    }

    pub fn peak(&self, attempt: i64) -> Option<Peak> {
        lock(&self.0).get(&attempt).copied()
    }

    pub fn forget(&self, attempt: i64) {
        lock(&self.0).remove(&attempt);
    }
}
