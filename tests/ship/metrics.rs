//! The metrics listener on loopback: scraped over a real socket and parsed strictly.

use crate::exposition::parse;
use runner_manager::metrics::{Metrics, names, serve, serve_on};
use runner_manager::sim::client::request;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn busy_registry() -> Arc<Metrics> {
    let m = Arc::new(Metrics::new());
    m.set_runners(&[
        ("gpu", "idle", 2),
        ("gpu", "busy", 3),
        ("cpu \"small\"", "starting", 1),
    ]);
    m.set_demand("gpu", 5);
    m.runner_started("gpu");
    m.runner_failed("gpu", "bootstrap_timeout");
    m.runner_failed("cpu", "exit code 1\nthen \\ more");
    for s in [0.4, 3.0, 12.0, 45.0, 2000.0] {
        m.queue_to_start("gpu", s);
    }
    m.queue_to_start("cpu", 1.0);
    m.github_request("t", "/repos/{owner}/{repo}/actions/runs", 200);
    m.github_request("t", "/repos/{owner}/{repo}/actions/runs", 304);
    m.set_rate_limit_remaining("t", 4999);
    m.set_link_mode("t", "coordinated");
    m.pass_cpu("t", 0.0004);
    m
}

#[test]
fn a_scrape_parses_strictly_and_carries_every_metric() {
    let m = busy_registry();
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    let (addr, thread) = serve_on(loopback(), m.clone(), rx).expect("listener starts");
    let base = format!("http://{addr}");
    let r = request(&base, "GET", "/metrics", &[], None, Duration::from_secs(5)).unwrap();
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = String::from_utf8(r.body).unwrap();
    let fams = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for name in [
        names::RUNNERS,
        names::DEMAND,
        names::STARTS,
        names::FAILURES,
        names::QUEUE_TO_START,
        names::GITHUB_REQUESTS,
        names::RATE_LIMIT_REMAINING,
        names::LINK_MODE,
        names::BUILD_INFO,
        names::PASS_CPU,
    ] {
        assert!(!fams[name].samples.is_empty(), "{name} has samples");
        assert!(!fams[name].help.is_empty(), "{name} has help");
    }
    assert_eq!(fams[names::QUEUE_TO_START].kind, "histogram");
    assert_eq!(fams[names::PASS_CPU].kind, "histogram");
    assert_eq!(fams[names::STARTS].kind, "counter");
    let find = |fam: &str, sample: &str, labels: &[(&str, &str)]| {
        fams[fam]
            .samples
            .iter()
            .find(|s| {
                s.name == sample
                    && labels.len() == s.labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.iter().any(|(a, b)| a == k && b == v))
            })
            .map(|s| s.value)
    };
    let reason = "exit code 1\nthen \\ more";
    assert_eq!(
        find(
            names::FAILURES,
            names::FAILURES,
            &[("profile", "cpu"), ("reason", reason)]
        ),
        Some(1.0)
    );
    assert_eq!(
        find(
            names::RUNNERS,
            names::RUNNERS,
            &[("profile", "cpu \"small\""), ("state", "starting")]
        ),
        Some(1.0)
    );
    let count = format!("{}_count", names::QUEUE_TO_START);
    assert_eq!(
        find(names::QUEUE_TO_START, &count, &[("profile", "gpu")]),
        Some(5.0)
    );
    let bucket = format!("{}_bucket", names::QUEUE_TO_START);
    assert_eq!(
        find(
            names::QUEUE_TO_START,
            &bucket,
            &[("profile", "gpu"), ("le", "5")]
        ),
        Some(2.0)
    );
    assert_eq!(
        find(
            names::QUEUE_TO_START,
            &bucket,
            &[("profile", "gpu"), ("le", "+Inf")]
        ),
        Some(5.0)
    );
    assert_eq!(
        find(
            names::LINK_MODE,
            names::LINK_MODE,
            &[("target", "t"), ("mode", "coordinated")]
        ),
        Some(1.0)
    );
    assert_eq!(
        find(
            names::LINK_MODE,
            names::LINK_MODE,
            &[("target", "t"), ("mode", "fallback")]
        ),
        Some(0.0)
    );
    assert_eq!(
        find(
            names::GITHUB_REQUESTS,
            names::GITHUB_REQUESTS,
            &[
                ("target", "t"),
                ("endpoint", "/repos/{owner}/{repo}/actions/runs"),
                ("status", "304")
            ]
        ),
        Some(1.0)
    );

    let r = request(&base, "GET", "/nope", &[], None, Duration::from_secs(5)).unwrap();
    assert_eq!(r.status, 404);
    let r = request(
        &base,
        "POST",
        "/metrics",
        &[],
        Some(b""),
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(r.status, 405);
    drop(tx);
    thread.join().unwrap();
    assert!(
        request(&base, "GET", "/metrics", &[], None, Duration::from_secs(2)).is_err(),
        "the listener is closed after shutdown"
    );
}

#[test]
fn healthz_follows_the_freshness_check() {
    let m = Arc::new(Metrics::new());
    let fresh = Arc::new(AtomicBool::new(true));
    let f = fresh.clone();
    m.set_freshness_check(move || f.load(Ordering::SeqCst));
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    let (addr, thread) = serve_on(loopback(), m, rx).unwrap();
    let base = format!("http://{addr}");
    let r = request(&base, "GET", "/healthz", &[], None, Duration::from_secs(5)).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, b"ok\n".as_slice()));
    fresh.store(false, Ordering::SeqCst);
    let r = request(&base, "GET", "/healthz", &[], None, Duration::from_secs(5)).unwrap();
    assert_eq!(r.status, 503);
    assert!(String::from_utf8_lossy(&r.body).contains("stale"));
    tx.send(()).unwrap();
    thread.join().unwrap();
}

#[test]
fn non_loopback_addresses_are_refused_before_binding() {
    for a in ["0.0.0.0:9464", "192.0.2.1:9464", "[::]:9464"] {
        let (_tx, rx) = crossbeam_channel::bounded::<()>(1);
        let e = serve(a.parse().unwrap(), Arc::new(Metrics::new()), rx).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("not a loopback address"), "{e}");
    }
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    match serve_on("[::1]:0".parse().unwrap(), Arc::new(Metrics::new()), rx) {
        Ok((_, t)) => {
            drop(tx);
            t.join().unwrap();
        }
        // A host without IPv6 cannot bind ::1; the address itself was accepted.
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::AddrNotAvailable, "{e}"),
    }
}

#[test]
fn updates_from_many_threads_are_all_counted() {
    let m = Arc::new(Metrics::new());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let m = m.clone();
            std::thread::spawn(move || {
                for n in 0..1000 {
                    m.runner_started("p");
                    m.queue_to_start("p", (n % 50) as f64);
                    m.set_demand(&format!("p{i}"), n);
                }
            })
        })
        .collect();
    for _ in 0..20 {
        parse(&m.render()).expect("a scrape during updates is still valid");
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(m.value(names::STARTS, &[("profile", "p")]), Some(4000.0));
    assert_eq!(
        m.value(names::QUEUE_TO_START, &[("profile", "p")]),
        Some(4000.0)
    );
    parse(&m.render()).unwrap();
}
