//! Webhook deliveries taken once: each signed delivery's body digest and
//! `X-GitHub-Delivery` id (128 bits of its SHA-256) with when it came, pruned past the window the caller keeps
//! (`github::hooks::DELIVERY_WINDOW_MS`), so a replay is known even after a restart.

use super::SqliteStore;
use super::error::Result;
use super::rows;
use crate::timefmt::Millis;
use rusqlite::{OptionalExtension, params};

/// The longest `X-GitHub-Delivery` kept (GitHub's are 36-character GUIDs); a longer
/// one is not kept, and its delivery is known by its body alone.
pub const MAX_GUID_LEN: usize = 128;

impl SqliteStore {
    /// Records a delivery as taken at `now` and says whether it is the first with this
    /// body digest or this id (`false`: a replay, or GitHub's redelivery of one taken).
    /// Rows older than `window` are dropped in the same transaction.
    pub fn take_delivery(
        &self,
        guid: Option<&str>,
        digest: &[u8],
        now: Millis,
        window: Millis,
    ) -> Result<bool> {
        // Kept as 128 bits of its SHA-256, as the body is: a row is about half the size
        // with the id's text.
        let guid = guid
            .filter(|g| !g.is_empty() && g.len() <= MAX_GUID_LEN)
            .map(|g| {
                ring::digest::digest(&ring::digest::SHA256, g.as_bytes()).as_ref()[..16].to_vec()
            });
        let c = self.connection();
        let first = (|| -> Result<bool> {
            let tx = rows::write_tx(c)?;
            tx.prepare_cached("DELETE FROM webhook_deliveries WHERE seen_at < ?1")?
                .execute([now - window])?;
            let seen: Option<i64> = tx
                .prepare_cached(
                    "SELECT 1 FROM webhook_deliveries WHERE digest = ?1 OR guid = ?2 LIMIT 1",
                )?
                .query_row(params![digest, guid], |r| r.get(0))
                .optional()?;
            if seen.is_none() {
                tx.prepare_cached(
                    "INSERT INTO webhook_deliveries (digest, guid, seen_at) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![digest, guid, now])?;
            }
            tx.commit()?;
            Ok(seen.is_none())
        })();
        self.wrap(first)
    }

    /// How many deliveries are remembered (for tests and benchmarks).
    pub fn deliveries_kept(&self) -> Result<u64> {
        let n: i64 =
            self.connection()
                .query_row("SELECT count(*) FROM webhook_deliveries", [], |r| r.get(0))?;
        Ok(n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_taken_once_by_its_id_or_its_body_within_the_window() {
        let s = SqliteStore::open_in_memory().unwrap();
        let day = 86_400_000;
        assert!(s.take_delivery(Some("g1"), b"body-1", 0, day).unwrap());
        // The same id again (GitHub's redelivery), or the same body under another id
        // or none (a replay with the unsigned header changed): not taken.
        assert!(!s.take_delivery(Some("g1"), b"body-1", 10, day).unwrap());
        assert!(!s.take_delivery(Some("g2"), b"body-1", 10, day).unwrap());
        assert!(!s.take_delivery(None, b"body-1", 10, day).unwrap());
        assert!(!s.take_delivery(Some("g1"), b"body-2", 10, day).unwrap());
        assert!(s.take_delivery(None, b"body-3", 10, day).unwrap());
        assert!(s.take_delivery(Some(""), b"body-4", 10, day).unwrap());
        assert_eq!(s.deliveries_kept().unwrap(), 3);
        // Past the window the rows go, and the store stays bounded.
        assert!(
            s.take_delivery(Some("g5"), b"body-5", day + 5, day)
                .unwrap()
        );
        assert_eq!(s.deliveries_kept().unwrap(), 3, "body-1 went");
        assert!(
            s.take_delivery(Some("g1"), b"body-1", day + 6, day)
                .unwrap()
        );
        // An id too long to be GitHub's is not kept; its body still is.
        let long = "x".repeat(MAX_GUID_LEN + 1);
        assert!(
            s.take_delivery(Some(&long), b"body-6", day + 7, day)
                .unwrap()
        );
        assert!(
            s.take_delivery(Some(&long), b"body-7", day + 7, day)
                .unwrap()
        );
        assert!(
            !s.take_delivery(Some(&long), b"body-6", day + 7, day)
                .unwrap()
        );
    }
}
