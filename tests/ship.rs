//! Integration tests of shipping runner-manager: shell completions, the metrics
//! listener (scraped and parsed strictly), `doctor`, `runner install` against the
//! simulated GitHub, and `packaging/install.sh` into a temporary root.

#[path = "ship/support.rs"]
mod support;

#[path = "ship/completions.rs"]
mod completions;
#[path = "ship/doctor.rs"]
mod doctor;
#[path = "ship/exposition.rs"]
mod exposition;
#[path = "ship/install.rs"]
mod install;
#[path = "ship/metrics.rs"]
mod metrics;
#[path = "ship/packaging.rs"]
mod packaging;
