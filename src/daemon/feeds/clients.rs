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
use crate::log_warn;
use crate::store::{EtagChange, SqliteStore, Store, StoredEtag};
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
        .with_hooks(shared.heard.hooks.clone()))
}

/// Keeps in the store the ETag changes `client` gathered for target `name`, so a
/// restart asks GitHub conditionally still (the loop after each pass, a demand read
/// on a worker as each answer comes).
pub fn keep_etags(store: &SqliteStore, name: &str, client: Option<&GitHubClient>) {
    let Some(client) = client else {
        return;
    };
    let changes: Vec<EtagChange> = client
        .take_etag_changes()
        .into_iter()
        .map(|(url, entry)| match entry {
            Some(c) => EtagChange::Put(StoredEtag {
                url,
                etag: c.etag,
                body: c.body,
                link: c.link,
            }),
            None => EtagChange::Gone(url),
        })
        .collect();
    if let Err(e) = store.save_etags(name, &changes) {
        log_warn!("etags_not_kept", target = name, error = e);
    }
}
