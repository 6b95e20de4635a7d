//! `workflow_job` webhooks as hints: a bounded book of the jobs heard of by webhook,
//! per repository and run, which `read_queue` answers runs from instead of reading
//! their jobs lists (GitHub shows a job's labels nowhere else over REST, so each run
//! read is a unit). No I/O here: parsing, signature checks and the book's decisions.
//!
//! The book is a hint, never the truth: a run the run lists name as `queued` while the
//! book shows none of its jobs queued (past a grace for deliveries on their way) is read
//! by REST again, so a lost delivery delays a job by a poll and never loses it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::domain::QueuedJob;
use crate::domain::job_owner::{JobOwner, OwnerSource};
use crate::timefmt::{Millis, parse_rfc3339};

/// How long a run the book shows with no queued job may be listed `queued` before it
/// is read by REST: deliveries of its newest events may still be on their way.
pub const GRACE_MS: Millis = 10_000;
/// A queued job a REST read finds unheard of this long after it was created counts
/// as a lost delivery (GitHub's come within a second or two; `created_at` has whole
/// seconds). A slower one counted lost costs only polls: the run lists are then read
/// at every poll, as before deliveries came.
pub const LATE_MS: Millis = 3_000;
/// A run not heard of for this long is read by REST while listed (its answer may be
/// stale: a lost `in_progress` delivery hides the jobs queued behind it)...
pub const STALE_MS: Millis = 300_000;
/// ...or for this long, while deliveries were seen lost within [`LOSSY_FOR_MS`].
pub const STALE_LOSSY_MS: Millis = 30_000;
pub const LOSSY_FOR_MS: Millis = 600_000;
/// A run not heard of for this long is forgotten (read by REST again if still listed).
pub const FORGET_AFTER_MS: Millis = 3_600_000;
/// The most runs the book keeps; past it, the runs heard of longest ago go first.
pub const MAX_RUNS: usize = 20_000;
/// The most jobs the book keeps per run (a matrix has at most 256).
pub const MAX_JOBS_PER_RUN: usize = 256;
/// The largest delivery the listener reads (GitHub's are about 10 KiB).
pub const MAX_DELIVERY_BYTES: usize = 256 * 1024;
/// How long a delivery taken is remembered (its body and `X-GitHub-Delivery` id), so
/// that the same one again is a replay: past GitHub's redelivery window (deliveries of
/// the past 3 days on github.com, 7 on GHES), with a day to spare.
pub const DELIVERY_WINDOW_MS: Millis = 8 * 86_400_000;
/// GitHub fails a job that waited 24 hours for a runner: a `queued` delivery dated
/// longer ago announces a job GitHub no longer queues (a replay, or a redelivery of
/// an old one), and starts nothing.
pub const QUEUED_AT_MOST_MS: Millis = 86_400_000;

/// What becomes of a signed `workflow_job` delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Taken: recorded in the book, its runner's owner noted, the loops woken.
    Take,
    /// Taken before (by its body or its id, within [`DELIVERY_WINDOW_MS`]): a replay, or
    /// GitHub's redelivery of one already taken. Answered 200 without effect, so the
    /// sender has nothing to retry.
    Duplicate,
    /// Dated too long ago to be news: a `queued` job older than [`QUEUED_AT_MOST_MS`],
    /// or any job older than [`DELIVERY_WINDOW_MS`] (whether it was taken is no longer
    /// known). Answered 200 without effect.
    Stale,
}

impl Verdict {
    /// The word the metrics and the reply use.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Take => "accepted",
            Verdict::Duplicate => "duplicate",
            Verdict::Stale => "stale",
        }
    }
}

/// Judges a signed delivery of `job`: `first` says whether the store had not seen it
/// yet (`SqliteStore::take_delivery`), `dated` the newest time its payload gives for
/// the job (`created_at`, `started_at`: [`parse_delivery`]). An undated one, or one
/// dated after `now` (a clock behind GitHub's), is judged by `first` alone.
pub fn judge(first: bool, job: &HookJob, dated: Option<Millis>, now: Millis) -> Verdict {
    if !first {
        return Verdict::Duplicate;
    }
    let age = dated.map_or(0, |at| now - at);
    if age > DELIVERY_WINDOW_MS || (job.status == HookStatus::Queued && age > QUEUED_AT_MOST_MS) {
        return Verdict::Stale;
    }
    Verdict::Take
}

/// A delivery's body as the store knows it, since the body is what the signature
/// covers (`X-GitHub-Delivery` is not signed): the first 128 bits of its SHA-256.
pub fn body_digest(body: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, body).as_ref()[..16].to_vec()
}

/// Whether time `t` fell before the book began to listen (`listening_since`): what
/// went missing then was sent while no daemon listened. Never, before it listens.
fn before_listening(listening_since: Option<Millis>, t: Millis) -> bool {
    listening_since.is_some_and(|r| t < r)
}

/// The book as the listener and the target loops' clients share it.
pub type SharedBook = Arc<Mutex<HookBook>>;

/// One job as a `workflow_job` delivery describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookJob {
    pub id: i64,
    pub run_id: i64,
    /// `owner/repo` as the payload's `repository.full_name` spells it.
    pub repo: String,
    pub name: String,
    pub labels: Vec<String>,
    /// The job's own `status`, read at the edge ([`HookStatus::parse`]).
    pub status: HookStatus,
    pub created_at: Millis,
    /// The runner that took it, its workflow's name and its run attempt (for the
    /// usage roll-up); absent before a runner took it, and in older snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_attempt: Option<u32>,
}

/// A job's `status` as a delivery says it. Stored in the book's snapshot as GitHub's
/// word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum HookStatus {
    /// `waiting`, `requested` or `pending`: not yet queued (a deployment's reviewers,
    /// a concurrency group).
    Waiting,
    Queued,
    InProgress,
    /// `completed`, and any word GitHub may add: past running, never queued again.
    Completed,
}

impl HookStatus {
    /// GitHub's word; an unknown one is past running (it never reads as queued).
    pub fn parse(word: &str) -> HookStatus {
        match word {
            "waiting" | "requested" | "pending" => HookStatus::Waiting,
            "queued" => HookStatus::Queued,
            "in_progress" => HookStatus::InProgress,
            _ => HookStatus::Completed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HookStatus::Waiting => "waiting",
            HookStatus::Queued => "queued",
            HookStatus::InProgress => "in_progress",
            HookStatus::Completed => "completed",
        }
    }

    /// A job only moves forward; a delivery that arrives late never moves it back.
    fn rank(self) -> u8 {
        match self {
            HookStatus::Waiting => 0,
            HookStatus::Queued => 1,
            HookStatus::InProgress => 2,
            HookStatus::Completed => 3,
        }
    }
}

impl From<String> for HookStatus {
    fn from(word: String) -> HookStatus {
        HookStatus::parse(&word)
    }
}

impl From<HookStatus> for String {
    fn from(s: HookStatus) -> String {
        s.as_str().to_string()
    }
}

impl HookJob {
    fn rank(&self) -> u8 {
        self.status.rank()
    }

    /// Whose job this is, by the runner that took it; `None` before one did.
    pub fn owner(&self) -> Option<(String, JobOwner)> {
        let runner = self.runner_name.as_deref().filter(|n| !n.is_empty())?;
        Some((
            runner.to_string(),
            JobOwner {
                repo: self.repo.clone(),
                workflow: self.workflow.clone(),
                job_name: self.name.clone(),
                run_id: self.run_id,
                run_attempt: self.run_attempt,
                job_id: Some(self.id),
                queued_at: Some(self.created_at),
                source: OwnerSource::Webhook,
            },
        ))
    }
}

#[derive(Deserialize)]
struct Payload {
    action: String,
    workflow_job: PayloadJob,
    repository: PayloadRepo,
}

#[derive(Deserialize)]
struct PayloadJob {
    id: i64,
    run_id: i64,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    started_at: Option<String>,
    #[serde(default)]
    runner_name: Option<String>,
    #[serde(default)]
    workflow_name: Option<String>,
    #[serde(default)]
    run_attempt: Option<u32>,
}

#[derive(Deserialize)]
struct PayloadRepo {
    full_name: String,
}

/// Why a delivery was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No `X-Hub-Signature-256`, or one that does not match the body.
    Signature,
    /// Signed, but not a `workflow_job` payload we can read.
    Malformed(String),
}

/// Parses a delivery: `Ok(None)` for an event other than `workflow_job` (or an action
/// the book has no use for), `Ok(Some(job))` for a job's new state. `now` stands in for
/// a `created_at` the payload lacks.
pub fn parse(event: Option<&str>, body: &[u8], now: Millis) -> Result<Option<HookJob>, Refused> {
    Ok(parse_delivery(event, body, now)?.map(|(job, _)| job))
}

/// [`parse`], with the newest time the payload gives for the job (`created_at` or
/// `started_at`, the later: a job queued after waiting for its environment may keep
/// the `created_at` of its run's start), `None` when it gives neither: what
/// [`judge`] dates a delivery by.
pub fn parse_delivery(
    event: Option<&str>,
    body: &[u8],
    now: Millis,
) -> Result<Option<(HookJob, Option<Millis>)>, Refused> {
    if event != Some("workflow_job") {
        return Ok(None);
    }
    let p: Payload =
        serde_json::from_slice(body).map_err(|e| Refused::Malformed(format!("{e}")))?;
    if !matches!(
        p.action.as_str(),
        "queued" | "waiting" | "in_progress" | "completed"
    ) {
        return Ok(None);
    }
    let w = p.workflow_job;
    let created_at = w
        .created_at
        .as_deref()
        .or(w.started_at.as_deref())
        .and_then(parse_rfc3339)
        .unwrap_or(now);
    let dated = [&w.created_at, &w.started_at]
        .into_iter()
        .filter_map(|t| t.as_deref().and_then(parse_rfc3339))
        .max();
    let job = HookJob {
        id: w.id,
        run_id: w.run_id,
        repo: p.repository.full_name,
        name: w.name,
        labels: w.labels,
        // The job's own status: GitHub sends action `queued` for a job still `waiting`.
        status: HookStatus::parse(w.status.as_deref().unwrap_or(&p.action)),
        created_at,
        runner_name: w.runner_name,
        workflow: w.workflow_name,
        run_attempt: w.run_attempt,
    };
    Ok(Some((job, dated)))
}

/// Whether `header` (`X-Hub-Signature-256`: `sha256=` and the hex HMAC-SHA256 of the
/// raw body under the webhook's secret) signs `body`. Compared in constant time.
pub fn verify_signature(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(hex) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Some(tag) = decode_hex(hex) else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    ring::hmac::verify(&key, body, &tag).is_ok()
}

/// `sha256=<hex>`: the header a sender puts on `body` (the simulated GitHub's, tests').
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[derive(Serialize, Deserialize)]
struct RunEntry {
    jobs: BTreeMap<i64, HookJob>,
    heard_at: Millis,
    /// More jobs than [`MAX_JOBS_PER_RUN`]: left to REST.
    overflow: bool,
    /// The book's `version` when the run was last heard of (not kept in snapshots: a
    /// restored run is news to no loop).
    #[serde(skip)]
    seq: u64,
}

/// A run heard of since a loop last asked (`HookBook::heard_since`): its jobs queued
/// now, and those a delivery took past `queued` (which no longer wait for a runner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    pub run: i64,
    pub queued: Vec<QueuedJob>,
    pub gone: Vec<i64>,
}

impl RunEntry {
    /// The run's jobs queued now, as the queue holds jobs (`repo` as the caller
    /// spells it).
    fn queued(&self, repo: &str) -> Vec<QueuedJob> {
        self.jobs
            .values()
            .filter(|j| j.status == HookStatus::Queued)
            .map(|j| QueuedJob {
                id: j.id,
                run_id: j.run_id,
                repo: repo.to_string(),
                name: j.name.clone(),
                labels: j.labels.clone(),
                created_at: j.created_at,
            })
            .collect()
    }
}

/// What the book says of a listed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The run's queued jobs, from webhooks: no read needed.
    Jobs(Vec<QueuedJob>),
    /// Read its jobs list: the book never heard of it, or it contradicts the run list.
    Read,
}

/// The jobs heard of by webhook, per repository and run (see the module's doc).
#[derive(Default)]
pub struct HookBook {
    runs: HashMap<(String, i64), RunEntry>,
    /// Deliveries taken, and the last one's time.
    pub accepted: u64,
    pub last_delivery: Option<Millis>,
    /// Jobs-list GETs the book spared (runs answered from it).
    pub spared: u64,
    /// When a delivery was last seen lost while the book listened: a job heard of first
    /// past `queued`, one that skipped `in_progress`, or a run the run lists
    /// contradicted. What a restart explains is not counted (`listening_since`).
    pub loss_seen: Option<Millis>,
    /// When this daemon began to listen (and took the last one's snapshot back, if
    /// any): deliveries sent before were lost, so what was heard before may be stale,
    /// and a job created before may never have been announced.
    pub listening_since: Option<Millis>,
    /// Bumped by every record: a snapshot is due when it moved.
    pub version: u64,
}

/// The most runs a snapshot keeps (the ones heard of last).
pub const SNAPSHOT_RUNS: usize = 2_000;

fn key(repo: &str, run: i64) -> (String, i64) {
    (repo.to_ascii_lowercase(), run)
}

impl HookBook {
    pub fn shared() -> SharedBook {
        Arc::new(Mutex::new(HookBook::default()))
    }

    /// Takes a job's new state (a status never goes back), and forgets what is old.
    pub fn record(&mut self, job: HookJob, now: Millis) {
        self.accepted += 1;
        self.version += 1;
        self.last_delivery = Some(now);
        let entry = self
            .runs
            .entry(key(&job.repo, job.run_id))
            .or_insert_with(|| RunEntry {
                jobs: BTreeMap::new(),
                heard_at: now,
                overflow: false,
                seq: 0,
            });
        // A step skipped since the run was last heard of, or a job first heard of past
        // `queued`, is a lost delivery, unless it may have been sent while no daemon
        // listened.
        let away = |t: Millis| before_listening(self.listening_since, t);
        let before = entry.jobs.get(&job.id).map_or(1, HookJob::rank);
        let rank = job.rank();
        let skipped = rank > before + 1 && !away(entry.heard_at);
        // `created_at` has whole seconds: the job may be up to one younger.
        let unheard =
            rank == 2 && !entry.jobs.contains_key(&job.id) && !away(job.created_at.min(now) + 999);
        if skipped || unheard {
            self.loss_seen = Some(now);
        }
        entry.heard_at = entry.heard_at.max(now);
        entry.seq = self.version;
        let room = entry.jobs.len() < MAX_JOBS_PER_RUN;
        match entry.jobs.get_mut(&job.id) {
            Some(known) if known.rank() > rank => {}
            Some(known) => *known = job,
            None if room => {
                entry.jobs.insert(job.id, job);
            }
            // A run past the cap is left to REST: it is not answered from the book.
            None => entry.overflow = true,
        }
        if self.runs.len() > MAX_RUNS {
            self.prune(now);
        }
    }

    /// What to do about run `run` of `repo`, which the run lists named (`queued`: in
    /// the `status=queued` list, so GitHub says it holds a queued job).
    pub fn answer(&mut self, repo: &str, run: i64, queued: bool, now: Millis) -> Answer {
        let lossy = [self.loss_seen, self.listening_since]
            .iter()
            .any(|t| t.is_some_and(|t| now - t < LOSSY_FOR_MS));
        let Some(entry) = self.runs.get(&key(repo, run)) else {
            return Answer::Read;
        };
        if entry.overflow || now - entry.heard_at >= FORGET_AFTER_MS {
            return Answer::Read;
        }
        let jobs = entry.queued(repo);
        let age = now - entry.heard_at;
        // GitHub lists a run `queued` while it holds a queued job, and `in_progress`
        // only once none is: where the book disagrees it missed a delivery, unless the
        // deliveries that explain it are still on their way.
        if age >= GRACE_MS && jobs.is_empty() == queued {
            // Missed while no daemon listened, it says nothing of the deliveries now.
            if !before_listening(self.listening_since, entry.heard_at) {
                self.loss_seen = Some(now);
            }
            return Answer::Read;
        }
        // A run that waits long unheard may hide a job whose delivery was lost behind
        // one the book still shows queued: read it (a 304 while it does not change);
        // sooner while deliveries are being lost.
        if age >= if lossy { STALE_LOSSY_MS } else { STALE_MS } {
            return Answer::Read;
        }
        Answer::Jobs(jobs)
    }

    /// The runs of repositories `wanted` (by `owner/repo`) heard of after the book's
    /// version `since`, and the version they bring it to: a loop's queue takes them at
    /// once, so a queued delivery is demand without waiting for a poll, and one past
    /// `queued` frees what its job held. A run past the cap is REST's alone.
    pub fn heard_since(&self, since: u64, wanted: impl Fn(&str) -> bool) -> (u64, Vec<Heard>) {
        let mut out = Vec::new();
        for e in self.runs.values().filter(|e| e.seq > since && !e.overflow) {
            let Some(first) = e.jobs.values().next() else {
                continue;
            };
            if !wanted(&first.repo) {
                continue;
            }
            let gone = e.jobs.values().filter(|j| j.rank() > 1).map(|j| j.id);
            out.push(Heard {
                run: first.run_id,
                queued: e.queued(&first.repo),
                gone: gone.collect(),
            });
        }
        out.sort_by_key(|h| h.run);
        (self.version, out)
    }

    /// Forgets runs not heard of for [`FORGET_AFTER_MS`], then, past [`MAX_RUNS`], the
    /// runs heard of longest ago.
    pub fn prune(&mut self, now: Millis) {
        self.runs.retain(|_, e| now - e.heard_at < FORGET_AFTER_MS);
        if self.runs.len() > MAX_RUNS {
            // Down to nine tenths, so a full book does not sort itself at every record.
            let keep = MAX_RUNS * 9 / 10;
            let mut ages: Vec<Millis> = self.runs.values().map(|e| e.heard_at).collect();
            ages.sort_unstable();
            let cut = ages[self.runs.len() - keep];
            self.runs.retain(|_, e| e.heard_at >= cut);
        }
    }

    /// Runs the book holds.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The runs heard of last (at most [`SNAPSHOT_RUNS`]) as text, for a restarted
    /// daemon to start from (`restore`).
    pub fn snapshot(&self) -> String {
        let mut runs: Vec<&RunEntry> = self.runs.values().filter(|e| !e.overflow).collect();
        runs.sort_unstable_by_key(|e| std::cmp::Reverse(e.heard_at));
        runs.truncate(SNAPSHOT_RUNS);
        serde_json::to_string(&runs).unwrap_or_default()
    }

    /// Takes a snapshot back. Deliveries sent while no daemon listened are lost, so
    /// for [`LOSSY_FOR_MS`] from `now` quiet runs are read sooner (see `answer`); what
    /// such a gap explains is not counted as a delivery lost while listening.
    pub fn restore(&mut self, text: &str, now: Millis) {
        let Ok(runs) = serde_json::from_str::<Vec<RunEntry>>(text) else {
            return;
        };
        for e in runs {
            if let Some(run) = e.jobs.values().next().map(|j| key(&j.repo, j.run_id)) {
                self.runs.entry(run).or_insert(e);
            }
        }
        self.listening_since = Some(now);
        self.prune(now);
    }

    /// The book starts listening at `now` (the daemon's listener is up).
    pub fn listen_from(&mut self, now: Millis) {
        self.listening_since = Some(now);
    }

    /// Jobs of `repo` a REST read found queued: one created while the book listened,
    /// [`LATE_MS`] ago or more and never heard of, had its delivery lost (or its
    /// repository sends none), so the book is lossy from `now`.
    pub fn read_by_rest(&mut self, repo: &str, jobs: &[QueuedJob], now: Millis) {
        let listened = |t: Millis| self.listening_since.is_some_and(|r| t >= r);
        let unheard = jobs.iter().any(|j| {
            listened(j.created_at)
                && now - j.created_at >= LATE_MS
                && !self
                    .runs
                    .get(&key(repo, j.run_id))
                    .is_some_and(|e| e.jobs.contains_key(&j.id))
        });
        if unheard {
            self.loss_seen = Some(now);
        }
    }

    /// Whether a target's backstop may read its run lists at the webhooks' pace
    /// ([`crate::reconcile::budget::HOOKED_POLL_EVERY`]) and not at every poll: a
    /// delivery of its runs came within [`LOSSY_FOR_MS`] (`heard_at`, its queue's), and
    /// none was seen lost meanwhile. A run whose deliveries disagree with the run
    /// lists is read only past [`GRACE_MS`] anyway; reading the lists more often only
    /// finds sooner a run whose every delivery was lost.
    pub fn steady(&self, heard_at: Option<Millis>, now: Millis) -> bool {
        let recent = |t: Option<Millis>| t.is_some_and(|t| now - t < LOSSY_FOR_MS);
        recent(heard_at) && !recent(self.loss_seen)
    }
}

impl super::GitHubClient {
    /// Answers `read_queue`'s runs from `book` where it can (see the module's doc).
    pub fn with_hooks(mut self, book: SharedBook) -> super::GitHubClient {
        self.hooks = Some(book);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLES: &str =
        include_str!("../../tests/fixtures/github/workflow_job.webhook-examples.json");

    fn examples() -> Vec<Vec<u8>> {
        let v: Vec<serde_json::Value> = serde_json::from_str(EXAMPLES).unwrap();
        v.iter().map(|e| serde_json::to_vec(e).unwrap()).collect()
    }

    fn job(id: i64, run: i64, status: &str) -> HookJob {
        HookJob {
            id,
            run_id: run,
            repo: "o/r".into(),
            name: format!("j{id}"),
            labels: vec!["self-hosted".into()],
            status: HookStatus::parse(status),
            created_at: 1,
            runner_name: None,
            workflow: None,
            run_attempt: None,
        }
    }

    #[test]
    fn every_real_example_parses_with_its_job_status_and_labels() {
        let parsed: Vec<HookJob> = examples()
            .iter()
            .map(|b| parse(Some("workflow_job"), b, 7).unwrap().unwrap())
            .collect();
        assert_eq!(parsed.len(), 8);
        let queued = &parsed[5];
        assert_eq!(queued.status, HookStatus::Queued);
        assert_eq!((queued.id, queued.run_id), (289782451, 2202229078));
        assert_eq!(queued.repo, "Codertocat/Hello-World");
        assert_eq!(queued.labels, vec!["ubuntu-latest".to_string()]);
        assert_eq!(
            queued.created_at,
            parse_rfc3339("2021-09-13T02:21:13Z").unwrap()
        );
        // Action `queued` for a job still waiting on its environment: it is waiting.
        assert_eq!(parsed[6].status, HookStatus::Waiting);
        assert_eq!(parsed[6].labels, vec!["self-hosted", "k8s"]);
        // No created_at in this one: its started_at stands in.
        assert_eq!(
            parsed[0].created_at,
            parse_rfc3339("2021-06-15T19:22:27Z").unwrap()
        );
        assert_eq!(parsed[1].status, HookStatus::Completed);
        // A taken job names its runner, workflow and run attempt: whose job it was.
        let (runner, owner) = parsed[4].owner().unwrap();
        assert_eq!(runner, "GitHub Actions 6");
        assert_eq!(
            (owner.workflow.as_deref(), owner.run_attempt, owner.source),
            (Some("Test"), Some(1), OwnerSource::Webhook)
        );
        assert_eq!(parsed[6].owner(), None, "no runner took it yet");
    }

    #[test]
    fn a_delivery_is_taken_once_and_an_old_queued_one_starts_nothing() {
        let now = parse_rfc3339("2026-12-07T12:00:00Z").unwrap();
        let hour = 3_600_000;
        let queued = job(1, 9, "queued");
        let done = job(1, 9, "completed");
        // Issue 48: the same delivery three times was taken three times.
        assert_eq!(judge(true, &queued, Some(now - 1_000), now), Verdict::Take);
        assert_eq!(
            judge(false, &queued, Some(now - 1_000), now),
            Verdict::Duplicate
        );
        assert_eq!(judge(false, &done, Some(now), now), Verdict::Duplicate);
        // A queued job GitHub has failed by now (24 hours) starts nothing...
        assert_eq!(
            judge(true, &queued, Some(now - 24 * hour), now),
            Verdict::Take
        );
        assert_eq!(
            judge(true, &queued, Some(now - 24 * hour - 1), now),
            Verdict::Stale
        );
        assert_eq!(
            judge(true, &queued, Some(now - 7 * 24 * hour), now),
            Verdict::Stale
        );
        // ...while a job that ran for days may still end, until it is older than the
        // window in which a replay would be known.
        assert_eq!(
            judge(true, &done, Some(now - 5 * 24 * hour), now),
            Verdict::Take
        );
        assert_eq!(
            judge(true, &done, Some(now - DELIVERY_WINDOW_MS - 1), now),
            Verdict::Stale
        );
        // Undated, or dated ahead of a clock that is behind: judged by its id alone.
        assert_eq!(judge(true, &queued, None, now), Verdict::Take);
        assert_eq!(judge(true, &queued, Some(now + hour), now), Verdict::Take);
        // The window covers GitHub's redeliveries (3 days; 7 on GHES).
        const { assert!(DELIVERY_WINDOW_MS > 7 * 24 * 3_600_000) };
    }

    #[test]
    fn a_delivery_is_dated_by_the_newest_time_its_payload_gives() {
        let dated: Vec<Option<Millis>> = examples()
            .iter()
            .map(|b| {
                parse_delivery(Some("workflow_job"), b, 7)
                    .unwrap()
                    .unwrap()
                    .1
            })
            .collect();
        // Only started_at in this one; both in the queued one (equal).
        assert_eq!(dated[0], parse_rfc3339("2021-06-15T19:22:27Z"));
        assert_eq!(dated[5], parse_rfc3339("2021-09-13T02:21:13Z"));
        // created_at before started_at: the later.
        assert_eq!(dated[4], parse_rfc3339("2023-06-26T03:31:36Z"));
        let undated = br#"{"action":"queued","workflow_job":{"id":1,"run_id":2},"repository":{"full_name":"o/r"}}"#;
        let (j, d) = parse_delivery(Some("workflow_job"), undated, 7)
            .unwrap()
            .unwrap();
        assert_eq!((j.created_at, d), (7, None));
        assert_ne!(body_digest(b"a"), body_digest(b"b"));
        assert_eq!(body_digest(b"a").len(), 16);
    }

    #[test]
    fn other_events_are_ignored_and_garbage_is_malformed() {
        let body = &examples()[5];
        assert_eq!(parse(Some("ping"), body, 0), Ok(None));
        assert_eq!(parse(None, body, 0), Ok(None));
        assert!(matches!(
            parse(Some("workflow_job"), b"{\"action\":", 0),
            Err(Refused::Malformed(_))
        ));
    }

    #[test]
    fn a_signature_matches_only_its_body_and_secret() {
        let body = &examples()[5];
        let good = sign(b"s3cret", body);
        assert!(verify_signature(b"s3cret", body, Some(&good)));
        assert!(!verify_signature(b"other", body, Some(&good)));
        let mut tampered = body.clone();
        tampered[10] ^= 1;
        assert!(!verify_signature(b"s3cret", &tampered, Some(&good)));
        assert!(!verify_signature(b"s3cret", body, None));
        assert!(!verify_signature(b"s3cret", body, Some("sha256=zz")));
        assert!(!verify_signature(
            b"s3cret",
            body,
            Some(&good.replace("sha256=", "sha1="))
        ));
        // GitHub's documented test vector.
        assert_eq!(
            sign(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }

    #[test]
    fn a_run_heard_of_is_answered_with_its_queued_jobs() {
        let mut b = HookBook::default();
        assert_eq!(b.answer("o/r", 9, true, 0), Answer::Read, "never heard of");
        b.record(job(1, 9, "queued"), 100);
        b.record(job(2, 9, "in_progress"), 100);
        match b.answer("O/R", 9, true, 200) {
            Answer::Jobs(jobs) => {
                assert_eq!(jobs.len(), 1);
                assert_eq!((jobs[0].id, jobs[0].run_id), (1, 9));
                assert_eq!(jobs[0].repo, "O/R", "in the caller's spelling");
            }
            Answer::Read => panic!("heard of"),
        }
    }

    #[test]
    fn a_late_delivery_never_moves_a_job_back() {
        let mut b = HookBook::default();
        b.record(job(1, 9, "in_progress"), 100);
        assert_eq!(b.loss_seen, Some(100), "its queued delivery never came");
        b.record(job(1, 9, "queued"), 101);
        assert_eq!(b.answer("o/r", 9, false, 200), Answer::Jobs(vec![]));
        b.record(job(1, 9, "completed"), 102);
        b.record(job(1, 9, "in_progress"), 103);
        assert_eq!(
            b.runs[&key("o/r", 9)].jobs[&1].status,
            HookStatus::Completed
        );
    }

    #[test]
    fn a_queued_run_the_book_shows_no_queued_job_for_is_read_after_the_grace() {
        let mut b = HookBook::default();
        b.record(job(1, 9, "in_progress"), 1_000);
        // Listed in progress: the book agrees, no read.
        assert_eq!(
            b.answer("o/r", 9, false, 1_000 + GRACE_MS),
            Answer::Jobs(vec![])
        );
        // Until it waits unheard so long the book may be stale.
        assert_eq!(b.answer("o/r", 9, false, 1_000 + STALE_MS), Answer::Read);
        // Listed queued: a queued job's delivery may be on its way...
        assert_eq!(
            b.answer("o/r", 9, true, 1_000 + GRACE_MS - 1),
            Answer::Jobs(vec![])
        );
        // ...and past the grace the book missed it: read.
        assert_eq!(b.answer("o/r", 9, true, 1_000 + GRACE_MS), Answer::Read);
    }

    #[test]
    fn a_run_listed_in_progress_the_book_shows_a_queued_job_for_is_read_after_the_grace() {
        let mut b = HookBook::default();
        b.record(job(1, 9, "queued"), 1_000);
        // The in_progress delivery may be on its way...
        assert!(matches!(b.answer("o/r", 9, false, 1_000), Answer::Jobs(j) if j.len() == 1));
        // ...past the grace it was lost, and the run may hold what the book cannot see.
        assert_eq!(b.answer("o/r", 9, false, 1_000 + GRACE_MS), Answer::Read);
        assert!(matches!(
            b.answer("o/r", 9, true, 1_000 + GRACE_MS),
            Answer::Jobs(_)
        ));
    }

    #[test]
    fn while_deliveries_are_lost_a_quiet_run_is_read_sooner() {
        let mut b = HookBook::default();
        b.record(job(1, 9, "queued"), 0);
        b.record(job(2, 9, "queued"), 0);
        b.record(job(2, 9, "in_progress"), 0);
        assert_eq!(b.loss_seen, None);
        assert!(matches!(
            b.answer("o/r", 9, true, STALE_LOSSY_MS),
            Answer::Jobs(_)
        ));
        // A job that went from queued to completed: its in_progress was lost.
        b.record(job(3, 7, "queued"), 0);
        b.record(job(3, 7, "completed"), 0);
        assert_eq!(b.loss_seen, Some(0));
        assert_eq!(b.answer("o/r", 9, true, STALE_LOSSY_MS), Answer::Read);
    }

    #[test]
    fn a_status_is_read_once_ranked_and_kept_as_githubs_word() {
        use HookStatus::*;
        let read = |w: &str| HookStatus::parse(w);
        assert_eq!(read("requested"), Waiting);
        assert_eq!(read("pending"), Waiting);
        assert_eq!(read("queued"), Queued);
        assert_eq!(read("in_progress"), InProgress);
        assert_eq!(read("a word GitHub adds"), Completed);
        assert!(Waiting.rank() < Queued.rank() && Queued.rank() < InProgress.rank());
        assert!(InProgress.rank() < Completed.rank());
        for s in [Waiting, Queued, InProgress, Completed] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<HookStatus>(&json).unwrap(), s);
        }
        // A snapshot written before the status was typed reads back.
        assert_eq!(
            serde_json::from_str::<HookStatus>("\"requested\"").unwrap(),
            Waiting
        );
    }

    #[test]
    fn a_snapshot_restores_the_runs_and_what_went_missing_meanwhile_is_not_a_loss() {
        let mut b = HookBook::default();
        b.record(job(1, 9, "queued"), 100);
        b.record(job(2, 8, "in_progress"), 100);
        b.record(job(4, 6, "queued"), 100);
        let mut again = HookBook::default();
        again.restore(&b.snapshot(), 10_000);
        assert_eq!(again.runs(), 3);
        assert_eq!(
            (again.listening_since, again.loss_seen),
            (Some(10_000), None)
        );
        assert!(matches!(again.answer("o/r", 9, true, 10_100), Answer::Jobs(j) if j.len() == 1));
        // Quiet runs are read sooner, as while deliveries are lost.
        assert_eq!(
            again.answer("o/r", 9, true, 100 + STALE_LOSSY_MS),
            Answer::Read
        );
        // Run 9's in_progress went while no daemon listened: read, not a loss.
        assert_eq!(again.answer("o/r", 9, false, 10_100), Answer::Read);
        // Nor a job created before the restart first heard of past queued (a second
        // before it at least: `created_at` has whole seconds), nor one last heard of
        // before it that skipped in_progress.
        let mut old = job(3, 7, "in_progress");
        old.created_at = 9_000;
        again.record(old, 10_250);
        again.record(job(4, 6, "completed"), 10_260);
        assert_eq!(again.loss_seen, None);
        // What goes missing after it is, and so is a job created in its second.
        let mut new = job(5, 5, "in_progress");
        new.created_at = 9_500;
        again.record(new, 10_270);
        assert_eq!(again.loss_seen, Some(10_270));
        again.restore("not json", 10_300);
        assert_eq!(again.runs(), 5);
    }

    #[test]
    fn a_job_rest_found_that_no_delivery_announced_is_a_loss() {
        let queued = |id: i64, run: i64, created_at: Millis| QueuedJob {
            id,
            run_id: run,
            repo: "o/r".into(),
            name: format!("j{id}"),
            labels: vec![],
            created_at,
        };
        let mut b = HookBook::default();
        b.listen_from(1_000);
        b.record(job(1, 9, "queued"), 1_500);
        let at = 2_000 + LATE_MS;
        // Heard of; created before the book listened; or its delivery may be on its way.
        b.read_by_rest("o/r", &[queued(1, 9, 1_200)], at);
        b.read_by_rest("o/r", &[queued(2, 8, 900)], at);
        b.read_by_rest("o/r", &[queued(3, 8, 2_001)], at);
        assert_eq!(b.loss_seen, None);
        // A job created while it listened, past the grace, never heard of.
        b.read_by_rest("O/R", &[queued(4, 9, 2_000)], at);
        assert_eq!(b.loss_seen, Some(at));
    }

    #[test]
    fn the_backstop_slows_only_while_a_targets_deliveries_come_and_none_is_lost() {
        let mut b = HookBook::default();
        assert!(!b.steady(None, 1_000), "nothing heard yet");
        assert!(b.steady(Some(1_000), 1_000 + LOSSY_FOR_MS - 1));
        assert!(
            !b.steady(Some(1_000), 1_000 + LOSSY_FOR_MS),
            "quiet too long"
        );
        // A restart alone keeps it steady: its first reads catch up on the gap.
        b.restore("[]", 2_000);
        assert!(b.steady(Some(2_000), 2_000));
        b.record(job(3, 7, "queued"), 3_000);
        b.record(job(3, 7, "completed"), 3_000);
        assert!(!b.steady(Some(3_000), 3_000), "a delivery was lost");
        assert!(b.steady(Some(9_000 + LOSSY_FOR_MS), 3_000 + LOSSY_FOR_MS));
    }

    #[test]
    fn runs_not_heard_of_for_an_hour_are_forgotten_and_the_book_is_capped() {
        let mut b = HookBook::default();
        b.record(job(1, 9, "queued"), 0);
        assert_eq!(b.answer("o/r", 9, true, FORGET_AFTER_MS), Answer::Read);
        b.prune(FORGET_AFTER_MS);
        assert_eq!(b.runs(), 0);
        for run in 0..(MAX_RUNS as i64 + 10) {
            b.record(job(run, run, "queued"), run);
        }
        assert!(b.runs() <= MAX_RUNS);
        assert!(matches!(
            b.answer("o/r", MAX_RUNS as i64 + 9, true, 0),
            Answer::Jobs(_)
        ));
        assert_eq!(b.answer("o/r", 0, true, 0), Answer::Read, "the oldest went");
    }

    #[test]
    fn a_run_past_the_job_cap_is_left_to_rest() {
        let mut b = HookBook::default();
        for id in 0..=MAX_JOBS_PER_RUN as i64 {
            b.record(job(id, 9, "queued"), 5);
        }
        assert_eq!(b.answer("o/r", 9, true, 5), Answer::Read);
    }

    #[test]
    fn a_loop_hears_each_run_of_its_repositories_once_per_change() {
        let mut b = HookBook::default();
        b.record(job(1, 10, "queued"), 100);
        let mut other = job(2, 20, "queued");
        other.repo = "elsewhere/r".into();
        b.record(other, 100);
        let ours = |repo: &str| repo.eq_ignore_ascii_case("O/R");
        let (v, heard) = b.heard_since(0, ours);
        assert_eq!(heard.len(), 1, "only our repository's runs");
        assert_eq!((heard[0].run, heard[0].queued.len()), (10, 1));
        assert!(heard[0].gone.is_empty());
        // Nothing new: nothing heard.
        assert!(b.heard_since(v, ours).1.is_empty());
        // Taken by a runner: it leaves the queue at once.
        b.record(job(1, 10, "in_progress"), 200);
        let (v2, heard) = b.heard_since(v, ours);
        assert!(heard[0].queued.is_empty());
        assert_eq!(heard[0].gone, vec![1]);
        // A run restored from a snapshot is news to no loop.
        let mut restored = HookBook::default();
        restored.restore(&b.snapshot(), 300);
        assert!(restored.heard_since(0, ours).1.is_empty());
        assert!(v2 > v);
    }
}
