//! The command line as data: one table of commands and their options feeds the
//! parser, `--help` and the man-page drift test. A new command is one `CommandId`
//! variant, one entry here, and one arm in `cli::execute`, whose match on the id has
//! no fallback, so a variant without its handler does not compile. A new option is
//! one constant in `opts` (the only place `opt` and `switch` can be called), listed
//! by its command's row.
//!
//! Here: the types and finding a command from words. The options are declared in
//! `opts`, the table lists them in `table`, `--help` is rendered from it in `help`.

mod help;
pub mod opts;
mod table;

pub use help::{help_command, help_overview};
pub use table::{COMMANDS, GLOBAL};

/// One option of a command (or a global one), declared once in `opts`.
#[derive(Debug, PartialEq, Eq)]
pub struct Opt {
    /// `--name`, as typed.
    pub name: &'static str,
    /// The value's placeholder (`N`, `PATH`), or `None` for a switch.
    pub value: Option<&'static str>,
    pub help: &'static str,
}

/// Declares `CommandId` and `CommandId::ALL` from one list, so `ALL` holds every
/// variant by construction (the test that each has exactly one row relies on it).
macro_rules! command_ids {
    ($($variant:ident,)*) => {
        /// Which command a row of `COMMANDS` is: what `cli::execute` matches on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum CommandId {
            $($variant,)*
        }

        impl CommandId {
            /// Every command, in declaration order.
            pub const ALL: &'static [CommandId] = &[$(CommandId::$variant,)*];
        }
    };
}

command_ids! {
    TargetAdd,
    TargetSet,
    TargetList,
    TargetShow,
    TargetRm,
    TargetCheck,
    ProfileAdd,
    ProfileSet,
    ProfileList,
    ProfileShow,
    ProfileRm,
    ProfilePause,
    ProfileResume,
    HostShow,
    HostSet,
    HostReidentify,
    Status,
    Attempts,
    AttemptShow,
    Usage,
    Backup,
    Apply,
    Export,
    Daemon,
    Drain,
    Demo,
    SimGithub,
    SimJobAdd,
    Top,
    CoordinatorServe,
    CoordinatorHostAdd,
    CoordinatorHostRm,
    CoordinatorStatus,
    CoordinatorHosts,
    CoordinatorLeases,
    CoordinatorUsage,
    Doctor,
    ServiceInstall,
    ServiceStatus,
    ServiceUninstall,
    RunnerInstall,
    Update,
    Completions,
}

/// One command: its words (`["profile", "add"]`), what follows them, and its options.
#[derive(Debug)]
pub struct Command {
    /// Which handler runs it.
    pub id: CommandId,
    pub path: &'static [&'static str],
    /// The synopsis after the words, e.g. `NAME KEY=VALUE... [--revision N]`.
    pub args: &'static str,
    /// How many positional arguments it takes at least, and at most (`None` = any).
    pub positionals: (usize, Option<usize>),
    pub about: &'static str,
    pub options: &'static [Opt],
}

impl Command {
    pub fn name(&self) -> String {
        self.path.join(" ")
    }

    pub fn option(&self, name: &str) -> Option<&'static Opt> {
        self.options.iter().find(|o| o.name == name)
    }
}

/// The command these words name, if any.
pub fn find(words: &[String]) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| c.path.len() == words.len() && c.path.iter().zip(words).all(|(a, b)| a == b))
}

/// True when the words are the start of some command's path (e.g. `profile`).
pub fn is_prefix(words: &[String]) -> bool {
    COMMANDS
        .iter()
        .any(|c| c.path.len() > words.len() && c.path.iter().zip(words).all(|(a, b)| a == b))
}

/// The command the user most likely meant by `words`, whose last word is not one we
/// know there: the known word at that place nearest in spelling (`stats` → `status`,
/// `profile lst` → `profile list`), or one it begins (`prof` → `profile`).
pub fn suggest(words: &[String]) -> Option<String> {
    let (last, head) = words.split_last()?;
    let mut candidates: Vec<&str> = COMMANDS
        .iter()
        .filter(|c| c.path.len() > head.len() && c.path.iter().zip(head).all(|(a, b)| a == b))
        .map(|c| c.path[head.len()])
        .collect();
    candidates.dedup();
    let best = crate::domain::validate::nearest(last, candidates)?;
    let mut out: Vec<&str> = head.iter().map(String::as_str).collect();
    out.push(best);
    Some(out.join(" "))
}

/// The option the user most likely meant by `typed`, among `command`'s options (none:
/// only the global ones) and the global ones.
pub fn suggest_option(command: Option<&Command>, typed: &str) -> Option<&'static str> {
    let own = command.map_or(&[][..], |c| c.options);
    crate::domain::validate::nearest(typed, own.iter().chain(GLOBAL).map(|o| o.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    /// Adding a variant without its row, or giving two rows one id, fails here.
    #[test]
    fn every_command_id_has_exactly_one_row() {
        for id in CommandId::ALL {
            let rows: Vec<String> = COMMANDS
                .iter()
                .filter(|c| c.id == *id)
                .map(Command::name)
                .collect();
            assert_eq!(rows.len(), 1, "{id:?} is the id of rows {rows:?}");
        }
        assert_eq!(COMMANDS.len(), CommandId::ALL.len());
    }

    #[test]
    fn a_typo_gets_the_nearest_command() {
        for (typed, meant) in [
            ("stats", Some("status")),
            ("statsu", Some("status")),
            ("prof", Some("profile")),
            ("profile lst", Some("profile list")),
            ("profile resum", Some("profile resume")),
            ("targte", Some("target")),
            ("frobnicate", None),
            ("x", None),
        ] {
            assert_eq!(suggest(&words(typed)).as_deref(), meant, "{typed}");
        }
        use crate::domain::validate::edit_distance;
        assert_eq!(edit_distance("stats", "status"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", ""), 3);
        // A swap of neighbours is one slip, not two substitutions.
        assert_eq!(edit_distance("dmeo", "demo"), 1);
        assert_eq!(edit_distance("stauts", "status"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("ca", "abc"), 3);
    }

    #[test]
    fn a_mistyped_option_gets_the_nearest_of_its_command_or_the_global_ones() {
        let status = find(&words("status"));
        let install = find(&words("service install"));
        assert_eq!(suggest_option(status, "--jsn"), Some("--json"));
        assert_eq!(suggest_option(None, "--jsn"), Some("--json"));
        assert_eq!(suggest_option(install, "--nostart"), Some("--no-start"));
        assert_eq!(suggest_option(install, "--state-dr"), Some("--state-dir"));
        assert_eq!(suggest_option(install, "--frob"), None);
    }
}
