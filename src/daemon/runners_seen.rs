//! GitHub's runner list for each target as the daemon last read it (it reads it to
//! sweep registrations no attempt explains), published for `top`'s Runners view, which
//! never calls GitHub itself. One key-value row per target, overwritten each read.

use crate::domain::RegisteredRunner;
use crate::store::{Store, StoreError};
use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};

/// The row's key is this prefix and the target's name.
pub const KV_PREFIX: &str = "runners:";

/// One target's runner list and when it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnersSeen {
    pub at: Millis,
    pub runners: Vec<RegisteredRunner>,
}

/// Writes what a list read found. Runner names and labels only: no secret is in it.
pub fn publish(
    store: &dyn Store,
    target: &str,
    runners: &[RegisteredRunner],
    at: Millis,
) -> Result<(), StoreError> {
    let seen = RunnersSeen {
        at,
        runners: runners.to_vec(),
    };
    let text = serde_json::to_string(&seen).unwrap_or_default();
    store.kv_put(&format!("{KV_PREFIX}{target}"), &text)
}

/// What the daemon last published for `target`; `None` before its first list (or
/// from a build that wrote something else there).
pub fn read(store: &dyn Store, target: &str) -> Result<Option<RunnersSeen>, StoreError> {
    Ok(store
        .kv_get(&format!("{KV_PREFIX}{target}"))?
        .and_then(|t| serde_json::from_str(&t).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use crate::store::tests::TempDir;

    #[test]
    fn a_published_list_reads_back_and_an_unreadable_row_is_none() {
        let dir = TempDir::new("runners-seen");
        let store = SqliteStore::open(&dir.0).unwrap();
        assert_eq!(read(&store, "octo").unwrap(), None);
        let r = RegisteredRunner {
            id: 7,
            name: "rm-0123abcd-5".into(),
            online: true,
            busy: false,
            labels: vec!["self-hosted".into()],
        };
        publish(&store, "octo", std::slice::from_ref(&r), 42).unwrap();
        assert_eq!(
            read(&store, "octo").unwrap(),
            Some(RunnersSeen {
                at: 42,
                runners: vec![r]
            })
        );
        store.kv_put("runners:octo", "not json").unwrap();
        assert_eq!(read(&store, "octo").unwrap(), None);
    }
}
