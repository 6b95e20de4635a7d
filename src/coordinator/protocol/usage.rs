//! The daily usage roll-up on the wire: the rows a host's `status` frame carries
//! (`usage`, changed since the coordinator's `usage_after`, bounded per frame), how a
//! host cuts a row to the bounds before it sends it, and the checks the coordinator
//! makes. A row replaces the coordinator's row of the same host, day and key, so a
//! row sent twice is counted once.

use super::{FrameError, MAX_STR, Status, bound_text, escape_controls};
use crate::domain::rollup::{Day, UsageFigures, UsageKey};
use serde::{Deserialize, Serialize};

/// Most rows one `status` frame carries.
pub const MAX_USAGE_ROWS: usize = 64;
/// The bytes a host lets one frame's rows take (the frame is at most `MAX_MESSAGE`).
pub const USAGE_BYTES: usize = 32 * 1024;
/// The largest figure a row may carry: 2^53 - 1, exact in every JSON reader.
pub const MAX_FIGURE: u64 = (1 << 53) - 1;
/// The days a host sends a coordinator that has none of its rows yet (its
/// `usage_after` is 0): two months, enough for last month's bill.
pub const USAGE_DAYS: Day = 62;
/// Days past which a row is refused: before 1970 or after the year 2200.
const MAX_DAY: Day = 84_000;

/// One daily roll-up row of the host's, on the wire: the key's fields and the
/// figures' fields side by side (`day`, `repo`, … `busy_ms`, … `wait`, `lost`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageReport {
    #[serde(flatten)]
    pub key: UsageKey,
    #[serde(flatten)]
    pub figures: UsageFigures,
}

impl UsageReport {
    /// The row as a host sends it: control characters escaped and each text cut to
    /// `MAX_STR` bytes (on a character boundary), each figure to [`MAX_FIGURE`], so
    /// that the coordinator never refuses the frame for it.
    pub fn bounded(mut key: UsageKey, mut figures: UsageFigures) -> UsageReport {
        for s in [
            &mut key.repo,
            &mut key.workflow,
            &mut key.job,
            &mut key.profile,
        ] {
            bound_text(s);
        }
        for v in figure_fields(&mut figures) {
            *v = (*v).min(MAX_FIGURE);
        }
        UsageReport { key, figures }
    }

    fn texts(&mut self) -> [&mut String; 4] {
        let k = &mut self.key;
        [&mut k.repo, &mut k.workflow, &mut k.job, &mut k.profile]
    }
}

fn figure_fields(f: &mut UsageFigures) -> impl Iterator<Item = &mut u64> {
    [
        &mut f.runners,
        &mut f.jobs,
        &mut f.busy_ms,
        &mut f.idle_ms,
        &mut f.cpu_ms,
        &mut f.peak_rss_bytes,
        &mut f.rss_byte_secs,
        &mut f.lost,
        &mut f.reruns,
    ]
    .into_iter()
    .chain(f.wait.0.iter_mut())
}

impl Status {
    /// Puts `rows` (each with the host's sequence number, in increasing order) into
    /// the frame while it keeps to [`MAX_USAGE_ROWS`] and [`USAGE_BYTES`], and sets
    /// `usage_upto` to the last one's number. Returns how many went in.
    pub fn pack_usage(&mut self, rows: Vec<(i64, UsageReport)>) -> usize {
        let mut bytes = 0;
        for (seq, row) in rows {
            if self.usage.len() >= MAX_USAGE_ROWS {
                break;
            }
            // A row's JSON and its comma.
            bytes += serde_json::to_string(&row).map_or(usize::MAX, |t| t.len() + 1);
            if bytes > USAGE_BYTES {
                break;
            }
            self.usage.push(row);
            self.usage_upto = Some(seq);
        }
        self.usage.len()
    }

    /// Escapes the control characters of the rows' texts (the host did, but the
    /// coordinator does not take its word for it).
    pub(super) fn escape_usage(&mut self) {
        for r in &mut self.usage {
            r.texts().into_iter().for_each(escape_controls);
        }
    }

    /// The rows' bounds: how many, their texts, days and figures.
    pub(super) fn check_usage(&self) -> Result<(), FrameError> {
        if self.usage.len() > MAX_USAGE_ROWS {
            return Err(FrameError::OutOfBounds(format!(
                "{} usage rows (at most {MAX_USAGE_ROWS})",
                self.usage.len()
            )));
        }
        for r in &self.usage {
            let mut r = r.clone();
            let day = r.key.day;
            if !(0..=MAX_DAY).contains(&day) {
                return Err(FrameError::OutOfBounds(format!("usage day {day}")));
            }
            if r.texts().iter().any(|s| s.len() > MAX_STR) {
                return Err(FrameError::OutOfBounds(format!(
                    "a usage text longer than {MAX_STR} bytes"
                )));
            }
            if figure_fields(&mut r.figures).any(|v| *v > MAX_FIGURE) {
                return Err(FrameError::OutOfBounds(format!(
                    "a usage figure above {MAX_FIGURE}"
                )));
            }
        }
        Ok(())
    }
}
