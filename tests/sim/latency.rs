//! Distance: each request spends its round trip (a JIT config its making time on top)
//! without holding up others, the log keeps arrival and completion, faults still
//! apply, and requests in flight are counted per credential with their peak.
//!
//! Timing assertions are lower bounds, or orderings ("8 requests of 400 ms each ended
//! in well under 8 x 400 ms, so they were not served one after another"), never a speed.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use runner_manager::sim::{FaultAction, FaultRule, Latency, SimConfig, SimHandle};
use serde_json::json;

use super::support::*;

fn far(request_ms: u64, jit_ms: u64) -> SimConfig {
    SimConfig {
        latency: Latency {
            request: Duration::from_millis(request_ms),
            jit: Duration::from_millis(jit_ms),
            jitter: 0.0,
        },
        ..SimConfig::default()
    }
}

/// `f`'s result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

/// The log entry of the last request to `endpoint`, with its time in flight (ms).
fn last_of(h: &SimHandle, endpoint: &str) -> (runner_manager::sim::LogEntry, i64) {
    let e = h
        .request_log()
        .into_iter()
        .rev()
        .find(|e| e.endpoint == endpoint)
        .unwrap_or_else(|| panic!("{endpoint} is in the log"));
    let done = e
        .done_at
        .expect("a completed request has its completion time");
    let took = done - e.at;
    (e, took)
}

#[test]
fn every_request_spends_the_latency_and_a_jit_config_its_own_on_top() {
    let (h, _) = sim_with(far(150, 300));
    let (r, took) = timed(|| get(&h, "/repos/octo/app"));
    assert_eq!(r.status, 200);
    assert!(took >= Duration::from_millis(150), "{took:?}");
    // Milliseconds of the log are truncated: allow the one lost at each end.
    let (_, logged) = last_of(&h, "/repos/{owner}/{repo}");
    assert!(logged >= 149, "arrival to completion {logged} ms");

    let body = json!({"name": "far-1", "runner_group_id": 1, "labels": ["self-hosted"]});
    let (r, took) = timed(|| {
        call(
            &h,
            "POST",
            "/repos/octo/app/actions/runners/generate-jitconfig",
            PAT,
            Some(&body),
            &[],
        )
    });
    assert_eq!(r.status, 201);
    assert!(took >= Duration::from_millis(450), "{took:?}");
    let (e, logged) = last_of(
        &h,
        "/repos/{owner}/{repo}/actions/runners/generate-jitconfig",
    );
    assert!(logged >= 449, "arrival to completion {logged} ms");
    assert_eq!(e.credential.as_deref(), Some("pat:0"));

    // An organization's JIT endpoint is a JIT config too.
    let (r, took) = timed(|| {
        call(
            &h,
            "POST",
            "/orgs/octo/actions/runners/generate-jitconfig",
            PAT,
            Some(&json!({"name": "far-2", "runner_group_id": 1, "labels": ["x"]})),
            &[],
        )
    });
    assert_eq!(r.status, 201);
    assert!(took >= Duration::from_millis(450), "{took:?}");
}

#[test]
fn the_scale_set_service_is_as_far_and_its_jit_configs_take_as_long() {
    let (h, _) = sim_with(far(150, 300));
    let r = call(
        &h,
        "POST",
        "/repos/octo/app/actions/runners/registration-token",
        PAT,
        None,
        &[],
    );
    assert_eq!(r.status, 201);
    let token = r.json().unwrap()["token"].as_str().unwrap().to_string();
    let remote = format!("RemoteAuth {token}");
    let body = json!({"url": format!("{}/octo/app", h.url()), "runner_event": "register"});
    let (r, took) = timed(|| {
        runner_manager::sim::client::request(
            h.url(),
            "POST",
            "/actions/runner-registration",
            &[
                ("authorization", &remote),
                ("content-type", "application/json"),
            ],
            Some(body.to_string().as_bytes()),
            Duration::from_secs(10),
        )
        .unwrap()
    });
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(took >= Duration::from_millis(150), "{took:?}");
    let admin = format!("Bearer {}", r.json().unwrap()["token"].as_str().unwrap());
    let admin_call = |method: &str, path: &str, body: serde_json::Value| {
        runner_manager::sim::client::request(
            h.url(),
            method,
            path,
            &[
                ("authorization", &admin),
                ("content-type", "application/json"),
            ],
            Some(body.to_string().as_bytes()),
            Duration::from_secs(10),
        )
        .unwrap()
    };
    let sets = "/_services/pipelines/_apis/runtime/runnerscalesets";
    let r = admin_call("POST", sets, json!({"name": "far", "runnerGroupId": 1}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json().unwrap()["id"].as_u64().unwrap();
    let (r, took) = timed(|| {
        admin_call(
            "POST",
            &format!("{sets}/{id}/generatejitconfig"),
            json!({"name": "far-ss-1"}),
        )
    });
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(took >= Duration::from_millis(450), "{took:?}");
    let peak = h.peak_in_flight();
    assert_eq!(peak.get("remote-auth"), Some(&1));
    assert_eq!(peak.get("admin"), Some(&1));
}

#[test]
fn concurrent_requests_are_not_served_one_after_another() {
    const N: u32 = 8;
    const L: u64 = 400;
    let (h, _) = sim_with(far(L, 0));
    let url = h.url().to_string();
    let start = Arc::new(Barrier::new(N as usize + 1));
    let threads: Vec<_> = (0..N)
        .map(|_| {
            let (url, start) = (url.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let auth = format!("Bearer {PAT}");
                runner_manager::sim::client::request(
                    &url,
                    "GET",
                    "/repos/octo/app/actions/runs",
                    &[("authorization", &auth)],
                    None,
                    Duration::from_secs(30),
                )
                .map(|r| r.status)
            })
        })
        .collect();
    let (statuses, took) = timed(|| {
        start.wait();
        threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert!(took >= Duration::from_millis(L), "{took:?}");
    // One after another they would take N x L; a delay that serialized them would
    // show as anything near that.
    assert!(
        took < Duration::from_millis(N as u64 * L / 2),
        "{N} requests of {L} ms took {took:?}"
    );
    assert!(h.peak_in_flight()["pat:0"] >= 2, "{:?}", h.in_flight());
}

#[test]
fn requests_in_flight_are_counted_per_credential_with_their_peak() {
    // Long enough that every request below is in flight before the first completes.
    let (h, inst) = sim_with(far(2000, 0));
    let token = installation_token(&h, inst);
    let url = h.url().to_string();
    let start = Arc::new(Barrier::new(6));
    let threads: Vec<_> = [PAT, PAT, PAT, &token, &token]
        .into_iter()
        .map(|t| {
            let (url, start, auth) = (url.clone(), start.clone(), format!("Bearer {t}"));
            std::thread::spawn(move || {
                start.wait();
                runner_manager::sim::client::request(
                    &url,
                    "GET",
                    "/repos/octo/app",
                    &[("authorization", &auth)],
                    None,
                    Duration::from_secs(30),
                )
                .map(|r| r.status)
            })
        })
        .collect();
    start.wait();
    let now = wait_for("five requests in flight", Duration::from_secs(10), || {
        let f = h.in_flight();
        (f.now.values().sum::<u32>() == 5).then_some(f.now)
    });
    let installation = format!("installation:{inst}");
    assert_eq!(now.get("pat:0"), Some(&3), "{now:?}");
    assert_eq!(now.get(&installation), Some(&2), "{now:?}");
    for t in threads {
        assert_eq!(t.join().unwrap().unwrap(), 200);
    }
    let f = h.in_flight();
    assert!(f.now.is_empty(), "nothing left in flight: {:?}", f.now);
    assert_eq!(f.peak.get("pat:0"), Some(&3));
    assert_eq!(f.peak.get(&installation), Some(&2));
    // The token's minting (an App JWT) was one at a time.
    assert_eq!(f.peak.get(&format!("app:{APP_ID}")), Some(&1));
    // The same through the control interface, which is not far away.
    let v = get(&h, "/_sim/in-flight").json().unwrap();
    assert_eq!(v["peak"]["pat:0"], json!(3));
    assert_eq!(v["peak"][&installation], json!(2));
    assert_eq!(v["now"], json!({}));
}

#[test]
fn faults_still_apply_and_are_logged_with_their_times() {
    let (h, _) = sim_with(far(200, 0));
    h.add_fault(FaultRule::times(
        "GET",
        "/repos/octo/app/actions/runs",
        1,
        FaultAction::Forbidden {
            retry_after: Some(3),
        },
    ));
    let (r, took) = timed(|| get(&h, "/repos/octo/app/actions/runs"));
    assert_eq!(r.status, 403);
    assert_eq!(r.header("retry-after"), Some("3"));
    assert!(took >= Duration::from_millis(200), "{took:?}");
    let (e, logged) = last_of(&h, "/repos/{owner}/{repo}/actions/runs");
    assert_eq!(e.fault.as_deref(), Some("forbidden"));
    assert_eq!(e.credential.as_deref(), Some("pat:0"));
    assert!(logged >= 199, "{logged} ms");

    // A delay fault comes on top of the distance.
    h.add_fault(FaultRule::times(
        "GET",
        "/repos/octo/app",
        1,
        FaultAction::Delay { ms: 300 },
    ));
    let (r, took) = timed(|| get(&h, "/repos/octo/app"));
    assert_eq!(r.status, 200);
    assert!(took >= Duration::from_millis(500), "{took:?}");

    // A dropped connection is still logged, with when it was dropped.
    h.add_fault(FaultRule::times(
        "GET",
        "/repos/octo/app",
        1,
        FaultAction::Drop,
    ));
    assert!(try_call(&h, "GET", "/repos/octo/app", PAT, None, &[]).is_err());
    let (e, _) = last_of(&h, "/repos/{owner}/{repo}");
    assert_eq!(e.fault.as_deref(), Some("drop"));
}

#[test]
fn the_runners_own_calls_travel_too_and_are_not_counted_in_flight() {
    let (h, _) = sim_with(far(200, 0));
    let (r, took) = timed(|| {
        runner_manager::sim::client::request(
            h.url(),
            "POST",
            "/_sim/runner/connect",
            &[
                ("authorization", "Bearer nobody"),
                ("content-type", "application/json"),
            ],
            Some(br#"{"runner_id": 1}"#),
            Duration::from_secs(10),
        )
        .unwrap()
    });
    assert_eq!(r.status, 404, "no such runner");
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(h.peak_in_flight().is_empty(), "{:?}", h.peak_in_flight());
}
