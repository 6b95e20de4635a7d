//! The coordinator of a pool (protocol version 3): the server that reads the queue
//! once for many hosts and places each job as a launch on one host, and the host side
//! of the link that the daemon runs. See design.md "Coordinated pools".

pub mod auth;
pub mod demand;
pub mod gate;
pub mod link;
pub mod owner_relay;
pub mod placement;
pub mod protocol;
pub mod scaleset_demand;
pub mod server;
pub mod tls;
pub mod view;
pub mod ws;
