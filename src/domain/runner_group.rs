//! A profile's runner group and the one rule that resolves it to an id: the Default
//! group (no setting, `1`, or the name `Default`) is id 1, a number is that id, and
//! any other name is looked up once per cache (case-insensitively, as GitHub treats
//! group names) through whichever API the caller speaks: GitHub's REST groups list
//! or the scale set service's. The starter, the public guard, the scale set
//! listener and both checks resolve through [`GroupIds::resolve`].

use std::collections::HashMap;
use std::sync::Mutex;

/// GitHub's Default runner group, where a runner registers unless told otherwise.
pub const DEFAULT_RUNNER_GROUP_ID: i64 = 1;

/// A profile's runner group: the Default one, one by id, or one by name (an
/// organization's, to look up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerGroup<'a> {
    Default,
    Id(i64),
    Name(&'a str),
}

impl<'a> RunnerGroup<'a> {
    /// The group a profile's `runner_group` setting names.
    pub fn of(setting: Option<&'a str>) -> RunnerGroup<'a> {
        match setting {
            None => RunnerGroup::Default,
            Some(g) if g.eq_ignore_ascii_case("default") => RunnerGroup::Default,
            Some(g) => match g.parse::<i64>() {
                Ok(DEFAULT_RUNNER_GROUP_ID) => RunnerGroup::Default,
                Ok(id) => RunnerGroup::Id(id),
                Err(_) => RunnerGroup::Name(g),
            },
        }
    }

    /// The group's id when no lookup is needed.
    pub fn known_id(&self) -> Option<i64> {
        match self {
            RunnerGroup::Default => Some(DEFAULT_RUNNER_GROUP_ID),
            RunnerGroup::Id(id) => Some(*id),
            RunnerGroup::Name(_) => None,
        }
    }
}

/// Runner group ids found by name, kept for the life of whoever holds it (a target's
/// workers, a listener, one check).
#[derive(Debug, Default)]
pub struct GroupIds {
    by_name: Mutex<HashMap<String, i64>>,
}

impl GroupIds {
    /// The group's id: known, cached, or looked up by `lookup` (which answers `None`
    /// when no group has the name; that is not cached, so a group made later is
    /// found).
    pub fn resolve<E>(
        &self,
        group: RunnerGroup<'_>,
        lookup: impl FnOnce(&str) -> Result<Option<i64>, E>,
    ) -> Result<Option<i64>, E> {
        let name = match group {
            RunnerGroup::Name(name) => name,
            known => return Ok(known.known_id()),
        };
        let key = name.to_ascii_lowercase();
        if let Some(id) = self.lock().get(&key) {
            return Ok(Some(*id));
        }
        let found = lookup(name)?;
        if let Some(id) = found {
            self.lock().insert(key, id);
        }
        Ok(found)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.by_name.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_group_is_id_one_however_it_is_written() {
        for s in [None, Some("1"), Some("default"), Some("Default")] {
            assert_eq!(RunnerGroup::of(s), RunnerGroup::Default, "{s:?}");
            assert_eq!(RunnerGroup::of(s).known_id(), Some(DEFAULT_RUNNER_GROUP_ID));
        }
        assert_eq!(RunnerGroup::of(Some("7")), RunnerGroup::Id(7));
        assert_eq!(RunnerGroup::of(Some("gpu")), RunnerGroup::Name("gpu"));
    }

    #[test]
    fn a_name_is_looked_up_once_and_a_missing_one_again() {
        let ids = GroupIds::default();
        let mut calls = 0;
        let mut look = |found: Option<i64>| {
            ids.resolve::<()>(RunnerGroup::Name("GPU"), |_| {
                calls += 1;
                Ok(found)
            })
        };
        assert_eq!(look(None), Ok(None));
        assert_eq!(look(Some(9)), Ok(Some(9)));
        assert_eq!(look(Some(10)), Ok(Some(9)), "cached");
        assert_eq!(calls, 2);
        // Case-insensitive, as GitHub; known groups need no lookup.
        let r = ids.resolve::<()>(RunnerGroup::Name("gpu"), |_| panic!("looked up"));
        assert_eq!(r, Ok(Some(9)));
        let r = ids.resolve::<()>(RunnerGroup::Default, |_| panic!("looked up"));
        assert_eq!(r, Ok(Some(1)));
        let e = ids.resolve(RunnerGroup::Name("x"), |_| Err("down"));
        assert_eq!(e, Err("down"));
    }
}
