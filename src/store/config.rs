//! The configuration books: this host, targets and profiles (with revision checks).

use super::error::{Result, StoreError};
use super::rows::{self, PROFILE_COLUMNS, TARGET_COLUMNS, sql_u64, to_json};
use crate::domain::{Host, ScalePolicy, Target, UidRange, host};
use rusqlite::{Connection, OptionalExtension, Row, params};

pub fn host(c: &Connection) -> Result<Option<Host>> {
    Ok(c.query_row(
        "SELECT id, name, os, arch, capacity, coordinator, coordinator_token_file, draining, \
         isolation, runner_uids, coordinator_ca_file, coordinator_insecure, retention_secs, \
         logs_max_bytes, disk_reserve_bytes, env, runner_version, runtime_root, cache_cap_bytes \
         FROM host WHERE one = 1",
        [],
        |r| {
            Ok(Host {
                id: r.get(0)?,
                name: r.get(1)?,
                os: r.get(2)?,
                arch: r.get(3)?,
                capacity: r.get(4)?,
                coordinator: r.get(5)?,
                coordinator_token_file: r.get::<_, Option<String>>(6)?.map(Into::into),
                coordinator_ca_file: r.get::<_, Option<String>>(10)?.map(Into::into),
                coordinator_insecure: r.get(11)?,
                draining: r.get(7)?,
                isolation: rows::isolation(&r.get::<_, String>(8)?),
                runner_uids: r
                    .get::<_, Option<String>>(9)?
                    .and_then(|s| UidRange::parse(&s).ok()),
                retention_secs: r.get::<_, i64>(12)?.max(1) as u64,
                logs_max_bytes: r.get::<_, i64>(13)?.max(0) as u64,
                disk_reserve_bytes: r.get::<_, i64>(14)?.max(0) as u64,
                // Read leniently, as `isolation` is: the host row must always load.
                env: serde_json::from_str(&r.get::<_, String>(15)?).unwrap_or_default(),
                runner_version: r.get(16)?,
                runtime_root: r.get::<_, Option<String>>(17)?.map(Into::into),
                cache_cap_bytes: r.get::<_, i64>(18)?.max(0) as u64,
            })
        },
    )
    .optional()?)
}

pub fn host_or_create(c: &Connection, new_id: impl FnOnce() -> Result<String>) -> Result<Host> {
    if let Some(h) = host(c)? {
        return Ok(h);
    }
    let h = Host::new(
        new_id()?,
        hostname(),
        host::current_os(),
        host::current_arch(),
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    );
    // OR IGNORE: if another process created the host meanwhile, its row wins and we
    // read it back, so every process agrees on one id. The machine the id is drawn on
    // is kept with it (`domain::identity`).
    c.execute(
        "INSERT OR IGNORE INTO host (one, id, name, os, arch, capacity, draining, machine_id) \
         VALUES (1, ?1, ?2, ?3, ?4, ?5, 0, ?6)",
        params![
            h.id,
            h.name,
            h.os,
            h.arch,
            h.capacity,
            crate::runner::machine::current()
        ],
    )?;
    host(c)?.ok_or_else(|| rows::bad("host", "vanished after insert"))
}

/// The host row and the key-value rows kept beside it (`None` deletes one), in one
/// transaction: an edit is written whole or not at all.
pub fn update_host_settings(
    c: &Connection,
    h: &Host,
    beside: &[(&str, Option<&str>)],
) -> Result<()> {
    let tx = rows::write_tx(c)?;
    update_host(&tx, h)?;
    for (key, value) in beside {
        match value {
            Some(v) => super::live::kv_put(&tx, key, v)?,
            None => super::live::kv_delete(&tx, key)?,
        }
    }
    tx.commit()?;
    Ok(())
}

pub fn update_host(c: &Connection, h: &Host) -> Result<()> {
    let n = c.execute(
        "UPDATE host SET capacity = ?1, coordinator = ?2, coordinator_token_file = ?3, \
         draining = ?4, isolation = ?5, runner_uids = ?6, coordinator_ca_file = ?7, \
         coordinator_insecure = ?8, retention_secs = ?9, logs_max_bytes = ?10, \
         disk_reserve_bytes = ?11, env = ?12, runner_version = ?13, runtime_root = ?14, \
         cache_cap_bytes = ?15 WHERE one = 1",
        params![
            h.capacity,
            h.coordinator,
            h.coordinator_token_file
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
            h.draining,
            h.isolation.as_str(),
            h.runner_uids.map(|r| r.to_string()),
            h.coordinator_ca_file
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
            h.coordinator_insecure,
            rows::sql_u64(h.retention_secs),
            rows::sql_u64(h.logs_max_bytes),
            rows::sql_u64(h.disk_reserve_bytes),
            rows::to_json(&h.env),
            h.runner_version,
            h.runtime_root
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
            rows::sql_u64(h.cache_cap_bytes)
        ],
    )?;
    if n == 0 {
        return Err(not_found("host", &h.id));
    }
    Ok(())
}

pub fn set_draining(c: &Connection, draining: bool) -> Result<()> {
    if c.execute("UPDATE host SET draining = ?1 WHERE one = 1", [draining])? == 0 {
        return Err(not_found("host", "this host"));
    }
    Ok(())
}

/// The machine's hostname, or `localhost` when it cannot be read.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
    // when the name fits, and we stop at the first NUL or the end regardless.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match String::from_utf8_lossy(&buf[..end]).trim() {
        "" => "localhost".into(),
        s => s.to_string(),
    }
}

fn not_found(what: &'static str, name: &str) -> StoreError {
    StoreError::NotFound {
        what,
        name: name.into(),
    }
}

/// The one row `sql` (with its name parameter `?1`) selects, mapped by `map`; the
/// `NotFound` error names `what` and `name` when there is none.
fn one_by_name<T>(
    c: &Connection,
    sql: &str,
    what: &'static str,
    name: &str,
    map: fn(&Row<'_>) -> Result<T>,
) -> Result<T> {
    let mut st = c.prepare_cached(sql)?;
    let mut rs = st.query([name])?;
    match rs.next()? {
        Some(r) => map(r),
        None => Err(not_found(what, name)),
    }
}

/// Every row `sql` (without parameters) selects, mapped by `map`, in its order.
fn all<T>(c: &Connection, sql: &str, map: fn(&Row<'_>) -> Result<T>) -> Result<Vec<T>> {
    let mut st = c.prepare_cached(sql)?;
    let mut rs = st.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rs.next()? {
        out.push(map(r)?);
    }
    Ok(out)
}

/// A target's values in `TARGET_COLUMNS` order, bound as `?1` to `?8` (a
/// `secondary_limit` of none is stored as 0).
fn target_params(t: &Target) -> (&str, String, &str, String, i64, String, i64, i64) {
    (
        &t.name,
        to_json(&t.scope),
        &t.api_url,
        to_json(&t.credential),
        sql_u64(t.poll_interval_secs),
        to_json(&t.repos),
        i64::from(t.max_in_flight),
        i64::from(t.secondary_limit.unwrap_or(0)),
    )
}

pub fn add_target(c: &Connection, t: &Target) -> Result<()> {
    let n = c.execute(
        "INSERT OR IGNORE INTO targets (name, scope, api_url, credential, poll_interval_secs, repos, \
         max_in_flight, secondary_limit) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        target_params(t),
    )?;
    if n == 0 {
        return Err(StoreError::Exists {
            what: "target",
            name: t.name.clone(),
        });
    }
    Ok(())
}

pub fn target(c: &Connection, name: &str) -> Result<Target> {
    one_by_name(
        c,
        &format!("SELECT {TARGET_COLUMNS} FROM targets WHERE name = ?1"),
        "target",
        name,
        rows::target,
    )
}

pub fn targets(c: &Connection) -> Result<Vec<Target>> {
    all(
        c,
        &format!("SELECT {TARGET_COLUMNS} FROM targets ORDER BY name"),
        rows::target,
    )
}

pub fn update_target(c: &Connection, t: &Target) -> Result<()> {
    let n = c.execute(
        "UPDATE targets SET scope = ?2, api_url = ?3, credential = ?4, poll_interval_secs = ?5, \
         repos = ?6, max_in_flight = ?7, secondary_limit = ?8 WHERE name = ?1",
        target_params(t),
    )?;
    if n == 0 {
        return Err(not_found("target", &t.name));
    }
    Ok(())
}

pub fn remove_target(c: &Connection, name: &str) -> Result<()> {
    let tx = rows::write_tx(c)?;
    let users: Vec<String> = tx
        .prepare("SELECT name FROM profiles WHERE target = ?1 ORDER BY name")?
        .query_map([name], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !users.is_empty() {
        return Err(StoreError::InUse {
            what: "target",
            name: name.into(),
            users: format!("profiles {}", users.join(", ")),
            hint: "remove those profiles first (profile rm NAME)",
        });
    }
    if tx.execute("DELETE FROM targets WHERE name = ?1", [name])? == 0 {
        return Err(not_found("target", name));
    }
    tx.execute("DELETE FROM etags WHERE target = ?1", [name])?;
    let (runners, times) = super::daemon_facts::target_keys(name);
    tx.execute(
        "DELETE FROM kv WHERE key = ?1 OR substr(key, 1, length(?2)) = ?2",
        [runners, times],
    )?;
    tx.commit()?;
    Ok(())
}

fn profile_params(p: &ScalePolicy) -> [Box<dyn rusqlite::ToSql + '_>; 29] {
    [
        Box::new(&p.name),
        Box::new(&p.target),
        Box::new(&p.host_id),
        Box::new(to_json(&p.labels)),
        Box::new(p.default_labels),
        Box::new(p.min_capacity),
        Box::new(p.max_capacity),
        Box::new(
            p.runner_dir
                .as_ref()
                .map(|d| d.to_string_lossy().into_owned()),
        ),
        Box::new(&p.runner_group),
        Box::new(sql_u64(p.idle_timeout_secs)),
        Box::new(sql_u64(p.bootstrap_timeout_secs)),
        Box::new(p.job_timeout_secs.map(sql_u64)),
        Box::new(p.mode.as_str()),
        Box::new(p.active),
        Box::new(p.allow_public),
        Box::new(&p.run_as),
        Box::new(p.demand.as_str()),
        Box::new(p.memory_max.map(sql_u64)),
        Box::new(p.cpu_max),
        Box::new(p.pids_max),
        Box::new(to_json(&p.env)),
        Box::new(p.tools.join(",")),
        Box::new(p.execution.as_str()),
        Box::new(&p.image),
        Box::new(p.disk_max.map(sql_u64)),
        Box::new(p.caches),
        Box::new(p.workspace.as_str()),
        Box::new(p.limits.as_str()),
        Box::new(p.rerun_lost.unwrap_or(0)),
    ]
}

pub fn add_profile(c: &Connection, p: &ScalePolicy) -> Result<ScalePolicy> {
    let tx = rows::write_tx(c)?;
    // The foreign key would refuse an unknown target too, but with an error that
    // cannot say which target; check first, inside the same transaction.
    target(&tx, &p.target)?;
    let exists: bool = tx
        .query_row("SELECT 1 FROM profiles WHERE name = ?1", [&p.name], |_| {
            Ok(true)
        })
        .optional()?
        .is_some();
    if exists {
        return Err(StoreError::Exists {
            what: "profile",
            name: p.name.clone(),
        });
    }
    let values = profile_params(p);
    let mut args: Vec<&dyn rusqlite::ToSql> = values.iter().map(|b| b.as_ref()).collect();
    args.push(&1i64);
    tx.execute(
        &format!(
            "INSERT INTO profiles ({PROFILE_COLUMNS}) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
             ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)"
        ),
        args.as_slice(),
    )?;
    let stored = profile(&tx, &p.name)?;
    tx.commit()?;
    Ok(stored)
}

pub fn profile(c: &Connection, name: &str) -> Result<ScalePolicy> {
    one_by_name(
        c,
        &format!("SELECT {PROFILE_COLUMNS} FROM profiles WHERE name = ?1"),
        "profile",
        name,
        rows::profile,
    )
}

pub fn profiles(c: &Connection) -> Result<Vec<ScalePolicy>> {
    all(
        c,
        &format!("SELECT {PROFILE_COLUMNS} FROM profiles ORDER BY name"),
        rows::profile,
    )
}

pub fn update_profile(c: &Connection, p: &ScalePolicy, expected: u64) -> Result<u64> {
    let tx = rows::write_tx(c)?;
    if p.target != profile(&tx, &p.name)?.target {
        target(&tx, &p.target)?;
    }
    let values = profile_params(p);
    let mut args: Vec<&dyn rusqlite::ToSql> = values.iter().map(|b| b.as_ref()).collect();
    let expected_sql = sql_u64(expected);
    args.push(&expected_sql);
    // The revision check and the write are one statement: no other writer can come
    // between them.
    let n = tx.execute(
        "UPDATE profiles SET target = ?2, host_id = ?3, labels = ?4, default_labels = ?5, \
         min_capacity = ?6, max_capacity = ?7, runner_dir = ?8, runner_group = ?9, \
         idle_timeout_secs = ?10, bootstrap_timeout_secs = ?11, job_timeout_secs = ?12, \
         mode = ?13, active = ?14, allow_public = ?15, run_as = ?16, demand = ?17, \
         memory_max = ?18, cpu_max = ?19, pids_max = ?20, env = ?21, tools = ?22, \
         execution = ?23, image = ?24, disk_max = ?25, caches = ?26, workspace = ?27, \
         limits = ?28, rerun_lost = ?29, revision = revision + 1 WHERE name = ?1 \
         AND revision = ?30",
        args.as_slice(),
    )?;
    if n == 0 {
        let actual = profile(&tx, &p.name)?.revision;
        return Err(StoreError::StaleRevision {
            name: p.name.clone(),
            expected,
            actual,
        });
    }
    tx.commit()?;
    Ok(expected + 1)
}

pub fn remove_profile(c: &Connection, name: &str) -> Result<()> {
    let tx = rows::write_tx(c)?;
    profile(&tx, name)?;
    let live: i64 = tx.query_row(
        "SELECT count(*) FROM attempts WHERE profile = ?1 AND cleaned = 0 \
         AND state IN ('pending', 'starting', 'idle', 'busy')",
        [name],
        |r| r.get(0),
    )?;
    if live > 0 {
        return Err(StoreError::InUse {
            what: "profile",
            name: name.into(),
            users: format!(
                "{live} live {}",
                if live == 1 { "attempt" } else { "attempts" }
            ),
            hint: "pause it and wait for its runners to finish, or drain",
        });
    }
    tx.execute("DELETE FROM profiles WHERE name = ?1", [name])?;
    tx.execute("DELETE FROM profile_status WHERE profile = ?1", [name])?;
    tx.execute("DELETE FROM scaleset_sessions WHERE profile = ?1", [name])?;
    tx.commit()?;
    Ok(())
}
