//! The pass's rules, driven through `on_event` alone: no threads, no clock.

use super::*;

fn ready(now: Millis) -> TargetState {
    let mut s = TargetState::default();
    assert_eq!(
        s.on_event(
            Event::Client {
                fit: ClientFit::Missing,
                poll_every: 5_000
            },
            now
        ),
        vec![Effect::BuildClient]
    );
    assert!(
        s.on_event(
            Event::ClientBuilt {
                kept_hold: None,
                runners_read_at: None,
                in_progress_read_at: None,
            },
            now
        )
        .is_empty()
    );
    s
}

fn facts() -> Facts {
    Facts {
        poll_every: 5_000,
        reads_queue: true,
        polled_max: 4,
        guard: Some(GuardRead::Visibility),
        ..Facts::default()
    }
}

fn sends(effects: &[Effect]) -> Vec<Read> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(r) if *r != Read::RunnerRelease => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn github(refusal: Refusal) -> TargetError {
    TargetError::GitHub {
        refusal,
        cause: Cause::Other,
        text: "GitHub said no".into(),
    }
}

fn demand_done(result: Result<(), TargetError>) -> Event<'static> {
    Event::Done(Outcome::Demand {
        units: 3,
        list_units: 2,
        first_reads: 1,
        result,
    })
}

#[test]
fn reads_go_one_at_a_time_guard_then_queue_then_runner_list() {
    let mut s = ready(0);
    let f = facts();
    let e = s.on_event(Event::Tick(&f), 0);
    assert_eq!(sends(&e), vec![Read::Guard(GuardRead::Visibility)]);
    assert!(e.contains(&Effect::Send(Read::RunnerRelease)));
    // Nothing else while the guard's read is out.
    assert!(sends(&s.on_event(Event::Tick(&f), 250)).is_empty());
    let found = Outcome::Guard {
        result: Ok(GuardFound::Visibility(false)),
    };
    let _ = s.on_event(Event::Done(found), 300);
    assert_eq!(s.public_repo(), Some(false));
    let e = s.on_event(Event::Tick(&f), 300);
    assert_eq!(
        sends(&e),
        vec![Read::Demand {
            new_runs: budget::new_runs_per_read(4),
            known_runs: budget::known_runs_per_read(4),
            in_progress: true,
        }]
    );
    let _ = s.on_event(demand_done(Ok(())), 400);
    assert_eq!(
        sends(&s.on_event(Event::Tick(&f), 400)),
        vec![Read::Runners]
    );
    let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), 500);
    // The queue is next due at its pace, the list a minute on, the guard an hour on.
    assert!(sends(&s.on_event(Event::Tick(&f), 5_000)).is_empty());
    // The queue again, its queued runs only: the in-progress lists are read every
    // `IN_PROGRESS_EVERY`.
    assert!(matches!(
        sends(&s.on_event(Event::Tick(&f), 5_300))[..],
        [Read::Demand {
            in_progress: false,
            ..
        }]
    ));
}

#[test]
fn a_target_without_a_queue_of_its_own_reads_none_and_empties_it() {
    let mut s = ready(0);
    let f = Facts {
        reads_queue: false,
        guard: None,
        ..facts()
    };
    let e = s.on_event(Event::Tick(&f), 0);
    assert!(e.contains(&Effect::QueueEmpty));
    assert_eq!(sends(&e), vec![Read::Runners]);
    assert_eq!(s.pace(), None);
}

#[test]
fn a_rate_limit_holds_every_read_until_its_time_and_is_recorded_at_once() {
    let mut s = ready(0);
    let f = Facts {
        guard: None,
        ..facts()
    };
    let _ = s.on_event(Event::Tick(&f), 0);
    let e = s.on_event(
        demand_done(Err(github(Refusal::RateLimitedUntil(60_000)))),
        100,
    );
    assert!(e.contains(&Effect::PersistHold(60_000)));
    assert!(e.contains(&Effect::Log(Line::TargetError("GitHub said no".into()))));
    assert!(!s.can_start(59_999) && s.can_start(60_000));
    assert_eq!(s.rate_limited_until(0, 100), Some(60_000));
    assert!(s.on_event(Event::Tick(&f), 59_999).is_empty());
    // Recorded once: the pass's end does not write it again once the store holds it.
    let _ = s.on_event(Event::HoldKept(60_000), 100);
    assert!(
        !s.on_event(Event::PassEnd { credential_hold: 0 }, 200)
            .contains(&Effect::PersistHold(60_000))
    );
    // The credential's own, longer hold is recorded at the pass's end.
    let e = s.on_event(
        Event::PassEnd {
            credential_hold: 90_000,
        },
        200,
    );
    assert!(e.contains(&Effect::PersistHold(90_000)));
    assert_eq!(s.rate_limited_until(90_000, 200), Some(90_000));
    // After it, reads go again, and a read that works clears the error once.
    assert!(!sends(&s.on_event(Event::Tick(&f), 90_000)).is_empty());
    let e = s.on_event(demand_done(Ok(())), 90_100);
    assert_eq!(e, vec![Effect::Log(Line::TargetRecovered)]);
    assert!(s.error().is_none());
}

#[test]
fn deterministic_refusals_back_off_and_are_no_rate_limit() {
    let mut s = ready(0);
    let _ = s.on_event(demand_done(Err(github(Refusal::Deterministic))), 1_000);
    assert!(!s.can_start(60_999) && s.can_start(61_000));
    assert_eq!(s.rate_limited_until(0, 1_000), None);
    let _ = s.on_event(demand_done(Err(github(Refusal::Deterministic))), 61_000);
    assert!(!s.can_start(180_999) && s.can_start(181_000));
    // A transient refusal holds nothing, but is the target's error.
    let mut t = ready(0);
    let _ = t.on_event(demand_done(Err(github(Refusal::Transient))), 1_000);
    assert!(t.can_start(1_000));
    assert_eq!(
        t.error().map(ToString::to_string).as_deref(),
        Some("GitHub said no")
    );
}

#[test]
fn a_failed_client_is_tried_again_at_the_next_poll_not_every_pass() {
    let mut s = TargetState::default();
    let missing = |poll_every| Event::Client {
        fit: ClientFit::Missing,
        poll_every,
    };
    assert_eq!(s.on_event(missing(5_000), 0), vec![Effect::BuildClient]);
    let e = s.on_event(
        Event::ClientFailed {
            error: "no such file".into(),
            poll_every: 5_000,
        },
        0,
    );
    assert_eq!(
        e,
        vec![Effect::Log(Line::TargetError(
            "credentials: no such file".into()
        ))]
    );
    assert!(s.on_event(missing(5_000), 4_999).is_empty());
    assert!(!s.can_start(4_999));
    assert_eq!(s.on_event(missing(5_000), 5_000), vec![Effect::BuildClient]);
    // A hold kept from the last daemon holds the new client's reads.
    let _ = s.on_event(
        Event::ClientBuilt {
            kept_hold: Some(30_000),
            runners_read_at: None,
            in_progress_read_at: None,
        },
        5_000,
    );
    assert!(s.on_event(Event::Tick(&facts()), 29_999).is_empty());
    assert!(
        s.on_event(Event::PassEnd { credential_hold: 0 }, 6_000)
            .is_empty()
    );
    // A client that fits is kept; a reload drops it.
    assert!(
        s.on_event(
            Event::Client {
                fit: ClientFit::Fits,
                poll_every: 5_000
            },
            6_000
        )
        .is_empty()
    );
    assert_eq!(s.on_event(Event::Reload, 6_000), vec![Effect::DropClient]);
    assert!(!s.has_client());
}

#[test]
fn host_failures_hold_a_profile_and_failures_sent_before_the_hold_do_not_lengthen_it() {
    let mut s = ready(0);
    let failed = |attempt| {
        Event::Done(Outcome::Started {
            attempt,
            profile: "linux".into(),
            end: StartEnd::Host("spawn: permission denied".into()),
        })
    };
    for id in [1, 2, 3] {
        assert_eq!(
            s.on_event(
                Event::Acted {
                    handed: &[],
                    intents: &[(id, "linux", true)],
                },
                0
            ),
            vec![Effect::Start(id)]
        );
    }
    assert_eq!(s.in_flight().len(), 3);
    let e = s.on_event(failed(1), 1_000);
    assert!(
        e.contains(&Effect::HoldStarts {
            profile: "linux".into(),
            until: 31_000,
            withdraw: vec![2, 3],
        }),
        "the two sent with it and still out are withdrawn: {e:?}"
    );
    // The two sent with it fail the same way: the hold stands as it was.
    assert!(s.on_event(failed(2), 1_500).is_empty());
    assert!(s.on_event(failed(3), 2_000).is_empty());
    assert!(s.in_flight().is_empty());
    assert_eq!(s.holds()["linux"].until, 31_000);
    // After it, the next failure waits twice as long; a spawn ends the hold.
    let e = s.on_event(failed(4), 31_000);
    assert!(e.contains(&Effect::HoldStarts {
        profile: "linux".into(),
        until: 91_000,
        withdraw: Vec::new(),
    }));
    let spawned = Outcome::Started {
        attempt: 5,
        profile: "linux".into(),
        end: StartEnd::Spawned,
    };
    assert_eq!(
        s.on_event(Event::Done(spawned), 92_000),
        vec![Effect::StartsResumed {
            profile: "linux".into()
        }]
    );
    assert!(s.holds().is_empty());
}

#[test]
fn runners_that_crash_at_start_three_in_a_row_hold_their_profile_until_one_listens() {
    let mut s = ready(0);
    let crashed = |n: u32| {
        Event::Planned(Planned {
            starts_seen: StartsSeen {
                crashed: (0..n)
                    .map(|i| {
                        let why = format!("runner rm-{i} crashed_at_start (exit 1)");
                        ("linux".to_string(), why)
                    })
                    .collect(),
                ..StartsSeen::default()
            },
            ..Planned::default()
        })
    };
    let held_until = |e: &[Effect]| {
        e.iter().find_map(|e| match e {
            Effect::HoldStarts { profile, until, .. } if profile == "linux" => Some(*until),
            _ => None,
        })
    };
    // One crash, then another: a runner's bad luck, no hold.
    assert!(s.on_event(crashed(1), 1_000).is_empty());
    assert!(s.on_event(crashed(1), 2_000).is_empty());
    // The third in a row holds the profile's starts, as a host failure does.
    let e = s.on_event(crashed(1), 3_000);
    assert_eq!(held_until(&e), Some(33_000), "{e:?}");
    let hold = &s.holds()["linux"];
    assert!(hold.crashes && hold.reason.starts_with("3 in a row, the last runner rm-0"));
    assert!(
        hold.describe(3_000)
            .starts_with("starts held 30s after runners crashed at start (1 in a row)"),
        "{}",
        hold.describe(3_000)
    );
    // The burst's other runners crash under the hold: it stands as it was.
    assert!(s.on_event(crashed(5), 4_000).is_empty());
    // A runner spawned after it proves nothing: the hold's streak goes on ...
    let spawned = |attempt| {
        Event::Done(Outcome::Started {
            attempt,
            profile: "linux".into(),
            end: StartEnd::Spawned,
        })
    };
    let _ = s.on_event(
        Event::Acted {
            handed: &[],
            intents: &[(9, "linux", true)],
        },
        33_000,
    );
    assert!(s.on_event(spawned(9), 33_500).is_empty());
    // ... so its crash waits twice as long.
    let e = s.on_event(crashed(1), 34_000);
    assert_eq!(held_until(&e), Some(94_000), "{e:?}");
    // Another profile's crashes are its own.
    let other = Event::Planned(Planned {
        starts_seen: StartsSeen {
            crashed: vec![("gpu".into(), "runner rm-7 crashed_at_start (exit 1)".into())],
            ..StartsSeen::default()
        },
        ..Planned::default()
    });
    assert!(s.on_event(other, 35_000).is_empty());
    // A runner that listens ends the hold and the streak.
    let listened = Event::Planned(Planned {
        starts_seen: StartsSeen {
            listened: ["linux".to_string()].into(),
            ..StartsSeen::default()
        },
        ..Planned::default()
    });
    assert_eq!(
        s.on_event(listened, 40_000),
        vec![Effect::StartsResumed {
            profile: "linux".into()
        }]
    );
    assert!(!s.holds().contains_key("linux"));
    assert!(s.on_event(crashed(2), 41_000).is_empty());
    // In one pass, three crashes are three in a row.
    let e = s.on_event(crashed(3), 42_000);
    assert_eq!(held_until(&e), Some(72_000), "{e:?}");
}

#[test]
fn an_intent_nothing_can_start_ends_not_started() {
    let mut s = TargetState::default();
    assert_eq!(
        s.on_event(
            Event::Acted {
                handed: &[],
                intents: &[(7, "linux", true)],
            },
            0
        ),
        vec![Effect::EndNotStarted {
            attempt: 7,
            why: "no GitHub client"
        }]
    );
    let mut s = ready(0);
    assert!(matches!(
        s.on_event(
            Event::Acted {
                handed: &[],
                intents: &[(8, "gone", false)],
            },
            0
        )[..],
        [Effect::EndNotStarted { attempt: 8, .. }]
    ));
    assert!(s.in_flight().is_empty());
}

#[test]
fn a_deep_queue_is_read_again_when_there_is_room_at_most_once_a_poll_interval() {
    let mut s = ready(0);
    let f = Facts {
        guard: None,
        ..facts()
    };
    let _ = s.on_event(Event::Tick(&f), 0);
    let _ = s.on_event(demand_done(Ok(())), 100);
    let _ = s.on_event(Event::Tick(&f), 100); // the runner list
    let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), 200);
    let deep = Facts {
        unread_runs: 3,
        queue_read_at: 0,
        poll_every: 2_000,
        ..f.clone()
    };
    // No room: the pace decides.
    assert!(sends(&s.on_event(Event::Tick(&deep), 2_000)).is_empty());
    let _ = s.on_event(
        Event::Planned(Planned {
            room_left: true,
            ..Planned::default()
        }),
        2_000,
    );
    assert!(sends(&s.on_event(Event::Tick(&deep), 1_999)).is_empty());
    assert!(matches!(
        sends(&s.on_event(Event::Tick(&deep), 2_000))[..],
        [Read::Demand { .. }]
    ));
}

/// The `known_runs` of the queue read a tick sends at `now`, once the previous read
/// came back.
fn known_runs_sent(s: &mut TargetState, f: &Facts, now: Millis) -> usize {
    let _ = s.on_event(demand_done(Ok(())), now - 1);
    match sends(&s.on_event(Event::Tick(f), now))[..] {
        [Read::Demand { known_runs, .. }] => known_runs,
        ref other => panic!("no queue read: {other:?}"),
    }
}

#[test]
fn while_no_start_can_go_only_the_runs_being_served_are_read_again() {
    // Max 310, GitHub's JIT points for the minute spent: nothing can start for a while.
    let f = Facts {
        guard: None,
        poll_every: 2_000,
        polled_max: 310,
        jit_room: Some(0),
        ..facts()
    };
    let all = budget::known_runs_per_read(310);
    let mut s = ready(0);
    // Before any plan the room is not known: every known run is read again (a restart
    // fills its view whole before it judges anything).
    let _ = s.on_event(Event::Tick(&f), 0);
    assert_eq!(known_runs_sent(&mut s, &f, 2_000), all);
    // 40 runners live or starting, 270 slots free, but no JIT point: their runs and the
    // queue's head, not the 260 runs that wait for the next minute.
    let planned = |free_slots, serving| Planned {
        free_slots,
        serving,
        ..Planned::default()
    };
    let _ = s.on_event(Event::Planned(planned(Some(270), 40)), 2_100);
    assert_eq!(
        known_runs_sent(&mut s, &f, 4_000),
        40 + budget::REREAD_MARGIN
    );
    assert_eq!(s.start_room(&f), Some(0));
    // Points again: the next read is whole, whatever is being served.
    let points = Facts {
        jit_room: Some(15),
        ..f.clone()
    };
    assert_eq!(s.start_room(&points), Some(15));
    assert_eq!(known_runs_sent(&mut s, &points, 6_000), all);
    // Every slot taken (points or not, or a limit GitHub does not have): the same cap.
    let _ = s.on_event(Event::Planned(planned(Some(0), 310)), 6_100);
    for (jit_room, now) in [(Some(15), 8_000), (None, 10_000)] {
        let full = Facts {
            jit_room,
            ..f.clone()
        };
        let cap = 310 + budget::REREAD_MARGIN;
        assert_eq!(known_runs_sent(&mut s, &full, now), cap);
    }
    // No polling profile may start (paused, monitor-only, unfit, draining): the view
    // stays whole, as it was before this cap.
    let _ = s.on_event(Event::Planned(planned(None, 12)), 40_000);
    assert_eq!(known_runs_sent(&mut s, &f, 42_000), all);
}

#[test]
fn a_budget_that_runs_low_stretches_the_pace_and_says_so_once() {
    let mut s = ready(0);
    let low = Facts {
        guard: None,
        budget: Some(Budget {
            limit: 5_000,
            remaining: 10,
            reset: 3_600_000,
        }),
        ..facts()
    };
    let e = s.on_event(Event::Tick(&low), 0);
    let paced = s.pace().expect("paced");
    assert!(paced.stretched && paced.every > 5_000, "{paced:?}");
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Log(Line::PollingPaced { .. })))
    );
    let _ = s.on_event(demand_done(Ok(())), 10);
    let _ = s.on_event(Event::Tick(&low), 10);
    let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), 20);
    let e = s.on_event(Event::Tick(&low), paced.every);
    assert!(matches!(sends(&e)[..], [Read::Demand { .. }]));
    assert!(
        !e.iter()
            .any(|e| matches!(e, Effect::Log(Line::PollingPaced { .. })))
    );
}

#[test]
fn a_bursts_re_reads_of_runs_its_runners_took_are_serving_not_polling() {
    // 300 jobs at once, a 2 s poll, most of an hour's 5,000 units left: the first read
    // reads every run (serving), 174 runners spawn, and the next read re-reads their
    // runs (a 200 each: the job was taken) besides the runs lists.
    let pace_after = |spawned: i64| {
        let f = Facts {
            guard: None,
            poll_every: 2_000,
            budget: Some(Budget {
                limit: 5_000,
                remaining: 4_500,
                reset: 3_600_000,
            }),
            ..facts()
        };
        let read = |units, first_reads| {
            Event::Done(Outcome::Demand {
                units,
                list_units: 2,
                first_reads,
                result: Ok(()),
            })
        };
        let mut s = ready(0);
        let _ = s.on_event(Event::Tick(&f), 0);
        let _ = s.on_event(read(302, 300), 1_000);
        let _ = s.on_event(Event::Tick(&f), 1_000); // the runner list
        let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), 1_100);
        for attempt in 0..spawned {
            let end = StartEnd::Spawned;
            let profile = "linux".to_string();
            let started = Outcome::Started {
                attempt,
                profile,
                end,
            };
            let _ = s.on_event(Event::Done(started), 1_500);
        }
        assert!(matches!(
            sends(&s.on_event(Event::Tick(&f), 2_000))[..],
            [Read::Demand { .. }]
        ));
        let _ = s.on_event(read(176, 0), 3_000);
        assert!(matches!(
            sends(&s.on_event(Event::Tick(&f), 4_000))[..],
            [Read::Demand { .. }]
        ));
        s.pace().expect("paced")
    };
    // Only the lists are polling's: the pace stays the poll interval.
    let pace = pace_after(174);
    assert!(!pace.stretched && pace.every == 2_000, "{pace:?}");
    // The same units with no runner behind them are polling's, and would not last.
    let pace = pace_after(0);
    assert!(pace.stretched && pace.every > 10_000, "{pace:?}");
}

#[test]
fn a_runner_whose_job_the_next_read_finds_taken_is_still_serving() {
    let mut s = ready(0);
    let spawn = |s: &mut TargetState, n: i64| {
        for attempt in 0..n {
            let end = StartEnd::Spawned;
            let started = Outcome::Started {
                attempt,
                profile: "linux".into(),
                end,
            };
            let _ = s.on_event(Event::Done(started), 0);
        }
    };
    spawn(&mut s, 100);
    // 81 of the 100 runners had taken their jobs when their runs were read again.
    assert_eq!(s.budget.cost(84, 3, 0), 3);
    // The other 19 are found by the next read, beside 20 spawned since; 5 more re-reads
    // are someone else's (a job taken elsewhere, cancelled): polling's.
    spawn(&mut s, 20);
    assert_eq!(s.budget.cost(3 + 39 + 5, 3, 0), 3 + 5);
    // A runner's unit is held one read more, not for ever.
    spawn(&mut s, 10);
    assert_eq!(s.budget.cost(3, 3, 0), 3);
    assert_eq!(s.budget.cost(3 + 10, 3, 0), 3 + 10 - 10);
    assert_eq!(s.budget.cost(3 + 10, 3, 0), 3 + 10);
    // The run lists are polling's, whatever else the read did.
    spawn(&mut s, 50);
    assert_eq!(s.budget.cost(4, 4, 0), 4);
}

#[test]
fn status_shows_the_first_error_that_applies() {
    let mut s = ready(0);
    let unfit = || Some("runner install: missing".to_string());
    assert_eq!(s.status_error(None, None, unfit()), unfit());
    assert_eq!(
        s.status_error(None, Some("listener: 401".into()), unfit())
            .as_deref(),
        Some("listener: 401")
    );
    assert_eq!(
        s.status_error(Some("2 public repositories left out"), None, unfit())
            .as_deref(),
        Some("2 public repositories left out")
    );
    let _ = s.on_event(
        Event::Planned(Planned {
            uids_used_up: Some("all 64 runner uids in use".into()),
            ..Planned::default()
        }),
        0,
    );
    assert_eq!(
        s.status_error(Some("x"), None, None).as_deref(),
        Some("all 64 runner uids in use")
    );
    let _ = s.on_event(demand_done(Err(github(Refusal::Transient))), 0);
    assert_eq!(
        s.status_error(Some("x"), None, None).as_deref(),
        Some("GitHub said no")
    );
}

#[test]
fn a_broken_install_is_logged_when_it_breaks_and_when_it_is_whole_again() {
    let mut s = TargetState::default();
    let names = vec!["linux".to_string()];
    let broken = BTreeMap::from([(
        "linux".to_string(),
        "bin/Runner.Listener missing".to_string(),
    )]);
    let e = s.on_event(
        Event::Planned(Planned {
            installs: Installs {
                errors: broken.clone(),
                profiles: names.clone(),
            },
            ..Planned::default()
        }),
        0,
    );
    assert_eq!(e.len(), 1);
    assert!(
        s.on_event(
            Event::Planned(Planned {
                installs: Installs {
                    errors: broken.clone(),
                    profiles: names.clone(),
                },
                ..Planned::default()
            }),
            1
        )
        .is_empty()
    );
    let whole = BTreeMap::new();
    assert_eq!(
        s.on_event(
            Event::Planned(Planned {
                installs: Installs {
                    errors: whole.clone(),
                    profiles: names.clone(),
                },
                ..Planned::default()
            }),
            2
        ),
        vec![Effect::Log(Line::InstallUsable {
            profile: "linux".into()
        })]
    );
}

#[test]
fn the_guard_keeps_what_it_knew_when_a_read_fails_and_retries_soon() {
    let mut s = ready(0);
    let f = Facts {
        guard: Some(GuardRead::Groups),
        ..facts()
    };
    let _ = s.on_event(Event::Tick(&f), 0);
    let groups = BTreeMap::from([
        ("a".to_string(), Some(true)),
        ("b".to_string(), Some(false)),
        ("c".to_string(), None),
    ]);
    let _ = s.on_event(
        Event::Done(Outcome::Guard {
            result: Ok(GuardFound::Groups(groups)),
        }),
        10,
    );
    assert_eq!(
        s.group_public(),
        &BTreeMap::from([("a".to_string(), true), ("b".to_string(), false)])
    );
    // An hour on it is read again; a transient failure keeps the facts and retries.
    let _ = s.on_event(demand_done(Ok(())), 20);
    let at = GUARD_EVERY;
    assert_eq!(
        sends(&s.on_event(Event::Tick(&f), at)),
        vec![Read::Guard(GuardRead::Groups)]
    );
    let _ = s.on_event(
        Event::Done(Outcome::Guard {
            result: Err(github(Refusal::Transient)),
        }),
        at,
    );
    assert_eq!(s.group_public().len(), 2);
    let e = s.on_event(Event::Tick(&f), at + 1);
    assert!(!sends(&e).contains(&Read::Guard(GuardRead::Groups)));
    let _ = s.on_event(demand_done(Ok(())), at + 2);
    let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), at + 3);
    let e = s.on_event(Event::Tick(&f), at + GUARD_RETRY);
    assert_eq!(sends(&e), vec![Read::Guard(GuardRead::Groups)]);
}

#[test]
fn lost_jobs_due_are_carried_beside_the_reads_one_look_at_a_time_and_a_rate_limit_holds() {
    let mut s = ready(0);
    // A row due later waits for its time.
    let later = Facts {
        reruns_first_due: Some(1),
        ..facts()
    };
    assert!(!sends(&s.on_event(Event::Tick(&later), 0)).contains(&Read::Reruns));
    let mut s = ready(0);
    let due = Facts {
        reruns_first_due: Some(0),
        ..facts()
    };
    let first = sends(&s.on_event(Event::Tick(&due), 0));
    assert!(first.contains(&Read::Reruns), "{first:?}");
    assert!(
        first.contains(&Read::Guard(GuardRead::Visibility)),
        "a lost job never waits for the reads, nor they for it: {first:?}"
    );
    // While one look is out, and within RERUNS_EVERY after it, no other.
    assert!(!sends(&s.on_event(Event::Tick(&due), 1_000)).contains(&Read::Reruns));
    let _ = s.on_event(Event::Done(Outcome::Reruns { result: Ok(()) }), 1_500);
    assert!(!sends(&s.on_event(Event::Tick(&due), RERUNS_EVERY - 1)).contains(&Read::Reruns));
    assert!(sends(&s.on_event(Event::Tick(&due), RERUNS_EVERY)).contains(&Read::Reruns));
    // Nothing due: nothing sent.
    let idle = facts();
    assert!(!sends(&s.on_event(Event::Tick(&idle), 3 * RERUNS_EVERY)).contains(&Read::Reruns));
    // A rate limit met while carrying them holds the target like any read's.
    let until = 60_000;
    let _ = s.on_event(
        Event::Done(Outcome::Reruns {
            result: Err(github(Refusal::RateLimitedUntil(until))),
        }),
        RERUNS_EVERY + 1,
    );
    assert!(sends(&s.on_event(Event::Tick(&due), until - 1)).is_empty());
    assert!(s.rate_limited_until(0, until - 1).is_some());
}

/// A pass at `now`: whether its queue read takes the in-progress lists along (`None`:
/// no queue read), answered with `result`; the runner list that goes between two queue
/// reads is answered too.
fn read_with_in_progress(
    s: &mut TargetState,
    f: &Facts,
    now: Millis,
    result: Result<(), TargetError>,
) -> Option<bool> {
    let e = s.on_event(Event::Tick(f), now);
    let sent = sends(&e).into_iter().find_map(|r| match r {
        Read::Demand { in_progress, .. } => Some(in_progress),
        _ => None,
    });
    let _ = s.on_event(demand_done(result), now + 1);
    for r in sends(&s.on_event(Event::Tick(f), now + 2)) {
        assert_eq!(r, Read::Runners);
        let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), now + 3);
    }
    sent
}

#[test]
fn the_in_progress_lists_go_with_a_read_every_while_and_after_a_failed_read_of_them() {
    let mut s = ready(0);
    let f = Facts {
        guard: None,
        poll_every: 2_000,
        ..facts()
    };
    let demand = |s: &mut TargetState, now: Millis, result: Result<(), TargetError>| {
        read_with_in_progress(s, &f, now, result).expect("a queue read at each poll")
    };
    let every = budget::IN_PROGRESS_EVERY;
    assert_eq!(every % 2_000, 0, "the test polls every 2 s");
    let polls = (2 * every / 2_000 + 1) as usize;
    let read: Vec<bool> = (0..polls)
        .map(|i| demand(&mut s, i as Millis * 2_000, Ok(())))
        .collect();
    let want: Vec<bool> = (0..polls)
        .map(|i| i as Millis * 2_000 % every == 0)
        .collect();
    assert_eq!(read, want, "the first read, then one every {every} ms");
    // A read of them that fails: the next read reads them again.
    let at = polls as Millis * 2_000;
    assert!(!demand(&mut s, at, Ok(())));
    let at = 3 * every;
    assert!(demand(&mut s, at, Err(github(Refusal::Transient))));
    assert!(demand(&mut s, at + 2_000, Ok(())));
    assert!(!demand(&mut s, at + 4_000, Ok(())));
}

/// A new daemon's state at 100 s, its client built with the times the last one kept.
fn restarted(
    poll_every: Millis,
    runners_read_at: Option<Millis>,
    in_progress_read_at: Option<Millis>,
) -> TargetState {
    let mut s = TargetState::default();
    let _ = s.on_event(
        Event::Client {
            fit: ClientFit::Missing,
            poll_every,
        },
        100_000,
    );
    let _ = s.on_event(
        Event::ClientBuilt {
            kept_hold: None,
            runners_read_at,
            in_progress_read_at,
        },
        100_000,
    );
    s
}

#[test]
fn the_runner_list_keeps_its_minute_across_a_restart() {
    let built = |read_at| restarted(5_000, read_at, None);
    let lists = |s: &mut TargetState, now| {
        let f = Facts {
            guard: None,
            reads_queue: false,
            ..facts()
        };
        sends(&s.on_event(Event::Tick(&f), now)).contains(&Read::Runners)
    };
    // Never read: at once.
    assert!(lists(&mut built(None), 100_000));
    // Read 20 s before the restart: 40 s on.
    let mut s = built(Some(80_000));
    assert!(!lists(&mut s, 100_000));
    assert!(!lists(&mut s, 139_999));
    assert!(lists(&mut s, 140_000));
    // Read long ago: at once. A time ahead of the clock waits a minute at most.
    assert!(lists(&mut built(Some(1_000)), 100_000));
    let mut s = built(Some(900_000));
    assert!(!lists(&mut s, 159_999));
    assert!(lists(&mut s, 160_000));
}

#[test]
fn while_webhooks_come_steadily_the_run_lists_are_a_backstop_read_every_ten_seconds() {
    let mut s = ready(0);
    let steady = Facts {
        guard: None,
        poll_every: 1_000,
        hooks_steady: true,
        ..facts()
    };
    // Each second, a pass: which of them read the queue.
    let reads = |s: &mut TargetState, f: &Facts, from: Millis, to: Millis| -> Vec<Millis> {
        let mut at = Vec::new();
        for now in (from..to).step_by(1_000) {
            for r in sends(&s.on_event(Event::Tick(f), now)) {
                let done = match r {
                    Read::Demand { .. } => {
                        at.push(now);
                        demand_done(Ok(()))
                    }
                    _ => Event::Done(Outcome::Runners { result: Ok(()) }),
                };
                let _ = s.on_event(done, now + 1);
            }
        }
        at
    };
    let every = budget::HOOKED_POLL_EVERY;
    assert_eq!(reads(&mut s, &steady, 0, 2 * every), vec![0, every]);
    // A delivery seen lost (or none for long): the lists are read at every poll again.
    let lossy = Facts {
        hooks_steady: false,
        ..steady
    };
    assert_eq!(
        reads(&mut s, &lossy, 3 * every, 3 * every + 3_000),
        vec![3 * every, 3 * every + 1_000, 3 * every + 2_000]
    );
    // A poll_interval longer than the backstop's stays as set.
    let slow = Facts {
        poll_every: 30_000,
        ..steady
    };
    assert_eq!(reads(&mut s, &slow, 4 * every, 4 * every + 60_000).len(), 2);
}

#[test]
fn a_daemon_that_just_started_reads_at_once_and_waits_once_deliveries_show_they_come() {
    let mut s = ready(0);
    let quiet = Facts {
        guard: None,
        poll_every: 1_000,
        ..facts()
    };
    assert!(
        sends(&s.on_event(Event::Tick(&quiet), 0)).contains(&Read::Demand {
            new_runs: budget::new_runs_per_read(4),
            known_runs: budget::known_runs_per_read(4),
            in_progress: true,
        })
    );
    let _ = s.on_event(demand_done(Ok(())), 1);
    // A delivery came meanwhile: the read a poll later waits for the backstop's time.
    let steady = Facts {
        hooks_steady: true,
        ..quiet
    };
    let demand = |e: &[Effect]| sends(e).iter().any(|r| matches!(r, Read::Demand { .. }));
    for now in [1_000, 5_000, budget::HOOKED_POLL_EVERY - 1] {
        let e = s.on_event(Event::Tick(&steady), now);
        assert!(!demand(&e), "at {now}");
        for r in sends(&e) {
            assert_eq!(r, Read::Runners);
            let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), now + 1);
        }
    }
    assert!(demand(
        &s.on_event(Event::Tick(&steady), budget::HOOKED_POLL_EVERY)
    ));
}

#[test]
fn the_in_progress_lists_keep_their_ten_seconds_across_a_restart() {
    let built = |read_at| restarted(1_000, None, read_at);
    let f = Facts {
        guard: None,
        poll_every: 1_000,
        ..facts()
    };
    // Whether the queue read at `now` takes the in-progress lists along.
    let with_them =
        |s: &mut TargetState, now| read_with_in_progress(s, &f, now, Ok(())).expect("a queue read");
    let every = budget::IN_PROGRESS_EVERY;
    // Never read: with the first queue read.
    assert!(with_them(&mut built(None), 100_000));
    // Read 4 s before the restart: the queue at once, the lists 6 s on.
    let mut s = built(Some(96_000));
    assert!(!with_them(&mut s, 100_000));
    assert!(!with_them(&mut s, 96_000 + every - 1_000));
    assert!(with_them(&mut s, 96_000 + every));
    // Read long ago: at once. A time ahead of the clock waits 10 s at most.
    assert!(with_them(&mut built(Some(1_000)), 100_000));
    let mut s = built(Some(900_000));
    assert!(!with_them(&mut s, 100_000 + every - 1_000));
    assert!(with_them(&mut s, 100_000 + every));
}

fn refused_401() -> TargetError {
    TargetError::GitHub {
        refusal: Refusal::CredentialsRefused,
        cause: Cause::Credentials,
        text: "GitHub rejected the credentials (401)".into(),
    }
}

#[test]
fn a_401_is_a_refused_credential_never_a_rate_limit_nor_kept_for_a_restart() {
    let mut s = ready(0);
    let f = Facts {
        guard: None,
        ..facts()
    };
    let _ = s.on_event(Event::Tick(&f), 0);
    let e = s.on_event(demand_done(Err(refused_401())), 1_000);
    // Read again at once, in case it was fixed within the file's clock tick.
    assert!(e.contains(&Effect::RecheckCredential), "{e:?}");
    assert!(!e.iter().any(|e| matches!(e, Effect::PersistHold(_))));
    let shown = s.error().map(ToString::to_string).unwrap_or_default();
    assert!(
        shown.starts_with("credentials refused (401) since 1970-01-01T00:00:01"),
        "{shown}"
    );
    assert_eq!(s.credentials_refused_since(), Some(1_000));
    assert_eq!(s.rate_limited_until(0, 1_000), None);
    assert!(!s.can_start(60_999) && s.can_start(61_000));
    // The pass's end keeps no hold for a restarted daemon: only GitHub's word is kept.
    let e = s.on_event(Event::PassEnd { credential_hold: 0 }, 1_100);
    assert!(
        !e.iter().any(|e| matches!(e, Effect::PersistHold(_))),
        "{e:?}"
    );
    // Refused again after the backoff: the same error (logged once), its first time.
    let _ = s.on_event(Event::Tick(&f), 61_000);
    let e = s.on_event(demand_done(Err(refused_401())), 61_100);
    assert!(!e.iter().any(|e| matches!(e, Effect::Log(_))), "{e:?}");
    assert_eq!(s.credentials_refused_since(), Some(1_000));
}

#[test]
fn a_changed_credential_lifts_the_refusal_and_reads_at_once() {
    let mut s = ready(0);
    let f = Facts {
        guard: None,
        ..facts()
    };
    let _ = s.on_event(Event::Tick(&f), 0);
    let _ = s.on_event(demand_done(Err(refused_401())), 1_000);
    let _ = s.on_event(demand_done(Err(refused_401())), 1_100);
    // Held for minutes by the backoff...
    assert!(sends(&s.on_event(Event::Tick(&f), 5_000)).is_empty());
    // ... until the token file changes: the client is built again, nothing waits.
    let e = s.on_event(
        Event::Client {
            fit: ClientFit::CredentialChanged,
            poll_every: 5_000,
        },
        5_000,
    );
    assert_eq!(
        e,
        vec![Effect::Log(Line::CredentialChanged), Effect::BuildClient]
    );
    assert_eq!(s.credentials_refused_since(), None);
    let _ = s.on_event(
        Event::ClientBuilt {
            kept_hold: None,
            runners_read_at: None,
            in_progress_read_at: None,
        },
        5_000,
    );
    assert!(s.can_start(5_000));
    assert!(matches!(
        sends(&s.on_event(Event::Tick(&f), 5_000))[..],
        [Read::Demand { .. }]
    ));
    // It works: the error is cleared, once.
    let e = s.on_event(demand_done(Ok(())), 5_200);
    assert_eq!(e, vec![Effect::Log(Line::TargetRecovered)]);
    // A rate limit GitHub set stands through a change of credential.
    let mut r = ready(0);
    let _ = r.on_event(
        demand_done(Err(github(Refusal::RateLimitedUntil(90_000)))),
        100,
    );
    let _ = r.on_event(
        Event::Client {
            fit: ClientFit::CredentialChanged,
            poll_every: 5_000,
        },
        200,
    );
    assert_eq!(r.rate_limited_until(0, 200), Some(90_000));
}

#[test]
fn a_call_that_goes_through_ends_the_refusal() {
    let mut s = ready(0);
    let _ = s.on_event(demand_done(Err(refused_401())), 1_000);
    let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), 61_000);
    assert_eq!(s.credentials_refused_since(), None);
}

#[test]
fn the_loop_wakes_at_the_first_read_or_hold_due_and_at_most_an_observation_on() {
    let mut s = ready(0);
    let f = Facts {
        guard: None,
        ..facts()
    };
    // The queue is read at once, next at its pace (5 s); the runner list waits for it.
    assert!(matches!(
        sends(&s.on_event(Event::Tick(&f), 0))[..],
        [Read::Demand { .. }]
    ));
    assert_eq!(
        s.wake_at(0),
        OBSERVE_EVERY,
        "its runners are watched that often"
    );
    let _ = s.on_event(demand_done(Ok(())), 100);
    assert_eq!(
        sends(&s.on_event(Event::Tick(&f), 100)),
        vec![Read::Runners]
    );
    let _ = s.on_event(Event::Done(Outcome::Runners { result: Ok(()) }), 200);
    // 4.9 s before the queue is due: a pass a few ms before it wakes at its time.
    assert_eq!(s.wake_at(4_900), 5_000);
    // A rate limit until 5 020 ms: nothing is read before, the pass wakes then.
    let _ = s.on_event(
        Event::Done(Outcome::Guard {
            result: Err(github(Refusal::RateLimitedUntil(5_020))),
        }),
        5_000,
    );
    assert_eq!(s.wake_at(5_001), 5_020);
    // A reload makes every read due now: the loop does not spin on it, it passes at
    // its next observation (and the pass that saw them decided).
    let _ = s.on_event(Event::Reload, 6_000);
    assert_eq!(s.wake_at(6_000), 6_000 + OBSERVE_EVERY);
}

#[test]
fn registrations_the_plan_found_unexplained_are_deleted_by_an_effect_only_with_a_client() {
    let orphan = RegisteredRunner {
        id: 2,
        name: "rm-h-9".into(),
        online: false,
        busy: false,
        labels: Vec::new(),
    };
    let planned = || Planned {
        orphans: vec![orphan.clone()],
        ..Planned::default()
    };
    let mut s = ready(0);
    let e = s.on_event(Event::Planned(planned()), 0);
    assert_eq!(e, vec![Effect::DeleteOrphans(vec![orphan.clone()])]);
    assert!(s.on_event(Event::Planned(Planned::default()), 0).is_empty());
    // No client: nothing on GitHub can be done; the next list finds them again.
    let mut s = TargetState::default();
    assert!(s.on_event(Event::Planned(planned()), 0).is_empty());
}

#[test]
fn a_reload_reads_the_guards_facts_again_at_once() {
    let mut s = ready(0);
    let f = facts();
    let e = s.on_event(Event::Tick(&f), 0);
    assert_eq!(sends(&e), vec![Read::Guard(GuardRead::Visibility)]);
    let found = Outcome::Guard {
        result: Ok(GuardFound::Visibility(false)),
    };
    let _ = s.on_event(Event::Done(found), 100);
    assert!(matches!(
        sends(&s.on_event(Event::Tick(&f), 200))[..],
        [Read::Demand { .. }]
    ));
    let _ = s.on_event(demand_done(Ok(())), 300);
    // SIGHUP: the settings are read again, GitHub's among them (a repository made
    // public is seen now, not within the hour).
    assert_eq!(s.on_event(Event::Reload, 1_000), vec![Effect::DropClient]);
    let rebuilt = Event::Client {
        fit: ClientFit::Missing,
        poll_every: 5_000,
    };
    assert_eq!(s.on_event(rebuilt, 1_000), vec![Effect::BuildClient]);
    let built = Event::ClientBuilt {
        kept_hold: None,
        runners_read_at: None,
        in_progress_read_at: None,
    };
    let _ = s.on_event(built, 1_000);
    assert_eq!(
        sends(&s.on_event(Event::Tick(&f), 1_000)),
        vec![Read::Guard(GuardRead::Visibility)]
    );
}
