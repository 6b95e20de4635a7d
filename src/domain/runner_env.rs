//! The runner's environment as the owner sets it (`host set env.NAME=VALUE`,
//! `profile set NAME env.NAME=VALUE`, the profile's winning) and the tools its jobs
//! need on `PATH` (`profile set NAME tools=git,docker`). Not for secrets: the values
//! are shown by `host show` and `profile show` and kept in the store as typed.

use super::validate::Invalid;
use std::collections::BTreeMap;

/// The variables one host or profile sets, by name.
pub type EnvMap = BTreeMap<String, String>;

/// The prefix of a `KEY` that sets one variable: `env.NAME=VALUE`.
pub const ENV_PREFIX: &str = "env.";

/// At most this many variables per host or profile, and this long a value.
pub const MAX_VARS: usize = 64;
pub const MAX_VALUE_LEN: usize = 4096;
/// At most this many required tools per profile.
pub const MAX_TOOLS: usize = 32;

/// Prefixes the runner and GitHub own: a job reads them as theirs.
const OWNED_PREFIXES: &[&str] = &["RUNNER_", "ACTIONS_", "GITHUB_"];
/// What the daemon sets itself for each runner (`runner::spawn`: who it runs as and
/// where its home and temporary files are), and `CI`, which the runner sets for
/// every job.
const OWNED_NAMES: &[&str] = &["HOME", "TMPDIR", "USER", "LOGNAME", "CI"];

/// Checks a variable's name: a POSIX name (`[A-Za-z_][A-Za-z0-9_]*`, at most 128
/// characters) that neither the runner nor the daemon owns. `PATH` is allowed, and
/// checked by [`check_value`].
pub fn check_name(arg: &str, name: &str) -> Result<(), Invalid> {
    super::validate::env_var_name(arg, name)?;
    let upper = name.to_ascii_uppercase();
    if let Some(p) = OWNED_PREFIXES.iter().find(|p| upper.starts_with(*p)) {
        return Err(Invalid::new(
            arg,
            format!("{name} is the runner's: names starting {p} are set by the runner or GitHub"),
        ));
    }
    if OWNED_NAMES.contains(&upper.as_str()) {
        return Err(Invalid::new(
            arg,
            format!("{name} is set by runner-manager for each runner"),
        ));
    }
    Ok(())
}

/// Checks a value: printable, at most [`MAX_VALUE_LEN`] bytes; a `PATH` must be
/// absolute directories joined by `:`, with no empty entry (an empty entry means
/// the working directory, where a job's checkout would shadow every tool).
pub fn check_value(arg: &str, name: &str, value: &str) -> Result<(), Invalid> {
    if value.len() > MAX_VALUE_LEN {
        return Err(Invalid::new(
            arg,
            format!("is {} bytes long; at most {MAX_VALUE_LEN}", value.len()),
        ));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(Invalid::new(arg, "holds a control character"));
    }
    if name == "PATH" && value.split(':').any(|d| !d.starts_with('/')) {
        return Err(Invalid::new(
            arg,
            format!(
                "{value:?}: PATH must list absolute directories joined by ':' with no empty entry"
            ),
        ));
    }
    Ok(())
}

/// Applies one `env.NAME=VALUE` (`key` is `env.NAME`) to `env`: an empty value
/// removes the variable. On error `env` is unchanged.
pub fn apply(env: &mut EnvMap, key: &str, value: &str) -> Result<(), Invalid> {
    let name = key.strip_prefix(ENV_PREFIX).unwrap_or(key);
    check_name(key, name)?;
    if value.is_empty() {
        env.remove(name);
        return Ok(());
    }
    check_value(key, name, value)?;
    if !env.contains_key(name) && env.len() >= MAX_VARS {
        return Err(Invalid::new(
            key,
            format!("at most {MAX_VARS} variables; remove one with {ENV_PREFIX}NAME="),
        ));
    }
    env.insert(name.to_string(), value.to_string());
    Ok(())
}

/// The variables a profile's runners get: the host's, then the profile's over them.
pub fn merged(host: &EnvMap, profile: &EnvMap) -> Vec<(String, String)> {
    let mut all = host.clone();
    all.extend(profile.iter().map(|(k, v)| (k.clone(), v.clone())));
    all.into_iter().collect()
}

/// `tools=git,docker,node`: program names, no paths, each at most once; empty clears.
pub fn parse_tools(arg: &str, value: &str) -> Result<Vec<String>, Invalid> {
    let mut tools: Vec<String> = Vec::new();
    for t in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let ok = t.len() <= 64
            && !t.starts_with('.')
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'));
        if !ok {
            return Err(Invalid::new(
                arg,
                format!("{t:?} is not a program name (letters, digits, . _ + -; no '/')"),
            ));
        }
        if !tools.iter().any(|x| x == t) {
            tools.push(t.to_string());
        }
    }
    if tools.len() > MAX_TOOLS {
        return Err(Invalid::new(arg, format!("at most {MAX_TOOLS} tools")));
    }
    Ok(tools)
}

/// `NAME=VALUE,NAME=VALUE` for a one-line display (`-` when empty is the caller's).
pub fn display(env: &EnvMap) -> String {
    env.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_posix_and_not_the_runners_or_ours() {
        for ok in ["FOO", "_x", "npm_config_cache", "PATH", "LANG", "JAVA_HOME"] {
            check_name("env", ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "",
            "1X",
            "A-B",
            "A B",
            "A=B",
            "RUNNER_TOOL_CACHE",
            "runner_x",
            "ACTIONS_RUNNER_INPUT_JITCONFIG",
            "GITHUB_TOKEN",
            "HOME",
            "TMPDIR",
            "USER",
            "LOGNAME",
        ] {
            assert!(check_name("env", bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_path_is_absolute_directories_only() {
        check_value("env.PATH", "PATH", "/opt/node/bin:/usr/bin").unwrap();
        for bad in ["bin:/usr/bin", "/usr/bin::/bin", "/usr/bin:", ""] {
            assert!(
                check_value("env.PATH", "PATH", bad).is_err(),
                "{bad:?} was accepted"
            );
        }
        assert!(check_value("env.X", "X", "a\nb").is_err());
        assert!(check_value("env.X", "X", &"x".repeat(MAX_VALUE_LEN + 1)).is_err());
    }

    #[test]
    fn apply_sets_and_an_empty_value_unsets_and_a_refusal_changes_nothing() {
        let mut env = EnvMap::new();
        apply(&mut env, "env.FOO", "1").unwrap();
        apply(&mut env, "env.BAR", "two words").unwrap();
        assert_eq!(display(&env), "BAR=two words,FOO=1");
        apply(&mut env, "env.FOO", "").unwrap();
        assert_eq!(display(&env), "BAR=two words");
        let before = env.clone();
        let e = apply(&mut env, "env.GITHUB_TOKEN", "x").unwrap_err();
        assert_eq!(e.arg, "env.GITHUB_TOKEN");
        assert_eq!(env, before);
        for i in env.len()..MAX_VARS {
            apply(&mut env, &format!("env.V{i}"), "x").unwrap();
        }
        assert!(apply(&mut env, "env.ONE_TOO_MANY", "x").is_err());
        apply(&mut env, "env.BAR", "replaced").unwrap();
    }

    #[test]
    fn the_profile_wins_over_the_host() {
        let host: EnvMap = [("A", "host"), ("B", "host")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        let profile: EnvMap = [("B", "profile"), ("C", "profile")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        let m = merged(&host, &profile);
        let get = |k: &str| m.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(
            (get("A"), get("B"), get("C")),
            (Some("host"), Some("profile"), Some("profile"))
        );
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn tools_are_program_names() {
        assert_eq!(
            parse_tools("tools", "git, docker,node,git").unwrap(),
            ["git", "docker", "node"]
        );
        assert!(parse_tools("tools", "").unwrap().is_empty());
        for bad in ["/usr/bin/git", "../git", "a b", "git;rm"] {
            assert!(parse_tools("tools", bad).is_err(), "{bad:?} was accepted");
        }
    }
}
