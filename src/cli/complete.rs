//! `runner-manager __complete WORDS...`: what the completion scripts ask the binary
//! for, as kubectl's do: the names in the books (targets, profiles, coordinator hosts,
//! recent attempts) and the setting keys of `target set`, `profile set` and `host
//! set`. WORDS are the words typed before the cursor; the answer is one candidate per
//! line, or nothing.
//!
//! What to complete is decided from the words alone ([`want`], pure, from the command
//! table: a command whose arguments start with `NAME` under `target` or `profile`
//! completes that group's names, `KEY=VALUE` completes its keys). The store is only
//! read, and only if it exists: completing never creates books, and never prints an
//! error into the user's command line.

use super::spec::{COMMANDS, Command, CommandId, GLOBAL};
use crate::store::{AttemptFilter, SqliteStore, Store};
use std::path::PathBuf;

/// The hidden command's name: not in `--help`, only the scripts call it.
pub const COMMAND: &str = "__complete";

/// Recent attempts offered after `attempt show`.
const RECENT_ATTEMPTS: u32 = 20;

/// What the word at the cursor is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    Nothing,
    Targets,
    Profiles,
    CoordinatorHosts,
    Attempts,
    /// Setting keys (each offered as `key=`), less those already given.
    Keys(Vec<&'static str>),
}

/// The words typed, read as the parser would: the state directory if given, the
/// command they name and the arguments after it, and what the cursor's word is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed {
    pub state_dir: Option<PathBuf>,
    pub want: Want,
}

/// Options that take a value: the word after them is that value.
fn takes_value(word: &str) -> bool {
    GLOBAL
        .iter()
        .chain(COMMANDS.iter().flat_map(|c| c.options))
        .any(|o| o.name == word && o.value.is_some())
}

/// `words` with bash's split of `key=value` (`=` is one of its word breaks) undone:
/// `max`, `=`, `8` are `max=8` again.
fn rejoin(words: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut glue = false;
    for w in words {
        match out.last_mut() {
            Some(last) if glue || w.starts_with('=') => last.push_str(w),
            _ => out.push(w.clone()),
        }
        glue = w.ends_with('=') && out.last().is_some_and(|l| !l.starts_with('-'));
    }
    out
}

/// What `words` (those before the cursor) ask to complete.
pub fn want(words: &[String]) -> Typed {
    let words = rejoin(words);
    // A value after `key=` is the user's to type.
    if words
        .last()
        .is_some_and(|w| w.ends_with('=') && !w.starts_with('-'))
    {
        return Typed {
            state_dir: None,
            want: Want::Nothing,
        };
    }
    let mut state_dir = None;
    let mut plain: Vec<&str> = Vec::new();
    // The option whose value is at the cursor, if the last word is one.
    let mut pending: Option<&str> = None;
    let mut it = words.iter().map(String::as_str).peekable();
    while let Some(w) = it.next() {
        if let Some(dir) = w.strip_prefix("--state-dir=") {
            state_dir = Some(PathBuf::from(dir));
        } else if takes_value(w) {
            match it.next() {
                Some(v) if w == "--state-dir" => state_dir = Some(PathBuf::from(v)),
                Some(_) => {}
                None => pending = Some(w),
            }
        } else if !w.starts_with('-') {
            plain.push(w);
        }
    }
    let command = COMMANDS
        .iter()
        .filter(|c| c.path.len() <= plain.len() && c.path.iter().zip(&plain).all(|(a, b)| a == b))
        .max_by_key(|c| c.path.len());
    let want = match (pending, command) {
        (Some("--target"), _) => Want::Targets,
        (Some("--profile"), _) => Want::Profiles,
        (Some(_), _) | (None, None) => Want::Nothing,
        (None, Some(c)) => for_command(c, &plain[c.path.len()..]),
    };
    Typed { state_dir, want }
}

/// What the next argument of `c` is, after `args`.
fn for_command(c: &Command, args: &[&str]) -> Want {
    let names = c.args.starts_with("NAME");
    let keys = c.args.contains("KEY=VALUE");
    let group = c.path[0];
    let adds = c.path.last() == Some(&"add");
    if names && args.is_empty() && !adds {
        return match c.path {
            ["target", ..] => Want::Targets,
            ["profile", ..] => Want::Profiles,
            ["coordinator", "host", ..] => Want::CoordinatorHosts,
            _ => Want::Nothing,
        };
    }
    if c.id == CommandId::AttemptShow && args.is_empty() {
        return Want::Attempts;
    }
    if keys && (args.len() >= usize::from(names)) {
        let all: &[&'static str] = match group {
            "target" => crate::domain::target::SETTABLE_KEYS,
            "profile" => crate::domain::profile::SETTABLE_KEYS,
            "host" => super::host::SETTABLE_KEYS,
            _ => &[],
        };
        let given: Vec<&str> = args
            .iter()
            .filter_map(|a| a.split_once('='))
            .map(|(k, _)| k)
            .collect();
        return Want::Keys(all.iter().copied().filter(|k| !given.contains(k)).collect());
    }
    Want::Nothing
}

/// The candidates for `typed`, from the store in `dir` if there is one.
fn candidates(want: &Want, dir: &std::path::Path) -> Vec<String> {
    if let Want::Keys(keys) = want {
        return keys.iter().map(|k| format!("{k}=")).collect();
    }
    if *want == Want::Nothing || !dir.join(crate::store::DB_FILE).is_file() {
        return Vec::new();
    }
    let Ok(store) = SqliteStore::open(dir) else {
        return Vec::new();
    };
    match want {
        Want::Targets => store
            .targets()
            .map(|ts| ts.into_iter().map(|t| t.name).collect())
            .unwrap_or_default(),
        Want::Profiles => store
            .profiles()
            .map(|ps| ps.into_iter().map(|p| p.name).collect())
            .unwrap_or_default(),
        Want::CoordinatorHosts => store
            .coord_hosts()
            .map(|hs| hs.into_iter().map(|h| h.name).collect())
            .unwrap_or_default(),
        Want::Attempts => store
            .attempts(&AttemptFilter {
                limit: Some(RECENT_ATTEMPTS),
                ..AttemptFilter::default()
            })
            .map(|a| a.into_iter().map(|a| a.id.to_string()).collect())
            .unwrap_or_default(),
        Want::Keys(_) | Want::Nothing => Vec::new(),
    }
}

/// Prints the candidates for `words`; never fails (a completion prints nothing rather
/// than an error).
pub fn run(words: &[String]) -> i32 {
    let typed = want(words);
    let dir = match typed.state_dir {
        Some(d) => Some(d),
        None => super::default_state_dir().ok(),
    };
    if let Some(dir) = dir {
        for c in candidates(&typed.want, &dir) {
            println!("{c}");
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Typed {
        want(&s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn names_follow_the_commands_that_take_one() {
        assert_eq!(w("profile set").want, Want::Profiles);
        assert_eq!(w("--json profile show").want, Want::Profiles);
        assert_eq!(w("target check").want, Want::Targets);
        assert_eq!(w("coordinator host rm").want, Want::CoordinatorHosts);
        assert_eq!(w("attempt show").want, Want::Attempts);
        // A new name is the user's to type; a second name is not taken.
        assert_eq!(w("profile add").want, Want::Nothing);
        assert_eq!(w("target show octo").want, Want::Nothing);
        assert_eq!(w("status").want, Want::Nothing);
        assert_eq!(w("no such command").want, Want::Nothing);
    }

    #[test]
    fn keys_follow_the_name_and_leave_out_those_given() {
        let Want::Keys(keys) = w("profile set linux").want else {
            panic!("keys");
        };
        assert_eq!(keys, crate::domain::profile::SETTABLE_KEYS);
        let Want::Keys(keys) = w("profile set linux max=8 --revision 3 min=1").want else {
            panic!("keys");
        };
        assert!(!keys.contains(&"max") && !keys.contains(&"min") && keys.contains(&"labels"));
        // As bash splits them at `=`.
        let Want::Keys(keys) = w("profile set linux max = 8 labels = x").want else {
            panic!("keys");
        };
        assert!(!keys.contains(&"max") && !keys.contains(&"labels"));
        assert_eq!(w("profile set linux max =").want, Want::Nothing);
        let Want::Keys(keys) = w("host set").want else {
            panic!("keys");
        };
        assert!(keys.contains(&"runner_uids"));
        let Want::Keys(keys) = w("target set octo").want else {
            panic!("keys");
        };
        assert!(keys.contains(&"max_in_flight"));
    }

    #[test]
    fn option_values_and_the_state_dir_are_read_as_the_parser_reads_them() {
        assert_eq!(w("profile add gpu --target").want, Want::Targets);
        assert_eq!(w("attempts --profile").want, Want::Profiles);
        assert_eq!(w("attempts --limit").want, Want::Nothing);
        // An option's value is not a command word.
        let t = w("--state-dir /srv/rm profile rm");
        assert_eq!(t.state_dir, Some(PathBuf::from("/srv/rm")));
        assert_eq!(t.want, Want::Profiles);
        let t = w("--state-dir=/srv/x target set");
        assert_eq!(t.state_dir, Some(PathBuf::from("/srv/x")));
        assert_eq!(t.want, Want::Targets);
    }

    #[test]
    fn keys_need_no_store_and_names_never_create_one() {
        let dir = std::env::temp_dir().join(format!("rm-complete-{}", std::process::id()));
        assert_eq!(candidates(&Want::Keys(vec!["max"]), &dir), vec!["max="]);
        assert!(candidates(&Want::Profiles, &dir).is_empty());
        assert!(!dir.exists(), "completing created {}", dir.display());
    }
}
