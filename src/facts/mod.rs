//! What the daemon publishes, and the checks both it and the CLI make, read where
//! `status`, `top`, `doctor` and the daemon alike read them, so no reader reaches
//! into the daemon's modules: the host's settings checked on this machine
//! (`host_probe`), the daemon's locks and who holds them (`lock`), what the state
//! directory keeps (`kept`), the caches' footprint (`caches`), the runner installs
//! (`runner_check`) and the webhook listener's settings (`webhook`).

pub mod caches;
pub mod host_probe;
pub mod kept;
pub mod lock;
pub mod runner_check;
pub mod webhook;
