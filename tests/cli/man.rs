//! The man page and `--help` must agree on every command and option.

use crate::support::Dir;
use std::collections::{BTreeMap, BTreeSet};

/// Option names (`--x`) in a help section that starts at `title:`.
pub fn help_options(help: &str, title: &str) -> BTreeSet<String> {
    help.split(&format!("\n{title}:\n"))
        .nth(1)
        .map(|s| s.split("\n\n").next().unwrap_or(""))
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("--"))
        .map(str::to_string)
        .collect()
}

fn man_options(text: &str) -> BTreeSet<String> {
    let text = text.replace("\\-", "-");
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        if !name.is_empty() {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// The man page's commands (`.SS` headings under COMMANDS) and the options each names.
fn man_commands(page: &str) -> BTreeMap<String, BTreeSet<String>> {
    let section = page
        .split("\n.SH COMMANDS\n")
        .nth(1)
        .expect("a COMMANDS section")
        .split("\n.SH ")
        .next()
        .unwrap();
    section
        .split(".SS ")
        .skip(1)
        .map(|sub| {
            let (head, body) = sub.split_once('\n').unwrap_or((sub, ""));
            (head.trim().trim_matches('"').to_string(), man_options(body))
        })
        .collect()
}

#[test]
fn man_page_and_help_agree() {
    let d = Dir::new("man");
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/man/runner-manager.1"))
            .expect("man/runner-manager.1");
    let top = d.ok(&["--help"]).stdout;
    let commands: Vec<String> = top
        .split("\nCommands:\n")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        .map(|l| l.trim().split("  ").next().unwrap().to_string())
        .collect();
    let mut from_help = BTreeMap::new();
    for c in &commands {
        let mut args: Vec<&str> = c.split(' ').collect();
        args.push("--help");
        let h = d.ok(&args).stdout;
        from_help.insert(c.clone(), help_options(&h, "Options"));
    }
    let from_man = man_commands(&page);
    assert_eq!(
        from_help.keys().collect::<Vec<_>>(),
        from_man.keys().collect::<Vec<_>>(),
        "commands in --help vs the man page"
    );
    for (c, opts) in &from_help {
        assert_eq!(
            opts, &from_man[c],
            "options of '{c}' in --help vs the man page"
        );
    }
    let globals = help_options(&top, "Global options");
    let man_globals = man_options(
        page.split("\n.SH OPTIONS\n")
            .nth(1)
            .unwrap()
            .split("\n.SH ")
            .next()
            .unwrap(),
    );
    assert_eq!(
        globals, man_globals,
        "global options in --help vs the man page"
    );
    for code in ["0", "1", "2"] {
        assert!(
            page.contains(&format!(".B {code}\n")),
            "exit code {code} documented"
        );
    }
    assert!(page.contains("RUNNER_MANAGER_STATE_DIR") && page.contains("state.db"));
}
