//! The daemon: the main thread that takes the lock, spawns one loop per target, the
//! meter sampler and the coordinator link, watches signals and joins them all.

pub mod lock;
pub mod notify;
pub mod signals;
