//! The scale set lines of `target check` and `doctor`: the service reached with the
//! target's credentials, each scale set profile's runner group resolved, and whether
//! its scale set exists yet; nothing created.

use crate::support::*;
use runner_manager::domain::{DemandSource, ScalePolicy};
use runner_manager::scaleset::check_profiles;
use runner_manager::sim::{FaultAction, FaultRule};

fn profile(name: &str, demand: DemandSource) -> ScalePolicy {
    let mut p = ScalePolicy::new(name, "t", HOST_ID);
    p.demand = demand;
    p
}

#[test]
fn each_scale_set_profile_gets_a_line_and_nothing_is_created() {
    let e = env(200);
    let (ss, polled) = (
        profile("ss", DemandSource::Scaleset),
        profile("rest", DemandSource::Poll),
    );
    let lines = check_profiles(&e.client, &[&ss, &polled]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].passed(), "{lines:#?}");
    assert_eq!(lines[0].name, "scale set");
    assert!(lines[0].detail.contains("not created yet"), "{lines:#?}");
    assert!(
        e.sim.scale_sets().is_empty(),
        "the check created a scale set"
    );

    let set = e.client.ensure_scale_set(&spec("ss")).unwrap();
    let lines = check_profiles(&e.client, &[&ss]);
    assert!(lines[0].passed(), "{lines:#?}");
    assert!(
        lines[0].detail.contains(&format!("exists (id {}", set.id)),
        "{lines:#?}"
    );
    assert!(
        check_profiles(&e.client, &[&polled]).is_empty(),
        "a target without scale set profiles has no scale set line"
    );
}

#[test]
fn an_unreachable_service_and_a_missing_runner_group_fail() {
    let e = env(200);
    let mut named = profile("ss", DemandSource::Scaleset);
    named.runner_group = Some("no-such-group".into());
    let lines = check_profiles(&e.client, &[&named]);
    assert!(!lines[0].passed(), "{lines:#?}");
    assert!(
        lines[0].detail.contains("no runner group named"),
        "{lines:#?}"
    );

    // A fresh client, whose admin connection the service refuses.
    e.sim.add_fault(FaultRule::times(
        "POST",
        "/actions/runner-registration",
        3,
        FaultAction::Status { status: 403 },
    ));
    let (client, _stop) = new_client(&e.sim);
    let ss = profile("ss", DemandSource::Scaleset);
    let lines = check_profiles(&client, &[&ss]);
    assert_eq!(lines.len(), 1);
    assert!(!lines[0].passed(), "{lines:#?}");
    assert!(
        lines[0].detail.contains("cannot be reached for ss"),
        "{lines:#?}"
    );
    assert!(
        !lines[0].detail.contains(PAT),
        "the token leaked: {lines:#?}"
    );
}
