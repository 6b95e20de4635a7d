//! The coordinator server with scripted hosts on loopback.

use crate::support::*;
use runner_manager::coordinator::placement::Phase;
use runner_manager::coordinator::protocol::{
    AttemptStarted, CoordMsg, HostMsg, LaunchAck, MAX_MESSAGE, Status,
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
            srv.placement().jobs()["1"].phase,
            Phase::Leased { acked: true, .. }
        )
    });
    assert!(
        h1.quiet_for(150).is_empty(),
        "the refusing host is not asked again"
    );
    h2.send(&HostMsg::AttemptStarted(AttemptStarted {
        lease_id: Some(l2.lease_id.clone()),
        runner_name: "rm-h2-1".into(),
        target: "ht".into(),
        profile: "p".into(),
    }));
    wait_until(5, "started", || {
        matches!(srv.placement().jobs()["1"].phase, Phase::Started { .. })
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
