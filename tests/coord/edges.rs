//! Protocol edges (issue 17, item 5): how a host that speaks an old version, floods
//! unknown frames or sends control characters is met, and what the coordinator's own
//! stop says, all at the level of the frames and the log.

use crate::support::*;
use runner_manager::coordinator::protocol::{AttemptStarted, HostMsg, Status};
use runner_manager::coordinator::server::UNKNOWN_FRAME_LINES;
use std::sync::{Arc, Mutex};
use tungstenite::protocol::frame::coding::CloseCode;

const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");

fn said(lines: &Arc<Mutex<Vec<String>>>, what: &str) -> usize {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(what))
        .count()
}

#[test]
fn a_version_1_host_is_closed_with_1002_and_a_reason_naming_its_version() {
    let (log, lines) = captured_log();
    let (srv, _q, _) = coordinator_with(&["old"], 60, |o| o.log = log);
    let Connect::Ok(mut old) = dial(srv.addr(), Some(&token_of("old"))) else {
        panic!("old refused")
    };
    old.send(&HostMsg::Hello(hello("old", 1, 4)));
    let close = old.close_frame(5).expect("a close frame with a code");
    assert_eq!(close.code, CloseCode::Protocol, "1002");
    assert!(
        close.reason.as_str().contains("protocol version 1"),
        "{}",
        close.reason
    );
    wait_until(5, "the log says why", || {
        said(
            &lines,
            "host old disconnected: protocol version 1 is not supported",
        ) == 1
    });
    assert_eq!(said(&lines, "replaced"), 0, "{:?}", lines.lock().unwrap());
    assert!(srv.placement().hosts().is_empty());
}

#[test]
fn the_coordinators_own_stop_closes_hosts_as_stopping_not_replaced() {
    let (log, lines) = captured_log();
    let (mut srv, _q, _) = coordinator_with(&["h1", "h2"], 60, |o| o.log = log);
    let mut hosts = [
        ScriptedHost::connect(srv.addr(), "h1", 3, 1),
        ScriptedHost::connect(srv.addr(), "h2", 3, 1),
    ];
    srv.shutdown();
    for h in &mut hosts {
        let close = h.close_frame(5).expect("a close frame with a code");
        assert_eq!(close.code, CloseCode::Away, "1001");
        assert_eq!(close.reason.as_str(), "coordinator stopping");
    }
    wait_until(5, "both hosts logged as closed by the stop", || {
        said(&lines, "disconnected: coordinator stopping") == 2
    });
    assert_eq!(said(&lines, "replaced"), 0, "{:?}", lines.lock().unwrap());
}

#[test]
fn unknown_frames_are_logged_a_few_times_a_minute_per_connection() {
    let (log, lines) = captured_log();
    let (srv, q, _) = coordinator_with(&["h1", "h2"], 60, |o| o.log = log);
    let mut h1 = ScriptedHost::connect(srv.addr(), "h1", 3, 1);
    for i in 0..500 {
        h1.send_raw(format!(r#"{{"type":"gossip{i}"}}"#));
    }
    h1.send(&HostMsg::Status(Status {
        free: 7,
        draining: false,
        unfit: vec![],
        meters: Default::default(),
        ..Default::default()
    }));
    wait_until(10, "the status after the flood", || {
        srv.placement().hosts().values().any(|h| h.free == 7)
    });
    let logged = said(&lines, "unknown frame type");
    assert_eq!(
        logged, UNKNOWN_FRAME_LINES as usize,
        "{logged} lines logged"
    );
    // Still connected and directed.
    q.lock().unwrap().push(job(1, &["linux"]));
    assert_eq!(h1.launch(5).job_key, "1");
    // Another connection has its own allowance.
    let mut h2 = ScriptedHost::connect(srv.addr(), "h2", 3, 1);
    h2.send_raw(r#"{"type":"gossip-h2"}"#.into());
    wait_until(5, "h2's unknown frame logged", || {
        said(&lines, "host h2: unknown frame type") == 1
    });
}

/// What a host names (its profiles, its runners, its arch) is escaped before the
/// coordinator keeps it, so `coordinator hosts|leases` and `top` never write a host's
/// escape sequences to a terminal.
#[test]
fn control_characters_from_a_host_never_reach_the_terminal_raw() {
    let dir = std::env::temp_dir().join(format!("rm-coord-esc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let show = |args: &[&str]| {
        let o = std::process::Command::new(BIN)
            .arg("--state-dir")
            .arg(&dir)
            .args(args)
            .env_remove("RUNNER_MANAGER_STATE_DIR")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    // The store's host row, which the live view fills in (the test's token book is
    // its own, so the token printed here is not used).
    show(&["coordinator", "host", "add", "h1"]);
    let d2 = dir.clone();
    let (srv, q, _) = coordinator_with(&["h1"], 60, |o| o.store_dir = Some(d2));
    let Connect::Ok(mut h1) = dial(srv.addr(), Some(&token_of("h1"))) else {
        panic!("h1 refused")
    };
    let mut hi = hello("h1", 3, 2);
    hi.host.arch = "x86_64\u{1b}]0;owned\u{7}".into();
    hi.host.id = "0123\u{1b}[2J".into();
    hi.profiles[0].name = "p\u{1b}[2J\u{1b}[H".into();
    h1.send(&HostMsg::Hello(hi));
    assert!(h1.next(5).is_some(), "hello_ack");
    q.lock().unwrap().push(job(1, &["linux"]));
    let l = h1.launch(5);
    assert_eq!(
        l.profile, "p\\u{1b}[2J\\u{1b}[H",
        "escaped before placement"
    );
    h1.send(&HostMsg::AttemptStarted(AttemptStarted {
        lease_id: Some(l.lease_id.clone()),
        runner_name: "rm-1\u{1b}[31mred\u{9b}".into(),
        target: "ht".into(),
        profile: l.profile.clone(),
    }));
    h1.send(&HostMsg::Status(Status {
        free: 1,
        draining: false,
        unfit: vec!["u\u{1b}c".into()],
        meters: Default::default(),
        ..Default::default()
    }));
    wait_until(10, "the view shows the started runner", || {
        show(&["coordinator", "leases"]).contains("red")
    });
    wait_until(10, "the view shows the host's report", || {
        show(&["--json", "coordinator", "hosts"]).contains("u\\\\u{1b}c")
    });
    for args in [
        &["coordinator", "leases"][..],
        &["coordinator", "hosts"],
        &["--json", "coordinator", "leases"],
        &["--json", "coordinator", "hosts"],
    ] {
        let out = show(args);
        assert!(
            !out.chars().any(|c| c.is_control() && c != '\n'),
            "{args:?} printed a control character: {out:?}"
        );
    }
    let leases = show(&["coordinator", "leases"]);
    assert!(leases.contains("rm-1\\u{1b}[31mred\\u{9b}"), "{leases}");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The host's side of a coordinator stop: its link says the coordinator is stopping
/// (the close frame's code and reason), not only that the link was lost.
#[test]
fn a_host_link_logs_why_the_coordinator_closed_it() {
    use crossbeam_channel::{bounded, unbounded};
    use runner_manager::coordinator::link::{LinkConfig, Report, spawn_link};
    use runner_manager::secret::Secret;
    let (mut srv, _q) = coordinator(&["h1"], 60);
    let mut cfg = LinkConfig::new(
        format!("ws://{}", srv.addr()),
        Secret::new(token_of("h1")),
        hello("h1", 3, 2),
    );
    cfg.backoff_min = std::time::Duration::from_millis(20);
    cfg.backoff_max = std::time::Duration::from_millis(200);
    let (log, lines) = captured_log();
    cfg.log = log;
    let (_rep_tx, rep_rx) = unbounded::<Report>();
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let rec = Arc::new(crate::link::Recorder::default());
    let link = spawn_link(cfg, rec, rep_rx, stop_rx).unwrap();
    wait_until(10, "link up", || link.is_up());
    srv.shutdown();
    wait_until(10, "the link says why it was closed", || {
        said(
            &lines,
            "closed by the coordinator (1001): coordinator stopping",
        ) == 1
    });
    drop(stop_tx);
    link.join();
}
