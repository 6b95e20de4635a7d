//! Validation of every value a user can type: names, GitHub owners and repositories,
//! URLs, capacities, timeouts. Each check returns [`Invalid`] naming the argument.

use std::fmt;

/// A user value that was refused: which argument, and why. Shown as `ARG: REASON`;
/// the CLI turns it into exit code 2 with nothing written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub arg: String,
    pub reason: String,
}

impl Invalid {
    pub fn new(arg: impl Into<String>, reason: impl Into<String>) -> Invalid {
        Invalid {
            arg: arg.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.arg, self.reason)
    }
}

impl std::error::Error for Invalid {}

/// Longest profile or target name: short enough for a table column and a runner name.
pub const MAX_NAME_LEN: usize = 40;
pub const MAX_CAPACITY: u32 = 1000;
pub const MAX_IDLE_TIMEOUT_SECS: u64 = 7 * 86_400;
pub const MAX_BOOTSTRAP_TIMEOUT_SECS: u64 = 3_600;
/// GitHub lets a self-hosted job run for at most five days.
pub const MAX_JOB_TIMEOUT_SECS: u64 = 5 * 86_400;
pub const MAX_POLL_INTERVAL_SECS: u64 = 3_600;

/// Profile and target names: 1-40 of `a-z`, `0-9`, `-`; starting with a letter or
/// digit, not ending with `-`.
pub fn name(arg: &str, value: &str) -> Result<String, Invalid> {
    let bad = |reason: &str| Err(Invalid::new(arg, format!("{reason} (got {value:?})")));
    if value.is_empty() {
        return bad("must not be empty");
    }
    if value.len() > MAX_NAME_LEN {
        return Err(Invalid::new(
            arg,
            format!(
                "must be at most {MAX_NAME_LEN} characters (got {})",
                value.len()
            ),
        ));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return bad("may contain only lowercase letters, digits and '-'");
    }
    if value.starts_with('-') || value.ends_with('-') {
        return bad("must not start or end with '-'");
    }
    Ok(value.to_string())
}

/// A GitHub user or organization login: 1-39 alphanumerics or single hyphens, not at
/// either end.
pub fn owner(arg: &str, value: &str) -> Result<String, Invalid> {
    let ok = !value.is_empty()
        && value.len() <= 39
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-')
        && !value.contains("--");
    if ok {
        Ok(value.to_string())
    } else {
        Err(Invalid::new(
            arg,
            format!(
                "{value:?} is not a GitHub owner name (1-39 letters, digits or single '-', not at either end)"
            ),
        ))
    }
}

/// A repository name: 1-100 of letters, digits, `.`, `-`, `_`; not `.` or `..`.
pub fn repo_name(arg: &str, value: &str) -> Result<String, Invalid> {
    let ok = !value.is_empty()
        && value.len() <= 100
        && value != "."
        && value != ".."
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(Invalid::new(
            arg,
            format!(
                "{value:?} is not a GitHub repository name (1-100 letters, digits, '.', '-', '_')"
            ),
        ))
    }
}

/// `OWNER/REPO`.
pub fn repo_full_name(arg: &str, value: &str) -> Result<(String, String), Invalid> {
    let Some((o, r)) = value.split_once('/') else {
        return Err(Invalid::new(
            arg,
            format!("expected OWNER/REPO (got {value:?})"),
        ));
    };
    Ok((owner(arg, o)?, repo_name(arg, r)?))
}

/// An API base URL: `https://...` (or `http://` on loopback only, for the simulated
/// GitHub), no credentials, query or fragment. Returned without a trailing `/`.
pub fn api_url(arg: &str, value: &str) -> Result<String, Invalid> {
    let v = value.trim_end_matches('/');
    let (scheme, rest) = if let Some(r) = v.strip_prefix("https://") {
        ("https", r)
    } else if let Some(r) = v.strip_prefix("http://") {
        ("http", r)
    } else {
        return Err(Invalid::new(
            arg,
            format!("must start with https:// (got {value:?})"),
        ));
    };
    let host_port = rest.split('/').next().unwrap_or("");
    if host_port.is_empty() {
        return Err(Invalid::new(arg, format!("has no host (got {value:?})")));
    }
    if rest.contains('@') {
        return Err(Invalid::new(
            arg,
            "must not carry credentials; use --token-file or --token-env",
        ));
    }
    if rest.contains('?')
        || rest.contains('#')
        || rest.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Invalid::new(
            arg,
            format!("must be a plain base URL without query, fragment or spaces (got {value:?})"),
        ));
    }
    if scheme == "http" && !is_loopback_host(host_port) {
        return Err(Invalid::new(
            arg,
            "plain http:// is allowed only on loopback; use https://",
        ));
    }
    if v.len() > 2048 {
        return Err(Invalid::new(arg, "is longer than 2048 characters"));
    }
    Ok(v.to_string())
}

/// True for `localhost`, `127.x.y.z` and `[::1]`, with or without a port.
pub fn is_loopback_host(host_port: &str) -> bool {
    let host = if let Some(rest) = host_port.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A whole number in `lo..=hi`.
pub fn number_in(arg: &str, value: &str, lo: u64, hi: u64) -> Result<u64, Invalid> {
    let n: u64 = value.trim().parse().map_err(|_| {
        Invalid::new(
            arg,
            format!("expected a whole number from {lo} to {hi} (got {value:?})"),
        )
    })?;
    if n < lo || n > hi {
        return Err(Invalid::new(
            arg,
            format!("must be from {lo} to {hi} (got {n})"),
        ));
    }
    Ok(n)
}

/// `true`/`false` (also `yes`/`no`, `1`/`0`, `on`/`off`).
pub fn boolean(arg: &str, value: &str) -> Result<bool, Invalid> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" => Ok(true),
        "false" | "no" | "0" | "off" => Ok(false),
        _ => Err(Invalid::new(
            arg,
            format!("expected true or false (got {value:?})"),
        )),
    }
}

/// A filesystem path given by the user: non-empty, absolute, no NUL or newline.
pub fn path(arg: &str, value: &str) -> Result<std::path::PathBuf, Invalid> {
    if value.is_empty() {
        return Err(Invalid::new(arg, "must not be empty"));
    }
    if value.contains('\0') || value.contains('\n') {
        return Err(Invalid::new(arg, "must not contain NUL or newline"));
    }
    if !value.starts_with('/') {
        return Err(Invalid::new(
            arg,
            format!("must be an absolute path (got {value:?})"),
        ));
    }
    if value.len() > 4096 {
        return Err(Invalid::new(arg, "is longer than 4096 characters"));
    }
    Ok(std::path::PathBuf::from(value))
}

/// An environment variable name: `[A-Za-z_][A-Za-z0-9_]*`, at most 128 characters.
pub fn env_var_name(arg: &str, value: &str) -> Result<String, Invalid> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && !value.starts_with(|c: char| c.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(value.to_string())
    } else {
        Err(Invalid::new(
            arg,
            format!("{value:?} is not an environment variable name"),
        ))
    }
}

/// A `KEY=VALUE` argument of `set` commands.
pub fn key_value(arg: &str) -> Result<(&str, &str), Invalid> {
    match arg.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k, v)),
        _ => Err(Invalid::new(arg, "expected KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(name("NAME", "linux-x64").unwrap(), "linux-x64");
        assert!(name("NAME", "a").is_ok());
        assert!(name("NAME", "9lives").is_ok());
        for bad in ["", "Linux", "a_b", "-a", "a-", "a b", "é", &"a".repeat(41)] {
            let e = name("NAME", bad).unwrap_err();
            assert_eq!(e.arg, "NAME", "{bad}");
        }
        assert!(name("NAME", &"a".repeat(40)).is_ok());
    }

    #[test]
    fn owners_and_repos() {
        assert_eq!(
            repo_full_name("--repo", "octo-org/hello.world_2").unwrap(),
            ("octo-org".into(), "hello.world_2".into())
        );
        for bad in [
            "octo",
            "/r",
            "o/",
            "-o/r",
            "o-/r",
            "o--o/r",
            "o/..",
            "o/.",
            "o/r/x",
            "o/r s",
            &format!("{}/r", "a".repeat(40)),
        ] {
            assert!(repo_full_name("--repo", bad).is_err(), "{bad}");
        }
        assert!(owner("--org", &"a".repeat(39)).is_ok());
        assert!(repo_name("--repo", &"r".repeat(101)).is_err());
    }

    #[test]
    fn urls() {
        assert_eq!(
            api_url("api_url", "https://ghe.example.com/api/v3/").unwrap(),
            "https://ghe.example.com/api/v3"
        );
        assert_eq!(
            api_url("api_url", "http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert!(api_url("api_url", "http://localhost:1").is_ok());
        assert!(api_url("api_url", "http://[::1]:1").is_ok());
        for bad in [
            "",
            "ftp://x",
            "http://example.com",
            "https://",
            "https://u:p@x.com",
            "https://x.com/?a=1",
            "https://x .com",
            "api.github.com",
        ] {
            assert!(api_url("api_url", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_and_bools() {
        assert_eq!(number_in("max", "8", 1, 10).unwrap(), 8);
        for bad in ["", "-1", "0", "11", "1.5", "x", "99999999999999999999999"] {
            assert!(number_in("max", bad, 1, 10).is_err(), "{bad}");
        }
        assert!(boolean("x", "YES").unwrap());
        assert!(!boolean("x", "off").unwrap());
        assert!(boolean("x", "maybe").is_err());
    }

    #[test]
    fn paths_env_and_kv() {
        assert!(path("--token-file", "/etc/t").is_ok());
        for bad in ["", "rel/t", "/a\nb", "/a\0b"] {
            assert!(path("--token-file", bad).is_err(), "{bad:?}");
        }
        assert!(env_var_name("--token-env", "GH_TOKEN").is_ok());
        for bad in ["", "1A", "A-B", "A B"] {
            assert!(env_var_name("--token-env", bad).is_err());
        }
        assert_eq!(key_value("max=3").unwrap(), ("max", "3"));
        assert_eq!(key_value("runner_group=").unwrap(), ("runner_group", ""));
        assert!(key_value("max").is_err());
        assert!(key_value("=3").is_err());
    }

    #[test]
    fn invalid_names_the_argument() {
        let e = number_in("max", "x", 1, 2).unwrap_err();
        assert!(e.to_string().starts_with("invalid max: "), "{e}");
    }
}
