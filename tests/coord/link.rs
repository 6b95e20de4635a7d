//! The host link against a scripted coordinator (a plain tungstenite server).

use crate::support::{hello, wait_until};
use crossbeam_channel::{bounded, unbounded};
use runner_manager::coordinator::link::{LaunchHandler, LinkConfig, Report, spawn_link};
use runner_manager::coordinator::protocol::{
    AttemptFinished, AttemptStarted, CoordMsg, HelloAck, HostMsg, LaunchFrame, Status, UsageReport,
};
use runner_manager::domain::rollup::{UsageFigures, UsageKey};
use runner_manager::reconcile::launch_book::{Accepted, Launch, Refusal};
use runner_manager::secret::Secret;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::{Message, WebSocket};

#[derive(Default)]
pub struct Recorder {
    pub offers: Mutex<Vec<String>>,
    pub cancels: Mutex<Vec<String>>,
    pub ups: Mutex<Vec<Vec<String>>>,
    pub lost: Mutex<u32>,
}

impl LaunchHandler for Recorder {
    fn offer(&self, l: &Launch) -> Result<Accepted, Refusal> {
        self.offers.lock().unwrap().push(l.lease_id.clone());
        if l.profile == "p" {
            Ok(Accepted::StartRunner)
        } else {
            Err(Refusal::UnknownProfile)
        }
    }
    fn cancel(&self, lease_id: &str) {
        self.cancels.lock().unwrap().push(lease_id.to_string());
    }
    fn link_up(&self, covered: &[String]) {
        self.ups.lock().unwrap().push(covered.to_vec());
    }
    fn link_lost(&self) {
        *self.lost.lock().unwrap() += 1;
    }
}

/// Accepts one connection, checking the bearer token in the handshake.
#[allow(clippy::result_large_err)]
fn accept(l: &TcpListener, token: &str) -> WebSocket<TcpStream> {
    let (tcp, _) = l.accept().unwrap();
    let want = format!("Bearer {token}");
    let cb = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let got = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        assert_eq!(got, Some(want.as_str()), "the token in the handshake");
        Ok(resp)
    };
    let ws = tungstenite::accept_hdr(tcp, cb).unwrap();
    ws.get_ref()
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    ws
}

fn next(ws: &mut WebSocket<TcpStream>, secs: u64) -> Option<HostMsg> {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        match ws.read() {
            Ok(Message::Text(t)) => return Some(HostMsg::decode(t.as_str()).unwrap()),
            Ok(_) => {}
            Err(tungstenite::Error::Io(_)) => {}
            Err(_) => return None,
        }
    }
    None
}

fn send(ws: &mut WebSocket<TcpStream>, m: &CoordMsg) {
    ws.send(Message::text(m.encode())).unwrap();
}

/// The link's configuration for host `h1` (version 3, capacity 4) dialing `listener`
/// with `token`, logging nowhere.
fn config(listener: &TcpListener, token: &str) -> LinkConfig {
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let mut cfg = LinkConfig::new(url, Secret::new(token), hello("h1", 3, 4));
    cfg.log = Arc::new(|_| {});
    cfg
}

/// The coordinator's answer to hello at `version`, covering target `ht`.
fn hello_ack(version: u32) -> CoordMsg {
    CoordMsg::HelloAck(HelloAck {
        version,
        reconcile_interval_secs: None,
        covered: vec!["ht".into()],
        ..Default::default()
    })
}

fn launch(lease: &str, profile: &str) -> CoordMsg {
    CoordMsg::Launch(LaunchFrame {
        target: "ht".into(),
        profile: profile.into(),
        job_key: "9".into(),
        lease_id: lease.into(),
        expires_at: "2030-01-01T00:00:00Z".into(),
        ttl_secs: 60,
    })
}

fn started(runner: &str) -> Report {
    Report::Started(AttemptStarted {
        lease_id: Some("L1".into()),
        runner_name: runner.into(),
        target: "ht".into(),
        profile: "p".into(),
    })
}

#[test]
fn hello_launch_ack_cancel_reports_once_and_reconnect() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(&listener, "tok-123");
    cfg.backoff_min = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(100);
    cfg.ping_interval = Duration::from_millis(500);
    let rec = Arc::new(Recorder::default());
    let (rep_tx, rep_rx) = unbounded();
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let link = spawn_link(cfg, rec.clone(), rep_rx, stop_rx).unwrap();

    let mut ws = accept(&listener, "tok-123");
    match next(&mut ws, 5) {
        Some(HostMsg::Hello(h)) => {
            assert_eq!(h.version, 3);
            assert_eq!(h.host.name, "h1");
            assert_eq!(h.profiles[0].name, "p");
        }
        other => panic!("expected hello, got {other:?}"),
    }
    send(&mut ws, &hello_ack(3));
    wait_until(5, "link up", || link.is_up());
    assert_eq!(
        rec.ups.lock().unwrap().clone(),
        vec![vec!["ht".to_string()]]
    );

    send(&mut ws, &launch("L1", "p"));
    match next(&mut ws, 5) {
        Some(HostMsg::LaunchAck(a)) => {
            assert_eq!(
                (a.lease_id.as_str(), a.accepted, a.reason),
                ("L1", true, None)
            )
        }
        other => panic!("expected launch_ack, got {other:?}"),
    }
    send(&mut ws, &launch("L2", "nope"));
    match next(&mut ws, 5) {
        Some(HostMsg::LaunchAck(a)) => {
            assert!(!a.accepted);
            assert_eq!(a.reason.as_deref(), Some("unknown_profile"));
        }
        other => panic!("expected launch_ack, got {other:?}"),
    }
    // An unknown frame type is skipped; the link goes on.
    ws.send(Message::text(r#"{"type":"weather","sunny":true}"#))
        .unwrap();
    send(
        &mut ws,
        &CoordMsg::CancelLaunch {
            lease_id: "L1".into(),
        },
    );
    wait_until(5, "cancel handed on", || {
        rec.cancels.lock().unwrap().len() == 1
    });

    // Reports: the same attempt's start twice goes out once.
    rep_tx.send(started("rm-h1-1")).unwrap();
    rep_tx.send(started("rm-h1-1")).unwrap();
    rep_tx
        .send(Report::Status(Status {
            free: 3,
            draining: false,
            unfit: vec![],
            meters: Default::default(),
            ..Default::default()
        }))
        .unwrap();
    let mut got = Vec::new();
    while let Some(m) = next(&mut ws, 1) {
        got.push(m);
        if got.len() == 3 {
            break;
        }
    }
    let starts = got
        .iter()
        .filter(|m| matches!(m, HostMsg::AttemptStarted(_)))
        .count();
    assert_eq!(starts, 1, "{got:?}");
    assert!(
        got.iter()
            .any(|m| matches!(m, HostMsg::Status(s) if s.free == 3))
    );

    // The coordinator drops the connection: link_lost, then a new hello.
    drop(ws);
    let mut ws = accept(&listener, "tok-123");
    wait_until(5, "link_lost", || *rec.lost.lock().unwrap() == 1);
    assert!(matches!(next(&mut ws, 5), Some(HostMsg::Hello(_))));
    send(&mut ws, &hello_ack(3));
    wait_until(5, "up again", || link.is_up() && link.connects() == 2);
    // Already reported before the drop: never again; a finish is new.
    rep_tx.send(started("rm-h1-1")).unwrap();
    rep_tx
        .send(Report::Finished(AttemptFinished {
            lease_id: Some("L1".into()),
            runner_name: "rm-h1-1".into(),
            outcome: "completed_job".into(),
            duration_secs: Some(2),
            usage: None,
        }))
        .unwrap();
    match next(&mut ws, 5) {
        Some(HostMsg::AttemptFinished(f)) => assert_eq!(f.runner_name, "rm-h1-1"),
        other => panic!("expected attempt_finished only, got {other:?}"),
    }
    assert!(
        next(&mut ws, 1).is_none(),
        "the start reported before the drop is not sent again"
    );

    // Shutdown ends the link promptly, even though the coordinator stays.
    drop(stop_tx);
    link.join();
    assert!(next(&mut ws, 2).is_none(), "closed on shutdown");
}

#[test]
fn an_older_coordinator_directs_nothing_and_shutdown_interrupts_backoff() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(&listener, "t");
    cfg.backoff_min = Duration::from_secs(60);
    cfg.backoff_max = Duration::from_secs(60);
    let rec = Arc::new(Recorder::default());
    let (_rep_tx, rep_rx) = unbounded::<Report>();
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let link = spawn_link(cfg, rec.clone(), rep_rx, stop_rx).unwrap();
    let mut ws = accept(&listener, "t");
    assert!(matches!(next(&mut ws, 5), Some(HostMsg::Hello(_))));
    send(&mut ws, &hello_ack(2));
    wait_until(5, "link up", || link.is_up());
    assert_eq!(rec.ups.lock().unwrap()[0], Vec::<String>::new());
    drop(ws);
    wait_until(5, "link_lost", || *rec.lost.lock().unwrap() == 1);
    // Now in a 60 s backoff: shutdown must end it at once.
    let t = Instant::now();
    drop(stop_tx);
    link.join();
    assert!(t.elapsed() < Duration::from_secs(30));
}

/// A host whose roll-up holds rows numbered 1..=100.
struct Rows;

impl LaunchHandler for Rows {
    fn offer(&self, _: &Launch) -> Result<Accepted, Refusal> {
        Err(Refusal::Other)
    }
    fn cancel(&self, _: &str) {}
    fn link_up(&self, _: &[String]) {}
    fn link_lost(&self) {}
    fn usage_after(&self, after: i64, limit: usize) -> Vec<(i64, UsageReport)> {
        ((after + 1)..=100)
            .take(limit)
            .map(|seq| {
                let key = UsageKey {
                    day: 20_000,
                    repo: format!("o/r{seq}"),
                    workflow: "CI".into(),
                    job: "build".into(),
                    profile: "p".into(),
                };
                (seq, UsageReport::bounded(key, UsageFigures::default()))
            })
            .collect()
    }
}

/// The next status frame the host sends, with whatever usage rows it carries.
fn rows_sent(ws: &mut WebSocket<TcpStream>, rep: &crossbeam_channel::Sender<Report>) -> Status {
    rep.send(Report::Status(Status::default())).unwrap();
    match next(ws, 5) {
        Some(HostMsg::Status(s)) => s,
        other => panic!("expected a status, got {other:?}"),
    }
}

/// The rows go in batches from where the coordinator says it has them, each batch
/// resuming after the last; a reconnect resumes where the coordinator says again; a
/// coordinator that does not say (an older build) gets none.
#[test]
fn usage_rows_go_in_batches_from_where_the_coordinator_has_them() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(&listener, "t");
    cfg.backoff_min = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(100);
    let (rep_tx, rep_rx) = unbounded::<Report>();
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let link = spawn_link(cfg, Arc::new(Rows), rep_rx, stop_rx).unwrap();
    let ack = |after: Option<i64>| {
        CoordMsg::HelloAck(HelloAck {
            version: 3,
            usage_after: after,
            ..Default::default()
        })
    };
    let seqs = |s: &Status| (s.usage.len(), s.usage_upto);
    for (connects, after, want) in [
        (1, Some(0), [(64, Some(64)), (36, Some(100)), (0, None)]),
        (2, Some(50), [(50, Some(100)), (0, None), (0, None)]),
        (3, None, [(0, None), (0, None), (0, None)]),
    ] {
        let mut ws = accept(&listener, "t");
        assert!(matches!(next(&mut ws, 5), Some(HostMsg::Hello(_))));
        send(&mut ws, &ack(after));
        wait_until(5, "link up", || link.is_up() && link.connects() == connects);
        for w in want {
            assert_eq!(seqs(&rows_sent(&mut ws, &rep_tx)), w, "after {after:?}");
        }
        drop(ws);
        wait_until(5, "link down", || !link.is_up());
    }
    drop(stop_tx);
    link.join();
}
