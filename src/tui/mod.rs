//! `runner-manager top`: the live terminal UI over the store, gitui-shaped.
//!
//! [`model::Snapshot`] is one read of the store at a given `now`, with no terminal in
//! sight; [`app::App`] holds what the operator is looking at and turns keys into state
//! changes and [`app::Request`]s; the views (`overview`, `attempts`, `detail`,
//! `pictures`, `runners`, `activity`, `usage`, `settings`, `pool`, `overlay`) only draw an
//! `App` they are handed, their tables
//! sized to their content by [`columns`]; [`actions`] carries out the few edits
//! through the CLI's validated path; [`logfile`] reads an attempt's whole log with a
//! bound; [`terminal`] is the one place that touches the real terminal (raw mode, the
//! alternate screen, the event loop, and restoring the terminal on every way out), and
//! [`tty`] asks poll(2) whether that terminal has input or is gone.

pub mod actions;
pub mod activity;
pub mod app;
mod attempts;
pub mod columns;
pub mod detail;
pub mod fmt;
pub mod keys;
pub mod logfile;
pub mod model;
mod overlay;
pub mod overview;
mod pictures;
pub mod pool;
pub mod runners;
pub mod settings;
pub mod terminal;
pub mod theme;
pub mod tty;
pub mod ui;
pub mod usage;

pub use app::{App, Pane, Request};
pub use model::Snapshot;
pub use terminal::{Ending, TuiError, run};
