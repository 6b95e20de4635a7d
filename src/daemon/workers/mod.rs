//! The workers room: a target's I/O workers (`io`) and what they carry out off the
//! loop's thread: starts (`starter`, with an attempt's slot and its `oci` side),
//! the actuator's transitions, re-runs, the public-repository guard's reads, and what
//! a pass sees of each live attempt (`observe`). It uses the host room, the shared
//! state and the feeds; only the target loop and the top stand above it.

pub(super) mod actuator;
pub(super) mod io;
pub(super) mod observe;
pub(super) mod oci;
pub(super) mod public_guard;
pub(super) mod quiet;
pub(super) mod rerun;
pub mod runner_update;
pub mod slots;
pub(super) mod starter;
