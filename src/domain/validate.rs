//! Validation of every value a user can type: names, GitHub owners and repositories,
//! URLs, capacities, timeouts. Each check returns [`Invalid`] naming the argument.

use crate::timefmt::duration;
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
        let lower = value.to_ascii_lowercase();
        if lower != value && name(arg, &lower).is_ok() {
            return Err(Invalid::new(
                arg,
                format!(
                    "may contain only lowercase letters, digits and '-' (got {value:?}; \
                     {lower:?} would do)"
                ),
            ));
        }
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
            format!(
                "must start with https:// (or http:// on loopback, for the simulated GitHub) \
                 (got {value:?})"
            ),
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

/// A whole number already typed (not text), from `lo` to `hi`, refused in the words
/// [`number_in`] uses for a number out of range (a negative one too).
pub fn whole_in(arg: &str, n: i64, lo: u64, hi: u64) -> Result<u64, Invalid> {
    match u64::try_from(n) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(Invalid::new(
            arg,
            format!("must be from {lo} to {hi} (got {n})"),
        )),
    }
}

/// A duration in whole seconds from `lo` to `hi`: bare seconds (`300`), or numbers
/// each followed by a unit `s`, `m`, `h` or `d` (`30s`, `5m`, `1h30m`, `2d`), so what
/// `profile show` prints (`300s`) is accepted back.
pub fn seconds_in(arg: &str, value: &str, lo: u64, hi: u64) -> Result<u64, Invalid> {
    let bad = || {
        Invalid::new(
            arg,
            format!(
                "expected a duration from {} to {}: seconds, or a number with a unit s, m, h or d such as 30s, 5m, 1h (got {value:?})",
                duration(lo),
                duration(hi)
            ),
        )
    };
    let v = value.trim();
    let n = if let Ok(n) = v.parse::<u64>() {
        n
    } else {
        let mut total: u64 = 0;
        let mut digits = String::new();
        for c in v.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            let unit: u64 = match c {
                's' => 1,
                'm' => 60,
                'h' => 3_600,
                'd' => 86_400,
                _ => return Err(bad()),
            };
            let n: u64 = digits.parse().map_err(|_| bad())?;
            digits.clear();
            total = n
                .checked_mul(unit)
                .and_then(|x| total.checked_add(x))
                .ok_or_else(bad)?;
        }
        if !digits.is_empty() || v.is_empty() {
            return Err(bad());
        }
        total
    };
    if n < lo || n > hi {
        return Err(Invalid::new(
            arg,
            format!(
                "must be from {} to {} (got {})",
                duration(lo),
                duration(hi),
                duration(n)
            ),
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

/// An environment variable name: a POSIX name, `[A-Za-z_][A-Za-z0-9_]*`, at most 128
/// characters. The one check of a variable's name (`--token-env`, a runner's `env`).
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
            format!(
                "{value:?} is not an environment variable name (letters, digits and _, not first a digit)"
            ),
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

/// Whether `v` reads as a runner version: 2 to 4 dot-separated numbers (`2.330.0`).
pub fn is_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    v.len() <= 32
        && (2..=4).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `runner_version=`: `latest` (or empty) follows the newest release; a version pins it.
pub fn runner_version(key: &str, value: &str) -> Result<Option<String>, Invalid> {
    match value {
        "" | "latest" => Ok(None),
        v if is_version(v) => Ok(Some(v.to_string())),
        v => Err(Invalid::new(
            key,
            format!("expected latest or a runner version like 2.330.0 (got {v:?})"),
        )),
    }
}

/// Why plain text needs an opt-in: said by `host set`, `coordinator serve` and the
/// warnings both log at every start.
pub const PLAIN_TEXT_RISK: &str = "the host's token and every launch cross the network \
     unencrypted, so anyone on the path can read the token and direct the host";

/// Whether `url` is plain `ws://` to somewhere other than loopback (`localhost`,
/// 127.0.0.0/8, `[::1]`; a private network is off loopback): allowed only with an
/// explicit opt-in (`coordinator_insecure=true`), and warned about at every start.
pub fn is_plain_off_loopback(url: &str) -> bool {
    let Some(rest) = url
        .get(..5)
        .filter(|s| s.eq_ignore_ascii_case("ws://"))
        .map(|_| &url[5..])
    else {
        return false;
    };
    let host_port = rest.split(['/', '?', '#']).next().unwrap_or("");
    !is_loopback_host(host_port)
}

/// The known word a mistyped one most likely meant: the nearest in spelling (at most
/// one edit per three characters typed), or one it begins when three or more were
/// typed (`prof` → `profile`). One rule for commands, options and setting keys.
pub fn nearest<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (typed.chars().count() / 3).max(1);
    known
        .into_iter()
        .map(|k| (edit_distance(typed, k), k))
        .filter(|(d, k)| *d <= limit || (typed.len() >= 3 && k.starts_with(typed)))
        .min()
        .map(|(_, k)| k)
}

/// An unknown key's reason: what it most likely meant, then every key known
/// (`env.NAME` stands for the variables, which are not guessed at).
pub fn unknown_key(what: &str, typed: &str, known: &[&str]) -> String {
    let guess = nearest(
        typed,
        known.iter().copied().filter(|k| !k.ends_with(".NAME")),
    )
    .map(|k| format!("; did you mean '{k}'?"))
    .unwrap_or_default();
    format!(
        "unknown {what} setting{guess} (known: {})",
        known.join(", ")
    )
}

/// Edit distance by characters, counting a swap of two neighbours as one edit
/// (optimal string alignment): `dmeo` is one edit from `demo`, as a slip of the
/// fingers is.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two back (for the swap), the last, and this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        std::mem::swap(&mut before, &mut last);
        std::mem::swap(&mut last, &mut row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_bare_seconds_and_units() {
        for (v, n) in [
            ("300", 300),
            ("300s", 300),
            ("5m", 300),
            ("1h", 3_600),
            ("1h30m", 5_400),
            ("2d", 172_800),
            (" 30s ", 30),
        ] {
            assert_eq!(seconds_in("idle_timeout", v, 1, 7 * 86_400), Ok(n), "{v}");
        }
        for bad in [
            "",
            "s",
            "5x",
            "5 m",
            "-5",
            "1.5h",
            "h5",
            "99999999999999999999d",
        ] {
            let e = seconds_in("idle_timeout", bad, 1, 3_600).unwrap_err();
            assert_eq!(e.arg, "idle_timeout");
            assert!(e.reason.contains("unit s, m, h or d"), "{bad}: {e}");
        }
        let e = seconds_in("idle_timeout", "2h", 1, 3_600).unwrap_err();
        assert_eq!(e.reason, "must be from 1s to 1h (got 2h)");
        assert_eq!(duration(90), "90s");
        assert_eq!(duration(7 * 86_400), "7d");
    }

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
        // A name that only its capitals spoil is named in lowercase.
        let e = name("NAME", "hostA").unwrap_err().to_string();
        assert!(e.contains("\"hosta\" would do"), "{e}");
        let e = name("NAME", "host_A").unwrap_err().to_string();
        assert!(!e.contains("would do"), "{e}");
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
        // A scheme left out says both it takes, since http:// on loopback is one.
        let e = api_url("--api-url", "127.0.0.1:8080")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("https://") && e.contains("http:// on loopback"),
            "{e}"
        );
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
