//! The lexopt loop: global options anywhere, the command's words, then the options and
//! positional arguments that command's spec allows. Pure: no store, no filesystem.

use super::CliError;
use super::spec::{self, Command, Opt};
use std::ffi::OsString;
use std::path::PathBuf;

/// What to do, as parsed.
#[derive(Debug)]
pub enum Parsed {
    Help(String),
    Version,
    Run(Invocation),
}

/// A command with its arguments, not yet checked against the system.
#[derive(Debug)]
pub struct Invocation {
    pub command: &'static Command,
    pub state_dir: Option<PathBuf>,
    pub json: bool,
    /// Options in the order given, with their values (`None` for switches).
    pub options: Vec<(&'static str, Option<String>)>,
    pub positionals: Vec<String>,
}

impl Invocation {
    /// The last value given for `opt` (a repeated option: the last one wins). `opt` is
    /// the constant of `spec::opts` that the command's row lists, so a misspelt option
    /// does not compile; one the row does not list (another command's) panics in a
    /// debug build the first time any test runs the read, instead of reading `None`.
    pub fn value(&self, opt: &Opt) -> Option<&str> {
        self.values(opt).last()
    }

    /// Every value given for a repeatable `opt`, in order; `opt` as for
    /// [`Invocation::value`].
    pub fn values(&self, opt: &Opt) -> impl Iterator<Item = &str> {
        self.declared(opt);
        self.options
            .iter()
            .filter(move |(n, _)| *n == opt.name)
            .filter_map(|(_, v)| v.as_deref())
    }

    /// Whether a switch (or any option) was given; `opt` as for [`Invocation::value`].
    pub fn flag(&self, opt: &Opt) -> bool {
        self.declared(opt);
        self.options.iter().any(|(n, _)| *n == opt.name)
    }

    fn declared(&self, opt: &Opt) {
        debug_assert!(
            self.command.options.contains(opt),
            "{} reads {}, which its row in cli::spec's table does not list (another command's constant?)",
            self.command.path.join(" "),
            opt.name
        );
    }
}

fn utf8(arg: &str, v: OsString) -> Result<String, CliError> {
    v.into_string()
        .map_err(|_| CliError::usage(arg, "is not valid UTF-8"))
}

pub fn parse(args: Vec<OsString>) -> Result<Parsed, CliError> {
    use lexopt::Arg::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut words: Vec<String> = Vec::new();
    let mut command: Option<&'static Command> = None;
    let mut inv_opts = Vec::new();
    let mut positionals = Vec::new();
    let mut state_dir = None;
    let mut json = false;
    let mut help = false;
    while let Some(arg) = p.next().map_err(|e| CliError::Usage(e.to_string()))? {
        match arg {
            Long("state-dir") => state_dir = Some(state_dir_value(&mut p)?),
            Long("json") => json = true,
            Long("help") | Short('h') => help = true,
            Long("version") | Short('V') if command.is_none() => return Ok(Parsed::Version),
            Long(name) => {
                let flag = format!("--{name}");
                inv_opts.push(command_option(&mut p, command, &flag)?);
            }
            Short(c) => {
                return Err(CliError::usage(
                    &format!("-{c}"),
                    "unknown option; only -h and -V are short",
                ));
            }
            Value(v) => {
                let v = utf8("argument", v)?;
                if command.is_some() {
                    positionals.push(v);
                    continue;
                }
                words.push(v);
                match Words::read(&words) {
                    Words::Command(c) => command = Some(c),
                    Words::Prefix => {}
                    Words::Unknown if help => break,
                    Words::Unknown => return Err(unknown_command(&words)),
                }
            }
        }
    }
    let Some(command) = command else {
        return without_command(&words, help);
    };
    if help {
        return Ok(Parsed::Help(spec::help_command(command)));
    }
    check_positionals(command, &positionals)?;
    Ok(Parsed::Run(Invocation {
        command,
        state_dir,
        json,
        options: inv_opts,
        positionals,
    }))
}

/// `--state-dir`'s value: UTF-8 and not empty.
fn state_dir_value(p: &mut lexopt::Parser) -> Result<PathBuf, CliError> {
    let v = utf8(
        "--state-dir",
        p.value().map_err(|e| CliError::Usage(e.to_string()))?,
    )?;
    if v.is_empty() {
        return Err(CliError::usage("--state-dir", "must not be empty"));
    }
    Ok(PathBuf::from(v))
}

/// A long option `flag` of `command` (none yet: refused), with its value when its spec
/// takes one and refused with one when it does not.
fn command_option(
    p: &mut lexopt::Parser,
    command: Option<&'static Command>,
    flag: &str,
) -> Result<(&'static str, Option<String>), CliError> {
    let guess = spec::suggest_option(command, flag);
    let Some(cmd) = command else {
        // Before the command only the global options are known: a near one is what
        // was meant; anything else belongs after the command.
        let why = match guess {
            Some(o) => format!("unknown option; did you mean {o}?"),
            None => "unknown option here; options follow the command (see --help)".into(),
        };
        return Err(CliError::usage(flag, &why));
    };
    let Some(o) = cmd.option(flag) else {
        let guess = guess
            .map(|o| format!("did you mean {o}? "))
            .unwrap_or_default();
        return Err(CliError::usage(
            flag,
            &format!(
                "is not an option of '{}'; {guess}see '{} --help'",
                cmd.name(),
                cmd.name()
            ),
        ));
    };
    let value = match o.value {
        Some(_) => Some(utf8(
            o.name,
            p.value()
                .map_err(|_| CliError::usage(o.name, "needs a value"))?,
        )?),
        None => {
            if p.optional_value().is_some() {
                return Err(CliError::usage(o.name, "takes no value"));
            }
            None
        }
    };
    Ok((o.name, value))
}

/// What the command words read so far name.
enum Words {
    Command(&'static Command),
    /// The start of a command's words (a group).
    Prefix,
    Unknown,
}

impl Words {
    fn read(words: &[String]) -> Words {
        if let Some(c) = spec::find(words) {
            Words::Command(c)
        } else if spec::is_prefix(words) {
            Words::Prefix
        } else {
            Words::Unknown
        }
    }
}

fn unknown_command(words: &[String]) -> CliError {
    let guess = spec::suggest(words)
        .map(|g| format!("; did you mean '{g}'?"))
        .unwrap_or_default();
    CliError::Usage(format!(
        "unknown command '{}'{guess} (see runner-manager --help)",
        words.join(" ")
    ))
}

/// No command named: help for the group `words` name (or all), or why not.
fn without_command(words: &[String], help: bool) -> Result<Parsed, CliError> {
    if help || !words.is_empty() {
        if !words.is_empty() && !help {
            return Err(CliError::Usage(format!(
                "'{}' needs a subcommand:\n\n{}",
                words.join(" "),
                spec::help_overview(words)
            )));
        }
        return Ok(Parsed::Help(spec::help_overview(words)));
    }
    Err(CliError::Usage(format!(
        "no command given\n\n{}",
        spec::help_overview(&[])
    )))
}

/// As many positional arguments as the command's spec allows.
fn check_positionals(command: &Command, positionals: &[String]) -> Result<(), CliError> {
    let (lo, hi) = command.positionals;
    if positionals.len() < lo {
        return Err(CliError::Usage(format!(
            "'{}' needs {}: usage: runner-manager {} {}",
            command.name(),
            if lo == 1 {
                "an argument".to_string()
            } else {
                format!("at least {lo} arguments")
            },
            command.name(),
            command.args
        )));
    }
    if let Some(hi) = hi
        && positionals.len() > hi
    {
        return Err(CliError::usage(
            &positionals[hi],
            &format!("unexpected argument to '{}'", command.name()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::spec::opts;

    fn run(args: &[&str]) -> Invocation {
        match parse(args.iter().map(OsString::from).collect()) {
            Ok(Parsed::Run(inv)) => inv,
            other => panic!("{args:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn options_are_read_through_their_constants() {
        let inv = run(&[
            "profile", "add", "p", "--target", "t", "--labels", "x", "--max", "2", "--max", "3",
            "--paused",
        ]);
        assert_eq!(inv.value(&opts::profile_add::MAX), Some("3"));
        assert_eq!(inv.value(&opts::profile_add::MIN), None);
        assert!(inv.flag(&opts::profile_add::PAUSED));
        assert!(!inv.flag(&opts::profile_add::MONITOR));
        let inv = run(&[
            "coordinator",
            "serve",
            "--scaleset",
            "a=b",
            "--listen",
            "127.0.0.1:0",
            "--scaleset",
            "c=d",
        ]);
        let all: Vec<&str> = inv.values(&opts::coordinator_serve::SCALESET).collect();
        assert_eq!(all, ["a=b", "c=d"]);
        assert_eq!(
            inv.value(&opts::coordinator_serve::LISTEN),
            Some("127.0.0.1:0")
        );
    }

    /// `sim job add`'s `--repo` is spelt as `target add`'s but is another option (its
    /// help says what it means there): reading it in `target add` is a slip.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "target add reads --repo, which its row")]
    fn a_constant_of_another_command_is_refused_in_a_debug_build() {
        let inv = run(&["target", "add", "t", "--repo", "o/r", "--token-env", "T"]);
        let _ = inv.value(&opts::sim_job_add::REPO);
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "status reads --keep, which its row")]
    fn an_option_the_command_does_not_take_is_refused_in_a_debug_build() {
        let inv = run(&["status"]);
        let _ = inv.flag(&opts::demo::KEEP);
    }
}
