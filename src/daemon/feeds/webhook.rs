//! The `workflow_job` webhook listener (`host set webhook_listen=ADDR:PORT` and
//! `webhook_secret_file=PATH`, both off by default): it serves `POST` on any path
//! (`/webhook` is the one documented) on the crate's HTTP server, checks
//! `X-Hub-Signature-256` against the secret, and records each `workflow_job` delivery
//! in the book the target loops' clients answer runs from (`github::hooks`). A bad or
//! missing signature is 401 and changes nothing; other events are 202 and ignored.
//! A delivery that changes demand wakes the target loops, which take its run into
//! their queues at once (`RestQueue::hear`): a queued job's runner starts without
//! waiting for a poll. Polling stays as the backstop.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::Receiver;

use crate::daemon::shared::Shared;
use crate::facts::host_probe::read_secret;
use crate::facts::webhook::settings;
use crate::github::hooks::{self, MAX_DELIVERY_BYTES, Refused, SharedBook};
use crate::http_server::{Handler, Reply, Request, Response, Server, Stopper};
use crate::metrics::{Kind, Metrics};
use crate::secret::Secret;
use crate::store::{SqliteStore, Store, daemon_facts};
use crate::timefmt::{Millis, now_millis};
use crate::{log_info, log_warn};

/// What the listener last wrote of itself (`store::daemon_facts`'s, kept in the store
/// for `status` and `doctor`), under the name `cli/host.rs`'s `status` calls it by.
pub use crate::store::daemon_facts::WebhookSeen as Seen;

const DELIVERIES: &str = "runner_manager_webhook_deliveries_total";
const SPARED: &str = "runner_manager_webhook_jobs_lists_spared_total";

/// How often at most the listener writes what it saw to the store.
const SEEN_EVERY_MS: Millis = 5_000;
/// How often the book's snapshot is written while it changes.
const BOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

struct HookHandler {
    secret: Secret,
    book: SharedBook,
    /// The target loops, woken by a delivery that changes their demand, and where
    /// whose job each runner took is kept (`Shared::note_owners`).
    shared: Arc<Shared>,
    metrics: Arc<Metrics>,
    rejected: AtomicU64,
    seen_at: AtomicI64,
    seen: Mutex<(Seen, Option<SqliteStore>)>,
    /// The book's version last written.
    saved: AtomicU64,
    /// Bounds the lines about deliveries not taken.
    repeats: Mutex<crate::logging::Repeats>,
}

impl HookHandler {
    /// Writes the book's snapshot when it changed since the last one.
    fn save_book(&self) {
        let (version, text) = {
            let b = self.book.lock().unwrap_or_else(|e| e.into_inner());
            if b.version == self.saved.load(Ordering::Relaxed) {
                return;
            }
            (b.version, b.snapshot())
        };
        let g = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = &g.1 {
            match daemon_facts::put_webhook_book(store, &text) {
                Ok(()) => self.saved.store(version, Ordering::Relaxed),
                Err(e) => log_warn!("webhook_book_not_written", error = e),
            }
        }
    }

    fn publish(&self, now: Millis, force: bool) {
        let (accepted, last, spared, loss) = {
            let b = self.book.lock().unwrap_or_else(|e| e.into_inner());
            (b.accepted, b.last_delivery, b.spared, b.loss_seen)
        };
        self.metrics.gauge_set(SPARED, &[], spared as f64);
        if !force && now - self.seen_at.load(Ordering::Relaxed) < SEEN_EVERY_MS {
            return;
        }
        self.seen_at.store(now, Ordering::Relaxed);
        let mut g = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (seen, store) = &mut *g;
        seen.accepted = accepted;
        seen.last_delivery = last;
        seen.last_loss = loss;
        seen.spared = spared;
        seen.rejected = self.rejected.load(Ordering::Relaxed);
        if let Some(store) = store
            && let Err(e) = seen.write(store)
        {
            log_warn!("webhook_seen_not_written", error = e);
        }
    }
}

impl HookHandler {
    /// A delivery not taken because it could not be recorded as taken: logged (at
    /// most a few lines a minute) and counted.
    fn unrecorded(&self, error: &str) {
        self.metrics
            .counter_add(DELIVERIES, &[("result", "unrecorded")], 1.0);
        let mut r = self.repeats.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = r.admit("webhook_delivery_unrecorded", std::time::Instant::now()) {
            log_warn!(
                "webhook_delivery_unrecorded",
                error = error,
                suppressed = held
            );
        }
    }

    /// A replayed or stale delivery: logged with its id and job (at most a few lines a
    /// minute, however many are sent).
    fn not_taken(
        &self,
        verdict: hooks::Verdict,
        job: &hooks::HookJob,
        guid: Option<&str>,
        dated: Option<Millis>,
    ) {
        let event = match verdict {
            hooks::Verdict::Stale => "webhook_delivery_stale",
            _ => "webhook_delivery_replayed",
        };
        let mut r = self.repeats.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = r.admit(event, std::time::Instant::now()) {
            log_info!(
                event,
                delivery = guid.unwrap_or("-"),
                repo = job.repo,
                job_id = job.id,
                status = job.status.as_str(),
                dated = dated.map_or_else(|| String::from("-"), crate::timefmt::format_rfc3339),
                suppressed = held
            );
        }
    }
}

impl Handler for HookHandler {
    fn handle(&self, req: Request) -> Reply {
        let reply = |status: u16, text: &str| {
            Reply::Send(
                Response::new(status)
                    .with_header("content-type", "text/plain; charset=utf-8")
                    .with_body(format!("{text}\n").into_bytes()),
            )
        };
        if req.method != "POST" {
            return reply(405, "POST workflow_job deliveries here");
        }
        if req.body.len() > MAX_DELIVERY_BYTES {
            return reply(413, "too large for a workflow_job delivery");
        }
        let now = now_millis();
        let signature = req.header("x-hub-signature-256");
        if !hooks::verify_signature(self.secret.expose().as_bytes(), &req.body, signature) {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            self.metrics
                .counter_add(DELIVERIES, &[("result", "rejected")], 1.0);
            self.publish(now, false);
            return reply(401, "bad or missing X-Hub-Signature-256");
        }
        let (status, word, text) =
            match hooks::parse_delivery(req.header("x-github-event"), &req.body, now) {
                Ok(Some((job, dated))) => {
                    let first = {
                        let g = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                        g.1.as_ref().map(|store| {
                            store.take_delivery(
                                req.header("x-github-delivery"),
                                &hooks::body_digest(&req.body),
                                now,
                                hooks::DELIVERY_WINDOW_MS,
                            )
                        })
                    };
                    let first = match first {
                        Some(Ok(first)) => first,
                        // Whether it was taken before cannot be known: not taken, and
                        // GitHub records a failure it can redeliver. Polling serves the job.
                        Some(Err(e)) => {
                            self.unrecorded(&e.to_string());
                            return reply(503, "the delivery could not be recorded; not taken");
                        }
                        None => {
                            self.unrecorded("no store");
                            return reply(503, "the delivery could not be recorded; not taken");
                        }
                    };
                    let verdict = hooks::judge(first, &job, dated, now);
                    if verdict != hooks::Verdict::Take {
                        self.not_taken(verdict, &job, req.header("x-github-delivery"), dated);
                        self.metrics
                            .counter_add(DELIVERIES, &[("result", verdict.word())], 1.0);
                        return reply(200, &format!("{}; no effect", verdict.word()));
                    }
                    let wakes = job.status != hooks::HookStatus::Waiting;
                    if let Some((runner, owner)) = job.owner() {
                        self.shared.note_owners([(runner.as_str(), owner)]);
                    }
                    let mut b = self.book.lock().unwrap_or_else(|e| e.into_inner());
                    b.record(job, now);
                    drop(b);
                    if wakes {
                        // Queued: demand now, not at the next poll; taken or done: what it
                        // held is free. Each loop takes its own runs (`RestQueue::hear`).
                        self.shared.tell_all(crate::daemon::shared::LoopMsg::Wake);
                    }
                    (200, "accepted", "recorded")
                }
                Ok(None) => (202, "ignored", "not a workflow_job delivery; ignored"),
                Err(Refused::Malformed(_)) | Err(Refused::Signature) => {
                    (400, "malformed", "not a workflow_job payload")
                }
            };
        self.metrics
            .counter_add(DELIVERIES, &[("result", word)], 1.0);
        self.publish(now, false);
        reply(status, text)
    }
}

/// Starts the listener when both settings are set and the secret reads; stopped when
/// every sender of `shutdown` is gone. A setting or secret that does not read is
/// logged and recorded for `doctor`, and no listener starts: polling goes on.
pub fn serve(
    store: &dyn Store,
    shared: &Arc<Shared>,
    shutdown: &Receiver<()>,
) -> Option<JoinHandle<()>> {
    let metrics = shared.metrics.clone();
    metrics.register(
        DELIVERIES,
        Kind::Counter,
        "workflow_job webhook deliveries, by result (accepted, duplicate, stale, rejected, \
         ignored, malformed, unrecorded)",
        &[],
    );
    metrics.register(
        SPARED,
        Kind::Counter,
        "Runs' jobs-list GETs answered from webhooks instead",
        &[],
    );
    let now = now_millis();
    let failed = |listen: String, e: String| {
        log_warn!("webhook_not_listening", error = e);
        let seen = Seen {
            listen,
            since: now,
            error: Some(e),
            ..Seen::default()
        };
        let _ = seen.write(store);
        None
    };
    let (listen, file) = match settings(store) {
        Ok(None) => {
            let _ = daemon_facts::clear_webhook(store);
            return None;
        }
        Ok(Some(s)) => s,
        Err(e) => return failed(String::new(), e),
    };
    let secret = match read_secret(&file) {
        Ok(s) => s,
        Err(e) => return failed(listen.to_string(), format!("webhook_secret_file: {e}")),
    };
    // What the last daemon heard: runs announced before a restart are not read again.
    {
        let mut b = shared.heard.hooks.lock().unwrap_or_else(|e| e.into_inner());
        b.listen_from(now);
        if let Ok(Some(text)) = daemon_facts::webhook_book(store) {
            b.restore(&text, now);
            log_info!("webhook_book_restored", runs = b.runs());
        }
    }
    let handler = Arc::new(HookHandler {
        secret,
        book: shared.heard.hooks.clone(),
        shared: shared.clone(),
        metrics,
        rejected: AtomicU64::new(0),
        saved: AtomicU64::new(0),
        repeats: Mutex::new(crate::logging::Repeats::new(
            5,
            std::time::Duration::from_secs(60),
        )),
        seen_at: AtomicI64::new(0),
        seen: Mutex::new((Seen::default(), SqliteStore::open(&shared.state_dir).ok())),
    });
    let mut server = match Server::start(listen, handler.clone(), Arc::new(Stopper::default())) {
        Ok(s) => s,
        Err(e) => {
            return failed(
                listen.to_string(),
                format!("cannot listen on {listen}: {e}"),
            );
        }
    };
    let addr = server.addr();
    {
        let mut g = handler.seen.lock().unwrap_or_else(|e| e.into_inner());
        g.0.listen = addr.to_string();
        g.0.since = now;
    }
    handler.publish(now, true);
    log_info!("webhook_listening", addr = addr);
    let shutdown = shutdown.clone();
    std::thread::Builder::new()
        .name("webhook".into())
        .spawn(move || {
            // Every second the book's snapshot is written if it changed, and every few
            // what the book spared reaches the metrics and the store even while no
            // delivery comes; a message or every sender gone stops it.
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                shutdown.recv_timeout(BOOK_EVERY)
            {
                handler.save_book();
                handler.publish(now_millis(), false);
            }
            server.shutdown();
            handler.save_book();
            handler.publish(now_millis(), true);
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_says_where_and_when() {
        let s = Seen {
            listen: "0.0.0.0:8090".into(),
            since: 0,
            last_delivery: Some(1_000),
            last_loss: None,
            accepted: 3,
            rejected: 1,
            spared: 2,
            error: None,
        };
        let line = s.describe(61_000);
        assert!(
            line.contains("0.0.0.0:8090") && line.contains("1m") && !line.contains("lost"),
            "{line}"
        );
        let lossy = Seen {
            last_loss: Some(31_000),
            ..s.clone()
        };
        let line = lossy.describe(61_000);
        assert!(line.contains("a delivery found lost 30s ago"), "{line}");
        let e = Seen {
            error: Some("cannot listen".into()),
            ..s
        };
        assert!(e.describe(0).starts_with("not listening"));
    }
}
