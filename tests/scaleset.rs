//! Integration tests of the runner scale set client and listener against the
//! simulated Actions service on loopback: scale sets, sessions and their faults, the
//! long poll, acks, the persisted last message id, a real simulated runner process
//! taking a scale set's job, and the scale set lines of `target check`.

#[path = "scaleset/support.rs"]
mod support;

#[path = "scaleset/check.rs"]
mod check;
#[path = "scaleset/client.rs"]
mod client;
#[path = "scaleset/listener.rs"]
mod listener;
#[path = "scaleset/runner.rs"]
mod runner;
