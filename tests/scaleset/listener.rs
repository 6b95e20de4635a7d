//! The listener: long poll 202 then 200, acks, redelivery of unacked messages, the
//! persisted last message id across listener instances, each session fault, and the
//! session state it reports for `status`.

use crate::support::*;
use runner_manager::domain::SessionPhase;
use runner_manager::scaleset::{
    JobMessage, MemoryCheckpoint, ScaleSetError, ScaleSetListener, SessionCloser, SessionWatch,
    StoreCheckpoint, checkpoint_key, session_key,
};
use runner_manager::sim::{FaultAction, FaultRule};
use runner_manager::store::{SqliteStore, Store};
use std::time::Instant;

const MESSAGES: &str = "/_services/broker/_apis/runtime/runnerscalesets/{id}/messages";
const SESSIONS: &str = "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/sessions";
const SESSION: &str = "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/sessions/{session}";
const MESSAGE: &str = "/_services/broker/_apis/runtime/runnerscalesets/{id}/messages/{message}";
const ACQUIRE: &str = "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/acquirejobs";

/// The session and queue calls in the order they arrived, as `METHOD template status`,
/// from the `from`th call of the log on.
fn wire(e: &Env, from: usize) -> Vec<String> {
    let mut log: Vec<_> = e.sim.request_log().into_iter().skip(from).collect();
    // The log is in order of completion; a long poll completes late.
    log.sort_by_key(|x| x.at);
    log.iter()
        .filter(|x| [MESSAGES, MESSAGE, SESSIONS, SESSION, ACQUIRE].contains(&x.endpoint.as_str()))
        .map(|x| {
            let short = x
                .endpoint
                .rsplit("runnerscalesets/{id}")
                .next()
                .unwrap_or("");
            format!("{} {} {}", x.method, short, x.status)
        })
        .collect()
}

fn listener(e: &Env, name: &str, cp: MemoryCheckpoint) -> ScaleSetListener {
    ScaleSetListener::new(e.client.clone(), listener_config(name), Box::new(cp))
}

fn assigned_names(l: &mut ScaleSetListener) -> (i64, Vec<String>) {
    let r = l.poll_once().unwrap();
    let m = r.message.expect("a message");
    let names = m
        .jobs
        .iter()
        .filter_map(|j| match j {
            JobMessage::Assigned { job } => Some(job.display_name.clone()),
            _ => None,
        })
        .collect();
    (m.id, names)
}

#[test]
fn long_poll_answers_202_then_200_when_a_job_is_queued() {
    let e = env(300);
    let mut l = listener(&e, "rm-lp", MemoryCheckpoint::default());
    let t = Instant::now();
    let r = l.poll_once().unwrap();
    assert!(r.message.is_none());
    assert!(t.elapsed().as_millis() >= 250, "the sim held the poll");
    assert_eq!(r.desired(0, 5), Some(0));
    assert_eq!(e.sim.count("GET", MESSAGES), 1);

    e.sim.enqueue_job(REPO, "build", &["rm-lp"], 0);
    e.sim.enqueue_job(REPO, "elsewhere", &["other-label"], 0);
    let r = l.poll_once().unwrap();
    let m = r.message.clone().unwrap();
    assert_eq!(m.id, 1);
    assert!(
        matches!(&m.jobs[..], [JobMessage::Assigned { job }] if job.display_name == "build" && job.repository == "app" && job.owner == "octo")
    );
    assert_eq!(r.statistics.unwrap().total_assigned_jobs, 1);
    assert_eq!(r.desired(1, 5), Some(2));
    assert_eq!(r.desired(0, 1), Some(1));
}

#[test]
fn a_job_queued_during_a_poll_wakes_it() {
    let e = env(200);
    let mut l = listener(&e, "rm-wake", MemoryCheckpoint::default());
    l.poll_once().unwrap();
    // Now a long hold, and a job queued from another thread while the poll waits.
    e.sim.scaleset_config(|c| c.hold_ms = 10_000);
    let url = e.sim.url().to_string();
    let enqueue = std::thread::spawn(move || {
        let body = serde_json::json!({"repo": REPO, "name": "late", "labels": ["rm-wake"]});
        runner_manager::sim::client::request(
            &url,
            "POST",
            "/_sim/jobs",
            &[("content-type", "application/json")],
            Some(body.to_string().as_bytes()),
            std::time::Duration::from_secs(5),
        )
        .unwrap()
    });
    let t = Instant::now();
    let (_, names) = assigned_names(&mut l);
    assert_eq!(names, vec!["late".to_string()]);
    assert!(
        t.elapsed().as_secs() < 9,
        "answered before the hold ran out"
    );
    assert_eq!(enqueue.join().unwrap().status, 200);
}

#[test]
fn acked_messages_do_not_come_back_and_unacked_ones_do() {
    let e = env(200);
    e.sim.scaleset_config(|c| c.session_ttl_ms = 300);
    let cp = MemoryCheckpoint::default();
    let mut a = listener(&e, "rm-ack", cp.clone());
    a.poll_once().unwrap();
    e.sim.enqueue_job(REPO, "one", &["rm-ack"], 0);
    let (id1, _) = assigned_names(&mut a);
    let set = a.scale_set().unwrap().id;
    // Not acknowledged until the next poll.
    let before = e.sim.scaleset_messages(set as u64);
    assert_eq!((before.len(), before[0].0, before[0].1), (1, id1, false));
    // A crash now: the listener vanishes with its session and without acking.
    std::mem::forget(a);
    let mut b = listener(&e, "rm-ack", cp.clone());
    // b meets the abandoned session (409) and backs off until it expires.
    let (again, names) = loop {
        match b.poll_once() {
            Ok(r) => {
                let m = r.message.expect("the unacked message again");
                break (m.id, m.jobs);
            }
            Err(err) => assert!(err.is_session_conflict(), "{err:?}"),
        }
    };
    assert_eq!(again, id1);
    assert_eq!(names.len(), 1);
    // Polling again acknowledges it; it never comes back.
    assert!(b.poll_once().unwrap().message.is_none());
    assert!(e.sim.scaleset_messages(set as u64)[0].1);
    assert_eq!(b.last_message_id(), id1);
    assert!(b.poll_once().unwrap().message.is_none());
    assert!(e.sim.count("POST", SESSIONS) >= 2);
}

#[test]
fn last_message_id_is_persisted_and_resumed_from_the_store() {
    let e = env(200);
    let dir = TempDir::new("kv");
    let store = |d: &TempDir| Box::new(StoreCheckpoint(SqliteStore::open(&d.0).unwrap()));
    let mut a = ScaleSetListener::new(e.client.clone(), listener_config("rm-kv"), store(&dir));
    a.poll_once().unwrap();
    e.sim.enqueue_job(REPO, "one", &["rm-kv"], 0);
    e.sim.enqueue_job(REPO, "two", &["rm-kv"], 0);
    let (id1, n1) = assigned_names(&mut a);
    let (id2, n2) = assigned_names(&mut a);
    assert_eq!((n1, n2), (vec!["one".to_string()], vec!["two".to_string()]));
    let set = a.scale_set().unwrap().id;
    // "two" was delivered but not committed when the listener stops.
    a.close().unwrap();
    let kv = SqliteStore::open(&dir.0).unwrap();
    assert_eq!(
        kv.kv_get(&checkpoint_key("t", set)).unwrap(),
        Some(id2.to_string()),
        "close commits the delivered message"
    );
    // Roll the checkpoint back to "one", as if the process died before committing
    // "two": the next listener gets "two" again, and never "one".
    kv.kv_put(&checkpoint_key("t", set), &id1.to_string())
        .unwrap();
    e.sim.with_state(|s| {
        for m in s.scalesets.messages.iter_mut().filter(|m| m.id == id2) {
            m.acked = false;
        }
    });
    e.sim.enqueue_job(REPO, "three", &["rm-kv"], 0);
    let mut b = ScaleSetListener::new(e.client.clone(), listener_config("rm-kv"), store(&dir));
    let (b1, m1) = assigned_names(&mut b);
    let (b2, m2) = assigned_names(&mut b);
    assert_eq!((b1, b2), (id2, id2 + 1));
    assert_eq!(
        (m1, m2),
        (vec!["two".to_string()], vec!["three".to_string()])
    );
    assert!(b.poll_once().unwrap().message.is_none());
    assert_eq!(
        kv.kv_get(&checkpoint_key("t", set)).unwrap(),
        Some((id2 + 1).to_string())
    );
}

#[test]
fn a_message_persisted_but_not_acked_is_not_delivered_again() {
    let e = env(200);
    let cp = MemoryCheckpoint::default();
    let mut a = listener(&e, "rm-rep", cp.clone());
    a.poll_once().unwrap();
    e.sim.enqueue_job(REPO, "one", &["rm-rep"], 0);
    let (id1, _) = assigned_names(&mut a);
    let set = a.scale_set().unwrap().id;
    a.close().unwrap();
    // The ack was lost after the id was saved.
    e.sim.with_state(|s| s.scalesets.messages[0].acked = false);
    let mut b = listener(&e, "rm-rep", cp);
    // The saved id is sent as lastMessageId: the handled message is not delivered again.
    assert!(b.poll_once().unwrap().message.is_none());
    assert_eq!(b.last_message_id(), id1);
    e.sim.enqueue_job(REPO, "two", &["rm-rep"], 0);
    assert_eq!(assigned_names(&mut b), (id1 + 1, vec!["two".to_string()]));
    assert_eq!(e.sim.scaleset_messages(set as u64).len(), 2);
}

#[test]
fn a_held_session_is_retried_with_backoff_until_free() {
    let e = env(200);
    let s = e.client.ensure_scale_set(&spec("rm-409")).unwrap();
    let holder = e.client.create_session(s.id, "someone-else").unwrap();
    let mut l = listener(&e, "rm-409", MemoryCheckpoint::default());
    for _ in 0..3 {
        let err = l.poll_once().unwrap_err();
        assert!(err.is_session_conflict(), "{err:?}");
        assert!(!l.has_session());
    }
    e.client.delete_session(s.id, &holder.id).unwrap();
    l.poll_once().unwrap();
    assert!(l.has_session());
    assert_eq!(e.sim.count("POST", SESSIONS), 5);
}

/// Issue 15, item 1: an ack refused with 401 is sent again after the session is
/// refreshed, before the next poll (GitHub's own clients do; the service redelivers an
/// unacked message to every new session).
#[test]
fn an_ack_refused_with_401_is_sent_again_after_a_refresh() {
    let e = env(200);
    let mut l = listener(&e, "rm-ack401", MemoryCheckpoint::default());
    l.poll_once().unwrap();
    e.sim.enqueue_job(REPO, "one", &["rm-ack401"], 0);
    let (id, _) = assigned_names(&mut l);
    let set = l.scale_set().unwrap().id as u64;
    e.sim.add_fault(FaultRule::times(
        "DELETE",
        MESSAGE,
        1,
        FaultAction::Unauthorized,
    ));
    let from = e.sim.request_log().len();
    assert!(l.poll_once().unwrap().message.is_none());
    assert_eq!(
        wire(&e, from),
        [
            "DELETE /messages/{message} 401",
            "PATCH /sessions/{session} 200",
            "DELETE /messages/{message} 204",
            "GET /messages 202",
        ]
    );
    let acked = e.sim.scaleset_messages(set);
    assert!(acked.iter().all(|m| m.1), "left unacked: {acked:?}");
    assert_eq!(l.last_message_id(), id);
    assert_eq!(l.sessions_opened(), 1);
}

/// Issue 15, item 2: a 401 on `acquirejobs` refreshes the session and acquires again
/// at once, inside the same poll: no backoff, no second long poll first.
#[test]
fn a_401_on_acquire_refreshes_and_acquires_at_once() {
    let e = env(200);
    e.sim.scaleset_config(|c| c.offer_first = true);
    let mut l = listener(&e, "rm-acq401", MemoryCheckpoint::default());
    l.poll_once().unwrap();
    let job = e.sim.enqueue_job(REPO, "offered", &["rm-acq401"], 0);
    e.sim.add_fault(FaultRule::times(
        "POST",
        ACQUIRE,
        1,
        FaultAction::Unauthorized,
    ));
    let from = e.sim.request_log().len();
    let t = Instant::now();
    let r = l.poll_once().unwrap();
    assert_eq!(r.acquired, vec![job as i64]);
    assert_eq!(
        wire(&e, from),
        [
            "GET /messages 200",
            "POST /acquirejobs 401",
            "PATCH /sessions/{session} 200",
            "POST /acquirejobs 200",
        ]
    );
    // The wire above has no poll between the refusal and the retry.
    eprintln!(
        "figures: the poll with its retried acquire took {:?}",
        t.elapsed()
    );
    assert_eq!(assigned_names(&mut l).1, vec!["offered".to_string()]);
}

/// Issue 15, item 3: the session a killed listener held is recorded, so the next one
/// deletes it with the admin token and opens its own at once: no 409, no wait.
#[test]
fn a_crashed_listeners_recorded_session_is_deleted_and_replaced_at_once() {
    let e = env(200);
    let cp = MemoryCheckpoint::default();
    let mut a = listener(&e, "rm-crash", cp.clone());
    a.poll_once().unwrap();
    let set = a.scale_set().unwrap().id;
    let old = e.sim.scaleset_session_ids(set as u64);
    assert_eq!(old.len(), 1);
    // Recorded when created, before the first poll.
    assert_eq!(
        cp.0.lock().unwrap().get(&session_key("t", set)),
        Some(&old[0])
    );
    e.sim.enqueue_job(REPO, "one", &["rm-crash"], 0);
    let (id1, _) = assigned_names(&mut a);
    // SIGKILL: no ack, no session delete.
    std::mem::forget(a);
    let from = e.sim.request_log().len();
    let mut b = listener(&e, "rm-crash", cp.clone());
    let t = Instant::now();
    let r = b.poll_once().unwrap();
    eprintln!(
        "figures: the first poll after the crash took {:?}",
        t.elapsed()
    );
    // The unacked message comes back to the new session.
    assert_eq!(r.message.map(|m| m.id), Some(id1));
    let w = wire(&e, from);
    assert_eq!(
        &w[..3],
        [
            "DELETE /sessions/{session} 204",
            "POST /sessions 200",
            "GET /messages 200"
        ],
        "{w:?}"
    );
    assert_eq!(e.sim.session_conflicts(), 0);
    let now = e.sim.scaleset_session_ids(set as u64);
    assert_eq!(now.len(), 1);
    assert_ne!(now, old);
    assert_eq!(
        cp.0.lock().unwrap().get(&session_key("t", set)),
        Some(&now[0])
    );
    // Ending the session cleanly removes the record: the next start deletes nothing.
    b.close().unwrap();
    assert_eq!(cp.0.lock().unwrap().get(&session_key("t", set)), None);
    let from = e.sim.request_log().len();
    let mut c = listener(&e, "rm-crash", cp);
    c.poll_once().unwrap();
    assert_eq!(e.sim.count("DELETE", SESSION), 2);
    assert_eq!(wire(&e, from)[0], "POST /sessions 200");
}

/// A session that is not ours (no record names it) is waited out, and the error
/// shown names its holder as the service does.
#[test]
fn a_session_not_ours_is_waited_out_and_its_holder_named() {
    let e = env(200);
    let s = e.client.ensure_scale_set(&spec("rm-foreign")).unwrap();
    let holder = e.client.create_session(s.id, "someone-else").unwrap();
    let cp = MemoryCheckpoint::default();
    let mut l = listener(&e, "rm-foreign", cp.clone());
    let err = l.poll_once().unwrap_err();
    assert!(err.is_session_conflict(), "{err:?}");
    assert!(err.to_string().contains("someone-else"), "{err}");
    assert_eq!(
        e.sim.count("DELETE", SESSION),
        0,
        "deleted a session not ours"
    );
    assert_eq!(e.sim.scaleset_session_ids(s.id as u64), vec![holder.id]);
    assert!(cp.0.lock().unwrap().is_empty());
}

/// Issue 15: what the listener reports of its session, as `status` shows it: in
/// conflict with the holder named and a next try, then held (since it opened, kept
/// across a token refresh) with its last poll and message, then closed.
#[test]
fn the_reported_session_state_follows_the_session() {
    let e = env(200);
    let s = e.client.ensure_scale_set(&spec("rm-state")).unwrap();
    let holder = e.client.create_session(s.id, "someone-else").unwrap();
    let watch = SessionWatch::default();
    let mut l = listener(&e, "rm-state", MemoryCheckpoint::default()).watched_by(&watch);
    assert_eq!(watch.get().phase, SessionPhase::Opening.into());
    l.poll_once().unwrap_err();
    let st = watch.get();
    assert_eq!(st.phase, SessionPhase::Conflict.into(), "{st:?}");
    assert!(
        st.reason
            .as_deref()
            .is_some_and(|r| r.contains("someone-else")),
        "{st:?}"
    );
    assert!(st.retry_at.is_some() && st.session_id.is_none(), "{st:?}");
    assert_eq!(st.scale_set_id, Some(s.id));

    e.client.delete_session(s.id, &holder.id).unwrap();
    l.poll_once().unwrap();
    let st = watch.get();
    assert_eq!(st.phase, SessionPhase::Held.into(), "{st:?}");
    assert_eq!(st.session_id, e.sim.scaleset_session_ids(s.id as u64).pop());
    assert!(
        st.held_since.is_some() && st.last_poll_at.is_some(),
        "{st:?}"
    );
    assert!(st.reason.is_none() && st.retry_at.is_none(), "{st:?}");
    assert_eq!((st.last_message_id, st.last_message_at), (None, None));
    assert_eq!(l.session_state(), st);

    // A refreshed queue token is the same session: held since it opened.
    e.sim.expire_queue_tokens();
    e.sim.enqueue_job(REPO, "reported", &["rm-state"], 0);
    let (id, _) = assigned_names(&mut l);
    let after = watch.get();
    assert_eq!(after.held_since, st.held_since);
    assert_eq!(after.session_id, st.session_id);
    assert_eq!(after.last_message_id, Some(id));
    assert!(after.last_message_at.is_some());

    l.close().unwrap();
    let closed = watch.get();
    assert_eq!(closed.phase, SessionPhase::Closed.into());
    assert_eq!((closed.session_id, closed.held_since), (None, None));
    assert_eq!(closed.last_message_id, Some(id));
}

#[test]
fn a_closer_ends_the_session_and_one_opened_after_it_ran() {
    let e = env(200);
    let closer = SessionCloser::new(e.client.clone());
    let mut l = listener(&e, "rm-close", MemoryCheckpoint::default()).closed_by(&closer);
    l.poll_once().unwrap();
    let set = l.scale_set().unwrap().id as u64;
    assert_eq!(e.sim.scaleset_sessions(set), 1);
    assert!(closer.close().unwrap(), "it had a session to end");
    assert_eq!(e.sim.scaleset_sessions(set), 0);
    // A closer that ran before its listener had a session (the owner stopped while the
    // create call was under way): the session is ended as soon as it is taken.
    let closer = SessionCloser::new(e.client.clone());
    let mut late = listener(&e, "rm-close", MemoryCheckpoint::default()).closed_by(&closer);
    assert!(!closer.close().unwrap(), "nothing open yet");
    let err = late.poll_once().unwrap_err();
    assert!(matches!(err, ScaleSetError::Interrupted), "{err:?}");
    assert_eq!(
        e.sim.scaleset_sessions(set),
        0,
        "the late session was left open"
    );
    assert!(!late.has_session());
}

#[test]
fn an_expired_queue_token_refreshes_the_session_once() {
    let e = env(200);
    let mut l = listener(&e, "rm-401", MemoryCheckpoint::default());
    l.poll_once().unwrap();
    e.sim.expire_queue_tokens();
    e.sim.enqueue_job(REPO, "after-expiry", &["rm-401"], 0);
    let (_, names) = assigned_names(&mut l);
    assert_eq!(names, vec!["after-expiry".to_string()]);
    assert_eq!(e.sim.count("PATCH", SESSION), 1);
    assert_eq!(e.sim.count("POST", SESSIONS), 1);
    // A refreshed token is the same session: no message can have gone elsewhere.
    assert_eq!(l.sessions_opened(), 1);
    // Scripted the other way: a 401 fault on the queue.
    e.sim.add_fault(FaultRule::times(
        "GET",
        MESSAGES,
        1,
        FaultAction::Unauthorized,
    ));
    l.poll_once().unwrap();
    assert_eq!(e.sim.count("PATCH", SESSION), 2);
}

#[test]
fn a_session_gone_on_refresh_is_created_again() {
    let e = env(200);
    let mut l = listener(&e, "rm-gone", MemoryCheckpoint::default());
    l.poll_once().unwrap();
    e.sim.add_fault(FaultRule::times(
        "GET",
        MESSAGES,
        1,
        FaultAction::Unauthorized,
    ));
    e.sim.add_fault(FaultRule::times(
        "PATCH",
        SESSION,
        1,
        FaultAction::Status { status: 404 },
    ));
    e.sim.enqueue_job(REPO, "x", &["rm-gone"], 0);
    // One poll: 401, refresh answers 404, a new session, the poll again.
    let (_, names) = assigned_names(&mut l);
    assert_eq!(names, vec!["x".to_string()]);
    assert_eq!(e.sim.count("POST", SESSIONS), 2);
    assert_eq!(l.sessions_opened(), 2);
}

#[test]
fn a_deleted_scale_set_is_created_again() {
    let e = env(200);
    let mut l = listener(&e, "rm-del", MemoryCheckpoint::default());
    l.poll_once().unwrap();
    let old = l.scale_set().unwrap().id;
    assert!(e.sim.delete_scale_set(old as u64));
    let err = l.poll_once().unwrap_err();
    assert!(err.is_scale_set_not_found(), "{err:?}");
    let r = l.poll_once().unwrap();
    assert_ne!(r.scale_set_id, old);
    let sets = e.sim.scale_sets();
    assert_eq!(sets.len(), 1);
    assert_eq!(
        (sets[0].0 as i64, sets[0].1.as_str()),
        (r.scale_set_id, "rm-del")
    );
    e.sim.enqueue_job(REPO, "y", &["rm-del"], 0);
    assert_eq!(assigned_names(&mut l).1, vec!["y".to_string()]);
}

#[test]
fn offered_jobs_are_acquired() {
    let e = env(200);
    e.sim.scaleset_config(|c| c.offer_first = true);
    let mut l = listener(&e, "rm-offer", MemoryCheckpoint::default());
    l.poll_once().unwrap();
    let job = e.sim.enqueue_job(REPO, "offered", &["rm-offer"], 0);
    let r = l.poll_once().unwrap();
    assert!(matches!(
        &r.message.unwrap().jobs[..],
        [JobMessage::Available { .. }]
    ));
    assert_eq!(r.acquired, vec![job as i64]);
    assert_eq!(assigned_names(&mut l).1, vec!["offered".to_string()]);
}

#[test]
fn shutdown_interrupts_the_backoff() {
    let mut e = env(200);
    let s = e.client.ensure_scale_set(&spec("rm-stop")).unwrap();
    e.client.create_session(s.id, "holder").unwrap();
    let mut cfg = listener_config("rm-stop");
    cfg.backoff.base = std::time::Duration::from_secs(3600);
    cfg.backoff.cap = std::time::Duration::from_secs(3600);
    let mut l = ScaleSetListener::new(e.client.clone(), cfg, Box::new(MemoryCheckpoint::default()));
    let (tx, _) = crossbeam_channel::bounded(1);
    drop(std::mem::replace(&mut e._shutdown, tx));
    let t = Instant::now();
    let err = l.poll_once().unwrap_err();
    assert_eq!(err, runner_manager::scaleset::ScaleSetError::Interrupted);
    assert!(t.elapsed().as_secs() < 60);
}
