//! The hosts' usage roll-ups on the coordinator, for the placer: each `status` frame's
//! rows written to the store under the host's name (its token's, not the one it
//! claims), where each host's rows resume told in its `hello_ack`, and the rows past
//! `usage_retention` pruned hourly.

use super::ConnOut;
use crate::coordinator::placement::{Action, ConnId, Placement};
use crate::coordinator::protocol::{CoordMsg, HostMsg};
use crate::coordinator::ws::LogFn;
use crate::domain::rollup::first_kept_day;
use crate::store::{SqliteStore, Store, UsageRow};
use crate::timefmt::Millis;
use std::collections::BTreeMap;

/// How often the hosts' rows are pruned.
const PRUNE_EVERY: Millis = 3_600_000;

pub(super) struct UsageBook<'a> {
    store: &'a SqliteStore,
    next_prune: Millis,
}

/// The name a connection's token was added under, and the id its host said hello with.
fn who<'a>(
    p: &'a Placement,
    outs: &'a BTreeMap<ConnId, ConnOut>,
    conn: ConnId,
) -> Option<(&'a str, &'a str)> {
    let name = outs.get(&conn)?.name.as_str();
    let id = p.hosts().get(&conn)?.hello.host.id.as_str();
    Some((name, id))
}

impl UsageBook<'_> {
    pub(super) fn new(store: &SqliteStore, now: Millis) -> UsageBook<'_> {
        UsageBook {
            store,
            next_prune: now,
        }
    }

    /// Takes a `status` frame's rows out of it into the store. A host that has not
    /// said hello has no rows kept; a failed write is logged, and the host's rows
    /// resume where the store has them when it says hello again.
    pub(super) fn take(
        &self,
        p: &Placement,
        outs: &BTreeMap<ConnId, ConnOut>,
        conn: ConnId,
        msg: &mut HostMsg,
        log: &LogFn,
    ) {
        let HostMsg::Status(st) = msg else { return };
        let rows = std::mem::take(&mut st.usage);
        let upto = st.usage_upto.take();
        if rows.is_empty() && upto.is_none() {
            return;
        }
        let Some((name, id)) = who(p, outs, conn) else {
            return;
        };
        let rows: Vec<UsageRow> = rows
            .into_iter()
            .map(|r| UsageRow {
                host: name.to_string(),
                key: r.key,
                figures: r.figures,
            })
            .collect();
        if let Err(e) = self.store.coord_put_usage(name, id, &rows, upto) {
            log(&format!("host {name}: its usage rows were not kept: {e}"));
        }
    }

    /// Says in each `hello_ack` where the host's rows resume; a store that cannot be
    /// read asks for them all again.
    pub(super) fn resume(
        &self,
        p: &Placement,
        outs: &BTreeMap<ConnId, ConnOut>,
        actions: &mut [Action],
        log: &LogFn,
    ) {
        for a in actions {
            let Action::Send(conn, CoordMsg::HelloAck(ack)) = a else {
                continue;
            };
            let Some((name, id)) = who(p, outs, *conn) else {
                continue;
            };
            let after = self.store.coord_usage_resume_after(name, id);
            ack.usage_after = Some(after.unwrap_or_else(|e| {
                log(&format!("host {name}: where its usage rows resume: {e}"));
                0
            }));
        }
    }

    /// Prunes the hosts' rows past this store's `usage_retention`, hourly.
    pub(super) fn prune_when_due(&mut self, now: Millis, log: &LogFn) {
        let s = self.store;
        if now < self.next_prune {
            return;
        }
        self.next_prune = now + PRUNE_EVERY;
        let pruned = crate::store::usage_settings(s)
            .and_then(|u| s.prune_usage(first_kept_day(now, u.retention_secs)));
        match pruned {
            Ok(0) => {}
            Ok(n) => log(&format!("pruned {n} usage rows past usage_retention")),
            Err(e) => log(&format!("pruning usage rows: {e}")),
        }
    }
}
