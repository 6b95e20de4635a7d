//! The host id a daemon runs with: judged against this machine at start
//! (`domain::identity::judge`: kept, recorded, adopted, or a new one drawn for a
//! copy from another machine), then claimed on this machine (`lock::HostClaim`) for
//! the daemon's life, so a copied state directory never runs beside its original.

use super::DaemonError;
use crate::domain::Host;
use crate::domain::identity::{self, Verdict};
use crate::facts::lock::{HostClaim, LockError};
use crate::runner::{ProcessStatus, is_alive, machine};
use crate::store::{SqliteStore, Store, daemon_facts};
use crate::timefmt::{format_rfc3339, now_millis};
use crate::{log_info, log_warn};
use std::path::Path;

/// The host as the daemon runs it, its id judged against this machine and claimed on
/// it. Refused (`LockError::HostId`, exit 7) while another daemon here holds the id.
/// Without a claims' directory it can use (a daemon that is not root, without
/// `/run/runner-manager`), the id goes unclaimed, and the log says so.
pub fn at_start(
    store: &SqliteStore,
    host: Host,
    state_dir: &Path,
) -> Result<(Host, Option<HostClaim>), DaemonError> {
    let host = judged(store, host)?;
    match HostClaim::take(&crate::runner::claim::lock_dir(), &host.id, state_dir) {
        Ok(claim) => Ok((host, Some(claim))),
        Err(e @ LockError::HostId { .. }) => Err(DaemonError::Lock(e)),
        Err(e) => {
            log_warn!("host_id_not_claimed", host = host.id, error = e);
            Ok((host, None))
        }
    }
}

/// Carries out what `identity::judge` says of the store's machine id and this one's.
fn judged(store: &SqliteStore, host: Host) -> Result<Host, DaemonError> {
    let current = machine::current();
    let kept = store.kept_machine_id()?;
    let live_here = store
        .open_attempts(&host.id)?
        .iter()
        .filter(|a| match (a.pid, a.pid_start) {
            (Some(pid), Some(start)) => is_alive(pid, start) == ProcessStatus::Alive,
            _ => false,
        })
        .count();
    let verdict = identity::judge(kept.as_deref(), current.as_deref(), live_here);
    let short = |m: &Option<String>| {
        m.as_deref()
            .map_or("-".to_string(), |m| identity::short_machine(m).to_string())
    };
    match verdict {
        Verdict::Keep => Ok(host),
        Verdict::Unknown => {
            log_info!("machine_id_unreadable", host = host.id);
            Ok(host)
        }
        Verdict::Record => {
            if let Some(m) = &current {
                store.keep_machine_id(m)?;
            }
            log_info!(
                "machine_id_recorded",
                host = host.id,
                machine = short(&current)
            );
            Ok(host)
        }
        Verdict::Adopt => {
            if let Some(m) = &current {
                store.keep_machine_id(m)?;
            }
            log_warn!(
                "machine_id_changed",
                host = host.id,
                was = short(&kept),
                machine = short(&current),
                live_here = live_here,
                kept_host_id = "its runners live on this machine"
            );
            Ok(host)
        }
        Verdict::Reidentify => {
            let now = now_millis();
            let r = store.reidentify(current.as_deref(), now)?;
            let why = format!(
                "the store was made on machine {}, and this is {}",
                short(&kept),
                short(&current)
            );
            let line = r.line(&format_rfc3339(now), &why);
            daemon_facts::put_identity_change(store, &line)?;
            log_warn!(
                "host_reidentified",
                host = r.new_id,
                was = r.old_id,
                why = why,
                handed_back = r.handed_back.len(),
                left_pool = r.left_pool.as_deref().unwrap_or("-")
            );
            Ok(store.host_or_create()?)
        }
    }
}
