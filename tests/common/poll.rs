//! Polling a condition with a deadline (never a sleep as synchronisation): shared by
//! the sim and scaleset test binaries, included in each with `#[path]`.

use std::time::{Duration, Instant};

/// Polls `f` until it returns Some or the deadline passes.
pub fn wait_for<T>(what: &str, deadline: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
