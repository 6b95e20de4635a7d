//! Pure decisions of a pass: jobs to profiles, allocation with its limiting factor,
//! what to do with each attempt, and the coordinator's launch book. No I/O, no clock:
//! every function takes what was observed and `now`, and returns what to do.

pub mod allocate;
pub mod budget;
pub mod demand;
pub mod disk;
pub mod fitness;
pub mod hold;
pub mod jit;
pub mod launch_book;
pub mod lines;
pub mod pass;
pub mod plan;
pub mod points;
pub mod reads;
pub mod record;
pub mod refusal;
pub mod rerun;
pub mod room;
pub mod share;
pub mod target_error;
pub mod unfit;
pub mod watch;

#[cfg(test)]
mod launch_book_tests;
#[cfg(test)]
mod watch_tests;

pub use allocate::{
    Allocation, Counts, HostAllocator, Limit, NotReconciling, ProfileAllocation, allocate,
};
pub use demand::{Demand, assign};
pub use launch_book::{Accepted, LaunchBook, Refusal, TargetMode, target_mode};
pub use lines::{RunnerEvent, parse_line};
pub use watch::{
    Action, DeregisterResult, Observation, ProcessStatus, Registration, Timeouts, Want, watch,
};
