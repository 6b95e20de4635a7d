//! runner-manager: a local-first autoscaler for ephemeral GitHub Actions self-hosted runners.
//!
//! See ARCHITECTURE.md for the codemap. `main.rs` only calls [`cli::main`].

pub mod cli;
pub mod daemon;
pub mod demo;
pub mod coordinator;
pub mod domain;
pub mod github;
pub mod logging;
pub mod meter;
pub mod reconcile;
pub mod runner;
pub mod scaleset;
pub mod secret;
pub mod sim;
pub mod store;
pub mod timefmt;
pub mod tui;
