//! The credential's book of secondary-limit points (`reconcile::points`, where the
//! readings of GitHub's documentation are argued), shared by every client of the
//! credential the way `SharedHold` and `InFlight` are: the target loop's client, its
//! workers' and its scale set clients'. The client charges each REST request to its
//! route before sending it and settles it when the answer comes; the loop reads how
//! many JIT configs fit before it plans starts, and reserves them.
//!
//! Only the REST API is counted: the Actions service that the scale set API speaks
//! (its JIT configs included) is another service, with limits GitHub does not
//! document, and a scale set's long poll costs GitHub no work while it waits.

use super::headers::Headers;
use crate::domain::TargetScope;
use crate::reconcile::points::{PointsBook, Room};
use crate::timefmt::Millis;
use std::sync::{Arc, Mutex, MutexGuard};

/// One credential's points book. Cheap to clone; clones share the book.
#[derive(Debug, Clone, Default)]
pub struct SharedPoints(Arc<Mutex<PointsBook>>);

impl SharedPoints {
    /// The book, for one decision (never held across a request).
    pub fn book(&self) -> MutexGuard<'_, PointsBook> {
        // A panic while counting must not wedge every client of the credential.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many JIT configs of a target of `scope` fit now.
    pub fn jit_room(&self, scope: &TargetScope, now: Millis) -> Room {
        self.book().room(jit_endpoint(scope), "POST", now)
    }

    /// Holds the points of `n` JIT configs the pass decided to start.
    pub fn reserve_jit(&self, scope: &TargetScope, n: u32, now: Millis) {
        if n > 0 {
            self.book().reserve(jit_endpoint(scope), "POST", n, now);
        }
    }

    /// The points a minute per endpoint the credential's GitHub allows (a target's
    /// `secondary_limit`; `None`: none).
    pub fn set_limit(&self, limit: Option<u32>) {
        self.book().set_limit(limit);
    }

    /// Whether the book keeps to this host's share of the credential
    /// (`PointsBook::set_by_share`): standalone, other hosts may spend it too.
    pub fn set_by_share(&self, on: bool) {
        self.book().set_by_share(on);
    }

    /// Secondary limits GitHub answered this credential.
    pub fn hits(&self) -> u64 {
        self.book().hits()
    }

    /// Whether two handles share one book.
    pub fn same(&self, other: &SharedPoints) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The route a target's REST JIT configs are charged to.
pub fn jit_endpoint(scope: &TargetScope) -> &'static str {
    match scope {
        TargetScope::Repo { .. } => "/repos/{owner}/{repo}/actions/runners/generate-jitconfig",
        TargetScope::Org { .. } => "/orgs/{org}/actions/runners/generate-jitconfig",
    }
}

/// Whether a refusal is a secondary limit: a 403 or 429 that says so, or that asks
/// to retry after a while without the primary limit being spent (GitHub answers a
/// spent primary limit with `x-ratelimit-remaining: 0`).
pub fn is_secondary(status: u16, h: &Headers, message: &str) -> bool {
    if !matches!(status, 403 | 429) {
        return false;
    }
    let says = message
        .to_ascii_lowercase()
        .contains("secondary rate limit");
    let retry = h.get("retry-after").is_some() && h.get_u64("x-ratelimit-remaining") != Some(0);
    says || retry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        Headers::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn secondary_limits_are_told_from_the_primary_one_and_from_plain_refusals() {
        let msg = "You have exceeded a secondary rate limit. Please wait a few minutes";
        assert!(is_secondary(403, &h(&[("retry-after", "60")]), msg));
        assert!(is_secondary(429, &h(&[("retry-after", "60")]), ""));
        assert!(is_secondary(403, &h(&[]), msg));
        let spent = h(&[("x-ratelimit-remaining", "0"), ("retry-after", "60")]);
        assert!(!is_secondary(403, &spent, "API rate limit exceeded"));
        assert!(!is_secondary(403, &h(&[]), "Resource not accessible"));
        assert!(!is_secondary(500, &h(&[("retry-after", "60")]), msg));
    }

    #[test]
    fn a_targets_jit_room_is_shared_by_its_clones() {
        let p = SharedPoints::default();
        let q = p.clone();
        assert!(p.same(&q));
        let scope = TargetScope::Org { org: "acme".into() };
        let now = 1_800_000_000_000;
        let all = p.jit_room(&scope, now).fits;
        q.reserve_jit(&scope, 4, now);
        assert_eq!(p.jit_room(&scope, now).fits, all - 4);
        let repo = TargetScope::Repo {
            owner: "a".into(),
            repo: "b".into(),
        };
        assert_eq!(p.jit_room(&repo, now).fits, all, "another route");
    }
}
