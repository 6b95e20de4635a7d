//! Jobs with different labels across two profiles: each is served by exactly one runner,
//! of the profile whose labels it asks for.

use super::support::*;

#[test]
fn each_job_is_served_by_one_runner_of_the_right_profile() {
    let mut w = World::new("labels", 6);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("alpha", "t", &["alpha"]).max(3));
    w.add_profile(ProfileSpec::new("beta", "t", &["beta"]).max(3));
    let mut expect = Vec::new();
    for i in 0..4 {
        w.enqueue("acme/app", &format!("a{i}"), &["alpha"], 300);
        expect.push((format!("a{i}"), "alpha"));
    }
    for i in 0..3 {
        w.enqueue("acme/app", &format!("b{i}"), &["beta"], 300);
        expect.push((format!("b{i}"), "beta"));
    }
    w.start_daemon();
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    for (job, profile) in &expect {
        let a = w.attempt_of_job(job);
        assert_eq!(&a.profile, profile, "job {job} ran on {a:?}");
        assert_eq!(
            a.outcome,
            Some(runner_manager::domain::Outcome::CompletedJob),
            "{a:?}"
        );
    }
    // One runner per job: no runner was started that no job needed.
    assert_eq!(w.attempts().len(), expect.len(), "{:#?}", w.outcomes());
    assert!(w.stop_daemon().success());
}
