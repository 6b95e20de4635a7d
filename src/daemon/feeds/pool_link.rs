//! The daemon's coordinator link: the `hello` this host sends, the `Handler` the
//! link calls (it judges each launch under the allocation lock and wakes the target
//! loops), the link's state it records for `status` and `top` (`LinkSeen`), and
//! `start_link`, which dials with the host's `LinkSettings`. It stands on
//! `shared::Shared` and the `pool::Pool` that `Shared` holds, never the other way.

use crate::coordinator::link::{LaunchHandler, Report};
use crate::coordinator::protocol::{
    FEATURE_OWNERS, Hello, HostInfo, OwnerReport, ProfileInfo, TargetInfo, USAGE_DAYS, UsageReport,
};
use crate::coordinator::tls;
use crate::daemon::shared::{LoopMsg, Shared, lock};
use crate::domain::{Host, ScalePolicy};
use crate::reconcile::allocate::HostAllocator;
use crate::reconcile::launch_book::{Accepted, Launch, OfferCtx, Refusal};
use crate::store::daemon_facts::LinkSeen;
use crate::store::{SqliteStore, Store, StoreError};
use crate::timefmt::now_millis;
use crate::{log_info, log_warn};
use crossbeam_channel::Sender;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Whether a profile is a pool profile of this host (carries its pool label).
pub fn is_pool_profile(host: &Host, p: &ScalePolicy) -> bool {
    let label = host.pool_label();
    p.labels
        .iter()
        .any(|l| crate::domain::labels::same_label(l, &label))
}

/// The `hello` this host sends: itself, its targets and its pool profiles.
pub fn hello(store: &dyn Store) -> Result<Hello, StoreError> {
    let host = store.host_or_create()?;
    let targets = store
        .targets()?
        .into_iter()
        .map(|t| TargetInfo {
            name: t.name.clone(),
            scope: t.scope.display(),
            api_url: t.api_url.clone(),
        })
        .collect();
    let profiles = store
        .profiles()?
        .into_iter()
        .filter(|p| p.host_id == host.id && is_pool_profile(&host, p))
        .map(|p| ProfileInfo {
            name: p.name.clone(),
            target: p.target.clone(),
            labels: p.labels.clone(),
            max: p.max_capacity,
        })
        .collect();
    Ok(Hello {
        version: 3,
        host: HostInfo {
            id: host.id.clone(),
            name: host.name.clone(),
            os: host.os.clone(),
            arch: host.arch.clone(),
            capacity: host.capacity,
            binary_version: Some(crate::version::version()),
        },
        targets,
        profiles,
        // It keeps the owners the coordinator's queue read finds for its runners.
        features: vec![FEATURE_OWNERS.to_string()],
    })
}

/// The daemon's `LaunchHandler`: judges each launch against a fresh view of the host
/// under the allocation lock, so a launch and a target loop never both take the last
/// slot of capacity.
pub struct Handler {
    pub shared: Arc<Shared>,
    pub store: Mutex<SqliteStore>,
    /// The link's state as last recorded.
    pub seen: Mutex<LinkSeen>,
}

/// Records the link's state when it changed: `status` and `top` read it (they never
/// ask the daemon). A failed write only costs what they show.
fn record(store: &dyn Store, seen: &mut LinkSeen, change: impl FnOnce(&mut LinkSeen)) {
    let before = seen.clone();
    change(seen);
    if *seen != before
        && let Err(e) = seen.write(store)
    {
        log_warn!("coordinator_link_unrecorded", error = e);
    }
}

/// The link is down for `why`, since now unless it was down already.
fn down(seen: &mut LinkSeen, why: &str) {
    let now = now_millis();
    if seen.up || seen.since == 0 {
        seen.since = now;
    }
    seen.up = false;
    if seen.last_error.as_deref() != Some(why) {
        seen.last_error = Some(why.to_string());
        seen.last_error_at = Some(now);
    }
}

impl Handler {
    fn record(&self, change: impl FnOnce(&mut LinkSeen)) {
        let store = lock(&self.store);
        record(&*store, &mut lock(&self.seen), change);
    }

    fn judge(&self, launch: &Launch) -> Result<Result<Accepted, Refusal>, StoreError> {
        let now = now_millis();
        let _guard = lock(&self.shared.alloc_lock);
        let store = lock(&self.store);
        let mut host = store.host_or_create()?;
        host.draining |= self.shared.stopping();
        let policies: Vec<ScalePolicy> = store
            .profiles()?
            .into_iter()
            .filter(|p| p.host_id == host.id)
            .collect();
        let attempts = store.open_attempts(&host.id)?;
        let (unfit, demand) = self.shared.pool.views();
        let targets: Vec<String> = store.targets()?.into_iter().map(|t| t.name).collect();
        let modes = self.shared.pool.modes(&targets, now);
        let mut book = lock(&self.shared.pool.book);
        let counts = book.counts(&attempts);
        let ctx = OfferCtx {
            alloc: HostAllocator {
                host: &host,
                policies: &policies,
                counts: &counts,
                unfit: &unfit,
            },
            demand: &demand,
            modes: &modes,
            attempts: &attempts,
        };
        let verdict = book.offer(launch.clone(), &ctx, now);
        drop(book);
        if let Ok(Accepted::ServedBy { attempt }) = &verdict {
            match store.set_lease(*attempt, &launch.lease_id) {
                // Gone meanwhile: the book closes the launch at the next pass.
                Err(StoreError::NotFound { .. }) | Ok(()) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(verdict)
    }
}

impl LaunchHandler for Handler {
    fn offer(&self, launch: &Launch) -> Result<Accepted, Refusal> {
        let verdict = match self.judge(launch) {
            Ok(v) => v,
            Err(e) => {
                log_warn!("launch_judge_failed", lease = launch.lease_id, error = e);
                Err(Refusal::Other)
            }
        };
        match &verdict {
            Ok(a) => log_info!(
                "launch_accepted",
                lease = launch.lease_id,
                job = launch.job_key,
                profile = launch.profile,
                how = format!("{a:?}")
            ),
            Err(r) => log_info!(
                "launch_refused",
                lease = launch.lease_id,
                job = launch.job_key,
                profile = launch.profile,
                reason = r.as_str()
            ),
        }
        self.shared.tell(&launch.target, LoopMsg::Wake);
        verdict
    }

    fn cancel(&self, lease_id: &str) {
        if lock(&self.shared.pool.book).cancel(lease_id).is_some() {
            log_info!("launch_cancelled", lease = lease_id);
        }
    }

    fn link_up(&self, covered: &[String]) {
        log_info!("coordinator_link_up", covered = covered.join(","));
        self.shared.pool.link_up(covered);
        self.record(|s| {
            s.up = true;
            s.since = now_millis();
        });
        self.shared.tell_all(LoopMsg::Wake);
    }

    fn link_lost(&self) {
        self.shared.pool.link_lost();
        // Why comes next, from `link_error`.
        self.record(|s| {
            s.up = false;
            s.since = now_millis();
        });
        self.shared.tell_all(LoopMsg::Wake);
    }

    fn link_error(&self, why: &str) {
        self.record(|s| down(s, why));
    }

    /// The roll-up rows of the last `USAGE_DAYS` days changed past `after`; a store
    /// that cannot be read sends none this time.
    fn usage_after(&self, after: i64, limit: usize) -> Vec<(i64, UsageReport)> {
        let from = crate::domain::rollup::day_of(now_millis()) - (USAGE_DAYS - 1);
        match lock(&self.store).usage_changed_after(after, from, limit) {
            Ok(rows) => rows
                .into_iter()
                .map(|(seq, r)| (seq, UsageReport::bounded(r.key, r.figures)))
                .collect(),
            Err(e) => {
                log_warn!("usage_not_reported", error = e);
                Vec::new()
            }
        }
    }

    /// Into the owner book, where the target loops' `attach_owners` finds them.
    fn owners(&self, owners: Vec<OwnerReport>) {
        let owners: Vec<_> = owners.into_iter().map(OwnerReport::into_owner).collect();
        self.shared
            .note_owners(owners.iter().map(|(n, o)| (n.as_str(), o.clone())));
    }
}

/// The host's settings a link is started from; when they change it is restarted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSettings {
    pub url: Option<String>,
    pub token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub insecure: bool,
}

impl LinkSettings {
    pub fn of(host: &Host) -> LinkSettings {
        LinkSettings {
            url: host.coordinator.clone(),
            token_file: host.coordinator_token_file.clone(),
            ca_file: host.coordinator_ca_file.clone(),
            insecure: host.coordinator_insecure,
        }
    }
}

/// A running coordinator link and what it was started from.
pub struct LinkRun {
    handle: crate::coordinator::link::LinkHandle,
    shutdown: Sender<()>,
    /// The settings it was started with, to notice a change.
    pub config: LinkSettings,
}

impl LinkRun {
    pub fn stop(self) {
        drop(self.shutdown);
        self.handle.join();
    }

    pub fn update_hello(&self, hello: Hello) {
        self.handle.update_hello(hello);
    }
}

/// Starts the link when the host has a coordinator; `None` (standalone) otherwise.
/// A token that cannot be read, or plain `ws://` off loopback without the owner's
/// `coordinator_insecure=true` (a store written before it was asked for), is logged
/// and leaves the host in fallback after the grace period, never stopped. With the
/// opt-in, plain text off loopback is warned about at every start.
pub fn start_link(
    shared: &Arc<Shared>,
    store: &SqliteStore,
) -> Result<Option<LinkRun>, StoreError> {
    let host = store.host_or_create()?;
    let config = LinkSettings::of(&host);
    let now = now_millis();
    let Some(url) = host.coordinator.clone() else {
        shared.pool.configure(false, None, now);
        LinkSeen::clear(store)?;
        return Ok(None);
    };
    // Down until the coordinator's hello_ack: what a previous daemon recorded is not
    // this one's link.
    let mut seen = LinkSeen {
        url: url.clone(),
        since: now,
        ..LinkSeen::default()
    };
    seen.write(store)?;
    if tls::is_plain_off_loopback(&url) {
        if !host.coordinator_insecure {
            log_warn!(
                "coordinator_plain_text_refused",
                url = url,
                error = format!(
                    "{}; use wss://, or 'host set coordinator_insecure=true'",
                    tls::PLAIN_TEXT_RISK
                )
            );
            shared.pool.configure(true, None, now);
            record(store, &mut seen, |s| {
                down(
                    s,
                    "plain ws:// off loopback is refused without coordinator_insecure=true",
                )
            });
            return Ok(None);
        }
        log_warn!(
            "coordinator_plain_text",
            url = url,
            detail = format!("coordinator_insecure=true: {}", tls::PLAIN_TEXT_RISK)
        );
    }
    let token = match host
        .coordinator_token_file
        .as_ref()
        .map(|p| crate::secret::read_secret_file(p))
    {
        Some(Ok(t)) if !t.expose().trim().is_empty() => {
            crate::secret::Secret::new(t.expose().trim())
        }
        other => {
            let why = match other {
                Some(Err(e)) => e.to_string(),
                _ => "no coordinator_token_file set, or it is empty".into(),
            };
            log_warn!("coordinator_token_unreadable", error = why);
            shared.pool.configure(true, None, now);
            record(store, &mut seen, |s| {
                down(s, &format!("coordinator_token_file: {why}"))
            });
            return Ok(None);
        }
    };
    // Unbounded, with the bound kept by `Pool::report`: a bounded channel of
    // 4,096 reports (120 bytes each) wrote all its slots at once, 512 kB held from
    // start on every coordinated host while its link is up and nothing waits.
    let (report_tx, report_rx) = crossbeam_channel::unbounded::<Report>();
    let (shutdown_tx, shutdown_rx) = crossbeam_channel::bounded::<()>(0);
    shared.pool.configure(true, Some(report_tx), now);
    let mut cfg = crate::coordinator::link::LinkConfig::new(url.clone(), token, hello(store)?);
    cfg.log = std::sync::Arc::new(|line: &str| log_info!("coordinator_link", detail = line));
    cfg.ca_file = host.coordinator_ca_file.clone();
    let handler = Arc::new(Handler {
        shared: shared.clone(),
        store: Mutex::new(SqliteStore::open(&shared.state_dir)?),
        seen: Mutex::new(seen.clone()),
    });
    match crate::coordinator::link::spawn_link(cfg, handler, report_rx, shutdown_rx) {
        Ok(handle) => {
            log_info!("coordinator_link_started", url = url);
            Ok(Some(LinkRun {
                handle,
                shutdown: shutdown_tx,
                config,
            }))
        }
        Err(e) => {
            log_warn!("coordinator_link_failed", error = e);
            record(store, &mut seen, |s| down(s, &e.to_string()));
            Ok(None)
        }
    }
}
