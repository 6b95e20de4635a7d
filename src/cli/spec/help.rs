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
    for o in opts {
        out.push_str(&format!("  {:w$}  {}\n", head(o), o.help));
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
    let mut out = format!("{}\n\nUsage: {}\n", c.about, usage.trim_end());
    options_block(&mut out, "Options", c.options);
    options_block(&mut out, "Global options", GLOBAL);
    out
}
