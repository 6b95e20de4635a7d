//! The section-8 pages must agree with `--help`: runner-manager-daemon(8) with
//! `daemon --help`, runner-manager-coordinator(8) with the coordinator commands.

use crate::support::Dir;
use std::collections::BTreeSet;

/// `--name` options in a command's `--help` (its own, not the global ones).
fn help_options(help: &str) -> BTreeSet<String> {
    crate::man::help_options(help, "Options")
}

/// `--name` options a page lists under OPTIONS (`.TP` then `.B`/`.BI \-\-name`).
fn page_options(page: &str) -> BTreeSet<String> {
    let section = page
        .split("\n.SH OPTIONS\n")
        .nth(1)
        .expect("an OPTIONS section");
    let section = section.split("\n.SH ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with(".B ") || l.starts_with(".BI "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|w| w.replace("\\-", "-"))
        .filter(|w| w.starts_with("--"))
        .collect()
}

fn page(name: &str) -> String {
    std::fs::read_to_string(format!("{}/man/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn daemon_page_lists_exactly_the_daemon_options() {
    let d = Dir::new("man8-daemon");
    let help = d.ok(&["daemon", "--help"]).stdout;
    assert_eq!(
        page_options(&page("runner-manager-daemon.8")),
        help_options(&help)
    );
}

#[test]
fn coordinator_page_lists_the_coordinator_commands_and_options() {
    let d = Dir::new("man8-coord");
    let top = d.ok(&["coordinator", "--help"]).stdout;
    let text = page("runner-manager-coordinator.8");
    let commands = text
        .split("\n.SH COMMANDS\n")
        .nth(1)
        .unwrap()
        .split("\n.SH ")
        .next()
        .unwrap();
    let mut options = BTreeSet::new();
    for line in top
        .lines()
        .filter_map(|l| l.trim().strip_prefix("coordinator "))
    {
        let words: Vec<&str> = line
            .split("  ")
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        let name = words.join(" ");
        assert!(
            commands.contains(name.as_str()),
            "coordinator {name} is not in runner-manager-coordinator(8)"
        );
        let mut args = vec!["coordinator"];
        args.extend(&words);
        args.push("--help");
        options.extend(help_options(&d.ok(&args).stdout));
    }
    assert!(!options.is_empty());
    assert_eq!(page_options(&text), options);
}
