//! The one way the daemon builds a target's GitHub client: its credential loaded,
//! every request counted in the target's metrics, stoppable (a shutdown or a
//! listener's stop ends its waits), and tied to the target's rate-limit hold, its
//! bound on requests in flight and its secondary-limit points, which every client of
//! the target shares (the loop's and its workers', each scale set listener's, each
//! scale set lookup's).

use super::metrics_feed;
use crate::daemon::shared::Shared;
use crate::domain::Target;
use crate::github::{GitHubClient, InFlight, SharedHold, SharedPoints, load_credential};
use crossbeam_channel::Receiver;

/// What every client of one target shares.
#[derive(Clone, Default)]
pub struct Ties {
    pub hold: SharedHold,
    pub in_flight: InFlight,
    pub points: SharedPoints,
}

/// A client for `target`, stopped by `stop`; `Err` says why its credential could not
/// be loaded.
pub fn build(
    shared: &Shared,
    target: &Target,
    ties: &Ties,
    stop: Receiver<()>,
) -> Result<GitHubClient, String> {
    let cred = load_credential(&target.credential).map_err(|e| e.to_string())?;
    Ok(GitHubClient::new(target, cred)
        .with_shutdown(stop)
        .with_observer(metrics_feed::github_observer(&shared.metrics, &target.name))
        .with_shared_hold(ties.hold.clone())
        .with_in_flight(ties.in_flight.clone())
        .with_points(ties.points.clone())
        .with_hooks(shared.hooks.clone()))
}
