//! The schema: one SQL script per version, applied forward in order through
//! `PRAGMA user_version`, and the checks that tell our file from anyone else's.

use super::error::{Result, StoreError};
use rusqlite::Connection;
use std::path::Path;

/// `PRAGMA application_id` of every runner-manager store: "RMgr" in ASCII. A SQLite
/// file without it is someone else's and is never touched.
pub const APPLICATION_ID: i64 = 0x524D_6772;

/// `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17, V18, V19, V20, V21,
    V22, V23, V24, V25, V26, V27, V28,
];

/// The schema version this build writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// Version 1: the books (host, targets, profiles, the attempt ledger and its events).
pub const V1: &str = r#"
CREATE TABLE host (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    os TEXT NOT NULL,
    arch TEXT NOT NULL,
    capacity INTEGER NOT NULL CHECK (capacity >= 1),
    coordinator TEXT,
    coordinator_token_file TEXT,
    draining INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE targets (
    name TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    api_url TEXT NOT NULL,
    credential TEXT NOT NULL,
    poll_interval_secs INTEGER NOT NULL,
    repos TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE profiles (
    name TEXT PRIMARY KEY,
    target TEXT NOT NULL REFERENCES targets(name),
    host_id TEXT NOT NULL,
    labels TEXT NOT NULL,
    default_labels INTEGER NOT NULL,
    min_capacity INTEGER NOT NULL,
    max_capacity INTEGER NOT NULL,
    runner_dir TEXT,
    runner_group TEXT,
    idle_timeout_secs INTEGER NOT NULL,
    bootstrap_timeout_secs INTEGER NOT NULL,
    job_timeout_secs INTEGER,
    mode TEXT NOT NULL,
    active INTEGER NOT NULL,
    allow_public INTEGER NOT NULL,
    run_as TEXT,
    revision INTEGER NOT NULL
);
CREATE INDEX profiles_by_target ON profiles(target);
-- AUTOINCREMENT: an attempt id names a runner, so an id is never given twice, not
-- even after the newest attempts were pruned.
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    profile TEXT NOT NULL,
    target TEXT NOT NULL,
    host_id TEXT NOT NULL,
    runner_name TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    reason TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    ended_at INTEGER,
    pid INTEGER,
    pid_start INTEGER,
    exit_code INTEGER,
    runner_id INTEGER,
    job_name TEXT,
    job_id INTEGER,
    job_queued_at INTEGER,
    lease_id TEXT,
    peak_rss_bytes INTEGER,
    cpu_millis INTEGER,
    cleaned INTEGER NOT NULL DEFAULT 0,
    cleanup_tries INTEGER NOT NULL DEFAULT 0,
    next_cleanup_at INTEGER
);
-- Partial indexes over the attempts not yet cleaned: what every daemon pass reads.
-- They stay as small as the live set however long the history grows.
CREATE INDEX attempts_open_by_host ON attempts(host_id, id) WHERE cleaned = 0;
CREATE INDEX attempts_open_by_profile ON attempts(profile, id) WHERE cleaned = 0;
CREATE INDEX attempts_by_profile ON attempts(profile, id);
CREATE INDEX attempts_cleaned_by_age ON attempts(updated_at) WHERE cleaned = 1;
CREATE TABLE attempt_events (
    attempt_id INTEGER NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (attempt_id, seq)
) WITHOUT ROWID;
"#;

/// Version 2: the profile's demand source, and what the daemon reports as it runs
/// (live status rows, its heartbeat, time series, module key/values).
pub const V2: &str = r#"
ALTER TABLE profiles ADD COLUMN demand TEXT NOT NULL DEFAULT 'poll';
CREATE TABLE profile_status (
    profile TEXT PRIMARY KEY,
    demand INTEGER NOT NULL,
    limiting TEXT NOT NULL,
    last_error TEXT,
    updated_at INTEGER NOT NULL
);
CREATE TABLE target_status (
    target TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    last_error TEXT,
    rate_limit_remaining INTEGER,
    updated_at INTEGER NOT NULL
);
CREATE TABLE daemon (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    version TEXT NOT NULL
);
CREATE TABLE queue_samples (
    profile TEXT NOT NULL,
    at INTEGER NOT NULL,
    queued INTEGER NOT NULL,
    live INTEGER NOT NULL
);
CREATE INDEX queue_samples_by_at ON queue_samples(at);
CREATE INDEX queue_samples_by_profile ON queue_samples(profile, at);
CREATE TABLE latency_samples (
    profile TEXT NOT NULL,
    at INTEGER NOT NULL,
    latency_ms INTEGER NOT NULL
);
CREATE INDEX latency_samples_by_at ON latency_samples(at);
CREATE INDEX latency_samples_by_profile ON latency_samples(profile, at);
CREATE TABLE kv (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#;

/// Version 3: the coordinator's books (in a coordinator's own state directory): the
/// hosts allowed to connect with their token hashes and last reported state, and the
/// jobs it placed with their current lease. A host's store leaves them empty.
pub const V3: &str = r#"
CREATE TABLE coord_hosts (
    name TEXT PRIMARY KEY,
    token_hash BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    connected INTEGER NOT NULL DEFAULT 0,
    version INTEGER,
    host_id TEXT,
    os TEXT,
    arch TEXT,
    capacity INTEGER,
    free INTEGER,
    draining INTEGER NOT NULL DEFAULT 0,
    unfit TEXT NOT NULL DEFAULT '[]',
    covered TEXT NOT NULL DEFAULT '[]',
    profiles TEXT NOT NULL DEFAULT '[]',
    open_leases INTEGER NOT NULL DEFAULT 0,
    started INTEGER NOT NULL DEFAULT 0,
    finished INTEGER NOT NULL DEFAULT 0,
    refusals INTEGER NOT NULL DEFAULT 0,
    last_seen_at INTEGER
);
CREATE TABLE coord_jobs (
    job_key TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    repo TEXT NOT NULL,
    name TEXT NOT NULL,
    labels TEXT NOT NULL,
    queued_at INTEGER NOT NULL,
    phase TEXT NOT NULL,
    lease_id TEXT,
    host TEXT,
    profile TEXT,
    runner_name TEXT,
    expires_at INTEGER,
    placements INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
"#;

/// Version 4: containment. The host's `isolation` and `runner_uids`, each profile's
/// cgroup limits, and the uid and gid each attempt's runner runs under (chosen with
/// the intent, so a crash never leaves a runner whose uid the books do not know).
pub const V4: &str = r#"
ALTER TABLE host ADD COLUMN isolation TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE host ADD COLUMN runner_uids TEXT;
ALTER TABLE profiles ADD COLUMN memory_max INTEGER;
ALTER TABLE profiles ADD COLUMN cpu_max INTEGER;
ALTER TABLE profiles ADD COLUMN pids_max INTEGER;
ALTER TABLE attempts ADD COLUMN runner_uid INTEGER;
ALTER TABLE attempts ADD COLUMN runner_gid INTEGER;
"#;

/// Version 5: each target's bound on requests in flight per credential (`target set
/// NAME max_in_flight=N`); targets from before get 8, the default of that day (new
/// targets get `DEFAULT_MAX_IN_FLIGHT`; a stored bound is never raised under the user).
pub const V5: &str = r#"
ALTER TABLE targets ADD COLUMN max_in_flight INTEGER NOT NULL DEFAULT 8;
"#;

/// Version 6: live meters. One row per attempt not yet cleaned, upserted while its
/// runner lives (so the attempt row is not rewritten every few seconds), and a ring of
/// at most `meter::live::RING_SLOTS` recent points per attempt for the sparkline. Both
/// go when the attempt is cleaned (and with it, through the cascade).
pub const V6: &str = r#"
CREATE TABLE attempt_meters (
    attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id) ON DELETE CASCADE,
    at INTEGER NOT NULL,
    rss_bytes INTEGER NOT NULL,
    peak_rss_bytes INTEGER NOT NULL,
    cpu_millis INTEGER NOT NULL,
    cpu_percent REAL NOT NULL,
    processes INTEGER NOT NULL
);
CREATE TABLE attempt_meter_ring (
    attempt_id INTEGER NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
    slot INTEGER NOT NULL,
    at INTEGER NOT NULL,
    rss_bytes INTEGER NOT NULL,
    cpu_percent REAL NOT NULL,
    PRIMARY KEY (attempt_id, slot)
) WITHOUT ROWID;
"#;

/// Version 7: how a host reaches its coordinator safely: a private CA for `wss://`
/// (`coordinator_ca_file`) and the owner's opt-in to plain `ws://` off loopback
/// (`coordinator_insecure`; hosts from before have not opted in).
pub const V7: &str = r#"
ALTER TABLE host ADD COLUMN coordinator_ca_file TEXT;
ALTER TABLE host ADD COLUMN coordinator_insecure INTEGER NOT NULL DEFAULT 0;
"#;

/// Version 8: each pool host's live runners, added up per profile, as its last status
/// report said (a JSON object of profile → meters; `{}` before any report).
pub const V8: &str = r#"
ALTER TABLE coord_hosts ADD COLUMN meters TEXT NOT NULL DEFAULT '{}';
"#;

/// Version 9: what the host keeps (`host set retention=14d logs_max=1G`).
pub const V9: &str = r#"
ALTER TABLE host ADD COLUMN retention_secs INTEGER NOT NULL DEFAULT 1209600;
ALTER TABLE host ADD COLUMN logs_max_bytes INTEGER NOT NULL DEFAULT 1073741824;
"#;

/// Version 10: each scale set profile's message session as its listener last saw it,
/// one row per profile, overwritten (never a log): the session held and since when,
/// the last message and poll, and while it is not held, why and until when. The
/// session's id only; its queue token is never stored.
pub const V10: &str = r#"
CREATE TABLE scaleset_sessions (
    profile TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    phase TEXT NOT NULL,
    scale_set_id INTEGER,
    session_id TEXT,
    held_since INTEGER,
    last_message_id INTEGER,
    last_message_at INTEGER,
    last_poll_at INTEGER,
    reason TEXT,
    retry_at INTEGER,
    updated_at INTEGER NOT NULL
);
"#;

/// Version 11 (issue 20): each target's conditional-request validators, so a restart
/// costs what a poll costs; and the rate-limit budget as `status` shows it.
pub const V11: &str = r#"
CREATE TABLE etags (
    target TEXT NOT NULL,
    url TEXT NOT NULL,
    etag TEXT NOT NULL,
    body BLOB NOT NULL,
    link TEXT,
    PRIMARY KEY (target, url)
) WITHOUT ROWID;
ALTER TABLE target_status ADD COLUMN rate_limit_limit INTEGER;
ALTER TABLE target_status ADD COLUMN rate_limit_reset INTEGER;
ALTER TABLE target_status ADD COLUMN poll_every_ms INTEGER;
"#;

/// Version 12: the free space the state directory keeps (`host set disk_reserve=`):
/// under it the daemon starts no runners.
pub const V12: &str = r#"
ALTER TABLE host ADD COLUMN disk_reserve_bytes INTEGER NOT NULL DEFAULT 268435456;
"#;

/// Version 13 (issue 21, 22): the variables runners get, the host's and each
/// profile's (a JSON object of name → value), and the tools a profile's jobs need on
/// the runner's `PATH` (comma-joined program names).
pub const V13: &str = r#"
ALTER TABLE host ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
ALTER TABLE profiles ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
ALTER TABLE profiles ADD COLUMN tools TEXT NOT NULL DEFAULT '';
"#;

/// Version 14: the runner version the daemon keeps its managed installs at (`host set
/// runner_version=`); NULL is the newest the downloads API lists.
pub const V14: &str = r#"
ALTER TABLE host ADD COLUMN runner_version TEXT;
"#;

/// Version 15 (issue 21): how a profile's runners execute (`native` or `oci`), the
/// image an `oci` runner's container runs (pinned by digest) and its disk limit.
pub const V15: &str = r#"
ALTER TABLE profiles ADD COLUMN execution TEXT NOT NULL DEFAULT 'native';
ALTER TABLE profiles ADD COLUMN image TEXT;
ALTER TABLE profiles ADD COLUMN disk_max INTEGER;
"#;

/// Version 16 (issue 21): where runner roots, caches and kept workspaces live and the caches'
/// cap (host); a profile's caches and workspace; each attempt's slot of its target (the
/// lease of a cache slot and a kept workspace, held until the attempt is cleaned, so
/// no two open attempts of a target ever hold one) and whether it keeps its `_work`.
pub const V16: &str = r#"
ALTER TABLE host ADD COLUMN runtime_root TEXT;
ALTER TABLE host ADD COLUMN cache_cap_bytes INTEGER NOT NULL DEFAULT 10737418240;
ALTER TABLE profiles ADD COLUMN caches INTEGER;
ALTER TABLE profiles ADD COLUMN workspace TEXT NOT NULL DEFAULT 'disposable';
ALTER TABLE attempts ADD COLUMN slot INTEGER;
ALTER TABLE attempts ADD COLUMN keeps_work INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX attempts_slot_lease ON attempts (target, slot)
    WHERE cleaned = 0 AND slot IS NOT NULL;
"#;

/// Version 17 (issue 31): whether a profile's limits must be in effect for its
/// runners to start (`required`) or may go unenforced (`best-effort`).
pub const V17: &str = r#"
ALTER TABLE profiles ADD COLUMN limits TEXT NOT NULL DEFAULT 'required';
"#;

/// Version 18 (issue 32): an attempt's reason kept as data, its kind's word and its
/// detail, beside the text people read (kept for older builds and scripts). A row an
/// older build wrote has only the text, read back with `Reason::parse`.
pub const V18: &str = r#"
ALTER TABLE attempts ADD COLUMN reason_kind TEXT;
ALTER TABLE attempts ADD COLUMN reason_detail TEXT;
"#;

/// Version 19 (issue 35): whose job each attempt ran (the repository, workflow, job,
/// run and run attempt, from the source that said), its mean RSS, and whether its
/// figures were added to the daily usage roll-up; and the roll-up itself, one row per
/// day, repository, workflow, job name and profile, kept past the attempts'
/// retention. Attempts that ended before this version are not rolled up (no source
/// named their owner).
pub const V19: &str = r#"
ALTER TABLE attempts ADD COLUMN owner_repo TEXT;
ALTER TABLE attempts ADD COLUMN owner_workflow TEXT;
ALTER TABLE attempts ADD COLUMN owner_job TEXT;
ALTER TABLE attempts ADD COLUMN owner_run_id INTEGER;
ALTER TABLE attempts ADD COLUMN owner_run_attempt INTEGER;
ALTER TABLE attempts ADD COLUMN owner_job_id INTEGER;
ALTER TABLE attempts ADD COLUMN owner_queued_at INTEGER;
ALTER TABLE attempts ADD COLUMN owner_source TEXT;
ALTER TABLE attempts ADD COLUMN mean_rss_bytes INTEGER;
ALTER TABLE attempts ADD COLUMN rolled_up INTEGER NOT NULL DEFAULT 0;
UPDATE attempts SET rolled_up = 1 WHERE ended_at IS NOT NULL;
CREATE TABLE usage_daily (
    day INTEGER NOT NULL,
    repo TEXT NOT NULL,
    workflow TEXT NOT NULL,
    job TEXT NOT NULL,
    profile TEXT NOT NULL,
    runners INTEGER NOT NULL,
    jobs INTEGER NOT NULL,
    busy_ms INTEGER NOT NULL,
    idle_ms INTEGER NOT NULL,
    cpu_ms INTEGER NOT NULL,
    peak_rss_bytes INTEGER NOT NULL,
    rss_byte_secs INTEGER NOT NULL,
    wait_hist TEXT NOT NULL,
    lost INTEGER NOT NULL DEFAULT 0,
    reruns INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, repo, workflow, job, profile)
) WITHOUT ROWID;
"#;

/// Version 20: what a target's last error says of it, as a word beside its text
/// (`domain::status::ErrorKind`), so that `service status` judges the credential
/// without reading the text.
pub const V20: &str = r#"
ALTER TABLE target_status ADD COLUMN error_kind TEXT;
"#;

/// Version 21: the points a minute per endpoint a target's GitHub allows before its
/// secondary limit (`target set NAME secondary_limit=N|off`; 0 is off, for a GitHub
/// Enterprise Server whose admin turned them off). Every target before had GitHub's 900.
pub const V21: &str = r#"
ALTER TABLE targets ADD COLUMN secondary_limit INTEGER NOT NULL DEFAULT 900;
"#;

/// Version 22: each pool host's last refusal of a launch, its reason word and when
/// (the Pool pane and `coordinator hosts` say why a launch was refused).
pub const V22: &str = r#"
ALTER TABLE coord_hosts ADD COLUMN last_refusal TEXT;
ALTER TABLE coord_hosts ADD COLUMN last_refusal_at INTEGER;
"#;

/// Version 23: jobs lost to the host and their re-runs (issue 34): a row per lost job,
/// written as the attempt that lost it ends, unique by repository, run and job name
/// (a re-run keeps all three, so a job is never re-run twice), and each profile's
/// `rerun_lost` (re-runs an hour; 0 is off, every profile before).
pub const V23: &str = r#"
ALTER TABLE profiles ADD COLUMN rerun_lost INTEGER NOT NULL DEFAULT 0;
CREATE TABLE reruns (
    attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id) ON DELETE CASCADE,
    target TEXT NOT NULL,
    profile TEXT NOT NULL,
    runner_name TEXT NOT NULL,
    repo TEXT,
    run_id INTEGER,
    job_name TEXT,
    job_id INTEGER,
    loss TEXT NOT NULL,
    lost_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    detail TEXT,
    done_at INTEGER,
    UNIQUE (repo, run_id, job_name)
);
CREATE INDEX reruns_due ON reruns(target, state, next_at);
"#;

/// Version 24: the usage roll-up across a pool (issue 35, item 6). Each roll-up row
/// gets a sequence number, the next at every write (the rows before it numbered in
/// key order), so a host sends its coordinator the rows changed since the last it
/// took; a coordinator keeps its hosts' rows, one per host, day and key, and the
/// number each host's rows resume after.
pub const V24: &str = r#"
ALTER TABLE usage_daily ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE usage_daily SET seq = x.n FROM (
    SELECT day AS d, repo AS r, workflow AS w, job AS j, profile AS p,
           row_number() OVER (ORDER BY day, repo, workflow, job, profile) AS n
    FROM usage_daily
) AS x
WHERE usage_daily.day = x.d AND usage_daily.repo = x.r AND usage_daily.workflow = x.w
  AND usage_daily.job = x.j AND usage_daily.profile = x.p;
CREATE INDEX usage_daily_seq ON usage_daily(seq);
CREATE TABLE coord_usage (
    host TEXT NOT NULL,
    day INTEGER NOT NULL,
    repo TEXT NOT NULL,
    workflow TEXT NOT NULL,
    job TEXT NOT NULL,
    profile TEXT NOT NULL,
    runners INTEGER NOT NULL,
    jobs INTEGER NOT NULL,
    busy_ms INTEGER NOT NULL,
    idle_ms INTEGER NOT NULL,
    cpu_ms INTEGER NOT NULL,
    peak_rss_bytes INTEGER NOT NULL,
    rss_byte_secs INTEGER NOT NULL,
    wait_hist TEXT NOT NULL,
    lost INTEGER NOT NULL,
    reruns INTEGER NOT NULL,
    PRIMARY KEY (host, day, repo, workflow, job, profile)
) WITHOUT ROWID;
CREATE INDEX coord_usage_day ON coord_usage(day);
CREATE TABLE coord_usage_cursors (
    host TEXT PRIMARY KEY,
    host_id TEXT NOT NULL,
    seq INTEGER NOT NULL
);
"#;

/// Version 26 (issue 48): the machine id (`/etc/machine-id`) the host id was drawn
/// on, so a daemon started on a copy of the store on another machine can tell; NULL
/// until a process that can read this machine's id records it.
pub const V26: &str = r#"
ALTER TABLE host ADD COLUMN machine_id TEXT;
"#;

/// Version 27: webhook deliveries taken (issue 48): each signed `workflow_job`
/// delivery's body digest and `X-GitHub-Delivery` id (128 bits of SHA-256 each), kept
/// past GitHub's redelivery window so that a replay, even across a restart, is
/// answered without effect (`store::deliveries`). Self-contained: it only adds its
/// own table.
pub const V27: &str = r#"
CREATE TABLE webhook_deliveries (
    digest BLOB PRIMARY KEY,
    guid BLOB,
    seen_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX webhook_deliveries_guid ON webhook_deliveries(guid);
CREATE INDEX webhook_deliveries_seen ON webhook_deliveries(seen_at);
"#;

/// Version 28 (issue 50): each pool host's binary version as its `hello` said it
/// (NULL for a host before the field, or one not yet connected), so `coordinator
/// hosts` shows how far an upgrade has gone. Self-contained: one column of its own.
pub const V28: &str = r#"
ALTER TABLE coord_hosts ADD COLUMN binary_version TEXT;
"#;

/// What the header of an opened file says, before anything is written to it.
pub enum Found {
    /// A brand-new, empty database: ours to initialize.
    Empty,
    /// A runner-manager store at this schema version.
    Ours(i64),
}

/// Reads `application_id`, `user_version` and the table count, and refuses anything
/// that is not an empty file or a store of ours that this build can read.
pub fn inspect(conn: &Connection, path: &Path) -> Result<Found> {
    let classify = |e: rusqlite::Error| classify_open_error(e, path);
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(classify)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(classify)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(classify)?;
    if app == 0 && version == 0 && tables == 0 {
        return Ok(Found::Empty);
    }
    if app != APPLICATION_ID {
        return Err(StoreError::NotOurs {
            path: path.to_path_buf(),
            detail: format!("a SQLite database with application_id {app:#x}"),
        });
    }
    if version > CURRENT_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            version,
            supported: CURRENT_VERSION,
        });
    }
    Ok(Found::Ours(version))
}

/// Applies the migrations this file still needs, each in its own write transaction
/// together with its `user_version` bump, so a crash leaves the file at one version or
/// the next. The version is read again inside each transaction: two processes opening
/// a new store at once migrate it once.
pub fn migrate(conn: &Connection) -> Result<()> {
    loop {
        let tx = super::rows::write_tx(conn)?;
        let v: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if v >= CURRENT_VERSION {
            return Ok(());
        }
        if v == 0 {
            tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID};"))?;
        }
        tx.execute_batch(MIGRATIONS[v as usize])?;
        tx.execute_batch(&format!("PRAGMA user_version = {};", v + 1))?;
        tx.commit()?;
    }
}

/// Maps SQLite's errors on a file it cannot read into our words: a file that does not
/// even start like SQLite is not ours; one that does but is damaged is corrupt.
pub fn classify_open_error(e: rusqlite::Error, path: &Path) -> StoreError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            let header = sqlite_header(path);
            if header {
                StoreError::Corrupt {
                    path: path.to_path_buf(),
                    detail: "damaged SQLite header".into(),
                }
            } else {
                StoreError::NotOurs {
                    path: path.to_path_buf(),
                    detail: "not a SQLite database".into(),
                }
            }
        }
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StoreError::Locked {
            path: path.to_path_buf(),
        },
        _ => StoreError::Sqlite(e),
    }
}

/// True when the file starts with SQLite's 16-byte magic string. Read only while no
/// connection of this process but the caller's is on the file (`descriptors`): with
/// another on it, the file has been read as SQLite, so it is taken as ours (damaged).
fn sqlite_header(path: &Path) -> bool {
    use std::io::Read;
    super::descriptors::when_alone(path, 1, || {
        let mut magic = [0u8; 16];
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
            && &magic == b"SQLite format 3\0"
    })
    .unwrap_or(true)
}

/// Version 25: when the host's side of an attempt's cleanup was done (issue 48, item
/// 4). A lost job's runner stays registered until GitHub fails the job (ten minutes);
/// its uid is free as soon as nothing of it runs and its leftovers, root and cgroup
/// are gone, and the attempt's later cleanups never touch the uid again.
pub const V25: &str = r#"
ALTER TABLE attempts ADD COLUMN host_cleaned_at INTEGER;
"#;
