//! Integration tests of the simulated GitHub and the simulated runner: fidelity against
//! GitHub's OpenAPI description, REST behaviour, faults, distance (latency and requests
//! in flight), the runner as a process, and the shapes of its install.

mod sim {
    pub mod schema;
    pub mod support;

    mod faults;
    mod fidelity;
    mod inflight;
    mod install;
    mod latency;
    mod rest;
    mod runner;
    mod secondary;
}
