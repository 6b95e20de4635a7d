//! The daemon's heartbeats, as `/healthz` judges freshness by them
//! (`Shared::beats`): when each target loop last finished a pass (each loop writes
//! its own), and when the main thread last ticked (the main loop writes it).

use crate::timefmt::Millis;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicI64;

pub struct Beats {
    /// When each target loop last finished a pass (or started), by target name.
    pub passes: Mutex<HashMap<String, Millis>>,
    /// When the main thread last ticked.
    pub last_tick: AtomicI64,
}

impl Default for Beats {
    fn default() -> Beats {
        Beats {
            passes: Mutex::new(HashMap::new()),
            last_tick: AtomicI64::new(crate::timefmt::now_millis()),
        }
    }
}
