//! runner-manager: a local-first autoscaler for ephemeral GitHub Actions self-hosted runners.
//!
//! See ARCHITECTURE.md for the codemap. `main.rs` only calls [`cli::main`].

pub mod cli;
pub mod doctor;
pub mod domain;
pub mod github;
pub mod install;
pub mod meter;
pub mod metrics;
pub mod reconcile;
pub mod runner;
pub mod secret;
pub mod sim;
pub mod store;
pub mod timefmt;
