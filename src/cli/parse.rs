//! The lexopt loop: global options anywhere, the command's words, then the options and
//! positional arguments that command's spec allows. Pure: no store, no filesystem.

use super::CliError;
use super::spec::{self, Command};
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
    /// The last value given for an option (a repeated option: the last one wins).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    pub fn flag(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| *n == name)
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
            Long("state-dir") => {
                let v = utf8(
                    "--state-dir",
                    p.value().map_err(|e| CliError::Usage(e.to_string()))?,
                )?;
                if v.is_empty() {
                    return Err(CliError::usage("--state-dir", "must not be empty"));
                }
                state_dir = Some(PathBuf::from(v));
            }
            Long("json") => json = true,
            Long("help") | Short('h') => help = true,
            Long("version") | Short('V') if command.is_none() => return Ok(Parsed::Version),
            Long(name) => {
                let flag = format!("--{name}");
                let Some(cmd) = command else {
                    return Err(CliError::usage(
                        &flag,
                        "unknown option here; options follow the command (see --help)",
                    ));
                };
                let Some(o) = cmd.option(&flag) else {
                    return Err(CliError::usage(
                        &flag,
                        &format!(
                            "is not an option of '{}' (see '{} --help')",
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
                inv_opts.push((o.name, value));
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
                if let Some(c) = spec::find(&words) {
                    command = Some(c);
                } else if !spec::is_prefix(&words) {
                    if help {
                        break;
                    }
                    let guess = spec::suggest(&words)
                        .map(|g| format!("; did you mean '{g}'?"))
                        .unwrap_or_default();
                    return Err(CliError::Usage(format!(
                        "unknown command '{}'{guess} (see runner-manager --help)",
                        words.join(" ")
                    )));
                }
            }
        }
    }
    let Some(command) = command else {
        if help || !words.is_empty() {
            if !words.is_empty() && !help {
                return Err(CliError::Usage(format!(
                    "'{}' needs a subcommand:\n\n{}",
                    words.join(" "),
                    spec::help_overview(&words)
                )));
            }
            return Ok(Parsed::Help(spec::help_overview(&words)));
        }
        return Err(CliError::Usage(format!(
            "no command given\n\n{}",
            spec::help_overview(&[])
        )));
    };
    if help {
        return Ok(Parsed::Help(spec::help_command(command)));
    }
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
    Ok(Parsed::Run(Invocation {
        command,
        state_dir,
        json,
        options: inv_opts,
        positionals,
    }))
}
