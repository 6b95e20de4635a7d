//! Integration tests of the GitHub client against a scripted loopback responder: every
//! fault class GitHub can produce, pagination, ETags, App auth, the bound on requests
//! in flight and `target check`.

#[path = "github/common.rs"]
mod common;
#[path = "github/responder.rs"]
mod responder;

#[path = "github/app_auth.rs"]
mod app_auth;
#[path = "github/check.rs"]
mod check;
#[path = "github/faults.rs"]
mod faults;
#[path = "github/in_flight.rs"]
mod in_flight;
#[path = "github/ops.rs"]
mod ops;
#[path = "github/rate_limits.rs"]
mod rate_limits;
