//! The simulated GitHub (REST endpoints with state, faults, rate limits) and the simulated runner.
//!
//! Start one with [`SimGitHub::start`]; drive it through [`SimHandle`] in-process or through
//! `/_sim/...` over HTTP (see `control.rs`). The runner half is [`runner::main`], reached
//! when our binary runs as `bin/Runner.Listener` in a directory made by [`install::lay_out`].

pub mod auth;
pub mod client;
pub mod control;
pub mod downloads;
pub mod endpoints;
pub mod faults;
pub mod github;
pub mod handle;
pub mod install;
pub mod jit;
pub mod latency;
pub mod model;
pub mod permissions;
pub mod rng;
pub mod runner;
pub mod scaleset;
pub mod scaleset_handle;
pub mod scaleset_state;
pub mod secondary;
pub mod serve;
pub mod state;
pub mod webhooks;

pub use faults::{FaultAction, FaultRule, RunnerFault, RunnerFaultRule, Trigger};
pub use handle::{SimGitHub, SimHandle};
pub use latency::{InFlight, Latency};
pub use scaleset_state::ScaleSetSimConfig;
pub use serve::serve_main;
pub use state::{JobState, JobStatus, LogEntry, RunnerState, Scope, SimConfig};
