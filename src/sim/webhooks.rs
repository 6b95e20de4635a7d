//! The simulated GitHub's `workflow_job` webhooks: one hook (URL and secret) set
//! through `SimHandle::set_webhook` or `POST /_sim/webhook`; each job's change of
//! state (queued, in_progress, completed) is rendered, under the lock, into an outbox
//! that a background thread sends, signed (`X-Hub-Signature-256`), never holding the
//! lock. A drop share loses deliveries on purpose, as GitHub's are lost in the field,
//! and a delay holds each back, as GitHub's arrive some time after the change.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use super::handle::{Sim, SimHandle};
use super::rng::SplitMix64;
use super::state::{JobState, State};
use crate::secret::Secret;
use crate::timefmt::format_rfc3339;

/// Where the deliveries go.
pub struct HookConfig {
    /// `http://HOST:PORT/PATH`.
    pub url: String,
    pub secret: Secret,
    /// The share of deliveries lost (0 to 1).
    pub drop: f64,
}

/// What was delivered, dropped on purpose, or failed (refused or unreachable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookStats {
    pub sent: u64,
    pub dropped: u64,
    pub failed: u64,
    /// Deliveries answered with a status other than 2xx.
    pub refused: u64,
}

/// The hook's settings, its outbox and its figures (a field of [`State`]).
#[derive(Default)]
pub struct Webhooks {
    pub config: Option<HookConfig>,
    /// Each delivery, with when it is due.
    outbox: VecDeque<(Instant, Vec<u8>)>,
    /// How long after its change a delivery is sent.
    delay: Duration,
    pub stats: HookStats,
    rng: Option<SplitMix64>,
    next_delivery: u64,
}

/// The most deliveries waiting; past it new ones are dropped (and counted so).
const OUTBOX_MAX: usize = 100_000;

impl State {
    /// The jobs `ids` changed to `action`: a delivery each, if a hook is set.
    pub fn hook_jobs(&mut self, ids: &[u64], action: &str) {
        let Some(cfg) = &self.webhooks.config else {
            return;
        };
        let drop = cfg.drop;
        let seed = self.cfg.seed ^ 0x5eb0_0c5d_e11e_e7e5;
        for id in ids {
            let Some(job) = self.jobs.get(id) else {
                continue;
            };
            let body = payload(self, job, action);
            let hooks = &mut self.webhooks;
            let rng = hooks.rng.get_or_insert_with(|| SplitMix64::new(seed));
            if (drop > 0.0 && rng.chance(drop)) || hooks.outbox.len() >= OUTBOX_MAX {
                hooks.stats.dropped += 1;
                continue;
            }
            hooks.outbox.push_back((Instant::now() + hooks.delay, body));
        }
    }
}

/// A delivery shaped as GitHub's (`tests/fixtures/github/workflow_job.webhook-examples.json`):
/// the job as its jobs list shows it, `runner_*` null while queued, the repository.
fn payload(st: &State, job: &JobState, action: &str) -> Vec<u8> {
    let base = &st.base_url;
    let repo = st.repos.get(&job.repo);
    let owner = job.repo.split_once('/').map_or("", |(o, _)| o);
    let name = job.repo.split_once('/').map_or("", |(_, n)| n);
    let workflow = st
        .runs
        .get(&job.run_id)
        .map_or("CI", |r| r.workflow_name.as_str());
    let v = json!({
        "action": action,
        "workflow_job": {
            "id": job.id,
            "run_id": job.run_id,
            "workflow_name": workflow,
            "head_branch": "main",
            "run_url": format!("{base}/repos/{}/actions/runs/{}", job.repo, job.run_id),
            "run_attempt": 1,
            "node_id": format!("CR_{}", job.id),
            "head_sha": "0000000000000000000000000000000000000000",
            "url": format!("{base}/repos/{}/actions/jobs/{}", job.repo, job.id),
            "html_url": format!("https://github.com/{}/actions/runs/{}/job/{}", job.repo, job.run_id, job.id),
            "status": job.status.as_str(),
            "conclusion": job.conclusion,
            "created_at": format_rfc3339(job.created_at),
            "started_at": format_rfc3339(job.started_at.unwrap_or(job.created_at)),
            "completed_at": job.completed_at.map(format_rfc3339),
            "name": job.name,
            "steps": [],
            "labels": job.labels,
            "runner_id": job.runner_id,
            "runner_name": job.runner_name,
            "runner_group_id": job.runner_group_id,
            "runner_group_name": job.runner_group_id.map(|_| "Default"),
        },
        "repository": {
            "id": repo.map_or(0, |r| r.id),
            "name": name,
            "full_name": job.repo,
            "private": repo.is_none_or(|r| r.private),
            "owner": { "login": owner },
        },
        "sender": { "login": "octocat" },
    });
    serde_json::to_vec(&v).unwrap_or_default()
}

/// Starts the thread that sends the outbox; it ends when the sim stops.
pub(super) fn start_sender(sim: Arc<Sim>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sim-webhooks".into())
        .spawn(move || send_loop(&sim))
}

fn send_loop(sim: &Sim) {
    loop {
        let (batch, target) = {
            let mut st = sim.lock();
            loop {
                if sim.stopper.is_stopped() {
                    return;
                }
                let now = Instant::now();
                let due = st.webhooks.outbox.front().map(|d| d.0);
                if due.is_some_and(|d| d <= now) && st.webhooks.config.is_some() {
                    break;
                }
                let wait = due.map_or(Duration::from_millis(50), |d| {
                    d.saturating_duration_since(now)
                        .min(Duration::from_millis(50))
                });
                st = sim
                    .changed
                    .wait_timeout(st, wait)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            let hooks = &mut st.webhooks;
            let cfg = hooks.config.as_ref().expect("checked above");
            let target = (cfg.url.clone(), Secret::new(cfg.secret.expose()));
            let now = Instant::now();
            let mut batch: Vec<(u64, Vec<u8>)> = Vec::new();
            while hooks.outbox.front().is_some_and(|d| d.0 <= now) {
                let (_, b) = hooks.outbox.pop_front().expect("checked above");
                hooks.next_delivery += 1;
                batch.push((hooks.next_delivery, b));
            }
            (batch, target)
        };
        // Sent without the lock: the receiver may call the sim back meanwhile.
        let mut stats = HookStats::default();
        for (n, body) in batch {
            match deliver(&target.0, &target.1, n, &body) {
                Ok(status) if (200..300).contains(&status) => stats.sent += 1,
                Ok(_) => stats.refused += 1,
                Err(_) => stats.failed += 1,
            }
        }
        let mut st = sim.lock();
        st.webhooks.stats.sent += stats.sent;
        st.webhooks.stats.refused += stats.refused;
        st.webhooks.stats.failed += stats.failed;
    }
}

/// A delivery's `X-GitHub-Delivery`: a random UUID, as GitHub's are, so that no two
/// sims (nor two lives of one) send the same id to a daemon that remembers the ids it
/// took; the delivery's number where no random bytes can be had.
fn guid(n: u64) -> String {
    let mut b = [0u8; 16];
    if crate::random::fill(&mut b).is_err() {
        return format!("00000000-0000-4000-8000-{n:012x}");
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// POSTs one delivery; the status GitHub would record for it.
fn deliver(url: &str, secret: &Secret, n: u64, body: &[u8]) -> std::io::Result<u16> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (hostport, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.expose().as_bytes());
    let tag = ring::hmac::sign(&key, body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let signature = format!("sha256={hex}");
    let delivery = guid(n);
    let r = super::client::request(
        &format!("http://{hostport}"),
        "POST",
        path,
        &[
            ("content-type", "application/json"),
            ("user-agent", "GitHub-Hookshot/sim"),
            ("x-github-event", "workflow_job"),
            ("x-github-delivery", &delivery),
            ("x-hub-signature-256", &signature),
        ],
        Some(body),
        Duration::from_secs(10),
    )?;
    Ok(r.status)
}

/// `POST /_sim/webhook {"url", "secret", "drop"}` sets the hook (`url` null or absent
/// removes it; `drop`, the share lost, defaults to 0); `GET` reads its figures.
pub(super) fn control(
    st: &mut State,
    req: &crate::http_server::Request,
) -> crate::http_server::Reply {
    use crate::http_server::{Reply, Response};
    #[derive(serde::Deserialize)]
    struct Set {
        url: Option<String>,
        #[serde(default)]
        secret: String,
        #[serde(default)]
        drop: f64,
    }
    if req.method == "POST" {
        let set: Set = match serde_json::from_slice(&req.body) {
            Ok(s) => s,
            Err(e) => {
                return Reply::Send(Response::json(
                    400,
                    &json!({ "message": format!("the request body does not parse ({e})") }),
                ));
            }
        };
        if set
            .url
            .as_deref()
            .is_some_and(|u| !u.starts_with("http://"))
        {
            return Reply::Send(Response::json(
                400,
                &json!({ "message": "the hook's url must be http://HOST:PORT/PATH" }),
            ));
        }
        st.webhooks.config = set.url.map(|url| HookConfig {
            url,
            secret: Secret::new(set.secret),
            drop: set.drop.clamp(0.0, 1.0),
        });
    }
    let s = st.webhooks.stats;
    Reply::Send(Response::json(
        200,
        &json!({
            "set": st.webhooks.config.is_some(),
            "sent": s.sent,
            "dropped": s.dropped,
            "failed": s.failed,
            "refused": s.refused,
            "waiting": st.webhooks.outbox.len(),
        }),
    ))
}

impl SimHandle {
    /// Delivers `workflow_job` webhooks to `url` (`http://HOST:PORT/PATH`), signed with
    /// `secret`, from now on; `None` stops them.
    pub fn set_webhook(&self, hook: Option<(&str, &str)>) {
        self.with_state(|s| {
            let drop = s.webhooks.config.as_ref().map_or(0.0, |c| c.drop);
            s.webhooks.config = hook.map(|(url, secret)| HookConfig {
                url: url.to_string(),
                secret: Secret::new(secret),
                drop,
            });
        });
    }

    /// Loses this share (0 to 1) of the deliveries from now on.
    pub fn set_webhook_drop(&self, share: f64) {
        self.with_state(|s| {
            if let Some(c) = &mut s.webhooks.config {
                c.drop = share.clamp(0.0, 1.0);
            }
        });
    }

    /// Sends each delivery this long after its change, from now on (GitHub's arrive
    /// some hundreds of milliseconds late).
    pub fn set_webhook_delay(&self, delay: Duration) {
        self.with_state(|s| s.webhooks.delay = delay);
    }

    /// What the hook delivered, dropped and failed to deliver so far.
    pub fn webhook_stats(&self) -> HookStats {
        self.with_state(|s| s.webhooks.stats)
    }

    /// Deliveries not sent yet.
    pub fn webhooks_waiting(&self) -> usize {
        self.with_state(|s| s.webhooks.outbox.len())
    }
}
