//! `--help` rendered from the table: the overview, a group's commands, one command's usage and options.

use super::{COMMANDS, Command, GLOBAL, Opt, is_prefix};

fn options_block(out: &mut String, title: &str, opts: &[Opt]) {
    if opts.is_empty() {
        return;
    }
    out.push_str(&format!("\n{title}:\n"));
    let head = |o: &Opt| match o.value {
        Some(v) => format!("{} {v}", o.name),
        None => o.name.to_string(),
    };
    let w = opts.iter().map(|o| head(o).len()).max().unwrap_or(0);
    // Each option's help beside it, wrapped at 80 columns under itself.
    let room = 80usize.saturating_sub(w + 4).max(30);
    for o in opts {
        let help = wrap(o.help, room).replace('\n', &format!("\n{:1$}", "", w + 4));
        out.push_str(&format!("  {:w$}  {help}\n", head(o)));
    }
}

const USAGE_PREFIX: &str = "runner-manager [--state-dir DIR] [--json]";

/// Help for the whole program, or for the commands under a prefix (`profile`): a
/// group's help lists only that group's commands, without the program's banner and
/// global options.
pub fn help_overview(prefix: &[String]) -> String {
    if !prefix.is_empty() && is_prefix(prefix) {
        return help_group(prefix);
    }
    let mut out = format!(
        "runner-manager {}: autoscaler for ephemeral GitHub Actions self-hosted runners\n\n\
         Usage: {USAGE_PREFIX} COMMAND\n\nCommands:\n",
        env!("CARGO_PKG_VERSION")
    );
    let cmds: Vec<&Command> = COMMANDS
        .iter()
        .filter(|c| c.path.iter().zip(prefix).all(|(a, b)| a == b) && c.path.len() > prefix.len())
        .collect();
    let w = cmds.iter().map(|c| c.name().len()).max().unwrap_or(0);
    for c in cmds {
        out.push_str(&format!("  {:w$}  {}\n", c.name(), c.about));
    }
    options_block(&mut out, "Global options", GLOBAL);
    out.push_str("\nRun 'runner-manager COMMAND --help' for a command's options.\n");
    out
}

/// The commands under a prefix (`profile`), one line each.
fn help_group(prefix: &[String]) -> String {
    let group = prefix.join(" ");
    let cmds: Vec<&Command> = COMMANDS
        .iter()
        .filter(|c| c.path.len() > prefix.len() && c.path.iter().zip(prefix).all(|(a, b)| a == b))
        .collect();
    let w = cmds.iter().map(|c| c.name().len()).max().unwrap_or(0);
    let mut out = format!("Usage: {USAGE_PREFIX} {group} COMMAND\n\nCommands:\n");
    for c in cmds {
        out.push_str(&format!("  {:w$}  {}\n", c.name(), c.about));
    }
    out.push_str(&format!(
        "\nRun 'runner-manager {group} COMMAND --help' for a command's options, \
         'runner-manager --help' for every command.\n"
    ));
    out
}

/// Help for one command.
pub fn help_command(c: &Command) -> String {
    let usage = format!("{USAGE_PREFIX} {} {}", c.name(), c.args);
    let mut out = format!("{}\n\nUsage: {}\n", wrap(c.about, 80), usage.trim_end());
    if let Some(keys) = settable_keys(c) {
        out.push_str("\nKeys:\n");
        for line in wrap(&keys.join(", "), 78).lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    options_block(&mut out, "Options", c.options);
    options_block(&mut out, "Global options", GLOBAL);
    out
}

/// Every key a `set` command takes, from the domain's list, so a key added there is
/// in `--help` at once.
fn settable_keys(c: &Command) -> Option<&'static [&'static str]> {
    match c.path {
        ["host", "set"] => Some(crate::domain::host::SETTABLE_KEYS),
        ["profile", "set"] => Some(crate::domain::profile::SETTABLE_KEYS),
        ["target", "set"] => Some(crate::domain::target::SETTABLE_KEYS),
        _ => None,
    }
}

/// `text` in lines of at most `width` characters, broken between words (a word longer
/// than the width keeps a line of its own).
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let n = word.chars().count();
        if line > 0 && line + 1 + n > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_wraps_at_80_columns_and_lists_every_settable_key() {
        for path in [["host", "set"], ["profile", "set"], ["target", "set"]] {
            let c = COMMANDS.iter().find(|c| c.path == path).unwrap();
            let text = help_command(c);
            let keys = &text[text.find("\nKeys:\n").expect("a Keys block")..];
            for k in settable_keys(c).unwrap() {
                assert!(keys.contains(k), "{path:?} --help leaves out {k}");
            }
            for line in text.lines().filter(|l| !l.starts_with("Usage:")) {
                assert!(line.chars().count() <= 80, "{path:?}: {line:?}");
            }
        }
        assert_eq!(wrap("aa bb cc", 5), "aa bb\ncc");
        assert_eq!(wrap("a-very-long-word x", 4), "a-very-long-word\nx");
    }
}
