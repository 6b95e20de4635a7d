//! End-to-end tests of `runner-manager daemon`: the real binary on a temp state
//! directory, the simulated GitHub in-process on loopback, simulated runners as real
//! processes. Every wait polls a condition with a deadline; every test ends with the
//! invariant checker (no leaked process, no leftover registration, every attempt ended
//! with a reason and cleaned, every job served exactly once by one of our runners).

mod daemon {
    pub mod support;

    mod api_faults;
    mod budget;
    mod caches;
    mod capacity;
    mod config_file;
    mod crash;
    mod credentials;
    mod disk;
    mod fitness;
    mod identity;
    mod labels;
    mod lifecycle;
    mod malloc;
    mod meters;
    mod metrics;
    mod oci;
    mod outside_readers;
    mod runner_faults;
    mod runner_update;
    mod scaleset;
    mod self_update;
    mod signals;
    mod supervisor;
    mod systemd;
    mod waiting;
    mod webhooks;
}
