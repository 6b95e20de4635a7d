//! The client's operations one by one: admin connection, runner groups, scale set
//! CRUD, sessions, BOM bodies, JIT configs and their name collisions.

use crate::support::*;
use runner_manager::domain::runner_name;
use runner_manager::scaleset::{Exception, JobMessage, Removed};
use runner_manager::sim::{FaultAction, FaultRule};

const REGISTER: &str = "/actions/runner-registration";

#[test]
fn scale_set_create_get_update_delete() {
    let e = env(200);
    let c = &e.client;
    assert_eq!(c.config_url(), format!("{}/octo/app", e.sim.url()));
    let group = c.runner_group_by_name("default").unwrap().unwrap();
    assert_eq!((group.id, group.name.as_str()), (1, "Default"));
    assert_eq!(c.runner_group_by_name("nope").unwrap(), None);

    assert_eq!(c.scale_set_by_name(1, "rm-a").unwrap(), None);
    let created = c.ensure_scale_set(&spec("rm-a")).unwrap();
    assert!(created.id > 0 && created.disable_update);
    assert_eq!(created.labels, vec!["rm-a".to_string()]);
    let got = c.scale_set_by_name(1, "rm-a").unwrap().unwrap();
    assert_eq!(got.id, created.id);
    assert_eq!(c.scale_set(created.id).unwrap().unwrap().name, "rm-a");

    // ensure_scale_set updates what differs, and leaves a match alone.
    let mut changed = spec("rm-a");
    changed.labels = vec!["rm-a".into(), "gpu".into()];
    changed.disable_update = false;
    let updated = c.ensure_scale_set(&changed).unwrap();
    assert_eq!(updated.id, created.id);
    assert!(updated.matches(&changed));
    let sims = e.sim.scale_sets();
    assert_eq!(sims.len(), 1);
    assert_eq!(sims[0].2, vec!["rm-a".to_string(), "gpu".to_string()]);
    assert!(!sims[0].4);
    let patches = e.sim.count(
        "PATCH",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}",
    );
    c.ensure_scale_set(&changed).unwrap();
    assert_eq!(
        e.sim.count(
            "PATCH",
            "/_services/pipelines/_apis/runtime/runnerscalesets/{id}"
        ),
        patches
    );

    assert_eq!(c.delete_scale_set(created.id).unwrap(), Removed::Removed);
    assert_eq!(
        c.delete_scale_set(created.id).unwrap(),
        Removed::AlreadyGone
    );
    assert_eq!(c.scale_set(created.id).unwrap(), None);
    // One admin connection served every call: its JWT is good for an hour.
    assert_eq!(e.sim.count("POST", REGISTER), 1);
}

#[test]
fn admin_token_is_renewed_when_its_exp_is_under_a_minute_away() {
    let e = env(200);
    e.sim.scaleset_config(|c| c.admin_token_ttl_secs = 30);
    e.client.runner_group_by_name("Default").unwrap();
    e.client.runner_group_by_name("Default").unwrap();
    assert_eq!(e.sim.count("POST", REGISTER), 2);
    let admin = e.client.admin().unwrap();
    assert!(admin.expires_at.is_some());
    assert!(
        !admin.token.to_string().contains('.'),
        "Secret must not print"
    );
}

#[test]
fn admin_401_renews_the_connection_once() {
    let e = env(200);
    e.client.runner_group_by_name("Default").unwrap();
    e.sim.add_fault(FaultRule::times(
        "GET",
        "/_services/pipelines/_apis/runtime/runnergroups",
        1,
        runner_manager::sim::FaultAction::Unauthorized,
    ));
    e.client.runner_group_by_name("Default").unwrap();
    assert_eq!(e.sim.count("POST", REGISTER), 2);
}

#[test]
fn bodies_with_a_byte_order_mark_are_read() {
    let e = env(200);
    e.sim.scaleset_config(|c| c.bom = true);
    let s = e.client.ensure_scale_set(&spec("rm-bom")).unwrap();
    let session = e.client.create_session(s.id, "me").unwrap();
    e.sim.enqueue_job(REPO, "build", &["rm-bom"], 0);
    let m = e.client.get_message(&session, 0, 5).unwrap().unwrap();
    assert_eq!(m.jobs.len(), 1);
    // The inner, double-encoded body carried its own BOM too.
    assert!(
        e.sim.scaleset_messages(s.id as u64)[0]
            .2
            .starts_with('\u{feff}')
    );
    assert_eq!(m.statistics.unwrap().total_assigned_jobs, 1);
}

#[test]
fn sessions_one_per_scale_set() {
    let e = env(200);
    let s = e.client.ensure_scale_set(&spec("rm-s")).unwrap();
    let first = e.client.create_session(s.id, "a").unwrap();
    let err = e.client.create_session(s.id, "b").unwrap_err();
    assert!(err.is_session_conflict(), "{err:?}");
    assert!(err.is_transient());
    let refreshed = e.client.refresh_session(s.id, &first.id).unwrap();
    assert_eq!(refreshed.id, first.id);
    assert_ne!(refreshed.queue_token.expose(), first.queue_token.expose());
    e.client.delete_session(s.id, &first.id).unwrap();
    let again = e.client.refresh_session(s.id, &first.id).unwrap_err();
    assert!(again.is_not_found());
    e.client.create_session(s.id, "b").unwrap();
}

/// The sim plays the service's session rules that issue 15 names: a 409 naming its
/// exception and holder, an abandoned session that expires (then 404 everywhere), an
/// unacked message delivered again to a new session whatever `lastMessageId` it sends,
/// and a 401 on an ack that holds until the session is refreshed.
#[test]
fn sessions_expire_and_unacked_messages_go_again_to_a_new_session() {
    let e = env(100);
    e.sim.scaleset_config(|c| c.session_ttl_ms = 400);
    let s = e.client.ensure_scale_set(&spec("rm-again")).unwrap();
    let a = e.client.create_session(s.id, "owner-a").unwrap();
    e.sim.enqueue_job(REPO, "one", &["rm-again"], 0);
    let m = e.client.get_message(&a, 0, 5).unwrap().unwrap();
    // Within its session, lastMessageId passes over an unacked message.
    assert!(e.client.get_message(&a, m.id, 5).unwrap().is_none());
    let held = e.client.create_session(s.id, "owner-b").unwrap_err();
    assert_eq!(held.exception(), Some(&Exception::SessionConflict));
    assert!(held.to_string().contains("owner-a"), "{held}");
    // Nobody polls `a` now: it expires, and is gone for good.
    let b = wait_for("the abandoned session to expire", DEADLINE, || {
        e.client.create_session(s.id, "owner-b").ok()
    });
    assert!(
        e.client
            .refresh_session(s.id, &a.id)
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        e.client
            .get_message(&a, m.id, 5)
            .unwrap_err()
            .is_not_found()
    );
    // The new session gets the unacked message again, past its lastMessageId.
    let again = e.client.get_message(&b, m.id, 5).unwrap().unwrap();
    assert_eq!(again.id, m.id);
    // A 401 on the ack: the queue token is spent, the same ack is refused again until
    // the session is refreshed.
    e.sim.add_fault(FaultRule::times(
        "DELETE",
        "/_services/broker/_apis/runtime/runnerscalesets/{id}/messages/{message}",
        1,
        FaultAction::Unauthorized,
    ));
    assert!(
        e.client
            .delete_message(&b, m.id)
            .unwrap_err()
            .is_unauthorized()
    );
    assert!(
        e.client
            .delete_message(&b, m.id)
            .unwrap_err()
            .is_unauthorized()
    );
    let b = e.client.refresh_session(s.id, &b.id).unwrap();
    e.client.delete_message(&b, m.id).unwrap();
    assert!(e.sim.scaleset_messages(s.id as u64)[0].1, "acknowledged");
    // Acknowledged, it goes to no session again.
    e.client.delete_session(s.id, &b.id).unwrap();
    let c = e.client.create_session(s.id, "owner-c").unwrap();
    assert!(e.client.get_message(&c, 0, 5).unwrap().is_none());
}

#[test]
fn a_job_queued_before_its_scale_set_existed_is_offered_once_it_does() {
    let e = env(100);
    // Queued while no scale set fits it (a listener that restarted in between): the
    // service matches it to the scale set created later, as to a runner that registers
    // later; a job that fits no scale set stays unoffered.
    e.sim.enqueue_job(REPO, "early", &["rm-late"], 0);
    e.sim.enqueue_job(REPO, "other", &["something-else"], 0);
    let s = e.client.ensure_scale_set(&spec("rm-late")).unwrap();
    let a = e.client.create_session(s.id, "owner-a").unwrap();
    let m = e
        .client
        .get_message(&a, 0, 5)
        .unwrap()
        .expect("the early job's message");
    let offered: Vec<&str> = m
        .jobs
        .iter()
        .filter_map(|j| match j {
            JobMessage::Available { job, .. } | JobMessage::Assigned { job } => {
                Some(job.display_name.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(offered, vec!["early"], "{m:?}");
    assert!(e.client.get_message(&a, m.id, 5).unwrap().is_none());
}

#[test]
fn jit_name_collision_removes_only_our_runner() {
    let e = env(200);
    let s = e.client.ensure_scale_set(&spec("rm-j")).unwrap();
    let ours = runner_name(HOST_ID, 7);
    let (first, config) = e.client.generate_jit_config(s.id, &ours, "_work").unwrap();
    assert_eq!(first.scale_set_id, s.id);
    assert!(!config.expose().is_empty());
    let err = e
        .client
        .generate_jit_config(s.id, &ours, "_work")
        .unwrap_err();
    assert_eq!(err.exception(), Some(&Exception::AgentExists));
    let (second, _) = e
        .client
        .generate_jit_config_replacing_ours(s.id, HOST_ID, &ours, "_work")
        .unwrap();
    assert_ne!(second.id, first.id);
    assert_eq!(
        e.client.runner_by_name(&ours).unwrap().unwrap().id,
        second.id
    );
    assert_eq!(e.sim.runners().len(), 1);

    // Another host's runner keeps its name: the collision is reported, nothing removed.
    let foreign = runner_name("ffffffffffffffff", 7);
    e.client
        .generate_jit_config(s.id, &foreign, "_work")
        .unwrap();
    let err = e
        .client
        .generate_jit_config_replacing_ours(s.id, HOST_ID, &foreign, "_work")
        .unwrap_err();
    assert_eq!(err.exception(), Some(&Exception::AgentExists));
    assert_eq!(e.sim.runners().len(), 2);
    assert_eq!(e.client.remove_runner(second.id).unwrap(), Removed::Removed);
    assert_eq!(
        e.client.remove_runner(second.id).unwrap(),
        Removed::AlreadyGone
    );
    assert_eq!(e.client.runner_by_name(&ours).unwrap(), None);
}

#[test]
fn service_calls_take_a_permit_and_the_long_poll_does_not() {
    let e = env(3000);
    let limiter = runner_manager::github::InFlight::new(1);
    let (client, _stop) = new_client_in(&e.sim, limiter.clone());
    let s = client.ensure_scale_set(&spec("rm-p")).unwrap();
    assert_eq!(
        limiter.peak(),
        1,
        "service calls count toward the credential's bound"
    );
    let session = client.create_session(s.id, "me").unwrap();
    std::thread::scope(|scope| {
        let poll = scope.spawn(|| client.get_message(&session, 0, 5));
        wait_for("the long poll held open", DEADLINE, || {
            (e.sim.in_flight().now.get("queue") == Some(&1)).then_some(())
        });
        // Held open for seconds, yet it holds no slot: at a limit of 1 another call
        // still goes out and comes back while it waits.
        assert_eq!(limiter.in_use(), 0);
        assert!(client.runner_group_by_name("Default").unwrap().is_some());
        assert!(
            !poll.is_finished(),
            "the call did not wait for the long poll"
        );
        assert_eq!(poll.join().unwrap().unwrap(), None, "nothing came: 202");
    });
    assert_eq!(limiter.usage().in_use, 0);
}
