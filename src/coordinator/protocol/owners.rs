//! Whose job a host's runners took, on the wire: the `owners` frame the coordinator
//! sends a host that names the `owners` feature in its `hello`, each row a runner's
//! name and its job's owner as the coordinator's queue read saw it. The coordinator
//! cuts each row to the bounds and packs rows into frames of at most [`MAX_OWNERS`]
//! rows and [`OWNER_BYTES`] bytes; the host checks them.

use super::{FrameError, MAX_STR, bound_text as bound};
use crate::domain::job_owner::{JobOwner, OwnerSource};
use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};

/// Most rows one `owners` frame carries.
pub const MAX_OWNERS: usize = 64;
/// The bytes one frame's rows may take (the frame is at most `MAX_MESSAGE`).
pub const OWNER_BYTES: usize = 32 * 1024;
/// Most features a `hello` may name.
pub const MAX_FEATURES: usize = 16;

/// One runner's job owner: `JobOwner`'s fields with the runner's name, less its
/// source (the host records `coordinator`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerReport {
    pub runner_name: String,
    /// `owner/repo`.
    pub repo: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    pub job_name: String,
    pub run_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    /// Unix milliseconds, where the source said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<Millis>,
}

/// The `owners` frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owners {
    pub owners: Vec<OwnerReport>,
}

impl OwnerReport {
    /// The row as the coordinator sends it, its texts escaped and cut so that the host
    /// never refuses the frame for them; `None` for a runner name past the bounds
    /// (no host of ours names its runners so).
    pub fn bounded(runner_name: &str, owner: &JobOwner) -> Option<OwnerReport> {
        if runner_name.is_empty() || runner_name.len() > MAX_STR {
            return None;
        }
        let mut r = OwnerReport {
            runner_name: runner_name.to_string(),
            repo: owner.repo.clone(),
            workflow: owner.workflow.clone(),
            job_name: owner.job_name.clone(),
            run_id: owner.run_id,
            run_attempt: owner.run_attempt,
            job_id: owner.job_id,
            queued_at: owner.queued_at,
        };
        for s in [&mut r.runner_name, &mut r.repo, &mut r.job_name] {
            bound(s);
        }
        r.workflow.iter_mut().for_each(bound);
        Some(r)
    }

    /// The runner's name and its owner as the host keeps it.
    pub fn into_owner(self) -> (String, JobOwner) {
        let owner = JobOwner {
            repo: self.repo,
            workflow: self.workflow,
            job_name: self.job_name,
            run_id: self.run_id,
            run_attempt: self.run_attempt,
            job_id: self.job_id,
            queued_at: self.queued_at,
            source: OwnerSource::Coordinator,
        };
        (self.runner_name, owner)
    }

    fn texts(&self) -> impl Iterator<Item = &String> {
        [&self.runner_name, &self.repo, &self.job_name]
            .into_iter()
            .chain(self.workflow.as_ref())
    }
}

impl Owners {
    /// `rows` in frames of at most [`MAX_OWNERS`] rows and [`OWNER_BYTES`] bytes each,
    /// in order.
    pub fn pack(rows: Vec<OwnerReport>) -> Vec<Owners> {
        let mut frames = Vec::new();
        let mut cur = Owners::default();
        let mut bytes = 0;
        for row in rows {
            // A row's JSON and its comma.
            let len = serde_json::to_string(&row).map_or(OWNER_BYTES, |t| t.len() + 1);
            if !cur.owners.is_empty()
                && (cur.owners.len() >= MAX_OWNERS || bytes + len > OWNER_BYTES)
            {
                frames.push(std::mem::take(&mut cur));
                bytes = 0;
            }
            bytes += len;
            cur.owners.push(row);
        }
        if !cur.owners.is_empty() {
            frames.push(cur);
        }
        frames
    }

    /// The frame's bounds: how many rows, and their texts.
    pub(super) fn check(&self) -> Result<(), FrameError> {
        if self.owners.len() > MAX_OWNERS {
            return Err(FrameError::OutOfBounds(format!(
                "{} owners (at most {MAX_OWNERS})",
                self.owners.len()
            )));
        }
        if self
            .owners
            .iter()
            .flat_map(|r| r.texts())
            .any(|s| s.len() > MAX_STR)
        {
            return Err(FrameError::OutOfBounds(format!(
                "an owner text longer than {MAX_STR} bytes"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CoordMsg, MAX_MESSAGE};
    use super::*;

    fn owner(repo: &str, job: &str) -> JobOwner {
        JobOwner {
            repo: repo.into(),
            workflow: Some("CI".into()),
            job_name: job.into(),
            run_id: 7,
            run_attempt: Some(1),
            job_id: Some(70),
            queued_at: Some(1_000),
            source: OwnerSource::Rest,
        }
    }

    #[test]
    fn a_row_is_cut_to_the_bounds_and_comes_back_from_the_coordinator() {
        let long = format!("{}\u{1b}]0;title\u{7}", "é".repeat(150));
        let r = OwnerReport::bounded("rm-0123abcd-4", &owner("octo/app", &long)).unwrap();
        assert!(r.job_name.len() <= MAX_STR && !r.job_name.contains('\u{1b}'));
        let (runner, o) = r.clone().into_owner();
        assert_eq!(runner, "rm-0123abcd-4");
        assert_eq!(o.repo, "octo/app");
        assert_eq!(o.source, OwnerSource::Coordinator);
        assert_eq!((o.run_id, o.run_attempt, o.job_id), (7, Some(1), Some(70)));
        assert!(OwnerReport::bounded(&"r".repeat(MAX_STR + 1), &owner("a/b", "j")).is_none());
        assert!(OwnerReport::bounded("", &owner("a/b", "j")).is_none());
        // Through the codec, as the host reads it.
        let text = CoordMsg::Owners(Owners {
            owners: vec![r.clone()],
        })
        .encode();
        assert_eq!(
            CoordMsg::decode(&text).unwrap(),
            CoordMsg::Owners(Owners { owners: vec![r] })
        );
    }

    #[test]
    fn rows_are_packed_into_frames_a_host_takes() {
        let rows: Vec<OwnerReport> = (0..300)
            .map(|i| {
                let o = owner(&"r".repeat(MAX_STR), &"j".repeat(MAX_STR));
                OwnerReport::bounded(&format!("rm-0123abcd-{i}"), &o).unwrap()
            })
            .collect();
        let frames = Owners::pack(rows.clone());
        assert!(frames.len() > 300 / MAX_OWNERS, "{} frames", frames.len());
        let mut back = Vec::new();
        for f in frames {
            let text = CoordMsg::Owners(f).encode();
            assert!(text.len() < MAX_MESSAGE, "{} bytes", text.len());
            let Ok(CoordMsg::Owners(f)) = CoordMsg::decode(&text) else {
                panic!("refused: {text}");
            };
            assert!(f.owners.len() <= MAX_OWNERS);
            back.extend(f.owners);
        }
        assert_eq!(back, rows, "every row, once, in order");
        assert!(Owners::pack(Vec::new()).is_empty());
    }

    #[test]
    fn a_frame_past_the_bounds_is_refused() {
        let r = OwnerReport::bounded("rm-1", &owner("a/b", "j")).unwrap();
        let many = Owners {
            owners: vec![r.clone(); MAX_OWNERS + 1],
        };
        assert!(CoordMsg::decode(&CoordMsg::Owners(many).encode()).is_err());
        let mut long = r;
        long.repo = "x".repeat(MAX_STR + 1);
        let one = Owners { owners: vec![long] };
        assert!(CoordMsg::decode(&CoordMsg::Owners(one).encode()).is_err());
    }
}
