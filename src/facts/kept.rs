//! What the state directory keeps, as `status` and `doctor` show it (`Kept`): ended
//! attempts for the host's retention, their logs against the cap, and the store's
//! files; and the logs directory as listed, which `daemon::host::retention` prunes.

use crate::domain::Host;
use std::collections::BTreeMap;
use std::path::Path;

/// One attempt's files under `STATE_DIR/logs` (`<id>.log`, `<id>.pid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptLogs {
    pub attempt: i64,
    pub bytes: u64,
    pub files: Vec<String>,
}

/// The logs directory as listed: each attempt's files, oldest attempt first (ids only
/// grow). Files that are not an attempt's are left out, and left alone.
pub fn list_logs(state_dir: &Path) -> Vec<AttemptLogs> {
    let mut by_id: BTreeMap<i64, AttemptLogs> = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(state_dir.join("logs")) else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name
            .split_once('.')
            .and_then(|(id, ext)| matches!(ext, "log" | "pid").then_some(id))
            .and_then(|id| id.parse::<i64>().ok())
        else {
            continue;
        };
        // Never followed: a link (which nothing here makes) counts as its own size.
        let bytes = e.metadata().map_or(0, |m| m.len());
        let a = by_id.entry(id).or_insert_with(|| AttemptLogs {
            attempt: id,
            bytes: 0,
            files: Vec::new(),
        });
        a.bytes += bytes;
        a.files.push(name);
    }
    by_id.into_values().collect()
}

/// What the state directory keeps, for `status` and `doctor`: ended attempts for the
/// host's retention, their logs against the cap, and the store's files.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Kept {
    pub retention_secs: u64,
    pub logs_bytes: u64,
    pub logs_attempts: usize,
    pub logs_max_bytes: u64,
    pub store_bytes: u64,
}

impl Kept {
    pub fn read(dir: &Path, h: &Host) -> Kept {
        let logs = list_logs(dir);
        Kept {
            retention_secs: h.retention_secs,
            logs_bytes: logs.iter().map(|l| l.bytes).sum(),
            logs_attempts: logs.len(),
            logs_max_bytes: h.logs_max_bytes,
            store_bytes: crate::store::disk_bytes(dir),
        }
    }

    pub fn line(&self) -> String {
        format!(
            "ended attempts for {}; logs {} of {} ({} attempts); store {}",
            crate::timefmt::duration(self.retention_secs),
            crate::units::bytes(self.logs_bytes),
            crate::units::bytes(self.logs_max_bytes),
            self.logs_attempts,
            crate::units::bytes(self.store_bytes)
        )
    }
}
