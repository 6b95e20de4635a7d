//! Meters over a real process tree, and the sampler thread.

use std::time::Duration;

use crossbeam_channel::{bounded, unbounded};
use runner_manager::meter::{LiveAttempt, sample_tree, spawn_sampler};

use super::util::{FakeRunner, WAIT};

/// Burns CPU in the shell, then leaves a background child and waits.
const BUSY: &str = "#!/bin/sh\ni=0\nwhile [ $i -lt 300000 ]; do i=$((i+1)); done\n\
    sleep 1000 &\necho done\nwait\n";

#[test]
fn sums_rss_and_cpu_over_the_session() {
    let r = FakeRunner::start("meter", BUSY, "jit");
    r.wait_log("done");
    let usage = sample_tree(r.pid());
    assert!(usage.processes >= 2, "{usage:?}");
    assert!(usage.rss_bytes > 0, "{usage:?}");
    assert!(usage.cpu_millis > 0, "{usage:?}");
    assert_eq!(sample_tree(i32::MAX - 1).processes, 0);
}

#[test]
fn sampler_publishes_meters_and_stops_on_shutdown() {
    let r = FakeRunner::start("sampler", BUSY, "jit");
    r.wait_log("done");
    let (attempts_tx, attempts_rx) = unbounded();
    let (shutdown_tx, shutdown_rx) = bounded(1);
    let (reports_tx, reports_rx) = unbounded();
    let handle = spawn_sampler(
        Duration::from_millis(20),
        attempts_rx,
        shutdown_rx,
        reports_tx,
    )
    .unwrap();
    let live = LiveAttempt {
        attempt: 42,
        pid: r.pid(),
        start_time: r.spawned.start_time,
        cgroup: None,
        container: None,
    };
    // A stale identity (pid reuse) must not be sampled.
    let stranger = LiveAttempt {
        attempt: 43,
        pid: r.pid(),
        start_time: r.spawned.start_time + 1,
        cgroup: None,
        container: None,
    };
    attempts_tx.send(vec![live, stranger]).unwrap();

    let mut samples = 0;
    while samples < 2 {
        let batch = reports_rx.recv_timeout(WAIT).expect("no meter report");
        assert!(batch.iter().all(|m| m.attempt == 42), "{batch:?}");
        if let Some(m) = batch.first() {
            samples = m.meter.samples;
            assert!(m.meter.peak_rss_bytes >= m.usage.rss_bytes);
            assert!(m.meter.cpu_millis > 0 && m.usage.processes >= 2);
        }
    }
    shutdown_tx.send(()).unwrap();
    handle.join().unwrap();
}
