//! Integration tests of `runner` and `meter` against real processes, files and /proc.
//!
//! Fake `Runner.Listener`s are small shell scripts in a temp dir laid out as an
//! actions-runner install. Every wait polls a condition with a deadline.

mod runner {
    pub mod util;

    mod contain;
    mod log;
    mod meter;
    mod proc;
    mod root;
    mod spawn;
}
