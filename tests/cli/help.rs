//! Help where the user is: a group's commands for a group, a guess for a typo.

use crate::support::Dir;

#[test]
fn a_group_without_a_subcommand_lists_that_groups_commands_only() {
    let d = Dir::new("group-help");
    let r = d.run(&["profile"]);
    assert_eq!(r.code, 2);
    assert!(r.stdout.is_empty());
    assert!(
        r.stderr
            .starts_with("runner-manager: 'profile' needs a subcommand:\n\nUsage: "),
        "{}",
        r.stderr
    );
    for sub in ["add", "set", "list", "show", "rm", "pause", "resume"] {
        assert!(
            r.stderr.contains(&format!("\n  profile {sub} ")),
            "{sub}: {}",
            r.stderr
        );
    }
    for other in [
        "target add",
        "host set",
        "Global options",
        "--state-dir DIR  ",
    ] {
        assert!(!r.stderr.contains(other), "{other}: {}", r.stderr);
    }
    let h = d.ok(&["profile", "--help"]);
    assert!(h.stdout.starts_with("Usage: "), "{}", h.stdout);
    assert!(h.stdout.contains("\n  profile add ") && !h.stdout.contains("target add"));
}

#[test]
fn an_unknown_command_gets_a_did_you_mean() {
    let d = Dir::new("did-you-mean");
    let r = d.run(&["stats"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        "runner-manager: unknown command 'stats'; did you mean 'status'? (see runner-manager --help)\n\
         fix: runner-manager --help\n"
    );
    let r = d.run(&["profile", "lst"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("did you mean 'profile list'?"),
        "{}",
        r.stderr
    );
    let r = d.run(&["frobnicate"]);
    assert_eq!(r.code, 2);
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
}

/// Issue 38: did-you-mean for setting keys and options, as for commands. Each is exit
/// 2 naming what was typed, and nothing is written.
#[test]
fn a_mistyped_key_or_option_gets_a_did_you_mean_and_writes_nothing() {
    let d = crate::support::seeded("did-you-mean-keys");
    let before = crate::support::snapshot(&d.state());
    for (args, named, meant) in [
        (vec!["profile", "set", "linux", "maxx=3"], "maxx", "'max'"),
        (
            vec!["profile", "set", "linux", "idle_timout=5m"],
            "idle_timout",
            "'idle_timeout'",
        ),
        (vec!["host", "set", "capacty=3"], "capacty", "'capacity'"),
        (
            vec!["target", "set", "octo", "poll_intervl=30s"],
            "poll_intervl",
            "'poll_interval'",
        ),
        (vec!["status", "--jsn"], "--jsn", "--json"),
        (vec!["--jsn", "status"], "--jsn", "--json"),
        (
            vec!["profile", "add", "x", "--target", "octo", "--lables", "a"],
            "--lables",
            "--labels",
        ),
    ] {
        let r = d.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("invalid {named}:"))
                && r.stderr.contains(&format!("did you mean {meant}?")),
            "{args:?}: {}",
            r.stderr
        );
    }
    // Nothing near: no guess, and the known keys are still listed.
    let r = d.run(&["profile", "set", "linux", "frobnicate=1"]);
    assert_eq!(r.code, 2);
    assert!(
        !r.stderr.contains("did you mean") && r.stderr.contains("(known: target, labels,"),
        "{}",
        r.stderr
    );
    assert_eq!(crate::support::snapshot(&d.state()), before);
}
