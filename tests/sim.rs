//! Integration tests of the simulated GitHub and the simulated runner: fidelity against
//! GitHub's OpenAPI description, REST behaviour, faults, and the runner as a process.

mod sim {
    pub mod schema;
    pub mod support;

    mod faults;
    mod fidelity;
    mod rest;
    mod runner;
}
