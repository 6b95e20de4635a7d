//! The coordinator's door: connections that have not authenticated yet. The mechanism
//! is the one the HTTP listeners use (see [`crate::http_server::gate`]): one deadline
//! for the whole handshake (TLS included), caps per source and in total, room made from
//! the source that holds the most; authenticated hosts are counted apart
//! ([`ServeOptions::max_connections`]).
//!
//! [`ServeOptions::max_connections`]: super::server::ServeOptions::max_connections

pub use crate::http_server::gate::{Gate, GateLimits, Waiting, make_room};
