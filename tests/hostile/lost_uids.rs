//! Jobs that kill their own runner (`kill -9 -1`, issue 48): GitHub keeps each lost job
//! in progress, and its runner registered, until the job fails ten minutes later. The
//! uid must not wait for that: once nothing of the attempt runs and its leftovers are
//! gone, the next job (another repository's) runs under it.

use super::setup::*;
use crate::support::*;
use runner_manager::domain::AttemptState;

#[test]
fn jobs_that_kill_their_own_runner_do_not_hold_their_uids() {
    // Six uids, six killers: before, every uid stayed held until GitHub failed the six
    // jobs (ten minutes), and the other repository's job stayed queued.
    let Some((mut w, uids)) = contained_world("hostile-lost-uids", 6, 6) else {
        return;
    };
    w.add_target("other", "other/app", true);
    w.add_profile(ProfileSpec::new("other", "other", &["other"]).max(1));
    w.start_daemon();
    // Each waits until all six run, so every uid of the block is one's, then kills
    // everything of its uid, its runner with it.
    let go = std::path::PathBuf::from(format!(
        "/tmp/rm-lost-go-{}-{}",
        std::process::id(),
        uids.range().start
    ));
    let _ = std::fs::remove_file(&go);
    let killers: Vec<u64> = (0..6)
        .map(|i| {
            run_script(
                &w,
                &format!("killer-{i}"),
                &format!(
                    "echo up; while [ ! -e {go} ]; do sleep 0.05; done; kill -9 -1\n",
                    go = go.display()
                ),
            )
        })
        .collect();
    wait_until(SETTLE, "six killers busy", || {
        w.attempts()
            .iter()
            .filter(|a| a.state == AttemptState::Busy)
            .count()
            == 6
    });
    std::fs::write(&go, "").unwrap();
    wait_until(SETTLE, "six runners killed by their own jobs", || {
        w.attempts()
            .iter()
            .filter(|a| {
                a.job_name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("killer-"))
            })
            .filter(|a| a.state.is_ended())
            .count()
            == 6
    });
    let held: Vec<u32> = w.attempts().iter().filter_map(|a| a.runner_uid).collect();
    assert_eq!(held.len(), 6, "six killers on six uids: {held:?}");
    for id in &killers {
        let j = w.sim.job(*id).unwrap();
        assert_eq!(j.conclusion, None, "GitHub keeps the lost job: {j:?}");
    }

    // Another repository's job: it starts under one of those uids, long before GitHub
    // gives up on the lost jobs.
    let next = w.sim.enqueue_script_job(
        "other/app",
        "after",
        &["self-hosted", "other"],
        "echo uid=$(id -u)\n",
    );
    let j = finished(&w, next);
    let out = output(&j);
    let ran_as = out
        .iter()
        .find_map(|l| l.strip_prefix("uid="))
        .and_then(|u| u.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no uid in {out:#?}"));
    assert!(
        uids.uids().contains(&ran_as),
        "{ran_as} is not a runner uid"
    );
    for id in &killers {
        let j = w.sim.job(*id).unwrap();
        assert_eq!(
            j.conclusion, None,
            "served before GitHub failed the lost jobs"
        );
    }
    // The killers' attempts wait for GitHub (their registrations), not their uids.
    let lost: Vec<_> = w
        .attempts()
        .into_iter()
        .filter(|a| {
            a.job_name
                .as_deref()
                .is_some_and(|n| n.starts_with("killer-"))
        })
        .collect();
    for a in &lost {
        assert!(
            !a.cleaned,
            "GitHub has not let go of {}: {a:?}",
            a.runner_name
        );
        let freed = a.host_cleaned_at.expect("the uid freed");
        eprintln!(
            "attempt {} uid {:?} freed {} ms after its end",
            a.id,
            a.runner_uid,
            freed - a.ended_at.unwrap()
        );
    }

    // GitHub fails the lost jobs; their registrations go, and all settles.
    w.sim
        .set_lost_runner_timeout(std::time::Duration::from_secs(1));
    w.wait_settled(&[REPO, "other/app"]);
    w.check_invariants(&[REPO, "other/app"]);
    let _ = std::fs::remove_file(&go);
}
