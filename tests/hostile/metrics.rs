//! `/metrics` on loopback names every repository the host served and its usage
//! (issue 48): a job's connection to it, from its runner uid, is refused, while the
//! operator's (root's, here) is served.

use super::setup::*;
use crate::support::*;

#[test]
fn a_job_cannot_read_the_metrics_the_operator_can() {
    let Some((mut w, _uids)) = contained_world("hostile-metrics", 1, 1) else {
        return;
    };
    w.start_daemon_with(&["--metrics-listen", "127.0.0.1:0"]);
    let mut addr = None;
    wait_until(SETTLE, "the metrics_listening log line", || {
        addr = w
            .daemon_logs()
            .lines()
            .find(|l| l.contains("msg=metrics_listening"))
            .and_then(|l| l.split(' ').find_map(|kv| kv.strip_prefix("addr=")))
            .map(|a| a.trim_matches('"').to_string());
        addr.is_some()
    });
    let addr = addr.unwrap();
    // A first job, so the metrics have a repository's name in them.
    finished(&w, run_script(&w, "first", "echo hello\n"));

    let get = |path: &str| {
        let r = runner_manager::sim::client::request(
            &format!("http://{addr}"),
            "GET",
            path,
            &[],
            None,
            std::time::Duration::from_secs(5),
        )
        .unwrap();
        (r.status, String::from_utf8_lossy(&r.body).to_string())
    };
    let (status, body) = get("/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("runner_manager_"), "{body}");

    let script = format!(
        "code=$(curl -s -o /tmp/m.$$ -w '%{{http_code}}' http://{addr}/metrics); \
         echo code=$code; \
         if grep -q runner_manager_ /tmp/m.$$; then echo 'REACHED metrics'; \
         else echo 'DENIED metrics'; fi; \
         code=$(curl -s -o /dev/null -w '%{{http_code}}' http://{addr}/healthz); \
         echo healthz=$code; rm -f /tmp/m.$$\n"
    );
    let j = finished(&w, run_script(&w, "reader", &script));
    let out = output(&j);
    assert!(out.contains(&"code=403".to_string()), "{out:#?}");
    assert!(out.contains(&"healthz=403".to_string()), "{out:#?}");
    assert_denied(&j, &["metrics"]);
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
}
