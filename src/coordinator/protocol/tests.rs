//! Tests of the wire: round trips, unknown and malformed frames, bounds, escaping, and versions.

use super::*;

fn hello(version: u32) -> HostMsg {
    HostMsg::Hello(Hello::fixture(
        "0123456789abcdef",
        "h1",
        version,
        4,
        &["self-hosted", "rm-pool-linux"],
    ))
}

#[test]
fn frames_round_trip_with_their_type_tag() {
    let msgs = vec![
        hello(3),
        HostMsg::LaunchAck(LaunchAck {
            lease_id: "l1".into(),
            accepted: false,
            reason: Some("draining".into()),
        }),
        HostMsg::AttemptStarted(AttemptStarted {
            lease_id: None,
            runner_name: "rm-01234567-1".into(),
            target: "t".into(),
            profile: "p".into(),
        }),
        HostMsg::AttemptFinished(AttemptFinished {
            lease_id: Some("l1".into()),
            runner_name: "rm-01234567-1".into(),
            outcome: "completed_job".into(),
            duration_secs: Some(3),
            usage: Some(UsageInfo {
                peak_rss_bytes: 1 << 20,
                cpu_secs: 1.5,
                samples: 4,
            }),
        }),
        HostMsg::Status(Status {
            free: 2,
            draining: false,
            unfit: vec![],
            meters: Default::default(),
            ..Default::default()
        }),
    ];
    for m in msgs {
        let text = m.encode();
        assert_eq!(HostMsg::decode(&text).unwrap(), m, "{text}");
    }
    let ack = HostMsg::LaunchAck(LaunchAck {
        lease_id: "l".into(),
        accepted: true,
        reason: None,
    })
    .encode();
    assert_eq!(
        ack,
        r#"{"type":"launch_ack","lease_id":"l","accepted":true}"#
    );
    let coord = vec![
        CoordMsg::HelloAck(HelloAck {
            version: 3,
            reconcile_interval_secs: Some(5),
            covered: vec!["t".into()],
            ..Default::default()
        }),
        CoordMsg::Launch(LaunchFrame {
            target: "t".into(),
            profile: "p".into(),
            job_key: "42".into(),
            lease_id: "c-1".into(),
            expires_at: "2026-01-01T00:00:00Z".into(),
            ttl_secs: 60,
        }),
        CoordMsg::CancelLaunch {
            lease_id: "c-1".into(),
        },
    ];
    for m in coord {
        let text = m.encode();
        assert_eq!(CoordMsg::decode(&text).unwrap(), m, "{text}");
    }
    assert_eq!(
        CoordMsg::CancelLaunch {
            lease_id: "x".into()
        }
        .encode(),
        r#"{"type":"cancel_launch","lease_id":"x"}"#
    );
}

#[test]
fn unknown_types_are_skippable_and_malformed_frames_are_not() {
    let e = HostMsg::decode(r#"{"type":"gossip","x":1}"#).unwrap_err();
    assert_eq!(e, FrameError::UnknownType("gossip".into()));
    assert!(e.is_skippable());
    // A coordinator frame type is unknown to the coordinator's own reader.
    assert!(matches!(
        HostMsg::decode(r#"{"type":"launch"}"#),
        Err(FrameError::UnknownType(_))
    ));
    for bad in [
        "",
        "not json",
        "[]",
        r#"{"lease_id":"x"}"#,
        r#"{"type":7}"#,
        r#"{"type":"launch_ack","lease_id":"x"}"#,
        r#"{"type":"status","free":-1,"draining":false}"#,
        r#"{"type":"hello","version":3}"#,
    ] {
        let e = HostMsg::decode(bad).unwrap_err();
        assert!(matches!(e, FrameError::Malformed(_)), "{bad}: {e:?}");
        assert!(!e.is_skippable());
    }
    assert!(matches!(
        CoordMsg::decode(r#"{"type":"launch","lease_id":"x"}"#),
        Err(FrameError::Malformed(_))
    ));
}

#[test]
fn bounds_refuse_oversized_frames_counts_and_strings() {
    let big = format!(
        r#"{{"type":"status","free":1,"draining":false,"pad":"{}"}}"#,
        "x".repeat(MAX_MESSAGE)
    );
    assert!(matches!(
        HostMsg::decode(&big),
        Err(FrameError::TooLarge(_))
    ));
    let HostMsg::Hello(mut h) = hello(3) else {
        unreachable!()
    };
    h.profiles[0].labels = (0..=MAX_LABELS).map(|i| format!("l{i}")).collect();
    let text = HostMsg::Hello(h.clone()).encode();
    assert!(matches!(
        HostMsg::decode(&text),
        Err(FrameError::OutOfBounds(_))
    ));
    h.profiles[0].labels = vec!["x".repeat(MAX_STR + 1)];
    let text = HostMsg::Hello(h.clone()).encode();
    assert!(matches!(
        HostMsg::decode(&text),
        Err(FrameError::OutOfBounds(_))
    ));
    h.profiles = (0..=MAX_PROFILES)
        .map(|i| ProfileInfo {
            name: format!("p{i}"),
            target: "t".into(),
            labels: vec![],
            max: 1,
        })
        .collect();
    let text = HostMsg::Hello(h).encode();
    assert!(matches!(
        HostMsg::decode(&text),
        Err(FrameError::OutOfBounds(_))
    ));
    let launch = CoordMsg::Launch(LaunchFrame {
        target: "t".into(),
        profile: "p".into(),
        job_key: "1".into(),
        lease_id: "".into(),
        expires_at: "".into(),
        ttl_secs: 1,
    });
    assert!(matches!(
        CoordMsg::decode(&launch.encode()),
        Err(FrameError::OutOfBounds(_))
    ));
}

/// Issue 17, item 5: what a host names reaches no store or terminal raw.
#[test]
fn control_characters_a_host_sends_are_escaped_then_bounded() {
    let frame = r#"{"type":"hello","version":3,"host":{"id":"i","name":"h\u001b[2J",
        "os":"linux\u0007","arch":"x86_64\u009b31m","capacity":1},
        "targets":[{"name":"t\r","scope":"o/r","api_url":"https://x"}],
        "profiles":[{"name":"p\u001b]0;pwned\u0007","target":"t","labels":["a\n"],"max":1}]}"#;
    let Ok(HostMsg::Hello(h)) = HostMsg::decode(frame) else {
        panic!("decodes")
    };
    assert_eq!(h.host.name, "h\\u{1b}[2J");
    assert_eq!(h.host.os, "linux\\u{7}");
    assert_eq!(h.host.arch, "x86_64\\u{9b}31m");
    assert_eq!(h.targets[0].name, "t\\u{d}");
    assert_eq!(h.profiles[0].name, "p\\u{1b}]0;pwned\\u{7}");
    assert_eq!(h.profiles[0].labels, vec!["a\\u{a}".to_string()]);
    // Issue 33: bidirectional controls are escaped as well.
    let frame = r#"{"type":"hello","version":3,"host":{"id":"i","name":"gpu\u202e1-tsoh",
        "os":"linux","arch":"x86_64","capacity":1},"targets":[],"profiles":[]}"#;
    let Ok(HostMsg::Hello(h)) = HostMsg::decode(frame) else {
        panic!("decodes")
    };
    assert_eq!(h.host.name, "gpu\\u{202e}1-tsoh");
    let text = format!("{h:?}");
    assert!(!text.chars().any(char::is_control), "{text}");
    // Escaping may take a string past its bound: the frame is refused, not cut.
    let many = "\\u001b".repeat(MAX_STR / 2);
    let frame = format!(r#"{{"type":"status","free":1,"draining":false,"unfit":["{many}"]}}"#);
    assert!(matches!(
        HostMsg::decode(&frame),
        Err(FrameError::OutOfBounds(_))
    ));
    let r = r#"{"type":"launch_ack","lease_id":"l\u001b","accepted":false,"reason":"x\u0000"}"#;
    let Ok(HostMsg::LaunchAck(a)) = HostMsg::decode(r) else {
        panic!()
    };
    assert_eq!(
        (a.lease_id.as_str(), a.reason.as_deref()),
        ("l\\u{1b}", Some("x\\u{0}"))
    );
}

#[test]
fn a_status_carries_bounded_per_profile_meters_and_old_frames_still_decode() {
    let mut meters = BTreeMap::new();
    meters.insert(
        "linux".to_string(),
        ProfileMeters {
            runners: 2,
            rss_bytes: 612 << 20,
            cpu_millis: 1200,
            cpu_percent: 35,
            processes: 9,
        },
    );
    let s = HostMsg::Status(Status {
        free: 1,
        draining: false,
        unfit: vec![],
        meters,
        ..Default::default()
    });
    assert_eq!(HostMsg::decode(&s.encode()), Ok(s));
    // A host from before meters sends none: the frame is the same as ever.
    let old = r#"{"type":"status","free":1,"draining":false,"unfit":[]}"#;
    let Ok(HostMsg::Status(st)) = HostMsg::decode(old) else {
        panic!("decodes")
    };
    assert!(st.meters.is_empty());
    assert!(!HostMsg::Status(st).encode().contains("meters"));
    // A profile name with control characters is escaped; too many profiles refuse
    // the frame.
    let esc = r#"{"type":"status","free":1,"draining":false,"meters":{"p\u001b[2J":{"runners":1,"rss_bytes":1,"cpu_millis":1,"cpu_percent":1,"processes":1}}}"#;
    let Ok(HostMsg::Status(st)) = HostMsg::decode(esc) else {
        panic!("decodes")
    };
    assert!(st.meters.contains_key("p\\u{1b}[2J"));
    let many: Vec<String> = (0..=MAX_PROFILES)
        .map(|i| format!(r#""p{i}":{{"runners":0,"rss_bytes":0,"cpu_millis":0,"cpu_percent":0,"processes":0}}"#))
        .collect();
    let frame = format!(
        r#"{{"type":"status","free":1,"draining":false,"meters":{{{}}}}}"#,
        many.join(",")
    );
    assert!(matches!(
        HostMsg::decode(&frame),
        Err(FrameError::OutOfBounds(_))
    ));
}

#[test]
fn a_status_carries_bounded_credential_limits_and_old_frames_still_decode() {
    let s = HostMsg::Status(Status {
        free: 1,
        limits: vec![LimitReport {
            target: "app".into(),
            held_until: 1_800_000_060_000,
            remaining: Some(4_321),
            reset: Some(1_800_003_600_000),
            secondary_hits: 2,
            points_limit: Some(900),
        }],
        ..Default::default()
    });
    assert_eq!(HostMsg::decode(&s.encode()), Ok(s));
    // A host from before sends none, and a status without any says nothing of them.
    let old = r#"{"type":"status","free":1,"draining":false,"unfit":[]}"#;
    let Ok(HostMsg::Status(st)) = HostMsg::decode(old) else {
        panic!("decodes")
    };
    assert!(st.limits.is_empty());
    assert!(!HostMsg::Status(st).encode().contains("limits"));
    // A target name is escaped; more reports than targets refuse the frame.
    let esc = r#"{"type":"status","free":1,"draining":false,"limits":[{"target":"a\u001b[2J"}]}"#;
    let Ok(HostMsg::Status(st)) = HostMsg::decode(esc) else {
        panic!("decodes")
    };
    assert_eq!(st.limits[0].target, "a\\u{1b}[2J");
    assert_eq!(st.limits[0].held_until, 0);
    let many: Vec<String> = (0..=MAX_TARGETS)
        .map(|i| format!(r#"{{"target":"t{i}"}}"#))
        .collect();
    let frame = format!(
        r#"{{"type":"status","free":1,"draining":false,"limits":[{}]}}"#,
        many.join(",")
    );
    assert!(matches!(
        HostMsg::decode(&frame),
        Err(FrameError::OutOfBounds(_))
    ));
}

#[test]
fn versions() {
    assert_eq!(negotiate(3), Some(3));
    assert_eq!(negotiate(4), Some(3));
    assert_eq!(negotiate(2), Some(2));
    assert_eq!(negotiate(1), None);
    assert!(is_directable(3) && !is_directable(2));
    // The host's side: it stays with a coordinator that answered a version it speaks,
    // and says why it leaves one it does not.
    assert_eq!(host_accepts(3), Ok(()));
    assert_eq!(host_accepts(2), Ok(()));
    for v in [1, 4] {
        let e = host_accepts(v).unwrap_err();
        assert!(
            e.contains(&format!("protocol version {v}")) && e.contains("this host speaks 2-3"),
            "{e}"
        );
    }
}

/// A host's `hello` says its binary's version beside the protocol's; an older host's
/// has none (the field is optional both ways), and a host's text is escaped.
#[test]
fn hello_carries_the_binary_version_optionally_escaped_and_bounded() {
    let HostMsg::Hello(mut h) = hello(3) else {
        unreachable!()
    };
    let old = HostMsg::Hello(h.clone()).encode();
    assert!(!old.contains("binary_version"), "{old}");
    let Ok(HostMsg::Hello(back)) = HostMsg::decode(&old) else {
        panic!("an older host's hello refused");
    };
    assert_eq!(back.host.binary_version, None);
    h.host.binary_version = Some("0.9.1\u{1b}[2J".into());
    let Ok(HostMsg::Hello(back)) = HostMsg::decode(&HostMsg::Hello(h.clone()).encode()) else {
        panic!("a hello with a binary version refused");
    };
    let v = back.host.binary_version.unwrap();
    assert!(v.starts_with("0.9.1") && !v.contains('\u{1b}'), "{v}");
    h.host.binary_version = Some("9".repeat(MAX_STR + 1));
    let e = HostMsg::decode(&HostMsg::Hello(h).encode()).unwrap_err();
    assert!(matches!(e, FrameError::OutOfBounds(_)), "{e}");
}

fn usage_row(day: i64, name: &str) -> UsageReport {
    use crate::domain::rollup::{UsageFigures, UsageKey, WaitHistogram};
    let mut wait = WaitHistogram::default();
    wait.add_wait(12_000);
    UsageReport::bounded(
        UsageKey {
            day,
            repo: format!("octo-org/{name}"),
            workflow: "CI".into(),
            job: format!("build ({name})"),
            profile: "linux".into(),
        },
        UsageFigures {
            runners: 3,
            jobs: 2,
            busy_ms: 1_234_567,
            idle_ms: 45_678,
            cpu_ms: 987_654,
            peak_rss_bytes: 3 << 30,
            rss_byte_secs: 1 << 40,
            wait,
            lost: 1,
            reruns: 0,
        },
    )
}

/// A host's usage rows go in bounded batches: at most `MAX_USAGE_ROWS` rows and
/// `USAGE_BYTES` of them a frame, however long the names, so the frame stays under
/// `MAX_MESSAGE`; `usage_upto` is the last row's number, where the next batch resumes.
#[test]
fn a_status_carries_a_bounded_batch_of_usage_rows() {
    let rows: Vec<(i64, UsageReport)> = (0..200)
        .map(|i| (i + 10, usage_row(20_000 + i / 50, &format!("repo-{i}"))))
        .collect();
    let mut s = Status::default();
    assert_eq!(s.pack_usage(rows.clone()), MAX_USAGE_ROWS);
    assert_eq!(s.usage_upto, Some(10 + MAX_USAGE_ROWS as i64 - 1));
    let text = HostMsg::Status(s.clone()).encode();
    println!(
        "status frame with {} usage rows: {} bytes",
        s.usage.len(),
        text.len()
    );
    assert!(text.len() < MAX_MESSAGE);
    assert_eq!(HostMsg::decode(&text).unwrap(), HostMsg::Status(s));

    // The longest names a row may carry: fewer rows, still under the bounds.
    let long = "\u{1b}[2J".to_string() + &"é".repeat(400);
    let wide: Vec<(i64, UsageReport)> = (0..200)
        .map(|i| {
            let mut r = usage_row(20_000, &long);
            r.key.workflow = long.clone();
            r.key.profile = format!("{i}{long}");
            r.figures.busy_ms = u64::MAX;
            (i, UsageReport::bounded(r.key, r.figures))
        })
        .collect();
    let mut s = Status::default();
    let n = s.pack_usage(wide);
    let text = HostMsg::Status(s.clone()).encode();
    println!(
        "status frame with {n} rows of the longest names: {} bytes",
        text.len()
    );
    assert!(n > 0 && n < MAX_USAGE_ROWS && text.len() < MAX_MESSAGE);
    let Ok(HostMsg::Status(back)) = HostMsg::decode(&text) else {
        panic!("refused: {text:.200}");
    };
    let r = &back.usage[0];
    assert!(r.key.repo.len() <= MAX_STR && !r.key.repo.contains('\u{1b}'));
    assert_eq!(r.figures.busy_ms, MAX_FIGURE);

    // A coordinator refuses more rows than the bound, or a figure past it.
    let over = Status {
        usage: (0..=MAX_USAGE_ROWS as i64)
            .map(|i| usage_row(1, &i.to_string()))
            .collect(),
        ..Default::default()
    };
    let e = HostMsg::decode(&HostMsg::Status(over).encode()).unwrap_err();
    assert!(matches!(e, FrameError::OutOfBounds(_)), "{e}");
    let mut big = usage_row(1, "x");
    big.figures.cpu_ms = MAX_FIGURE + 1;
    let over = Status {
        usage: vec![big],
        ..Default::default()
    };
    let e = HostMsg::decode(&HostMsg::Status(over).encode()).unwrap_err();
    assert!(matches!(e, FrameError::OutOfBounds(_)), "{e}");
}

/// An older host sends no usage and an older coordinator no `usage_after`: both read
/// as before, and a status without rows is written as before.
#[test]
fn usage_fields_are_optional_both_ways() {
    let old = r#"{"type":"status","free":2,"draining":false,"unfit":[]}"#;
    let Ok(HostMsg::Status(s)) = HostMsg::decode(old) else {
        panic!("an older host's status refused");
    };
    assert!(s.usage.is_empty() && s.usage_upto.is_none());
    assert_eq!(HostMsg::Status(s).encode(), old);
    let ack = r#"{"type":"hello_ack","version":3,"covered":[]}"#;
    let Ok(CoordMsg::HelloAck(a)) = CoordMsg::decode(ack) else {
        panic!("an older coordinator's hello_ack refused");
    };
    assert_eq!(a.usage_after, None);
    // A row from a build with other wait buckets still reads.
    let mut v = serde_json::to_value(usage_row(5, "r")).unwrap();
    v["wait"] = serde_json::json!([1, 2]);
    let r: UsageReport = serde_json::from_value(v).unwrap();
    assert_eq!(
        (
            r.figures.wait.0[0],
            r.figures.wait.0[1],
            r.figures.wait.0[2]
        ),
        (1, 2, 0)
    );
}

/// A host names the optional frames it takes in `hello`'s `features`: an older host's
/// `hello` has none (so it is sent no `owners`), a newer one's is bounded and escaped,
/// and a coordinator that does not know the field reads the rest (serde ignores it).
#[test]
fn hello_features_are_optional_bounded_and_escaped() {
    let HostMsg::Hello(mut h) = hello(3) else {
        unreachable!()
    };
    let old = HostMsg::Hello(h.clone()).encode();
    assert!(!old.contains("features"), "{old}");
    let Ok(HostMsg::Hello(back)) = HostMsg::decode(&old) else {
        panic!("an older host's hello refused");
    };
    assert!(!back.understands(FEATURE_OWNERS));
    h.features = vec![FEATURE_OWNERS.into(), "bell\u{7}".into()];
    let Ok(HostMsg::Hello(back)) = HostMsg::decode(&HostMsg::Hello(h.clone()).encode()) else {
        panic!("a hello with features refused");
    };
    assert!(back.understands(FEATURE_OWNERS));
    assert!(!back.features[1].contains('\u{7}'), "{:?}", back.features);
    // What an older coordinator reads: the same hello, the field unknown to it.
    #[derive(serde::Deserialize)]
    struct OlderHello {
        version: u32,
        host: HostInfo,
    }
    let v: serde_json::Value = serde_json::from_str(&HostMsg::Hello(h.clone()).encode()).unwrap();
    let older: OlderHello = serde_json::from_value(v).unwrap();
    assert_eq!(
        (older.version, older.host.id.as_str()),
        (3, "0123456789abcdef")
    );
    h.features = vec!["f".into(); MAX_FEATURES + 1];
    let e = HostMsg::decode(&HostMsg::Hello(h).encode()).unwrap_err();
    assert!(matches!(e, FrameError::OutOfBounds(_)), "{e}");
}

/// An `owners` frame is a coordinator type a host knows; one this build does not know
/// is skipped, so an older host that got one anyway would go on.
#[test]
fn owners_frames_decode_and_unknown_coordinator_frames_are_skipped() {
    let text = r#"{"type":"owners","owners":[{"runner_name":"rm-0123abcd-1","repo":"octo/app","job_name":"build","run_id":7}]}"#;
    let Ok(CoordMsg::Owners(o)) = CoordMsg::decode(text) else {
        panic!("owners refused");
    };
    let (runner, owner) = o.owners[0].clone().into_owner();
    assert_eq!((runner.as_str(), owner.workflow), ("rm-0123abcd-1", None));
    let e = CoordMsg::decode(r#"{"type":"owners_v2","owners":[]}"#).unwrap_err();
    assert!(e.is_skippable(), "{e}");
}
