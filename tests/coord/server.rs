//! The coordinator server with scripted hosts on loopback.

use crate::support::*;
use runner_manager::coordinator::placement::JobState;
use runner_manager::coordinator::protocol::{
    AttemptFinished, AttemptStarted, CoordMsg, HostMsg, LaunchAck, MAX_MESSAGE, Status,
};

fn ack(lease: &str, accepted: bool, reason: Option<&str>) -> HostMsg {
    HostMsg::LaunchAck(LaunchAck {
        lease_id: lease.into(),
        accepted,
        reason: reason.map(String::from),
    })
}

#[test]
fn a_missing_or_wrong_token_is_refused_before_any_frame() {
    let (srv, _q) = coordinator(&["h1"], 60);
    assert!(matches!(dial(srv.addr(), None), Connect::Refused(401)));
    assert!(matches!(
        dial(srv.addr(), Some("guess")),
        Connect::Refused(401)
    ));
    assert!(matches!(
        dial(srv.addr(), Some(&token_of("h2"))),
        Connect::Refused(401)
    ));
    assert!(srv.placement().hosts().is_empty());
    let h = ScriptedHost::connect(srv.addr(), "h1", 3, 1);
    wait_until(5, "h1 registered", || srv.placement().hosts().len() == 1);
    drop(h);
}

#[test]
fn launches_refusals_go_to_the_next_host_and_acks_hold() {
    let (srv, q) = coordinator(&["h1", "h2"], 60);
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 4);
    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    q.lock().unwrap().push(job(1, &["self-hosted", "linux"]));
    // h1 has the most free capacity.
    let l = h1.launch(5);
    assert_eq!(
        (l.target.as_str(), l.profile.as_str(), l.job_key.as_str()),
        ("ht", "p", "1")
    );
    h1.send(&ack(&l.lease_id, false, Some("host_capacity")));
    let l2 = h2.launch(5);
    assert_eq!(l2.job_key, "1");
    assert_ne!(l2.lease_id, l.lease_id);
    h2.send(&ack(&l2.lease_id, true, None));
    wait_until(5, "accepted", || {
        matches!(
            srv.placement().jobs()["1"].state,
            JobState::Leased { acked: true, .. }
        )
    });
    assert!(
        h1.quiet_for(150).is_empty(),
        "the refusing host is not asked again"
    );
    let why = srv
        .placement()
        .hosts()
        .values()
        .find(|h| h.name == "h1")
        .and_then(|h| h.last_refusal.clone())
        .map(|(why, _)| why);
    assert_eq!(
        why.as_deref(),
        Some("host_capacity"),
        "h1's own reason is kept"
    );
    h2.send(&HostMsg::AttemptStarted(AttemptStarted {
        lease_id: Some(l2.lease_id.clone()),
        runner_name: "rm-h2-1".into(),
        target: "ht".into(),
        profile: "p".into(),
    }));
    wait_until(5, "started", || {
        matches!(srv.placement().jobs()["1"].state, JobState::Started { .. })
    });
}

#[test]
fn a_disconnect_replaces_and_a_job_leaving_the_queue_is_cancelled() {
    let (srv, q) = coordinator(&["h1", "h2"], 60);
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 4);
    q.lock().unwrap().push(job(7, &["linux"]));
    let l = h1.launch(5);
    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    drop(h1);
    let l2 = h2.launch(5);
    assert_eq!(l2.job_key, l.job_key);
    h2.send(&ack(&l2.lease_id, true, None));
    q.lock().unwrap().clear();
    match h2.next(5) {
        Some(CoordMsg::CancelLaunch { lease_id }) => assert_eq!(lease_id, l2.lease_id),
        other => panic!("expected cancel_launch, got {other:?}"),
    }
    wait_until(5, "forgotten", || srv.placement().jobs().is_empty());
}

#[test]
fn an_expired_lease_is_cancelled_and_placed_elsewhere() {
    let (srv, q) = coordinator(&["h1", "h2"], 1);
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 4);
    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    q.lock().unwrap().push(job(3, &["linux"]));
    let l = h1.launch(5);
    h1.send(&ack(&l.lease_id, true, None));
    // Nobody starts a runner: after its ttl the lease is cancelled on h1 ...
    match h1.next(5) {
        Some(CoordMsg::CancelLaunch { lease_id }) => assert_eq!(lease_id, l.lease_id),
        other => panic!("expected cancel_launch, got {other:?}"),
    }
    // ... and h2 gets it.
    assert_eq!(h2.launch(5).job_key, "3");
}

#[test]
fn a_version_2_host_stays_connected_but_is_never_directed() {
    let (srv, q) = coordinator(&["old", "new"], 60);
    let Connect::Ok(mut old) = dial(srv.addr(), Some(&token_of("old"))) else {
        panic!()
    };
    old.send(&HostMsg::Hello(hello("old", 2, 8)));
    match old.next(5) {
        Some(CoordMsg::HelloAck(a)) => {
            assert_eq!(a.version, 2);
            assert!(a.covered.is_empty());
        }
        other => panic!("expected hello_ack, got {other:?}"),
    }
    q.lock().unwrap().push(job(1, &["linux"]));
    wait_until(5, "the job is known", || srv.placement().jobs().len() == 1);
    assert!(old.quiet_for(200).is_empty());
    let mut new = ScriptedHost::connect(srv.addr(), "new", 3, 1);
    assert_eq!(new.launch(5).job_key, "1");
    assert!(old.quiet_for(100).is_empty());
    assert_eq!(
        srv.placement().hosts().len(),
        2,
        "the old host stays connected"
    );
}

#[test]
fn unknown_frames_are_skipped_malformed_and_oversized_ones_close() {
    let (srv, q) = coordinator(&["h1", "h2", "h3"], 60);
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 1);
    h1.send_raw(r#"{"type":"gossip","about":"weather"}"#.into());
    h1.send(&HostMsg::Status(Status {
        free: 3,
        draining: false,
        unfit: vec![],
        meters: Default::default(),
        ..Default::default()
    }));
    wait_until(5, "status after an unknown frame", || {
        srv.placement().hosts().values().any(|h| h.free == 3)
    });
    q.lock().unwrap().push(job(1, &["linux"]));
    assert_eq!(h1.launch(5).job_key, "1", "still connected and directed");

    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    h2.send_raw("{not json".into());
    assert!(h2.closed_within(5), "malformed frame closes");

    let mut h3 = ScriptedHost::connect(srv.addr(), "h3", 3, 1);
    let pad = "x".repeat(MAX_MESSAGE + 10);
    // The send may fail once the server closes mid-frame; either way it must close.
    let _ = h3.ws.send(tungstenite::Message::text(format!(
        r#"{{"type":"status","free":1,"draining":false,"pad":"{pad}"}}"#
    )));
    assert!(h3.closed_within(5), "oversized frame closes");
    wait_until(5, "h2 and h3 gone", || srv.placement().hosts().len() == 1);
}

fn started_frame(lease: &str, runner: &str) -> HostMsg {
    HostMsg::AttemptStarted(AttemptStarted {
        lease_id: Some(lease.into()),
        runner_name: runner.into(),
        target: "ht".into(),
        profile: "p".into(),
    })
}

/// Frames from one connection reach the placer in order: once a status with this
/// `free` shows, every frame `h` sent before it has been handled.
fn handled(
    srv: &runner_manager::coordinator::server::ServerHandle,
    h: &mut ScriptedHost,
    free: u32,
) {
    h.send(&HostMsg::Status(Status {
        free,
        draining: false,
        unfit: vec![],
        meters: Default::default(),
        ..Default::default()
    }));
    wait_until(5, "the marker status", || {
        srv.placement().hosts().values().any(|v| v.free == free)
    });
}

#[test]
fn a_host_cannot_start_finish_or_refuse_another_hosts_lease() {
    let (srv, q) = coordinator(&["h1", "h2"], 60);
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 4);
    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    q.lock().unwrap().push(job(1, &["linux"]));
    let l = h1.launch(5);
    assert_eq!(l.lease_id.len(), 32, "128 random bits: {}", l.lease_id);
    h1.send(&ack(&l.lease_id, true, None));
    // h2 claims h1's lease, reports its runner done, and refuses it.
    h2.send(&started_frame(&l.lease_id, "rm-h2-1"));
    h2.send(&HostMsg::AttemptFinished(AttemptFinished {
        lease_id: Some(l.lease_id.clone()),
        runner_name: "rm-h2-1".into(),
        outcome: "completed_job".into(),
        duration_secs: None,
        usage: None,
    }));
    h2.send(&ack(&l.lease_id, false, Some("other")));
    handled(&srv, &mut h2, 9);
    match &srv.placement().jobs()["1"].state {
        JobState::Leased { lease_id, host, .. } => {
            assert_eq!((lease_id, host.as_str()), (&l.lease_id, "h1"))
        }
        other => panic!("h2 moved h1's lease: {other:?}"),
    }
    // The next frame h1 sees is the cancel for the job leaving the queue: no second
    // launch for the same job came before it.
    q.lock().unwrap().clear();
    match h1.next(5) {
        Some(CoordMsg::CancelLaunch { lease_id }) => assert_eq!(lease_id, l.lease_id),
        other => panic!("expected cancel_launch of h1's lease, got {other:?}"),
    }
}

#[test]
fn a_replayed_old_lease_does_not_cancel_the_current_one() {
    let (srv, q) = coordinator(&["h1", "h2"], 60);
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 4);
    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    q.lock().unwrap().push(job(1, &["linux"]));
    let old = h1.launch(5);
    q.lock().unwrap().clear();
    match h1.next(5) {
        Some(CoordMsg::CancelLaunch { lease_id }) => assert_eq!(lease_id, old.lease_id),
        other => panic!("expected cancel_launch, got {other:?}"),
    }
    // The job is queued again and leased to h1 under a new id.
    q.lock().unwrap().push(job(1, &["linux"]));
    let new = h1.launch(5);
    assert_ne!(new.lease_id, old.lease_id);
    // h2 replays the old id it learnt somehow.
    h2.send(&started_frame(&old.lease_id, "rm-h2-1"));
    handled(&srv, &mut h2, 9);
    assert!(
        matches!(&srv.placement().jobs()["1"].state,
            JobState::Leased { lease_id, .. } if *lease_id == new.lease_id),
        "{:?}",
        srv.placement().jobs()["1"].state
    );
    q.lock().unwrap().clear();
    match h1.next(5) {
        Some(CoordMsg::CancelLaunch { lease_id }) => assert_eq!(lease_id, new.lease_id),
        other => panic!("expected cancel_launch of the current lease, got {other:?}"),
    }
}

/// A client that never finishes its handshake: it sends the start of an upgrade
/// request and then, when asked, one more byte at a time.
/// A client in the middle of its HTTP upgrade that sends one byte at a time: each
/// byte continues a well-formed header (`X-Pad: 0` lines), so nothing but a deadline
/// on the whole handshake ends it.
struct Trickler(std::net::TcpStream, usize);

impl Trickler {
    fn open(addr: std::net::SocketAddr) -> Trickler {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(100)))
            .unwrap();
        Trickler(s, 0)
    }

    /// Sends one more header byte, then waits up to the read timeout for the server
    /// to end the connection. Whether it has.
    fn trickle_closed(&mut self) -> bool {
        use std::io::{Read, Write};
        const PAD: &[u8] = b"X-Pad: 0\r\n";
        let byte = PAD[self.1 % PAD.len()];
        self.1 += 1;
        if self.0.write_all(&[byte]).is_err() {
            return true;
        }
        let mut b = [0u8; 256];
        match self.0.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }
}

#[test]
fn a_handshake_trickled_a_byte_at_a_time_still_ends_at_its_deadline() {
    // The handshake as a whole gets 500 ms; each read alone would never time out,
    // since a byte comes every 100 ms.
    let (srv, _q, _t) = coordinator_with(&["h1"], 60, |o| {
        o.handshake_timeout = std::time::Duration::from_millis(500)
    });
    let mut t = Trickler::open(srv.addr());
    let mut closed = false;
    // At 100 ms a byte, 40 bytes take 4 s: eight deadlines. (Without the deadline,
    // something else ends such a connection after some 64 bytes, 6.7 s here.)
    for _ in 0..40 {
        if t.trickle_closed() {
            closed = true;
            break;
        }
    }
    assert!(closed, "a trickling client kept its connection");
    wait_until(5, "the gate is empty", || srv.unauthenticated() == 0);
}

fn flood_then_a_host_gets_in(per_source: usize, total: usize) {
    let (srv, q, _t) = coordinator_with(&["h1"], 60, |o| {
        o.max_unauthenticated = total;
        o.max_unauthenticated_per_source = per_source;
        o.max_connections = 1;
        o.handshake_timeout = std::time::Duration::from_secs(60);
    });
    let n = 12;
    let mut slow: Vec<Trickler> = (0..n).map(|_| Trickler::open(srv.addr())).collect();
    let cap = per_source.min(total);
    // Each admission past the cap closes one: once `n - cap` are closed, all are in.
    let mut closed = vec![false; n];
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while closed.iter().filter(|c| **c).count() < n - cap {
        assert!(std::time::Instant::now() < end, "closed: {closed:?}");
        for (i, t) in slow.iter_mut().enumerate() {
            closed[i] = closed[i] || t.trickle_closed();
        }
    }
    assert!(
        closed[..n - cap].iter().all(|c| *c),
        "oldest first: {closed:?}"
    );
    assert_eq!(srv.unauthenticated(), cap);
    // A real host still gets in, and is directed.
    let mut h = ScriptedHost::connect(srv.addr(), "h1", 3, 1);
    q.lock().unwrap().push(job(1, &["linux"]));
    assert_eq!(h.launch(5).job_key, "1");
    assert!(srv.unauthenticated() <= cap);
}

#[test]
fn unauthenticated_connections_are_capped_per_source_and_a_host_still_gets_in() {
    flood_then_a_host_gets_in(3, 100);
}

#[test]
fn unauthenticated_connections_are_capped_in_total_and_a_host_still_gets_in() {
    flood_then_a_host_gets_in(100, 4);
}

#[test]
fn hosts_are_capped_apart_from_unauthenticated_connections() {
    let (srv, _q, _t) = coordinator_with(&["h1", "h2"], 60, |o| o.max_connections = 1);
    let _h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 1);
    match dial(srv.addr(), Some(&token_of("h2"))) {
        Connect::Refused(503) => {}
        Connect::Refused(c) => panic!("expected 503, got {c}"),
        Connect::Ok(_) => panic!("a second host past max_connections got in"),
    }
}

#[test]
fn a_removed_host_is_cut_off_and_its_lease_placed_elsewhere() {
    let (srv, q, book) = coordinator_with(&["h1", "h2"], 60, |_| {});
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 4);
    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    q.lock().unwrap().push(job(1, &["linux"]));
    let l = h1.launch(5);
    h1.send(&ack(&l.lease_id, true, None));
    book.remove("h1");
    // h1 gets a close frame that says why, then nothing more.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let close = loop {
        assert!(std::time::Instant::now() < end, "h1 was not closed");
        match h1.ws.read() {
            Ok(tungstenite::Message::Close(f)) => break f,
            Ok(tungstenite::Message::Text(t)) => panic!("h1 got a frame after removal: {t}"),
            Ok(_) => {}
            Err(tungstenite::Error::Io(_)) => {}
            Err(e) => panic!("closed without a close frame: {e}"),
        }
    };
    let close = close.expect("a close frame with a code");
    assert_eq!(
        close.code,
        tungstenite::protocol::frame::coding::CloseCode::Policy
    );
    assert_eq!(close.reason.as_str(), "host removed");
    let l2 = h2.launch(5);
    assert_eq!(l2.job_key, "1");
    assert_ne!(l2.lease_id, l.lease_id);
    assert!(matches!(
        dial(srv.addr(), Some(&token_of("h1"))),
        Connect::Refused(401)
    ));
}
