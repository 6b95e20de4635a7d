//! Whose job a runner ran: the repository, workflow, job, run and run attempt, as the
//! demand source that served it said, and the bounded book of them by runner name
//! that the sources fill and the target loops read.
//!
//! Every source already hands us these facts; none is asked again for them:
//! - REST: a run's jobs list (read for the queue anyway) names each job's
//!   `runner_name` once a runner took it, with `workflow_name` and `run_attempt`;
//! - webhooks: a `workflow_job` delivery carries the same fields;
//! - scale sets: `JobStarted` and `JobCompleted` name the runner, the repository and
//!   the run, but not the workflow's name (only its file, from `jobWorkflowRef`) nor
//!   the run attempt, and their job id is not REST's;
//! - a coordinated host reads no queue: the coordinator sends it, in `owners` frames,
//!   the owners its own queue read found for the host's runners.

use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};

/// The longest repository, workflow or job name kept (all come from outside).
pub const MAX_OWNER_TEXT: usize = 256;
/// The most runner names the book keeps: far more than the runners that live on a
/// host at once; past it, the entry put in longest ago goes first.
pub const MAX_BOOK: usize = 4_096;

/// Which source said whose job it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerSource {
    Rest,
    Webhook,
    ScaleSet,
    /// A coordinated host's runner, as the coordinator's queue read saw it (REST's
    /// fields, or a scale set's, whichever the coordinator reads).
    Coordinator,
}

impl OwnerSource {
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerSource::Rest => "rest",
            OwnerSource::Webhook => "webhook",
            OwnerSource::ScaleSet => "scaleset",
            OwnerSource::Coordinator => "coordinator",
        }
    }

    pub fn parse(s: &str) -> Option<OwnerSource> {
        [
            OwnerSource::Rest,
            OwnerSource::Webhook,
            OwnerSource::ScaleSet,
            OwnerSource::Coordinator,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

/// The job a runner took, as its source described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOwner {
    /// `owner/repo`.
    pub repo: String,
    /// The workflow's name (REST, webhooks), or its file (scale sets); `None` when
    /// the source did not say.
    pub workflow: Option<String>,
    /// The job's display name.
    pub job_name: String,
    pub run_id: i64,
    /// `None` from a scale set, which does not say.
    pub run_attempt: Option<u32>,
    /// GitHub's REST job id; `None` from a scale set (its ids are its own).
    pub job_id: Option<i64>,
    /// When the job was queued, where the source said.
    pub queued_at: Option<Millis>,
    pub source: OwnerSource,
}

impl JobOwner {
    /// The owner with every text cut to [`MAX_OWNER_TEXT`] characters.
    pub fn bounded(mut self) -> JobOwner {
        self.repo = bounded(&self.repo);
        self.workflow = self.workflow.as_deref().map(bounded);
        self.job_name = bounded(&self.job_name);
        self
    }
}

fn bounded(s: &str) -> String {
    match s.char_indices().nth(MAX_OWNER_TEXT) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// The workflow's file from a scale set's `jobWorkflowRef`
/// (`owner/repo/.github/workflows/ci.yml@refs/heads/main` → `ci.yml`).
pub fn workflow_of_ref(r: &str) -> Option<String> {
    let path = r.split('@').next()?;
    let file = path.rsplit('/').next()?;
    (!file.is_empty()).then(|| file.to_string())
}

/// Owners by runner name, bounded: the sources put, the target loops look up. Only
/// our runners' names are kept (the caller says which prefix is ours).
#[derive(Debug, Default)]
pub struct OwnerBook {
    by_runner: HashMap<String, JobOwner>,
    order: VecDeque<String>,
}

impl OwnerBook {
    /// Keeps `owner` for `runner` when the name starts with `ours`; a later word of a
    /// fuller source (one that names the workflow) replaces an earlier one.
    pub fn put(&mut self, ours: &str, runner: &str, owner: JobOwner) {
        if !runner.starts_with(ours) || runner.is_empty() {
            return;
        }
        let owner = owner.bounded();
        match self.by_runner.get_mut(runner) {
            Some(old) => {
                if old.workflow.is_none() || owner.workflow.is_some() {
                    *old = merge(old, owner);
                }
            }
            None => {
                self.by_runner.insert(runner.to_string(), owner);
                self.order.push_back(runner.to_string());
                while self.order.len() > MAX_BOOK {
                    if let Some(gone) = self.order.pop_front() {
                        self.by_runner.remove(&gone);
                    }
                }
            }
        }
    }

    pub fn get(&self, runner: &str) -> Option<&JobOwner> {
        self.by_runner.get(runner)
    }

    pub fn len(&self) -> usize {
        self.by_runner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_runner.is_empty()
    }
}

/// The newer word, keeping what only the older one said.
fn merge(old: &JobOwner, new: JobOwner) -> JobOwner {
    JobOwner {
        workflow: new.workflow.or_else(|| old.workflow.clone()),
        run_attempt: new.run_attempt.or(old.run_attempt),
        job_id: new.job_id.or(old.job_id),
        queued_at: new.queued_at.or(old.queued_at),
        ..new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(workflow: Option<&str>, source: OwnerSource) -> JobOwner {
        JobOwner {
            repo: "octo/app".into(),
            workflow: workflow.map(Into::into),
            job_name: "build".into(),
            run_id: 7,
            run_attempt: (source != OwnerSource::ScaleSet).then_some(1),
            job_id: (source != OwnerSource::ScaleSet).then_some(70),
            queued_at: Some(1_000),
            source,
        }
    }

    #[test]
    fn only_our_runners_are_kept_and_the_fuller_word_wins() {
        let mut b = OwnerBook::default();
        b.put(
            "rm-0123abcd-",
            "someone-else",
            owner(Some("CI"), OwnerSource::Rest),
        );
        assert!(b.is_empty());
        b.put(
            "rm-0123abcd-",
            "rm-0123abcd-1",
            owner(None, OwnerSource::ScaleSet),
        );
        b.put(
            "rm-0123abcd-",
            "rm-0123abcd-1",
            owner(Some("CI"), OwnerSource::Rest),
        );
        let got = b.get("rm-0123abcd-1").unwrap();
        assert_eq!(got.workflow.as_deref(), Some("CI"));
        assert_eq!(got.source, OwnerSource::Rest);
        // A later word without the workflow does not take it away.
        b.put(
            "rm-0123abcd-",
            "rm-0123abcd-1",
            owner(None, OwnerSource::ScaleSet),
        );
        assert_eq!(
            b.get("rm-0123abcd-1").unwrap().workflow.as_deref(),
            Some("CI")
        );
    }

    #[test]
    fn the_book_is_bounded_oldest_first() {
        let mut b = OwnerBook::default();
        for i in 0..MAX_BOOK + 3 {
            b.put("rm-", &format!("rm-{i}"), owner(None, OwnerSource::Webhook));
        }
        assert_eq!(b.len(), MAX_BOOK);
        assert!(b.get("rm-0").is_none() && b.get("rm-2").is_none());
        assert!(b.get(&format!("rm-{}", MAX_BOOK + 2)).is_some());
    }

    #[test]
    fn texts_from_outside_are_bounded() {
        let mut o = owner(Some(&"w".repeat(1000)), OwnerSource::Webhook);
        o.job_name = "é".repeat(1000);
        let o = o.bounded();
        assert_eq!(o.workflow.unwrap().chars().count(), MAX_OWNER_TEXT);
        assert_eq!(o.job_name.chars().count(), MAX_OWNER_TEXT);
    }

    #[test]
    fn a_workflow_ref_names_its_file() {
        assert_eq!(
            workflow_of_ref("octo/app/.github/workflows/ci.yml@refs/heads/main").as_deref(),
            Some("ci.yml")
        );
        assert_eq!(workflow_of_ref(""), None);
    }
}
