//! The coordinator's tests: the protocol over real sockets on loopback, the server
//! with scripted hosts, the host link against a scripted coordinator, placement
//! properties, and the CLI.

mod cli;
mod edges;
mod link;
mod link_server;
mod placement_prop;
mod server;
mod support;
