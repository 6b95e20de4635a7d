//! Coordinated pools end to end: the simulated GitHub in-process, a real
//! `runner-manager coordinator serve` and several real `runner-manager daemon`
//! processes, each with its own state directory, all on loopback.

mod pool {
    pub mod support;

    mod budget;
    mod coordinated;
    mod owners;
    mod refusals;
    mod scaleset;
    mod upgrade;
    mod usage;
}
