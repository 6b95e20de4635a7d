//! The store's file: private modes, other connections, migrations from old versions,
//! foreign and damaged files refused untouched, and the WAL kept to its limit.

use super::*;

#[test]
fn files_are_private_and_another_connection_sees_edits() {
    let d = TempDir::new("modes");
    let dir = d.0.join("state");
    let a = SqliteStore::open(&dir).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(DB_FILE)), 0o600);
    assert_eq!(a.schema_version().unwrap(), schema::CURRENT_VERSION);
    let b = SqliteStore::open(&dir).unwrap();
    let before = b.data_version().unwrap();
    a.kv_put("k", "v").unwrap();
    assert_ne!(
        b.data_version().unwrap(),
        before,
        "b must notice a's commit"
    );
    let mid = b.data_version().unwrap();
    b.kv_put("k", "w").unwrap();
    assert_eq!(b.data_version().unwrap(), mid, "own commits do not count");
}

#[test]
fn a_version_1_store_opens_and_migrates() {
    let d = TempDir::new("migrate");
    std::fs::create_dir_all(&d.0).unwrap();
    {
        let c = rusqlite::Connection::open(d.0.join(DB_FILE)).unwrap();
        c.execute_batch(&format!(
            "PRAGMA application_id = {};{} PRAGMA user_version = 1;",
            schema::APPLICATION_ID,
            schema::V1
        ))
        .unwrap();
        c.execute_batch(
            r#"INSERT INTO host VALUES (1, '0123abcd89ef4567', 'h', 'linux', 'x86_64', 2, NULL, NULL, 0);
            INSERT INTO targets VALUES ('octo', '{"kind":"org","org":"octo"}', 'https://api.github.com',
                '{"kind":"token_file","path":"/t"}', 5, '[]');
            INSERT INTO profiles VALUES ('linux', 'octo', '0123abcd89ef4567', '["self-hosted"]', 0, 0, 2,
                NULL, NULL, 300, 300, NULL, 'autoscale', 1, 0, NULL, 7);"#,
        )
        .unwrap();
    }
    let s = SqliteStore::open(&d.0).unwrap();
    assert_eq!(s.schema_version().unwrap(), schema::CURRENT_VERSION);
    let p = s.profile("linux").unwrap();
    assert_eq!(p.revision, 7);
    assert_eq!(p.demand, crate::domain::DemandSource::Poll);
    assert_eq!(s.host().unwrap().unwrap().capacity, 2);
    // V13: no variables and no required tools until set.
    assert!(p.env.is_empty() && p.tools.is_empty());
    assert!(s.host().unwrap().unwrap().env.is_empty());
    // V5: a target from before has the bound of its day on requests in flight (8);
    // a stored bound is never changed under the user.
    assert_eq!(s.target("octo").unwrap().max_in_flight, 8);
    s.kv_put("after", "migration").unwrap();
}

fn refused_untouched(tag: &str, write: impl FnOnce(&std::path::Path)) -> StoreError {
    let d = TempDir::new(tag);
    std::fs::create_dir_all(&d.0).unwrap();
    let file = d.0.join(DB_FILE);
    write(&file);
    let before = std::fs::read(&file).unwrap();
    let e = SqliteStore::open(&d.0).err().expect("must be refused");
    assert!(
        e.to_string().contains(&file.display().to_string()),
        "{e} must name the file"
    );
    assert_eq!(std::fs::read(&file).unwrap(), before, "{tag}: file changed");
    e
}

#[test]
fn foreign_and_corrupt_files_are_refused_untouched() {
    let e = refused_untouched("text", |f| {
        std::fs::write(f, "hello, not a database\n").unwrap()
    });
    assert!(matches!(e, StoreError::NotOurs { .. }), "{e:?}");

    let e = refused_untouched("foreign", |f| {
        let c = rusqlite::Connection::open(f).unwrap();
        c.execute_batch("CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x');")
            .unwrap();
    });
    assert!(matches!(e, StoreError::NotOurs { .. }), "{e:?}");

    let e = refused_untouched("newer", |f| {
        let c = rusqlite::Connection::open(f).unwrap();
        c.execute_batch(&format!(
            "PRAGMA application_id = {}; PRAGMA user_version = 99; CREATE TABLE x (y);",
            schema::APPLICATION_ID
        ))
        .unwrap();
    });
    assert!(matches!(e, StoreError::TooNew { version: 99, .. }), "{e:?}");

    let e = refused_untouched("corrupt", |f| {
        let d = f.parent().unwrap();
        drop(SqliteStore::open(d).unwrap());
        // Keep the 100-byte header (so it still looks like our SQLite file) and
        // destroy the schema page behind it.
        let mut bytes = std::fs::read(f).unwrap();
        for b in &mut bytes[100..4096] {
            *b = 0xA5;
        }
        std::fs::write(f, bytes).unwrap();
    });
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");

    // Issue 33: a page past the schema damaged in a store an older build wrote: the
    // migration would write to it, so it is checked first and refused untouched.
    let e = refused_untouched("damaged-older", |f| {
        let d = f.parent().unwrap();
        let s = SqliteStore::open(d).unwrap();
        s.connection()
            .execute_batch(
                "CREATE TABLE filler (x BLOB);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
                 INSERT INTO filler SELECT randomblob(200) FROM n;",
            )
            .unwrap();
        drop(s);
        let mut bytes = std::fs::read(f).unwrap();
        let pages = bytes.len() / 4096;
        bytes[(pages / 2) * 4096..(pages / 2 + 1) * 4096].fill(0xA5);
        // user_version, at offset 60 of the header: one version behind.
        let older = (schema::CURRENT_VERSION - 1) as u32;
        bytes[60..64].copy_from_slice(&older.to_be_bytes());
        std::fs::write(f, bytes).unwrap();
    });
    match e {
        StoreError::Corrupt { detail, .. } => assert!(detail.contains("quick_check"), "{detail}"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn a_version_9_store_gains_the_session_rows() {
    let d = TempDir::new("migrate-v9");
    std::fs::create_dir_all(&d.0).unwrap();
    {
        let c = rusqlite::Connection::open(d.0.join(DB_FILE)).unwrap();
        let mut script = format!("PRAGMA application_id = {};", schema::APPLICATION_ID);
        for m in &schema::MIGRATIONS[..9] {
            script.push_str(m);
        }
        script.push_str("PRAGMA user_version = 9;");
        c.execute_batch(&script).unwrap();
        c.execute_batch("INSERT INTO kv VALUES ('scaleset:octo:3:session', 'a1b2-c3d4');")
            .unwrap();
    }
    let s = SqliteStore::open(&d.0).unwrap();
    assert_eq!(s.schema_version().unwrap(), schema::CURRENT_VERSION);
    assert!(s.session_statuses().unwrap().is_empty());
    // What the listener recorded before is untouched.
    assert_eq!(
        s.kv_get("scaleset:octo:3:session").unwrap().as_deref(),
        Some("a1b2-c3d4")
    );
    let row = session_row("linux", crate::domain::SessionPhase::Held, 5);
    s.put_session_status(&row).unwrap();
    assert_eq!(s.session_statuses().unwrap(), vec![row]);
}

#[test]
fn a_version_10_host_gains_the_default_disk_reserve_and_keeps_a_set_one() {
    let d = TempDir::new("migrate-v10");
    std::fs::create_dir_all(&d.0).unwrap();
    {
        let c = rusqlite::Connection::open(d.0.join(DB_FILE)).unwrap();
        let mut script = format!("PRAGMA application_id = {};", schema::APPLICATION_ID);
        for m in &schema::MIGRATIONS[..10] {
            script.push_str(m);
        }
        script.push_str("PRAGMA user_version = 10;");
        script.push_str(
            "INSERT INTO host (one, id, name, os, arch, capacity, draining) \
             VALUES (1, '0123abcd89ef4567', 'h', 'linux', 'x86_64', 3, 0);",
        );
        c.execute_batch(&script).unwrap();
    }
    let s = SqliteStore::open(&d.0).unwrap();
    let mut h = s.host().unwrap().unwrap();
    assert_eq!(h.capacity, 3);
    assert_eq!(
        h.disk_reserve_bytes,
        crate::domain::host::DEFAULT_DISK_RESERVE_BYTES
    );
    h.disk_reserve_bytes = 4 << 20;
    s.update_host(&h).unwrap();
    assert_eq!(s.host().unwrap().unwrap().disk_reserve_bytes, 4 << 20);
}

#[test]
fn rows_as_text_reads_every_table_of_a_store_file() {
    let dir = TempDir::new("rows-as-text");
    {
        let s = SqliteStore::open(&dir.0).unwrap();
        s.host_or_create().unwrap();
        s.add_target(&target("octo-target")).unwrap();
    }
    let rows = SqliteStore::rows_as_text(&dir.0.join(DB_FILE)).unwrap();
    assert!(
        rows.iter()
            .any(|(t, line)| t == "targets" && line.contains("octo-target|")),
        "{rows:?}"
    );
    assert!(rows.iter().any(|(t, _)| t == "host"), "{rows:?}");
    assert!(SqliteStore::rows_as_text(&dir.0.join("nothing.db")).is_err());
}

#[test]
fn a_reset_wal_is_truncated_to_its_limit() {
    let d = TempDir::new("wal-limit");
    std::fs::create_dir_all(&d.0).unwrap();
    let s = SqliteStore::open(&d.0).unwrap();
    let limit: i64 = s
        .connection()
        .query_row("PRAGMA journal_size_limit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(limit as u64, super::sqlite::WAL_SIZE_LIMIT);
}

#[test]
fn a_version_23_roll_up_is_numbered_in_key_order_and_sent_whole() {
    let d = TempDir::new("migrate-v23");
    std::fs::create_dir_all(&d.0).unwrap();
    {
        let c = rusqlite::Connection::open(d.0.join(DB_FILE)).unwrap();
        let mut script = format!("PRAGMA application_id = {};", schema::APPLICATION_ID);
        for m in &schema::MIGRATIONS[..23] {
            script.push_str(m);
        }
        script.push_str("PRAGMA user_version = 23;");
        for (day, repo) in [(20_001, "o/a"), (20_000, "o/b"), (20_000, "o/a")] {
            script.push_str(&format!(
                "INSERT INTO usage_daily (day, repo, workflow, job, profile, runners, jobs, \
                 busy_ms, idle_ms, cpu_ms, peak_rss_bytes, rss_byte_secs, wait_hist) \
                 VALUES ({day}, '{repo}', 'CI', 'build', 'linux', 1, 1, 10, 0, 5, 0, 0, '');"
            ));
        }
        c.execute_batch(&script).unwrap();
    }
    let s = SqliteStore::open(&d.0).unwrap();
    let sent: Vec<(i64, i64, String)> = s
        .usage_changed_after(0, 0, 10)
        .unwrap()
        .into_iter()
        .map(|(n, r)| (n, r.key.day, r.key.repo))
        .collect();
    assert_eq!(
        sent,
        [
            (1, 20_000, "o/a".to_string()),
            (2, 20_000, "o/b".to_string()),
            (3, 20_001, "o/a".to_string())
        ]
    );
}

/// The process's open descriptors of `file`, and whether any of them is deleted.
fn descriptors_of(file: &std::path::Path) -> Vec<String> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|t| t.to_string_lossy().into_owned())
        .filter(|t| t.contains(&name))
        .collect()
}

/// Issue 48: opening a second connection used to open and close `state.db` with
/// `std::fs`, which dropped every POSIX lock the first one held; the real `sqlite3` CLI
/// then found no other user, checkpointed and deleted the WAL under the open
/// connections, whose next writes failed with `disk I/O error` or were lost.
#[test]
fn an_outside_sqlite3_reader_leaves_the_open_connections_their_wal() {
    let d = TempDir::new("outside-reader");
    let a = SqliteStore::open(&d.0).unwrap();
    a.kv_put("before", "1").unwrap();
    // What each worker of the daemon does while the loops hold connections.
    let b = SqliteStore::open(&d.0).unwrap();
    b.kv_put("from-b", "1").unwrap();
    let db = d.0.join(DB_FILE);
    for sql in [
        "select count(*) from kv".to_string(),
        format!(".backup '{}'", d.0.join("copy.db").display()),
    ] {
        let out = std::process::Command::new("sqlite3")
            .arg(&db)
            .arg(&sql)
            .output()
            .expect("the sqlite3 CLI runs (.ci/run installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let held = descriptors_of(&db);
    assert!(
        held.iter().all(|f| !f.contains("(deleted)")),
        "this process holds deleted store files: {held:?}"
    );
    a.kv_put("after", "1").unwrap();
    b.kv_put("after-b", "1").unwrap();
    drop((a, b));
    let c = SqliteStore::open(&d.0).unwrap();
    for k in ["before", "from-b", "after", "after-b"] {
        assert_eq!(c.kv_get(k).unwrap().as_deref(), Some("1"), "{k} was lost");
    }
}
