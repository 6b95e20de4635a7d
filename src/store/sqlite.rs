//! `SqliteStore`: opening (and creating) the store file safely, connection settings,
//! and the [`Store`] implementation that hands each call to its book's module.

use super::descriptors::{self, Counted};
use super::error::{Result, StoreError};
use super::schema::{self, Found};
use super::{
    AttemptFilter, EtagChange, Heartbeat, LatencySample, NewAttempt, ProfileStatus, QueueSample,
    SessionStatus, Store, StoredEtag, TargetStatus, config, etags, ledger, live, meters, usage,
};
use crate::domain::rollup::Day;
use crate::domain::{Attempt, Host, ScalePolicy, Target};
use crate::timefmt::Millis;
use rusqlite::{Connection, OpenFlags};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The store's file name inside the state directory.
pub const DB_FILE: &str = "state.db";

/// How long a writer waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a waiting writer looks at the lock again.
const BUSY_POLL: Duration = Duration::from_millis(1);

/// The busy handler: whether a writer that found the lock taken `tries` times already
/// waits again. SQLite's own (`busy_timeout`) backs off to 10 ms after three tries and
/// to 100 ms later on, so a writer behind a burst of the loop's short transactions slept
/// on for milliseconds after the lock was free. A daemon killed meanwhile lost what it
/// was keeping: the ETags of a read it had paid for (issue 37's restarts). Looking every
/// millisecond takes the lock within one of its release; each try sleeps at least
/// `BUSY_POLL`, so `BUSY_TIMEOUT` still bounds the wait.
pub(super) fn wait_for_lock(tries: i32) -> bool {
    let waited = u128::try_from(tries).unwrap_or(0) * BUSY_POLL.as_millis();
    if waited >= BUSY_TIMEOUT.as_millis() {
        return false;
    }
    #[cfg(test)]
    LOCK_WAITS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(BUSY_POLL);
    true
}

/// How many times a writer of this process waited for the lock (tests).
#[cfg(test)]
pub(super) static LOCK_WAITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The bytes a reset WAL is truncated to (`PRAGMA journal_size_limit`).
pub const WAL_SIZE_LIMIT: u64 = 4 * 1024 * 1024;

pub struct SqliteStore {
    conn: Connection,
    /// This connection counted on its file (`descriptors`); declared after `conn`, so
    /// it is dropped after the connection is closed.
    _counted: Counted,
    /// The file, or `:memory:` for an in-memory store (named in errors).
    path: PathBuf,
}

impl SqliteStore {
    /// Opens the store in `state_dir`, creating the directory (mode 0700) and the file
    /// (mode 0600) on first use, and migrating an older schema forward. A file that is
    /// not a runner-manager store, or is damaged, is refused and left untouched.
    pub fn open(state_dir: &Path) -> Result<SqliteStore> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        if !state_dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(state_dir)
                .map_err(io(state_dir))?;
        }
        let path = state_dir.join(DB_FILE);
        // Only before the process's first connection on the file: closing a descriptor
        // of ours would drop every lock its connections hold (`descriptors`).
        let counted = descriptors::connect(&path, || {
            // Create the file ourselves so its mode is 0600 from the first byte;
            // SQLite gives its -wal and -shm files the same mode.
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&path)(e)),
            }
            // Read access first: a file we cannot read gives an I/O error naming it,
            // not SQLite's vaguer "unable to open database file".
            std::fs::File::open(&path)
                .and_then(|mut f| f.read(&mut [0u8; 1]))
                .map(drop)
                .map_err(io(&path))
        })?;
        no_bulk_page_cache();
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| schema::classify_open_error(e, &path))?;
        Self::setup(conn, counted, path, true)
    }

    /// A private in-memory store with the same schema and code, for tests.
    pub fn open_in_memory() -> Result<SqliteStore> {
        no_bulk_page_cache();
        Self::setup(
            Connection::open_in_memory()?,
            Counted::none(),
            PathBuf::from(":memory:"),
            false,
        )
    }

    fn setup(
        mut conn: Connection,
        counted: Counted,
        path: PathBuf,
        wal: bool,
    ) -> Result<SqliteStore> {
        conn.busy_handler(Some(wait_for_lock))?;
        // Memory per connection, of which an idle daemon holds one per target loop
        // (issue 32, "Idle"): no lookaside (SQLite sets 120 kB aside per connection;
        // only before the first statement), and at most 512 kB of cached pages instead
        // of 2 MB (below); a page read past that comes from the kernel's page cache.
        no_lookaside(&conn);
        // Inspect before writing anything: a foreign or damaged file must stay as it is.
        let found = schema::inspect(&conn, &path)?;
        let classify = |e: rusqlite::Error| schema::classify_open_error(e, &path);
        if matches!(found, Found::Empty) {
            // Only before the first table: pruned rows' pages then go back to the
            // filesystem (`upkeep`). Older stores are converted by the daemon.
            conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")
                .map_err(classify)?;
        }
        if wal {
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(classify)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError::Io {
                    path: path.clone(),
                    source: std::io::Error::other(format!(
                        "SQLite refused WAL mode (got {mode}); is the file on a network filesystem?"
                    )),
                });
            }
            // NORMAL is durable across a process crash in WAL mode; a power loss may
            // drop the last transactions, which the recovery pass closes.
            conn.execute_batch("PRAGMA synchronous = NORMAL")
                .map_err(classify)?;
            // A checkpoint that resets the WAL truncates it to this, so the file does
            // not keep the largest size a busy hour once gave it (issue 18's soak saw
            // a 7.4 MB high-water mark that never came back).
            conn.execute_batch(&format!("PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}"))
                .map_err(classify)?;
        }
        conn.execute_batch("PRAGMA foreign_keys = ON")
            .map_err(classify)?;
        conn.execute_batch("PRAGMA cache_size = -512")
            .map_err(classify)?;
        let behind = match found {
            Found::Empty => true,
            Found::Ours(v) => v < schema::CURRENT_VERSION,
        };
        if behind && !matches!(found, Found::Empty) {
            // A migration writes: a damaged older store is refused before it, as
            // every CLI write refuses one (`check_sound`).
            quick_check(&conn, &path)?;
        }
        if behind {
            schema::migrate(&conn).map_err(|e| match e {
                StoreError::Sqlite(e) => classify(e),
                e => e,
            })?;
        }
        Ok(SqliteStore {
            conn,
            _counted: counted,
            path,
        })
    }

    /// Keeps this connection small: at most `pages_kib` KiB of cached pages (512 by
    /// default) and `statements` prepared statements (16 by default; one costs about
    /// 10 kB, and preparing it again some 20 µs). For a connection that reads a few
    /// rows every pass and holds still between, as each target loop's does: an idle
    /// daemon holds one per target.
    pub fn keep_small(&self, pages_kib: u32, statements: usize) -> Result<()> {
        self.conn.set_prepared_statement_cache_capacity(statements);
        self.wrap(
            self.conn
                .execute_batch(&format!("PRAGMA cache_size = -{pages_kib}"))
                .map_err(Into::into),
        )
    }

    /// Gives back the pages this connection caches and no statement holds
    /// (`sqlite3_db_release_memory`): for a loop between passes, whose next pass finds
    /// them in the kernel's page cache (and in WAL mode re-reads any another
    /// connection wrote meanwhile anyway). Nothing else is freed.
    pub fn release_memory(&self) {
        // SAFETY: the handle is this connection's own, used on this thread only;
        // the call frees only cache pages not in use.
        unsafe {
            rusqlite::ffi::sqlite3_db_release_memory(self.conn.handle());
        }
    }

    /// The store's file (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open store.
    pub fn schema_version(&self) -> Result<i64> {
        self.wrap(
            self.conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(Into::into),
        )
    }

    /// `PRAGMA integrity_check`: `["ok"]` for a sound file, else SQLite's findings (at
    /// most 20), for `doctor`.
    pub fn integrity_check(&self) -> Result<Vec<String>> {
        let run = || -> Result<Vec<String>> {
            let mut stmt = self.conn.prepare("PRAGMA integrity_check(20)")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            let mut out = Vec::new();
            for r in rows {
                out.push(r?);
            }
            Ok(out)
        };
        self.wrap(run())
    }

    /// `PRAGMA quick_check`: refuses a damaged file as [`StoreError::Corrupt`], for the
    /// CLI to call before any command that writes (a write to a damaged file can
    /// spread the damage, and the file must stay as it was for whoever restores it).
    /// Opening reads only the schema, so a damaged page elsewhere is found only here.
    /// It reads every page once: a few milliseconds at 10,000 attempts (BENCHMARKS).
    pub fn check_sound(&self) -> Result<()> {
        quick_check(&self.conn, &self.path)
    }

    /// The underlying connection, for the store's own modules and tests (query plans,
    /// raw inserts): private to `store`, so nothing outside it can write SQL.
    pub(super) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Writes the made-up history `seed` describes, in one transaction: for benchmarks
    /// and tests that need a store with a long past, which only the store may write.
    pub fn seed_history(&self, seed: &super::HistorySeed) -> Result<()> {
        self.wrap(ledger::seed_history(&self.conn, seed))
    }

    /// Every row of the store file at `db` with its table's name, each row as its
    /// columns' text, each followed by `|` (NULL as nothing): for the benchmarks' check
    /// that no secret reached the store. The file is opened read-only, so a daemon may
    /// be writing meanwhile; a table or row that cannot be read is passed over, as the
    /// check always did. Fails only when the file cannot be opened.
    pub fn rows_as_text(db: &Path) -> Result<Vec<(String, String)>> {
        use rusqlite::types::ValueRef;
        let _counted = descriptors::connect(db, || Ok::<(), StoreError>(()))?;
        let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| schema::classify_open_error(e, db))?;
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .and_then(|mut s| {
                s.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .unwrap_or_default();
        let mut out = Vec::new();
        for t in tables {
            let Ok(mut stmt) = conn.prepare(&format!("SELECT * FROM \"{t}\"")) else {
                continue;
            };
            let n = stmt.column_count();
            let rows = stmt.query_map([], |r| {
                let mut line = String::new();
                for i in 0..n {
                    match r.get_ref(i)? {
                        ValueRef::Text(b) | ValueRef::Blob(b) => {
                            line.push_str(&String::from_utf8_lossy(b))
                        }
                        ValueRef::Integer(v) => line.push_str(&v.to_string()),
                        ValueRef::Real(v) => line.push_str(&v.to_string()),
                        ValueRef::Null => {}
                    }
                    line.push('|');
                }
                Ok(line)
            });
            let Ok(rows) = rows else { continue };
            out.extend(rows.flatten().map(|line| (t.clone(), line)));
        }
        Ok(out)
    }

    /// Runs `f` as one write transaction: every store edit it makes (each its own
    /// transaction otherwise, then a savepoint) is committed together when it returns
    /// `Ok`, or none is when it returns an error (`apply`: a file is applied whole or
    /// not at all).
    pub fn atomically<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&SqliteStore) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let tx = self.wrap(super::rows::write_tx(&self.conn).map_err(StoreError::from))?;
        let out = f(self)?;
        self.wrap(tx.commit().map_err(StoreError::from))?;
        Ok(out)
    }

    /// Names the file in SQLite errors that are about the file.
    pub(super) fn wrap<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| match e {
            StoreError::Sqlite(e) => schema::classify_open_error(e, &self.path),
            e => e,
        })
    }
}

/// Turns off SQLite's bulk page-cache allocation, once per process, before its first
/// connection. Each connection otherwise allocates 20 cache lines at once when it first
/// reads (about 87 kB, every line's header written, so all resident), however few pages
/// it then caches: ten idle targets' connections held 0.9 MB that way (issue 32,
/// "Idle", measured with massif). Without it each cached page is its own allocation,
/// bounded by `cache_size` as before.
fn no_bulk_page_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: SQLITE_CONFIG_PAGECACHE with a null buffer and zero size and count
        // is SQLite's documented way to ask for no initial bulk allocation. It is
        // only honoured before sqlite3_initialize, which opening the first connection
        // calls; made later it returns SQLITE_MISUSE and changes nothing.
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_PAGECACHE,
                std::ptr::null_mut::<std::ffi::c_void>(),
                std::ffi::c_int::from(0u8),
                std::ffi::c_int::from(0u8),
            );
        }
    });
}

/// Turns SQLite's per-connection lookaside allocator off (its small allocations then
/// come from malloc). Only before the connection's first statement: SQLite refuses it
/// (SQLITE_BUSY, ignored here) while lookaside memory is in use.
fn no_lookaside(conn: &Connection) {
    // SAFETY: the handle is this open connection's; a null buffer with a zero slot
    // size and count is SQLite's documented way to turn lookaside off.
    unsafe {
        rusqlite::ffi::sqlite3_db_config(
            conn.handle(),
            rusqlite::ffi::SQLITE_DBCONFIG_LOOKASIDE,
            std::ptr::null_mut::<std::ffi::c_void>(),
            std::ffi::c_int::from(0u8),
            std::ffi::c_int::from(0u8),
        );
    }
}

/// `PRAGMA quick_check` on `conn`: `Ok` for a sound file, else [`StoreError::Corrupt`]
/// with SQLite's first findings.
pub(super) fn quick_check(conn: &Connection, path: &Path) -> Result<()> {
    let run = || -> rusqlite::Result<Vec<String>> {
        let mut stmt = conn.prepare("PRAGMA quick_check(5)")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    };
    let found = run().map_err(|e| match schema::classify_open_error(e, path) {
        StoreError::Corrupt { path, detail } => StoreError::Corrupt {
            path,
            detail: format!("quick_check: {detail}"),
        },
        other => other,
    })?;
    if found.len() == 1 && found[0] == "ok" {
        return Ok(());
    }
    let mut detail = found.join("; ");
    if detail.len() > 300 {
        let cut = (0..=300)
            .rev()
            .find(|i| detail.is_char_boundary(*i))
            .unwrap_or(0);
        detail.truncate(cut);
        detail.push('…');
    }
    Err(StoreError::Corrupt {
        path: path.to_path_buf(),
        detail: format!("quick_check: {detail}"),
    })
}

/// 16 lowercase hex digits from the kernel's random source (`random::fill`:
/// getrandom(2) first, so the static binary works in an empty chroot or a minimal
/// container; .ci/static-check runs `status` in one).
pub(super) fn random_host_id() -> Result<String> {
    let mut b = [0u8; 8];
    crate::random::fill(&mut b).map_err(|source| StoreError::Io {
        path: Path::new("getrandom(2)").into(),
        source,
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Store for SqliteStore {
    fn host(&self) -> Result<Option<Host>> {
        self.wrap(config::host(&self.conn))
    }
    fn host_or_create(&self) -> Result<Host> {
        self.wrap(config::host_or_create(&self.conn, random_host_id))
    }
    fn update_host(&self, host: &Host) -> Result<()> {
        self.wrap(config::update_host(&self.conn, host))
    }
    fn update_host_settings(&self, host: &Host, beside: &[(&str, Option<&str>)]) -> Result<()> {
        self.wrap(config::update_host_settings(&self.conn, host, beside))
    }
    fn set_draining(&self, draining: bool) -> Result<()> {
        self.wrap(config::set_draining(&self.conn, draining))
    }
    fn kept_machine_id(&self) -> Result<Option<String>> {
        self.wrap(super::identity::kept(&self.conn))
    }
    fn add_target(&self, target: &Target) -> Result<()> {
        self.wrap(config::add_target(&self.conn, target))
    }
    fn target(&self, name: &str) -> Result<Target> {
        self.wrap(config::target(&self.conn, name))
    }
    fn targets(&self) -> Result<Vec<Target>> {
        self.wrap(config::targets(&self.conn))
    }
    fn update_target(&self, target: &Target) -> Result<()> {
        self.wrap(config::update_target(&self.conn, target))
    }
    fn remove_target(&self, name: &str) -> Result<()> {
        self.wrap(config::remove_target(&self.conn, name))
    }
    fn add_profile(&self, profile: &ScalePolicy) -> Result<ScalePolicy> {
        self.wrap(config::add_profile(&self.conn, profile))
    }
    fn profile(&self, name: &str) -> Result<ScalePolicy> {
        self.wrap(config::profile(&self.conn, name))
    }
    fn profiles(&self) -> Result<Vec<ScalePolicy>> {
        self.wrap(config::profiles(&self.conn))
    }
    fn update_profile(&self, profile: &ScalePolicy, expected_revision: u64) -> Result<u64> {
        self.wrap(config::update_profile(
            &self.conn,
            profile,
            expected_revision,
        ))
    }
    fn remove_profile(&self, name: &str) -> Result<()> {
        self.wrap(config::remove_profile(&self.conn, name))
    }
    fn create_attempt(&self, new: &NewAttempt, now: Millis) -> Result<Attempt> {
        self.wrap(ledger::create(&self.conn, new, now))
    }
    fn save_attempt(&self, attempt: &Attempt) -> Result<()> {
        self.wrap(ledger::save(&self.conn, attempt))
    }
    fn set_lease(&self, attempt: i64, lease: &str) -> Result<()> {
        self.wrap(ledger::set_lease(&self.conn, attempt, lease))
    }
    fn attempt(&self, id: i64) -> Result<Attempt> {
        self.wrap(ledger::get(&self.conn, id))
    }
    fn attempts(&self, filter: &AttemptFilter) -> Result<Vec<Attempt>> {
        self.wrap(ledger::list(&self.conn, filter))
    }
    fn open_attempts(&self, host_id: &str) -> Result<Vec<Attempt>> {
        self.wrap(ledger::open_of_host(&self.conn, host_id))
    }
    fn open_attempts_of_profile(&self, profile: &str) -> Result<Vec<Attempt>> {
        self.wrap(ledger::open_of_profile(&self.conn, profile))
    }
    fn live_counts(&self) -> Result<BTreeMap<String, u32>> {
        self.wrap(ledger::live_counts(&self.conn))
    }
    fn prune_attempts(&self, before: Millis) -> Result<usize> {
        self.wrap(ledger::prune(&self.conn, before))
    }
    fn usage_rows(&self, from: Day, until: Day) -> Result<Vec<super::UsageRow>> {
        self.wrap(usage::rows_between(&self.conn, from, until, false))
    }
    fn prune_usage(&self, before: Day) -> Result<usize> {
        self.wrap(usage::prune(&self.conn, before))
    }
    fn rerun_of(&self, attempt: i64) -> Result<Option<crate::domain::rerun::Rerun>> {
        self.wrap(super::reruns::of_attempt(&self.conn, attempt))
    }
    fn rerun_counts(&self, since: Millis) -> Result<Vec<(String, u64, u64)>> {
        self.wrap(super::reruns::counts(&self.conn, since))
    }
    fn recent_reruns(&self, limit: usize) -> Result<Vec<crate::domain::rerun::Rerun>> {
        self.wrap(super::reruns::recent(&self.conn, limit))
    }
    fn put_profile_status(&self, status: &ProfileStatus) -> Result<()> {
        self.wrap(live::put_profile_status(&self.conn, status))
    }
    fn profile_statuses(&self) -> Result<Vec<ProfileStatus>> {
        self.wrap(live::profile_statuses(&self.conn))
    }
    fn put_target_status(&self, status: &TargetStatus) -> Result<()> {
        self.wrap(live::put_target_status(&self.conn, status))
    }
    fn target_statuses(&self) -> Result<Vec<TargetStatus>> {
        self.wrap(live::target_statuses(&self.conn))
    }
    fn put_session_status(&self, status: &SessionStatus) -> Result<()> {
        self.wrap(live::put_session_status(&self.conn, status))
    }
    fn session_statuses(&self) -> Result<Vec<SessionStatus>> {
        self.wrap(live::session_statuses(&self.conn))
    }
    fn delete_session_status(&self, profile: &str) -> Result<()> {
        self.wrap(live::delete_session_status(&self.conn, profile))
    }
    fn put_heartbeat(&self, heartbeat: &Heartbeat) -> Result<()> {
        self.wrap(live::put_heartbeat(&self.conn, heartbeat))
    }
    fn heartbeat(&self) -> Result<Option<Heartbeat>> {
        self.wrap(live::heartbeat(&self.conn))
    }
    fn clear_heartbeat(&self) -> Result<()> {
        self.wrap(live::clear_heartbeat(&self.conn))
    }
    fn add_queue_samples(&self, samples: &[QueueSample]) -> Result<()> {
        self.wrap(live::add_queue_samples(&self.conn, samples))
    }
    fn queue_samples(&self, profile: Option<&str>, since: Millis) -> Result<Vec<QueueSample>> {
        self.wrap(live::queue_samples(&self.conn, profile, since))
    }
    fn add_latency_sample(&self, sample: &LatencySample) -> Result<()> {
        self.wrap(live::add_latency_sample(&self.conn, sample))
    }
    fn latency_samples(&self, profile: Option<&str>, since: Millis) -> Result<Vec<LatencySample>> {
        self.wrap(live::latency_samples(&self.conn, profile, since))
    }
    fn prune_samples(&self, before: Millis) -> Result<usize> {
        self.wrap(live::prune_samples(&self.conn, before))
    }
    fn put_live_meters(&self, meters: &[crate::meter::LiveMeter]) -> Result<()> {
        self.wrap(meters::put(&self.conn, meters))
    }
    fn live_meters(&self) -> Result<BTreeMap<i64, crate::meter::LiveMeter>> {
        self.wrap(meters::all(&self.conn))
    }
    fn meter_points(&self, attempt: i64) -> Result<Vec<crate::meter::MeterPoint>> {
        self.wrap(meters::ring(&self.conn, attempt))
    }
    fn etags(&self, target: &str) -> Result<Vec<StoredEtag>> {
        self.wrap(etags::etags(&self.conn, target))
    }
    fn save_etags(&self, target: &str, changes: &[EtagChange]) -> Result<()> {
        self.wrap(etags::save_etags(&self.conn, target, changes))
    }
    fn kv_get(&self, key: &str) -> Result<Option<String>> {
        self.wrap(live::kv_get(&self.conn, key))
    }
    fn kv_put(&self, key: &str, value: &str) -> Result<()> {
        self.wrap(live::kv_put(&self.conn, key, value))
    }
    fn kv_delete(&self, key: &str) -> Result<()> {
        self.wrap(live::kv_delete(&self.conn, key))
    }
    fn data_version(&self) -> Result<i64> {
        self.wrap(
            self.conn
                .query_row("PRAGMA data_version", [], |r| r.get(0))
                .map_err(Into::into),
        )
    }
}
