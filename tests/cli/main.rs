//! The CLI's integration tests: the real binary on a temporary state directory.
//! One test binary with a module per concern, ripgrep-style.

mod apply;
mod bad_input;
mod concurrent;
mod demo;
mod docs;
mod exits;
mod golden;
mod help;
mod host_set;
mod man;
mod man8;
mod once;
mod permissions;
mod service;
mod settings;
mod sim_job;
mod store;
mod support;
mod usage;
