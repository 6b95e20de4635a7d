//! The daemon's facts read back as written, absent before, absent when unreadable, and
//! under the keys earlier builds wrote (an upgraded `status` reads an older daemon's).

use super::*;
use crate::store::SqliteStore;

fn store() -> SqliteStore {
    SqliteStore::open_in_memory().unwrap()
}

#[test]
fn the_containment_reads_back_and_is_absent_before_a_daemon_ran() {
    let s = store();
    assert_eq!(isolation(&s).unwrap(), None);
    assert_eq!(containment_line(&s).unwrap(), None);
    assert_eq!(cgroups(&s).unwrap(), None);
    let c = Containment {
        isolation: "none".into(),
        line: "none: runner_uids is not set".into(),
        cgroups: "v2, delegated".into(),
        enforced: Enforced {
            kill: true,
            memory: true,
            why: vec!["cpu: not delegated".into()],
            ..Enforced::default()
        },
    };
    put_containment(&s, &c).unwrap();
    assert_eq!(isolation(&s).unwrap().as_deref(), Some("none"));
    assert_eq!(containment_line(&s).unwrap(), Some(c.line.clone()));
    assert_eq!(cgroups(&s).unwrap(), Some((c.cgroups.clone(), c.enforced)));
    s.kv_put(KV_ENFORCED, "not json").unwrap();
    assert_eq!(cgroups(&s).unwrap(), None, "a summary without its enforced");
    assert_eq!(
        cgroups_summary(&s).unwrap(),
        Some(c.cgroups),
        "status's line"
    );
}

#[test]
fn the_runner_check_reads_back_and_a_clean_check_clears_the_problem() {
    let s = store();
    assert_eq!(runner_check(&s).unwrap(), RunnerCheck::default());
    put_runner_in_use(&s, &["2.330.0".into(), "2.331.0".into()]).unwrap();
    put_runner_newest(&s, "2.331.0").unwrap();
    put_runner_checked(&s, 42, Some("asking octo: 503")).unwrap();
    let want = RunnerCheck {
        in_use: vec!["2.330.0".into(), "2.331.0".into()],
        newest: Some("2.331.0".into()),
        checked_at: Some(42),
        problem: Some("asking octo: 503".into()),
    };
    assert_eq!(runner_check(&s).unwrap(), want);
    put_runner_checked(&s, 43, None).unwrap();
    put_runner_in_use(&s, &[]).unwrap();
    let after = runner_check(&s).unwrap();
    assert!(after.in_use.is_empty(), "{after:?}");
    assert_eq!((after.checked_at, after.problem), (Some(43), None));
}

#[test]
fn a_published_runner_list_reads_back_per_target_and_an_unreadable_one_is_none() {
    let s = store();
    assert_eq!(runners_seen(&s, "octo").unwrap(), None);
    let r = RegisteredRunner {
        id: 7,
        name: "rm-0123abcd-5".into(),
        online: true,
        busy: false,
        labels: vec!["self-hosted".into()],
    };
    publish_runners(&s, "octo", std::slice::from_ref(&r), 42).unwrap();
    assert_eq!(
        runners_seen(&s, "octo").unwrap(),
        Some(RunnersSeen {
            at: 42,
            runners: vec![r]
        })
    );
    assert_eq!(runners_seen(&s, "other").unwrap(), None);
    s.kv_put("runners:octo", "not json").unwrap();
    assert_eq!(runners_seen(&s, "octo").unwrap(), None);
}

#[test]
fn the_cache_measure_and_the_webhooks_rows_read_back_and_clear() {
    let s = store();
    assert_eq!(measured(&s).unwrap(), None);
    let m = Measured {
        at: 7,
        footprint: Footprint {
            caches_bytes: 1 << 20,
            cache_targets: 1,
            ..Footprint::default()
        },
    };
    put_measured(&s, &m).unwrap();
    assert_eq!(measured(&s).unwrap(), Some(m));

    assert_eq!(WebhookSeen::read(&s), None);
    let seen = WebhookSeen {
        listen: "127.0.0.1:8090".into(),
        since: 1,
        accepted: 3,
        ..WebhookSeen::default()
    };
    seen.write(&s).unwrap();
    put_webhook_book(&s, "{\"runs\":[]}").unwrap();
    assert_eq!(WebhookSeen::read(&s), Some(seen));
    assert_eq!(webhook_book(&s).unwrap().as_deref(), Some("{\"runs\":[]}"));
    clear_webhook(&s).unwrap();
    assert_eq!(
        (WebhookSeen::read(&s), webhook_book(&s).unwrap()),
        (None, None)
    );
}

#[test]
fn a_handover_request_reads_back_and_an_unreadable_one_is_none() {
    let s = store();
    assert_eq!(handover_request(&s).unwrap(), None);
    let r = HandoverRequest {
        at: 1_000,
        version: "0.2.0".into(),
    };
    put_handover_request(&s, &r).unwrap();
    assert_eq!(handover_request(&s).unwrap(), Some(r));
    for bad in ["garbage", "x 0.2.0"] {
        s.kv_put(KV_HANDOVER, bad).unwrap();
        assert_eq!(handover_request(&s).unwrap(), None, "{bad}");
    }
}

#[test]
fn a_rate_limit_hold_reads_back_per_target() {
    let s = store();
    assert_eq!(rate_limit_hold(&s, "octo").unwrap(), None);
    put_rate_limit_hold(&s, "octo", 1_234).unwrap();
    assert_eq!(rate_limit_hold(&s, "octo").unwrap(), Some(1_234));
    assert_eq!(rate_limit_hold(&s, "other").unwrap(), None);
    s.kv_put("target:octo:rate_limit_hold_until", "soon")
        .unwrap();
    assert_eq!(rate_limit_hold(&s, "octo").unwrap(), None);
}

/// The keys are a stored format: a `status` after an upgrade reads what the daemon
/// before it wrote, and `update` asks an older daemon to hand over.
#[test]
fn the_keys_are_those_earlier_builds_wrote() {
    let s = store();
    put_containment(&s, &Containment::default()).unwrap();
    put_runner_in_use(&s, &["2.331.0".into()]).unwrap();
    put_runner_newest(&s, "2.331.0").unwrap();
    put_runner_checked(&s, 1, Some("p")).unwrap();
    publish_runners(&s, "octo", &[], 1).unwrap();
    put_measured(
        &s,
        &Measured {
            at: 1,
            footprint: Footprint::default(),
        },
    )
    .unwrap();
    WebhookSeen::default().write(&s).unwrap();
    put_webhook_book(&s, "b").unwrap();
    put_handover_request(
        &s,
        &HandoverRequest {
            at: 5,
            version: "0.2.0".into(),
        },
    )
    .unwrap();
    put_rate_limit_hold(&s, "octo", 9).unwrap();
    put_in_progress_read(&s, "octo", 9).unwrap();
    for key in [
        "target:octo:rate_limit_hold_until",
        "target:octo:in_progress_read_at",
        "daemon:isolation",
        "daemon:containment",
        "daemon:cgroups",
        "daemon:cgroups_enforced",
        "runner:in_use",
        "runner:newest",
        "runner:checked_at",
        "runner:problem",
        "runners:octo",
        "caches:footprint",
        "webhook:seen",
        "webhook:book",
    ] {
        assert!(s.kv_get(key).unwrap().is_some(), "{key}");
    }
    assert_eq!(
        s.kv_get("daemon:handover").unwrap().as_deref(),
        Some("5 0.2.0")
    );
}

#[test]
fn a_credential_seen_reads_back_and_says_only_what_is_wrong() {
    let s = store();
    assert_eq!(CredentialSeen::read(&s, "octo"), None);
    let now = 1_796_130_303_000;
    let fine = CredentialSeen {
        expires_at: Some(now + EXPIRY_WARNING + 1),
        ..CredentialSeen::default()
    };
    assert_eq!(fine.describe(now), None, "a far expiry is no problem");
    let seen = CredentialSeen {
        refused_since: Some(now - 60_000),
        problem: Some("/t is mode 0644: ...; run chmod 600 /t".into()),
        expires_at: Some(now + 3_600_000),
    };
    seen.write(&s, "octo").unwrap();
    assert_eq!(CredentialSeen::read(&s, "octo"), Some(seen.clone()));
    let line = seen.describe(now).unwrap();
    assert!(
        line.starts_with("refused (401) since 2026-12-01T13:04:03Z; /t is mode 0644")
            && line.contains("expires at 2026-12-01T14:05:03Z"),
        "{line}"
    );
    assert!(
        seen.describe(now + 7_200_000)
            .unwrap()
            .contains("expired at")
    );
}
