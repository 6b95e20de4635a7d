//! Pure decisions about keeping a managed runner install current: the version an
//! operator pins (`host set runner_version=`), the version an install should be at
//! given the pin, the newest release seen and the one it has, and which installed
//! versions may be removed given what live attempts' roots still link to.

use super::compare_versions;
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::Path;

/// A version and a pin are read by the domain's rule (`host set` checks it there).
pub use crate::domain::validate::{is_version, runner_version as parse_pin};

/// The version an install should switch to, or `None` to keep what it has. A pin is
/// followed either way (down too: the operator asked for it); without one the newest
/// release seen is taken when it is newer than the install, never older (a listing
/// that goes back is not a reason to downgrade). With nothing seen yet and no pin,
/// nothing changes.
pub fn wanted(pin: Option<&str>, newest: Option<&str>, current: Option<&str>) -> Option<String> {
    let want = match (pin, newest) {
        (Some(p), _) => p,
        (None, Some(n)) => {
            if current.is_some_and(|c| compare_versions(n, c) != Ordering::Greater) {
                return None;
            }
            n
        }
        (None, None) => return None,
    };
    (current != Some(want)).then(|| want.to_string())
}

/// What live attempts' roots link to, for deciding which installs may go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InUse {
    /// Versions under the versions directory some root links into.
    pub versions: BTreeSet<String>,
    /// A live attempt whose root is not complete yet (its start may be copying from
    /// an install resolved before a switch): nothing may go until it is.
    pub unknown: bool,
    /// A root links through a managed install path itself rather than a versioned
    /// directory (made before that path was a link): switching that path would change
    /// what the root sees.
    pub through_path: bool,
}

impl InUse {
    /// Adds one link target of a root: `versions_dir/<v>/...` marks `v` in use, a
    /// target under one of `paths` marks `through_path`; anything else is the root's
    /// own business.
    pub fn note_link(&mut self, target: &Path, versions_dir: &Path, paths: &[&Path]) {
        if let Ok(rest) = target.strip_prefix(versions_dir) {
            if let Some(v) = rest.components().next() {
                self.versions
                    .insert(v.as_os_str().to_string_lossy().into_owned());
            }
        } else if paths.iter().any(|p| target.starts_with(p)) {
            self.through_path = true;
        }
    }
}

/// The installed versions that may be removed: not kept (a managed path's current
/// version, or the pin) and not in use; none while any live root is unknown.
pub fn removable(installed: &[String], keep: &BTreeSet<String>, in_use: &InUse) -> Vec<String> {
    if in_use.unknown {
        return Vec::new();
    }
    installed
        .iter()
        .filter(|v| !keep.contains(*v) && !in_use.versions.contains(*v))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_latest_or_a_version() {
        assert_eq!(parse_pin("runner_version", "latest").unwrap(), None);
        assert_eq!(parse_pin("runner_version", "").unwrap(), None);
        assert_eq!(
            parse_pin("runner_version", "2.330.0").unwrap().as_deref(),
            Some("2.330.0")
        );
        for bad in [
            "2",
            "v2.330.0",
            "2.330.0-rc1",
            "../2.3",
            "2..3",
            "1.2.3.4.5",
            " 2.3",
        ] {
            let e = parse_pin("runner_version", bad).unwrap_err();
            assert_eq!(e.arg, "runner_version", "{bad}");
        }
    }

    #[test]
    fn the_version_to_switch_to() {
        // Unpinned: newer releases are taken, the same or older are not.
        assert_eq!(
            wanted(None, Some("2.337.0"), Some("2.336.0")).as_deref(),
            Some("2.337.0")
        );
        assert_eq!(wanted(None, Some("2.336.0"), Some("2.336.0")), None);
        assert_eq!(wanted(None, Some("2.335.0"), Some("2.336.0")), None);
        assert_eq!(
            wanted(None, Some("2.10.0"), Some("2.9.0")).as_deref(),
            Some("2.10.0")
        );
        // An install whose version cannot be read takes the newest.
        assert_eq!(
            wanted(None, Some("2.337.0"), None).as_deref(),
            Some("2.337.0")
        );
        // Nothing seen, nothing pinned: nothing changes.
        assert_eq!(wanted(None, None, Some("2.336.0")), None);
        // A pin is followed, down too, whatever was seen.
        assert_eq!(
            wanted(Some("2.330.0"), Some("2.337.0"), Some("2.336.0")).as_deref(),
            Some("2.330.0")
        );
        assert_eq!(wanted(Some("2.330.0"), None, Some("2.330.0")), None);
        assert_eq!(
            wanted(Some("2.338.0"), Some("2.337.0"), Some("2.337.0")).as_deref(),
            Some("2.338.0")
        );
    }

    #[test]
    fn which_installs_may_go() {
        let installed: Vec<String> = ["2.335.0", "2.336.0", "2.337.0"].map(String::from).to_vec();
        let keep: BTreeSet<String> = ["2.337.0".to_string()].into();
        let vd = Path::new("/s/runners");
        let path = Path::new("/s/runner");
        let mut in_use = InUse::default();
        in_use.note_link(Path::new("/s/runners/2.336.0/externals"), vd, &[path]);
        in_use.note_link(Path::new("/elsewhere/x"), vd, &[path]);
        assert!(!in_use.through_path);
        // The old one a live root links into stays; the older one unused goes.
        assert_eq!(
            removable(&installed, &keep, &in_use),
            vec!["2.335.0".to_string()]
        );
        // Once no root links to it, it goes too.
        assert_eq!(
            removable(&installed, &keep, &InUse::default()),
            vec!["2.335.0".to_string(), "2.336.0".to_string()]
        );
        // A root not complete yet: nothing goes.
        let unknown = InUse {
            unknown: true,
            ..InUse::default()
        };
        assert!(removable(&installed, &keep, &unknown).is_empty());
        // A root made through the path itself is noted.
        let mut through = InUse::default();
        through.note_link(Path::new("/s/runner/externals"), vd, &[path]);
        assert!(through.through_path);
    }
}
