//! The `oci` execution backend: each attempt's runner in a rootless Podman container.
//! `info` reads `podman info` into the facts `domain::oci_readiness` judges,
//! `command` builds every Podman command line (pure), `podman` runs them,
//! `cgroup` finds and reads a container's own cgroup for its meters.
//! Containers carry the labels below, so whatever a crash leaves is found again by
//! them and removed.

pub mod cgroup;
pub mod command;
pub mod info;
pub mod podman;

pub use podman::{PODMAN_ENV, Podman};

/// The host id (`Host::id`) a container was made for.
pub const HOST_LABEL: &str = "runner-manager.host";
/// The attempt id a container runs.
pub const ATTEMPT_LABEL: &str = "runner-manager.attempt";
/// The attempt's runner name (also the container's name).
pub const RUNNER_LABEL: &str = "runner-manager.runner";
