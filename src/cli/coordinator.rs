//! `coordinator serve|host add|host rm|status|hosts|leases`: the pool's coordinator on
//! its own state directory (its targets are added with the ordinary `target add`).

use super::output::{self, Out, or_dash, table, time};
use super::parse::Invocation;
use super::spec::{Opt, opts};
use super::{CliError, CliResult, readable_file, secret_file};
use crate::coordinator::auth::{StoreTokens, new_token, token_hash};
use crate::coordinator::demand::{DemandSource, RestDemand};
use crate::coordinator::scaleset_demand::{self, ScaleSetDemand};
use crate::coordinator::server::{ServeOptions, serve as start_server};
use crate::coordinator::tls;
use crate::coordinator::view;
use crate::domain::validate::{self, Invalid};
use crate::store::{CoordHostRow, CoordJobRow, SqliteStore, Store};
use crate::timefmt::now_millis;
use crate::units;
use crate::{log_info, log_warn};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

pub(super) fn host_add(inv: &Invocation, store: &SqliteStore, out: &mut Out) -> CliResult {
    let name = validate::name("NAME", &inv.positionals[0])?;
    let token_out = inv
        .value(&opts::coordinator_host_add::TOKEN_OUT)
        .map(|p| validate::path("--token-out", p))
        .transpose()?;
    if store.coord_host(&name)?.is_some() {
        return Err(CliError::usage(
            "NAME",
            &format!("host {name} is already in the pool: 'coordinator host rm {name}' first"),
        ));
    }
    let token = new_token()
        .map_err(|e| CliError::Failed(format!("reading the kernel's random bytes: {e}")))?;
    let Some(path) = token_out else {
        store.coord_add_host(&name, &token_hash(&token), now_millis())?;
        // The one place the token is shown: stdout only, so it can be piped to the host.
        out.emit(
            || format!("{}\n", token.expose()),
            || json!({ "name": name, "token": token.expose() }),
        );
        eprintln!(
            "runner-manager: host {name} added; its token was printed once: put it in the host's \
             coordinator_token_file (mode 0600), or use --token-out FILE"
        );
        return Ok(());
    };
    write_token_file(&path, &token)?;
    if let Err(e) = store.coord_add_host(&name, &token_hash(&token), now_millis()) {
        let _ = std::fs::remove_file(&path);
        return Err(e.into());
    }
    let shown = path.display().to_string();
    out.emit(
        || format!("host {name} added; its token is in {shown} (mode 0600)\n"),
        || json!({ "name": name, "token_file": shown }),
    );
    Ok(())
}

/// Creates `path` (never an existing file, never through a final symlink) with mode
/// 0600 from the start, and writes the token to it.
fn write_token_file(path: &std::path::Path, token: &crate::secret::Secret) -> CliResult {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            let why = if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!("{} already exists: give a new file", path.display())
            } else {
                format!("cannot create {}: {e}", path.display())
            };
            CliError::usage("--token-out", &why)
        })?;
    let written = f
        .write_all(format!("{}\n", token.expose()).as_bytes())
        .and_then(|()| f.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(path);
        return Err(CliError::Failed(format!("writing {}: {e}", path.display())));
    }
    Ok(())
}

pub(super) fn host_rm(inv: &Invocation, store: &SqliteStore, out: &mut Out) -> CliResult {
    let name = &inv.positionals[0];
    store.coord_remove_host(name)?;
    out.emit(
        || format!("host {name} removed\n"),
        || json!({ "removed": name }),
    );
    Ok(())
}

fn host_json(h: &CoordHostRow) -> Value {
    json!({
        "name": h.name,
        "created_at": output::time(h.created_at),
        "connected": h.connected,
        "version": h.version,
        "binary_version": h.binary_version,
        "host_id": h.host_id,
        "os": h.os,
        "arch": h.arch,
        "capacity": h.capacity,
        "free": h.free,
        "draining": h.draining,
        "unfit": h.unfit,
        "covered": h.covered,
        "profiles": h.profiles,
        "open_leases": h.open_leases,
        "started": h.started,
        "finished": h.finished,
        "refusals": h.refusals,
        "last_seen_at": h.last_seen_at.map(output::time),
        "meters": h.meters,
        "last_refusal": h.last_refusal.as_ref().map(|why| json!({
            "reason": why,
            "at": h.last_refusal_at.map(output::time),
        })),
    })
}

/// REFUSALS: the count, and the last one's reason word when there is one.
fn refusals_cell(h: &CoordHostRow) -> String {
    match &h.last_refusal {
        Some(why) => format!("{} (last: {why})", h.refusals),
        None => h.refusals.to_string(),
    }
}

/// A host's live runners over all its profiles: RSS and CPU %, or `-` with none.
fn host_meters(h: &CoordHostRow) -> (String, String) {
    let runners: u32 = h.meters.values().map(|m| m.runners).sum();
    if !h.connected || runners == 0 {
        return ("-".into(), "-".into());
    }
    let rss: u64 = h.meters.values().map(|m| m.rss_bytes).sum();
    let cpu: u64 = h.meters.values().map(|m| u64::from(m.cpu_percent)).sum();
    (units::bytes(rss), units::percent(cpu as f64))
}

fn job_json(j: &CoordJobRow) -> Value {
    json!({
        "job_key": j.job_key,
        "target": j.target,
        "repo": j.repo,
        "name": j.name,
        "labels": j.labels,
        "queued_at": output::time(j.queued_at),
        "phase": j.phase.to_string(),
        "lease_id": j.lease_id,
        "host": j.host,
        "profile": j.profile,
        "runner_name": j.runner_name,
        "expires_at": j.expires_at.map(output::time),
        "placements": j.placements,
    })
}

/// `--sort FIELD` among `fields` (the first when absent) and `--filter TEXT`, checked
/// before anything is read: a bad field exits 2 naming every field there is.
fn sort_and_filter<'a, R>(
    inv: &'a Invocation,
    [sort, filter]: [&Opt; 2],
    fields: &'a [view::SortField<R>],
) -> Result<(&'a view::SortField<R>, &'a str), CliError> {
    let by = match inv.value(sort) {
        Some(w) => view::sort_field(fields, w).map_err(|e| Invalid::new(sort.name, e))?,
        None => &fields[0],
    };
    Ok((by, inv.value(filter).unwrap_or("")))
}

/// The summary line, and with a filter how many rows of how many it shows.
fn summary_line(summary: &view::Summary, shown: usize, of: usize, filter: &str) -> String {
    if filter.trim().is_empty() {
        format!("{}\n", summary.line())
    } else {
        format!(
            "{}\nshowing {shown} of {of} (--filter {filter:?})\n",
            summary.line()
        )
    }
}

pub(super) fn hosts(inv: &Invocation, store: &SqliteStore, out: &mut Out) -> CliResult {
    let (by, filter) = sort_and_filter(
        inv,
        [
            &opts::coordinator_hosts::SORT,
            &opts::coordinator_hosts::FILTER,
        ],
        view::HOST_SORTS,
    )?;
    let all = store.coord_hosts()?;
    let summary = view::Summary::of(&all, &store.coord_jobs()?);
    let hs = view::hosts_shown(&all, by, filter);
    out.emit(
        || {
            let rows: Vec<Vec<String>> = hs
                .iter()
                .map(|h| {
                    let (rss, cpu) = host_meters(h);
                    vec![
                        h.name.clone(),
                        view::host_state(h).to_string(),
                        or_dash(h.binary_version.as_ref()),
                        or_dash(h.version),
                        format!("{}/{}", or_dash(h.free), or_dash(h.capacity)),
                        h.open_leases.to_string(),
                        h.started.to_string(),
                        h.finished.to_string(),
                        refusals_cell(h),
                        rss,
                        cpu,
                        or_dash(h.last_seen_at.map(time)),
                    ]
                })
                .collect();
            summary_line(&summary, hs.len(), all.len(), filter)
                + &table(
                    &[
                        "NAME",
                        "STATE",
                        "VERSION",
                        "PROTO",
                        "FREE",
                        "LEASES",
                        "STARTED",
                        "FINISHED",
                        "REFUSALS",
                        "RSS",
                        "CPU",
                        "LAST SEEN",
                    ],
                    &rows,
                )
        },
        || Value::Array(hs.iter().map(host_json).collect()),
    );
    Ok(())
}

pub(super) fn leases(inv: &Invocation, store: &SqliteStore, out: &mut Out) -> CliResult {
    let (by, filter) = sort_and_filter(
        inv,
        [
            &opts::coordinator_leases::SORT,
            &opts::coordinator_leases::FILTER,
        ],
        view::JOB_SORTS,
    )?;
    let all = store.coord_jobs()?;
    let summary = view::Summary::of(&store.coord_hosts()?, &all);
    let js = view::jobs_shown(&all, by, filter);
    out.emit(
        || {
            let rows: Vec<Vec<String>> = js
                .iter()
                .map(|j| {
                    vec![
                        j.job_key.clone(),
                        j.target.clone(),
                        j.phase.to_string(),
                        or_dash(j.host.as_ref()),
                        or_dash(j.profile.as_ref()),
                        or_dash(j.lease_id.as_ref()),
                        or_dash(j.expires_at.map(time)),
                        or_dash(j.runner_name.as_ref()),
                    ]
                })
                .collect();
            summary_line(&summary, js.len(), all.len(), filter)
                + &table(
                    &[
                        "JOB", "TARGET", "PHASE", "HOST", "PROFILE", "LEASE", "EXPIRES", "RUNNER",
                    ],
                    &rows,
                )
        },
        || Value::Array(js.iter().map(job_json).collect()),
    );
    Ok(())
}

pub(super) fn status(store: &SqliteStore, out: &mut Out) -> CliResult {
    let serving: Option<Value> = store.coord_serving()?;
    let hs = store.coord_hosts()?;
    let js = store.coord_jobs()?;
    let targets = store.targets()?;
    let connected = hs.iter().filter(|h| h.connected).count();
    let mut phases = std::collections::BTreeMap::<String, usize>::new();
    for j in &js {
        *phases.entry(j.phase.to_string()).or_default() += 1;
    }
    out.emit(
        || {
            let serve = match &serving {
                Some(v) => format!(
                    "serving on {} (pid {})",
                    v["listen"].as_str().unwrap_or("?"),
                    v["pid"]
                ),
                None => "not serving".into(),
            };
            let phase_line = if phases.is_empty() {
                "none".to_string()
            } else {
                phases
                    .iter()
                    .map(|(p, n)| format!("{p} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            output::block(&[
                ("coordinator", serve),
                ("hosts", format!("{connected} connected of {}", hs.len())),
                (
                    "targets",
                    targets
                        .iter()
                        .map(|t| t.name.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                ("jobs", phase_line),
            ])
        },
        || {
            json!({
                "serving": serving,
                "hosts": hs.iter().map(host_json).collect::<Vec<_>>(),
                "targets": targets.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                "jobs": phases,
            })
        },
    );
    Ok(())
}

pub(super) fn serve(inv: &Invocation, store: &SqliteStore, dir: &Path) -> CliResult {
    crate::alloc::cap_malloc_arenas();
    // Logs as the daemon's: logfmt, with journald priorities under systemd.
    crate::logging::init(crate::logging::Level::Info);
    let listen = inv
        .value(&opts::coordinator_serve::LISTEN)
        .unwrap_or_default();
    let addr: std::net::SocketAddr = listen
        .parse()
        .map_err(|_| Invalid::new("--listen", format!("expected IP:PORT (got {listen:?})")))?;
    let tls = match (
        inv.value(&opts::coordinator_serve::TLS_CERT),
        inv.value(&opts::coordinator_serve::TLS_KEY),
    ) {
        (None, None) => None,
        (Some(c), Some(k)) => {
            let (c, k) = (
                validate::path("--tls-cert", c)?,
                validate::path("--tls-key", k)?,
            );
            readable_file("--tls-cert", &c)?;
            secret_file("--tls-key", &k)?;
            Some(tls::server_config(&c, &k).map_err(|e| CliError::usage("--tls-cert", &e))?)
        }
        _ => {
            return Err(CliError::usage(
                "--tls-cert",
                "give both --tls-cert and --tls-key, or neither",
            ));
        }
    };
    // Plain text off loopback carries the hosts' tokens in the clear: only when asked.
    let plain_exposed = tls.is_none() && !addr.ip().is_loopback();
    if plain_exposed && !inv.flag(&opts::coordinator_serve::INSECURE) {
        return Err(CliError::usage(
            "--listen",
            &format!(
                "{addr} is not loopback and no --tls-cert is given: {}; serve wss:// with \
                 --tls-cert PATH --tls-key PATH, or accept the risk with --insecure",
                tls::PLAIN_TEXT_RISK
            ),
        ));
    }
    let mut options = ServeOptions::new(addr);
    options.tls = tls;
    options.store_dir = Some(dir.to_path_buf());
    if let Some(t) = inv.value(&opts::coordinator_serve::LEASE_TTL) {
        options.placement.ttl_secs = validate::seconds_in("--lease-ttl", t, 1, 3600)?;
    }
    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ]);
    let mut signals =
        signals.map_err(|e| CliError::Failed(format!("cannot watch signals: {e}")))?;
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    // `--scaleset TARGET=NAME`: that target's demand is the scale set's (one session,
    // held here), and its queue is not polled over REST.
    let mut scalesets = std::collections::BTreeMap::new();
    for v in inv.values(&opts::coordinator_serve::SCALESET) {
        let (t, s) = scaleset_demand::parse_option(v).map_err(|e| Invalid::new("--scaleset", e))?;
        scalesets.insert(t, s);
    }
    let targets = store.targets()?;
    if let Some(t) = scalesets
        .keys()
        .find(|t| !targets.iter().any(|x| &x.name == *t))
    {
        return Err(Invalid::new("--scaleset", format!("no target named {t:?}")).into());
    }
    let mut sources: Vec<Box<dyn DemandSource>> = Vec::new();
    for t in targets {
        let src: Box<dyn DemandSource> = match scalesets.get(&t.name) {
            Some(name) => Box::new(
                ScaleSetDemand::new(&t, name, dir, stop_rx.clone()).map_err(CliError::Failed)?,
            ),
            None => Box::new(RestDemand::new(&t, stop_rx.clone()).map_err(CliError::Failed)?),
        };
        sources.push(src);
    }
    if sources.is_empty() {
        log_warn!(
            "coordinator_no_targets",
            fix = "add them with 'target add' on this state directory"
        );
    }
    let tokens = Arc::new(StoreTokens::new(dir.to_path_buf()));
    let mut server = start_server(options, tokens, sources)
        .map_err(|e| CliError::Failed(format!("cannot listen on {addr}: {e}")))?;
    let scheme = if inv.value(&opts::coordinator_serve::TLS_CERT).is_some() {
        "wss"
    } else {
        "ws"
    };
    let url = format!("{scheme}://{}", server.addr());
    store.put_coord_serving(
        &json!({ "listen": url, "pid": std::process::id(), "started_at": time(now_millis()) }),
    )?;
    if plain_exposed {
        log_warn!(
            "coordinator_plain_text",
            listen = url,
            detail = format!("--insecure: {}", tls::PLAIN_TEXT_RISK)
        );
    }
    log_info!("coordinator_listening", listen = url);
    println!("coordinator listening on {url}");
    let _ = std::io::stdout().flush();
    signals.forever().next();
    drop(stop_tx);
    server.shutdown();
    store.clear_coord_serving()?;
    Ok(())
}
