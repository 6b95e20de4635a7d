//! Meters: sampling each live attempt's process tree (RSS, CPU, process count) from /proc.
//!
//! `usage` holds the pure parts (summing a tree, keeping peaks) and is tested without
//! /proc; `sample` reads /proc; `sampler` is the daemon's sampling thread; `live`
//! decides what of it the daemon keeps in the store while the runner lives, and when;
//! `units` prints the figures for people.

pub mod live;
pub mod sample;
pub mod sampler;
pub mod units;
pub mod usage;

pub use live::{LiveBook, LiveMeter, MeterPoint, ProfileMeters, Totals, totals};
pub use sample::{clock_ticks_per_sec, page_size, sample_tree};
pub use sampler::{LiveAttempt, MeterReport, SAMPLER_THREAD, run_sampler, spawn_sampler};
pub use usage::{Meter, Usage, usage_from_stats};
