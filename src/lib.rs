//! runner-manager: a local-first autoscaler for ephemeral GitHub Actions self-hosted runners.
//!
//! See ARCHITECTURE.md for the codemap. `main.rs` runs the simulated runner when called
//! by a runner's name, and otherwise calls [`cli::main`].

pub mod alloc;
pub mod backoff;
pub mod cli;
pub mod config_file;
pub mod coordinator;
pub mod daemon;
pub mod demo;
pub mod doctor;
pub mod domain;
pub mod facts;
pub mod github;
pub mod http_server;
pub mod install;
pub mod logging;
pub mod meter;
pub mod metrics;
pub mod printable;
pub mod random;
pub mod reconcile;
pub mod resident;
pub mod runner;
pub mod scaleset;
pub mod secret;
pub mod selfupdate;
pub mod service;
pub mod sim;
pub mod store;
pub mod supervisor;
pub mod timefmt;
pub mod tui;
pub mod units;
pub mod version;
