//! The feeds room: what flows into and out of the daemon besides the runners. Demand
//! in (a target's REST queue, its scale set listeners, the webhook listener), the
//! coordinator link (`pool_link`), a target's GitHub client (`clients`), and what the
//! daemon publishes (the metrics registry's feed, the status rows). It uses the host
//! room and the shared state, nothing above.

pub(super) mod clients;
pub(super) mod metrics_feed;
pub(super) mod pool_link;
pub(super) mod rest_queue;
pub(super) mod scaleset_feed;
pub(super) mod status_writer;
pub mod webhook;
