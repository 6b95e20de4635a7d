//! The host's identity in the books: the machine id its host id was drawn on, and a
//! new host id for a copy of the state directory (`host reidentify`, or a daemon that
//! starts on another machine), with what the copy's rows of the old id become.

use super::error::Result;
use super::rows;
use super::sqlite::{SqliteStore, random_host_id};
use crate::domain::identity::handed_back_reason;
use crate::timefmt::Millis;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// What a new host id changed in the books.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reidentified {
    pub old_id: String,
    pub new_id: String,
    /// The old id's open attempts, ended in these books and marked cleaned: their
    /// runners are the original host's, which ends and cleans them. Nothing of them is
    /// killed, deregistered or removed from here.
    pub handed_back: Vec<i64>,
    /// This store's profiles, moved to the new id.
    pub profiles: usize,
    /// The coordinator the host was set to join, now unset: its token is the
    /// original's, and one token is one host in the pool.
    pub left_pool: Option<String>,
    /// Lost jobs the copy waited on to re-run, dropped: the original re-runs them.
    pub reruns_dropped: usize,
    /// The machine id kept with the new host id.
    pub machine_id: Option<String>,
}

impl Reidentified {
    /// The one line `status` keeps of the change: when, from which id, why, and what
    /// the books handed back.
    pub fn line(&self, at: &str, why: &str) -> String {
        let mut s = format!(
            "new host id {} since {at} (was {}: {why}); {} open attempt(s) of the old id \
             handed back to it",
            self.new_id,
            self.old_id,
            self.handed_back.len()
        );
        if let Some(url) = &self.left_pool {
            s.push_str(&format!("; left the pool at {url}"));
        }
        s
    }
}

pub(super) fn kept(c: &Connection) -> Result<Option<String>> {
    Ok(
        c.query_row("SELECT machine_id FROM host WHERE one = 1", [], |r| {
            r.get::<_, Option<String>>(0)
        })
        .optional()?
        .flatten(),
    )
}

fn keep(c: &Connection, machine_id: &str) -> Result<()> {
    c.execute(
        "UPDATE host SET machine_id = ?1 WHERE one = 1",
        params![machine_id],
    )?;
    Ok(())
}

const LIVE_STATES: &str = "('pending', 'starting', 'idle', 'busy')";

fn reidentify(
    c: &Connection,
    new_id: &str,
    machine_id: Option<&str>,
    now: Millis,
) -> Result<Reidentified> {
    let tx = rows::write_tx(c)?;
    let (old_id, coordinator): (String, Option<String>) = tx
        .query_row("SELECT id, coordinator FROM host WHERE one = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?
        .ok_or_else(|| rows::bad("host", "no host row to give a new id"))?;
    tx.execute(
        "UPDATE host SET id = ?2, machine_id = ?3, coordinator = NULL, \
         coordinator_token_file = NULL WHERE one = 1 AND id = ?1",
        params![old_id, new_id, machine_id],
    )?;
    let profiles = tx.execute(
        "UPDATE profiles SET host_id = ?2 WHERE host_id = ?1",
        params![old_id, new_id],
    )?;
    let handed_back: Vec<i64> = tx
        .prepare("SELECT id FROM attempts WHERE host_id = ?1 AND cleaned = 0 ORDER BY id")?
        .query_map([&old_id], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    // A runner that may be alive ends `failed`/`orphaned` here, with the reason that
    // says whose it is; one already ending keeps its own reason. Neither goes through
    // the ledger's save: the copy adds nothing to the usage roll-up and asks no re-run
    // for a runner that is not its own.
    tx.execute(
        &format!(
            "INSERT INTO attempt_events (attempt_id, seq, state, at) \
             SELECT a.id, (SELECT count(*) FROM attempt_events e WHERE e.attempt_id = a.id), \
                    'failed', ?2 \
             FROM attempts a WHERE a.host_id = ?1 AND a.cleaned = 0 AND a.state IN {LIVE_STATES}"
        ),
        params![old_id, now],
    )?;
    tx.execute(
        &format!(
            "UPDATE attempts SET state = 'failed', outcome = 'orphaned', reason = ?2, \
             reason_kind = NULL, reason_detail = NULL \
             WHERE host_id = ?1 AND cleaned = 0 AND state IN {LIVE_STATES}"
        ),
        params![old_id, handed_back_reason(&old_id)],
    )?;
    tx.execute(
        "UPDATE attempts SET cleaned = 1, ended_at = COALESCE(ended_at, ?2), updated_at = ?2, \
         next_cleanup_at = NULL WHERE host_id = ?1 AND cleaned = 0",
        params![old_id, now],
    )?;
    // The scale set sessions the copy knows of are the original's, and so are the
    // lost jobs it still waits on to re-run: the original re-runs them, once.
    tx.execute("DELETE FROM scaleset_sessions", [])?;
    let reruns_dropped = tx.execute("DELETE FROM reruns WHERE state = 'waiting'", [])?;
    tx.commit()?;
    Ok(Reidentified {
        old_id,
        new_id: new_id.to_string(),
        handed_back,
        profiles,
        left_pool: coordinator,
        reruns_dropped,
        machine_id: machine_id.map(str::to_string),
    })
}

impl SqliteStore {
    /// Records `machine_id` as the host id's machine.
    pub fn keep_machine_id(&self, machine_id: &str) -> Result<()> {
        self.wrap(keep(self.connection(), machine_id))
    }

    /// Gives the host a new random id, drawn on `machine_id`, in one transaction (see
    /// [`Reidentified`] for what else changes). The caller holds the state directory's
    /// daemon lock, so no daemon acts on the books meanwhile.
    pub fn reidentify(&self, machine_id: Option<&str>, now: Millis) -> Result<Reidentified> {
        let new_id = random_host_id()?;
        self.wrap(reidentify(self.connection(), &new_id, machine_id, now))
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::{AttemptState, Outcome, Reason, ReasonKind};
    use crate::store::Store;
    use crate::store::tests::{new_attempt, seeded};

    #[test]
    fn a_new_id_moves_the_profiles_and_hands_the_open_attempts_back() {
        let (s, host, p) = seeded();
        let mut h = host.clone();
        h.coordinator = Some("ws://127.0.0.1:9".into());
        s.update_host(&h).unwrap();
        let new = || {
            s.create_attempt(&new_attempt(&host, &p.name), 1_000)
                .unwrap()
        };
        let (mut busy, mut done, pending) = (new(), new(), new());
        for (st, at) in [
            (AttemptState::Starting, 1_100),
            (AttemptState::Idle, 1_200),
            (AttemptState::Busy, 1_300),
        ] {
            busy.step(st, at).unwrap();
        }
        s.save_attempt(&busy).unwrap();
        done.end(Outcome::CompletedJob, Some(Reason::job("Succeeded")), 1_400)
            .unwrap();
        done.mark_cleaned(1_500);
        s.save_attempt(&done).unwrap();
        let done_before = s.attempt(done.id).unwrap();

        let machine = "0123456789abcdef0123456789abcdef";
        let r = s.reidentify(Some(machine), 2_000).unwrap();
        assert_eq!(r.old_id, host.id);
        assert_ne!(r.new_id, host.id);
        assert_eq!(r.new_id.len(), 16);
        assert_eq!(r.handed_back, vec![busy.id, pending.id]);
        assert_eq!(r.profiles, 1);
        assert_eq!(r.left_pool.as_deref(), Some("ws://127.0.0.1:9"));
        let after = s.host_or_create().unwrap();
        assert_eq!(after.id, r.new_id);
        assert_eq!(after.coordinator, None);
        assert_eq!(s.profile(&p.name).unwrap().host_id, r.new_id);
        assert_eq!(s.kept_machine_id().unwrap().as_deref(), Some(machine));
        // Nothing of the old id is open in the copy; its rows keep the old id and name.
        assert!(s.open_attempts(&host.id).unwrap().is_empty());
        assert!(s.open_attempts(&r.new_id).unwrap().is_empty());
        let b = s.attempt(busy.id).unwrap();
        assert_eq!(
            (b.state, b.outcome, b.cleaned, b.ended_at),
            (
                AttemptState::Failed,
                Some(Outcome::Orphaned),
                true,
                Some(2_000)
            )
        );
        assert_eq!(b.runner_name, busy.runner_name);
        let reason = b.reason.clone().unwrap();
        assert_eq!(reason.kind(), ReasonKind::Other);
        assert!(reason.to_string().contains(&host.id), "{reason}");
        assert_eq!(
            b.history.last().map(|c| (c.state, c.at)),
            Some((AttemptState::Failed, 2_000))
        );
        assert_eq!(b.history.len(), 5, "{:?}", b.history);
        // An attempt already ended and cleaned is left as it was.
        assert_eq!(s.attempt(done.id).unwrap(), done_before);
        // A new attempt takes the new id's name.
        let mut next = new_attempt(&host, &p.name);
        next.host_id = r.new_id.clone();
        let next = s.create_attempt(&next, 3_000).unwrap();
        assert!(
            next.runner_name
                .starts_with(&format!("rm-{}-", &r.new_id[..8])),
            "{}",
            next.runner_name
        );
    }

    #[test]
    fn a_new_store_keeps_the_machine_its_id_was_drawn_on() {
        let (s, _, _) = seeded();
        assert_eq!(
            s.kept_machine_id().unwrap(),
            crate::runner::machine::current()
        );
        s.keep_machine_id("fedcba9876543210fedcba9876543210")
            .unwrap();
        assert_eq!(
            s.kept_machine_id().unwrap().as_deref(),
            Some("fedcba9876543210fedcba9876543210")
        );
    }
}
