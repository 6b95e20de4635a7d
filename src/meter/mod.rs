//! Meters: sampling each live attempt's process tree (RSS, CPU, process count) from /proc.
//!
//! `usage` holds the pure parts (summing a tree, keeping peaks) and is tested without
//! /proc; `sample` reads /proc; `sampler` is the daemon's sampling thread; `live`
//! decides what of it the daemon keeps in the store while the runner lives, and when.
//! The figures are printed for people by the ground floor's `units`.

pub mod live;
pub mod sample;
pub mod sampler;
pub mod usage;

/// The old path of [`crate::units`], kept for `cli/host.rs` until it names the new one.
pub use crate::units;

pub use live::{LiveBook, LiveMeter, MeterPoint, ProfileMeters, Totals, totals};
pub use sample::{clock_ticks_per_sec, page_size, sample_tree};
pub use sampler::{LiveAttempt, MeterReport, SAMPLER_THREAD, run_sampler, spawn_sampler};
pub use usage::{Meter, Usage, usage_from_stats};
