//! The validators of a target's conditional GETs (ETag, body as the client keeps it,
//! `Link`), so a restarted daemon's first poll is answered with 304s, which cost no
//! rate limit, instead of reading every queued run's jobs again (issue 20).

use super::error::Result;
use super::rows;
use super::{EtagChange, StoredEtag};
use rusqlite::{Connection, params};

pub fn etags(c: &Connection, target: &str) -> Result<Vec<StoredEtag>> {
    let mut st =
        c.prepare_cached("SELECT url, etag, body, link FROM etags WHERE target = ?1 ORDER BY url")?;
    let rows = st.query_map([target], |r| {
        Ok(StoredEtag {
            url: r.get(0)?,
            etag: r.get(1)?,
            body: r.get(2)?,
            link: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Writes a batch of changes in one transaction.
pub fn save_etags(c: &Connection, target: &str, changes: &[EtagChange]) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let tx = rows::write_tx(c)?;
    for ch in changes {
        match ch {
            EtagChange::Put(e) => {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO etags (target, url, etag, body, link) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![target, e.url, e.etag, e.body, e.link])?;
            }
            EtagChange::Gone(url) => {
                tx.prepare_cached("DELETE FROM etags WHERE target = ?1 AND url = ?2")?
                    .execute(params![target, url])?;
            }
        }
    }
    tx.commit()?;
    Ok(())
}
