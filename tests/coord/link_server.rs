//! The host link against the real coordinator server, over ws:// and wss://.

use crate::link::Recorder;
use crate::support::*;
use crossbeam_channel::{bounded, unbounded};
use runner_manager::coordinator::link::{LinkConfig, Report, spawn_link};
use runner_manager::coordinator::placement::JobState;
use runner_manager::coordinator::protocol::AttemptStarted;
use runner_manager::coordinator::{server, tls};
use runner_manager::secret::Secret;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A fixture's path; the private key comes as a private copy (0600), since a checkout
/// leaves it 0644 and the coordinator refuses a key others can read.
fn fixture(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/coord_tls")
        .join(name);
    if !name.ends_with(".key") {
        return path;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("rm-coord-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join(name);
    std::fs::copy(&path, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
    copy
}

fn round_trip(secure: bool) {
    let (srv, q) = if secure {
        let jobs: Queue = Default::default();
        let mut opts = server::ServeOptions::new("127.0.0.1:0".parse().unwrap());
        opts.tls =
            Some(tls::server_config(&fixture("server.pem"), &fixture("server.key")).unwrap());
        opts.tick = Duration::from_millis(20);
        opts.log = Arc::new(|_| {});
        let src = scripted(jobs.clone());
        (
            server::serve(opts, tokens(&["h1"]), vec![Box::new(src)]).unwrap(),
            jobs,
        )
    } else {
        coordinator(&["h1"], 60)
    };
    let scheme = if secure { "wss" } else { "ws" };
    let mut cfg = LinkConfig::new(
        format!("{scheme}://localhost:{}", srv.addr().port()),
        Secret::new(token_of("h1")),
        hello("h1", 3, 2),
    );
    if secure {
        cfg.ca_file = Some(fixture("ca.pem"));
    }
    cfg.backoff_min = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(200);
    cfg.log = Arc::new(|_| {});
    let rec = Arc::new(Recorder::default());
    let (rep_tx, rep_rx) = unbounded();
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let link = spawn_link(cfg, rec.clone(), rep_rx, stop_rx).unwrap();
    wait_until(10, "link up", || link.is_up());
    assert_eq!(rec.ups.lock().unwrap()[0], vec!["ht".to_string()]);
    q.lock().unwrap().push(job(5, &["linux"]));
    wait_until(10, "launch accepted", || {
        srv.placement()
            .jobs()
            .get("5")
            .is_some_and(|j| matches!(j.state, JobState::Leased { acked: true, .. }))
    });
    let lease = rec.offers.lock().unwrap()[0].clone();
    rep_tx
        .send(Report::Started(AttemptStarted {
            lease_id: Some(lease),
            runner_name: "rm-h1-1".into(),
            target: "ht".into(),
            profile: "p".into(),
        }))
        .unwrap();
    wait_until(10, "started", || {
        matches!(srv.placement().jobs()["5"].state, JobState::Started { .. })
    });
    q.lock().unwrap().clear();
    drop(stop_tx);
    link.join();
    wait_until(10, "host gone", || srv.placement().hosts().is_empty());
}

fn scripted(jobs: Queue) -> impl runner_manager::coordinator::demand::DemandSource {
    struct S(runner_manager::coordinator::placement::CoordTarget, Queue);
    impl runner_manager::coordinator::demand::DemandSource for S {
        fn target(&self) -> &runner_manager::coordinator::placement::CoordTarget {
            &self.0
        }
        fn interval(&self) -> Duration {
            Duration::from_millis(10)
        }
        fn queued(&mut self) -> Result<Vec<runner_manager::domain::QueuedJob>, String> {
            Ok(self.1.lock().unwrap().clone())
        }
    }
    S(
        runner_manager::coordinator::placement::CoordTarget {
            name: "ct".into(),
            scope: "octo/app".into(),
            api_url: "https://api.github.com".into(),
        },
        jobs,
    )
}

#[test]
fn the_link_and_the_server_agree_over_ws() {
    round_trip(false);
}

#[test]
fn the_link_and_the_server_agree_over_wss() {
    round_trip(true);
}

#[test]
fn a_wss_link_refuses_a_certificate_it_does_not_trust() {
    let mut opts = server::ServeOptions::new("127.0.0.1:0".parse().unwrap());
    opts.tls = Some(tls::server_config(&fixture("server.pem"), &fixture("server.key")).unwrap());
    opts.log = Arc::new(|_| {});
    let srv = server::serve(opts, tokens(&["h1"]), vec![]).unwrap();
    let mut cfg = LinkConfig::new(
        format!("wss://localhost:{}", srv.addr().port()),
        Secret::new(token_of("h1")),
        hello("h1", 3, 2),
    );
    cfg.backoff_min = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(50);
    let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l2 = lines.clone();
    cfg.log = Arc::new(move |l| l2.lock().unwrap().push(l.to_string()));
    let (_rep_tx, rep_rx) = unbounded::<Report>();
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let link = spawn_link(cfg, Arc::new(Recorder::default()), rep_rx, stop_rx).unwrap();
    wait_until(10, "a failed attempt logged", || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("cannot connect"))
    });
    assert!(!link.is_up());
    assert!(srv.placement().hosts().is_empty());
    drop(stop_tx);
    link.join();
}
