//! The placer thread: it owns the `Placement`, applies the hosts' frames and the demand's snapshots to it, carries its actions out to the connections (with the `owners` frames `owner_relay` makes of each read), and writes the live view and the hosts' usage rows to the store.

use super::usage::UsageBook;
use super::{Closing, ConnOut, Event, Out};
use crate::coordinator::auth::{self, TokenBook};
use crate::coordinator::owner_relay::{self, OwnerRelay};
use crate::coordinator::placement::{Action, CloseWhy, ConnId, Placement};
use crate::coordinator::protocol::{CoordMsg, HostMsg};
use crate::coordinator::ws::LogFn;
use crate::store::{CoordHostRow, SqliteStore};
use crate::timefmt::{Millis, now_millis};
use crossbeam_channel::{Receiver, select, tick};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) fn placer(
    placement: Arc<Mutex<Placement>>,
    events: Receiver<Event>,
    stop: Receiver<()>,
    every: Duration,
    dir: Option<PathBuf>,
    tokens: Arc<dyn TokenBook>,
    log: LogFn,
) {
    let store = open_and_take_up(&placement, dir, &log);
    let mut outs: BTreeMap<ConnId, ConnOut> = BTreeMap::new();
    let ticker = tick(every);
    let mut dirty = true;
    let mut next_trim = now_millis() + crate::alloc::TRIM_EVERY_MS;
    let mut usage = store.as_ref().map(|s| UsageBook::new(s, now_millis()));
    let mut relay = OwnerRelay::default();
    let mut waits: BTreeMap<String, Option<&'static str>> = BTreeMap::new();
    loop {
        let mut now = now_millis();
        if now >= next_trim {
            next_trim = now + crate::alloc::TRIM_EVERY_MS;
            crate::alloc::trim();
        }
        if let Some(u) = &mut usage {
            u.prune_when_due(now, &log);
        }
        // When the event came: the launches it makes are timed from here.
        let came: std::time::Instant;
        let actions = select! {
            recv(stop) -> _ => break,
            recv(ticker) -> _ => {
                came = std::time::Instant::now();
                now = now_millis();
                if dirty {
                    if let Some(s) = &store {
                        let p = placement.lock().unwrap_or_else(|p| p.into_inner());
                        if let Err(e) = write_view(s, &p, now) {
                            log(&format!("writing the live view: {e}"));
                        }
                    }
                    dirty = false;
                }
                let mut p = placement.lock().unwrap_or_else(|p| p.into_inner());
                let mut actions = cut_off_removed(&mut p, &mut outs, tokens.as_ref(), now, &log);
                actions.extend(p.tick(now));
                actions
            }
            recv(events) -> ev => {
                let Ok(ev) = ev else { break };
                // Decided on the event's time, not the loop's start before the wait.
                came = std::time::Instant::now();
                now = now_millis();
                dirty = true;
                let mut p = placement.lock().unwrap_or_else(|p| p.into_inner());
                match ev {
                    Event::Open { conn, name, token, out, waker } => {
                        outs.insert(conn, ConnOut { out, waker, name, token });
                        Vec::new()
                    }
                    Event::Closed { conn } => {
                        outs.remove(&conn);
                        relay.forget(conn);
                        p.disconnect(conn, now)
                    }
                    ev @ Event::Queue { .. } => queue_read(&mut p, &mut relay, ev, now),
                    Event::Held { target, until } => {
                        p.credential_held(&target, until);
                        Vec::new()
                    }
                    Event::Frame { conn, msg } => {
                        host_frame(&mut p, &outs, conn, msg, now, usage.as_ref(), &log)
                    }
                }
            }
        };
        if !actions.is_empty() {
            dirty = true;
        }
        {
            let mut p = placement.lock().unwrap_or_else(|p| p.into_inner());
            say_credit_waits(&mut p, &mut waits, now, &log);
        }
        // Intent first: a lease is in the store before its launch leaves, so a
        // coordinator killed after sending it takes it up again (`Placement::restore`)
        // instead of placing its job a second time.
        let launches = actions
            .iter()
            .any(|a| matches!(a, Action::Send(_, CoordMsg::Launch(_))));
        if launches && let Some(s) = &store {
            let p = placement.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = write_view(s, &p, now) {
                log(&format!("writing the live view: {e}"));
            }
        }
        let sent = hand_over(actions, &outs);
        if !sent.is_empty() {
            let p = placement.lock().unwrap_or_else(|p| p.into_inner());
            log_launches(&p, &outs, &sent, came.elapsed(), &log);
        }
    }
    for c in outs.values() {
        let _ = c.out.send(Out::Close(Closing::Stopping));
        c.waker.wake();
    }
    if let Some(s) = &store {
        let p = placement.lock().unwrap_or_else(|p| p.into_inner());
        let _ = s.coord_put_view(&[], &p.book_rows(now_millis()));
    }
}

/// The live view's store, if `dir` is given and opens, with what the last life placed
/// taken up (before any event), not placed again.
fn open_and_take_up(
    placement: &Mutex<Placement>,
    dir: Option<PathBuf>,
    log: &LogFn,
) -> Option<SqliteStore> {
    let store = dir.and_then(|d| match SqliteStore::open(&d) {
        Ok(s) => Some(s),
        Err(e) => {
            log(&format!("no live view: {e}"));
            None
        }
    });
    if let Some(s) = &store {
        match s.coord_jobs() {
            Ok(rows) => {
                let mut p = placement.lock().unwrap_or_else(|p| p.into_inner());
                p.restore(&rows, now_millis());
            }
            Err(e) => log(&format!("the last life's jobs are not readable: {e}")),
        }
    }
    store
}

/// Hands each action to its connection, and returns the launches sent (job, host).
fn hand_over(actions: Vec<Action>, outs: &BTreeMap<ConnId, ConnOut>) -> Vec<(String, ConnId)> {
    let sent = actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(c, CoordMsg::Launch(l)) => Some((l.job_key.clone(), *c)),
            _ => None,
        })
        .collect();
    for a in actions {
        let (conn, out) = match a {
            Action::Send(c, m) => (c, Out::Frame(m)),
            Action::Close(c, CloseWhy::Replaced) => (c, Out::Close(Closing::Replaced)),
            Action::Close(c, CloseWhy::UnsupportedVersion(v)) => {
                (c, Out::Close(Closing::Unsupported(v)))
            }
        };
        if let Some(c) = outs.get(&conn) {
            let _ = c.out.send(out);
            c.waker.wake();
        }
    }
    sent
}

/// Logs when a target's starts begin to wait for its credential's limits (and why),
/// and when they resume: a pool held by GitHub says so, rather than look idle.
fn say_credit_waits(
    p: &mut Placement,
    waits: &mut BTreeMap<String, Option<&'static str>>,
    now: Millis,
    log: &LogFn,
) {
    use crate::coordinator::placement::credit::Wait;
    let targets: Vec<String> = p.targets().iter().map(|t| t.name.clone()).collect();
    for t in targets {
        let wait = p.credit_wait(&t, now);
        let kind = wait.map(|w| match w {
            Wait::Held(_) => "retry_after",
            Wait::Points(_) => "points",
            Wait::Hourly(_) => "hourly",
            Wait::Open => "open",
        });
        let last = waits.entry(t.clone()).or_insert(None);
        if *last == kind {
            continue;
        }
        *last = kind;
        match wait {
            Some(w) => log(&format!("starts of {t} wait: {}", w.describe())),
            None => log(&format!("starts of {t} resume: the credential has room")),
        }
    }
}

/// One line per launch handed to its connection: the job, the host, how long since the
/// queue read first showed the job (waits for room included) and how long the placer
/// took from the event that placed it (placing, the store's write, the hand-over).
fn log_launches(
    p: &Placement,
    outs: &BTreeMap<ConnId, ConnOut>,
    sent: &[(String, ConnId)],
    pass: Duration,
    log: &LogFn,
) {
    let now = now_millis();
    for (key, conn) in sent {
        let (Some(job), Some(c)) = (p.jobs().get(key), outs.get(conn)) else {
            continue;
        };
        log(&format!(
            "launch_sent job={key} host={} after_seen_ms={} pass_ms={:.1}",
            c.name,
            now - job.seen_at,
            pass.as_secs_f64() * 1000.0
        ));
    }
}

/// A demand read: its snapshot applied, and the owners it found sent to the hosts
/// whose runners they name.
fn queue_read(p: &mut Placement, relay: &mut OwnerRelay, ev: Event, now: Millis) -> Vec<Action> {
    let Event::Queue {
        target,
        jobs,
        taken,
        owners,
        read_at,
    } = ev
    else {
        return Vec::new();
    };
    let mut actions = p.snapshot(&target, jobs, &taken, read_at, now);
    let to = owner_relay::recipients(p.hosts());
    actions.extend(
        relay
            .frames(&to, &owners)
            .into_iter()
            .map(|(c, f)| Action::Send(c, CoordMsg::Owners(f))),
    );
    actions
}

/// Closes the connections whose token is no longer in the book (`coordinator host
/// rm`, or the host added again with a new token): their leases go back to waiting
/// and are placed elsewhere. A book that cannot be read cuts nobody off.
pub(super) fn cut_off_removed(
    p: &mut Placement,
    outs: &mut BTreeMap<ConnId, ConnOut>,
    tokens: &dyn TokenBook,
    now: Millis,
    log: &LogFn,
) -> Vec<Action> {
    let Some(book) = tokens.hashes() else {
        return Vec::new();
    };
    let gone: Vec<ConnId> = outs
        .iter()
        .filter(|(_, c)| {
            !book
                .iter()
                .any(|(n, h)| *n == c.name && auth::constant_time_eq(h, &c.token))
        })
        .map(|(id, _)| *id)
        .collect();
    let mut actions = Vec::new();
    for id in gone {
        let Some(c) = outs.remove(&id) else { continue };
        log(&format!("host {} removed: closing its connection", c.name));
        let _ = c.out.send(Out::Close(Closing::Removed));
        c.waker.wake();
        actions.extend(p.remove_host(id, now));
    }
    actions
}

/// A host's frame: its usage rows kept first (when the coordinator keeps a store),
/// then the placement's answer, with where its rows resume in a `hello_ack`.
fn host_frame(
    p: &mut Placement,
    outs: &BTreeMap<ConnId, ConnOut>,
    conn: ConnId,
    mut msg: HostMsg,
    now: Millis,
    usage: Option<&UsageBook>,
    log: &LogFn,
) -> Vec<Action> {
    if let Some(u) = usage {
        u.take(p, outs, conn, &mut msg, log);
    }
    let mut actions = frame(p, outs, conn, msg, now);
    if let Some(u) = usage {
        u.resume(p, outs, &mut actions, log);
    }
    actions
}

pub(super) fn frame(
    p: &mut Placement,
    outs: &BTreeMap<ConnId, ConnOut>,
    conn: ConnId,
    msg: HostMsg,
    now: Millis,
) -> Vec<Action> {
    match msg {
        HostMsg::Hello(h) => {
            // The name its token was added under, not the one the host claims.
            match outs.get(&conn) {
                Some(c) => p.hello(conn, &c.name, h, now),
                None => Vec::new(),
            }
        }
        HostMsg::LaunchAck(a) => p.ack(conn, a, now),
        HostMsg::AttemptStarted(s) => p.started(conn, s, now),
        HostMsg::AttemptFinished(f) => p.finished(conn, f, now),
        HostMsg::Status(s) => p.status(conn, s, now),
    }
}

pub(super) fn write_view(s: &SqliteStore, p: &Placement, now: Millis) -> crate::store::Result<()> {
    let hosts: Vec<CoordHostRow> = p
        .hosts()
        .iter()
        .map(|(c, h)| CoordHostRow {
            name: h.name.clone(),
            connected: true,
            version: Some(h.version),
            host_id: Some(h.hello.host.id.clone()),
            os: Some(h.hello.host.os.clone()),
            arch: Some(h.hello.host.arch.clone()),
            capacity: Some(h.hello.host.capacity),
            free: Some(h.free),
            draining: h.draining,
            unfit: h.unfit.iter().cloned().collect(),
            covered: h.covered.keys().cloned().collect(),
            profiles: h.hello.profiles.iter().map(|p| p.name.clone()).collect(),
            open_leases: p.outstanding(*c),
            started: h.started,
            finished: h.finished,
            refusals: h.refusals,
            last_seen_at: Some(now),
            meters: h.meters.clone(),
            last_refusal: h.last_refusal.as_ref().map(|(why, _)| why.clone()),
            last_refusal_at: h.last_refusal.as_ref().map(|(_, at)| *at),
            binary_version: h.hello.host.binary_version.clone(),
            ..Default::default()
        })
        .collect();
    s.coord_put_view(&hosts, &p.book_rows(now))
}
